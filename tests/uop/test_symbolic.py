"""Unit tests of the symbolic rules: each rule's effect on a small expression, and its soundness checked exhaustively."""
import itertools, math
from fractions import Fraction
import numpy as np
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, graph_rewrite
from tinygrad.dtype import dtypes
from tinygrad.uop.symbolic import symbolic, symbolic_simple, split_uop, split_sum, has_invalid, simplify
from fuzz.strategies import variables_of
from fuzz.oracles.symbolic import eval_index, check_expression

x = UOp.variable("x", 0, 10)
y = UOp.variable("y", -5, 5)
r = UOp.range(4, 0)
c = x < 5
def idx(v: int) -> UOp: return UOp.const(dtypes.index, v)

def _domain(u):
  vs = variables_of(u)
  spans = [range(v.arg[1], v.arg[2] + 1) if v.op is Ops.DEFINE_VAR else range(0, int(v.src[0].arg)) for v in vs]
  for vals in itertools.product(*spans): yield dict(zip(vs, vals))

def assert_same_everywhere(e: UOp, s: UOp):
  """Independent of z3: s has e's value (and validity) at every point of the domain, and bounds hold there."""
  for env in _domain(e):
    ve, vs = eval_index(e, env), eval_index(s, {k: v for k, v in env.items()})
    assert ve == vs, f"{e} -> {s} differ at {env}: {ve} vs {vs}"
    if ve is not None: assert e.vmin <= ve <= e.vmax and s.vmin <= vs <= s.vmax

def simp(e: UOp) -> UOp:
  s = simplify(e)
  assert_same_everywhere(e, s)
  return s

# ---- constant folding ----

def trunc_div(a, b): return math.trunc(Fraction(a, b))

@pytest.mark.parametrize("a,b", [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3), (6, 3), (-6, 3), (1, 7), (-1, 7)])
def test_fold_int_ops_c_semantics(a, b):
  for op, ref in [(Ops.ADD, a + b), (Ops.MUL, a * b), (Ops.IDIV, trunc_div(a, b)), (Ops.MOD, a - b * trunc_div(a, b)), (Ops.MAX, max(a, b)),
                  (Ops.CMPLT, a < b), (Ops.CMPNE, a != b), (Ops.CMPEQ, a == b)]:
    u = UOp(op, dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dtypes.int32, (UOp.const(dtypes.int32, a), UOp.const(dtypes.int32, b)))
    s = simplify(u)
    assert s.op is Ops.CONST and s.arg == ref, f"{op} {a} {b}: {s.arg} != {ref}"

def test_fold_int_wraps_like_c():
  assert simplify(UOp.const(dtypes.int32, 2**31 - 1) + UOp.const(dtypes.int32, 1)).arg == -2**31
  assert simplify(UOp.const(dtypes.uint8, 200) + UOp.const(dtypes.uint8, 100)).arg == (300 & 0xFF)
  assert simplify(UOp.const(dtypes.int8, -128) * UOp.const(dtypes.int8, -1)).arg == -128
  # index does not wrap
  assert simplify(idx(2**62) + idx(2**62)).arg == 2**63

def test_fold_float_rounds_to_dtype():
  s = simplify(UOp.const(dtypes.float32, 0.1) + UOp.const(dtypes.float32, 0.2))
  assert s.arg == float(np.float32(np.float32(0.1) + np.float32(0.2)))
  assert simplify(UOp.const(dtypes.float32, 1.0).reciprocal()).arg == 1.0
  assert simplify(UOp.const(dtypes.float32, 0.0).reciprocal()).arg == math.inf
  assert math.isnan(simplify(UOp.const(dtypes.float32, -1.0).sqrt()).arg)
  assert simplify(UOp.const(dtypes.half, 65504.0)).arg == 65504.0
  assert simplify(UOp.const(dtypes.half, 65504.0) * UOp.const(dtypes.half, 2.0)).arg == math.inf

def test_fold_of_c_undefined_cases_gives_the_decided_value():
  # docs/ir.md "Semantics": C leaves these undefined; the IR defines them, and folding computes the defined value
  i32 = lambda v: UOp.const(dtypes.int32, v)
  assert simplify(i32(5) // i32(0)).arg == 0 and simplify(i32(5) % i32(0)).arg == 5
  assert simplify(i32(-2**31) // i32(-1)).arg == -2**31 and simplify(i32(-2**31) % i32(-1)).arg == 0
  assert simplify(i32(1) << i32(40)).arg == 1 << 8 and simplify(i32(-8) >> i32(-1)).arg == -1
  assert simplify(UOp.const(dtypes.float32, 1e20).cast(dtypes.int32)).arg == 2**31 - 1
  assert simplify(UOp.const(dtypes.float32, -1e20).cast(dtypes.int64)).arg == -2**63
  assert simplify(UOp.const(dtypes.float32, math.nan).cast(dtypes.int32)).arg == 0
  assert simplify(UOp.const(dtypes.float32, -3.5).cast(dtypes.uint8)).arg == 0
  assert simplify(UOp.const(dtypes.float32, -2.7).cast(dtypes.int32)).arg == -2

def test_division_by_a_zero_constant_folds_for_any_dividend():
  assert simp(x // idx(0)) is idx(0)
  assert simp(x % idx(0)) is x
  # a dividend that may be invalid keeps its validity: x // 0 stays masked where x is
  masked = (x < 3).where(x, UOp.invalid())
  assert simplify(masked // idx(0)).op is not Ops.CONST

def test_bitcast_of_a_constant_folds_but_not_nan():
  assert simplify(UOp.const(dtypes.float32, 1.0).bitcast(dtypes.int32)).arg == 0x3F800000
  assert simplify(UOp.const(dtypes.int8, -1).bitcast(dtypes.uint8)).arg == 255
  assert simplify(UOp.const(dtypes.float32, math.nan).bitcast(dtypes.uint32)).op is Ops.BITCAST

# ---- identities and canonical sums ----

def test_identities():
  assert simp(x + 0) is x
  assert simp(x * 1) is x
  assert simp(x * 0) is idx(0)
  assert simp(x // 1) is x
  assert simp(x % 1) is idx(0)
  assert simp(x - x) is idx(0)
  assert simp(x.maximum(x)) is x
  assert simp((x + 1) // (x + 1)) is idx(1)
  # x//x is not 1 where x may be 0
  assert simp(x // x).op is Ops.IDIV

def test_float_identities_are_conservative():
  f = UOp.variable("f", 0, 1, dtypes.float32)
  # NOTE: -0.0 + 0.0 == +0.0 and nan * 0 == nan, so these must stay
  assert simplify(f + 0.0).op is Ops.ADD
  assert simplify(f * 0.0).op is Ops.MUL
  assert simplify(f * 1.0) is f

def test_canonical_sum():
  assert simp(3 + x) is x + 3
  assert simp((x + 3) + 4) is x + 7
  assert simp(x * 2 + x * 3) is x * 5
  assert simp((x + y) - (y + x)) is idx(0)
  assert simp((x + y) * 2) is x * 2 + y * 2
  assert simp(x * 2 * 3) is x * 6
  assert simp((x + 1) * 3 - 3) is x * 3

def test_split_sum_and_split_uop():
  terms, const = split_sum(x * 3 + y - x + 7)
  assert terms == {x: 2, y: 1} and const == 7
  assert list(split_uop(x + y + r, Ops.ADD)) == [x, y, r]

def test_divmod_recombines():
  e = (x * 4 + r) // 4 * 4 + (x * 4 + r) % 4
  assert simp(e) is x * 4 + r
  assert simp(y // 3 * 3 + y % 3) is y

def test_divmod_joins_the_digits_of_a_merged_axis():
  # a (c, 3, 3) view reshaped to 9c is read back as (i//9)*9 + ((i//3)%3)*3 + i%3: that is i again
  i = UOp.range(36, 2)
  assert simp(i // 9 * 9 + (i // 3 % 3) * 3 + i % 3) is i
  assert simp((i // 3 % 3) * 3 + i % 3) is simp(i % 9)
  assert simp((i // 4 % 2) * 8 + (i % 4) * 2) is simp((i % 8) * 2)
  # truncating: the identity holds for negative numerators too
  w = UOp.variable("w", -40, 40)
  assert simp(w // 9 * 9 + (w // 3 % 3) * 3 + w % 3) is w
  assert_same_everywhere((w // 3 % 3) * 3 + w % 3, simp((w // 3 % 3) * 3 + w % 3))
  assert check_expression((w // 3 % 3) * 3 + w % 3).ok
  # not where the coefficients do not match the digits
  assert simp((i // 3 % 3) * 4 + i % 3) is not simp(i % 9)

# ---- division and remainder (C truncation) ----

def test_divmod_by_bounds():
  assert simp(x // 11) is idx(0)
  assert simp(x % 11) is x
  assert simp(y // 6) is idx(0)
  assert simp(y % 6) is y
  assert simp((x + 20) // 10) is x // 10 + 2
  assert simp((x + 20) // 40) is idx(0)

def test_divmod_split_nonnegative():
  assert simp((x * 4 + r) // 4) is x
  assert simp((x * 4 + r) % 4) is r
  assert simp((x * 5 + r) // 4) is x + (x + r) // 4

def test_divmod_negative_numerator_not_floor():
  # y*4 + 3 with y in [-5, 5]: C truncates, so this is not y (y=-1: -1//4 == 0)
  assert simp((y * 4 + 3) // 4) is not y
  assert simp((y * 4 + 3) % 4) is not idx(3)
  # all non-positive: trunc is ceil, and the split is legal
  yn = UOp.variable("yn", -5, 0)
  assert simp((yn * 4 - 3) // 4) is yn
  assert simp((yn * 4 - 3) % 4) is idx(-3)

def test_divmod_offset_below_the_common_factor():
  # 16*k + e split by 32 with 0 <= e < 16: e never carries past a multiple of 32, so every lane of an unrolled axis
  # gets lane 0's quotient and lane 0's remainder + e (the lanes' loads are then consecutive: one vector load)
  k = UOp.range(64, 1)
  for e in (1, 5, 15):
    assert simp((k * 16 + e) // 32) is k // 2
    assert simp((k * 16 + e) % 32) is simp((k % 2) * 16 + e)
    assert_same_everywhere((k * 16 + e) // 32, simp((k * 16 + e) // 32))
    assert_same_everywhere((k * 16 + e) % 32, simp((k * 16 + e) % 32))
  # an offset past the factor's multiple is its multiple plus the rest: (16k + 19)//32 == (k + 1)//2
  assert simp((k * 16 + 19) // 32) is simp((k + 1) // 2)
  assert_same_everywhere((k * 16 + 19) % 32, simp((k * 16 + 19) % 32))
  # a term that may be negative truncates towards zero: no rewrite (y in [-5, 5]: (16y + 1)//32 at y=-1 is 0, not -1)
  assert simp((y * 16 + 1) // 32) is not y // 2
  assert_same_everywhere((y * 16 + 1) // 32, simp((y * 16 + 1) // 32))
  assert_same_everywhere((y * 16 + 1) % 32, simp((y * 16 + 1) % 32))

def test_divmod_exact_any_sign():
  assert simp((y * 6 + 4) // 2) is y * 3 + 2
  assert simp((y * 6) % 3) is idx(0)

def test_divmod_negative_divisor():
  assert simp(x // -3) is (x // 3) * -1
  assert simp(x % -3) is x % 3
  assert simp(y % -3) is y % 3

def test_nested_divmod():
  assert simp((x // 2) // 3) is x // 6
  w = UOp.variable("w", -50, 50)
  assert simp((w // 2) // 3) is w // 6
  assert simp((x % 6) % 3) is x % 3
  assert simp((y % 6) % 3) is y % 3
  assert simp((x % 3) % 6) is x % 3

# ---- comparisons ----

def test_comparisons_by_bounds():
  assert simp(x < 11) is UOp.const(dtypes.bool, True)
  assert simp(x < 0) is UOp.const(dtypes.bool, False)
  assert simp(x.ne(-1)) is UOp.const(dtypes.bool, True)
  assert simp(x < x) is UOp.const(dtypes.bool, False)
  assert simp(x.ne(x)) is UOp.const(dtypes.bool, False)
  assert simp((x % 4) < 4) is UOp.const(dtypes.bool, True)

def test_comparisons_of_sums():
  assert simp(x * 3 < 7) is (x < 3)
  assert simp(x + 3 < 7) is (x < 4)
  assert simp((x * 2 + y * 4) < 9) is (x + y * 2 < 5)
  assert simp((x * 2).ne(3)) is UOp.const(dtypes.bool, True)
  assert simp((x * 2 + 2).ne(6)) is x.ne(2)
  assert simp((x < 4).ne(True)) is (3 < x)

# ---- where and Invalid ----

def test_where_folding():
  assert simp(UOp.const(dtypes.bool, True).where(x, y)) is x
  assert simp(UOp.const(dtypes.bool, False).where(x, y)) is y
  assert simp(c.where(x, x)) is x
  assert simp(c.where(c.where(x, y), r)) is c.where(x, r)
  assert simp((x < 20).where(x, y)) is x
  n = x.ne(3)
  assert simp(n.ne(True).where(x, y)) is n.where(y, x)

def test_invalid_propagates_with_its_gate():
  m = c.where(x, UOp.invalid())
  assert simp(m + 3) is c.where(x + 3, UOp.invalid())
  assert simp(m * 2 // 2) is m
  assert simp(UOp.invalid() + x) is UOp.invalid()
  assert simp(c.where(c.where(x, UOp.invalid()), UOp.invalid())) is m
  d = y < 2
  assert simp(c.where(d.where(x, UOp.invalid()), UOp.invalid())) is (c & d).where(x, UOp.invalid())
  n = x.ne(3)
  assert simp(n.where(UOp.invalid(), x)) is n.ne(True).where(x, UOp.invalid())

def test_invalid_is_never_cancelled():
  m = c.where(x, UOp.invalid())
  s = simp(m - m)
  assert has_invalid(s) and s is c.where(idx(0), UOp.invalid())
  assert has_invalid(simp(m * 0))

def test_max_by_bounds():
  assert simp(x.maximum(y - 6)) is x
  assert simp((y - 6).maximum(x)) is x
  assert simp(x.maximum(y)).op is Ops.MAX

# ---- rewrite engine properties of the rule set ----

def test_simplify_is_a_fixed_point():
  for e in [(x * 5 + r) // 4, (x * 4 + r) % 4 + y, c.where(x, UOp.invalid()) * 3 + 1, (y * 4 + 3) // 4]:
    s = simplify(e)
    assert simplify(s) is s
    assert graph_rewrite(s, symbolic, name="again") is s

def test_symbolic_simple_folds_constants_only():
  assert graph_rewrite(idx(3) + idx(4), symbolic_simple, name="simple") is idx(7)
  assert graph_rewrite(x * 2 + x * 3, symbolic_simple, name="simple") is x * 2 + x * 3

def test_rules_proved_by_z3():
  for e in [(x * 5 + r) // 4, (y * 4 + 3) % 4, (x // 2) // 3, c.where(x, UOp.invalid()) + y, (x * 2 + y * 4) < 9]:
    res = check_expression(e)
    assert res.ok, str(res)

def test_int32_rules_keep_wrapping_semantics():
  a = UOp.variable("a", -2**31, 2**31 - 1, dtypes.int32)
  # (a + 1) - 1 == a modulo 2**32
  assert simplify((a + 1) - 1) is a
  # division split needs bounds: a*4 may wrap, so (a*4 + 1)//4 must not become a
  assert simplify((a * 4 + 1) // 4) is not a

def test_wrapping_sums_are_not_divided_as_integers():
  big, small = UOp.variable("w8_big", 0, 100, dtypes.int8), UOp.variable("w8_small", 0, 50, dtypes.int8)
  # big*2 wraps past 127, so (big*2)//2 is not big (big=100: (200-256)//2 == -28)
  assert simplify((big * 2) // 2) is not big
  assert simplify((small * 2) // 2) is small
  assert simplify((small * 2 + 1) // 2) is small
  res = check_expression((big * 2 + 6) // 2)
  assert res.ok, str(res)


def test_exp2_of_nan_folds_to_nan():
  import math as _math
  from tinygrad.uop import Ops as _Ops
  folded = simplify(UOp.const(dtypes.float32, _math.nan).alu(_Ops.EXP2))
  assert folded.op is _Ops.CONST and _math.isnan(folded.arg)
