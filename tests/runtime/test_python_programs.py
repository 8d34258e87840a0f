"""Hand-built linear programs (docs/ir.md section 3) run on the PYTHON interpreter: grids, locals, barriers, loops,
vector and gated memory access, and the errors it reports."""
import numpy as np
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.helpers import Context
from tinygrad.codegen.linearize import line_rewrite
from tinygrad.runtime.ops_python import PythonRenderer, PythonCompiler, PythonProgram, EmulatedKernelError

i32 = dtypes.int32

# ---- helpers: a tiny linearizer for hand-built graphs, and a launcher ----

def linear(*roots: UOp) -> list[UOp]:
  """Lines in the order of `roots` (each root's not-yet-placed dependencies first), then codegen's line_rewrite turns
  each gated STORE into IF(gate), STORE(ungated INDEX), ENDIF."""
  placed: dict[UOp, None] = {}
  for r in roots:
    for u in r.toposort():
      if u not in placed: placed[u] = None
  return line_rewrite(list(placed))

def check_program(uops: list[UOp]) -> None:
  """The hand-built programs are legal programs: checked against spec's program_spec where spec/ is present."""
  try: from spec import type_verify, program_spec
  except ImportError: return
  type_verify(uops, program_spec)

def run(uops: list[UOp], *bufs: np.ndarray, gsz=(1, 1, 1), lsz=(1, 1, 1), vals=(), legal: bool = True) -> PythonProgram:
  if legal: check_program(uops)
  prg = PythonProgram("test_kernel", PythonCompiler().compile(PythonRenderer().render(uops)))
  prg(*bufs, global_size=gsz, local_size=lsz, vals=vals)
  return prg

def gbuf(n: int, i: int, dt=dtypes.float32) -> UOp: return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)
def lbuf(n: int, i: int, dt=dtypes.float32) -> UOp: return UOp(Ops.DEFINE_LOCAL, dt.ptr(n, AddrSpace.LOCAL), arg=i)
def reg(n: int, i: int, dt=dtypes.float32) -> UOp: return UOp(Ops.DEFINE_REG, dt.ptr(n, AddrSpace.REG), arg=i)
def c(v, dt=i32) -> UOp: return UOp.const(dt, v)
def special(n: int, name: str) -> UOp: return UOp.special(c(n), name, dtype=i32)
def rng(n, rid: int, at=AxisType.LOOP) -> UOp: return UOp.range(n if isinstance(n, UOp) else c(n), rid, at, dtype=i32)
def barrier(*side_effects: UOp) -> UOp: return UOp(Ops.BARRIER, src=side_effects)

def accumulate(acc: UOp, r: UOp, value_fn) -> tuple[UOp, UOp]:
  """The accumulator pattern of docs/ir.md: returns (END of the loop, the final value after it)."""
  init = acc.index(c(0)).store(c(0.0, acc.dtype.base))
  cur = acc.after(init, r).index(c(0))
  e = cur.store(cur.load() + value_fn(r)).end(r)
  return e, acc.after(e).index(c(0)).load()

# ---- grids ----

def test_elementwise_over_a_grid_of_workgroups():
  out, a, b = gbuf(48, 0), gbuf(48, 1), gbuf(48, 2)
  gid, lid = special(3, "gidx0"), special(16, "lidx0")
  i = gid * c(16) + lid
  st = out.index(i).store(a.index(i).load() * c(2.0, dtypes.float32) + b.index(i).load())
  A, B, O = np.arange(48, dtype=np.float32), np.linspace(-1, 1, 48, dtype=np.float32), np.zeros(48, np.float32)
  run(linear(st), O, A, B, gsz=(3, 1, 1), lsz=(16, 1, 1))
  np.testing.assert_array_equal(O, A * np.float32(2) + B)

def test_three_dimensional_ids_cover_the_grid_once():
  out = gbuf(2 * 3 * 4 * 5, 0, i32)
  g0, g1, l0, l1 = special(2, "gidx0"), special(3, "gidx1"), special(4, "lidx0"), special(5, "lidx1")
  i = ((g1 * c(2) + g0) * c(5) + l1) * c(4) + l0
  cur = out.index(i)
  st = cur.store(cur.load() + c(1))
  O = np.zeros(120, np.int32)
  run(linear(st), O, gsz=(2, 3, 1), lsz=(4, 5, 1))
  assert (O == 1).all()

def test_many_workgroups_in_several_batches_match_one_batch():
  out, a = gbuf(4096, 0), gbuf(4096, 1)
  i = special(256, "gidx0") * c(16) + special(16, "lidx0")
  st = out.index(i).store(a.index(i).load().sqrt())
  A = np.random.default_rng(0).random(4096, dtype=np.float32)
  O1, O2 = np.zeros(4096, np.float32), np.zeros(4096, np.float32)
  run(linear(st), O1, A, gsz=(256, 1, 1), lsz=(16, 1, 1))
  prg = PythonProgram("small_batches", PythonCompiler().compile(PythonRenderer().render(linear(st))))
  prg.batch_values = 1000
  prg(O2, A, global_size=(256, 1, 1), local_size=(16, 1, 1))
  np.testing.assert_array_equal(O1, np.sqrt(A))
  np.testing.assert_array_equal(O2, O1)

# ---- vectors and gates ----

def test_vector_load_alu_store():
  out, a = gbuf(32, 0), gbuf(32, 1)
  i = special(8, "lidx0") * c(4)
  f4 = dtypes.float32.vec(4)
  v = UOp(Ops.INDEX, a.dtype.vec(4), (a, i)).load(dtype=f4)
  two = UOp.vectorize(*[c(2.0, dtypes.float32)] * 4)
  w = UOp.vectorize(v.gep(3), v.gep(2), v.gep(1), v.gep(0)) * two
  st = UOp(Ops.INDEX, out.dtype.vec(4), (out, i)).store(w)
  A, O = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
  run(linear(st), O, A, lsz=(8, 1, 1))
  np.testing.assert_array_equal(O, (A.reshape(8, 4)[:, ::-1] * 2).ravel())

def test_gated_load_reads_alternative_and_does_not_touch_memory():
  out, a = gbuf(16, 0), gbuf(10, 1)
  lid = special(16, "lidx0")
  # threads 10..15 would read past the end of `a`: the gate keeps them out, they get -1
  v = UOp(Ops.LOAD, dtypes.float32, (a.index(lid, lid < c(10)), c(-1.0, dtypes.float32)))
  st = out.index(lid).store(v)
  A, O = np.arange(10, dtype=np.float32) + 1, np.zeros(16, np.float32)
  run(linear(st), O, A, lsz=(16, 1, 1))
  np.testing.assert_array_equal(O, np.concatenate([A, -np.ones(6, np.float32)]))

def test_if_endif_store_only_where_gate_is_true():
  out = gbuf(16, 0, i32)
  lid = special(16, "lidx0")
  st = out.index(lid, (lid % c(3)).eq(c(0))).store(lid * c(10))
  uops = linear(st)
  assert [u.op for u in uops].count(Ops.IF) == 1 and [u.op for u in uops].count(Ops.ENDIF) == 1
  O = np.full(16, -7, np.int32)
  run(uops, O, lsz=(16, 1, 1))
  ref = np.where(np.arange(16) % 3 == 0, np.arange(16) * 10, -7)
  np.testing.assert_array_equal(O, ref)

# ---- loops and registers ----

def test_row_sum_with_register_accumulator():
  out, a = gbuf(6, 0), gbuf(6 * 7, 1)
  row = special(6, "gidx0")
  e, total = accumulate(reg(1, 0), rng(7, 0, AxisType.REDUCE), lambda r: a.index(row * c(7) + r).load())
  st = out.index(row).store(total)
  A, O = np.arange(42, dtype=np.float32), np.zeros(6, np.float32)
  run(linear(e, st), O, A, gsz=(6, 1, 1))
  np.testing.assert_array_equal(O, A.reshape(6, 7).sum(axis=1))

def test_nested_loops_and_define_var_bound():
  n = UOp.variable("n", 1, 8, dtype=i32)
  out = gbuf(64, 0, i32)
  r0, r1 = rng(n, 0), rng(c(8), 1)
  cur = out.index(r0 * c(8) + r1)
  e = cur.store(r0 * c(100) + r1).end(r1).end(r0)
  O = np.full(64, -1, np.int32)
  run(linear(e), O, vals=(5,))
  ref = np.full(64, -1, np.int32)
  for x in range(5):
    for y in range(8): ref[x * 8 + y] = x * 100 + y
  np.testing.assert_array_equal(O, ref)

def test_loop_bound_that_differs_per_thread():
  # thread t sums 0..t-1: threads leave the loop at different iterations; thread 0 never enters it
  out = gbuf(8, 0, i32)
  lid = special(8, "lidx0")
  e, total = accumulate(reg(1, 0, i32), rng(lid, 0, AxisType.REDUCE), lambda r: r)
  st = out.index(lid).store(total)
  O = np.zeros(8, np.int32)
  run(linear(e, st), O, lsz=(8, 1, 1))
  np.testing.assert_array_equal(O, [t * (t - 1) // 2 for t in range(8)])

def test_zero_trip_loop_is_skipped():
  out = gbuf(1, 0, i32)
  e, total = accumulate(reg(1, 0, i32), rng(UOp.variable("k", 0, 4, dtype=i32), 0, AxisType.REDUCE), lambda r: r + c(1))
  st = out.index(c(0)).store(total)
  O = np.full(1, 9, np.int32)
  run(linear(e, st), O, vals=(0,))
  assert O[0] == 0

# ---- shared memory and barriers ----

def test_workgroup_tree_reduction_through_shared_memory():
  G, L = 4, 16
  out, a = gbuf(G, 0), gbuf(G * L, 1)
  gid, lid = special(G, "gidx0"), special(L, "lidx0")
  lm = lbuf(L, 0)
  st0 = lm.index(lid).store(a.index(gid * c(L) + lid).load())
  bar = barrier(st0)
  steps, side = [], bar
  for s in (8, 4, 2, 1):
    mine = lm.after(side).index(lid)
    other = UOp(Ops.LOAD, dtypes.float32, (lm.after(side).index(lid + c(s), lid < c(s)), c(0.0, dtypes.float32)))
    st = lm.after(side).index(lid, lid < c(s)).store(mine.load() + other)
    side = barrier(st)
    steps.append(side)
  fin = out.index(gid, lid.eq(c(0))).store(lm.after(side).index(c(0)).load())
  A, O = np.random.default_rng(1).integers(-50, 50, G * L).astype(np.float32), np.zeros(G, np.float32)
  uops = linear(bar, *steps, fin)
  prg = run(uops, O, A, gsz=(G, 1, 1), lsz=(L, 1, 1))
  np.testing.assert_array_equal(O, A.reshape(G, L).sum(axis=1))
  assert prg.steps == len(uops)  # one batch, no loops, every IF taken by some thread: each line ran once

def test_grouptop_style_sum():
  # GROUPTOP: each of L threads sums a strided part of the row into a register, partials meet in shared memory
  G, L, K = 3, 8, 5
  out, a = gbuf(G, 0), gbuf(G * L * K, 1)
  gid, lid = special(G, "gidx0"), special(L, "lidx0")
  e, part = accumulate(reg(1, 0), rng(K, 0, AxisType.REDUCE), lambda r: a.index(gid * c(L * K) + r * c(L) + lid).load())
  lm = lbuf(L, 0)
  bar = barrier(lm.index(lid).store(part))
  e2, total = accumulate(reg(1, 1), rng(L, 1, AxisType.GROUP_REDUCE), lambda r: lm.after(bar).index(r).load())
  fin = out.index(gid, lid.eq(c(0))).store(total)
  A, O = np.arange(G * L * K, dtype=np.float32), np.zeros(G, np.float32)
  run(linear(e, bar, e2, fin), O, A, gsz=(G, 1, 1), lsz=(L, 1, 1))
  np.testing.assert_array_equal(O, A.reshape(G, L * K).sum(axis=1))

def matmul_with_locals(N: int = 16, T: int = 4) -> list[UOp]:
  """C = A @ B (N x N, float32): one workgroup per T x T tile of C, tiles of A and B staged through shared memory."""
  C, A, B = gbuf(N * N, 0), gbuf(N * N, 1), gbuf(N * N, 2)
  gx, gy, lx, ly = special(N // T, "gidx0"), special(N // T, "gidx1"), special(T, "lidx0"), special(T, "lidx1")
  row, col = gy * c(T) + ly, gx * c(T) + lx
  la, lb, acc = lbuf(T * T, 0), lbuf(T * T, 1), reg(1, 0)
  init = acc.index(c(0)).store(c(0.0, dtypes.float32))
  kt = rng(N // T, 0, AxisType.REDUCE)
  sa = la.index(ly * c(T) + lx).store(A.index(row * c(N) + kt * c(T) + lx).load())
  sb = lb.index(ly * c(T) + lx).store(B.index((kt * c(T) + ly) * c(N) + col).load())
  b1 = barrier(UOp.group(sa, sb))
  k = rng(T, 1, AxisType.REDUCE)
  cur = acc.after(init, kt, k).index(c(0))
  prod_ = la.after(b1).index(ly * c(T) + k).load() * lb.after(b1).index(k * c(T) + lx).load()
  inner = cur.store(cur.load() + prod_).end(k)
  b2 = barrier(inner)
  outer = b2.end(kt)
  fin = C.index(row * c(N) + col).store(acc.after(outer).index(c(0)).load())
  return linear(init, kt, sa, sb, b1, inner, b2, outer, fin)

def test_matmul_with_locals_and_barriers():
  N, T = 16, 4
  rs = np.random.default_rng(2)
  A, B = rs.integers(-4, 5, (N, N)).astype(np.float32), rs.integers(-4, 5, (N, N)).astype(np.float32)
  O = np.zeros(N * N, np.float32)
  run(matmul_with_locals(N, T), O, A.ravel(), B.ravel(), gsz=(N // T, N // T, 1), lsz=(T, T, 1))
  np.testing.assert_array_equal(O.reshape(N, N), A @ B)

# ---- errors ----

def test_out_of_bounds_load_names_kernel_buffer_index_and_thread():
  out, a = gbuf(8, 0), gbuf(8, 1)
  gid, lid = special(2, "gidx0"), special(4, "lidx0")
  st = out.index(gid * c(4) + lid).store(a.index(gid * c(4) + lid + c(1)).load())
  with pytest.raises(EmulatedKernelError, match=r"kernel test_kernel.*out-of-bounds LOAD of global buffer 1 \(size 8\) at index 8 "
                                               r"by thread gidx=\(1, 0, 0\) lidx=\(3, 0, 0\)"):
    run(linear(st), np.zeros(8, np.float32), np.zeros(8, np.float32), gsz=(2, 1, 1), lsz=(4, 1, 1))

def test_out_of_bounds_store_is_reported_and_negative_index_too():
  out = gbuf(4, 0, i32)
  lid = special(4, "lidx0")
  st = out.index(lid - c(1)).store(lid)
  O = np.zeros(4, np.int32)
  with pytest.raises(EmulatedKernelError, match=r"out-of-bounds STORE of global buffer 0 \(size 4\) at index -1 by thread "
                                               r"gidx=\(0, 0, 0\) lidx=\(0, 0, 0\)"):
    run(linear(st), O, lsz=(4, 1, 1))

def test_out_of_bounds_local_access_is_reported():
  out, lm = gbuf(4, 0), lbuf(4, 0)
  lid = special(4, "lidx0")
  bar = barrier(lm.index(lid * c(2)).store(c(1.0, dtypes.float32)))
  st = out.index(lid).store(lm.after(bar).index(c(0)).load())
  with pytest.raises(EmulatedKernelError, match=r"out-of-bounds STORE of local buffer 0 \(size 4\) at index 4 by thread .*lidx=\(2, 0, 0\)"):
    run(linear(bar, st), np.zeros(4, np.float32), lsz=(4, 1, 1))

def test_uninitialised_local_read_is_reported():
  out, lm = gbuf(4, 0), lbuf(8, 0)
  lid = special(4, "lidx0")
  bar = barrier(lm.index(lid).store(c(1.0, dtypes.float32)))  # writes 0..3 only
  st = out.index(lid).store(lm.after(bar).index(lid + c(4)).load())
  with pytest.raises(EmulatedKernelError, match=r"LOAD of uninitialised local buffer 0 at index 4 by thread gidx=\(0, 0, 0\) lidx=\(0, 0, 0\)"):
    run(linear(bar, st), np.zeros(4, np.float32), lsz=(4, 1, 1))

def test_barrier_inside_if_is_reported_not_a_hang():
  out, lm = gbuf(8, 0), lbuf(8, 0)
  lid = special(8, "lidx0")
  st = lm.index(lid).store(c(2.0, dtypes.float32))
  iff = UOp(Ops.IF, src=(lid < c(3),))
  bar = barrier(st)
  endif = UOp(Ops.ENDIF, src=(iff,))
  fin = out.index(lid).store(lm.after(bar).index(lid).load())
  uops = linear(st, iff.src[0])
  uops += [iff, bar, endif] + [u for u in linear(fin) if u not in uops and u is not bar]
  with pytest.raises(EmulatedKernelError, match=r"BARRIER in divergent control flow: thread gidx=\(0, 0, 0\) lidx=\(0, 0, 0\) reached it "
                                               r"but thread gidx=\(0, 0, 0\) lidx=\(3, 0, 0\) of the same workgroup did not"):
    run(uops, np.zeros(8, np.float32), lsz=(8, 1, 1))

def test_barrier_in_loop_with_thread_dependent_bound_is_reported():
  lm = lbuf(4, 0)
  lid = special(4, "lidx0")
  r = rng(lid + c(1), 0)
  bar = barrier(lm.index(lid).store(r.cast(dtypes.float32)))
  uops = linear(bar.end(r))
  with pytest.raises(EmulatedKernelError, match=r"BARRIER in divergent control flow: thread gidx=\(0, 0, 0\) lidx=\(1, 0, 0\) reached it but "
                                               r"thread gidx=\(0, 0, 0\) lidx=\(0, 0, 0\) .*\(3 of 4 threads arrived"):
    run(uops, lsz=(4, 1, 1))

def test_uniform_barrier_in_uniform_if_is_fine():
  # a whole workgroup skipping a barrier is not divergence
  out, lm = gbuf(8, 0), lbuf(4, 0)
  gid, lid = special(2, "gidx0"), special(4, "lidx0")
  st = lm.index(lid).store(gid.cast(dtypes.float32))
  iff = UOp(Ops.IF, src=(gid.eq(c(1)),))
  bar = barrier(st)
  endif = UOp(Ops.ENDIF, src=(iff,))
  fin = out.index(gid * c(4) + lid).store(lm.after(bar).index(c(3) - lid).load())
  uops = linear(st, iff.src[0])
  uops += [iff, bar, endif] + [u for u in linear(fin) if u not in uops and u is not bar]
  O = np.zeros(8, np.float32)
  run(uops, O, gsz=(2, 1, 1), lsz=(4, 1, 1))
  np.testing.assert_array_equal(O, [0, 0, 0, 0, 1, 1, 1, 1])

def test_launch_limits_follow_emulate():
  out = gbuf(1, 0)
  uops = linear(out.index(c(0)).store(c(1.0, dtypes.float32)))
  prg = PythonProgram("k", PythonCompiler().compile(PythonRenderer().render(uops)))
  O = np.zeros(1, np.float32)
  with pytest.raises(ValueError, match=r"local_size \(2048, 1, 1\) exceeds"): prg(O, local_size=(2048, 1, 1))
  with Context(EMULATE="NV"):
    with pytest.raises(ValueError, match="EMULATE target NV"): prg(O, local_size=(1, 1, 128))
  with Context(EMULATE="AMD"): prg(O, local_size=(1, 1, 128))
  assert O[0] == 1.0

def test_shared_memory_limit():
  lm = lbuf(40000 // 4, 0)
  uops = linear(lm.index(special(4, "lidx0")).store(c(1.0, dtypes.float32)))
  prg = PythonProgram("k", PythonCompiler().compile(PythonRenderer().render(uops)))
  with Context(EMULATE="AMD"): prg(local_size=(4, 1, 1))
  with Context(EMULATE="NV"): prg(local_size=(4, 1, 1))
  with pytest.raises(ValueError, match="40000 bytes of local memory exceed the 32768"): prg(local_size=(4, 1, 1))

def test_define_var_out_of_bounds_rejected():
  n = UOp.variable("n", 1, 8, dtype=i32)
  out = gbuf(1, 0, i32)
  uops = linear(out.index(c(0)).store(n))
  O = np.zeros(1, np.int32)
  with pytest.raises(ValueError, match=r"variable n = 9 is outside its bounds \[1, 8\]"): run(uops, O, vals=(9,))
  run(uops, O, vals=(8,))
  assert O[0] == 8

# ---- kernel ASTs through codegen: PYTHON against CPU (fuzz/oracles) ----

def kernel_gbuf(n: int, i: int, dt=dtypes.float32) -> UOp: return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)
def idx(v: int) -> UOp: return UOp.const(dtypes.index, v)

def elementwise_ast(n: int = 37) -> UOp:
  out, a, b = kernel_gbuf(n, 0), kernel_gbuf(n, 1), kernel_gbuf(n, 2)
  r = UOp.range(n, 0)
  x, y = a.index(r).load(), b.index(r).load()
  return UOp.sink(out.index(r).store((x * y + x.exp2()).maximum(y)).end(r))

def sum_ast(rows: int = 6, k: int = 64, dt=dtypes.float32) -> UOp:
  out, a = kernel_gbuf(rows, 0, dt), kernel_gbuf(rows * k, 1, dt)
  r, red = UOp.range(rows, 0), UOp.range(k, 1, AxisType.REDUCE)
  return UOp.sink(out.index(r).store(a.index(r * idx(k) + red).load().reduce(red, arg=Ops.ADD)).end(r))

def matmul_ast(n: int = 16) -> UOp:
  C, A, B = kernel_gbuf(n * n, 0), kernel_gbuf(n * n, 1), kernel_gbuf(n * n, 2)
  i, j, k = UOp.range(n, 0), UOp.range(n, 1), UOp.range(n, 2, AxisType.REDUCE)
  acc = (A.index(i * idx(n) + k).load() * B.index(k * idx(n) + j).load()).reduce(k, arg=Ops.ADD)
  return UOp.sink(C.index(i * idx(n) + j).store(acc).end(i, j))

def masked_ast(n: int = 20) -> UOp:
  # out[i] = a[i - 4] where 4 <= i < 14, else 0 (a padded load)
  out, a = kernel_gbuf(n, 0, i32), kernel_gbuf(10, 1, i32)
  r = UOp.range(n, 0)
  valid = (r < idx(14)) & (r >= idx(4))
  return UOp.sink(out.index(r).store(a.index((r - idx(4)).valid(valid)).load() * UOp.const(i32, 3)).end(r))

def opts_of(*spec):
  from tinygrad.codegen.opt import Opt, OptOps
  return [Opt(getattr(OptOps, op), axis, arg) for op, axis, arg in spec]

DIFF_CASES = [
  ("elementwise", elementwise_ast, None), ("elementwise_local_upcast", lambda: elementwise_ast(40), (("LOCAL", 0, 4), ("UPCAST", 0, 2))),
  ("sum", sum_ast, None), ("sum_grouptop", sum_ast, (("GROUPTOP", 0, 16),)), ("sum_group_local", sum_ast, (("LOCAL", 0, 2), ("GROUP", 0, 8))),
  ("matmul", matmul_ast, None), ("matmul_locals", matmul_ast, (("LOCAL", 0, 4), ("LOCAL", 1, 4), ("UPCAST", 0, 2))),
  ("matmul_unroll", matmul_ast, (("UNROLL", 0, 4), ("UPCAST", 1, 4))), ("masked", masked_ast, None),
]

@pytest.mark.parametrize("name,make,opts", DIFF_CASES, ids=[c[0] for c in DIFF_CASES])
def test_kernel_ast_on_python_matches_cpu(name, make, opts):
  oracles = pytest.importorskip("fuzz.oracles.differential")
  pytest.importorskip("tinygrad.codegen")
  from tinygrad.device import Device, DeviceOpenError
  try: Device["CPU"]
  except DeviceOpenError as e: pytest.skip(f"no CPU device: {e}")
  ast = make()
  res = oracles.differential(ast, seed=7, opts={"PYTHON": opts_of(*opts)} if opts else None)
  assert set(res) == {"CPU", "PYTHON"}
  # and against numpy, so that a bug shared by both backends still shows
  inp = oracles.random_inputs(ast, seed=7)
  ref = {"elementwise": lambda: np.maximum(inp[1] * inp[2] + np.exp2(inp[1]), inp[2]),
         "sum": lambda: inp[1].reshape(6, 64).sum(axis=1),
         "matmul": lambda: inp[1].reshape(16, 16) @ inp[2].reshape(16, 16),
         "masked": lambda: np.concatenate([np.zeros(4), inp[1] * 3, np.zeros(6)]).astype(np.int32)}[name.split("_")[0]]()
  assert oracles.compare_outputs(res["PYTHON"][0], ref.ravel(), dtypes.float32 if name != "masked" else i32) is None

def test_group_reduce_on_python_uses_locals_and_barriers():
  pytest.importorskip("tinygrad.codegen")
  from tinygrad.codegen import get_program
  prg = get_program(sum_ast(), PythonRenderer(), opts_of(("GROUPTOP", 0, 16)))
  ops = [u.op for u in prg.uops]
  assert Ops.DEFINE_LOCAL in ops and Ops.BARRIER in ops and prg.local_size is not None

def test_vector_register_is_indexed_by_whole_vectors():
  f4 = dtypes.float32.vec(4)
  out = gbuf(8, 0)
  acc = UOp(Ops.DEFINE_REG, f4.ptr(2, AddrSpace.REG), arg=0)
  vec = lambda *v: UOp.vectorize(*[c(float(x), dtypes.float32) for x in v])
  s0 = acc.index(c(0)).store(vec(1, 2, 3, 4))
  s1 = acc.index(c(1)).store(vec(5, 6, 7, 8))
  both = acc.after(s0, s1)
  st0 = UOp(Ops.INDEX, out.dtype.vec(4), (out, c(0))).store(both.index(c(1)).load())
  st1 = UOp(Ops.INDEX, out.dtype.vec(4), (out, c(4))).store(both.index(c(0)).load())
  O = np.zeros(8, np.float32)
  run(linear(s0, s1, st0, st1), O)
  np.testing.assert_array_equal(O, [5, 6, 7, 8, 1, 2, 3, 4])

def test_every_program_op_has_an_interpreter_rule():
  from tinygrad.runtime.ops_python import HANDLERS
  from tinygrad.uop import GroupOp
  program_ops = {Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_LOCAL, Ops.DEFINE_REG, Ops.SPECIAL, Ops.RANGE, Ops.END, Ops.INDEX,
                 Ops.LOAD, Ops.STORE, Ops.IF, Ops.ENDIF, Ops.BARRIER, Ops.AFTER, Ops.CAST, Ops.BITCAST, Ops.CONST, Ops.GEP,
                 Ops.VECTORIZE, Ops.GROUP, Ops.WMMA} | GroupOp.ALU
  assert sorted(op.name for op in program_ops - set(HANDLERS)) == []

def test_uninitialised_register_read_is_reported():
  out, acc = gbuf(2, 0), reg(1, 0)
  lid = special(2, "lidx0")
  st = out.index(lid).store(acc.index(c(0)).load())
  with pytest.raises(EmulatedKernelError, match=r"LOAD of uninitialised register 0 at index 0 by thread gidx=\(0, 0, 0\) lidx=\(0, 0, 0\)"):
    run(linear(st), np.zeros(2, np.float32), lsz=(2, 1, 1))

def test_define_vars_bind_in_name_order_like_program_spec():
  zeta, alpha = UOp.variable("zeta", 0, 100, dtype=i32), UOp.variable("alpha", 0, 100, dtype=i32)
  out = gbuf(2, 0, i32)
  uops = linear(out.index(c(0)).store(zeta), out.index(c(1)).store(alpha))
  assert [u.arg[0] for u in uops if u.op is Ops.DEFINE_VAR] == ["zeta", "alpha"]
  O = np.zeros(2, np.int32)
  run(uops, O, vals=(7, 42))  # (alpha, zeta): ProgramSpec.vars are sorted by name
  np.testing.assert_array_equal(O, [42, 7])

def test_global_buffers_are_passed_in_number_order_even_when_sparse():
  out, src = gbuf(4, 0), gbuf(4, 3)
  lid = special(4, "lidx0")
  O, A = np.zeros(4, np.float32), np.arange(4, dtype=np.float32) + 10
  run(linear(out.index(lid).store(src.index(lid).load())), O, A, lsz=(4, 1, 1))
  np.testing.assert_array_equal(O, A)

def test_write_write_race_in_one_step_is_reported_equal_values_are_not():
  out = gbuf(2, 0, i32)
  lid = special(4, "lidx0")
  O = np.zeros(2, np.int32)
  run(linear(out.index(lid // c(2)).store(lid // c(2) + c(5))), O, lsz=(4, 1, 1))  # pairs store the same value
  np.testing.assert_array_equal(O, [5, 6])
  with pytest.raises(EmulatedKernelError, match=r"write-write race on global buffer 0 at index 0: threads gidx=\(0, 0, 0\) lidx=\(0, 0, 0\) "
                                               r"and gidx=\(0, 0, 0\) lidx=\(1, 0, 0\) store different values"):
    run(linear(out.index(lid // c(2)).store(lid)), O, lsz=(4, 1, 1))

@pytest.mark.parametrize("target", ["NV", "AMD", "CPU"])
@pytest.mark.parametrize("make", [sum_ast, matmul_ast, masked_ast], ids=["sum", "matmul", "masked"])
def test_other_targets_lowering_interpreted_on_python_matches_cpu(target, make):
  oracles = pytest.importorskip("fuzz.oracles.differential")
  pytest.importorskip("tinygrad.codegen")
  if target == "CPU":
    cstyle = pytest.importorskip("tinygrad.renderer.cstyle")
    renderer = cstyle.CRenderer()
  else: renderer = PythonRenderer(target)
  ast = make()
  inp = oracles.random_inputs(ast, seed=11)
  got = oracles.run_lowered_on_python(ast, renderer, inp)
  ref = oracles.run_ast_on("CPU", ast, inp)
  out_dt = [u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL and u.arg == 0][0].dtype.base
  assert oracles.compare_outputs(got[0], ref[0], out_dt) is None

def test_cpu_lowering_with_thread_axis_runs_on_python():
  oracles = pytest.importorskip("fuzz.oracles.differential")
  cstyle = pytest.importorskip("tinygrad.renderer.cstyle")
  from tinygrad.codegen import get_program
  from tinygrad.codegen.opt import Opt, OptOps
  ast, opts = sum_ast(32, 16), [Opt(OptOps.THREAD, 0, 4)]
  # NOTE: the THREAD count a kernel may use is the renderer's (the CPU device passes its own), not this machine's
  prg = get_program(ast, cstyle.CRenderer(threads=4), opts)
  assert [u.arg for u in prg.uops if u.op is Ops.SPECIAL] == ["core_id"] and prg.global_size[0] == 4
  inp = oracles.random_inputs(ast, seed=2)
  got = oracles.run_lowered_on_python(ast, cstyle.CRenderer(threads=4), inp, opts=opts)
  assert oracles.compare_outputs(got[0], inp[1].reshape(32, 16).sum(axis=1), dtypes.float32) is None

# ---- random elementwise kernels: PYTHON and CPU agree on C semantics ----

from hypothesis import given, settings, strategies as st  # noqa: E402

INT_BINOPS = [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x // (y | 1), lambda x, y: x % (y | 1),
              lambda x, y: x.maximum(y), lambda x, y: x ^ y, lambda x, y: x & y, lambda x, y: x | y,
              lambda x, y: (x < y).where(x, y), lambda x, y: x.eq(y).where(y, x)]
FLOAT_BINOPS = [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x.maximum(y),
                lambda x, y: UOp(Ops.FDIV, x.dtype, (x, y)), lambda x, y: (x < y).where(x, y), lambda x, y: x.ne(y).where(x, -y)]

def expr_strategy(dt):
  ops = INT_BINOPS if dtypes.is_int(dt) else FLOAT_BINOPS
  leaf = st.sampled_from(["a", "b", "c1", "c2"])
  return st.recursive(leaf, lambda kids: st.tuples(st.sampled_from(range(len(ops))), kids, kids), max_leaves=6)

def build_expr(tree, env, ops):
  if isinstance(tree, str): return env[tree]
  k, l, r = tree
  return ops[k](build_expr(l, env, ops), build_expr(r, env, ops))

@settings(max_examples=25, deadline=None)
@given(dt=st.sampled_from([dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.float32, dtypes.float64]), data=st.data())
def test_random_elementwise_kernels_python_matches_cpu(dt, data):
  oracles = pytest.importorskip("fuzz.oracles.differential")
  pytest.importorskip("tinygrad.codegen")
  tree = data.draw(expr_strategy(dt))
  n = 23
  out, a, b = kernel_gbuf(n, 0, dt), kernel_gbuf(n, 1, dt), kernel_gbuf(n, 2, dt)
  r = UOp.range(n, 0)
  env = {"a": a.index(r).load(), "b": b.index(r).load(), "c1": UOp.const(dt, 3), "c2": UOp.const(dt, -2 if not dtypes.is_unsigned(dt) else 5)}
  val = build_expr(tree, env, INT_BINOPS if dtypes.is_int(dt) else FLOAT_BINOPS)
  if val.op is Ops.LOAD or val.op is Ops.CONST: val = val + UOp.const(dt, 1)
  ast = UOp.sink(out.index(r).store(val).end(r))
  oracles.differential(ast, seed=data.draw(st.integers(0, 1000)))

CAST_PAIRS = [(dtypes.float32, dtypes.int8), (dtypes.float32, dtypes.uint8), (i32, dtypes.float16), (dtypes.float32, dtypes.bfloat16),
              (dtypes.float32, dtypes.fp8e4m3), (dtypes.fp8e5m2, dtypes.float32), (dtypes.bfloat16, i32), (dtypes.bool, dtypes.float32),
              (dtypes.float32, dtypes.bool), (dtypes.uint64, dtypes.float32), (dtypes.int64, dtypes.int8), (dtypes.float64, dtypes.float16)]

@pytest.mark.parametrize("src,dst", CAST_PAIRS, ids=str)
def test_casts_python_matches_cpu(src, dst):
  oracles = pytest.importorskip("fuzz.oracles.differential")
  pytest.importorskip("tinygrad.codegen")
  n = 64
  out, a = kernel_gbuf(n, 0, dst), kernel_gbuf(n, 1, src)
  r = UOp.range(n, 0)
  ast = UOp.sink(out.index(r).store(a.index(r).load().cast(dst)).end(r))
  rs = np.random.default_rng(1)
  vals = rs.normal(0, 30, n) if dtypes.is_float(src) else rs.integers(0 if dtypes.is_unsigned(src) else -100, 100, n)
  if dtypes.is_float(src) and dtypes.is_int(dst): vals = np.clip(vals, 0 if dtypes.is_unsigned(dst) else -100, 100)  # else undefined in C
  oracles.differential(ast, {1: oracles.storage_of(vals, src)})

def test_vector_load_partly_out_of_bounds_names_the_first_bad_element():
  out, a = gbuf(4, 0), gbuf(10, 1)
  f4 = dtypes.float32.vec(4)
  v = UOp(Ops.INDEX, a.dtype.vec(4), (a, c(8))).load(dtype=f4)
  st = UOp(Ops.INDEX, out.dtype.vec(4), (out, c(0))).store(v)
  with pytest.raises(EmulatedKernelError, match=r"out-of-bounds LOAD of global buffer 1 \(size 10\) at index 10 by thread"):
    run(linear(st), np.zeros(4, np.float32), np.zeros(10, np.float32))
