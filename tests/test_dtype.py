"""dtypes: fp8 and bfloat16 conversions against exact Fraction references, promotion, vectors, pointers, Invalid."""
import bisect, math, random, struct
from fractions import Fraction
import numpy as np
import pytest
from tinygrad.dtype import (dtypes, DType, PtrDType, AddrSpace, Invalid, InvalidType, least_upper_dtype, float_to_fp8, fp8_to_float,
                            float_to_bf16, bf16_to_float, float_to_bf16_np, bf16_to_float_np, fp8_to_float_np, float_to_fp8_np)

# ---- an independent reference: minifloats decoded and rounded with exact rationals ----

# (exponent bits, mantissa bits, has IEEE inf/nan) per format; e4m3 (OCP "FN") has no inf and one NaN mantissa
FORMATS = {dtypes.fp8e4m3: (4, 3, False), dtypes.fp8e5m2: (5, 2, True), dtypes.bfloat16: (8, 7, True)}

def ref_decode(bits: int, eb: int, mb: int, ieee: bool) -> Fraction | str:
  """Exact value of a bit pattern as a Fraction, or 'nan' / '+inf' / '-inf'."""
  sign = -1 if bits >> (eb + mb) & 1 else 1
  e, m = (bits >> mb) & ((1 << eb) - 1), bits & ((1 << mb) - 1)
  bias, emax = (1 << (eb - 1)) - 1, (1 << eb) - 1
  if ieee and e == emax: return "nan" if m else ("+inf" if sign > 0 else "-inf")
  if not ieee and e == emax and m == (1 << mb) - 1: return "nan"
  if e == 0: return sign * Fraction(m, 1 << mb) * Fraction(2) ** (1 - bias)
  return sign * (1 + Fraction(m, 1 << mb)) * Fraction(2) ** (e - bias)

class RefFormat:
  def __init__(self, eb: int, mb: int, ieee: bool):
    self.eb, self.mb, self.ieee = eb, mb, ieee
    nbits = 1 + eb + mb
    self.sign_bit = 1 << (nbits - 1)
    pos = [(ref_decode(b, eb, mb, ieee), b) for b in range(self.sign_bit)]
    self.finite = sorted((v, b) for v, b in pos if isinstance(v, Fraction))
    self.vals = [v for v, _ in self.finite]
    top, prev = self.vals[-1], self.vals[-2]
    # IEEE formats round past the largest finite value to infinity (the next power of two acts as an even code);
    # e4m3 saturates to its largest finite value and has no infinity
    self.overflow = (top + (top - prev), next(b for v, b in pos if v == "+inf")) if ieee else None
    self.cands = list(self.finite) + ([self.overflow] if self.overflow else [])
    self.cand_vals = [v for v, _ in self.cands]

  def encode(self, x: float) -> int | str:
    if math.isnan(x): return "nan"
    sign = self.sign_bit if math.copysign(1.0, x) < 0 else 0
    if math.isinf(x): return sign | self.overflow[1] if self.ieee else sign | self.finite[-1][1]
    a = abs(Fraction(x))
    cands = self.cands
    if not self.ieee and a >= self.vals[-1]: return sign | self.finite[-1][1]
    if self.overflow and a >= self.overflow[0]: return sign | self.overflow[1]
    i = bisect.bisect_left(self.cand_vals, a)
    if cands[i][0] == a: return sign | cands[i][1]
    lo, hi = cands[i - 1], cands[i]
    if a - lo[0] != hi[0] - a: return sign | (lo[1] if a - lo[0] < hi[0] - a else hi[1])
    return sign | (lo[1] if lo[1] % 2 == 0 else hi[1])

REF = {d: RefFormat(*f) for d, f in FORMATS.items()}

def as_float(v: Fraction | str) -> float:
  return math.nan if v == "nan" else math.inf if v == "+inf" else -math.inf if v == "-inf" else float(v)

# ---- fp8 ----

@pytest.mark.parametrize("dt", [dtypes.fp8e4m3, dtypes.fp8e5m2], ids=["e4m3", "e5m2"])
def test_fp8_every_bit_pattern_decodes_and_reencodes(dt):
  eb, mb, ieee = FORMATS[dt]
  for bits in range(256):
    ref = ref_decode(bits, eb, mb, ieee)
    got = fp8_to_float(bits, dt)
    if ref == "nan":
      assert math.isnan(got), f"{bits:#04x}"
      back = float_to_fp8(got, dt)
      assert math.isnan(fp8_to_float(back, dt))
      continue
    assert got == as_float(ref), f"{dt} {bits:#04x}: {got} != {ref}"
    if isinstance(ref, Fraction): assert Fraction(got) == ref
    back = float_to_fp8(got, dt)
    assert back == bits, f"{dt} {bits:#04x} -> {got} -> {back:#04x}"
  # the numpy paths agree with the scalar ones
  allbits = np.arange(256, dtype=np.uint8)
  dec = fp8_to_float_np(allbits, dt)
  assert all((math.isnan(a) and math.isnan(fp8_to_float(b, dt))) or a == fp8_to_float(b, dt) for a, b in zip(dec.tolist(), range(256)))

def _fp8_probe_values(dt) -> list[float]:
  ref = REF[dt]
  vals = [float(v) for v in ref.vals]
  out = [0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30, math.inf, -math.inf]
  for a, b in zip(vals, vals[1:]):
    mid = (a + b) / 2   # exact in float64: fp8 values have few bits
    out += [a, b, mid, math.nextafter(mid, math.inf), math.nextafter(mid, -math.inf)]
  top, prev = vals[-1], vals[-2]
  out += [top + (top - prev) / 2, top + (top - prev), top * 1.01, 448.0, 449.0, 464.0, 480.0, 57344.0, 61440.0, 61439.0, 65536.0]
  rng = random.Random(0)
  out += [rng.uniform(-top * 1.2, top * 1.2) for _ in range(2000)] + [rng.uniform(-vals[3], vals[3]) for _ in range(500)]
  return out + [-v for v in out]

@pytest.mark.parametrize("dt", [dtypes.fp8e4m3, dtypes.fp8e5m2], ids=["e4m3", "e5m2"])
def test_float_to_fp8_rounds_to_nearest_even(dt):
  ref = REF[dt]
  for v in _fp8_probe_values(dt):
    got, want = float_to_fp8(v, dt), ref.encode(v)
    assert got == want, f"{dt} {v!r}: got {got:#04x} ({fp8_to_float(got, dt)}), want {want:#04x} ({fp8_to_float(want, dt)})"
  got_np = float_to_fp8_np(np.array([1.0, 0.3, -500.0]), dt)
  assert got_np.tolist() == [ref.encode(1.0), ref.encode(0.3), ref.encode(-500.0)]

def test_e4m3_saturates_and_has_no_inf():
  assert fp8_to_float(float_to_fp8(1e9, dtypes.fp8e4m3), dtypes.fp8e4m3) == 448.0
  assert fp8_to_float(float_to_fp8(-math.inf, dtypes.fp8e4m3), dtypes.fp8e4m3) == -448.0
  assert not any(math.isinf(fp8_to_float(b, dtypes.fp8e4m3)) for b in range(256))
  assert sum(math.isnan(fp8_to_float(b, dtypes.fp8e4m3)) for b in range(256)) == 2
  assert math.isinf(fp8_to_float(float_to_fp8(1e9, dtypes.fp8e5m2), dtypes.fp8e5m2))

# ---- bfloat16 ----

def _f32(bits: int) -> float: return struct.unpack("<f", struct.pack("<I", bits))[0]

def _bf16_probe_bits() -> list[int]:
  rng = random.Random(1)
  out = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001, 0x00008000, 0x00018000, 0x00008001, 0x007FFFFF, 0x00800000,
         0x3F800000, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x7F7F8000, 0x7F7F7FFF, 0x7F7FFFFF, 0xFF7F8000, 0x7F7EFFFF]
  for _ in range(3000):
    b = rng.getrandbits(32)
    out += [b, (b & 0xFFFF0000) | 0x8000, (b & 0xFFFF0000) | rng.choice([0x7FFF, 0x8001, 0]), b & 0x807FFFFF]
  return [b for b in out if not math.isnan(_f32(b))]

def test_bf16_rounding_matches_fraction_reference():
  ref = REF[dtypes.bfloat16]
  for b in _bf16_probe_bits():
    v = _f32(b)
    got, want = float_to_bf16(v), ref.encode(v)
    assert got == want, f"{b:#010x} ({v!r}): got {got:#06x}, want {want:#06x}"
  vals = np.array([_f32(b) for b in _bf16_probe_bits()[:2000]], dtype=np.float32)
  assert float_to_bf16_np(vals).tolist() == [ref.encode(float(v)) for v in vals]

def test_bf16_nan_inf_and_decode():
  assert math.isnan(bf16_to_float(float_to_bf16(math.nan)))
  assert bf16_to_float(float_to_bf16(math.inf)) == math.inf and bf16_to_float(float_to_bf16(-math.inf)) == -math.inf
  for bits in list(range(0, 65536, 97)) + [0x7F80, 0xFF80, 0x0001, 0x8001, 0x7F7F]:
    r = ref_decode(bits, 8, 7, True)
    got = bf16_to_float(bits)
    assert (math.isnan(got) if r == "nan" else got == as_float(r)), f"{bits:#06x}"
  assert bf16_to_float_np(np.array([0x3F80], dtype=np.uint16)).tolist() == [1.0]

def test_truncate_consts_use_the_formats():
  assert dtypes.as_const(1.0 + 2**-9, dtypes.bfloat16) == 1.0
  assert dtypes.as_const(500.0, dtypes.fp8e4m3) == 448.0
  assert dtypes.as_const(300, dtypes.uint8) == 44 and dtypes.as_const(-129, dtypes.int8) == 127
  assert dtypes.as_const(2**70, dtypes.index) == 2**70

# ---- promotion ----

@pytest.mark.parametrize("a,b,want", [
  (dtypes.int32, dtypes.float32, dtypes.float32), (dtypes.half, dtypes.bfloat16, dtypes.float32), (dtypes.bool, dtypes.int32, dtypes.int32),
  (dtypes.uint8, dtypes.int8, dtypes.int16), (dtypes.int8, dtypes.int64, dtypes.int64), (dtypes.uint32, dtypes.int32, dtypes.int64),
  (dtypes.half, dtypes.float32, dtypes.float32), (dtypes.bool, dtypes.bool, dtypes.bool), (dtypes.int64, dtypes.half, dtypes.half),
  (dtypes.float64, dtypes.int8, dtypes.float64), (dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.half),
])
def test_promotion(a, b, want):
  assert least_upper_dtype(a, b) is want and least_upper_dtype(b, a) is want

# ---- vectors, pointers ----

def test_vec_and_ptr():
  v = dtypes.float32.vec(4)
  assert v.count == 4 and v.scalar() is dtypes.float32 and v.itemsize == 16 and v is dtypes.float32.vec(4)
  assert dtypes.float32.vec(1) is dtypes.float32
  with pytest.raises(ValueError): v.vec(2)
  p = dtypes.half.ptr(16, AddrSpace.LOCAL)
  assert isinstance(p, PtrDType) and p.base is dtypes.half and p.size == 16 and p.addrspace is AddrSpace.LOCAL and p.nbytes() == 32
  assert p.vec(4).vcount == 4 and p.vec(4).scalar() is p
  assert dtypes.float.ptr() is not dtypes.float.ptr(8) and dtypes.float.ptr(8) is dtypes.float.ptr(8)
  with pytest.raises(TypeError): p.ptr()
  assert repr(dtypes.float32.vec(4)) == "dtypes.float32.vec(4)" and repr(dtypes.int8.ptr(3)) == "dtypes.int8.ptr(3)"
  assert isinstance(dtypes.index, DType) and dtypes.is_int(dtypes.index)

# ---- Invalid ----

def test_invalid_orders_after_every_number():
  assert Invalid is InvalidType()
  assert Invalid == Invalid and Invalid != 0 and Invalid is not None
  assert Invalid > 10**30 and not Invalid < -5 and Invalid >= Invalid and Invalid <= Invalid and not Invalid < Invalid
  assert 5 < Invalid and sorted([Invalid, 3, -1]) == [-1, 3, Invalid]
  assert max(7, Invalid) is Invalid and min(7, Invalid) == 7
  assert repr(Invalid) == "Invalid" and hash(Invalid) == hash(InvalidType())
