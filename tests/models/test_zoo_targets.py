"""The zoo's kernels on the GPU targets (docs/models.md): every kernel of a zoo model's training step (tiny sizes)
compiles for sm_90 and gfx1100 (BERT and GPT-2 here, every model on every arch under -m slow) as `COMPILE_ONLY=1 realize()` compiles it (tests/codegen/gpu_sweep.py: get_program with
the arch's renderer and default heuristics, then NVRTC + ptxas, or llvmlite + LLD with the code object checked); the
other archs (sm_80/89, gfx942/1201) under -m slow (make test-models-slow). And each model's forward runs on the PYTHON
backend emulating NV and AMD gfx1100 with the CPU's results, from the same weights (BERT, GPT-2 and the LSTM here;
every model under every emulation under -m slow)."""
import os, subprocess, sys
import numpy as np
import pytest
from tinygrad.models import zoo
from tests.codegen.gpu_sweep import compile_arch
from tests.models.zoo_run import step_kernels, forward

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = list(zoo("tiny"))
DEFAULT_ARCHS, SLOW_ARCHS = ("sm_90", "gfx1100"), ("sm_80", "sm_89", "gfx942", "gfx1201")
# NOTE: the CNNs' steps compile hundreds of kernels and the LSTM's unrolled backward is slow to compile: on every arch
# under -m slow; in the default suite the transformers' steps (sm_90, gfx1100) and the cheaper forwards under emulation
FAST_STEPS, FAST_EMU = ["bert", "gpt2"], ["bert", "gpt2", "lstm"]
# NOTE: the emulated GPUs compute in another order (their reductions split across threads): float32 rounding apart
EMU_TOL = 1e-4

def _check_compiles(name: str, arch: str) -> None:
  asts = step_kernels(name)
  assert len(asts) >= 10, f"{name}: only {len(asts)} kernels in a training step"
  bad = compile_arch(arch, list(asts))
  assert not bad, f"{name}: {len(bad)} of {len(asts)} kernels do not compile for {arch}:\n" + \
    "\n".join(f"  kernel {i}: {e[:1500]}" for i, e in list(bad.items())[:5])

@pytest.mark.parametrize("arch", DEFAULT_ARCHS)
@pytest.mark.parametrize("name", FAST_STEPS)
def test_zoo_step_kernels_compile(name, arch): _check_compiles(name, arch)

@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("arch", DEFAULT_ARCHS + SLOW_ARCHS)
@pytest.mark.parametrize("name", NAMES)
def test_zoo_step_kernels_compile_every_arch(name, arch): _check_compiles(name, arch)

@pytest.mark.parametrize("emu", ["NV", "AMD_GFX1100"])
@pytest.mark.parametrize("name", FAST_EMU)
def test_zoo_forward_under_emulation_matches_cpu(name, emu, tmp_path): _check_emulation(name, emu, tmp_path)

@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("emu", ["NV", "AMD_GFX1100", "AMD_GFX1201", "AMD_GFX942"])
@pytest.mark.parametrize("name", NAMES)
def test_zoo_forward_under_every_emulation_matches_cpu(name, emu, tmp_path): _check_emulation(name, emu, tmp_path)

def _check_emulation(name: str, emu: str, tmp_path) -> None:
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
