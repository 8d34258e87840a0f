"""The tests/tensor sweep on several devices (tests/multi/sweep.py, `pytest tests/tensor --shard N:AXIS`): every test's
data split over CPU:0..N-1 on AXIS (or replicated) against the tests' own numpy and torch references. make test runs
one case of every test in test_ops.py over 3 devices split on axis 1 (over 2 under -m slow); -m slow runs all of
tests/tensor, each layout."""
import os, subprocess, sys
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def run_sweep(spec: str, *args: str) -> None:
  env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-x", f"--shard={spec}", *args]
  r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3000)
  tail = "\n".join((r.stdout + r.stderr).splitlines()[-40:])
  assert r.returncode == 0, f"the sweep --shard {spec} failed:\n{tail}"
  assert " passed" in r.stdout, tail

@pytest.mark.parametrize("spec", ["3:1", pytest.param("2:0", marks=pytest.mark.slow)])
def test_sweep_slice_of_every_op(spec):
  run_sweep(spec, "--shard-slice", "tests/tensor/test_ops.py")

@pytest.mark.slow
@pytest.mark.parametrize("spec", ["2:0", "2:1", "2:-1", "2:none", "3:0", "3:1", "3:-1", "3:none"])
def test_sweep_all_of_tests_tensor(spec):
  run_sweep(spec, "tests/tensor")

def test_shard_spec_is_checked():
  from tests.multi.sweep import parse
  assert parse("3:-1") == (3, -1) and parse("2:none") == (2, None)
  for bad in ("0:1", "x:1", "2:9", "2"):
    with pytest.raises(ValueError, match="--shard"): parse(bad)
