"""The program contract (docs/ir.md section 3): no index dtype, END closes one range, sources before users, loops nested;
index lowering by bounds; line_rewrite of gated stores."""
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.helpers import Context
from tinygrad.codegen import full_rewrite_to_sink, linearize, line_rewrite, get_program
from tinygrad.renderer.cstyle import CRenderer

def dg(i, dt, n): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)
f32 = dtypes.float32

def check_program(uops):
  seen, stack = set(), []
  for i, u in enumerate(uops):
    assert u.dtype.scalar() is not dtypes.index, f"index dtype left at {i}: {u.op}"
    assert all(s in seen for s in u.src), f"a source of line {i} ({u.op}) is not earlier in the program"
    if u.op is Ops.RANGE: stack.append(u)
    if u.op is Ops.IF: stack.append(u)
    if u.op is Ops.END:
      assert len(u.src) == 2 and u.src[1].op is Ops.RANGE, "END closes exactly one range"
      assert stack and stack.pop() is u.src[1], "END closes the innermost open loop"
    if u.op is Ops.ENDIF: assert stack and stack.pop() is u.src[0]
    if u.op is Ops.STORE: assert len(u.src[0].src) == 2, "no gated STORE survives line_rewrite"
    if u.op is Ops.CONST: assert u.arg is not None and not isinstance(u.arg, type(UOp.invalid().arg))
    seen.add(u)
  assert not stack, "every loop and IF is closed"

def kernels():
  out, a = dg(0, f32, 8 * 8), dg(1, f32, 8 * 8)
  r0, r1, r2 = UOp.range(8, 0), UOp.range(8, 1), UOp.range(8, 2, AxisType.REDUCE)
  yield UOp.sink(out.index(r0 * 8 + r1).store(a.index(r1 * 8 + r0).load()).end(r0, r1))
  yield UOp.sink(out.index(r0).store(a.index(r0 * 8 + r2).load().reduce(r2, arg=Ops.MAX)).end(r0))
  # nested reduce: sum_j (x[i,j] - max_k x[i,k])
  r3 = UOp.range(8, 3, AxisType.REDUCE)
  m = a.index(r0 * 8 + r3).load().reduce(r3, arg=Ops.MAX)
  yield UOp.sink(out.index(r0).store((a.index(r0 * 8 + r2).load() - m).reduce(r2, arg=Ops.ADD)).end(r0))
  yield UOp.sink(out.index((r0 * 8 + r1).valid(r1 < 5)).store(a.index(r0 * 8 + r1).load()).end(r0, r1))

@pytest.mark.parametrize("noopt", [0, 1])
def test_programs_follow_the_contract(noopt):
  with Context(NOOPT=noopt):
    for ast in kernels(): check_program(line_rewrite(linearize(full_rewrite_to_sink(ast, CRenderer()))))

def test_nested_reduce_initialises_inside_the_outer_loop():
  ast = list(kernels())[2]
  with Context(NOOPT=1): uops = line_rewrite(linearize(full_rewrite_to_sink(ast, CRenderer())))
  rngs = [u for u in uops if u.op is Ops.RANGE]
  inits = [i for i, u in enumerate(uops) if u.op is Ops.STORE and u.src[0].src[0].op is Ops.AFTER and u.src[1].op is Ops.CONST]
  assert len(rngs) == 3 and len(inits) == 2
  # both accumulators are reset for every output element: their init stores sit inside the output loop
  assert all(i > uops.index(rngs[0]) for i in inits)

def test_index_lowers_to_int32_when_bounds_fit():
  out, a = dg(0, f32, 1024), dg(1, f32, 1024)
  r = UOp.range(1024, 0)
  with Context(NOOPT=1): uops = linearize(full_rewrite_to_sink(UOp.sink(out.index(r).store(a.index(r).load()).end(r)), CRenderer()))
  idx = [u.src[1] for u in uops if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL]
  assert idx and all(i.dtype is dtypes.int32 for i in idx)

def test_index_lowers_to_int64_when_bounds_need_it():
  n0, n1 = 4096, 2**20
  out, a = dg(0, f32, n0 * n1), dg(1, f32, n1)
  r0, r1 = UOp.range(n0, 0), UOp.range(n1, 1)
  ast = UOp.sink(out.index(r0 * n1 + r1).store(a.index(r1).load()).end(r0, r1))
  with Context(NOOPT=1): uops = linearize(full_rewrite_to_sink(ast, CRenderer()))
  by_buf = {u.src[0].arg: u.src[1] for u in uops if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL}
  assert by_buf[0].dtype is dtypes.int64, "r0 * 2**20 + r1 reaches 2**32: int64"
  assert by_buf[1].dtype is dtypes.int32, "r1 < 2**20: int32"
  assert all(u.dtype is dtypes.int32 for u in uops if u.op is Ops.RANGE)
  assert "long long" in get_program(ast, CRenderer(), opts=[]).src

def test_line_rewrite_turns_gated_store_into_if():
  buf = dg(0, dtypes.int32, 8)
  r = UOp.range(UOp.const(dtypes.int32, 8), 0, dtype=dtypes.int32)
  gate = r < 3
  st = UOp(Ops.INDEX, buf.dtype, (buf, r, gate)).store(r)
  end = st.end(r)
  lst = [buf, UOp.const(dtypes.int32, 8), r, UOp.const(dtypes.int32, 3), gate, st.src[0], st, end]
  out = line_rewrite(lst)
  ops = [u.op for u in out]
  i = ops.index(Ops.IF)
  # the ungated INDEX comes before the IF: another store may share it after the ENDIF (it must dominate that use)
  assert ops[i - 1:i + 3] == [Ops.INDEX, Ops.IF, Ops.STORE, Ops.ENDIF]
  assert out[i].src == (gate,) and out[i + 2].src == (out[i],) and len(out[i - 1].src) == 2
  assert out[i + 1].src[0] is out[i - 1]
  # the END is rebuilt over the ungated STORE, and the dead gated INDEX is gone
  assert out[-1].op is Ops.END and out[-1].src[0] is out[i + 1]
  assert sum(1 for u in out if u.op is Ops.INDEX) == 1
  check_program(out)

def test_sibling_loops_are_not_interleaved():
  out, a = dg(0, f32, 4), dg(1, f32, 32)
  r0, r1, r2 = UOp.range(4, 0), UOp.range(8, 1, AxisType.REDUCE), UOp.range(8, 2, AxisType.REDUCE)
  v = a.index(r0 * 8 + r1).load().reduce(r1) * a.index(r0 * 8 + r2).load().reduce(r2, arg=Ops.MAX)
  with Context(NOOPT=1): uops = line_rewrite(linearize(full_rewrite_to_sink(UOp.sink(out.index(r0).store(v).end(r0)), CRenderer())))
  check_program(uops)
  marks = [(u.op, u.arg if u.op is Ops.RANGE else u.src[1].arg) for u in uops if u.op in (Ops.RANGE, Ops.END)]
  assert [m[0] for m in marks] == [Ops.RANGE, Ops.RANGE, Ops.END, Ops.RANGE, Ops.END, Ops.END]

def test_accumulator_follows_the_contract():
  out, a = dg(0, f32, 1), dg(1, f32, 16)
  r = UOp.range(16, 0, AxisType.REDUCE)
  ast = UOp.sink(out.index(UOp.const(dtypes.index, 0)).store(a.index(r).load().reduce(r)))
  with Context(NOOPT=1): uops = linearize(full_rewrite_to_sink(ast, CRenderer()))
  acc = next(u for u in uops if u.op is Ops.DEFINE_REG)
  assert acc.dtype == f32.ptr(1, AddrSpace.REG)
  afters = [u for u in uops if u.op is Ops.AFTER]
  # inside the loop: acc.after(init, r); after it: acc.after(END)
  assert any(len(x.src) == 3 and x.src[1].op is Ops.STORE and x.src[2].op is Ops.RANGE for x in afters)
  assert any(x.src[1].op is Ops.END for x in afters)

def test_one_reduce_range_in_two_loop_nests_gets_two_loops():
  # out[i] = sum_k a[i, k] + sum_k b[k] with the same k: the second sum does not depend on i, so it runs once, outside
  import numpy as np
  from tests.codegen.conftest import run_program
  out, a, b = dg(0, f32, 4), dg(1, f32, 4 * 8), dg(2, f32, 8)
  r0, k = UOp.range(4, 0), UOp.range(8, 1, AxisType.REDUCE)
  v = a.index(r0 * 8 + k).load().reduce(k) + b.index(k).load().reduce(k)
  ast = UOp.sink(out.index(r0).store(v).end(r0))
  with Context(NOOPT=1): prg = get_program(ast, CRenderer())
  check_program(prg.uops)
  assert sum(1 for u in prg.uops if u.op is Ops.RANGE) == 3
  x, y = np.random.default_rng(3).random((4, 8), dtype=np.float32), np.random.default_rng(4).random(8, dtype=np.float32)
  bufs = [np.zeros(4, np.float32), x.ravel(), y]
  run_program(prg, bufs)
  np.testing.assert_allclose(bufs[0], x.sum(1) + y.sum(), rtol=1e-5)
