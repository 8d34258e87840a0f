"""A representative slice of tests/tensor on the PYTHON backend under each GPU emulation (EMULATE=NV, AMD_GFX1100,
AMD_GFX1201, AMD_GFX942): the target renderer's exact linear programs run on the interpreter, half matmuls on its tensor
cores. The whole of tests/tensor per emulation is `make test-emulate` (test-emulate-nv, test-emulate-amd)."""
import os, subprocess, sys
import pytest

SLICE = "matmul or softmax or conv2d or unary_half or gather"

@pytest.mark.parametrize("emu", ["NV", "AMD_GFX1100", "AMD_GFX1201", "AMD_GFX942"])
def test_tensor_slice_passes_under_emulation(emu):
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  env = {**os.environ, "DEV": "PYTHON", "EMULATE": emu, "SPEC": "2", "IGNORE_OOB": "0"}
  env.pop("PYTEST_XDIST_WORKER", None)
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests/tensor/test_ops.py",
         "-k", SLICE]
  res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
  tail = "\n".join(res.stdout.splitlines()[-30:])
  assert res.returncode == 0, f"tests/tensor slice under EMULATE={emu} failed:\n{tail}\n{res.stderr[-2000:]}"
  assert " passed" in tail and "deselected" in tail, tail
