"""GGUF, llama.cpp's checkpoint format: a header of typed key-values and tensor infos, then aligned tensor data.

`gguf_load` reads a whole file into tensors (dequantized lazily on the device). `GGUFFile` is for a model that keeps its
weights as they are in the file: metadata, tensor infos, and each tensor's raw bytes as a uint8 tensor over a read-only
memory map (the weights are paged in by the kernels that read them, never copied), with `ggml_data_to_tensor` /
`ggml_matrix` giving the lazy dequantization that fuses into the kernel that consumes it. Every file is hostile: the
same checks bound every count, offset and size before anything is read or allocated."""
from __future__ import annotations
import contextlib, ctypes, mmap, struct, sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator
from tinygrad.tensor import Tensor
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import prod
from tinygrad.nn.state import CheckpointError, PathLike, INT64_MAX, ReadLimit, Source, open_source, filled_buffer

# ---- GGUF: llama.cpp's checkpoints (a header of typed key-values and tensor infos, then aligned tensor data) ----

# ggml type number -> (name, elements per block, bytes per block) for every type this loader dequantizes
GGML_TYPES: dict[int, tuple[str, int, int]] = {
  0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
  7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
  13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 20: ("IQ4_NL", 32, 18), 23: ("IQ4_XS", 256, 136),
  24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 30: ("BF16", 1, 2),
  34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17)}
# names of the ggml types that exist but are not loaded here (for the error message)
_GGML_OTHER_TYPES = {4: "Q4_2 (removed)", 5: "Q4_3 (removed)", 9: "Q8_1", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS",
                     18: "IQ3_XXS", 19: "IQ1_S", 21: "IQ3_S", 22: "IQ2_S", 29: "IQ1_M", 31: "Q4_0_4_4 (removed)",
                     32: "Q4_0_4_8 (removed)", 33: "Q4_0_8_8 (removed)", 40: "NVFP4"}
# the dtype each unquantized ggml type loads as (its values exactly); the block quantizations load as float32
_GGML_PLAIN: dict[int, DType] = {0: dtypes.float32, 1: dtypes.float16, 30: dtypes.bfloat16, 28: dtypes.float64,
                                 24: dtypes.int8, 25: dtypes.int16, 26: dtypes.int32, 27: dtypes.int64}
# GGUF key-value types: the fixed-size ones as struct formats; 8 is a string, 9 an array
_GGUF_SCALARS: dict[int, str] = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
                                 12: "d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9

def ggml_type_name(ggml_type: int) -> str:
  """The ggml name of a type number ("Q4_K"), or "unknown" for a number ggml does not define."""
  return GGML_TYPES[ggml_type][0] if ggml_type in GGML_TYPES else _GGML_OTHER_TYPES.get(ggml_type, "unknown")

def _le_uint(b: Tensor, start: int, nbytes: int) -> Tensor:
  """The little-endian unsigned integer in bytes [start, start+nbytes) of each row of the uint8 matrix b."""
  dt = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[nbytes]
  out = b[:, start].cast(dt)
  for i in range(1, nbytes): out = out | (b[:, start + i].cast(dt) << (8 * i))
  return out

def _f16_col(b: Tensor, start: int) -> Tensor:
  """A block's float16 field at byte start, as a float32 column (n_blocks, 1)."""
  return _le_uint(b, start, 2).bitcast(dtypes.float16).cast(dtypes.float32).unsqueeze(1)

def _nibbles(qs: Tensor) -> Tensor:
  """ggml's 4-bit packing of 32 values in 16 bytes: value j in the low nibble of byte j, value j+16 in its high one."""
  return (qs & 0xF).cat(qs >> 4, dim=1)

def _high_bits(qh: Tensor, n: int) -> Tensor:
  """Bit j of the uint32 column qh as row element j, for j < n: the fifth bit of Q5_0/Q5_1 values."""
  return (qh >> Tensor.arange(n, dtype=dtypes.uint32, device=qh.device)) & 1

def _k_scales(s: Tensor) -> tuple[Tensor, Tensor]:
  """Q4_K/Q5_K's eight 6-bit scales and mins packed in 12 bytes: sub-blocks 0-3 in the low 6 bits of bytes 0-3
  (scales) and 4-7 (mins); sub-blocks 4-7 take their low 4 bits from bytes 8-11 and their top 2 from the spare bits
  of bytes 0-3 (scales) and 4-7 (mins). Returns (scales, mins), each (n_blocks, 8, 1) float32."""
  sc = (s[:, 0:4] & 63).cat((s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4), dim=1)
  mn = (s[:, 4:8] & 63).cat((s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4), dim=1)
  return sc.cast(dtypes.float32).unsqueeze(2), mn.cast(dtypes.float32).unsqueeze(2)

def _dequant_q4_0(b: Tensor) -> Tensor:
  return _f16_col(b, 0) * (_nibbles(b[:, 2:18]).cast(dtypes.float32) - 8)
def _dequant_q4_1(b: Tensor) -> Tensor:
  return _f16_col(b, 0) * _nibbles(b[:, 4:20]).cast(dtypes.float32) + _f16_col(b, 2)
def _q5_values(b: Tensor, qh_at: int) -> Tensor:
  qh = _le_uint(b, qh_at, 4).unsqueeze(1)
  return (_nibbles(b[:, qh_at + 4:qh_at + 20]).cast(dtypes.uint32) | (_high_bits(qh, 32) << 4)).cast(dtypes.float32)
def _dequant_q5_0(b: Tensor) -> Tensor: return _f16_col(b, 0) * (_q5_values(b, 2) - 16)
def _dequant_q5_1(b: Tensor) -> Tensor: return _f16_col(b, 0) * _q5_values(b, 4) + _f16_col(b, 2)
def _dequant_q8_0(b: Tensor) -> Tensor: return _f16_col(b, 0) * b[:, 2:34].bitcast(dtypes.int8).cast(dtypes.float32)

def _two_bit_groups(qs: Tensor) -> Tensor:
  """Q2_K/Q3_K's 2-bit packing of 256 values in 64 bytes: two halves of 32 bytes; in each, bits 2g, 2g+1 of byte l are
  value 32*g + l. Returns (n_blocks, 16, 16) uint8: row r holds the 16 values that share scale r."""
  shifts = (Tensor.arange(4, dtype=dtypes.uint8, device=qs.device) * 2).reshape(4, 1)
  return ((qs.reshape(-1, 2, 1, 32) >> shifts) & 3).reshape(-1, 16, 16)

def _dequant_q2_k(b: Tensor) -> Tensor:
  # one byte per 16 values: a 4-bit scale (low nibble) and a 4-bit min (high nibble)
  sc, d, dmin = b[:, 0:16].unsqueeze(2), _f16_col(b, 80).unsqueeze(2), _f16_col(b, 82).unsqueeze(2)
  q = _two_bit_groups(b[:, 16:80]).cast(dtypes.float32)
  return ((d * (sc & 15).cast(dtypes.float32)) * q - dmin * (sc >> 4).cast(dtypes.float32)).reshape(-1, 256)

def _dequant_q3_k(b: Tensor) -> Tensor:
  # 3-bit values: the low 2 bits as Q2_K, the third from hmask (bit g of hmask[l] for value 32*g + l; a clear bit
  # subtracts 4). Sixteen 6-bit scales biased by 32 in 12 bytes: scale i has low bits nibble i//8 of byte i%8 and
  # high bits 2*(i//4), 2*(i//4)+1 of byte 8 + i%4
  hm = b[:, 0:32].reshape(-1, 1, 32)
  hb = (hm >> Tensor.arange(8, dtype=dtypes.uint8, device=b.device).reshape(8, 1)) & 1
  q = _two_bit_groups(b[:, 32:96]).cast(dtypes.float32) - (4 - 4 * hb.reshape(-1, 16, 16).cast(dtypes.float32))
  s = b[:, 96:108]
  low = (s[:, 0:8] & 15).cat(s[:, 0:8] >> 4, dim=1)
  high = (s[:, 8:12].reshape(-1, 1, 4) >> (Tensor.arange(4, dtype=dtypes.uint8, device=b.device) * 2).reshape(4, 1)) & 3
  sc = (low | (high.reshape(-1, 16) << 4)).cast(dtypes.float32) - 32
  return ((_f16_col(b, 108) * sc).unsqueeze(2) * q).reshape(-1, 256)

# IQ4_NL/IQ4_XS: a 4-bit code indexes this non-linear table of int8 levels
_IQ4_LEVELS = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)

def _iq4_levels(code: Tensor) -> Tensor:
  out = Tensor.zeros(*code.shape, dtype=dtypes.float32, device=code.device)
  for i, v in enumerate(_IQ4_LEVELS): out = (code == i).where(float(v), out)
  return out

def _dequant_iq4_nl(b: Tensor) -> Tensor: return _f16_col(b, 0) * _iq4_levels(_nibbles(b[:, 2:18]))

def _dequant_iq4_xs(b: Tensor) -> Tensor:
  # 8 sub-blocks of 32, each with a 6-bit scale biased by 32: its low 4 bits are nibble i%2 of scales_l[i//2], its
  # high 2 bits are bits 2i, 2i+1 of the uint16 scales_h
  sh, sl = _le_uint(b, 2, 2).unsqueeze(1), b[:, 4:8]
  low = (sl.reshape(-1, 4, 1) >> Tensor([0, 4], dtype=dtypes.uint8, device=b.device)).reshape(-1, 8) & 15
  high = (sh >> (Tensor.arange(8, dtype=dtypes.uint16, device=b.device) * 2)) & 3
  sc = (low.cast(dtypes.uint16) | (high << 4)).cast(dtypes.float32) - 32
  q = _iq4_levels(_nibbles(b[:, 8:136].reshape(-1, 16)).reshape(-1, 8, 32))
  return ((_f16_col(b, 0) * sc).unsqueeze(2) * q).reshape(-1, 256)

def _dequant_tq2_0(b: Tensor) -> Tensor:
  # ternary values stored as 0, 1, 2 (meaning -1, 0, 1) in Q2_K's 2-bit packing; one float16 scale at the end
  return (_f16_col(b, 64).unsqueeze(2) * (_two_bit_groups(b[:, 0:64]).cast(dtypes.float32) - 1)).reshape(-1, 256)

def _trits(qs: Tensor, n: int) -> Tensor:
  """TQ1_0's base-3 packing: byte x holds n trits as the fixed-point fraction x/256 ~ t/3**n; trit i (most significant
  first) is the top digit of (x * 3**i mod 256) * 3, shifted right 8. Returns (n_blocks, n, bytes) int32 in 0..2."""
  pow3 = Tensor([3 ** i for i in range(n)], dtype=dtypes.int32, device=qs.device).reshape(n, 1)
  return (((qs.cast(dtypes.int32).unsqueeze(1) * pow3) & 255) * 3) >> 8

def _dequant_tq1_0(b: Tensor) -> Tensor:
  # 256 ternary values: bytes 0-31 hold 5 trits each (values 32*i + l), bytes 32-47 5 each (160 + 16*i + l), the 4
  # bytes of qh 4 each (240 + 4*i + l); a float16 scale at byte 52
  t = _trits(b[:, 0:32], 5).reshape(-1, 160).cat(_trits(b[:, 32:48], 5).reshape(-1, 80),
                                                 _trits(b[:, 48:52], 4).reshape(-1, 16), dim=1)
  return _f16_col(b, 52) * (t.cast(dtypes.float32) - 1)

def _dequant_q4_k(b: Tensor) -> Tensor:
  # 256 values in 4 chunks of 64: 32 bytes each, low nibbles are sub-block 2i, high nibbles sub-block 2i+1
  d, dmin, (sc, mn) = _f16_col(b, 0).unsqueeze(2), _f16_col(b, 2).unsqueeze(2), _k_scales(b[:, 4:16])
  qs = b[:, 16:144].reshape(-1, 4, 1, 32)
  q = (qs & 0xF).cat(qs >> 4, dim=2).reshape(-1, 8, 32).cast(dtypes.float32)
  return ((d * sc) * q - dmin * mn).reshape(-1, 256)

def _dequant_q5_k(b: Tensor) -> Tensor:
  # as Q4_K, plus a fifth bit: bit j of qh[l] belongs to value l of sub-block j
  d, dmin, (sc, mn) = _f16_col(b, 0).unsqueeze(2), _f16_col(b, 2).unsqueeze(2), _k_scales(b[:, 4:16])
  qh, qs = b[:, 16:48].reshape(-1, 1, 32), b[:, 48:176].reshape(-1, 4, 1, 32)
  hb = (qh >> Tensor.arange(8, dtype=dtypes.uint8, device=b.device).reshape(8, 1)) & 1
  q = ((qs & 0xF).cat(qs >> 4, dim=2).reshape(-1, 8, 32) | (hb << 4)).cast(dtypes.float32)
  return ((d * sc) * q - dmin * mn).reshape(-1, 256)

def _dequant_q6_k(b: Tensor) -> Tensor:
  # two halves of 128 values; in each, 64 bytes of low nibbles (ql) and 32 bytes of 2-bit high parts (qh): group g of
  # 32 values takes nibble g//2 of ql[32*(g%2) + l] and bits 2g, 2g+1 of qh[l]; one int8 scale per 16 values
  ql, qh = b[:, 0:128].reshape(-1, 2, 1, 2, 32), b[:, 128:192].reshape(-1, 2, 1, 32)
  nib = (ql & 0xF).cat(ql >> 4, dim=2).reshape(-1, 2, 4, 32)
  hi = (qh >> (Tensor.arange(4, dtype=dtypes.uint8, device=b.device) * 2).reshape(4, 1)) & 3
  q = (nib | (hi << 4)).reshape(-1, 16, 16).cast(dtypes.float32) - 32
  sc = b[:, 192:208].bitcast(dtypes.int8).cast(dtypes.float32).unsqueeze(2)
  return ((_f16_col(b, 208).unsqueeze(2) * sc) * q).reshape(-1, 256)

def _dequant_mxfp4(b: Tensor) -> Tensor:
  # OCP MX: a shared E8M0 exponent byte, then 32 E2M1 codes (sign, 2 exponent bits, 1 mantissa bit) in ggml's nibble
  # order. A code's value times 2 is an integer: m (exponent 0, subnormal) or (2 + m) << (exponent - 1); the scale is
  # 2**(e - 128) (half of 2**(e - 127), undoing the doubling), built from its float32 bits so it is exact
  code = _nibbles(b[:, 1:17]).cast(dtypes.int32)
  ex, m = (code >> 1) & 3, code & 1
  mag = (ex == 0).where(m, (2 + m) << (ex - 1).maximum(0))
  val = ((code >> 3) == 1).where(-mag, mag).cast(dtypes.float32)
  e = b[:, 0].cast(dtypes.uint32)
  scale = (e < 2).where(Tensor.full(e.shape, 0x00200000, dtype=dtypes.uint32, device=b.device) << e, (e - 1) << 23)
  return val * scale.bitcast(dtypes.float32).unsqueeze(1)

_DEQUANT: dict[int, Callable[[Tensor], Tensor]] = {
  2: _dequant_q4_0, 3: _dequant_q4_1, 6: _dequant_q5_0, 7: _dequant_q5_1, 8: _dequant_q8_0, 10: _dequant_q2_k,
  11: _dequant_q3_k, 12: _dequant_q4_k, 13: _dequant_q5_k, 14: _dequant_q6_k, 20: _dequant_iq4_nl, 23: _dequant_iq4_xs,
  34: _dequant_tq1_0, 35: _dequant_tq2_0, 39: _dequant_mxfp4}
assert set(_DEQUANT) | set(_GGML_PLAIN) == set(GGML_TYPES) and not set(_DEQUANT) & set(_GGML_PLAIN), \
  "every type GGML_TYPES lists is either plain (bitcast) or dequantized by one function"

def ggml_data_to_tensor(t: Tensor, n: int, ggml_type: int) -> Tensor:
  """n elements of ggml type `ggml_type` from the first bytes of the uint8 tensor t, as a 1-d tensor computed on t's
  device (lazy: tensor ops, no copy to the host). Unquantized types keep their values exactly in their own dtype (F32
  float32, F16 float16, BF16 bfloat16, F64 float64, I8-I64 int8-int64); block quantizations (Q4_0, Q4_1, Q5_0, Q5_1,
  Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4) dequantize to float32, one kernel. A type
  not in GGML_TYPES, n not a whole number of blocks or too few bytes is a ValueError."""
  if ggml_type not in GGML_TYPES:
    raise ValueError(f"ggml_data_to_tensor: ggml type {ggml_type} ({ggml_type_name(ggml_type)}) is not supported; "
                     f"supported: {', '.join(f'{v[0]} ({k})' for k, v in GGML_TYPES.items())}")
  name, block, block_bytes = GGML_TYPES[ggml_type]
  if t.dtype is not dtypes.uint8: raise TypeError(f"ggml_data_to_tensor: t must be uint8 bytes, got {t.dtype}")
  if n < 0 or n % block: raise ValueError(f"ggml_data_to_tensor: {n} elements of {name} is not a whole number of "
                                          f"{block}-element blocks")
  nbytes = n // block * block_bytes
  if t.numel() < nbytes:
    raise ValueError(f"ggml_data_to_tensor: {n} elements of {name} need {nbytes} bytes, got {t.numel()}")
  out_dtype = _GGML_PLAIN.get(ggml_type, dtypes.float32)
  if n == 0: return Tensor.empty(0, dtype=out_dtype, device=t.device)
  b = t.reshape(-1)[:nbytes].reshape(n // block, block_bytes)
  if ggml_type in _GGML_PLAIN:
    raw = b.reshape(n) if block_bytes == 1 else _le_uint(b, 0, block_bytes)
    return raw.bitcast(out_dtype)
  return _DEQUANT[ggml_type](b).reshape(n)

# GGUF value type names (for messages); 8 is a string, 9 an array
_GGUF_TYPE_NAMES = {0: "UINT8", 1: "INT8", 2: "UINT16", 3: "INT16", 4: "UINT32", 5: "INT32", 6: "FLOAT32", 7: "BOOL",
                    8: "STRING", 9: "ARRAY", 10: "UINT64", 11: "INT64", 12: "FLOAT64"}
# arrays of arrays nest at most this deep (ggml's own writers nest none); deeper is refused before Python's recursion
_GGUF_MAX_NESTING = 16
# ggml tensors have at most 4 dims (GGML_MAX_DIMS)
_GGML_MAX_DIMS = 4

class _GGUFReader:
  """A cursor over a GGUF file's header, reading the bytes it needs in growing chunks from a file (or bytes) or from a
  uint8 tensor (so only the header reaches the host). Every read checks the file's size first."""
  def __init__(self, src: Source | Tensor, where: str):
    self.src, self.where, self.pos, self.buf = src, where, 0, b""
    self.size = prod(src.int_shape("gguf_load")) if isinstance(src, Tensor) else src.size

  def need(self, n: int, what: str) -> None:
    if self.pos + n > self.size:
      raise CheckpointError(f"gguf_load: {self.where}: the file ends inside {what} (needs {n} bytes at offset "
                            f"{self.pos}, the file is {self.size} bytes): truncated or not GGUF")

  def take(self, n: int, what: str) -> bytes:
    self.need(n, what)
    if self.pos + n > len(self.buf):
      end = min(self.size, max(self.pos + n, 2 * len(self.buf), 1 << 20))
      src = self.src
      self.buf += src[len(self.buf):end].numpy().tobytes() if isinstance(src, Tensor) else \
        src.read(len(self.buf), end - len(self.buf))
    self.pos += n
    return self.buf[self.pos - n:self.pos]

  def scalar(self, fmt: str, what: str) -> Any:
    return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt), what))[0]

  def string(self, what: str) -> str:
    raw = self.take(self.scalar("Q", what), what)
    try: return raw.decode("utf-8")
    except UnicodeDecodeError as e: raise CheckpointError(f"gguf_load: {self.where}: {what} is not UTF-8 ({e})") from e

  def value(self, vtype: int, what: str, depth: int = 0) -> Any:
    if vtype in _GGUF_SCALARS: return self.scalar(_GGUF_SCALARS[vtype], what)
    if vtype == _GGUF_STRING: return self.string(what)
    if vtype != _GGUF_ARRAY:
      raise CheckpointError(f"gguf_load: {self.where}: {what} has value type {vtype}, which GGUF does not define "
                            f"(0-12)")
    if depth >= _GGUF_MAX_NESTING:
      raise CheckpointError(f"gguf_load: {self.where}: {what} nests arrays deeper than {_GGUF_MAX_NESTING} levels")
    etype, count = self.scalar("I", what), self.scalar("Q", what)
    if etype not in _GGUF_SCALARS and etype not in (_GGUF_STRING, _GGUF_ARRAY):
      raise CheckpointError(f"gguf_load: {self.where}: {what} is an array of value type {etype}, which GGUF does not "
                            f"define (0-12)")
    if etype in _GGUF_SCALARS:
      fmt = _GGUF_SCALARS[etype]
      return list(struct.unpack(f"<{count}{fmt}", self.take(count * struct.calcsize(fmt), what)))
    # NOTE: a string or array element takes at least 8 bytes: a count larger than that allows is a corrupt file, caught
    # before a loop of that length starts
    self.need(count * 8, what)
    return [self.value(etype, what, depth + 1) for _ in range(count)]

@contextlib.contextmanager
def _gguf_source(src: Any) -> Iterator[tuple[Source | Tensor, str]]:
  if isinstance(src, Tensor):
    if src.dtype is not dtypes.uint8:
      raise TypeError(f"gguf_load: the file's bytes must be a uint8 tensor, got {src.dtype}")
    yield src.reshape(-1), f"<uint8 tensor of {src.numel()} bytes>"
    return
  # NOTE: a path is read as the header needs it, and its data section read once, straight into the device buffer
  with open_source(src, "gguf_load") as s: yield s, s.name

def gguf_load(src: Tensor | PathLike | bytes, device: str | None = None,
              max_bytes: int | None = None) -> tuple[dict[str, Any], dict[str, Tensor]]:
  """Read a GGUF file (versions 2 and 3, little-endian): returns (metadata, tensors), both in file order. src is the
  file's bytes as a uint8 tensor (`Tensor(np.fromfile(fn, np.uint8))`: only the header is copied to the host; our
  Tensor takes no path), or a path or bytes (the header read as needed, and the data section read once, straight into
  one buffer on `device`; max_bytes bounds it, default the file's size). Metadata maps each key to a Python value (int,
  float, bool, str, or a list of them, nested for arrays of arrays). Each tensor is a lazy view of the data
  dequantized on the device (ggml_data_to_tensor: the types, their dtypes, one kernel each), shaped row-major: GGUF
  lists dims fastest first, so dims [4096, 11008] load as shape (11008, 4096). A bad magic or version, a truncated
  header, an unknown key-value type, arrays nested over 16 deep, a duplicate key or tensor name, a general.alignment
  that is not a UINT32 power of two or that puts the data past the end, an unsupported tensor type, more than 4 dims
  or a dim over 2**63 - 1, a first dim that is not whole blocks, a misaligned offset, tensors whose data overlap or
  data past the end of the file is a CheckpointError naming the file, the key or tensor and what was wrong. Nothing
  in the file is executed."""
  if isinstance(src, Tensor) and device is not None:
    raise ValueError(f"gguf_load: device={device!r} is for a path or bytes; a tensor source loads on its own device "
                     f"({src.device}): move it first with .to()")
  with _gguf_source(src) as (source, where):
    r = _GGUFReader(source, where)
    kv, infos, data_start, data_len = _gguf_layout(r)
    if isinstance(source, Tensor): data, base = source, data_start
    else:
      limit = ReadLimit("gguf_load", where, max_bytes, source.size, "the default: the file's size")
      limit.take(data_len, "the data section")
      # NOTE: only the data section goes to the device; offsets below are then relative to it
      data, base = filled_buffer(data_len, dtypes.uint8, device, lambda out: source.readinto(data_start, out)), 0
    tensors: dict[str, Tensor] = {}
    for name, (dims, ggml_type, off) in infos.items():
      n, nbytes = prod(dims), _gguf_nbytes(dims, ggml_type)
      # NOTE: a zero-element tensor reads no bytes, so its offset may point past the end (no padding after the header)
      raw = data[base + off:base + off + nbytes] if nbytes else Tensor.empty(0, dtype=dtypes.uint8, device=data.device)
      tensors[name] = ggml_data_to_tensor(raw, n, ggml_type).reshape(dims[::-1])
    return kv, tensors

def _gguf_layout(r: _GGUFReader) -> tuple[dict[str, Any], dict[str, tuple[tuple[int, ...], int, int]], int, int]:
  """(metadata, tensor infos, the data section's offset in the file, its length) of a GGUF file, after every check of
  the header and of each tensor's place in the file."""
  where = r.where
  kv, types, infos = _gguf_header(r)
  align = kv.get("general.alignment", 32)
  if "general.alignment" in types and types["general.alignment"] != 4 and type(align) is int:
    raise CheckpointError(f"gguf_load: {where}: general.alignment is a {_GGUF_TYPE_NAMES[types['general.alignment']]}"
                          "; GGUF stores it as a UINT32")
  if type(align) is not int or align <= 0 or align & (align - 1):
    raise CheckpointError(f"gguf_load: {where}: general.alignment is {align!r}, not a positive power of two")
  data_start = r.pos + -r.pos % align
  spans = _gguf_spans(where, infos, align)
  data_len = max((off + n for _, off, n, _ in spans), default=0)
  if data_len and data_start > r.size:
    raise CheckpointError(f"gguf_load: {where}: general.alignment {align} puts the data section at offset "
                          f"{data_start}, past the end of the {r.size}-byte file")
  for name, off, nbytes, (dims, ggml_type) in spans:
    if data_start + off + nbytes > r.size:
      raise CheckpointError(f"gguf_load: {where}: tensor {name!r} ({ggml_type_name(ggml_type)}, dims {list(dims)}, "
                            f"{nbytes} bytes at data offset {off}) runs past the end of the {r.size}-byte file: "
                            "truncated")
  return kv, infos, data_start, data_len

def _gguf_header(r: _GGUFReader) -> tuple[dict[str, Any], dict[str, int], dict[str, tuple[tuple[int, ...], int, int]]]:
  """The key-values, their value types and the tensor infos (dims fastest first, ggml type, data offset) of a GGUF
  file, in file order."""
  if (magic := r.take(4, "the magic")) != b"GGUF":
    raise CheckpointError(f"gguf_load: {r.where}: not a GGUF file (starts with {magic!r}, GGUF files with b'GGUF')")
  version = r.scalar("I", "the version")
  if version not in (2, 3):
    swapped = struct.unpack(">I", struct.pack("<I", version))[0]
    hint = "a big-endian GGUF file; convert it to little-endian" if swapped in (1, 2, 3) else \
      "GGUF version 1 predates 64-bit counts; re-convert the model" if version == 1 else "versions 2 and 3 are"
    raise CheckpointError(f"gguf_load: {r.where}: GGUF version {version} is not supported ({hint})")
  n_tensors, n_kv = r.scalar("Q", "the tensor count"), r.scalar("Q", "the key-value count")
  # NOTE: a key-value takes at least 13 bytes and a tensor info at least 24, so absurd counts stop here
  if n_kv * 13 + n_tensors * 24 > r.size:
    raise CheckpointError(f"gguf_load: {r.where}: the header claims {n_tensors} tensors and {n_kv} key-values, more "
                          f"than a {r.size}-byte file can hold")
  kv: dict[str, Any] = {}
  types: dict[str, int] = {}
  for i in range(n_kv):
    key = r.string(f"the key of key-value {i}")
    if key in kv: raise CheckpointError(f"gguf_load: {r.where}: key {key!r} appears twice")
    types[key] = r.scalar("I", f"the value type of key {key!r}")
    kv[key] = r.value(types[key], f"key {key!r}")
  infos: dict[str, tuple[tuple[int, ...], int, int]] = {}
  for i in range(n_tensors):
    name = r.string(f"the name of tensor info {i}")
    if name in infos: raise CheckpointError(f"gguf_load: {r.where}: tensor {name!r} appears twice")
    n_dims = r.scalar("I", f"the dim count of tensor {name!r}")
    if n_dims > _GGML_MAX_DIMS:
      raise CheckpointError(f"gguf_load: {r.where}: tensor {name!r} has {n_dims} dims; ggml allows at most "
                            f"{_GGML_MAX_DIMS}")
    dims = tuple(r.scalar("Q", f"the dims of tensor {name!r}") for _ in range(n_dims))
    infos[name] = (dims, r.scalar("I", f"the type of tensor {name!r}"), r.scalar("Q", f"the offset of tensor {name!r}"))
  return kv, types, infos

def _gguf_nbytes(dims: tuple[int, ...], ggml_type: int) -> int:
  _, block, block_bytes = GGML_TYPES[ggml_type]
  return prod(dims) // block * block_bytes

def _gguf_spans(where: str, infos: dict[str, tuple[tuple[int, ...], int, int]],
                align: int) -> list[tuple[str, int, int, tuple[tuple[int, ...], int]]]:
  """(name, data offset, bytes, (dims, type)) of every tensor that holds data, in offset order, after checking each
  info (a type loaded here, dims within int64, rows of whole blocks, an aligned offset) and that no two overlap."""
  spans = []
  for name, (dims, ggml_type, off) in infos.items():
    if ggml_type not in GGML_TYPES:
      raise CheckpointError(f"gguf_load: {where}: tensor {name!r} has ggml type {ggml_type} "
                            f"({ggml_type_name(ggml_type)}), which is not supported (supported: "
                            f"{', '.join(v[0] for v in GGML_TYPES.values())})")
    tname, block, block_bytes = GGML_TYPES[ggml_type]
    if any(d > INT64_MAX for d in dims):
      raise CheckpointError(f"gguf_load: {where}: tensor {name!r} has dims {list(dims)}: a dim over 2**63 - 1")
    if (nbytes := prod(dims) * block_bytes // block) > INT64_MAX:
      raise CheckpointError(f"gguf_load: {where}: tensor {name!r} has dims {list(dims)}: its {nbytes} bytes overflow "
                            "int64")
    if (dims[0] if dims else 1) % block:
      raise CheckpointError(f"gguf_load: {where}: tensor {name!r} of {tname} has dims {list(dims)}: the first "
                            f"(fastest) dim must be a multiple of the {block}-element block")
    if off % align: raise CheckpointError(f"gguf_load: {where}: tensor {name!r} has offset {off}, not a multiple of "
                                          f"the alignment {align}")
    if (nbytes := _gguf_nbytes(dims, ggml_type)): spans.append((name, off, nbytes, (dims, ggml_type)))
  spans.sort(key=lambda t: t[1])
  for (a, a_off, a_n, _), (b, b_off, b_n, _) in zip(spans, spans[1:]):
    if b_off < a_off + a_n:
      raise CheckpointError(f"gguf_load: {where}: tensor {b!r} (bytes [{b_off}, {b_off + b_n}) of the data section) "
                            f"overlaps tensor {a!r} (bytes [{a_off}, {a_off + a_n}))")
  return spans

# ---- GGUFFile: metadata and memory-mapped tensor data, for models that keep the file's weights as they are ----

@dataclass(frozen=True)
class GGUFTensorInfo:
  """A tensor of a GGUF file: its row-major shape (GGUF's dims reversed), ggml type, and bytes [offset, offset+nbytes)
  of the file."""
  name: str
  shape: tuple[int, ...]
  ggml_type: int
  offset: int
  nbytes: int
  @property
  def type_name(self) -> str: return ggml_type_name(self.ggml_type)

class GGUFFile:
  """A GGUF file opened for a model: `metadata` (key -> Python value), `tensors` (name -> GGUFTensorInfo, file order),
  `raw(name)` (the tensor's bytes as a uint8 tensor of shape (rows, bytes per row)) and `dequantized(name)` (a lazy
  tensor of its values). On a device whose memory is the host's, the bytes are a private read-only-by-use memory map of
  the file: nothing is read until a kernel touches it, and the file's pages are shared with the page cache. Elsewhere
  each tensor is copied to the device when first asked for. The header gets every check gguf_load makes."""
  def __init__(self, path: PathLike, device: str | None = None):
    from tinygrad.tensor import _canon_device
    with open_source(path, "gguf_load") as src:
      self.path, self.size = src.name, src.size
      kv, infos, data_start, _ = _gguf_layout(_GGUFReader(src, src.name))
      self.metadata: dict[str, Any] = kv
      self.tensors: dict[str, GGUFTensorInfo] = {
        name: GGUFTensorInfo(name, tuple(dims[::-1]), t, data_start + off, _gguf_nbytes(dims, t))
        for name, (dims, t, off) in infos.items()}
      self.device = _canon_device(device)
      # NOTE: ACCESS_COPY: ctypes needs a writable buffer to point at; no kernel writes a weight, so no page is copied
      self._map = mmap.mmap(src.f.fileno(), 0, access=mmap.ACCESS_COPY) if self.size else None

  def __repr__(self) -> str: return f"<GGUFFile {self.path}: {len(self.metadata)} keys, {len(self.tensors)} tensors>"

  def info(self, name: str) -> GGUFTensorInfo:
    if name not in self.tensors:
      raise CheckpointError(f"gguf: {self.path}: no tensor {name!r} (the file has {len(self.tensors)}: "
                            f"{', '.join(list(self.tensors)[:8])}{', ...' if len(self.tensors) > 8 else ''})")
    return self.tensors[name]

  def _mapped(self, ti: GGUFTensorInfo, dtype: DType) -> Tensor | None:
    """ti's bytes as a 1-d tensor of `dtype` over the memory map itself (no copy); None where the device's memory is not
    the host's or the data's offset and size are not multiples of the element size."""
    from tinygrad.device import buffer_of
    from tinygrad.tensor import _new_buffer_uop
    n = dtype.itemsize
    if self._map is None or ti.offset % n or ti.nbytes % n: return None
    u = _new_buffer_uop(ti.nbytes // n, dtype, self.device)
    buf = buffer_of(u)
    if not hasattr(buf.allocator, "_as_buffer"): return None
    buf.allocate(opaque=(ctypes.c_uint8 * ti.nbytes).from_buffer(self._map, ti.offset))
    return Tensor(u)

  def raw(self, name: str) -> Tensor:
    """The bytes of tensor `name` as uint8 (rows, bytes per row): a row is the last axis of the shape in blocks."""
    ti = self.info(name)
    rows = prod(ti.shape[:-1]) if len(ti.shape) > 1 else 1
    if ti.nbytes == 0: return Tensor.empty(rows, 0, dtype=dtypes.uint8, device=self.device)
    if (t := self._mapped(ti, dtypes.uint8)) is None:
      # NOTE: a device with memory of its own gets a copy of the bytes
      from tinygrad.device import buffer_of
      from tinygrad.tensor import _new_buffer_uop
      assert self._map is not None
      u = _new_buffer_uop(ti.nbytes, dtypes.uint8, self.device)
      buffer_of(u).ensure_allocated().copyin(memoryview(self._map)[ti.offset:ti.offset + ti.nbytes])
      t = Tensor(u)
    return t.reshape(rows, ti.nbytes // rows)

  def view(self, name: str, dtype: DType) -> Tensor | None:
    """Tensor `name`'s bytes as a 1-d tensor of `dtype` (nbytes // itemsize elements) over the same memory, with no
    copy: where the bytes are the host's memory map, the host is little-endian, and the data's offset and size are
    multiples of the element size; None otherwise (use raw). Quantized blocks keep their layout: a Q8_0 row is
    (scale f16, 32 x int8) blocks, so its float16 view holds each scale at element 17*b of the row."""
    ti = self.info(name)
    return None if sys.byteorder != "little" or ti.nbytes == 0 else self._mapped(ti, dtype)

  def typed(self, name: str) -> Tensor | None:
    """Tensor `name` of a plain type (F32, F16, BF16, F64, I8-I64) in its own dtype and shape over the same bytes
    (`view`): nothing for a kernel to assemble from bytes. None where `view` is None or the type is quantized."""
    ti = self.info(name)
    if (dt := _GGML_PLAIN.get(ti.ggml_type)) is None or (v := self.view(name, dt)) is None: return None
    return v.reshape(ti.shape)

  def dequantized(self, name: str) -> Tensor:
    """Tensor `name`'s values, lazily dequantized (ggml_data_to_tensor) and shaped as ti.shape."""
    ti = self.info(name)
    return ggml_data_to_tensor(self.raw(name).reshape(-1), prod(ti.shape), ti.ggml_type).reshape(ti.shape)
