"""Campaigns end to end (fuzz/campaign/run.py): a planted bug is found, reduced to a few nodes and deduplicated; a worker
that segfaults is a finding and the campaign finishes; a reproducer replays (exit status) without running code from
the file; the report is written with every text escaped."""
import json, os, subprocess, sys
import pytest
from fuzz.campaign.run import CampaignConfig, run_campaign, repro
from fuzz.campaign.findings import read_reproducer, ReproducerError
from fuzz.campaign.report import write_report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _campaign(tmp_path, setup, backends, seconds, **kw):
  cfg = CampaignConfig(out=str(tmp_path / "camp"), minutes=seconds / 60, backends=backends, jobs=1, setup=setup,
                       progress=False, spec=1, **{"batch": 8, "reduce_checks": 150, "reduce_grace": 60,
                                                  "levels": ("kernel",), **kw})
  return cfg, run_campaign(cfg)

# NOTE: the budget is a number of cases, not seconds: with one worker the input stream (campaign seed 0), the order of
# results and the reductions are the same on every run, so what is found first does not depend on the machine's speed
# (600 s is only a ceiling). 64 cases take ~5 s on the python backend.
PLANTED_CASES = 64

@pytest.fixture(scope="module")
def planted(tmp_path_factory):
  return _campaign(tmp_path_factory.mktemp("planted"), "tests.fuzz.planted:range_bound_off_by_one", ("python",), 600,
                   max_cases=PLANTED_CASES)

def test_campaign_finds_reduces_and_dedupes_a_planted_off_by_one(planted):
  cfg, summ = planted
  assert summ.cases == PLANTED_CASES and summ.findings, str(summ)
  # the bug shows on most kernels: the most frequent signature was seen more than once and recorded once
  top = max(summ.findings.values(), key=lambda f: f.count)
  assert top.count >= 2, str(summ)
  files = os.listdir(os.path.join(cfg.out, "findings"))
  assert len(files) == len(summ.findings) and f"{top.signature.id}.json" in files
  f = read_reproducer(os.path.join(cfg.out, "findings", f"{top.signature.id}.json"))
  # NOTE: 16 nodes is the smallest graph of the out-of-bounds signature: a masked load at r+1 over range(n+1), whose
  # mask the planted bound folds away (range, 3 consts, CMPLT, ADD, Invalid, WHERE, 2 buffers, 2 INDEX, LOAD, STORE,
  # END, SINK); a mismatch signature reduces to fewer
  assert f.reduced and f.size <= 16 < f.original_size, (f.size, f.original_size, f.state)
  assert f.setup == "tests.fuzz.planted:range_bound_off_by_one" and f.count == top.count

def test_reproducer_replays_with_and_without_the_planted_bug(planted):
  cfg, summ = planted
  top = max(summ.findings.values(), key=lambda f: f.count)
  path = os.path.join(cfg.out, "findings", f"{top.signature.id}.json")
  assert repro(path, setup="tests.fuzz.planted:range_bound_off_by_one").reproduced
  # the exit status of `python -m fuzz repro`: 0 when it does not reproduce (here: the compiler without the patch)
  proc = subprocess.run([sys.executable, "-m", "fuzz", "repro", path], cwd=REPO, capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": REPO})
  assert proc.returncode == 0 and "not reproduced" in proc.stdout, proc.stdout + proc.stderr

def test_a_segfault_in_compiled_code_is_a_finding_and_the_campaign_finishes(tmp_path):
  cfg, summ = _campaign(tmp_path, "tests.fuzz.planted:wild_store", ("cpu",), 12)
  crashes = [f for f in summ.findings.values() if f.signature.kind == "crash:SIGSEGV"]
  assert crashes and summ.crashes >= 1, str(summ)
  f = crashes[0]
  assert f.signature.backend == "cpu" and f.signature.stage == "run"
  # every candidate crashes too, so the reducer takes it down to a store of a constant
  assert f.reduced and f.size <= 6, f.state
  meta = json.load(open(os.path.join(cfg.out, "campaign.json")))
  assert meta["final"] and meta["restarts"] >= 1

def test_report_escapes_everything(planted, tmp_path):
  cfg, summ = planted
  d = tmp_path / "rep"
  os.makedirs(d / "findings")
  f = read_reproducer(os.path.join(cfg.out, "findings", f"{next(iter(summ.findings))}.json"))
  f.message = "<script>alert(1)</script> & </pre>"
  from fuzz.campaign.findings import write_finding
  write_finding(str(d / "findings"), f)
  for name in ("campaign.json", "stats.json"):
    with open(os.path.join(cfg.out, name)) as src, open(d / name, "w") as dst: dst.write(src.read())
  html, md = write_report(str(d))
  text = open(html).read()
  assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
  assert "rules matched" in open(md).read() and "<svg" in text

def test_a_reproducer_never_runs_code(tmp_path):
  good = {"format": "tinygrad-fuzz-finding/1", "signature": {"level": "kernel", "stage": "compare", "kind": "x",
          "site": "", "backend": "python"}, "state": {"graph": "__import__('os').system('touch PWNED')\nast = 1"}}
  p = tmp_path / "f.json"
  p.write_text(json.dumps(good))
  from fuzz.campaign.levels import KernelLevel
  from spec.roundtrip import PyrenderSyntaxError
  with pytest.raises(PyrenderSyntaxError): KernelLevel().from_state(read_reproducer(str(p)).state)
  assert not os.path.exists("PWNED")
  p.write_text(json.dumps({"format": "something else"}))
  with pytest.raises(ReproducerError, match="not a fuzz finding"): read_reproducer(str(p))

def test_report_rate_averages_bursty_batches():
  from fuzz.campaign.report import _rates
  # a worker reports 16 cases every 20 s (samples every 5 s): neighbouring samples read 0 or 3.2/s, the rate is 0.8/s
  timeline = [{"t": 5.0 * i, "cases": 16 * (i // 4)} for i in range(41)]
  assert {r for _, r in _rates(timeline)} == {0.0, 3.2}
  assert all(abs(r - 0.8) < 1e-9 for _, r in _rates(timeline[::4]))
  assert all(abs(r - 0.8) < 1e-9 for _, r in _rates(timeline, 4))

def test_compare_keeps_each_modes_findings_as_reproducers(tmp_path):
  # `python -m fuzz compare` ran its modes in a temporary directory and dropped what they found; now each mode's failing
  # inputs become reduced reproducers under the directory it names (default: a fresh one); 12 s per mode: at 6 s a mode
  # on a loaded machine sometimes found nothing
  setup = "tests.fuzz.planted:range_bound_off_by_one"
  env = {**os.environ, "PYTHONPATH": REPO, "TMPDIR": str(tmp_path)}
  proc = subprocess.run([sys.executable, "-m", "fuzz", "compare", "--levels", "symbolic", "--seconds", "12", "--modes",
                         "unguided,guided", "--setup", setup], cwd=REPO, capture_output=True, text=True, env=env,
                        timeout=600)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  out = proc.stdout.splitlines()[0].rsplit(": ", 1)[1]
  assert out.startswith(str(tmp_path)) and os.path.isdir(out), proc.stdout
  for mode in ("unguided", "guided"):
    fdir = os.path.join(out, "symbolic", mode, "findings")
    files = sorted(os.listdir(fdir))
    assert files, proc.stdout
    for name in files:
      path = os.path.join(fdir, name)
      f = read_reproducer(path)
      assert f.setup == setup and f.reduced and f.size <= f.original_size and f.signature.level == "symbolic"
      assert path in proc.stdout, proc.stdout
    assert repro(os.path.join(fdir, files[0]), setup=setup).reproduced
  # a directory that already holds a comparison is not mixed with a new one
  from fuzz.measure.guidance import compare_rules
  with pytest.raises(FileExistsError, match="fresh --out"): compare_rules("symbolic", 1, out=out)

def test_a_job_sent_as_a_worker_retires_is_run_by_its_successor(tmp_path):
  # a worker retires after max_jobs (it answers, then says bye); a job the parent sent between the answer and reading the
  # bye was lost with the old process: its cases were never counted and a reduction waiting on it stalled to the deadline
  cfg, summ = _campaign(tmp_path, "tests.fuzz.planted:range_bound_off_by_one", ("python",), 120, max_cases=24,
                        max_jobs_per_worker=1, reduce_checks=20)
  assert summ.cases == 24 and summ.restarts >= 3 and summ.findings, str(summ)
  assert all(f.reduced for f in summ.findings.values()) and summ.seconds < 110, str(summ)

def test_a_campaign_directs_fresh_inputs_at_rules_it_has_not_matched(tmp_path):
  # after the first batch the parent knows which rules were tried and never matched: some fresh inputs of the next
  # batches are built by a generator directed at one of them (in the worker, from the rule's name); none fails to build
  cfg, summ = _campaign(tmp_path, None, ("python",), 300, max_cases=48, reduce=False)
  assert summ.cases == 48 and summ.directed > 0 and not summ.findings, str(summ)
  with open(os.path.join(cfg.out, "campaign.json")) as f: assert json.load(f)["directed"] == summ.directed
  cfg, summ = _campaign(tmp_path / "plain", None, ("python",), 300, max_cases=48, reduce=False, directed=False)
  assert summ.cases == 48 and summ.directed == 0 and not summ.findings, str(summ)

# ---- the tensor level's sharded programs (inputs on two devices; fuzz/gen/tensor_programs.py) ----

def _sharded_corpus(out: str) -> None:
  """The campaign's tensor corpus seeded with four sharded programs (a split input each), so that its inputs, all
  mutated from them, are mostly sharded programs: the level draws one in four sharded on its own."""
  from tests.fuzz.test_tensor_programs import _level_cases, _split
  os.makedirs(d := os.path.join(out, "corpus", "tensor"))
  for i, c in enumerate([c for c in _level_cases(40) if _split(c.program)][:4]):
    with open(os.path.join(d, f"seed{i}.bin"), "wb") as f: f.write(c.data)

def test_a_tensor_campaign_over_sharded_programs_runs_clean(tmp_path):
  _sharded_corpus(str(tmp_path / "camp"))
  cfg, summ = _campaign(tmp_path, None, ("cpu",), 600, levels=("tensor",), max_cases=16, mutate=1.0, batch=4)
  assert summ.cases == 16 and not summ.findings, str(summ)

def test_a_tensor_campaign_finds_a_planted_allreduce_bug(tmp_path):
  """The multi-device pass's allreduce leaving one device's partial out: found on a sharded program, reduced, and its
  reproducer replays with the bug and not without it."""
  setup = "tests.fuzz.planted:allreduce_drops_a_shard"
  _sharded_corpus(str(tmp_path / "camp"))
  cfg, summ = _campaign(tmp_path, setup, ("cpu",), 600, levels=("tensor",), max_cases=16, mutate=1.0, batch=4,
                        reduce_checks=40)
  assert summ.findings, str(summ)
  f = next(iter(summ.findings.values()))
  path = os.path.join(cfg.out, "findings", f"{f.signature.id}.json")
  rep = read_reproducer(path)
  assert f.signature.level == "tensor" and ".shard(DEVICE, " in rep.state["program"]
  assert repro(path, setup=setup).reproduced and not repro(path).reproduced
