"""spec/smt.py, the one UOp -> z3 translation: sorts, validity (Invalid is poison), free values, and the decided meanings.
The op-by-op values are cross-checked against the semantics table in tests/uop/test_semantics_crosscheck.py."""
import pytest
import z3
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from spec import smt

def prove(*claims) -> bool:
  s = z3.Solver()
  s.add(z3.Not(z3.And(*claims)))
  return s.check() == z3.unsat

def test_sorts_follow_the_dtype():
  assert smt.sort_of(dtypes.index) == z3.IntSort() and smt.sort_of(dtypes.bool) == z3.BoolSort()
  assert smt.sort_of(dtypes.uint16) == z3.BitVecSort(16) and smt.sort_of(dtypes.float16) == z3.FPSort(5, 11)
  # the low-precision formats are held in Float32, as the semantics table holds them
  assert smt.sort_of(dtypes.bfloat16) == z3.FPSort(8, 24)

def test_masked_index_is_invalid_where_its_gate_is_false():
  tr = smt.Translator()
  x = UOp.variable("x", 0, 10)
  m = (x < 5).where(x * 2, UOp.invalid())
  v, ok = tr.translate(m + 1)
  xv = tr.vars[x]
  s = z3.Solver()
  s.add(*tr.constraints, xv == 7, ok)
  assert s.check() == z3.unsat
  s = z3.Solver()
  s.add(*tr.constraints, xv == 3, z3.Not(z3.And(ok, v == 7)))
  assert s.check() == z3.unsat

def test_division_by_zero_and_shift_amounts_in_terms():
  tr = smt.Translator()
  a, b = UOp.variable("a", -128, 127, dtypes.int8), UOp.variable("b", -128, 127, dtypes.int8)
  q, r = tr.value(a // b), tr.value(a % b)
  av, bv = tr.vars[a], tr.vars[b]
  assert prove(z3.Implies(bv == 0, z3.And(q == 0, r == av)), av == q * bv + r)
  sh = tr.value(a << b)
  assert prove(z3.Implies(bv == 9, sh == av << 1))

def test_trust_bounds_drops_the_zero_guard_and_records_the_assumption():
  x, d = UOp.variable("x", -50, 50), UOp.variable("d", 1, 7)
  tr = smt.Translator(trust_bounds=True)
  tr.translate(x // d)
  assert len(tr.assumed) == 1
  s = z3.Solver()
  s.add(*tr.constraints, z3.Not(z3.And(*tr.assumed)))
  assert s.check() == z3.unsat
  assert not smt.Translator().assumed

def test_exact_mode_refuses_what_it_cannot_model():
  f = UOp.variable("f", 0, 1, dtypes.float32)
  with pytest.raises(smt.NotModeled): smt.Translator(exact=True).translate(f.exp2())
  # otherwise an approximate op is a free value, named after the op
  tr = smt.Translator()
  tr.translate(f.exp2())
  assert "exp2" in tr.named

def test_floats_are_free_values_when_not_modelled():
  tr = smt.Translator(model_floats=False)
  g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), arg=0)
  i = g.index(UOp.const(dtypes.index, 0)).load().cast(dtypes.int32)
  v = tr.value(i)
  assert v.sort() == z3.BitVecSort(32) and "cast" in tr.named

def test_vector_lanes_translate_one_by_one():
  x = UOp.variable("x", 0, 9)
  vec = UOp.vectorize(x, x + 1, x * 3)
  tr = smt.Translator()
  lanes = [tr.value(vec.gep(i)) for i in range(3)]
  xv = tr.vars[x]
  assert prove(lanes[1] == xv + 1, lanes[2] == xv * 3)

def test_model_reports_free_values_by_name():
  x = UOp.variable("x", 3, 3, dtypes.uint8)
  tr = smt.Translator()
  v = tr.value(x + x)
  s = z3.Solver()
  s.add(*tr.constraints)
  assert s.check() == z3.sat
  assert tr.model(s.model()) == {"x": 3} and tr.model_value(s.model(), v, dtypes.uint8) == 6
