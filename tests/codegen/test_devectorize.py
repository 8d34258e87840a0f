"""DEVECTORIZE: 0 packs lanes into vector loads, stores and ALU ops the target has; 1 vector loads and stores only; 2
no vectors. Each level gives another program, and every one computes the same values (CPU and PYTHON)."""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.device import Device, Buffer
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops, GroupOp, hooks
from tinygrad.uop.ops import UOp

def dg(i, dt, n): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)

def axpy_ast(dt, n=32):
  # out[i] = a[i] * b[i] + (a[i] ^ 3 for ints, a[i] / 2 for floats)
  i = UOp.range(n, 0)
  out, a, b = dg(0, dt, n), dg(1, dt, n), dg(2, dt, n)
  x, y = a.index(i).load(), b.index(i).load()
  other = x ^ UOp.const(dt, 3) if dtypes.is_int(dt) else x / UOp.const(dt, 2.0)
  return UOp.sink(out.index(i).store(x * y + other).end(i))

def run(device, ast, n, dt, inputs):
  dev = Device[device]
  p = get_program(ast, dev.renderer, [Opt(OptOps.UPCAST, 0, 4)])
  prg = dev.runtime(p.name, dev.compiler.compile_cached(p.src, p.renderer))
  bufs = [Buffer(device, n, dt).allocate()] + [Buffer(device, n, dt).copyin(memoryview(np.ascontiguousarray(x))) for x in inputs]
  gs, ls = p.launch_dims({})
  prg(*[b._buf for b in bufs], global_size=gs, local_size=ls)
  return p, bufs[0].numpy()

def vector_kinds(p) -> set[str]:
  kinds = set()
  for u in p.uops:
    if u.op in (Ops.LOAD, Ops.STORE) and u.src[0].dtype.v > 1: kinds.add("memory")  # type: ignore[attr-defined]
    if (u.op in GroupOp.ALU or u.op is Ops.CAST) and u.dtype.count > 1: kinds.add("alu")
  return kinds

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32], ids=["float32", "int32"])
def test_devectorize_levels_give_different_correct_programs(device, dt):
  n = 32
  rng = np.random.default_rng(0)
  np_dt = np.float32 if dt is dtypes.float32 else np.int32
  a, b = (rng.integers(-9, 9, n)).astype(np_dt), (rng.integers(-9, 9, n)).astype(np_dt)
  ref = a * b + (a ^ 3 if dt is dtypes.int32 else a / np_dt(2))
  progs = {}
  for level in (0, 1, 2):
    with Context(DEVECTORIZE=level): p, got = run(device, axpy_ast(dt, n), n, dt, [a, b])
    np.testing.assert_array_equal(got, ref, err_msg=f"DEVECTORIZE={level} on {device}")
    progs[level] = p
  assert vector_kinds(progs[0]) == {"memory", "alu"}
  assert vector_kinds(progs[1]) == {"memory"}
  assert vector_kinds(progs[2]) == set()
  assert len({p.src for p in progs.values()}) == 3

def test_devectorize_through_the_tensor_api():
  # the runner cache is per codegen flags: a kernel realized under another DEVECTORIZE is compiled again
  x = Tensor.arange(64).float().reshape(8, 8)
  outs, srcs = {}, {}
  def record(ast, p, renderer): srcs.setdefault(ast, set()).add(p.src)
  hooks.register("compiled", record)
  try:
    for level in (0, 1, 2):
      with Context(DEVECTORIZE=level): outs[level] = (x * 3 + x.exp2() / 4).numpy()
  finally: hooks.unregister("compiled", record)
  assert max(len(v) for v in srcs.values()) == 3
  np.testing.assert_allclose(outs[0], outs[1])
  np.testing.assert_allclose(outs[0], outs[2])
  np.testing.assert_allclose(outs[0], np.arange(64).reshape(8, 8) * 3 + np.exp2(np.arange(64).reshape(8, 8)) / 4, rtol=1e-6)

def test_vectorize_alu_packs_casts_only_from_one_source_dtype():
  # one lane's CAST reads a float64 LOAD, the others a float32 value (a lane's arithmetic folded away): packing them
  # would put the float64 lane into a float32 vector operand; the lanes stay scalar
  from tinygrad.codegen.expander import VectorizeCtx, pm_vectorize
  from tinygrad.uop.ops import graph_rewrite
  r = Device["PYTHON"].renderer
  i = UOp.range(4, 0)
  f64, f32 = dg(1, dtypes.float64, 4).index(i).load(), dg(2, dtypes.float32, 4).index(i).load() * UOp.const(dtypes.float32, 3.0)
  mixed = UOp.vectorize(f32.cast(dtypes.int32), f32.cast(dtypes.int32), f64.cast(dtypes.int32), f32.cast(dtypes.int32))
  same = UOp.vectorize(*[f32.cast(dtypes.int32)] * 4)
  assert r.supports_op(Ops.CAST, dtypes.int32.vec(4)) and 4 in r.vector_widths(dtypes.float32)
  ctx = VectorizeCtx(r, 0)
  got = graph_rewrite(mixed, pm_vectorize, ctx=ctx, name="test: pack lanes")
  assert got.op is Ops.VECTORIZE and [s.src[0].dtype for s in got.src] == [dtypes.float32] * 2 + [dtypes.float64, dtypes.float32]
  packed = graph_rewrite(same, pm_vectorize, ctx=ctx, name="test: pack lanes")
  assert packed.op is Ops.CAST and packed.dtype == dtypes.int32.vec(4) and packed.src[0].dtype == dtypes.float32.vec(4)
