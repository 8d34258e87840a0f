"""Ops the target lacks, rewritten into ops it has: THREEFRY into uint32 arithmetic, arithmetic on emulated dtypes
(bfloat16, fp8 stored as bits) through float32, integer division by a constant as a multiply and shifts (where the
renderer says division is slow), and exp2/log2/sin as float polynomials (TRANSCENDENTAL)."""
from __future__ import annotations
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, UPat, PatternMatcher
from typing import Any, Callable
from tinygrad.dtype import DType, dtypes

# ---- threefry ----

THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
THREEFRY_PARITY = 0x1BD11BDA
M32 = 0xFFFFFFFF

def threefry2x32(x: int, key: int) -> int:
  """Reference Threefry-2x32, 20 rounds (Random123): THREEFRY(x: uint64, key: uint64) -> uint64, both split into
  (lo, hi) 32-bit words; the result is hi << 32 | lo. The decomposition below and every backend compute exactly this."""
  ks = [key & M32, key >> 32 & M32, 0]
  ks[2] = THREEFRY_PARITY ^ ks[0] ^ ks[1]
  x0, x1 = (x & M32) + ks[0] & M32, (x >> 32 & M32) + ks[1] & M32
  for i in range(20):
    r = THREEFRY_ROTATIONS[i % 8]
    x0 = x0 + x1 & M32
    x1 = (x1 << r | x1 >> (32 - r)) & M32
    x1 ^= x0
    if i % 4 == 3:
      s = (i + 1) // 4
      x0, x1 = x0 + ks[s % 3] & M32, x1 + ks[(s + 1) % 3] + s & M32
  return x1 << 32 | x0

def decompose_threefry(x: UOp, key: UOp) -> UOp:
  u32, u64 = dtypes.uint32, dtypes.uint64
  def lo(v: UOp) -> UOp: return (v & M32).cast(u32)
  def hi(v: UOp) -> UOp: return (v >> 32).cast(u32)
  k0, k1 = lo(key), hi(key)
  ks = [k0, k1, (k0 ^ k1) ^ UOp.const(u32, THREEFRY_PARITY)]
  x0, x1 = lo(x) + ks[0], hi(x) + ks[1]
  for i in range(20):
    r = THREEFRY_ROTATIONS[i % 8]
    x0 = x0 + x1
    x1 = (x1 << r) | (x1 >> (32 - r))
    x1 = x1 ^ x0
    if i % 4 == 3:
      s = (i + 1) // 4
      x0, x1 = x0 + ks[s % 3], x1 + (ks[(s + 1) % 3] + s)
  return (x1.cast(u64) << 32) | x0.cast(u64)

# ---- emulated dtypes: arithmetic in float32 ----

EMULATED = (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2)

def promote_emulated(a: UOp) -> UOp | None:
  if a.op is Ops.WHERE or not any(x.dtype.scalar() in EMULATED for x in (a, *a.src)): return None
  f = dtypes.float32
  nsrc = tuple(s.cast(f.vec(s.dtype.count)) if s.dtype.scalar() in EMULATED else s for s in a.src)
  out = a.dtype if a.dtype.scalar() not in EMULATED else f.vec(a.dtype.count)
  ret = UOp(a.op, out, nsrc, a.arg)
  return ret if out is a.dtype else ret.cast(a.dtype)

pm_emulated_dtypes = PatternMatcher([
  (UPat(GroupOp.ALU, name="a"), promote_emulated),
])

# ---- ops with a simpler spelling ----

def _lacks(ren: Any, op: Ops) -> bool: return ren is None or not ren.supports_op(op)

# ctx: the renderer (None decomposes everything)
pm_decompose = PatternMatcher([
  (UPat(Ops.THREEFRY, dtype=dtypes.uint64, src=(UPat.var("x"), UPat.var("key"))),
   lambda ctx, x, key: decompose_threefry(x, key) if _lacks(ctx, Ops.THREEFRY) else None),
  # NOTE: integers only: MULACC of floats is fused (one rounding), and a*b+c rounds twice
  (UPat(Ops.MULACC, src=(UPat.var("a"), UPat.var("b"), UPat.var("c"))),
   lambda ctx, a, b, c: a * b + c if _lacks(ctx, Ops.MULACC) and not dtypes.is_float(a.dtype) else None),
])

# ---- integer division by a constant as a multiply and shifts (targets whose renderer sets slow_int_div) ----
# NOTE: Granlund-Montgomery round-up magic numbers; fuzz/ledger_codegen.py proves the graphs with z3 for every divisor

def magic_unsigned(d: int, bits: int) -> tuple[int, int]:
  """(m - 2**bits, s) for a divisor 1 <= d < 2**bits: x // d == (x*m) >> (bits + s) for every 0 <= x < 2**bits, with
  s = ceil(log2 d) and m = 2**(bits+s) // d + 1, a (bits+1)-bit number: the graph adds x for m's top bit."""
  s = (d - 1).bit_length()
  return (1 << (bits + s)) // d + 1 - (1 << bits), s

def magic_signed(d: int, bits: int) -> tuple[int, int]:
  """(m, p) for a divisor 1 <= d < 2**(bits-1): trunc(x / d) == floor(x*m / 2**p) + (1 if x < 0 else 0) for every
  signed bits-wide x, with p = bits - 1 + ceil(log2 d) and m = 2**p // d + 1 <= 2**bits (x*m fits 2*bits signed)."""
  p = bits - 1 + (d - 1).bit_length()
  return (1 << p) // d + 1, p

def udiv_magic(x: UOp, mlow: UOp, s: int, bits: int, wide: DType) -> UOp:
  """x // d for x >= 0 as ((x*mlow >> bits) + x) >> s, in `wide` (twice the width: no step overflows)."""
  xw = x.cast(wide)
  return (((xw * mlow) >> bits) + xw) >> s

def sdiv_magic(x: UOp, m: UOp, p: int, bits: int, wide: DType) -> UOp:
  """trunc(x / d) for d > 0 as (x*m >> p) + (x < 0), in `wide`; the sign term is left out where x >= 0."""
  xw = x.cast(wide)
  q = (xw * m) >> p
  # NOTE: xw >> (2*bits - 1) is -1 for a negative x and 0 otherwise (an arithmetic shift)
  return q if x.vmin >= 0 else q - (xw >> (2 * bits - 1))

def fast_idiv(x: UOp, d: int) -> UOp:
  """x // d (C truncation, MIN // -1 == MIN) for a scalar int32/uint32 x and a nonzero constant d of its dtype."""
  dt = x.dtype
  if dtypes.is_unsigned(dt):
    if d & (d - 1) == 0: return x >> (d.bit_length() - 1)
    mlow, s = magic_unsigned(d, 32)
    return udiv_magic(x, UOp.const(dtypes.uint64, mlow), s, 32, dtypes.uint64).cast(dt)
  if d == 1: return x
  if d == -1: return x * -1
  if d == -2**31: return x.eq(-2**31).cast(dt)
  if d < 0: return fast_idiv(x, -d) * -1
  m, p = magic_signed(d, 32)
  return sdiv_magic(x, UOp.const(dtypes.int64, m), p, 32, dtypes.int64).cast(dt)

def lower_divmod_const(dm: UOp, x: UOp, c: UOp) -> UOp | None:
  if dm.dtype not in (dtypes.int32, dtypes.uint32) or c.arg == 0: return None
  q = fast_idiv(x, int(c.arg))
  # NOTE: SUB, not x + q*c*-1: the remainder never wraps, and an unsigned -1 would be 2**32-1
  return q if dm.op is Ops.IDIV else UOp(Ops.SUB, dm.dtype, (x, q * c))

pm_fast_divmod = PatternMatcher([
  (UPat((Ops.IDIV, Ops.MOD), src=(UPat.var("x"), UPat(Ops.CONST, name="c")), name="dm"), lower_divmod_const),
])

# ---- transcendental functions as polynomials (TRANSCENDENTAL>=2, or targets without them) ----
# NOTE: float32 accuracy is a few ulp; half computes in float32; float64 uses the same polynomials (about 1e-9 relative)

LN2 = 0.6931471805599453

def _poly(x: UOp, coeffs: list[float]) -> UOp:
  """Horner: coeffs[0] + x*(coeffs[1] + x*(...))."""
  acc = x.const_like(coeffs[-1])
  for c in reversed(coeffs[:-1]): acc = acc * x + c
  return acc

def _round(x: UOp) -> UOp: return (x + (x < 0).where(x.const_like(-0.5), x.const_like(0.5))).trunc()

def _pow2i(n: UOp, dt: DType) -> UOp:
  """2**n for an int32 n in [-126, 127], built from the exponent bits."""
  ibits, shift, bias = (dtypes.int64, 52, 1023) if dt is dtypes.float64 else (dtypes.int32, 23, 127)
  return ((n.cast(ibits) + bias) << shift).bitcast(dt)

def xexp2(x: UOp) -> UOp:
  xc = x.maximum(x.const_like(-151.0)).minimum(x.const_like(129.0))
  n = _round(xc)
  f = xc - n
  # 2**f = e**(f*ln2), |f| <= 0.5: Taylor to degree 7 (error ~5e-9)
  p = _poly(f * LN2, [1.0, 1.0, 1/2, 1/6, 1/24, 1/120, 1/720, 1/5040, 1/40320])
  ni = n.cast(dtypes.int32)
  n1 = ni // 2
  # NOTE: two factors so that 2**n stays representable at both ends (subnormal results, 2**128 -> inf)
  ret = p * _pow2i(n1, x.dtype) * _pow2i(ni - n1, x.dtype)
  return x.ne(x).where(x, ret)

def xlog2(x: UOp) -> UOp:
  dt = x.dtype
  f64 = dt is dtypes.float64
  ibits, shift, bias = (dtypes.int64, 52, 1023) if f64 else (dtypes.int32, 23, 127)
  mmask, one = ((1 << 52) - 1, 0x3FF0000000000000) if f64 else ((1 << 23) - 1, 0x3F800000)
  sub = x < (2.0 ** -60)
  xs = sub.where(x * (2.0 ** 64), x)
  bits = xs.bitcast(ibits)
  e = ((bits >> shift) - bias).cast(dt) - sub.where(x.const_like(64.0), x.const_like(0.0))
  m = ((bits & mmask) | one).bitcast(dt)
  big = m > 1.4142135623730951
  m = big.where(m * 0.5, m)
  e = e + big.where(x.const_like(1.0), x.const_like(0.0))
  t = (m - 1.0) * (m + 1.0).reciprocal()
  t2 = t * t
  ln_m = t * _poly(t2, [2.0, 2/3, 2/5, 2/7, 2/9, 2/11])
  ret = e + ln_m * (1 / LN2)
  ret = x.eq(0.0).where(x.const_like(float("-inf")), ret)
  ret = (x < 0.0).where(x.const_like(float("nan")), ret)
  return (x.ne(x) | x.eq(float("inf"))).where(x, ret)

def xsin(x: UOp) -> UOp:
  # k = round(x * 2/pi), r = x - k*pi/2 (Cody-Waite: pi/2 in three parts, the first two short so k*part is exact)
  k = _round(x * 0.6366197723675814)
  r = ((x - k * 1.5703125) - k * 0.0004837512969970703) - k * 7.549789948768648e-08
  r2 = r * r
  s = r * _poly(r2, [1.0, -1/6, 1/120, -1/5040, 1/362880, -1/39916800])
  c = _poly(r2, [1.0, -1/2, 1/24, -1/720, 1/40320, -1/3628800, 1/479001600])
  q = k.cast(dtypes.int32) & 3
  ret = (q & 1).eq(1).where(c, s)
  ret = (q & 2).eq(2).where(-ret, ret)
  bad = x.ne(x) | x.eq(float("inf")) | x.eq(float("-inf"))
  return bad.where(x.const_like(float("nan")), ret)

def _in_float(fn: Callable[[UOp], UOp], x: UOp) -> UOp:
  if x.dtype.scalar() in (dtypes.float32, dtypes.float64): return fn(x)
  return fn(x.cast(dtypes.float32)).cast(x.dtype)

def decompose_transcendental(ctx: tuple[Any, int], t: UOp, x: UOp) -> UOp | None:
  """ctx: (renderer, TRANSCENDENTAL level). Level 2 always decomposes; level 1 only what the renderer cannot render."""
  ren, level = ctx
  if x.dtype.count != 1 or level < 1 or (level < 2 and ren.supports_op(t.op, t.dtype)): return None
  return _in_float({Ops.EXP2: xexp2, Ops.LOG2: xlog2, Ops.SIN: xsin}[t.op], x)

pm_transcendental = PatternMatcher([
  (UPat((Ops.EXP2, Ops.LOG2, Ops.SIN), dtype=dtypes.floats, src=(UPat.var("x"),), name="t"), decompose_transcendental),
])
