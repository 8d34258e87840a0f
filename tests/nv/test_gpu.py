"""The NV backend on a real GPU (`gpu`-marked: they run with RUN_GPU_TESTS=1, which `make test-gpu` sets, and skip
elsewhere): the plain checks of tests/nv/gpu_checks.py, and the whole of tests/tensor on DEV=NV."""
import os, subprocess, sys
import pytest
from tests.nv.gpu_checks import CHECKS, ROOT

pytestmark = pytest.mark.gpu

@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_gpu_check(check): check()

def test_tensor_suite_on_gpu():
  env = {**os.environ, "DEV": "NV", "PYTHONPATH": ROOT}
  r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/tensor"], cwd=ROOT, env=env,
                     capture_output=True, text=True)
  assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-4000:]
