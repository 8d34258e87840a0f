"""Grid lowering on a target with a launch grid and local memory (the PYTHON backend's renderer, interpreted): GLOBAL and
LOCAL ranges become gidx/lidx SPECIALs (innermost = dimension 0), GROUP reduces go through DEFINE_LOCAL + BARRIER."""
import numpy as np
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.codegen import get_program

def dg(i, n): return UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), arg=i)
rng = np.random.default_rng(2)

def run_python(ast, arrays, opts):
  from tinygrad.device import Device, Buffer
  dev = Device["PYTHON"]
  p = get_program(ast, dev.renderer, opts)
  prg = dev.runtime(p.name, dev.compiler.compile(p.src))
  bufs = []
  for a in arrays:
    b = Buffer("PYTHON", a.size, dtypes.float32).allocate()
    b.copyin(memoryview(np.ascontiguousarray(a)))
    bufs.append(b)
  gs, ls = p.launch_dims({})
  prg(*[b._buf for b in bufs], global_size=gs, local_size=ls)
  return bufs[0].numpy(), p

def matmul(M, N, K):
  out, a, b = dg(0, M * N), dg(1, M * K), dg(2, K * N)
  i, j, k = UOp.range(M, 0), UOp.range(N, 1), UOp.range(K, 2, AxisType.REDUCE)
  return UOp.sink(out.index(i * N + j).store((a.index(i * K + k).load() * b.index(k * N + j).load()).reduce(k)).end(i, j))

def opts_cases():
  from tinygrad.codegen.opt import Opt, OptOps
  return [[], [Opt(OptOps.LOCAL, 0, 4)], [Opt(OptOps.GROUP, 0, 4)], [Opt(OptOps.GROUPTOP, 0, 8), Opt(OptOps.LOCAL, 1, 2)],
          [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UNROLL, 0, 4)]]

@pytest.mark.parametrize("case", range(5))
def test_grid_programs_compute_matmul(case):
  opts = opts_cases()[case]
  M, N, K = 8, 12, 16
  x, y = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
  got, p = run_python(matmul(M, N, K), [np.zeros(M * N, np.float32), x.ravel(), y.ravel()], opts)
  np.testing.assert_allclose(got.reshape(M, N), x @ y, rtol=1e-5)
  specials = {u.arg: u.src[0].arg for u in p.uops if u.op is Ops.SPECIAL}
  # the innermost output axis (N = 12, split or not) is gidx0: a multiple of 3, never a divisor of M = 8
  assert specials["gidx0"] % 3 == 0
  if any(o.op.name.startswith("GROUP") for o in opts):
    assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops) and any(u.op is Ops.BARRIER for u in p.uops)
    assert p.local_size is not None and p.local_size[0] in (4, 8)
