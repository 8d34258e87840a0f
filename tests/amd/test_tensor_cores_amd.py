"""AMD tensor cores: WMMA (gfx1100, gfx1201) and MFMA (gfx942) through the LLVM intrinsics compile to code objects that
check out, and the PYTHON backend under EMULATE=AMD_<arch> runs exactly the linear programs COMPILE_ONLY compiles for
that arch."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.device import Device
from tinygrad.engine import realize
from tinygrad.helpers import Context
from tinygrad.uop import Ops, hooks
from tinygrad.codegen import get_program
from tinygrad.renderer.llvmir import AMDLLVMRenderer
from tests.amd.checks import check_code_object

pytest.importorskip("llvmlite", reason="AMD compiles with llvmlite (the project's `llvm` extra)")
INSTR = {"gfx1100": "v_wmma_f32_16x16x16_", "gfx1201": "v_wmma_f32_16x16x16_", "gfx942": "v_mfma_f32_16x16x16"}

@pytest.mark.parametrize("arch", sorted(INSTR))
def test_tc_matmuls_compile_to_code_objects(arch, linker):
  from tinygrad.runtime.support.compiler_amd import AMDCompiler
  r, comp = AMDLLVMRenderer(arch), AMDCompiler(arch)
  rng = np.random.default_rng(0)
  for tc in r.tensor_cores:
    a = Tensor(rng.standard_normal((20, 40)).astype(np.float32)).cast(tc.dtype_in).realize()
    b = Tensor(rng.standard_normal((40, 24)).astype(np.float32)).cast(tc.dtype_in).realize()
    p = get_program((a @ b).schedule()[-1].ast, r)
    assert [u.arg[0] for u in p.uops if u.op is Ops.WMMA] == [tc.name]
    assert INSTR[arch] in comp.assembly(p.src)
    check_code_object(comp.compile(p.src), p, arch)

def _programs(dev: str, **ctx) -> dict:
  got: dict = {}
  def grab(ast, p, renderer): got[ast] = p.uops
  hooks.register("compiled", grab)
  try:
    with Context(**ctx):
      rng = np.random.default_rng(2)
      x = Tensor(rng.standard_normal((20, 40)).astype(np.float32), device=dev)
      w = Tensor(rng.standard_normal((40, 24)).astype(np.float32), device=dev)
      h = (x.cast(dtypes.bfloat16) @ w.cast(dtypes.bfloat16)).cast(dtypes.float32)
      Tensor.realize(h.relu(), (x @ w).softmax(-1), x.exp2().max(0), x.sqrt().mean())
  finally: hooks.unregister("compiled", grab)
  return got

@pytest.mark.parametrize("arch", sorted(INSTR))
def test_emulate_amd_runs_the_linear_program_amd_compiles(arch, linker):
  emulated = _programs("PYTHON", EMULATE=f"AMD_{arch.upper()}")
  try: compiled = _programs("AMD", COMPILE_ONLY=1, AMD_ARCH=arch)
  finally:
    for k in [k for k in Device._opened if k.split(":")[0] == "AMD"]: del Device._opened[k]
    for k in [k for k in realize._runner_cache if k[0].split(":")[0] == "AMD"]: del realize._runner_cache[k]
  assert emulated.keys() == compiled.keys() and len(compiled) >= 4
  for ast, uops in compiled.items(): assert emulated[ast] == uops
  assert any(u.op is Ops.WMMA for uops in compiled.values() for u in uops)
