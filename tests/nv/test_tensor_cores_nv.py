"""NV tensor cores: mma.sync rendered as inline PTX compiles with NVRTC and ptxas for every arch, and the PYTHON
backend under EMULATE=NV runs exactly the linear programs COMPILE_ONLY compiles for NV."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops, hooks
from tinygrad.codegen import get_program
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.runtime.support import cuda_driver
from tinygrad.runtime.support.cuda_toolchain import NVCompiler, NVBinary

def _matmul_ast(dt, out_dt, m: int, k: int, n: int):
  rng = np.random.default_rng(0)
  a = Tensor(rng.standard_normal((m, k)).astype(np.float32)).cast(dt).realize()
  b = Tensor(rng.standard_normal((k, n)).astype(np.float32)).cast(dt).realize()
  return (a.reshape(m, 1, k) * b.T.reshape(1, n, k)).sum(-1, dtype=out_dt).schedule()[-1].ast

@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_tc_matmuls_compile_with_ptxas(arch):
  r, comp = CUDARenderer(arch), NVCompiler(arch)
  names = []
  for tc in r.tensor_cores:
    for shape in ((20, 40, 12), (64, 32, 64)):
      p = get_program(_matmul_ast(tc.dtype_in, tc.dtype_out, *shape), r)
      assert {u.arg[0] for u in p.uops if u.op is Ops.WMMA} == {tc.name}, "the heuristics picked the tensor core"
      binary = NVBinary.unpack(comp.compile(p.src))
      shape_ptx = tc.name.split(".")[1]
      assert f"mma.sync.aligned.{shape_ptx}.row.col." in binary.ptx and binary.cubin[:4] == b"\x7fELF"
      names.append(tc.name)
  assert any("e4m3" in n for n in names) == (arch != "sm_80")

@pytest.fixture
def no_driver(monkeypatch):
  monkeypatch.setattr(cuda_driver, "LIBCUDA_NAMES", ("libcuda-that-does-not-exist.so.1",))

def _workload(dev: str) -> list[Tensor]:
  rng = np.random.default_rng(1)
  x = Tensor(rng.standard_normal((20, 40)).astype(np.float32), device=dev)
  w = Tensor(rng.standard_normal((40, 24)).astype(np.float32), device=dev)
  h = (x.cast(dtypes.half) @ w.cast(dtypes.half)).cast(dtypes.float32)
  return [h.relu(), (x @ w).softmax(-1), x.exp2().max(0), (x * 3 + 1).cast(dtypes.bfloat16).cast(dtypes.float32)]

def _programs(dev: str, **ctx) -> dict:
  got: dict = {}
  def grab(ast, p, renderer): got[ast] = p.uops
  hooks.register("compiled", grab)
  try:
    with Context(**ctx): Tensor.realize(*_workload(dev))
  finally: hooks.unregister("compiled", grab)
  return got

def test_emulate_nv_runs_the_linear_program_nv_compiles(no_driver):
  emulated = _programs("PYTHON", EMULATE="NV")
  compiled = _programs("NV", COMPILE_ONLY=1)
  assert emulated.keys() == compiled.keys() and len(compiled) >= 4
  for ast, uops in compiled.items(): assert emulated[ast] == uops
  assert any(u.op is Ops.WMMA for uops in compiled.values() for u in uops)

def test_host_shim_refuses_tensor_core_kernels():
  # NOTE: a warp-wide mma.sync has no faithful one-thread-at-a-time host schedule; the emulator checks it instead
  from tinygrad.runtime.support.cuda_host import host_refusal
  p = get_program(_matmul_ast(dtypes.half, dtypes.float32, 32, 16, 16), CUDARenderer("sm_90"))
  assert "mma.sync" in p.src
  assert "tensor cores" in (host_refusal(p.src) or "")
