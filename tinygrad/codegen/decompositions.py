"""Ops the target lacks, rewritten into ops it has: THREEFRY into uint32 arithmetic, arithmetic on emulated dtypes
(bfloat16, fp8 stored as bits) through float32, integer division by a constant as a multiply and shifts (where the
renderer says division is slow), and exp2/log2/sin as float polynomials (TRANSCENDENTAL)."""
from __future__ import annotations
import fractions, math
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, UPat, PatternMatcher
from typing import Callable
from tinygrad.dtype import DType, dtypes
from tinygrad.renderer import Renderer

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

def decompose_pow(p: UOp, a: UOp, b: UOp) -> UOp:
  """a**b as IEEE pow (np.power) for a target without POW: exp2(b*log2|a|) in float64 (the log's error is multiplied by
  the result's exponent: float64 keeps it under float32's budget), the sign for a negative base and an odd integer
  exponent, NaN for a finite negative base and a non-integer exponent, and 1 for b == 0, a == 1 and (-1)**+-inf."""
  f = dtypes.float64
  x, y = (a, b) if a.dtype is f else (a.cast(f), b.cast(f))
  ax = (x < 0.0).where(-x, x)
  r = (y * ax.log2()).exp2()
  half = y * 0.5
  y_int, y_odd = y.trunc().eq(y), y.trunc().eq(y) & half.trunc().ne(half)
  # NOTE: the sign bit, not x < 0: (-0.0)**3 is -0.0 and (-0.0)**-3 is -inf
  r = ((x.bitcast(dtypes.int64) < 0) & y_odd).where(-r, r)
  inf = y.const_like(float("inf"))
  # NOTE: a finite negative base only: (-inf)**y for a non-integer y is exp2(y*inf), +inf or +0.0 (found by fuzz)
  r = ((x < 0.0) & x.ne(-inf) & y_int.ne(True)).where(r.const_like(float("nan")), r)
  one = x.eq(1.0) | y.eq(0.0) | (x.eq(-1.0) & (y.eq(inf) | y.eq(-inf)))
  r = one.where(r.const_like(1.0), r)
  return r if p.dtype is f else r.cast(p.dtype)

# ctx: the renderer
pm_decompose = PatternMatcher([
  # NOTE: before the transcendentals (decomposed next, where the target lacks them): LLVM's AMDGPU backend has no pow
  (UPat(Ops.POW, dtype=dtypes.floats, src=(UPat.var("a"), UPat.var("b")), name="p"),
   lambda ctx, p, a, b: None if p.dtype.count != 1 or ctx.supports_op(Ops.POW, p.dtype) else decompose_pow(p, a, b)),
  (UPat(Ops.THREEFRY, dtype=dtypes.uint64, src=(UPat.var("x"), UPat.var("key")), name="t"),
   lambda ctx, t, x, key: None if ctx.supports_op(Ops.THREEFRY, t.dtype) else decompose_threefry(x, key)),
  # NOTE: integers only: MULACC of floats is fused (one rounding), and a*b+c rounds twice
  (UPat(Ops.MULACC, src=(UPat.var("a"), UPat.var("b"), UPat.var("c")), name="m"),
   lambda ctx, m, a, b, c: None if ctx.supports_op(Ops.MULACC, m.dtype) or dtypes.is_float(m.dtype) else a * b + c),
])

# ---- integer division by a constant as a multiply and shifts (the dtypes in the renderer's div_by_multiply) ----
# NOTE: Granlund-Montgomery round-up magic numbers; fuzz/ledger/codegen.py proves the graphs with z3 for every divisor

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

# the dtypes division by a constant is lowered for, each with the dtype twice its width the steps are computed in
DIVMOD_WIDE: dict[DType, DType] = {dtypes.int8: dtypes.int16, dtypes.uint8: dtypes.uint16, dtypes.int16: dtypes.int32,
  dtypes.uint16: dtypes.uint32, dtypes.int32: dtypes.int64, dtypes.uint32: dtypes.uint64}

def fast_idiv(x: UOp, d: int) -> UOp:
  """x // d (C truncation, MIN // -1 == MIN) for a scalar x of a DIVMOD_WIDE dtype and a nonzero constant d of it."""
  dt, bits = x.dtype, x.dtype.itemsize * 8
  wide = DIVMOD_WIDE[dt]
  if dtypes.is_unsigned(dt):
    if d & (d - 1) == 0: return x >> (d.bit_length() - 1)
    mlow, s = magic_unsigned(d, bits)
    return udiv_magic(x, UOp.const(wide, mlow), s, bits, wide).cast(dt)
  if d == 1: return x
  if d == -1: return x * -1
  if d == -2**(bits - 1): return x.eq(-2**(bits - 1)).cast(dt)
  if d < 0: return fast_idiv(x, -d) * -1
  m, p = magic_signed(d, bits)
  return sdiv_magic(x, UOp.const(wide, m), p, bits, wide).cast(dt)

def lower_divmod_const(ctx: tuple[DType, ...], dm: UOp, x: UOp, c: UOp) -> UOp | None:
  """IDIV/MOD of a dtype in `ctx` (the renderer's `div_by_multiply`) by a nonzero constant, as a multiply and shifts."""
  if dm.dtype not in ctx or dm.dtype not in DIVMOD_WIDE or c.arg == 0: return None
  q = fast_idiv(x, int(c.arg))
  # NOTE: SUB, not x + q*c*-1: the remainder never wraps, and an unsigned -1 would be 2**bits-1
  return q if dm.op is Ops.IDIV else UOp(Ops.SUB, dm.dtype, (x, q * c))

# ctx: the dtypes to lower (Renderer.div_by_multiply)
pm_fast_divmod = PatternMatcher([
  (UPat((Ops.IDIV, Ops.MOD), src=(UPat.var("x"), UPat(Ops.CONST, name="c")), name="dm"), lower_divmod_const),
])

# ---- transcendental functions as polynomials (TRANSCENDENTAL>=2, or targets without them) ----
# NOTE: float32 accuracy is about an ulp (sin at any argument); half computes in float32; float64 uses longer
# polynomials (Taylor terms until they drop below 1e-17, about 1e-14 relative)

LN2 = 0.6931471805599453

def _poly(x: UOp, coeffs: list[float]) -> UOp:
  """Horner: coeffs[0] + x*(coeffs[1] + x*(...))."""
  acc = x.const_like(coeffs[-1])
  for c in reversed(coeffs[:-1]): acc = acc * x + c
  return acc

def _round(x: UOp) -> UOp: return (x + (x < 0).where(x.const_like(-0.5), x.const_like(0.5))).trunc()

def _pow2i(n: UOp, dt: DType) -> UOp:
  """2**n for an int32 n in the normal exponent range of dt ([-126, 127]; float64 [-1022, 1023]), from its bits."""
  ibits, shift, bias = (dtypes.int64, 52, 1023) if dt is dtypes.float64 else (dtypes.int32, 23, 127)
  return ((n.cast(ibits) + bias) << shift).bitcast(dt)

def xexp2(x: UOp) -> UOp:
  # NOTE: clamped just past the dtype's range (below the smallest subnormal: 0; past the largest: inf); float64's is
  # its own, not float32's (found by fuzz: exp2 of 144.0 in float64 on AMD gave 2**129)
  lo, hi = (-1076.0, 1025.0) if x.dtype is dtypes.float64 else (-151.0, 129.0)
  xc = x.maximum(x.const_like(lo)).minimum(x.const_like(hi))
  n = _round(xc)
  f = xc - n
  # 2**f = e**(f*ln2), |f| <= 0.5: Taylor to degree 8 (error ~3e-10), 14 for float64
  p = _poly(f * LN2, [1 / math.factorial(n) for n in range(15 if x.dtype is dtypes.float64 else 9)])
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
  ln_m = t * _poly(t2, [2 / (2 * n + 1) for n in range(11 if f64 else 6)])
  ret = e + ln_m * (1 / LN2)
  ret = x.eq(0.0).where(x.const_like(float("-inf")), ret)
  ret = (x < 0.0).where(x.const_like(float("nan")), ret)
  return (x.ne(x) | x.eq(float("inf"))).where(x, ret)

def _pi_fixed(prec: int) -> int:
  """pi * 2**prec (to within a few units), in integers by Machin's formula: pi = 16 atan(1/5) - 4 atan(1/239)."""
  one = 1 << prec
  def atan_inv(n: int) -> int:
    total, term, k, sign = 0, one // n, 1, 1
    while term:
      total, term, k, sign = total + sign * (term // k), term // (n * n), k + 2, -sign
    return total
  return 16 * atan_inv(5) - 4 * atan_inv(239)

def _two_over_pi_words(nwords: int) -> tuple[int, ...]:
  """The first 32*nwords bits of the fraction of 2/pi as 32-bit words (64 guard bits)."""
  prec = 32 * nwords + 64
  frac = (2 << (2 * prec)) // _pi_fixed(prec) >> 64
  return tuple((frac >> (32 * (nwords - 1 - i))) & M32 for i in range(nwords))

# Cody-Waite: pi/2 = P1 + P2 + P3 + P4. P1 and P2 have 8 and 11 significant bits (k*P1, k*P2 exact for k < 2**13 in
# float32, much further in float64), P3 is float32, P4 (what float64 needs) the rest.
CW_P1, CW_P2, CW_P3 = 1.5703125, 0.0004837512969970703, 7.549789948768648e-08
CW_P4 = float(fractions.Fraction(_pi_fixed(200), 1 << 201) - fractions.Fraction(CW_P1) - fractions.Fraction(CW_P2) -
              fractions.Fraction(CW_P3))

# NOTE: one zero word first, so the window of bits a float32 above 2**13 needs starts at bit 20 or later
TWO_OVER_PI = (0,) + _two_over_pi_words(7)
PAYNE_HANEK_MIN = 8192.0

def _select(i: UOp, table: tuple[int, ...], dt: DType) -> UOp:
  """table[i] for a small unsigned i, as a chain of WHERE (no memory)."""
  ret = UOp.const(dt, table[-1])
  for k in range(len(table) - 2, -1, -1): ret = i.eq(k).where(UOp.const(dt, table[k]), ret)
  return ret

def _payne_hanek(ax: UOp) -> tuple[UOp, UOp]:
  """Exact reduction of a float32 ax >= 2**13: (r, q) with ax = q*pi/2 + r (mod 2*pi), |r| <= pi/4, q an int32 in
  0..4. ax = m * 2**e (m the 24-bit mantissa): only the 96 bits of 2/pi from bit e-1 on matter to m * 2**e * 2/pi
  mod 4 (the earlier ones add multiples of 4), so m times that window, mod 2**96, holds the quadrant in its top two bits
  and the fraction below."""
  u32, u64 = dtypes.uint32, dtypes.uint64
  bits = ax.bitcast(u32)
  m = ((bits & 0x7FFFFF) | 0x800000).cast(u64)
  # b_(e-1), bit e-1 of 2/pi after the point (e = biased exponent - 150), is bit j = e + 30 of TWO_OVER_PI from its top
  j = (bits >> 23) - 120
  a, b = j >> 5, (j & 31).cast(u64)
  t = [_select(a + k, TWO_OVER_PI, u32).cast(u64) for k in range(4)]
  w0, w1, w2 = [(((t[k] << 32) | t[k + 1]) << b) >> 32 & M32 for k in range(3)]
  # (m * (w0:w1:w2)) mod 2**96 = hi:mid:lo, each product below 2**56
  t1 = m * w1 + (m * w2 >> 32)
  mid, hi = t1 & M32, (m * w0 + (t1 >> 32)) & M32
  # the top 62 bits of the fraction; above one half, round to the next quadrant in integers (exact, no cancellation)
  frac = ((hi & 0x3FFFFFFF) << 32) | mid
  up = frac >= (1 << 61)
  f = up.where((1 << 62) - frac, frac).cast(dtypes.float32) * (2.0 ** -62)
  q = (hi >> 30).cast(dtypes.int32) + up.cast(dtypes.int32)
  return up.where(-f, f) * 1.5707963267948966, q

def xsin(x: UOp) -> UOp:
  """sin on |x| with the sign of x. Reduction: Cody-Waite (k = round(x * 2/pi), r = x - k*pi/2 with pi/2 in the four
  parts above), exact Payne-Hanek for float32 above 2**13; then polynomials for sin and cos on |r| <= pi/4 picked by
  the quadrant."""
  f32 = x.dtype is dtypes.float32
  ax = (x < 0).where(-x, x)
  big = (ax > PAYNE_HANEK_MIN) if f32 else ax.ne(ax)
  # NOTE: each reduction gets a harmless input where the other one is used (no int overflow, no garbage shifts)
  xc = big.where(x.const_like(0.0), ax)
  k = _round(xc * 0.6366197723675814)
  r = (((xc - k * CW_P1) - k * CW_P2) - k * CW_P3) - k * CW_P4
  # NOTE: the quadrant is k mod 4 taken in float, exact while k is (a float64 k may exceed every int type)
  q = (k - (k * 0.25).trunc() * 4.0).cast(dtypes.int32)
  if f32:
    ph_r, ph_q = _payne_hanek(big.where(ax, x.const_like(PAYNE_HANEK_MIN * 2)))
    r, q = big.where(ph_r, r), big.where(ph_q, q)
  r2 = r * r
  nterms = 6 if f32 else 9
  s = r * _poly(r2, [(-1) ** n / math.factorial(2 * n + 1) for n in range(nterms)])
  c = _poly(r2, [(-1) ** n / math.factorial(2 * n) for n in range(nterms + 1)])
  q = q & 3
  ret = (q & 1).eq(1).where(c, s)
  ret = (q & 2).eq(2).where(-ret, ret)
  ret = (x < 0).where(-ret, ret)
  bad = x.ne(x) | x.eq(float("inf")) | x.eq(float("-inf"))
  return bad.where(x.const_like(float("nan")), ret)

def _in_float(fn: Callable[[UOp], UOp], x: UOp) -> UOp:
  if x.dtype.scalar() in (dtypes.float32, dtypes.float64): return fn(x)
  return fn(x.cast(dtypes.float32)).cast(x.dtype)

def decompose_transcendental(ctx: tuple[Renderer, int], t: UOp, x: UOp) -> UOp | None:
  """ctx: (renderer, TRANSCENDENTAL level). Level 2 always decomposes; level 1 only what the renderer cannot render."""
  ren, level = ctx
  if x.dtype.count != 1 or level < 1 or (level < 2 and ren.supports_op(t.op, t.dtype)): return None
  return _in_float({Ops.EXP2: xexp2, Ops.LOG2: xlog2, Ops.SIN: xsin}[t.op], x)

pm_transcendental = PatternMatcher([
  (UPat((Ops.EXP2, Ops.LOG2, Ops.SIN), dtype=dtypes.floats, src=(UPat.var("x"),), name="t"), decompose_transcendental),
])
