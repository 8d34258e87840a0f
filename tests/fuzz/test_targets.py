"""The atheris targets (fuzz/targets/): libFuzzer's flags and corpus directories, rule-hit stats, a failing case as a
libFuzzer crash artifact, the mutant check, guided vs unguided side by side (fuzz/measure/guidance.py), and the ClusterFuzzLite
configuration and nightly workflow that run them."""
import glob, json, os, random, re, subprocess, sys
import pytest
from fuzz.measure.guidance import compare_rules, format_compare

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = os.path.join(REPO, "fuzz", "targets")

def _target(level, *args, cwd=None, timeout=240):
  return subprocess.run([sys.executable, os.path.join(TARGETS, f"{level}_target.py"), *args], cwd=cwd or REPO,
                        capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": REPO})

def _stats(prefix):
  files = sorted(glob.glob(f"{prefix}.*"), key=os.path.getmtime)
  assert files, f"no stats file {prefix}.*"
  with open(files[-1]) as f: return json.load(f)

def test_symbolic_target_takes_libfuzzer_flags_and_grows_its_corpus(tmp_path):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  res = _target("symbolic", "-runs=60", "-seed=1", f"--stats={tmp_path}/st", str(corpus))
  assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
  assert "Done 60 runs" in res.stderr and len(os.listdir(corpus)) > 1
  st = _stats(f"{tmp_path}/st")
  # NOTE: the rule counters are fed by TRACK_MATCH_STATS: simplify's rules fire on random index expressions
  assert st["mode"] == "atheris" and st["inputs"] == 60 and any("symbolic.py" in r for r in st["rules"])

def test_a_failing_case_is_a_crash_artifact_that_replays(tmp_path):
  # the planted off-by-one: a case that fails with it and passes without it is raised to libFuzzer, which writes it
  # NOTE: a seed corpus of random inputs, as `python -m fuzz compare` gives the guided runs
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  rng = random.Random(0)
  for i in range(16): (corpus / f"seed{i}").write_bytes(rng.randbytes(256))
  res = _target("symbolic", "--mutant=boundary_off_by_one", "--no-instrument", "-seed=1", "-runs=20000",
                "-max_total_time=120",
                f"-artifact_prefix={tmp_path}/", f"--stats={tmp_path}/st", str(corpus))
  crashes = glob.glob(f"{tmp_path}/crash-*")
  assert res.returncode != 0 and crashes, res.stderr[-3000:]
  assert "FuzzFinding" in res.stdout + res.stderr and _stats(f"{tmp_path}/st")["kills"] >= 1
  # replaying the artifact (libFuzzer: a file argument runs that input once) fails with the mutant, passes without
  again = _target("symbolic", "--mutant=boundary_off_by_one", crashes[0])
  assert again.returncode != 0 and "FuzzFinding" in again.stdout + again.stderr
  clean = _target("symbolic", crashes[0])
  assert clean.returncode == 0, clean.stderr[-3000:]

@pytest.mark.parametrize("mutant", ["boundary_off_by_one", "negative_sign_slip", "wrong_gate"])
def test_unguided_symbolic_level_kills_a_mutant_in_a_bounded_budget(tmp_path, mutant):
  res = _target("symbolic", "--unguided", f"--mutant={mutant}", "--stop-at-kill", "-runs=3000", "-seed=0",
                f"--stats={tmp_path}/st")
  assert res.returncode == 0, res.stderr[-3000:]
  st = _stats(f"{tmp_path}/st")
  assert st["mutant"] == mutant and st["kills"] == 1 and st["background"] == 0 and st["inputs"] < 3000, st

def test_guided_and_unguided_side_by_side_both_hit_rules():
  r = compare_rules("symbolic", 4)
  assert set(r["modes"]) == {"guided", "unguided"}
  for m in r["modes"].values():
    assert m["inputs"] > 0 and m["rules"] > 0 and m["rules_at"] <= m["rules"]
    assert 0 < m["last_rule_at"][1] <= m["inputs"]
  assert "last new rule at: guided" in format_compare(r)

@pytest.mark.slow
def test_fork_mode_children_run_this_interpreter(tmp_path):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  res = _target("symbolic", "-fork=2", "-runs=100", "-max_total_time=60", f"--stats={tmp_path}/st", str(corpus),
                cwd=str(tmp_path))
  assert res.returncode == 0 and "Permission denied" not in res.stderr, res.stderr[-3000:]
  # one stats file per child process, and the children's inputs merged into the corpus
  assert len(glob.glob(f"{tmp_path}/st.*")) >= 2 and len(os.listdir(corpus)) > 1

# ---- ClusterFuzzLite and the nightly workflow ----

def test_clusterfuzzlite_builds_every_target_with_the_python_builder():
  cfl = os.path.join(REPO, ".clusterfuzzlite")
  with open(os.path.join(cfl, "project.yaml")) as f: project = f.read()
  assert re.search(r"^language: python$", project, re.M)
  with open(os.path.join(cfl, "Dockerfile")) as f: docker = f.read()
  assert re.search(r"^FROM gcr.io/oss-fuzz-base/base-builder-python", docker, re.M)
  assert "COPY .clusterfuzzlite/build.sh $SRC/" in docker
  build = os.path.join(cfl, "build.sh")
  assert subprocess.run(["bash", "-n", build]).returncode == 0
  with open(build) as f: text = f.read()
  built = set(re.findall(r"fuzz/targets/(\w+_target)\.py", text))
  targets = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(TARGETS, "*_target.py"))}
  assert {"kernel_target", "symbolic_target"} <= built <= targets and "compile_python_fuzzer" in text

def test_nightly_workflow_runs_a_campaign_and_uploads_its_findings():
  with open(os.path.join(REPO, ".github", "workflows", "fuzz-nightly.yml")) as f: wf = f.read()
  assert "schedule:" in wf and "run: make fuzz-nightly" in wf
  assert "actions/upload-artifact@" in wf and "fuzz_out/findings/" in wf and "if: always()" in wf
  assert "google/clusterfuzzlite/actions/build_fuzzers@" in wf and "mode: batch" in wf
  with open(os.path.join(REPO, "Makefile")) as f: mk = f.read()
  rule = mk[mk.index("\nfuzz-nightly:"):].split("\n\n")[0]
  assert "-m fuzz run" in rule and "--out fuzz_out" in rule and "-m fuzz report fuzz_out" in rule

def test_a_failing_directed_case_is_kept_as_its_state_once_per_failure_set(tmp_path):
  from types import SimpleNamespace
  from fuzz.campaign.levels import KernelLevel
  from fuzz.strategies import build_kernel, RandomChooser
  from fuzz.targets.common import write_state
  level, written = KernelLevel(), set()
  case = build_kernel(RandomChooser(3))
  fail = SimpleNamespace(stage="spec", kind="SpecError[program]", site="spec/verify.py:_raise", backend="python",
                         message="an illegal program")
  for _ in range(2): write_state(f"{tmp_path}/", level.state(case), [fail], written)
  files = glob.glob(f"{tmp_path}/directed-*.json")
  assert len(files) == 1
  with open(files[0]) as f: got = json.load(f)
  # the state reads back as the same kernel (no bytes needed), and the failure is named
  assert level.from_state(got["state"]).ast is case.ast and "SpecError[program]" in got["failures"][0]
