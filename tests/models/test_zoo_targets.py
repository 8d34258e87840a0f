"""The zoo's kernels on the GPU targets (docs/models.md): every kernel of a zoo model's training step (tiny sizes)
compiles for the GPU archs as `COMPILE_ONLY=1 realize()` compiles it (tests/codegen/gpu_sweep.py: get_program with
the arch's renderer and default heuristics, then NVRTC + ptxas, or llvmlite + LLD with the code object checked), and
each model's forward runs on the PYTHON backend emulating NV and AMD with the CPU's results, from the same weights.
The default suite compiles GPT-2's step for sm_90 and runs its forward under EMULATE=AMD_GFX1100; every model on
sm_80/89/90 and gfx942/1100/1201 and under every emulation runs under -m slow (make test-models-slow)."""
import os, subprocess, sys
import numpy as np
import pytest
from tinygrad.models import zoo
from tinygrad.uop.ops import UOp
from tests.codegen.gpu_sweep import compile_arch
from tests.models.zoo_run import step_kernels, forward

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = list(zoo("tiny"))
ARCHS = ("sm_80", "sm_89", "sm_90", "gfx942", "gfx1100", "gfx1201")
EMULATIONS = ("NV", "AMD_GFX1100", "AMD_GFX1201", "AMD_GFX942")
# NOTE: codegen dominates (a CNN's step compiles hundreds of kernels): the default suite compiles GPT-2's step for
# sm_90 and runs its forward under EMULATE=AMD_GFX1100; every other model, arch and emulation under -m slow
DEFAULT_COMPILE, DEFAULT_EMU = ("gpt2", "sm_90"), ("gpt2", "AMD_GFX1100")
# NOTE: the emulated GPUs compute in another order (their reductions split across threads): float32 rounding apart
EMU_TOL = 1e-4

def assert_compiles(what: str, asts: tuple[UOp, ...], arch: str) -> None:
  """Every kernel of `asts` compiles for `arch` as COMPILE_ONLY=1 compiles it (also tests/models/test_llm_targets.py)."""
  bad = compile_arch(arch, list(asts))
  assert not bad, f"{what}: {len(bad)} of {len(asts)} kernels do not compile for {arch}:\n" + \
    "\n".join(f"  kernel {i}: {e[:1500]}" for i, e in list(bad.items())[:5])

def assert_emulation_matches(what: str, emu: str, cmd: list[str], out: str, cpu: dict[str, np.ndarray]) -> None:
  """`cmd` (a module run with DEV=PYTHON EMULATE=emu, saving its outputs to the npz `out`) gives the CPU's outputs
  `cpu` within EMU_TOL (also tests/models/test_llm_targets.py)."""
  env = {**os.environ, "DEV": "PYTHON", "EMULATE": emu, "SPEC": "2", "IGNORE_OOB": "0", "PYTHONPATH": ROOT}
  res = subprocess.run([sys.executable, "-m", *cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert res.returncode == 0, f"{what} under EMULATE={emu} failed:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
  got = np.load(out)
  assert sorted(got.files) == sorted(cpu), f"{what}: EMULATE={emu} saved {got.files}, the CPU {list(cpu)}"
  for k, ref in cpu.items():
    assert got[k].shape == ref.shape and np.isfinite(ref).all()
    np.testing.assert_allclose(got[k], ref, atol=EMU_TOL * max(1.0, float(np.abs(ref).max())), rtol=EMU_TOL,
                               err_msg=f"{what} {k}: EMULATE={emu} against CPU")

def _check_compiles(name: str, arch: str) -> None:
  asts = step_kernels(name)
  assert len(asts) >= 10, f"{name}: only {len(asts)} kernels in a training step"
  assert_compiles(name, asts, arch)

def test_zoo_step_kernels_compile(): _check_compiles(*DEFAULT_COMPILE)

@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("name,arch", [(n, a) for n in NAMES for a in ARCHS if (n, a) != DEFAULT_COMPILE])
def test_zoo_step_kernels_compile_every_arch(name, arch): _check_compiles(name, arch)

def test_zoo_forward_under_emulation_matches_cpu(tmp_path): _check_emulation(*DEFAULT_EMU, tmp_path)

@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("name,emu", [(n, e) for n in NAMES for e in EMULATIONS if (n, e) != DEFAULT_EMU])
def test_zoo_forward_under_every_emulation_matches_cpu(name, emu, tmp_path): _check_emulation(name, emu, tmp_path)

def _check_emulation(name: str, emu: str, tmp_path) -> None:
  cpu = forward(name, "tiny", str(tmp_path))
  out = str(tmp_path / "emu.npz")
  assert_emulation_matches(name, emu, ["tests.models.zoo_run", "--weights", str(tmp_path), "--out", out, "--models", name],
                           out, {name: cpu})
