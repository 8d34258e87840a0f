"""Op semantics, written once: what every ALU op, CAST and BITCAST computes, for every dtype.

Constant folding (tinygrad/uop/symbolic.py), the PYTHON backend (tinygrad/runtime/ops_python.py) and the kernel
reference executor (fuzz/oracles/kernel_ref.py) all compute through this module; docs/ir.md ("Semantics") states the
same rules in words, spec/smt.py is their z3 translation, and tests/uop/test_semantics_crosscheck.py checks this table
against compiled C and against that translation (tests/llvm/test_semantics_llvm.py against the LLVM path). A change here
changes the meaning of the IR: change all of them together.

Values are numpy arrays of any shape (one-element arrays for constant folding), held as
  bool -> np.bool_; int8 .. uint64 -> their numpy type (numpy's integers wrap as two's complement does);
  index -> object (exact Python ints, for folding) or int64 (the vectorized executors: index math fits int64);
  float16/32/64 -> their numpy type; bfloat16, fp8e4m3, fp8e5m2 -> float32 holding a value of the format.

The rules (docs/ir.md has the full list):
  - integers wrap at their width; dtypes.index does not wrap (unbounded)
  - IDIV truncates toward zero, MOD has the dividend's sign, x == (x/y)*y + x%y always: x/0 = 0, x%0 = x,
    MIN/-1 = MIN, MIN%-1 = 0
  - SHL/SHR take the amount modulo the width (64 for index); SHR is arithmetic on signed ints, logical on unsigned
  - MAX(a, b) = a if a > b or a is NaN else b (numpy.maximum: NaN-propagating)
  - bool arithmetic computes on 0/1 and converts back with != 0 (ADD = OR, SUB = XOR, MUL = AND, NEG = identity)
  - floats are IEEE with round-to-nearest-even after every op; MULACC is fused (a*b+c rounded once; float16, bfloat16
    and fp8 fuse in float32 and round that to the format); bfloat16 and fp8 compute in float32 and round the result
    to the format (e4m3 saturates at +-448 and has no infinity)
  - CAST float -> int truncates and saturates at the int's range, NaN -> 0; int -> int wraps; x -> bool is x != 0;
    anything -> bfloat16/fp8 goes through float32
  - BITCAST reinterprets the bytes; a byte bitcast to bool is byte != 0
"""
from __future__ import annotations
import functools, math, operator, struct
from fractions import Fraction
from typing import Any, Callable
import numpy as np
from tinygrad.uop import Ops
from tinygrad.dtype import DType, dtypes, to_np_dtype, to_storage_np, from_storage_np, ConstType, truncate

LOWP = (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2)
# every ALU op has a definition here; these hold only for some dtypes (the spec rejects the rest)
FLOAT_ONLY = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC, Ops.FDIV, Ops.POW})
INT_ONLY = frozenset({Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR})
INT_OR_BOOL = frozenset({Ops.AND, Ops.OR, Ops.XOR})
COMPARISONS = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})
# on bool these compute in int (0/1) and convert the result back with != 0, as C does
BOOL_VIA_INT = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.MULACC})

# ---- values ----

def holder(dt: DType, exact_index: bool = False) -> np.dtype:
  """The numpy dtype that holds values of `dt` (see the module docstring)."""
  s = dt.scalar()
  if s is dtypes.index: return np.dtype(object) if exact_index else np.dtype(np.int64)
  if s in LOWP: return np.dtype(np.float32)
  if s is dtypes.void: raise TypeError("void has no values")
  return np.dtype(to_np_dtype(s))

def int_width(dt: DType) -> int:
  """Bits of an integer dtype; dtypes.index counts as 64 (its widest lowering) where a width is needed (shifts)."""
  s = dt.scalar()
  return 64 if s is dtypes.index else 8 * s.itemsize

def round_lowp(v: np.ndarray, dt: DType) -> np.ndarray:
  """float32 values -> the nearest values of bfloat16/fp8 (round to nearest even), still held as float32."""
  return from_storage_np(to_storage_np(np.asarray(v, np.float32), dt.scalar()), dt.scalar())

# ---- the array functions the table is written in: numpy's, or the same on Python scalars ----

class PyScalars:
  """Python-scalar stand-ins for the numpy functions the table uses, so one definition also runs on ints, bools and
  index values as Python ints (constant folding's fast path). Ints are exact here; a fixed-width result is wrapped to
  its dtype afterwards, which gives numpy's wrapping: every integer op of the table is exact modulo 2**width."""
  add, subtract, multiply, negative = operator.add, operator.sub, operator.mul, operator.neg
  floor_divide, left_shift, right_shift = operator.floordiv, operator.lshift, operator.rshift
  bitwise_and, bitwise_or, bitwise_xor = operator.and_, operator.or_, operator.xor
  less, greater, not_equal, equal = operator.lt, operator.gt, operator.ne, operator.eq
  @staticmethod
  def where(c: Any, a: Any, b: Any) -> Any: return a if c else b
  @staticmethod
  def ones_like(x: Any) -> Any: return 1

# ---- integer division and shifts ----

def _idiv(xp: Any, dt: DType, a: Any, b: Any) -> Any:
  zero = xp.equal(b, 0)
  one = xp.ones_like(b)
  safe = xp.where(zero, one, b)
  if dt.scalar() in dtypes.sints:
    # MIN / -1 overflows (x86 traps): it wraps to MIN, which is MIN / 1, and MIN % 1 == 0 == MIN % -1
    safe = xp.where(xp.equal(a, dtypes.min(dt)) & xp.equal(b, -1), one, safe)
  q = xp.floor_divide(a, safe)
  if not dtypes.is_unsigned(dt):
    # floor -> truncation: one step toward zero where the division is inexact and the signs differ
    q = xp.add(q, xp.not_equal(xp.multiply(q, safe), a) & xp.not_equal(xp.less(a, 0), xp.less(safe, 0)))
  return xp.where(zero, 0, q)

def _mod(xp: Any, dt: DType, a: Any, b: Any) -> Any:
  # NOTE: x % y == x - (x/y)*y by definition, so x % 0 == x follows from x / 0 == 0
  return xp.subtract(a, xp.multiply(_idiv(xp, dt, a, b), b))

def shift_amount(dt: DType, b: Any) -> Any:
  """The shift amount applied: b modulo the width (two's complement: a negative amount counts from the top)."""
  return b & (int_width(dt) - 1)

def _shl(xp: Any, dt: DType, a: Any, b: Any) -> Any: return xp.left_shift(a, shift_amount(dt, b))
def _shr(xp: Any, dt: DType, a: Any, b: Any) -> Any: return xp.right_shift(a, shift_amount(dt, b))

# ---- threefry ----

ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)

def threefry2x32(x: np.ndarray, key: np.ndarray) -> np.ndarray:
  """Random123 threefry2x32-20 on uint64 counters and keys split into (low, high) uint32 halves; out1<<32 | out0."""
  x, key = np.asarray(x).astype(np.uint64), np.asarray(key).astype(np.uint64)
  lo = np.uint64(0xFFFFFFFF)
  x0, x1 = (x & lo).astype(np.uint32), (x >> np.uint64(32)).astype(np.uint32)
  k0, k1 = (key & lo).astype(np.uint32), (key >> np.uint64(32)).astype(np.uint32)
  ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for rnd in range(20):
    r = ROTATIONS[rnd % 8]
    x0 = x0 + x1
    x1 = ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))) ^ x0
    if rnd % 4 == 3:
      s = rnd // 4 + 1
      x0, x1 = x0 + ks[s % 3], x1 + ks[(s + 1) % 3] + np.uint32(s)
  return (x1.astype(np.uint64) << np.uint64(32)) | x0.astype(np.uint64)

# ---- fused multiply-add ----

def _fma64(a: float, b: float, c: float) -> float:
  """a*b+c rounded once to float64 (exact rational arithmetic; Python's int division rounds to nearest even)."""
  # NOTE: a product of finite operands is finite however large (it is never rounded), so an infinite c is the answer:
  # a*b+c in float64 would overflow the product first and give inf - inf = NaN
  if math.isfinite(a) and math.isfinite(b) and not math.isfinite(c): return c
  if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)): return a * b + c
  p, exact = Fraction(a) * Fraction(b), Fraction(a) * Fraction(b) + Fraction(c)
  if exact == 0:
    # NOTE: an exact zero sum is -0.0 only when both addends are zeros with the minus sign
    neg = p == 0 and c == 0 and math.copysign(1.0, a) * math.copysign(1.0, b) < 0 and math.copysign(1.0, c) < 0
    return -0.0 if neg else 0.0
  try: return float(exact)
  except OverflowError: return math.inf if exact > 0 else -math.inf

F32_MAX_MID = float(2**128 - 2**103)  # halfway between float32's largest finite value and 2**128 (rounds to inf)

def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
  """a*b+c rounded once to float32, for operands that are float32 values: the product is exact in float64, the sum's
  rounding error is recovered exactly (TwoSum), and it decides a float64 sum that lies halfway between two floats."""
  a64, b64, c64 = (np.asarray(x, np.float64) for x in (a, b, c))
  p = a64 * b64
  s = p + c64
  bb = s - p
  e = (p - (s - bb)) + (c64 - bb)
  r = s.astype(np.float32)
  r64 = r.astype(np.float64)
  other = np.nextafter(r, np.where(r64 < s, np.float32(np.inf), np.float32(-np.inf)))
  mid = np.where(np.isinf(r), np.copysign(F32_MAX_MID, s), (r64 + other.astype(np.float64)) / 2)
  tie = np.isfinite(s) & (r64 != s) & (mid == s) & (e != 0)
  toward = np.where(e > 0, np.maximum(r, other), np.minimum(r, other))
  return np.where(tie, toward, r)

def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, dt: DType) -> np.ndarray:
  """MULACC on floats: fused, one rounding; float16 (and the formats held in float32) fuse in float32."""
  if dt.scalar() is dtypes.float64: return np.vectorize(_fma64, otypes=[np.float64])(a, b, c)
  r = _fma32(a, b, c)
  return r.astype(np.float16) if dt.scalar() is dtypes.float16 else r

# ---- the table: op -> fn(array functions, dtype of the operands, *operands) ----

def _max(xp: Any, dt: DType, a: Any, b: Any) -> Any:
  # NOTE: a NaN in either operand is the result (a > b is false when b is NaN), as numpy.maximum
  return xp.where(xp.greater(a, b) | xp.not_equal(a, a), a, b)

ALU: dict[Ops, Callable[..., Any]] = {
  Ops.ADD: lambda xp, dt, a, b: xp.add(a, b), Ops.SUB: lambda xp, dt, a, b: xp.subtract(a, b),
  Ops.MUL: lambda xp, dt, a, b: xp.multiply(a, b), Ops.NEG: lambda xp, dt, a: xp.negative(a),
  Ops.MULACC: lambda xp, dt, a, b, c: fma(a, b, c, dt) if dtypes.is_float(dt) else xp.add(xp.multiply(a, b), c),
  Ops.IDIV: _idiv, Ops.MOD: _mod, Ops.SHL: _shl, Ops.SHR: _shr, Ops.MAX: _max,
  Ops.AND: lambda xp, dt, a, b: xp.bitwise_and(a, b), Ops.OR: lambda xp, dt, a, b: xp.bitwise_or(a, b),
  Ops.XOR: lambda xp, dt, a, b: xp.bitwise_xor(a, b),
  Ops.CMPLT: lambda xp, dt, a, b: xp.less(a, b), Ops.CMPNE: lambda xp, dt, a, b: xp.not_equal(a, b),
  Ops.CMPEQ: lambda xp, dt, a, b: xp.equal(a, b), Ops.WHERE: lambda xp, dt, c, a, b: xp.where(c, a, b),
  # floats and THREEFRY: numpy only (constant folding computes them on one-element arrays)
  Ops.FDIV: lambda xp, dt, a, b: np.true_divide(a, b), Ops.RECIPROCAL: lambda xp, dt, a: np.reciprocal(a),
  Ops.SQRT: lambda xp, dt, a: np.sqrt(a), Ops.EXP2: lambda xp, dt, a: np.exp2(a),
  Ops.LOG2: lambda xp, dt, a: np.log2(a), Ops.SIN: lambda xp, dt, a: np.sin(a),
  Ops.TRUNC: lambda xp, dt, a: np.trunc(a),
  Ops.POW: lambda xp, dt, a, b: np.power(a, b), Ops.THREEFRY: lambda xp, dt, a, b: threefry2x32(a, b),
}
NUMPY_ONLY = FLOAT_ONLY | {Ops.THREEFRY}  # (and MULACC on floats, which only the numpy path computes)

@functools.cache
def defined_on(op: Ops, dt: DType) -> bool:
  """True if `op` with operands of `dt` has a meaning (the spec rejects the other pairs)."""
  s = dt.scalar()
  if op not in ALU or s is dtypes.void: return False
  if op in FLOAT_ONLY: return dtypes.is_float(s)
  if op in INT_ONLY: return dtypes.is_int(s)
  if op in INT_OR_BOOL: return dtypes.is_int(s) or s is dtypes.bool
  if op is Ops.THREEFRY: return s is dtypes.uint64
  return True

@functools.cache
def alu_fn(op: Ops, dt: DType) -> Callable[..., np.ndarray]:
  """fn(*values) -> the result of `op` on numpy operands of dtype `dt` (WHERE: the branches' dtype; its condition is
  bool). The result is a value of the op's dtype: bool for comparisons, else `dt`."""
  if not defined_on(op, dt): raise TypeError(f"{op} has no meaning on {dt} (the IR spec rejects it)")
  fn, s = ALU[op], dt.scalar()
  out = dtypes.bool if op in COMPARISONS else s
  if s is dtypes.bool and op in BOOL_VIA_INT:
    def bool_op(*v: np.ndarray) -> np.ndarray:
      return np.asarray(fn(np, dtypes.int8, *[x.astype(np.int8) for x in v]) != 0)
    return bool_op
  if out in LOWP: return lambda *v: round_lowp(fn(np, s, *v), out)
  if out is dtypes.index: return lambda *v: np.asarray(fn(np, s, *v))
  want = holder(out)
  def op_fn(*v: np.ndarray) -> np.ndarray:
    r = np.asarray(fn(np, s, *v))
    return r if r.dtype == want else r.astype(want)
  return op_fn

def exec_alu(op: Ops, dt: DType, *src: np.ndarray) -> np.ndarray:
  """`op` on operands of dtype `dt` (see alu_fn), with numpy's floating-point warnings off (the IR defines them)."""
  with np.errstate(all="ignore"): return alu_fn(op, dt)(*src)

def scalar_alu(op: Ops, dt: DType, *vals: Any) -> Any:
  """`op` on Python ints/bools of an int, bool or index dtype `dt`: the table's definition run on PyScalars."""
  s = dt.scalar()
  if s is dtypes.bool and op in BOOL_VIA_INT: return ALU[op](PyScalars, dtypes.int8, *[int(v) for v in vals]) != 0
  r = ALU[op](PyScalars, s, *vals)
  return r if op in COMPARISONS else truncate[s](r)

# ---- CAST and BITCAST ----

def _float_to_int(v: np.ndarray, dt: DType, exact_index: bool) -> np.ndarray:
  """Truncate toward zero; saturate at dt's range (index: int64's); NaN -> 0."""
  s = dtypes.int64 if dt.scalar() is dtypes.index else dt.scalar()
  lo, hi = int(dtypes.min(s)), int(dtypes.max(s))
  f = np.trunc(np.asarray(v).astype(np.float64))  # NOTE: every float16/32 and low-precision value is exact in float64
  # NOTE: hi + 1 and lo are 0 or powers of two, exact as floats
  big, small = f >= float(hi + 1), f < float(lo)
  r: np.ndarray = np.where(big | small | np.isnan(f), 0.0, f).astype(to_np_dtype(s))
  r = np.where(big, np.array(hi, r.dtype), np.where(small, np.array(lo, r.dtype), r))
  return r.astype(object) if dt.scalar() is dtypes.index and exact_index else r

def _int_to_int(v: np.ndarray, dt: DType, exact_index: bool) -> np.ndarray:
  """Wrap to dt's width (two's complement); to index: exact."""
  d = dt.scalar()
  if d is dtypes.index: return v.astype(object) if exact_index else v.astype(np.int64)
  if v.dtype == object:
    w = 8 * d.itemsize
    m = np.bitwise_and(v, (1 << w) - 1)
    if d in dtypes.sints: m = np.where(m >= (1 << (w - 1)), m - (1 << w), m)
    return m.astype(holder(d))
  return v.astype(holder(d))

def exec_cast(v: np.ndarray, src: DType, dst: DType, exact_index: bool = False) -> np.ndarray:
  """CAST: the value of `v` (of dtype src) as a value of dst."""
  s, d = src.scalar(), dst.scalar()
  v = np.asarray(v)
  with np.errstate(all="ignore"):
    if d is dtypes.bool: return np.asarray(v != 0)
    if s is dtypes.bool: v, s = v.astype(np.int8), dtypes.int8
    if dtypes.is_int(d) and dtypes.is_float(s): return _float_to_int(v, d, exact_index)
    if dtypes.is_int(d): return _int_to_int(v, d, exact_index)
    # NOTE: index values fit int64 (the lowering's contract); numpy's int64 -> float conversions round to nearest even
    if s is dtypes.index: v = v.astype(np.int64)
    if d in LOWP: return round_lowp(v.astype(np.float32), d)
    return v.astype(holder(d))

def exec_bitcast(v: np.ndarray, src: DType, dst: DType) -> np.ndarray:
  """BITCAST: the bytes of `v` (of dtype src) read as dst. Vectors hold their lanes in the last axis."""
  if src.itemsize != dst.itemsize: raise ValueError(f"BITCAST {src} -> {dst}: sizes differ ({src.itemsize} bytes, "
                                                    f"{dst.itemsize} bytes)")
  if dtypes.index in (src.scalar(), dst.scalar()): raise TypeError(f"BITCAST {src} -> {dst}: index has no bit layout")
  raw = np.ascontiguousarray(to_storage_np(np.asarray(v), src.scalar()))
  lead = raw.shape[:-1] if src.count > 1 else raw.shape
  out: np.ndarray = raw.view(np.uint8).reshape(*lead, src.itemsize).view(to_np_dtype(dst.scalar()))
  out = out.reshape(*lead, dst.count) if dst.count > 1 else out.reshape(lead)
  if dst.scalar() is dtypes.bool: return out.view(np.uint8) != 0
  return from_storage_np(out, dst.scalar())

# ---- constant folding: the same definitions on one-element arrays, memoized ----

def _key(v: Any) -> Any:
  # NOTE: 0.0 == -0.0, nan != nan and True == 1 == 1.0, so a float keys by its bits and every value with its type
  return (float, struct.pack("<d", v)) if type(v) is float else (type(v), v)

_fold_cache: dict[tuple, Any] = {}

def _one(v: ConstType, dt: DType) -> np.ndarray: return np.array([v], dtype=holder(dt, exact_index=True))

def _scalar(r: np.ndarray, dt: DType) -> ConstType:
  x = r.reshape(-1).tolist()[0]
  return bool(x) if dt.scalar() is dtypes.bool else int(x) if dtypes.is_int(dt) else float(x)

def fold_alu(op: Ops, dt: DType, vals: tuple[ConstType, ...]) -> ConstType | None:
  """The constant `op` computes on constants `vals` of dtype `dt` (WHERE: its branches' dtype, the condition bool);
  None when the op has no meaning on dt (the spec rejects such a node) or dt is a vector."""
  key = (op, dt, *[_key(v) for v in vals])
  if (r := _fold_cache.get(key)) is not None: return r
  if dt.count != 1 or not defined_on(op, dt): return None
  if op not in NUMPY_ONLY and (dtypes.is_int(dt) or dt is dtypes.bool): ret = scalar_alu(op, dt, *vals)
  else:
    srcs = [_one(v, dtypes.bool if op is Ops.WHERE and i == 0 else dt) for i, v in enumerate(vals)]
    ret = _scalar(exec_alu(op, dt, *srcs), dtypes.bool if op in COMPARISONS else dt)
  if len(_fold_cache) > 100_000: _fold_cache.clear()
  _fold_cache[key] = ret
  return ret

def fold_cast(v: ConstType, src: DType, dst: DType) -> ConstType:
  """The constant CAST computes on constant `v` of dtype src."""
  return _scalar(exec_cast(_one(v, src), src, dst, exact_index=True), dst)

def fold_bitcast(v: ConstType, src: DType, dst: DType) -> ConstType:
  return _scalar(exec_bitcast(_one(v, src), src, dst), dst)

__all__ = ["ALU", "LOWP", "holder", "int_width", "round_lowp", "shift_amount", "threefry2x32", "defined_on", "alu_fn",
           "exec_alu", "exec_cast", "exec_bitcast", "fold_alu", "fold_cast", "fold_bitcast"]
