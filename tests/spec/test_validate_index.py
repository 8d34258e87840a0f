"""validate_index: z3 proves LOAD/STORE indices in bounds under their gates, or returns a witness."""
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.helpers import cdiv, cmod
from spec import validate_index, IndexOutOfBounds

def g(i, size, dt=dtypes.float32): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(size), arg=i)
def zero(): return UOp.const(dtypes.float32, 0.0)

def test_in_bounds_kernel_proves():
  r0, r1 = UOp.range(4, 0), UOp.range(6, 1)
  validate_index(UOp.sink(g(0, 24).index(r0 * 6 + r1).store(g(1, 24).index(r1 * 4 + r0).load()).end(r0, r1)))

def test_off_by_one_store_reports_model():
  r = UOp.range(16, 0)
  st = g(0, 16).index(r + 1).store(zero())
  with pytest.raises(IndexOutOfBounds) as e: validate_index(UOp.sink(st.end(r)))
  assert e.value.node is st and e.value.index == 16 and e.value.model == {"r0": 15}
  assert "r0=15" in str(e.value) and "size 16" in str(e.value)

def test_negative_index_found():
  r = UOp.range(8, 0)
  ld = g(1, 8).index(r - 1).load()
  with pytest.raises(IndexOutOfBounds) as e: validate_index(UOp.sink(g(0, 8).index(r).store(ld).end(r)))
  assert e.value.node is ld and e.value.index == -1 and e.value.model["r0"] == 0

def test_kernel_mask_guards_the_access():
  r = UOp.range(20, 0)
  # reading in[r-2] for 2 <= r < 18 (a padded load): in bounds only because of the mask
  ld = g(1, 16).index((r - 2).valid((r >= 2) & (r < 18))).load()
  validate_index(UOp.sink(g(0, 20).index(r).store(ld).end(r)))
  bad = g(1, 16).index((r - 2).valid(r >= 2)).load()
  with pytest.raises(IndexOutOfBounds) as e: validate_index(UOp.sink(g(0, 20).index(r).store(bad).end(r)))
  assert e.value.index >= 16 and e.value.model["r0"] >= 18

def test_program_gate_and_if_block_guard_the_access():
  i32 = lambda v: UOp.const(dtypes.int32, v)
  r = UOp.range(i32(10), 0, dtype=dtypes.int32)
  gate = r < i32(8)
  ld = g(1, 8).index(r, gate).load(zero())
  iff = UOp(Ops.IF, dtypes.void, (gate,))
  st = g(0, 8).index(r).store(ld)
  prog = [g(0, 8), g(1, 8), i32(10), r, i32(8), gate, g(1, 8).index(r, gate), zero(), ld, iff, g(0, 8).index(r), st,
          UOp(Ops.ENDIF, dtypes.void, (iff,)), st.end(r)]
  validate_index(prog)
  # the same store outside its IF block can run for r = 8 and 9
  with pytest.raises(IndexOutOfBounds) as e: validate_index(prog[:9] + [g(0, 8).index(r), st, st.end(r)])
  assert e.value.node is st and e.value.model["r0"] in (8, 9)

@pytest.mark.parametrize("a,b", [(-7, 2), (7, -2), (-7, -2), (7, 2)])
def test_division_truncates_like_c(a, b):
  x = UOp.variable("x", a, a)
  q, m = cdiv(a, b), cmod(a, b)
  # an index that is exactly in bounds with C semantics, one past the end with floor semantics when a and b differ in sign
  size = q + 11
  ld = g(1, size).index((x // b) + 10).load()
  validate_index(UOp.sink(g(0, 1).index(UOp.const(dtypes.index, 0)).store(ld)))
  size_m = m + 4
  ldm = g(1, size_m).index((x % b) + 3).load()
  validate_index(UOp.sink(g(0, 1).index(UOp.const(dtypes.index, 0)).store(ldm)))
  # one element smaller: now out of bounds, which floor division (one lower when the signs differ) would miss
  for sz, ix in ((q + 10, (x // b) + 10), (m + 3, (x % b) + 3)):
    with pytest.raises(IndexOutOfBounds) as e: validate_index(UOp.sink(g(0, 1).index(UOp.const(dtypes.index, 0)).store(g(1, sz).index(ix).load())))
    assert e.value.index == sz

def test_define_var_bounds_are_used():
  n = UOp.variable("n", 1, 32)
  r = UOp.range(n, 0)
  validate_index(UOp.sink(g(0, 32).index(r).store(zero()).end(r)))
  with pytest.raises(IndexOutOfBounds) as e: validate_index(UOp.sink(g(0, 31).index(r).store(zero()).end(r)))
  assert (e.value.index, e.value.model["r0"], e.value.model["n"]) == (31, 31, 32)

def test_loaded_int_is_a_free_bounded_value():
  r = UOp.range(4, 0)
  idx = g(1, 4, dtypes.uint8).index(r).load().cast(dtypes.index)
  validate_index(UOp.sink(g(0, 4).index(r).store(g(2, 256).index(idx).load()).end(r)))
  with pytest.raises(IndexOutOfBounds) as e: validate_index(UOp.sink(g(0, 4).index(r).store(g(2, 255).index(idx).load()).end(r)))
  assert e.value.index == 255

def test_special_and_locals_and_vector_access():
  i32 = lambda v: UOp.const(dtypes.int32, v)
  lid = UOp.special(i32(16), "lidx0", dtype=dtypes.int32)
  loc = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(64, AddrSpace.LOCAL), arg=0)
  vec = UOp(Ops.INDEX, dtypes.float32.ptr(64, AddrSpace.LOCAL).vec(4), (loc, lid * i32(4)))
  st = vec.store(UOp.const(dtypes.float32.vec(4), 1.0))
  validate_index([loc, i32(16), lid, i32(4), lid * i32(4), vec, UOp.const(dtypes.float32.vec(4), 1.0), st])
  vec2 = UOp(Ops.INDEX, dtypes.float32.ptr(64, AddrSpace.LOCAL).vec(4), (loc, lid * i32(4) + i32(1)))
  with pytest.raises(IndexOutOfBounds) as e: validate_index([vec2.store(UOp.const(dtypes.float32.vec(4), 1.0))])
  assert e.value.model["lidx0"] == 15 and "[61..64]" in str(e.value)

def test_register_accumulator_through_after():
  acc = UOp(Ops.DEFINE_REG, dtypes.float32.ptr(1, AddrSpace.REG), arg=0)
  r = UOp.range(UOp.const(dtypes.int32, 4), 0, AxisType.REDUCE, dtype=dtypes.int32)
  init = acc.index(UOp.const(dtypes.int32, 0)).store(zero())
  validate_index([acc.after(init, r).index(UOp.const(dtypes.int32, 0)).load()])
  with pytest.raises(IndexOutOfBounds): validate_index([acc.after(init, r).index(UOp.const(dtypes.int32, 1)).load()])

def test_proofs_are_cached(monkeypatch):
  import sys
  vi = sys.modules["spec.validate_index"]
  r = UOp.range(16, 0)
  sink = UOp.sink(g(0, 16).index(r).store(g(1, 16).index(r).load()).end(r))
  validate_index(sink)
  monkeypatch.setattr(vi, "_out_of_bounds", None)  # any new proof would crash
  validate_index(sink)

def test_masked_vector_load_is_proved_per_lane():
  # a masked load of 4 lanes at 4*r of a 10-element buffer: lane j reads element 4*r+j only where 4*r+j < 10
  i32 = lambda v: UOp.const(dtypes.int32, v)
  r = UOp.range(i32(3), 0, dtype=dtypes.int32)
  base = r * i32(4)
  def masked(limit: int) -> UOp:
    gate = UOp.vectorize(*[base + i32(j) < i32(limit) for j in range(4)])
    vec = UOp(Ops.INDEX, dtypes.float32.ptr(10).vec(4), (g(1, 10), base, gate))
    return vec.load(UOp.const(dtypes.float32.vec(4), 0.0), dtype=dtypes.float32.vec(4))
  validate_index([masked(10)])
  # one lane too many: r = 2 reads element 10 in lane 2
  with pytest.raises(IndexOutOfBounds) as e: validate_index([masked(11)])
  assert e.value.model["r0"] == 2 and "[10] (lane 2)" in str(e.value)

def test_proofs_from_many_threads_at_once():
  # BEAM validates its candidates on a thread pool; z3's context is shared and not thread-safe (a race crashed in
  # Z3_dec_ref), so proofs are serialized: every thread's kernels prove and its bad index is still found
  from concurrent.futures import ThreadPoolExecutor
  def work(t: int) -> int:
    found = 0
    for k in range(40):
      n = 5 + (t * 40 + k) % 23
      r0, r1 = UOp.range(n, 0), UOp.range(3, 1)
      validate_index(UOp.sink(g(0, 3 * n).index(r0 * 3 + r1).store(g(1, 3 * n).index(r1 * n + r0).load()).end(r0, r1)))
      r = UOp.range(n, 0)
      try: validate_index(UOp.sink(g(0, n).index(r + 1).store(zero()).end(r)))
      except IndexOutOfBounds as e: found += e.index == n
    return found
  with ThreadPoolExecutor(max_workers=4) as pool: assert list(pool.map(work, range(4))) == [40] * 4
