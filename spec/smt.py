"""UOps as z3 terms: the one SMT translation of the IR's semantics (tinygrad/uop/semantics.py, docs/ir.md "Semantics").

Sorts: dtypes.index -> Int (unbounded); int8..uint64 -> BitVec of their width (wrapping; the dtype's signedness picks
the division, remainder, right shift, comparison and extension); bool -> Bool; float16/32/64 -> their IEEE sorts;
bfloat16 and fp8 -> Float32 holding a value of the format (as semantics.py holds them), rounded after every op.

Every meaning semantics.py decides is the one here: x/0 = 0, x%0 = x, MIN/-1 = MIN, shift amounts modulo the width,
MULACC fused, MAX(a, b) = a if a > b or a is NaN else b, float -> int casts truncating and saturating with NaN -> 0,
casts to bfloat16/fp8 through float32, bool arithmetic on 0/1.

A node translates to (value, valid). Invalid is poison: its value is 0 and it is never valid; an op is valid where all
its sources are, WHERE where its condition is and the branch it picks is. Validity is the Python True where nothing
can be invalid, to keep terms small. Free values: a DEFINE_VAR ranges over [lo, hi], a RANGE/SPECIAL over [0, end),
and any node the translation does not model exactly (a LOAD, EXP2/LOG2/SIN/POW, a symbolic index shift) is a fresh
variable bounded by its dtype. Their bounds collect in `constraints`; a caller adds them to its solver.

Used by spec/validate_index.py (bounds proofs), fuzz/oracles/symbolic.py (simplify is sound) and the semantics
cross-check.
"""
from __future__ import annotations
import math, struct
from typing import Any
import z3
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, PtrDType, dtypes, InvalidType

# NOTE: z3's Python API is untyped; terms are Any
Term = Any
FP_SORTS: dict[DType, tuple[int, int]] = {dtypes.float16: (5, 11), dtypes.float32: (8, 24), dtypes.float64: (11, 53)}
LOWP = (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2)
RNE, RTZ = z3.RNE(), z3.RTZ()

class NotModeled(Exception):
  """An op/dtype pair the translation has no exact meaning for (callers may fall back to a free value)."""

# ---- sorts and constants ----

def kind(dt: DType) -> str:
  """How values of dt are modelled: "bool", "int" (index), "bv" (fixed-width ints) or "fp" (floats)."""
  s = dt.scalar()
  if s is dtypes.bool: return "bool"
  if s is dtypes.index: return "int"
  if s in dtypes.ints: return "bv"
  if s in dtypes.floats: return "fp"
  raise NotModeled(f"z3 translation: {dt} has no sort")

def bits(dt: DType) -> int: return 8 * dt.scalar().itemsize

def fp_sort(dt: DType) -> Any:
  s = dt.scalar()
  return z3.FPSort(*FP_SORTS[dtypes.float32 if s in LOWP else s])

def sort_of(dt: DType) -> Any:
  k = kind(dt)
  if k == "bool": return z3.BoolSort()
  if k == "int": return z3.IntSort()
  if k == "bv": return z3.BitVecSort(bits(dt))
  return fp_sort(dt)

def const(dt: DType, v: Any) -> Term:
  """The constant v of dtype dt (ints of a fixed width as their two's complement bits)."""
  k = kind(dt)
  if k == "bool": return z3.BoolVal(bool(v))
  if k == "int": return z3.IntVal(int(v))
  if k == "bv": return z3.BitVecVal(int(v), bits(dt))
  if math.isnan(v): return z3.fpNaN(fp_sort(dt))
  return z3.FPVal(float(v), fp_sort(dt))

def zero(dt: DType) -> Term:
  return const(dt, False if dt.scalar() is dtypes.bool else 0.0 if dtypes.is_float(dt) else 0)

def signed(dt: DType) -> bool: return dt.scalar() in dtypes.sints

# ---- rounding to the low-precision formats (values held in Float32) ----

def round_lowp(x: Term, dt: DType) -> Term:
  """A Float32 term rounded to bfloat16/fp8 (nearest even), as semantics.round_lowp; other dtypes: x."""
  s, f32 = dt.scalar(), fp_sort(dtypes.float32)
  if s is dtypes.bfloat16: return z3.fpToFP(RNE, z3.fpToFP(RNE, x, z3.FPSort(8, 8)), f32)
  if s is dtypes.fp8e5m2: return z3.fpToFP(RNE, z3.fpToFP(RNE, x, z3.FPSort(5, 3)), f32)
  if s is not dtypes.fp8e4m3: return x
  # e4m3: 3 mantissa bits, normal from 2**-6 (below: multiples of 2**-9), no infinity: saturates at +-448
  normal = z3.fpToFP(RNE, z3.fpToFP(RNE, x, z3.FPSort(8, 4)), f32)
  scale, unscale = z3.FPVal(512.0, f32), z3.FPVal(1.0 / 512.0, f32)
  sub = z3.fpMul(RNE, z3.fpRoundToIntegral(RNE, z3.fpMul(RNE, x, scale)), unscale)
  # NOTE: the subnormal rounding loses the sign of a result that rounds to zero; keep x's
  sub = z3.If(z3.fpIsZero(sub), z3.If(z3.fpIsNegative(x), z3.fpMinusZero(f32), z3.fpPlusZero(f32)), sub)
  a, big = z3.fpAbs(x), z3.FPVal(448.0, f32)
  r = z3.If(z3.fpLT(a, z3.FPVal(2.0 ** -6, f32)), sub, normal)
  return z3.If(z3.fpIsNaN(x), x, z3.If(z3.fpGEQ(a, big), z3.If(z3.fpIsNegative(x), z3.fpNeg(big), big), r))

# ---- ops ----

def tdiv_int(a: Term, b: Term, nonzero: bool = False) -> Term:
  """C's truncating division on z3 Ints, with b == 0 -> 0 (z3's `/` rounds toward minus infinity for b > 0).
  `nonzero`: the caller knows b != 0 (the guard costs z3 much on nonlinear terms)."""
  if isinstance(b, int):
    if b == 0: return z3.IntVal(0)
    return z3.If(a >= 0, a / abs(b), -((-a) / abs(b))) * (1 if b > 0 else -1)
  ab = z3.If(b >= 0, b, -b)
  q = z3.If(a >= 0, a / ab, -((-a) / ab))
  return z3.If(b >= 0, q, -q) if nonzero else z3.If(b == 0, 0, z3.If(b >= 0, q, -q))

def literal(x: Term) -> Any:
  """The Python value of a z3 literal (an Int, bit-vector (unsigned) or Bool constant), else None. No simplification:
  constants stay literals because the translation folds constant subterms as it builds them."""
  if z3.is_int_value(x) or z3.is_bv_value(x): return int(x.as_long())
  if z3.is_true(x) or z3.is_false(x): return z3.is_true(x)
  return None

def _int_bitwise(op: Ops, a: Term, b: Term) -> Term:
  # NOTE: index values fit int64 (the lowering's contract), so a bitwise op on them is the int64 op
  x, y = z3.Int2BV(a, 64), z3.Int2BV(b, 64)
  r = x & y if op is Ops.AND else x | y if op is Ops.OR else x ^ y
  return z3.BV2Int(r, is_signed=True)

def _threefry(x: Term, key: Term) -> Term:
  """semantics.threefry2x32 on 64-bit terms."""
  def lo(v: Term) -> Term: return z3.Extract(31, 0, v)
  def hi(v: Term) -> Term: return z3.Extract(63, 32, v)
  rot = (13, 15, 26, 6, 17, 29, 16, 24)
  k0, k1 = lo(key), hi(key)
  ks = (k0, k1, k0 ^ k1 ^ z3.BitVecVal(0x1BD11BDA, 32))
  x0, x1 = lo(x) + ks[0], hi(x) + ks[1]
  for rnd in range(20):
    x0 = x0 + x1
    x1 = z3.RotateLeft(x1, rot[rnd % 8]) ^ x0
    if rnd % 4 == 3:
      s = rnd // 4 + 1
      x0, x1 = x0 + ks[s % 3], x1 + ks[(s + 1) % 3] + z3.BitVecVal(s, 32)
  return z3.Concat(x1, x0)

def alu_bool(op: Ops, v: list[Term]) -> Term:
  """Bool operands: arithmetic on 0/1, then != 0 (ADD = OR, SUB = XOR, MUL = AND, NEG = identity, MAX = OR)."""
  if op in (Ops.ADD, Ops.OR, Ops.MAX): return z3.Or(v[0], v[1])
  if op in (Ops.MUL, Ops.AND): return z3.And(v[0], v[1])
  if op in (Ops.SUB, Ops.XOR, Ops.CMPNE): return z3.Xor(v[0], v[1])
  if op is Ops.NEG: return v[0]
  if op is Ops.MULACC: return z3.Or(z3.And(v[0], v[1]), v[2])
  if op is Ops.CMPLT: return z3.And(z3.Not(v[0]), v[1])
  if op is Ops.CMPEQ: return v[0] == v[1]
  raise NotModeled(f"z3 translation: {op} of bool")

def alu_int(op: Ops, v: list[Term], nonzero: bool = False) -> Term:
  """dtypes.index operands: exact integers. `nonzero`: a divisor known not to be 0."""
  if op is Ops.ADD: return v[0] + v[1]
  if op is Ops.SUB: return v[0] - v[1]
  if op is Ops.MUL: return v[0] * v[1]
  if op is Ops.NEG: return -v[0]
  if op is Ops.MULACC: return v[0] * v[1] + v[2]
  if op is Ops.MAX: return z3.If(v[0] > v[1], v[0], v[1])
  if op is Ops.CMPLT: return v[0] < v[1]
  if op is Ops.CMPNE: return v[0] != v[1]
  if op is Ops.CMPEQ: return v[0] == v[1]
  if op in (Ops.IDIV, Ops.MOD):
    b = v[1] if (lb := literal(v[1])) is None else int(lb)
    if isinstance(b, int) and b == 0: return z3.IntVal(0) if op is Ops.IDIV else v[0]
    q = tdiv_int(v[0], b, nonzero)
    return q if op is Ops.IDIV else v[0] - b * q
  if op in (Ops.AND, Ops.OR, Ops.XOR): return _int_bitwise(op, v[0], v[1])
  if op in (Ops.SHL, Ops.SHR):
    if (amt := literal(v[1])) is None: raise NotModeled(f"z3 translation: {op} of index by a symbolic amount")
    k = int(amt) & 63
    return v[0] * (1 << k) if op is Ops.SHL else v[0] / (1 << k)
  raise NotModeled(f"z3 translation: {op} of index")

def alu_bv(op: Ops, dt: DType, v: list[Term], nonzero: bool = False) -> Term:
  """Fixed-width int operands: two's complement bit-vectors. `nonzero`: a divisor known not to be 0."""
  sg, w = signed(dt), bits(dt)
  if op is Ops.ADD: return v[0] + v[1]
  if op is Ops.SUB: return v[0] - v[1]
  if op is Ops.MUL: return v[0] * v[1]
  if op is Ops.NEG: return -v[0]
  if op is Ops.MULACC: return v[0] * v[1] + v[2]
  if op is Ops.AND: return v[0] & v[1]
  if op is Ops.OR: return v[0] | v[1]
  if op is Ops.XOR: return v[0] ^ v[1]
  if op is Ops.CMPLT: return v[0] < v[1] if sg else z3.ULT(v[0], v[1])
  if op is Ops.CMPNE: return v[0] != v[1]
  if op is Ops.CMPEQ: return v[0] == v[1]
  if op is Ops.MAX: return z3.If(v[0] > v[1] if sg else z3.UGT(v[0], v[1]), v[0], v[1])
  if op in (Ops.IDIV, Ops.MOD):
    # NOTE: bvsdiv(MIN, -1) = MIN and bvsrem(MIN, -1) = 0 in SMT-LIB, as the IR defines them
    q = (v[0] / v[1] if sg else z3.UDiv(v[0], v[1])) if op is Ops.IDIV else \
      (z3.SRem(v[0], v[1]) if sg else z3.URem(v[0], v[1]))
    if nonzero or literal(v[1]) not in (None, 0): return q
    return z3.If(v[1] == 0, z3.BitVecVal(0, w) if op is Ops.IDIV else v[0], q)
  if op in (Ops.SHL, Ops.SHR):
    amt = v[1] & z3.BitVecVal(w - 1, w)
    return v[0] << amt if op is Ops.SHL else (v[0] >> amt if sg else z3.LShR(v[0], amt))
  if op is Ops.THREEFRY: return _threefry(v[0], v[1])
  raise NotModeled(f"z3 translation: {op} of {dt}")

def alu_fp(op: Ops, dt: DType, v: list[Term]) -> Term:
  """Float operands: IEEE, round to nearest even after every op; bfloat16/fp8 compute in Float32 and round."""
  if op in GroupOp.Comparison or op is Ops.MAX:
    if op is Ops.CMPLT: return z3.fpLT(v[0], v[1])
    if op is Ops.CMPNE: return z3.Not(z3.fpEQ(v[0], v[1]))
    if op is Ops.CMPEQ: return z3.fpEQ(v[0], v[1])
    return z3.If(z3.Or(z3.fpGT(v[0], v[1]), z3.fpIsNaN(v[0])), v[0], v[1])
  if op is Ops.ADD: r = z3.fpAdd(RNE, v[0], v[1])
  elif op is Ops.SUB: r = z3.fpSub(RNE, v[0], v[1])
  elif op is Ops.MUL: r = z3.fpMul(RNE, v[0], v[1])
  elif op is Ops.FDIV: r = z3.fpDiv(RNE, v[0], v[1])
  elif op is Ops.MULACC:
    # NOTE: fused, one rounding; float16 fuses in Float32 and rounds that (semantics.fma)
    if dt.scalar() is not dtypes.float16: r = z3.fpFMA(RNE, v[0], v[1], v[2])
    else:
      f32 = fp_sort(dtypes.float32)
      w = z3.fpFMA(RNE, *[z3.fpToFP(RNE, x, f32) for x in v])
      return z3.fpToFP(RNE, w, fp_sort(dt))
  elif op is Ops.NEG: r = z3.fpNeg(v[0])
  elif op is Ops.RECIPROCAL: r = z3.fpDiv(RNE, z3.FPVal(1.0, fp_sort(dt)), v[0])
  elif op is Ops.SQRT: r = z3.fpSqrt(RNE, v[0])
  elif op is Ops.TRUNC: r = z3.fpRoundToIntegral(RTZ, v[0])
  else: raise NotModeled(f"z3 translation: {op} is approximate (not modelled exactly)")
  return round_lowp(r, dt)

def alu(op: Ops, dt: DType, v: list[Term], nonzero: bool = False) -> Term:
  """The value of `op` on operand terms of dtype `dt` (WHERE's branches; its condition is Bool). `nonzero`: IDIV/MOD's
  divisor is known not to be 0, so the x/0 = 0 guard is left out."""
  if op is Ops.WHERE: return z3.If(v[0], v[1], v[2])
  k = kind(dt)
  if k == "bool": return alu_bool(op, v)
  if k == "int": return alu_int(op, v, nonzero)
  if k == "bv": return alu_bv(op, dt, v, nonzero)
  return alu_fp(op, dt, v)

# ---- casts ----

def _fp_to_bv(x: Term, src: DType, w: int, sg: bool) -> Term:
  """Truncate toward zero, saturate at the w-bit range, NaN -> 0."""
  # NOTE: in Float64, where every float value is exact and hi + 1 and lo (0 or powers of two) are exact too
  f64 = fp_sort(dtypes.float64)
  x = x if src.scalar() is dtypes.float64 else z3.fpToFP(RNE, x, f64)
  lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if sg else (0, (1 << w) - 1)
  conv = z3.fpToSBV(RTZ, x, z3.BitVecSort(w)) if sg else z3.fpToUBV(RTZ, x, z3.BitVecSort(w))
  t = z3.fpRoundToIntegral(RTZ, x)
  too_big, too_small = z3.fpGEQ(t, z3.FPVal(float(hi + 1), f64)), z3.fpLT(t, z3.FPVal(float(lo), f64))
  return z3.If(z3.fpIsNaN(x), z3.BitVecVal(0, w), z3.If(too_big, z3.BitVecVal(hi, w),
               z3.If(too_small, z3.BitVecVal(lo, w), conv)))

def cast(x: Term, src: DType, dst: DType) -> Term:
  """CAST of a term of dtype src to dst, as semantics.exec_cast."""
  ks, kd = kind(src), kind(dst)
  if ks == kd and (ks in ("bool", "int") or ks == "bv" and bits(src) == bits(dst)): return x
  if kd == "bool":
    if ks == "fp": return z3.Not(z3.fpIsZero(x))
    return x != zero(src)
  if ks == "bool": return z3.If(x, const(dst, 1 if kd != "fp" else 1.0), zero(dst))
  if ks == "int":
    if kd == "bv": return z3.Int2BV(x, bits(dst))
    return cast(z3.Int2BV(x, 64), dtypes.int64, dst)
  if ks == "bv":
    if kd == "int": return z3.BV2Int(x, is_signed=signed(src))
    if kd == "bv":
      ws, wd = bits(src), bits(dst)
      if wd <= ws: return z3.Extract(wd - 1, 0, x)
      return z3.SignExt(wd - ws, x) if signed(src) else z3.ZeroExt(wd - ws, x)
    # int -> float: round to nearest even; to bfloat16/fp8 through float32
    f = z3.fpSignedToFP(RNE, x, fp_sort(dst)) if signed(src) else z3.fpUnsignedToFP(RNE, x, fp_sort(dst))
    return round_lowp(f, dst)
  # float source
  if kd == "fp":
    if src.scalar() is dst.scalar(): return x
    return round_lowp(z3.fpToFP(RNE, x, fp_sort(dst)), dst)
  if kd == "int": return z3.BV2Int(_fp_to_bv(x, src, 64, True), is_signed=True)
  return _fp_to_bv(x, src, bits(dst), signed(dst))

def _fp_bits(x: Term, dt: DType) -> Term:
  s = dt.scalar()
  if s is dtypes.bfloat16: return z3.fpToIEEEBV(z3.fpToFP(RNE, x, z3.FPSort(8, 8)))
  if s is dtypes.fp8e5m2: return z3.fpToIEEEBV(z3.fpToFP(RNE, x, z3.FPSort(5, 3)))
  if s is dtypes.fp8e4m3: raise NotModeled("z3 translation: the bits of fp8e4m3 (not an IEEE format)")
  return z3.fpToIEEEBV(x)

def bitcast(x: Term, src: DType, dst: DType) -> Term:
  """BITCAST between scalars of the same size. The bits of a NaN are not fixed (z3 leaves them open too)."""
  ks, kd = kind(src), kind(dst)
  if "int" in (ks, kd): raise NotModeled("z3 translation: index has no bit layout")
  b = z3.If(x, z3.BitVecVal(1, 8), z3.BitVecVal(0, 8)) if ks == "bool" else _fp_bits(x, src) if ks == "fp" else x
  if kd == "bool": return b != z3.BitVecVal(0, 8)
  if kd == "bv": return b
  s = dst.scalar()
  if s is dtypes.bfloat16: return z3.fpToFP(RNE, z3.fpToFP(b, z3.FPSort(8, 8)), fp_sort(dst))
  if s is dtypes.fp8e5m2: return z3.fpToFP(RNE, z3.fpToFP(b, z3.FPSort(5, 3)), fp_sort(dst))
  if s is dtypes.fp8e4m3: raise NotModeled("z3 translation: the bits of fp8e4m3 (not an IEEE format)")
  return z3.fpToFP(b, fp_sort(dst))

# ---- whole graphs ----

def _and(*xs: Term) -> Term:
  rest = [x for x in xs if x is not True]
  return True if not rest else rest[0] if len(rest) == 1 else z3.And(*rest)

class Translator:
  """Translates UOps (per vector lane) to (value, valid) terms. `vars` maps each variable (DEFINE_VAR, RANGE, SPECIAL)
  and each free value to its z3 constant; `constraints` holds their bounds (callers add them to the solver)."""
  def __init__(self, exact: bool = False, model_floats: bool = True, trust_bounds: bool = False) -> None:
    """`exact`: raise NotModeled for what the translation cannot model, instead of making it a free value.
    `model_floats=False`: every float value, and every value computed from one, is a free value (a bounds proof does
    not need them, and the floating-point theory is slow).
    `trust_bounds`: a divisor whose vmin/vmax exclude 0 is taken to be nonzero (smaller terms: z3 proves much faster);
    each such assumption is recorded in `assumed`, which a proof must also prove."""
    self.exact, self.model_floats, self.trust_bounds = exact, model_floats, trust_bounds
    self.assumed: list[Term] = []
    self.cache: dict[tuple[UOp, int], tuple[Term, Term]] = {}
    self.vars: dict[UOp, Term] = {}
    # every free value by name, with its dtype (a witness reports them)
    self.named: dict[str, tuple[Term, DType]] = {}
    self.constraints: list[Term] = []

  def value(self, u: UOp, lane: int = 0) -> Term: return self.translate(u, lane)[0]
  def valid(self, u: UOp, lane: int = 0) -> Term: return self.translate(u, lane)[1]

  def translate(self, root: UOp, lane: int = 0) -> tuple[Term, Term]:
    key = (root, lane if root.dtype.count > 1 else 0)
    if (r := self.cache.get(key)) is not None: return r
    # NOTE: sources first, without Python recursion (graphs can be deep); a LOAD is a free value, so the walk stops
    # there: what it reads through (a register's STORE/AFTER chain, void) has no sort and is never needed
    for u in root.toposort(lambda n: n.op is not Ops.LOAD):
      if u.dtype.count == 1 and (u, 0) not in self.cache: self.cache[(u, 0)] = self._one(u, 0)
    if key not in self.cache: self.cache[key] = self._one(root, key[1])
    return self.cache[key]

  def fresh(self, u: UOp, base: str) -> Term:
    """A free value of u's dtype: z3 may choose anything u could be (an index: anything in int64)."""
    name = base if base not in self.named else f"{base}_{len(self.named)}"
    dt = dtypes.index if isinstance(u.dtype, PtrDType) else u.dtype.scalar()
    v = z3.Const(name, sort_of(dt))
    if dt is dtypes.index: self.constraints += [v >= -(2**63), v <= 2**63 - 1]
    elif dt in LOWP: self.constraints.append(z3.Or(z3.fpIsNaN(v), round_lowp(v, dt) == v))
    self.named[name] = (v, dt)
    self.vars.setdefault(u, v)
    return v

  def _src(self, u: UOp, lane: int) -> tuple[Term, Term]:
    return self.translate(u, lane) if u.dtype.count > 1 else self.cache[(u, 0)] if (u, 0) in self.cache else \
      self.translate(u, 0)

  def _one(self, u: UOp, lane: int) -> tuple[Term, Term]:
    op, s = u.op, u.src
    if op is Ops.CONST:
      if isinstance(u.arg, InvalidType): return z3.IntVal(0), False
      return const(u.dtype, u.arg), True
    if op is Ops.VCONST: return const(u.dtype, u.arg[lane]), True
    if op is Ops.DEFINE_VAR: return self._bounded(u, u.arg[0], const(u.dtype, u.arg[1]), const(u.dtype, u.arg[2])), True
    if op in (Ops.RANGE, Ops.SPECIAL):
      name = f"r{u.arg[0]}" if op is Ops.RANGE else str(u.arg)
      return self._bounded(u, name, zero(u.dtype), None, self._src(s[0], 0)[0]), True
    if op is Ops.BIND: return self._src(s[0], lane)
    if op is Ops.VECTORIZE: return self._src(s[lane], 0)
    if op is Ops.GEP: return self._src(s[0], u.arg[lane])
    if not self.model_floats and any(dtypes.is_float(x.dtype) for x in (u, *s)):
      return self.fresh(u, "value" if dtypes.is_float(u.dtype) else op.name.lower()), True
    try:
      if op is Ops.CAST: return self._unary(u, lane, lambda x: cast(x, s[0].dtype.scalar(), u.dtype.scalar()))
      if op is Ops.BITCAST:
        if u.dtype.count > 1 or s[0].dtype.count > 1: raise NotModeled("z3 translation: vector BITCAST")
        return self._unary(u, lane, lambda x: bitcast(x, s[0].dtype.scalar(), u.dtype.scalar()))
      if op in GroupOp.ALU: return self._alu(u, lane)
      raise NotModeled(f"z3 translation: {op} is a free value")
    except NotModeled:
      if self.exact: raise
      valid = _and(*[self._src(x, lane)[1] for x in s]) if op in GroupOp.ALU else True
      return self.fresh(u, op.name.lower()), valid

  def _bounded(self, u: UOp, name: str, lo: Term, hi: Term | None, end: Term | None = None) -> Term:
    v = self.fresh(u, name)
    sg = kind(u.dtype) != "bv" or signed(u.dtype)
    le = (lambda a, b: a <= b) if sg else z3.ULE
    lt = (lambda a, b: a < b) if sg else z3.ULT
    self.constraints += [le(lo, v), le(v, hi) if hi is not None else lt(v, end)]
    return v

  def _unary(self, u: UOp, lane: int, fn: Any) -> tuple[Term, Term]:
    x, ok = self._src(u.src[0], lane)
    return fn(x), ok

  def _alu(self, u: UOp, lane: int) -> tuple[Term, Term]:
    srcs = [self._src(x, lane) for x in u.src]
    vals = [v for v, _ in srcs]
    if u.op is Ops.WHERE:
      (c, cv), (a, av), (b, bv) = srcs
      if (lc := literal(c)) is not None: return (a, _and(cv, av)) if lc else (b, _and(cv, bv))
      picked = av if av is bv else z3.If(c, bool_term(av), bool_term(bv))
      return z3.If(c, a, b), _and(cv, picked)
    nonzero = False
    if self.trust_bounds and u.op in (Ops.IDIV, Ops.MOD) and literal(vals[1]) is None:
      d = u.src[1]
      if nonzero := bool(d.vmin > 0 or d.vmax < 0):
        self.assumed.append(z3.Implies(bool_term(srcs[1][1]), vals[1] != zero(d.dtype)))
    v = alu(u.op, u.src[-1].dtype.scalar(), vals, nonzero)
    # NOTE: a constant subterm is folded by z3 itself (never by the semantics table: this translation is its check)
    if all(literal(x) is not None for x in vals): v = z3.simplify(v)
    return v, _and(*[ok for _, ok in srcs])

  def model_value(self, m: Any, v: Term, dt: DType) -> Any:
    """The Python value of term v (of dtype dt) in model m: an int (signed per dt), a bool or a float."""
    return to_python(m.eval(v, model_completion=True), dt)
  def model(self, m: Any) -> dict[str, Any]:
    """Every free value's name -> its value in model m."""
    return {name: self.model_value(m, v, dt) for name, (v, dt) in sorted(self.named.items())}

def bool_term(x: Term) -> Term:
  """A z3 Bool for x (a Python bool, as a translation's `valid` often is, becomes a BoolVal)."""
  return z3.BoolVal(x) if isinstance(x, bool) else x

def bounds_hold(u: UOp, val: Term) -> Term:
  """z3: val (u's translated value) lies within u.vmin..u.vmax, compared as u's dtype reads it (unsigned bit-vectors
  unsigned)."""
  lo, hi = u.vmin, u.vmax
  if u.dtype is dtypes.bool:
    return z3.And(z3.Implies(z3.BoolVal(bool(lo)), val), z3.Implies(z3.Not(z3.BoolVal(bool(hi))), z3.Not(val)))
  le = z3.ULE if kind(u.dtype) == "bv" and not signed(u.dtype) else (lambda a, b: a <= b)
  return z3.And(le(const(u.dtype, lo), val), le(val, const(u.dtype, hi)))

def to_python(r: Term, dt: DType) -> Any:
  """A z3 value of dtype dt as a Python int, bool or float (NaN for any NaN)."""
  k = kind(dt)
  if k == "bool": return z3.is_true(r)
  if k == "int": return int(r.as_long())
  if k == "bv": return int(r.as_signed_long()) if signed(dt) else int(r.as_long())
  if r.isNaN(): return math.nan
  raw = int(z3.simplify(z3.fpToIEEEBV(r)).as_long())
  fmt = {16: "<e", 32: "<f", 64: "<d"}[r.ebits() + r.sbits()]
  return float(struct.unpack(fmt, raw.to_bytes((r.ebits() + r.sbits()) // 8, "little"))[0])

def evaluate(op: Ops, dt: DType, *vals: Any) -> Any:
  """The z3 translation of `op` on constants of dtype dt (WHERE: its branches'), evaluated: the cross-check's oracle."""
  srcs = [const(dtypes.bool if op is Ops.WHERE and i == 0 else dt, v) for i, v in enumerate(vals)]
  out = dtypes.bool if op in GroupOp.Comparison else dt
  return to_python(z3.simplify(alu(op, dt, srcs)), out)

def evaluate_cast(v: Any, src: DType, dst: DType, bit: bool = False) -> Any:
  """The z3 translation of CAST (BITCAST when `bit`) on a constant, evaluated."""
  return to_python(z3.simplify((bitcast if bit else cast)(const(src, v), src, dst)), dst)

__all__ = ["Translator", "NotModeled", "kind", "sort_of", "const", "alu", "cast", "bitcast", "round_lowp", "tdiv_int",
           "bool_term", "bounds_hold", "to_python", "evaluate", "evaluate_cast"]
