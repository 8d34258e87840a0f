"""Data types: scalars, vectors, pointers, promotion, the Invalid sentinel, and exact fp8/bfloat16/half conversions."""
from __future__ import annotations
import math, struct, bisect, functools, builtins
from enum import Enum, auto
from typing import Any, Final, Union
import numpy as np

# ---- Invalid ----

class InvalidType:
  """The index-typed sentinel of a masked index: `cond.where(idx, Invalid)`. One instance; sorts after every number."""
  _instance: InvalidType | None = None
  def __new__(cls) -> InvalidType:
    if cls._instance is None: cls._instance = super().__new__(cls)
    return cls._instance
  def __repr__(self) -> str: return "Invalid"
  def __reduce__(self) -> str: return "Invalid"
  def __hash__(self) -> int: return hash("Invalid")
  def __eq__(self, x: object) -> bool: return x is self
  def __lt__(self, x: object) -> bool: return False
  def __le__(self, x: object) -> bool: return x is self
  def __gt__(self, x: object) -> bool: return x is not self
  def __ge__(self, x: object) -> bool: return True
Invalid: Final = InvalidType()

ConstType = Union[float, int, bool]

# ---- DType ----

class AddrSpace(Enum):
  GLOBAL = auto()
  LOCAL = auto()
  REG = auto()
  def __repr__(self) -> str: return f"AddrSpace.{self.name}"

class DType:
  """A scalar or vector type. Interned: equal dtypes are the same object, so `is` and `==` agree."""
  __slots__ = ("priority", "itemsize", "name", "fmt", "count", "_scalar", "_hash", "__weakref__")
  _cache: dict[tuple[Any, ...], DType] = {}
  _hash: int
  priority: int
  itemsize: int
  name: str
  fmt: str | None
  count: int
  _scalar: DType | None
  def __new__(cls, priority: int, itemsize: int, name: str, fmt: str | None, count: int = 1,
              _scalar: DType | None = None) -> DType:
    key = (cls, priority, itemsize, name, fmt, count, _scalar)
    if (ret := DType._cache.get(key)) is not None: return ret
    ret = object.__new__(cls)
    for k, v in zip(("priority", "itemsize", "name", "fmt", "count", "_scalar"), key[1:]): object.__setattr__(ret, k, v)
    object.__setattr__(ret, "_hash", hash(key))
    DType._cache[key] = ret
    return ret
  def __setattr__(self, k: str, v: Any) -> None: raise AttributeError(f"DType is immutable (tried to set {k})")
  # NOTE: no __eq__/__hash__: dtypes are interned, so the default identity comparison (done in C) is exact and fast
  def __reduce__(self) -> tuple:
    return (DType, (self.priority, self.itemsize, self.name, self.fmt, self.count, self._scalar))
  def __repr__(self) -> str:
    if self.count > 1: return f"{self.scalar()!r}.vec({self.count})"
    return f"dtypes.{INVERSE_DTYPES_DICT[self.name]}" if self.name in INVERSE_DTYPES_DICT else f"dtypes.{self.name}"
  def __lt__(self, o: DType) -> bool:
    return (self.priority, self.itemsize, self.name, self.count) < (o.priority, o.itemsize, o.name, o.count)
  @property
  def base(self) -> DType: return self
  @property
  def vcount(self) -> int: return self.count
  def scalar(self) -> DType: return self._scalar if self._scalar is not None else self
  def vec(self, sz: int) -> DType:
    if sz < 1: raise ValueError(f"vec({sz}): vector width must be >= 1")
    if self.count != 1: raise ValueError(f"vec({sz}) of {self}: can only make vectors of scalars")
    if sz == 1 or self == dtypes.void: return self
    return DType(self.priority, self.itemsize * sz, f"{INVERSE_DTYPES_DICT.get(self.name, self.name)}{sz}", None, sz,
                 self)
  def ptr(self, size: int = -1, addrspace: AddrSpace = AddrSpace.GLOBAL) -> PtrDType:
    return PtrDType(self.priority, self.itemsize, self.name, self.fmt, self.count, None, self, addrspace, 1, size)

class PtrDType(DType):
  """A pointer to `base` in an address space; `size` is the number of elements (-1 when unknown),
  `v` pointer vector width."""
  __slots__ = ("_base", "addrspace", "v", "size")
  _base: DType
  addrspace: AddrSpace
  v: int
  size: int
  def __new__(cls, priority: int, itemsize: int, name: str, fmt: str | None, count: int, _scalar: DType | None,
              _base: DType, addrspace: AddrSpace = AddrSpace.GLOBAL, v: int = 1, size: int = -1) -> PtrDType:
    key = (cls, priority, itemsize, name, fmt, count, _scalar, _base, addrspace, v, size)
    if (ret := DType._cache.get(key)) is not None: return ret  # type: ignore[return-value]
    ret = object.__new__(cls)
    for k, val in zip(("priority", "itemsize", "name", "fmt", "count", "_scalar", "_base", "addrspace", "v", "size"),
                      key[1:]):
      object.__setattr__(ret, k, val)
    object.__setattr__(ret, "_hash", hash(key))
    DType._cache[key] = ret
    return ret  # type: ignore[return-value]
  def __reduce__(self) -> tuple:
    return (PtrDType, (self.priority, self.itemsize, self.name, self.fmt, self.count, self._scalar, self._base,
                       self.addrspace, self.v, self.size))
  @property
  def base(self) -> DType: return self._base
  @property
  def vcount(self) -> int: return self.v
  def scalar(self) -> PtrDType: return self._base.ptr(self.size, self.addrspace) if self.v != 1 else self
  def vec(self, sz: int) -> PtrDType:
    if self.v != 1: raise ValueError(f"vec({sz}) of {self}: already a pointer vector")
    if sz == 1: return self
    return PtrDType(self.priority, self.itemsize, self.name, self.fmt, self.count, None, self._base, self.addrspace, sz,
                    self.size)
  def ptr(self, size: int = -1, addrspace: AddrSpace = AddrSpace.GLOBAL) -> PtrDType:
    raise TypeError("no pointers to pointers")
  def nbytes(self) -> int:
    if self.size == -1: raise ValueError(f"{self} has no size")
    return self.size * self._base.itemsize
  def __repr__(self) -> str:
    args = ([str(self.size)] if self.size != -1 or self.addrspace != AddrSpace.GLOBAL else []) + \
           ([f"{self.addrspace!r}"] if self.addrspace != AddrSpace.GLOBAL else [])
    return f"{self._base!r}.ptr({', '.join(args)})" + (f".vec({self.v})" if self.v != 1 else "")

class dtypes:
  """The dtype namespace. `dtypes.index` is the unbounded integer of index math, lowered to int32/int64 late."""
  void: Final = DType(-1, 0, "void", None)
  index: Final = DType(-1, 8, "index", None)
  bool: Final = DType(0, 1, "bool", "?")
  int8: Final = DType(1, 1, "signed char", "b")
  uint8: Final = DType(2, 1, "unsigned char", "B")
  int16: Final = DType(3, 2, "short", "h")
  uint16: Final = DType(4, 2, "unsigned short", "H")
  int32: Final = DType(5, 4, "int", "i")
  uint32: Final = DType(6, 4, "unsigned int", "I")
  int64: Final = DType(7, 8, "long", "q")
  uint64: Final = DType(8, 8, "unsigned long", "Q")
  fp8e4m3: Final = DType(9, 1, "float8_e4m3", None)
  fp8e5m2: Final = DType(10, 1, "float8_e5m2", None)
  float16: Final = DType(11, 2, "half", "e")
  bfloat16: Final = DType(12, 2, "__bf16", None)
  float32: Final = DType(13, 4, "float", "f")
  float64: Final = DType(14, 8, "double", "d")
  # aliases
  half = float16; float = float32; double = float64
  uchar = uint8; ushort = uint16; uint = uint32; ulong = uint64
  char = int8; short = int16; int = int32; long = int64
  default_float: DType = float32
  default_int: DType = int32

  floats: tuple[DType, ...] = (fp8e4m3, fp8e5m2, float16, bfloat16, float32, float64)
  uints: tuple[DType, ...] = (uint8, uint16, uint32, uint64)
  sints: tuple[DType, ...] = (int8, int16, int32, int64)
  ints: tuple[DType, ...] = uints + sints
  fp8s: tuple[DType, ...] = (fp8e4m3, fp8e5m2)

  @staticmethod
  def is_float(x: DType) -> builtins.bool: return x.scalar() in dtypes.floats
  @staticmethod
  def is_int(x: DType) -> builtins.bool: return x.scalar() in dtypes.ints or x.scalar() is dtypes.index
  @staticmethod
  def is_unsigned(x: DType) -> builtins.bool: return x.scalar() in dtypes.uints
  @staticmethod
  def is_bool(x: DType) -> builtins.bool: return x.scalar() is dtypes.bool
  @staticmethod
  def from_py(x: Any) -> DType:
    if isinstance(x, float): return dtypes.default_float
    if isinstance(x, bool): return dtypes.bool
    if isinstance(x, int):
      # NOTE: an int that does not fit the default int widens (as numpy does) rather than silently wrapping
      if -2**31 <= x < 2**31: return dtypes.default_int
      if -2**63 <= x < 2**63: return dtypes.int64
      if 0 <= x < 2**64: return dtypes.uint64
      raise OverflowError(f"Python int {x} does not fit any integer dtype (int64 or uint64)")
    if isinstance(x, (list, tuple)): return max((dtypes.from_py(v) for v in x), default=dtypes.default_float)
    raise TypeError(f"cannot infer a dtype from {type(x).__name__} {x!r}")
  @staticmethod
  def float_from_bits(bits: builtins.int) -> builtins.float:
    """The Python float (an IEEE double) whose 64 bits are `bits`, sign, payload and signalling bit kept: pyrender's
    literal for a NaN that `float('nan')` and `-float('nan')` do not spell."""
    if type(bits) is not builtins.int or not 0 <= bits < 2**64:
      raise ValueError(f"dtypes.float_from_bits: expected an int in [0, 2**64), got {bits!r}")
    ret: builtins.float = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return ret
  @staticmethod
  def as_const(val: Any, dtype: DType) -> Any:
    """The Python value a CONST of `dtype` holds: ints wrap as C does, floats round to the format."""
    if isinstance(val, InvalidType): return val
    if isinstance(val, tuple): return tuple(dtypes.as_const(v, dtype) for v in val)
    return truncate[dtype.scalar()](val)
  @staticmethod
  def min(dtype: DType) -> ConstType:
    d = dtype.scalar()
    if d is dtypes.index: return -(2**63)
    if dtypes.is_int(d): return 0 if d in dtypes.uints else -2**(d.itemsize*8-1)
    if d is dtypes.bool: return False
    return -math.inf if d is not dtypes.fp8e4m3 else -448.0
  @staticmethod
  def max(dtype: DType) -> ConstType:
    d = dtype.scalar()
    if d is dtypes.index: return 2**63-1
    if dtypes.is_int(d): return 2**(d.itemsize*8)-1 if d in dtypes.uints else 2**(d.itemsize*8-1)-1
    if d is dtypes.bool: return True
    return math.inf if d is not dtypes.fp8e4m3 else 448.0
  @staticmethod
  def finfo(d: DType) -> tuple[builtins.int, builtins.int]:
    """(exponent bits, mantissa bits) of a float dtype."""
    return {dtypes.fp8e4m3: (4, 3), dtypes.fp8e5m2: (5, 2), dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7),
            dtypes.float32: (8, 23), dtypes.float64: (11, 52)}[d.scalar()]
  @staticmethod
  def fields() -> dict[str, DType]: return DTYPES_DICT

DTYPES_DICT: dict[str, DType] = {k: v for k, v in dtypes.__dict__.items()
                                 if isinstance(v, DType) and not k.startswith("default")}
INVERSE_DTYPES_DICT: dict[str, str] = {}
for _k, _v in DTYPES_DICT.items(): INVERSE_DTYPES_DICT.setdefault(_v.name, _k)
# the canonical names print first
INVERSE_DTYPES_DICT.update({"float": "float32", "half": "float16", "double": "float64", "int": "int32", "long": "int64",
                            "short": "int16", "signed char": "int8", "unsigned char": "uint8",
                            "unsigned short": "uint16", "unsigned int": "uint32", "unsigned long": "uint64",
                            "__bf16": "bfloat16"})

DTypeLike = Union[str, DType]

def to_dtype(x: Any) -> DType:
  """A DType from a DType, its name (`"float32"`, `"half"`, `"uint8"`: any field of `dtypes`) or a numpy dtype."""
  if isinstance(x, DType): return x
  if isinstance(x, str):
    if (d := DTYPES_DICT.get(x.removeprefix("dtypes."))) is not None: return d
    raise TypeError(f"unknown dtype name {x!r}; use a DType (dtypes.float32) or one of the names "
                    f"{', '.join(sorted(DTYPES_DICT))}")
  # NOTE: np.dtype(None) is float64: None is not a dtype here
  try: npdt = None if x is None else np.dtype(x)
  except TypeError: npdt = None
  if npdt is None:
    raise TypeError(f"{x!r} ({type(x).__name__}) is not a dtype; use a DType (dtypes.float32) or its name")
  return from_np_dtype(npdt)

# ---- promotion ----
# NOTE: the lattice below gives the least common dtype as numpy/torch users expect: int+float -> float,
# half+bfloat16 -> float32, bool+int -> int, signed+unsigned of the same width -> the next wider signed
# (uint64+int64 -> a float, as in JAX's lattice).
_parents: dict[DType, tuple[DType, ...]] = {
  dtypes.float64: (), dtypes.float32: (dtypes.float64,),
  dtypes.float16: (dtypes.float32,), dtypes.bfloat16: (dtypes.float32,),
  dtypes.fp8e4m3: (dtypes.float16, dtypes.bfloat16), dtypes.fp8e5m2: (dtypes.float16, dtypes.bfloat16),
  dtypes.int64: (dtypes.fp8e4m3, dtypes.fp8e5m2), dtypes.int32: (dtypes.int64,),
  dtypes.int16: (dtypes.int32,), dtypes.int8: (dtypes.int16,),
  dtypes.uint64: (dtypes.fp8e4m3, dtypes.fp8e5m2), dtypes.uint32: (dtypes.int64, dtypes.uint64),
  dtypes.uint16: (dtypes.int32, dtypes.uint32), dtypes.uint8: (dtypes.int16, dtypes.uint16),
  dtypes.bool: (dtypes.int8, dtypes.uint8)}

@functools.cache
def _ancestors(d: DType) -> frozenset[DType]:
  return frozenset({d}).union(*(_ancestors(p) for p in _parents[d]))

def least_upper_dtype(*ds: DType) -> DType:
  """The smallest dtype every argument promotes to."""
  if not ds: raise ValueError("least_upper_dtype needs at least one dtype")
  if any(d.scalar() is dtypes.index for d in ds): return dtypes.index
  common = functools.reduce(lambda a, b: a & b, (_ancestors(d.scalar()) for d in ds))
  # the least element: the one whose ancestor set is the largest
  ret = max(common, key=lambda d: (len(_ancestors(d)), -d.priority))
  # NOTE: uint64 with a signed int meets at the lattice's first float, an fp8; no one wants int64 values in 8 bits, so
  # they go to float64 (as numpy does)
  return dtypes.float64 if ret in dtypes.fp8s and not any(d.scalar() in dtypes.fp8s for d in ds) else ret

def least_upper_float(dt: DType) -> DType:
  return dt if dtypes.is_float(dt) else least_upper_dtype(dt, dtypes.default_float)

def sum_acc_dtype(dt: DType) -> DType:
  """The accumulator dtype of a sum: ints widen to at least int32 (unsigned stays unsigned),
  floats to at least float32."""
  if dtypes.is_unsigned(dt): return least_upper_dtype(dt, dtypes.uint32)
  if dtypes.is_int(dt) or dt is dtypes.bool: return least_upper_dtype(dt, dtypes.int32)
  return least_upper_dtype(dt, dtypes.float32)

# ---- exact conversions: fp8, bfloat16, half ----

def _minifloat_decode(bits: int, ebits: int, mbits: int, ieee_specials: bool) -> float:
  sign = -1.0 if bits >> (ebits + mbits) & 1 else 1.0
  e, m, bias = bits >> mbits & ((1 << ebits) - 1), bits & ((1 << mbits) - 1), (1 << (ebits - 1)) - 1
  if ieee_specials and e == (1 << ebits) - 1: return sign * math.inf if m == 0 else math.nan
  if not ieee_specials and e == (1 << ebits) - 1 and m == (1 << mbits) - 1: return math.nan
  if e == 0: return sign * m * 2.0 ** (1 - bias - mbits)
  return sign * (1 + m / (1 << mbits)) * 2.0 ** (e - bias)

class _Fp8Format:
  """Decode table and round-to-nearest-even encoder for one fp8 format."""
  def __init__(self, ebits: int, mbits: int, ieee_specials: bool):
    self.ebits, self.mbits, self.ieee = ebits, mbits, ieee_specials
    self.table = [_minifloat_decode(b, ebits, mbits, ieee_specials) for b in range(256)]
    # positive finite codes in increasing order (codes of positive minifloats are monotonic in value)
    self.pos_codes = [c for c in range(128) if math.isfinite(self.table[c])]
    self.pos_vals = [self.table[c] for c in self.pos_codes]
    self.max = self.pos_vals[-1]
    self.nan_code = 0x7F if not ieee_specials else 0x7E
  def encode(self, x: float) -> int:
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x): return sign | (0x7F if not self.ieee else 0x7E)
    a = abs(x)
    if not self.ieee and a >= self.max: return sign | self.pos_codes[-1]  # e4m3: saturate, no infinity
    if self.ieee:
      # the value one step past max is 2**(emax+1): rounding there (ties to even) gives infinity
      overflow = self.max + (self.max - self.pos_vals[-2])
      if a >= overflow or (a > self.max and a - self.max >= overflow - a):
        return sign | (0x7C if self.ebits == 5 else 0x78)
      if a >= self.max: return sign | self.pos_codes[-1]
    i = bisect.bisect_right(self.pos_vals, a) - 1
    lo_c, lo_v = self.pos_codes[i], self.pos_vals[i]
    if lo_v == a or i + 1 >= len(self.pos_vals): return sign | lo_c
    hi_c, hi_v = self.pos_codes[i + 1], self.pos_vals[i + 1]
    dlo, dhi = a - lo_v, hi_v - a
    if dlo < dhi: return sign | lo_c
    if dhi < dlo: return sign | hi_c
    return sign | (lo_c if lo_c % 2 == 0 else hi_c)

FP8_FORMATS: dict[DType, _Fp8Format] = {dtypes.fp8e4m3: _Fp8Format(4, 3, False), dtypes.fp8e5m2: _Fp8Format(5, 2, True)}

def float_to_fp8(x: float, dtype: DType) -> int:
  """Bit pattern of the fp8 value nearest `x` (round to nearest even; e4m3 saturates at +-448 and has no infinity)."""
  return FP8_FORMATS[dtype].encode(float(x))
def fp8_to_float(bits: int, dtype: DType) -> float: return FP8_FORMATS[dtype].table[bits & 0xFF]

def float_to_bf16(x: float) -> int:
  """Bit pattern of the bfloat16 nearest float32(x), round to nearest even; NaN stays a quiet NaN."""
  if math.isnan(x): return 0x7FC0 | (0x8000 if math.copysign(1.0, x) < 0 else 0)
  with np.errstate(over="ignore"): b = struct.unpack("<I", struct.pack("<f", float(np.float32(x))))[0]
  return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
def bf16_to_float(bits: int) -> float: return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]

def fp8_to_float_np(bits: np.ndarray, dtype: DType) -> np.ndarray:
  return np.asarray(FP8_FORMATS[dtype].table, dtype=np.float32)[bits.astype(np.uint8)]
def float_to_fp8_np(x: np.ndarray, dtype: DType) -> np.ndarray:
  # NOTE: the encoder runs in Python per element, so each distinct value is encoded once (keyed by its bits, which keep
  # -0.0 apart from 0.0)
  f = np.asarray(x, dtype=np.float64)
  u, inv = np.unique(f.view(np.uint64).ravel(), return_inverse=True)
  enc = FP8_FORMATS[dtype].encode
  codes = np.fromiter((enc(float(v)) for v in u.view(np.float64)), dtype=np.uint8, count=u.size)
  return codes[inv].reshape(f.shape)
def bf16_to_float_np(bits: np.ndarray) -> np.ndarray: return (bits.astype(np.uint32) << 16).view(np.float32)
def float_to_bf16_np(x: np.ndarray) -> np.ndarray:
  f = np.asarray(x, dtype=np.float32)
  b = f.view(np.uint32).astype(np.uint64)
  out = (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
  return np.where(np.isnan(f), np.where(np.signbit(f), 0xFFC0, 0x7FC0).astype(np.uint16), out)

def _round_float(fmt: str, x: float) -> float:
  try: return struct.unpack(fmt, struct.pack(fmt, x))[0]
  except OverflowError: return math.copysign(math.inf, x)
def _wrap_int(bits: int, signed: bool) -> Any:
  def f(x: Any) -> int:
    v = int(x) & ((1 << bits) - 1)
    return v - (1 << bits) if signed and v >> (bits - 1) else v
  return f

def _as_float(x: Any) -> float:
  """float(x), where an int past float64's range rounds to the infinity of its sign (IEEE's overflow), not raises"""
  try: return float(x)
  except OverflowError: return math.inf if x > 0 else -math.inf

def _trunc_float(x: Any, fmt: str) -> float:
  x = _as_float(x)
  return x if math.isnan(x) or math.isinf(x) else _round_float(fmt, x)

truncate: dict[DType, Any] = {
  dtypes.bool: bool, dtypes.index: int,
  dtypes.float16: lambda x: _trunc_float(x, "<e"), dtypes.float32: lambda x: _trunc_float(x, "<f"),
  dtypes.float64: _as_float,
  dtypes.bfloat16: lambda x: bf16_to_float(float_to_bf16(_as_float(x))),
  dtypes.fp8e4m3: lambda x: fp8_to_float(float_to_fp8(_as_float(x), dtypes.fp8e4m3), dtypes.fp8e4m3),
  dtypes.fp8e5m2: lambda x: fp8_to_float(float_to_fp8(_as_float(x), dtypes.fp8e5m2), dtypes.fp8e5m2),
  **{d: _wrap_int(8 * d.itemsize, d in dtypes.sints) for d in dtypes.ints}}

def to_storage_np(x: Any, dt: DType) -> np.ndarray:
  """Values -> the array a buffer of `dt` holds (bfloat16 and fp8 rounded to the format and given as their bits)."""
  d = dt.scalar()
  if d is dtypes.bfloat16: return float_to_bf16_np(np.asarray(x, dtype=np.float32))
  if d in dtypes.fp8s: return float_to_fp8_np(np.asarray(x), d)
  return np.asarray(x).astype(to_np_dtype(d), copy=False)

def from_storage_np(raw: np.ndarray, dt: DType) -> np.ndarray:
  """What a buffer of `dt` holds -> its values (bfloat16 and fp8 bits decoded to float32)."""
  d = dt.scalar()
  if d is dtypes.bfloat16: return bf16_to_float_np(raw)
  if d in dtypes.fp8s: return fp8_to_float_np(raw, d)
  return raw

def to_np_dtype(dt: DType) -> type:
  """numpy dtype used to hold `dt` (fp8 as uint8 bits, bfloat16 as uint16 bits)."""
  m = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16,
       dtypes.uint16: np.uint16, dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64,
       dtypes.uint64: np.uint64, dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64,
       dtypes.bfloat16: np.uint16, dtypes.fp8e4m3: np.uint8, dtypes.fp8e5m2: np.uint8, dtypes.index: np.int64}
  return m[dt.scalar()]

def from_np_dtype(npdt: Any) -> DType:
  m = {np.dtype(np.bool_): dtypes.bool, np.dtype(np.int8): dtypes.int8, np.dtype(np.uint8): dtypes.uint8,
       np.dtype(np.int16): dtypes.int16, np.dtype(np.uint16): dtypes.uint16, np.dtype(np.int32): dtypes.int32,
       np.dtype(np.uint32): dtypes.uint32, np.dtype(np.int64): dtypes.int64, np.dtype(np.uint64): dtypes.uint64,
       np.dtype(np.float16): dtypes.float16, np.dtype(np.float32): dtypes.float32, np.dtype(np.float64): dtypes.float64}
  if np.dtype(npdt) not in m: raise TypeError(f"numpy dtype {npdt} has no tinygrad dtype")
  return m[np.dtype(npdt)]
