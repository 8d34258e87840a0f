"""`python -m fuzz` as a newcomer meets it (issue 23): options checked before any worker starts, defaults and
descriptions in --help, a summary that names each finding's file and the report command, the counterexample in
report.md, and a default campaign that covers every level, each an equal share of the workers' time."""
import os
import pytest
from fuzz.__main__ import main
from fuzz.campaign.run import Campaign, CampaignConfig, CampaignSummary, LEVEL_NAMES, JOB_SECONDS, run_campaign
from fuzz.campaign.findings import Finding, Signature

def _cli(args, capsys):
  try: rc = main(args)
  except SystemExit as e: rc = e.code
  out = capsys.readouterr()
  return rc, out.out, out.err

@pytest.mark.parametrize("args,says", [
  (["--backends", "cpu,warp"], "unknown backends 'warp'; backends are cpu, llvm, python"),
  (["--backends", ","], "no backends given"),
  (["--levels", "kernel,graph"], "unknown levels 'graph'; levels are symbolic, kernel, tensor"),
  (["--setup", "no_such_module_xyz:f"], "cannot import 'no_such_module_xyz'"),
  (["--setup", "tests.fuzz.planted:no_such_function"], "has no function 'no_such_function'"),
  (["--setup", "tests.fuzz.planted"], "is not module:function"),
  (["--mutate", "1.5"], "1.5 is outside 0.0..1.0"),
  (["--jobs", "0"], "0 is outside 1.."),
  (["--minutes", "soon"], "'soon' is not a number"),
  (["--spec", "7"], "invalid choice"),
])
def test_run_refuses_bad_options_before_starting_a_worker(tmp_path, capsys, args, says):
  out = tmp_path / "camp"
  rc, _, err = _cli(["run", "--out", str(out), *args], capsys)
  assert rc == 2 and says in err, err
  assert not out.exists()

def test_repro_refuses_an_unknown_backend(tmp_path, capsys):
  rc, _, err = _cli(["repro", str(tmp_path / "f.json"), "--backends", "gpu"], capsys)
  assert rc == 2 and "unknown backends 'gpu'" in err, err

@pytest.mark.parametrize("sub", ["run", "repro", "report", "symbolic", "compare", "mutants", "ledger"])
def test_every_subcommand_has_a_description_and_shows_its_defaults(capsys, sub):
  rc, out, _ = _cli([sub, "--help"], capsys)
  head = out.split("options:")[0]
  assert rc == 0 and len(head.split("\n\n", 1)[-1].split()) >= 12, out
  if sub == "run":
    text = " ".join(out.split())
    for default in ("(default: 1.0)", "(default: symbolic,kernel,tensor)", "(default: cpu,llvm,python,nv,amd)",
                    "(default: fuzz_out)", "(default: 16)", "(default: 0.5)"):
      assert default in text, default

def test_the_summary_names_each_findings_file_and_the_report_command():
  sig = Signature("kernel", "compare", "value mismatch", "", "cpu")
  f = Finding(sig, {}, {}, "m", ["cpu"], 5, 40, 3)
  s = CampaignSummary(cases=10, seconds=5.0, findings={sig.id: f}, rules_matched=67, rules_tried=185, out="/tmp/camp",
                      levels={"symbolic": (6, 2.0), "kernel": (4, 2.5)})
  text = str(s)
  assert f"/tmp/camp/findings/{sig.id}.json" in text and "python -m fuzz report /tmp/camp" in text, text
  assert "rewrite rules matched 67 of 185 tried" in text and "symbolic 6 cases" in text, text

def test_report_md_keeps_the_counterexample(tmp_path):
  from fuzz.campaign.report import render_markdown
  sig = Signature("kernel", "compare", "value mismatch", "", "cpu")
  msg = "cpu: buffer 0: 3 of 8 elements differ\n  first at [5]: got 1.5, want 2.25 (bound 0)\n  inputs: a=```x```"
  md = render_markdown(str(tmp_path), {}, [], {sig.id: Finding(sig, {"graph": "ast = c0"}, {}, msg, ["cpu"])})
  assert "first at [5]: got 1.5, want 2.25" in md and "inputs: a=```x```" in md
  # the message's own backticks do not close its code block
  assert "````\ncpu: buffer 0" in md

class _Pool:
  def __init__(self, jobs): self.workers = [type("W", (), {"job": j})() for j in jobs]

def test_the_next_job_goes_to_the_level_with_the_least_worker_time(tmp_path):
  camp = Campaign(CampaignConfig(out=str(tmp_path / "c"), progress=False))
  assert tuple(camp.runs) == LEVEL_NAMES
  camp.runs["symbolic"].seconds, camp.runs["kernel"].seconds, camp.runs["tensor"].seconds = 30.0, 10.0, 12.0
  camp.pool = _Pool([None])
  assert camp.pick_level().name == "kernel"
  # a job in flight counts for its level until now
  import time
  camp.pool = _Pool([{"level": "kernel", "_t0": time.monotonic() - 5.0}])
  assert camp.pick_level().name == "tensor"
  # a job aims at JOB_SECONDS: a level whose cases take 2 s gets JOB_SECONDS / 2 of them, a cheap one --batch
  run = camp.runs["tensor"]
  run.cases, run.seconds = 10, 20.0
  assert camp.batch_size(run) == round(JOB_SECONDS / 2)
  run.cases, run.seconds = 1000, 1.0
  assert camp.batch_size(run) == camp.cfg.batch

def test_a_default_campaign_checks_every_level(tmp_path):
  cfg = CampaignConfig(out=str(tmp_path / "c"), minutes=5, backends=("python",), jobs=1, progress=False, spec=1,
                       max_cases=12, reduce=False)
  summ = run_campaign(cfg)
  assert set(summ.levels) == set(LEVEL_NAMES) and all(c >= 2 for c, _ in summ.levels.values()), str(summ)
  assert sorted(os.listdir(os.path.join(cfg.out, "corpus"))) == sorted(LEVEL_NAMES)
