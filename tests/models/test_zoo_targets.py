"""The zoo's kernels on the GPU targets (docs/models.md): every kernel of each zoo model's training step (tiny sizes)
compiles for sm_90 and gfx1100 as `COMPILE_ONLY=1 realize()` compiles it (tests/codegen/gpu_sweep.py: get_program with
the arch's renderer and default heuristics, then NVRTC + ptxas, or llvmlite + LLD with the code object checked); the
other archs (sm_80/89, gfx942/1201) under -m slow (make test-models-slow). And each model's forward runs on the PYTHON
backend emulating NV and AMD gfx1100 with the CPU's results, from the same weights."""
import os, subprocess, sys
import numpy as np
import pytest
from tinygrad.models import zoo
from tests.codegen.gpu_sweep import compile_arch
from tests.models.zoo_run import step_kernels, forward

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = list(zoo("tiny"))
DEFAULT_ARCHS, SLOW_ARCHS = ("sm_90", "gfx1100"), ("sm_80", "sm_89", "gfx942", "gfx1201")
# NOTE: the emulated GPUs compute in another order (their reductions split across threads): float32 rounding apart
EMU_TOL = 1e-4

def _check_compiles(name: str, arch: str) -> None:
  asts = step_kernels(name)
  assert len(asts) >= 10, f"{name}: only {len(asts)} kernels in a training step"
  bad = compile_arch(arch, list(asts))
  assert not bad, f"{name}: {len(bad)} of {len(asts)} kernels do not compile for {arch}:\n" + \
    "\n".join(f"  kernel {i}: {e[:1500]}" for i, e in list(bad.items())[:5])

@pytest.mark.parametrize("arch", DEFAULT_ARCHS)
@pytest.mark.parametrize("name", NAMES)
def test_zoo_step_kernels_compile(name, arch): _check_compiles(name, arch)

@pytest.mark.slow
@pytest.mark.parametrize("arch", SLOW_ARCHS)
@pytest.mark.parametrize("name", NAMES)
def test_zoo_step_kernels_compile_every_arch(name, arch): _check_compiles(name, arch)

@pytest.mark.parametrize("emu", ["NV", "AMD_GFX1100"])
@pytest.mark.parametrize("name", NAMES)
def test_zoo_forward_under_emulation_matches_cpu(name, emu, tmp_path):
  cpu = forward(name, "tiny", str(tmp_path))
  env = {**os.environ, "DEV": "PYTHON", "EMULATE": emu, "SPEC": "2", "IGNORE_OOB": "0", "PYTHONPATH": ROOT}
  out = tmp_path / "emu.npz"
  cmd = [sys.executable, "-m", "tests.models.zoo_run", "--weights", str(tmp_path), "--out", str(out), "--models", name]
  res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert res.returncode == 0, f"{name} under EMULATE={emu} failed:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
  emu_out = np.load(out)[name]
  assert emu_out.shape == cpu.shape and np.isfinite(cpu).all()
  np.testing.assert_allclose(emu_out, cpu, atol=EMU_TOL * max(1.0, float(np.abs(cpu).max())), rtol=EMU_TOL,
                             err_msg=f"{name}: EMULATE={emu} forward against CPU")
