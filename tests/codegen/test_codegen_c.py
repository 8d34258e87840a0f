"""Hand-built kernel ASTs lowered, linearized, rendered to C, compiled with cc and run; results against numpy."""
import numpy as np
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import Opt, OptOps

def dg(i, dt, n): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)
f32 = dtypes.float32
rng = np.random.default_rng(0)

@pytest.mark.parametrize("noopt", [0, 1])
def test_elementwise_add_matches_numpy(run_kernel, noopt):
  out, a, b = dg(0, f32, 67), dg(1, f32, 67), dg(2, f32, 67)
  r = UOp.range(67, 0)
  ast = UOp.sink(out.index(r).store(a.index(r).load() * b.index(r).load() + 1.5).end(r))
  bufs = [np.zeros(67, np.float32), rng.random(67, dtype=np.float32), rng.random(67, dtype=np.float32)]
  with Context(NOOPT=noopt): prg = run_kernel(ast, bufs)
  np.testing.assert_allclose(bufs[0], bufs[1] * bufs[2] + 1.5, rtol=1e-6)
  assert prg.ins == (1, 2) and prg.outs == (0,) and prg.globals == [0, 1, 2]
  assert prg.name.startswith("E_")

@pytest.mark.parametrize("op,npf", [(Ops.ADD, np.sum), (Ops.MAX, np.max), (Ops.MUL, np.prod)])
@pytest.mark.parametrize("noopt", [0, 1])
def test_reduce_rows_matches_numpy(run_kernel, op, npf, noopt):
  out, a = dg(0, f32, 8), dg(1, f32, 8 * 12)
  r0, r1 = UOp.range(8, 0), UOp.range(12, 1, AxisType.REDUCE)
  ast = UOp.sink(out.index(r0).store(a.index(r0 * 12 + r1).load().reduce(r1, arg=op)).end(r0))
  x = (rng.random(96, dtype=np.float32) + 0.5)
  bufs = [np.zeros(8, np.float32), x]
  with Context(NOOPT=noopt): prg = run_kernel(ast, bufs)
  np.testing.assert_allclose(bufs[0], npf(x.reshape(8, 12), axis=1), rtol=1e-5)
  assert prg.name.startswith("r_")

def test_max_reduce_propagates_nan(run_kernel):
  out, a = dg(0, f32, 1), dg(1, f32, 16)
  r = UOp.range(16, 0, AxisType.REDUCE)
  ast = UOp.sink(out.index(UOp.const(dtypes.index, 0)).store(a.index(r).load().reduce(r, arg=Ops.MAX)))
  x = rng.random(16, dtype=np.float32)
  x[5] = np.nan
  bufs = [np.zeros(1, np.float32), x]
  run_kernel(ast, bufs)
  assert np.isnan(bufs[0][0])

def test_two_sibling_reduces_in_one_kernel(run_kernel):
  # out[i] = sum_j a[i,j] + max_k a[i,k]: two loops over different ranges inside the same output loop
  out, a = dg(0, f32, 5), dg(1, f32, 5 * 7)
  r0, r1, r2 = UOp.range(5, 0), UOp.range(7, 1, AxisType.REDUCE), UOp.range(7, 2, AxisType.REDUCE)
  s = a.index(r0 * 7 + r1).load().reduce(r1, arg=Ops.ADD)
  m = a.index(r0 * 7 + r2).load().reduce(r2, arg=Ops.MAX)
  ast = UOp.sink(out.index(r0).store(s + m).end(r0))
  x = rng.random(35, dtype=np.float32)
  bufs = [np.zeros(5, np.float32), x]
  with Context(NOOPT=1): run_kernel(ast, bufs)
  np.testing.assert_allclose(bufs[0], x.reshape(5, 7).sum(1) + x.reshape(5, 7).max(1), rtol=1e-5)

def test_masked_load_pad_reads_zero(run_kernel):
  # pad a[0:6] with 2 zeros on each side: out[i] = (2 <= i < 8) ? a[i-2] : 0
  out, a = dg(0, f32, 10), dg(1, f32, 6)
  r = UOp.range(10, 0)
  valid = (r < 8) & (r < 2).logical_not()
  ast = UOp.sink(out.index(r).store(a.index((r - 2).valid(valid)).load()).end(r))
  x = rng.random(6, dtype=np.float32)
  bufs = [np.full(10, 7, np.float32), x]
  with Context(NOOPT=1): run_kernel(ast, bufs)
  np.testing.assert_array_equal(bufs[0], np.pad(x, (2, 2)))

def test_cat_kernel_is_cut_into_branch_free_loops(run_kernel):
  out, a, b = dg(0, f32, 9), dg(1, f32, 4), dg(2, f32, 5)
  r = UOp.range(9, 0)
  va = a.index(r.valid(r < 4)).load()
  vb = b.index((r - 4).valid((r < 4).logical_not())).load()
  ast = UOp.sink(out.index(r).store(va + vb).end(r))
  bufs = [np.zeros(9, np.float32), rng.random(4, dtype=np.float32), rng.random(5, dtype=np.float32)]
  prg = run_kernel(ast, bufs, opts=[Opt(OptOps.CUT)])
  np.testing.assert_array_equal(bufs[0], np.concatenate([bufs[1], bufs[2]]))
  assert sum(1 for u in prg.uops if u.op is Ops.RANGE) == 2
  assert not any(u.op is Ops.INDEX and len(u.src) == 3 for u in prg.uops), "the cut loops must not need gates"

def test_multi_store_kernel(run_kernel):
  o0, o1, a = dg(0, f32, 16), dg(1, f32, 16), dg(2, f32, 16)
  r = UOp.range(16, 0)
  x = a.index(r).load()
  ast = UOp.sink(o0.index(r).store(x * 2).end(r), o1.index(r).store(x + 3).end(r))
  bufs = [np.zeros(16, np.float32), np.zeros(16, np.float32), rng.random(16, dtype=np.float32)]
  prg = run_kernel(ast, bufs)
  np.testing.assert_allclose(bufs[0], bufs[2] * 2)
  np.testing.assert_allclose(bufs[1], bufs[2] + 3)
  assert prg.outs == (0, 1) and prg.ins == (2,)

def test_define_var_loop_bound(run_kernel):
  n = UOp.variable("n", 1, 32)
  out, a = dg(0, f32, 32), dg(1, f32, 32)
  r = UOp.range(n, 0)
  ast = UOp.sink(out.index(r).store(a.index(r).load() * 2).end(r))
  bufs = [np.zeros(32, np.float32), rng.random(32, dtype=np.float32)]
  with Context(NOOPT=1): prg = run_kernel(ast, bufs, var_vals={"n": 11})
  np.testing.assert_allclose(bufs[0][:11], bufs[1][:11] * 2)
  assert (bufs[0][11:] == 0).all()
  assert prg.var_names == ["n"] and "int n" in prg.src

def test_gated_store_writes_only_where_valid(run_kernel):
  out = dg(0, dtypes.int32, 8)
  r = UOp.range(8, 0)
  ast = UOp.sink(out.index(r.valid(r < 3)).store(r.cast(dtypes.int32) + 10).end(r))
  bufs = [np.full(8, -1, np.int32)]
  with Context(NOOPT=1): prg = run_kernel(ast, bufs)
  np.testing.assert_array_equal(bufs[0], [10, 11, 12, -1, -1, -1, -1, -1])
  assert any(u.op is Ops.IF for u in prg.uops) and "if (" in prg.src

def test_thread_opt_runs_on_core_ids(run_kernel):
  from tinygrad.codegen.opt import Opt, OptOps
  out, a = dg(0, f32, 64), dg(1, f32, 64)
  r = UOp.range(64, 0)
  ast = UOp.sink(out.index(r).store(a.index(r).load() + 1).end(r))
  bufs = [np.zeros(64, np.float32), rng.random(64, dtype=np.float32)]
  prg = run_kernel(ast, bufs, opts=[Opt(OptOps.THREAD, 0, 2)])
  np.testing.assert_allclose(bufs[0], bufs[1] + 1)
  assert prg.global_size[0] == 2 and any(u.op is Ops.SPECIAL and u.arg == "core_id" for u in prg.uops)

def test_upcast_and_unroll_matmul(run_kernel):
  from tinygrad.codegen.opt import Opt, OptOps
  M, N, K = 8, 12, 16
  out, a, b = dg(0, f32, M * N), dg(1, f32, M * K), dg(2, f32, K * N)
  i, j, k = UOp.range(M, 0), UOp.range(N, 1), UOp.range(K, 2, AxisType.REDUCE)
  ast = UOp.sink(out.index(i * N + j).store((a.index(i * K + k).load() * b.index(k * N + j).load()).reduce(k, arg=Ops.ADD)).end(i, j))
  x, y = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
  bufs = [np.zeros(M * N, np.float32), x.ravel(), y.ravel()]
  prg = run_kernel(ast, bufs, opts=[Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.UPCAST, 0, 2)])
  np.testing.assert_allclose(bufs[0].reshape(M, N), x @ y, rtol=1e-5)
  assert any(u.dtype.count == 4 for u in prg.uops), "the upcast output should be stored as a vector"

def test_scalar_store_without_ranges(run_kernel):
  out = dg(0, dtypes.int32, 1)
  ast = UOp.sink(out.index(UOp.const(dtypes.index, 0)).store(UOp.const(dtypes.int32, 42)))
  bufs = [np.zeros(1, np.int32)]
  prg = run_kernel(ast, bufs)
  assert bufs[0][0] == 42 and prg.name == "E_1"

def test_kernel_name_is_deterministic_and_uses_kernelinfo():
  from tinygrad.renderer.cstyle import CRenderer
  from tinygrad.codegen.opt import KernelInfo
  out, a = dg(0, f32, 4 * 16), dg(1, f32, 4 * 16)
  r0, r1 = UOp.range(4, 0), UOp.range(16, 1)
  st = out.index(r0 * 16 + r1).store(a.index(r0 * 16 + r1).load()).end(r0, r1)
  with Context(NOOPT=1):
    assert get_program(UOp.sink(st), CRenderer()).name == "E_4_16"
    assert get_program(UOp.sink(st, arg=KernelInfo(name="my_copy")), CRenderer()).name == "my_copy"

def test_pad_both_axes_cut_into_loops_that_share_no_range(run_kernel):
  # out (4, 5) = pad(a (2, 3), ((1, 1), (0, 2))): the row cut must not leave the column loop shared between pieces
  out, a = dg(0, f32, 20), dg(1, f32, 6)
  r0, r1 = UOp.range(4, 0), UOp.range(5, 1)
  valid = (r0 < 1).logical_not() & (r0 < 3) & (r1 < 3)
  ast = UOp.sink(out.index(r0 * 5 + r1).store(a.index(((r0 - 1) * 3 + r1).valid(valid)).load()).end(r0, r1))
  x = rng.random(6, dtype=np.float32)
  bufs = [np.full(20, 9, np.float32), x]
  prg = run_kernel(ast, bufs, opts=[Opt(OptOps.CUT)])
  np.testing.assert_array_equal(bufs[0].reshape(4, 5), np.pad(x.reshape(2, 3), ((1, 1), (0, 2))))
  assert not any(u.op is Ops.IF or (u.op is Ops.INDEX and len(u.src) == 3) for u in prg.uops)
  ends = [u.src[1] for u in prg.uops if u.op is Ops.END]
  assert len(ends) == len(set(ends)), "one END per RANGE"

def test_program_spec_estimates_and_hooks():
  from tinygrad.uop import hooks
  from tinygrad.renderer.cstyle import CRenderer
  seen = []
  def on_program(ast, uops, ren): seen.append(("program", len(uops)))
  def on_compiled(ast, spec, opts): seen.append(("compiled", spec.name))
  out, a = dg(0, f32, 8), dg(1, f32, 8 * 16)
  r0, r1 = UOp.range(8, 0), UOp.range(16, 1, AxisType.REDUCE)
  ast = UOp.sink(out.index(r0).store((a.index(r0 * 16 + r1).load() * 2.0).reduce(r1)).end(r0))
  hooks.register("program", on_program)
  hooks.register("compiled", on_compiled)
  try:
    with Context(NOOPT=1): prg = get_program(ast, CRenderer())
  finally:
    hooks.unregister("program", on_program)
    hooks.unregister("compiled", on_compiled)
  assert [k for k, _ in seen] == ["program", "compiled"] and seen[1][1] == prg.name
  # 8*16 loads of 4 bytes and 8 stores of 4 bytes; a mul and an add per element
  assert prg.estimates.mem == 8 * 16 * 4 + 8 * 4
  assert prg.estimates.ops == 8 * 16 * 2
  assert prg.launch_dims({}) == ([1, 1, 1], None)

def test_get_program_prints_the_kernel_on_failure(capsys):
  from tinygrad.renderer.cstyle import CRenderer
  class Broken(CRenderer):
    def render(self, uops, name="kernel"): raise RuntimeError("no renderer today")
  out, a = dg(0, f32, 4), dg(1, f32, 4)
  r = UOp.range(4, 0)
  ast = UOp.sink(out.index(r).store(a.index(r).load()).end(r))
  with Context(NOOPT=1), pytest.raises(RuntimeError, match="no renderer today"): get_program(ast, Broken())
  err = capsys.readouterr().err
  assert "codegen failed" in err and "ast = " in err

def test_int64_index_with_symbolic_size(run_kernel):
  n = UOp.variable("n", 1, 2**20)
  out, a = dg(0, f32, 2**32), dg(1, f32, 16)
  r0, r1 = UOp.range(n, 0), UOp.range(4096, 1)
  ast = UOp.sink(out.index(r0 * 4096 + r1).store(a.index(r1 % 16).load()).end(r0, r1))
  with Context(NOOPT=1): prg = get_program(ast, __import__("tinygrad.renderer.cstyle", fromlist=["CRenderer"]).CRenderer())
  idx = next(u.src[1] for u in prg.uops if u.op is Ops.INDEX and u.src[0].arg == 0)
  assert idx.dtype is dtypes.int64 and "long long" in prg.src
  # and it runs for a small n (the buffer only needs n * 4096 elements)
  bufs = [np.zeros(2 * 4096, np.float32), rng.random(16, dtype=np.float32)]
  with Context(NOOPT=1): run_kernel(ast, bufs, var_vals={"n": 2})
  np.testing.assert_array_equal(bufs[0], np.tile(bufs[1], 2 * 4096 // 16))

def test_local_bufferize_materialises_then_reads(run_kernel):
  # out[i, j] = t[(j + 1) % 4] with t[k] = a[i, k] * 2 materialised per row into a local buffer
  out, a = dg(0, f32, 3 * 4), dg(1, f32, 3 * 4)
  i, j, k = UOp.range(3, 0), UOp.range(4, 1), UOp.range(4, 2)
  bz = UOp(Ops.BUFFERIZE, f32, (a.index(i * 4 + k).load() * 2.0, k))
  ast = UOp.sink(out.index(i * 4 + j).store(UOp(Ops.INDEX, f32.ptr(4), (bz, (j + 1) % 4)).load()).end(i, j))
  x = rng.random(12, dtype=np.float32)
  bufs = [np.zeros(12, np.float32), x]
  with Context(NOOPT=1): prg = run_kernel(ast, bufs)
  np.testing.assert_allclose(bufs[0].reshape(3, 4), np.roll(x.reshape(3, 4) * 2, -1, axis=1))
  assert any(u.op is Ops.DEFINE_REG and u.dtype.size == 4 for u in prg.uops)
