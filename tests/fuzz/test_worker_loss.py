"""A worker killed from outside (issue 22): a SIGKILL that does not recur when its case is run again is a worker loss,
counted but not a finding; one that recurs, or a worker past the memory cap, is a resource finding (a real blow-up),
which replays."""
import os
import pytest
from fuzz.campaign import CampaignConfig, run_campaign

SETUP = "tests.fuzz.planted:killed_and_hogging_workers"

@pytest.fixture(scope="module")
def lost(tmp_path_factory):
  d = tmp_path_factory.mktemp("lost")
  marks = d / "marks"
  marks.mkdir()
  cfg = CampaignConfig(out=str(d / "camp"), minutes=10, backends=("python",), jobs=1, setup=SETUP, progress=False,
                       spec=1, batch=4, max_cases=16, reduce=False, env={"FUZZ_TEST_MARKER_DIR": str(marks)},
                       memory_mb=1200, levels=("kernel",))
  # the campaign runs from a process resident past the cap, as a long pytest run is: a worker it starts is not taken for
  # one near the cap (Linux counts the parent's resident memory at the exec in a child's ru_maxrss)
  hog = b"x" * (1300 << 20)
  try: return cfg, run_campaign(cfg)
  finally: del hog

def test_a_kill_that_does_not_recur_is_a_worker_loss_not_a_finding(lost):
  cfg, summ = lost
  assert summ.losses == 1, str(summ)
  assert not any(f.signature.kind == "crash:SIGKILL" for f in summ.findings.values()), str(summ)

def test_a_kill_that_recurs_is_a_resource_finding(lost):
  cfg, summ = lost
  kills = [f for f in summ.findings.values() if f.signature.kind == "resource:SIGKILL"]
  assert kills and kills[0].signature.stage == "prepare", str(summ)

def test_a_worker_past_the_memory_cap_is_a_resource_finding(lost):
  cfg, summ = lost
  hogs = [f for f in summ.findings.values() if f.signature.kind == "resource:memory"]
  assert hogs and "1200 MB" in hogs[0].message, str(summ)

def test_a_resource_finding_replays_and_a_loss_is_in_the_record(lost):
  import json
  from fuzz.campaign import replay
  cfg, summ = lost
  with open(os.path.join(cfg.out, "campaign.json")) as f: assert json.load(f)["losses"] == 1
  kill = next(f for f in summ.findings.values() if f.signature.kind == "resource:SIGKILL")
  env = {"FUZZ_TEST_MARKER_DIR": cfg.env["FUZZ_TEST_MARKER_DIR"]}
  os.environ.update(env)
  try: res = replay(os.path.join(cfg.out, "findings", f"{kill.signature.id}.json"), setup=SETUP, timeout=120)
  finally:
    for k in env: del os.environ[k]
  assert res.reproduced, str(res)
