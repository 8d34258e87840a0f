"""Random kernel ASTs (masked/padded loads, reduces, several stores) with random opts, lowered for the CPU (C, compiled
with cc) and for the PYTHON interpreter, against the reference executor of the unlowered AST (fuzz/kernel_ref.py)."""
import random
import numpy as np
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError, apply_opts
from tinygrad.renderer.cstyle import CRenderer
from fuzz.kernel_ref import run_kernel

def dg(i, n): return UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), arg=i)

def random_ast(rnd: random.Random):
  M, N, K = rnd.randint(1, 9), rnd.randint(1, 9), rnd.randint(1, 7)
  i, j = UOp.range(M, 0), UOp.range(N, 1)
  a, b, c = dg(1, M * N), dg(2, N), dg(3, M * K)
  def leaf(depth: int) -> UOp:
    kind = rnd.choice(["a", "b", "pad", "const", "reduce"] if depth == 0 else ["a", "b", "pad", "const"])
    if kind == "a": return a.index(i * N + j).load()
    if kind == "b": return b.index(j).load()
    if kind == "const": return UOp.const(dtypes.float32, float(rnd.randint(-3, 3)))
    if kind == "pad":  # a shifted by one row and one column, zero outside
      valid = (i < 1).logical_not() & (j < N - 1)
      return a.index(((i - 1) * N + j + 1).valid(valid)).load()
    k = UOp.range(K, 2, AxisType.REDUCE)
    return (c.index(i * K + k).load() * expr(1)).reduce(k, arg=rnd.choice([Ops.ADD, Ops.MAX]))
  def expr(depth: int) -> UOp:
    if depth >= 2 or rnd.random() < 0.3: return leaf(depth)
    x, y = expr(depth + 1), expr(depth + 1)
    op = rnd.choice(["add", "mul", "max", "where"])
    if op == "add": return x + y
    if op == "mul": return x * y
    if op == "max": return x.maximum(y)
    return (x < y).where(x, y * 2.0)
  out = dg(0, M * N)
  stores = [out.index(i * N + j).store(expr(0)).end(i, j)]
  if rnd.random() < 0.3:  # a second output: the transposed row sums of a
    out2, k2 = dg(4, N), UOp.range(M, 3, AxisType.REDUCE)
    stores.append(out2.index(j).store(a.index(k2 * N + j).load().reduce(k2)).end(j))
  return UOp.sink(*stores)

def random_opts(rnd: random.Random, ast: UOp, renderer) -> list[Opt]:
  cands = [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UPCAST, 1, 0), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UNROLL, 0, 0), Opt(OptOps.UNROLL, 0, 2),
           Opt(OptOps.THREAD, 0, 2), Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.GROUP, 0, 2), Opt(OptOps.GROUPTOP, 0, 4), Opt(OptOps.PADTO, 1, 4),
           Opt(OptOps.CUT)]
  opts: list[Opt] = []
  for o in rnd.sample(cands, rnd.randint(0, 3)):
    try:
      apply_opts(ast, opts + [o], renderer)
      opts.append(o)
    except KernelOptError: pass
  return opts

def inputs(ast: UOp, seed: int) -> dict[int, np.ndarray]:
  rng = np.random.default_rng(seed)
  gs = sorted([u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL], key=lambda u: u.arg)
  return {g.arg: rng.integers(-4, 5, g.dtype.size).astype(np.float32) for g in gs}

C_RENDERER = CRenderer(threads=2)

def run_c(ast, bufs, opts):
  from tests.codegen.conftest import run_program
  prg = get_program(ast, C_RENDERER, opts)
  arrs = [bufs[k] for k in sorted(bufs)]
  run_program(prg, arrs)

def run_python(ast, bufs, opts):
  from tinygrad.device import Device, Buffer
  dev = Device["PYTHON"]
  p = get_program(ast, dev.renderer, opts)
  prg = dev.runtime(p.name, dev.compiler.compile(p.src))
  bs = {}
  for k, v in bufs.items():
    bs[k] = Buffer("PYTHON", v.size, dtypes.float32).allocate()
    bs[k].copyin(memoryview(v))
  gs, ls = p.launch_dims({})
  prg(*[bs[k]._buf for k in p.globals], global_size=gs, local_size=ls)
  for k in bufs: bufs[k][:] = bs[k].numpy()

@pytest.mark.parametrize("seed", range(24))
def test_random_kernels_match_reference(seed):
  rnd = random.Random(seed)
  ast = random_ast(rnd)
  ref = {k: v.astype(np.float64) for k, v in inputs(ast, seed).items()}
  run_kernel(ast, ref)
  outs = [k for k in (0, 4) if k in ref]
  for backend, ren in (("C", C_RENDERER), ("PYTHON", None)):
    if ren is None:
      from tinygrad.device import Device
      ren = Device["PYTHON"].renderer
    opts = random_opts(rnd, ast, ren)
    got = inputs(ast, seed)
    (run_c if backend == "C" else run_python)(ast, got, opts)
    for k in outs: np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-5, err_msg=f"{backend} buffer {k} opts {opts}")
