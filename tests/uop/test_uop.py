"""The UOp node: hash-consing, freeing, constants' keys, graph walks, substitute, ranges, bounds, metadata."""
import gc, math, pickle
import pytest
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp, UOpMetaClass, Metadata, consumer_map, argkey
from tinygrad.dtype import dtypes, Invalid

def _in_cache(op, dtype, src, arg, tag=None) -> bool:
  return (op, dtype, src, argkey(arg), tag) in UOpMetaClass.ucache

# ---- hash-consing ----

def test_equal_construction_is_same_object():
  a = UOp.variable("hc_a", 0, 9)
  assert UOp.variable("hc_a", 0, 9) is a
  assert (a + 1) is (a + 1)
  assert UOp(Ops.ADD, dtypes.index, (a, a.const_like(1))) is a + 1
  assert (a + 1) is not (a + 2)
  assert UOp.variable("hc_a", 0, 8) is not a

def test_dtype_arg_and_tag_are_part_of_the_key():
  assert UOp.const(dtypes.int32, 1) is not UOp.const(dtypes.int64, 1)
  # True == 1 == 1.0 in Python, but they are different constants: the key keeps the type (and a float's bits)
  assert len({argkey(True), argkey(1), argkey(1.0), argkey(-0.0), argkey(0.0)}) == 5
  assert argkey((1, True)) != argkey((1, 1))
  a = UOp.variable("hc_tag", 0, 3)
  assert a.rtag("t") is not a and a.rtag("t") is a.rtag("t") and a.rtag("t").replace(tag=None) is a

def test_float_consts_key_by_bits():
  assert UOp.const(dtypes.float32, 0.0) is not UOp.const(dtypes.float32, -0.0)
  assert math.copysign(1.0, UOp.const(dtypes.float32, -0.0).arg) == -1.0
  n1, n2 = float("nan"), float("nan")
  assert n1 is not n2
  assert UOp.const(dtypes.float32, n1) is UOp.const(dtypes.float32, n2)
  assert UOp.const(dtypes.float32, 1.0) is UOp.const(dtypes.float32, 1)

def test_unreferenced_nodes_are_freed():
  import weakref
  v = UOp.variable("hc_free_me", 0, 5)
  key_args = (Ops.DEFINE_VAR, dtypes.index, (), ("hc_free_me", 0, 5))
  w = v * 7
  assert _in_cache(*key_args) and _in_cache(Ops.MUL, dtypes.index, (v, v.const_like(7)), None)
  refs = [weakref.ref(v), weakref.ref(w)]
  n_before = len(UOpMetaClass.ucache)
  del w, v
  gc.collect()
  assert all(r() is None for r in refs)
  assert not _in_cache(*key_args)
  assert len(UOpMetaClass.ucache) <= n_before - 2
  # and building it again gives a fresh, working node
  assert UOp.variable("hc_free_me", 0, 5).vmax == 5

def test_immutable_and_replace():
  a = UOp.variable("hc_imm", 0, 3)
  with pytest.raises(AttributeError): a.arg = 5  # type: ignore[misc]
  b = a + 1
  assert b.replace(op=Ops.MUL) is a * 1
  with pytest.raises(TypeError): b.replace(bogus=1)

def test_pickle_gives_the_live_object():
  a = UOp.variable("hc_pickle", 0, 3) * 2
  assert pickle.loads(pickle.dumps(a)) is a

# ---- graph walks ----

def test_toposort_sources_first_each_once():
  x = UOp.variable("ts_x", 0, 3)
  y = x + 1
  z = y * y + x
  order = list(z.toposort())
  assert order[-1] is z
  assert len(order) == len(set(order))
  pos = {u: i for i, u in enumerate(order)}
  for u in order:
    for s in u.src: assert pos[s] < pos[u]
  assert set(order) == {x, x.const_like(1), y, y * y, z}

def test_toposort_gate_stops_walk():
  x = UOp.variable("ts_g", 0, 3)
  y = (x + 1) * 2
  assert x not in y.toposort(gate=lambda u: u.op is not Ops.ADD)
  assert (x + 1) in y.toposort(gate=lambda u: u.op is not Ops.ADD)

def _postorder(root, gate=None):
  # the reference: recursive, sources in order, each node after its sources, once
  out = {}
  def walk(u):
    if u in out: return
    if gate is None or gate(u):
      for s in u.src: walk(s)
    out[u] = None
  walk(root)
  return list(out)

def test_toposort_order_is_source_order_postorder_with_sharing():
  x, y = UOp.variable("ts_o_x", 0, 3), UOp.variable("ts_o_y", 0, 3)
  a = x * y
  b = (a + x) * (y + a)
  root = UOp.sink(b, a.maximum(b), x)
  assert list(root.toposort()) == _postorder(root)
  calls = []
  def gate(u): calls.append(u); return u.op is not Ops.MUL or u is b
  assert list(root.toposort(gate=gate)) == _postorder(root, lambda u: u.op is not Ops.MUL or u is b)
  assert len(calls) == len(set(calls))  # the gate is asked once per node
  assert list(x.toposort(gate=lambda u: False)) == [x]

def test_uop_equality_is_identity():
  # NOTE: graph_rewrite compares rebuilt source tuples with ==, which is "the same nodes" only while UOp has no __eq__
  assert UOp.__eq__ is object.__eq__ and UOp.__ne__ is object.__ne__
  x = UOp.variable("eq_x", 0, 3)
  assert (x + 1, x) == (x + 1, x) and (x + 1,) != (x + 2,)

def test_consumer_map():
  x = UOp.variable("cm_x", 0, 3)
  a, b = x + 1, x * 2
  cm = consumer_map(UOp.sink(a, b))
  assert set(cm[x]) == {a, b} and cm[UOp.sink(a, b)] == []

def test_substitute():
  x, y = UOp.variable("sub_x", 0, 3), UOp.variable("sub_y", 0, 3)
  e = (x + 1) * x
  assert e.substitute({x: y}) is (y + 1) * y
  assert e.substitute({x + 1: y}) is y * x
  assert e.substitute({}) is e
  assert e.substitute({UOp.variable("sub_unused", 0, 1): y}) is e

# ---- ranges ----

def test_ranges_open_and_closed():
  r0, r1 = UOp.range(4, 0), UOp.range(8, 1, AxisType.REDUCE)
  assert r0.arg == (0, AxisType.LOOP) and r0.vmin == 0 and r0.vmax == 3
  v = r0 * 8 + r1
  assert v.ranges == [r0, r1]
  red = v.reduce(r1, arg=Ops.ADD)
  assert red.ranges == [r0]
  buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float.ptr(32), arg=0)
  st = buf.index(v).store(UOp.const(dtypes.float, 1.0))
  assert st.ranges == [r0, r1]
  assert st.end(r0, r1).ranges == []
  assert st.end(r1).ranges == [r0]

def test_range_with_symbolic_end():
  n = UOp.variable("rng_n", 1, 16)
  r = UOp.range(n, 0)
  assert r.vmin == 0 and r.vmax == 15 and r.ranges == [r]

# ---- bounds ----

@pytest.mark.parametrize("build,lo,hi", [
  (lambda x, y: x + y, -5, 15), (lambda x, y: x * y, -50, 50), (lambda x, y: x * -2, -20, 0), (lambda x, y: x // 3, 0, 3),
  (lambda x, y: y // 2, -2, 2), (lambda x, y: x % 4, 0, 3), (lambda x, y: y % 3, -2, 2), (lambda x, y: x.maximum(y), 0, 10),
  (lambda x, y: (x < 3).where(x, y), -5, 10), (lambda x, y: x // -3, -3, 0), (lambda x, y: x % -4, 0, 3),
])
def test_vmin_vmax(build, lo, hi):
  x, y = UOp.variable("b_x", 0, 10), UOp.variable("b_y", -5, 5)
  e = build(x, y)
  assert (e.vmin, e.vmax) == (lo, hi)
  # independent check: every value in the domain lies inside the bounds, and the bounds are reached
  from fuzz.oracles.symbolic import eval_index
  vals = {eval_index(e, {x: a, y: b}) for a in range(0, 11) for b in range(-5, 6)}
  assert lo <= min(vals) and max(vals) <= hi

def test_bounds_of_comparisons_and_masked():
  x = UOp.variable("bc_x", 0, 10)
  assert ((x < 11).vmin, (x < 11).vmax) == (True, True)
  assert ((x < 5).vmin, (x < 5).vmax) == (False, True)
  m = (x < 5).where(x, UOp.invalid())
  assert (m.vmin, m.vmax) == (0, 10)
  assert UOp.invalid().arg is Invalid

@pytest.mark.parametrize("dt", ["fp8e4m3", "float16", "float32"])
def test_a_float_comparison_keeps_the_answer_nan_gives(dt):
  # 0 * x has bounds [0, 0], but x may be NaN: (0 * x) == 0 may be False and != may be True, < may be False (fp8e4m3
  # has no inf, so a load of it had finite bounds; float16 and float32 loads reach inf and 0 * inf left them unknown)
  from tinygrad.uop.symbolic import simplify
  d = getattr(dtypes, dt)
  x = UOp(Ops.DEFINE_GLOBAL, d.ptr(4), arg=0).index(UOp.const(dtypes.index, 0)).load()
  z = UOp.const(d, 0.0) * x
  for c, want in ((z.eq(0.0), (False, True)), (z.ne(0.0), (False, True)), (z < 1.0, (False, True))):
    assert (c.vmin, c.vmax) == want and simplify(c).op is not Ops.CONST, c
  # 0.5 < max(x, 1) is True wherever x is a number, and False where x is NaN (max of NaN is NaN)
  c = UOp.const(d, 0.5) < x.maximum(UOp.const(d, 1.0))
  assert (c.vmin, c.vmax) == (False, True) and simplify(c).op is not Ops.CONST, c
  # constants are never NaN unless they say so: their comparisons still fold
  assert simplify(UOp.const(d, 0.0).eq(UOp.const(d, 0.0))).arg is True

def test_a_nan_constant_bounds_nothing():
  # where(c, nan, x) < 0 is x < 0 where c is False: min/max with a NaN bound gave NaN bounds, and the comparison folded
  from tinygrad.uop.symbolic import simplify
  x = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), arg=0).index(UOp.const(dtypes.index, 0)).load()
  w = (x < 2.0).where(UOp.const(dtypes.float32, math.nan), x)
  assert simplify(w < 0.0).op is not Ops.CONST and simplify(w.ne(1.0)).op is not Ops.CONST
  assert (x.ne(3.0).where(x, UOp.const(dtypes.float32, math.nan)) > 0.0).vmax is True

def test_int32_overflow_bounds_fall_back_to_dtype():
  a = UOp.variable("ov_a", 0, 2**31 - 1, dtypes.int32)
  assert ((a + 1).vmin, (a + 1).vmax) == (-2**31, 2**31 - 1)

@pytest.mark.parametrize("dt", ["fp8e4m3", "fp8e5m2", "float16", "bfloat16", "float32"])
def test_bounds_of_a_cast_into_a_float_are_the_rounded_bounds(dt):
  # a conversion rounds, and may round up past the source's bound: a range up to 248 cast to fp8e4m3 reaches 256, so a
  # cast of that to uint8 must saturate (the C and CUDA renderers skipped saturation on the unrounded bound 248)
  from tinygrad.uop.semantics import fold_cast
  d = getattr(dtypes, dt)
  for lo, hi in ((0, 248), (-(2**24) - 1, 2**24 + 1), (3, 70000), (-(2**40), 2**40 + 7)):
    v = UOp.variable(f"cf_{dt}_{lo}", lo, hi, dtypes.int64)
    c = v.cast(d)
    # every value the cast takes (by the semantics table) lies inside the bounds, and the bounds are values it takes
    xs = set(range(lo, min(hi, lo + 300) + 1)) | set(range(max(lo, hi - 300), hi + 1))
    vals = [fold_cast(x, dtypes.int64, d) for x in xs]
    assert c.vmin <= min(vals) and max(vals) <= c.vmax, (dt, lo, hi, c.vmin, c.vmax)
    assert (c.vmin, c.vmax) == (fold_cast(lo, dtypes.int64, d), fold_cast(hi, dtypes.int64, d))
  assert UOp.variable(f"cf_{dt}_e", 0, 248, dtypes.int64).cast(dtypes.fp8e4m3).vmax == 256.0

@pytest.mark.parametrize("dt", ["fp8e5m2", "float16", "bfloat16", "float32", "float64"])
def test_bounds_of_a_cast_of_an_int_past_float_range_are_infinite(dt):
  # an index's bounds are Python ints and may pass float64's range (the fuzz ledger's prover built one: a product of
  # wide variables); a cast into a float overflowed in float() where IEEE rounds it to the infinity of its sign
  d = getattr(dtypes, dt)
  v = UOp.variable(f"cfi_{dt}", -(10**400), 10**400, dtypes.index)
  assert (v.cast(d).vmin, v.cast(d).vmax) == (-math.inf, math.inf)
  assert UOp.const(dtypes.index, 10**400).cast(d).vmax == math.inf

# ---- metadata ----

def test_metadata_is_outside_the_key():
  x = UOp.variable("md_x", 0, 3)
  e = x + 5
  md = (Metadata("add", "test_uop.py:1"),)
  assert e.set_metadata(md) is e
  assert (x + 5) is e and (x + 5).metadata == md
  assert (x + 6).metadata == ()
  assert UOp.variable("md_x", 0, 3) is x
