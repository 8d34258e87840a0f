"""State dicts and checkpoints: find a model's tensors by walking its attributes, load them back (strictly by default),
save/load safetensors files, and read torch checkpoints (.pth/.pt) without running anything from the file.

torch checkpoints are pickles, and a pickle can name any Python function for the loader to call. `torch_load` walks
the pickle with a restricted unpickler: the only globals it resolves are torch's tensor-rebuild functions, its storage
and dtype names and `collections.OrderedDict`, each mapped to an implementation of ours that builds plain data; any
other global (a class, `os.system`, ...) stops the load with a CheckpointError naming it before anything is called."""
from __future__ import annotations
import collections, contextlib, io, json, os, pickle, pickletools, stat, struct, sys, zipfile
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Union, cast
import numpy as np
from tinygrad.tensor import Tensor
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import prod, atomic_write

PathLike = Union[str, "os.PathLike[str]"]

class CheckpointError(ValueError):
  """A checkpoint that cannot be read safely or faithfully; the message names the loader, the file, the tensor or key,
  and the rule the file broke."""

# ---- reading untrusted files within limits ----

_INT64_MAX = 2**63 - 1
# the most bytes one storage is read through at a time (a decompressed chunk lives only until it is copied)
_CHUNK = 1 << 22

def _half_physical_memory() -> int:
  try: return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
  except (AttributeError, ValueError, OSError): return 8 << 30

class _Limit:
  """max_bytes: the bytes of tensor data one load may allocate. Every allocation takes from it before it happens."""
  def __init__(self, loader: str, name: str, limit: int | None, default: int, why: str):
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
      raise CheckpointError(f"{loader}: {name}: max_bytes must be an int >= 0 or None, got {limit!r}")
    self.loader, self.name, self.used = loader, name, 0
    self.limit, self.why = (default, why) if limit is None else (limit, "given")
  def take(self, n: int, what: str) -> None:
    if self.used + n > self.limit:
      raise CheckpointError(f"{self.loader}: {self.name}: {what} needs {n} bytes, over max_bytes={self.limit} "
                            f"({self.why}; {self.used} bytes loaded before it): pass a larger max_bytes if the file is "
                            "trusted")
    self.used += n

@dataclass
class _Source:
  """A checkpoint's bytes: a regular file (size from the file system) or bytes the caller gave; `name` is how errors
  name it. Data is read straight into its destination (no mapping, no intermediate copy)."""
  f: Any
  size: int
  name: str
  loader: str
  def read(self, pos: int, n: int) -> bytes:
    """n bytes at pos, which the caller checked lie inside the file."""
    self.f.seek(pos)
    if len(ret := self.f.read(n)) != n: raise CheckpointError(f"{self.loader}: {self.name}: changed while being read")
    return ret
  def readinto(self, pos: int, out: memoryview) -> None:
    self.f.seek(pos)
    got = 0
    while got < len(out) and (k := self.f.readinto(out[got:])): got += k
    if got != len(out): raise CheckpointError(f"{self.loader}: {self.name}: changed while being read")

@contextlib.contextmanager
def _open_source(src: Any, loader: str) -> Iterator[_Source]:
  """src (a path, or the file's bytes) opened for reading. A path must name a regular file: a device or a pipe has no
  size to check the file's claims against (read it into bytes first)."""
  if isinstance(src, (bytes, bytearray, memoryview)):
    n = src.nbytes if isinstance(src, memoryview) else len(src)
    yield _Source(io.BytesIO(src), n, f"<{n} bytes>", loader)
    return
  try: name = os.fspath(src)
  except TypeError as e: raise CheckpointError(f"{loader}: {src!r} is neither a path nor bytes") from e
  def refuse() -> CheckpointError:
    return CheckpointError(f"{loader}: {name}: not a regular file (a device, pipe or socket has no size to check the "
                           "checkpoint's claims against); read it into bytes and pass those")
  try:
    # NOTE: checked before opening too: opening a named pipe blocks until something writes to it
    if not stat.S_ISREG(os.stat(name).st_mode): raise refuse()
    f = open(name, "rb")
  except OSError as e: raise CheckpointError(f"{loader}: {name}: cannot be opened ({e})") from e
  with f:
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode): raise refuse()
    yield _Source(f, st.st_size, os.fspath(name), loader)

def _filled_buffer(n: int, dtype: DType, device: str | None, fill: Callable[[memoryview], None]) -> Tensor:
  """A realized 1-d tensor of n elements of dtype on device whose bytes `fill` writes: straight into the buffer where
  the device's memory is the host's (one copy from the file), else through one host staging copy."""
  from tinygrad.device import buffer_of
  from tinygrad.tensor import _new_buffer_uop, _canon_device
  u = _new_buffer_uop(n, dtype, _canon_device(device))
  buf = buffer_of(u).ensure_allocated()
  if n == 0: return Tensor(u)
  if hasattr(buf.allocator, "_as_buffer"): fill(buf.as_buffer(allow_zero_copy=True))
  else:
    stage = memoryview(bytearray(buf.nbytes))
    fill(stage)
    buf.copyin(stage)
  return Tensor(u)

def _check_bools(mv: memoryview, what: Callable[[int, int], str]) -> None:
  """A bool is stored as one byte, 0 or 1; any other byte is refused (what(byte, element) says where)."""
  arr = np.frombuffer(mv, dtype=np.uint8)
  if arr.size and int(arr.max()) > 1:
    i = int(np.argmax(arr > 1))
    raise CheckpointError(f"{what(int(arr[i]), i)}: a bool is stored as the byte 0 or 1")

def _byteswap(mv: memoryview, itemsize: int) -> None:
  if itemsize > 1: np.frombuffer(mv, dtype=np.dtype(f"u{itemsize}")).byteswap(inplace=True)

# ---- state dicts ----

def get_state_dict(obj: Any, prefix: str = "", tensor_type: type = Tensor) -> dict[str, Tensor]:
  """Every Tensor reachable from obj through attributes (not starting with '_'), lists, tuples and dicts, keyed by its
  dotted path ("layers.0.weight"). A tensor reachable twice (a weight shared by two layers) appears under both names;
  an object reached again through a cycle is not walked twice."""
  return _walk_state(obj, prefix, tensor_type, set())

def _walk_state(obj: Any, prefix: str, tensor_type: type, seen: set[int]) -> dict[str, Tensor]:
  if isinstance(obj, tensor_type): return {prefix.rstrip("."): cast(Tensor, obj)}
  if id(obj) in seen: return {}
  if isinstance(obj, (list, tuple)): items: Any = enumerate(obj)
  elif isinstance(obj, dict): items = obj.items()
  elif hasattr(obj, "__dict__") and not isinstance(obj, type):
    items = [(n, x) for n, x in vars(obj).items() if not n.startswith("_")]
  else: return {}
  seen = seen | {id(obj)}
  return {k: v for n, x in items for k, v in _walk_state(x, f"{prefix}{n}.", tensor_type, seen).items()}

def get_parameters(obj: Any) -> list[Tensor]:
  """The distinct tensors of obj (see get_state_dict), in attribute order: a shared tensor comes once."""
  return list({id(t): t for t in get_state_dict(obj).values()}.values())

class StateDictError(CheckpointError, RuntimeError):
  """A state dict that does not fit the model: a CheckpointError, and a RuntimeError as torch's load_state_dict
  raises."""

class StateDictMismatch(StateDictError, KeyError):
  """load_state_dict with strict=True: keys the model has and the state dict lacks, or the other way round. Also a
  KeyError (what it was before it was a CheckpointError)."""
  def __str__(self) -> str: return str(self.args[0]) if self.args else ""

def _keys(ks: list[str], most: int = 50) -> str:
  return repr(ks) if len(ks) <= most else f"{ks[:most]!r} and {len(ks) - most} more"

def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, realize: bool = True,
                    consume: bool = False) -> None:
  """Copy each tensor of state_dict into the model's tensor of the same name (in place, cast to the model's dtype,
  moved to its device). Every key is checked before anything is written, so a failed load leaves the model as it was.
  strict: keys the model has and the state dict lacks, or the other way round, are a StateDictMismatch (also a
  KeyError) naming them all. A value that is not a Tensor, or a shape that differs from the model's, is a
  StateDictError with one line per such key: the key, the shape the model expects and the one found (also when not
  strict). Both are CheckpointErrors and RuntimeErrors (torch's type). consume: delete each loaded key from
  state_dict (frees memory as it goes)."""
  if not isinstance(state_dict, dict):
    raise StateDictError(f"load_state_dict: the state dict is a {type(state_dict).__name__}, not a dict")
  own = get_state_dict(model)
  if strict:
    missing, extra = sorted(set(own) - set(state_dict)), sorted(set(state_dict) - set(own), key=str)
    if missing or extra:
      raise StateDictMismatch(f"load_state_dict: the state dict does not match the model: missing keys "
                              f"{_keys(missing)}, unexpected keys {_keys(extra)} (pass strict=False to load the keys "
                              "both have)")
  bad = []
  for k, t in own.items():
    if k not in state_dict: continue
    if not isinstance(v := state_dict[k], Tensor):
      bad.append(f"key {k!r} is a {type(v).__name__} in the state dict, not a Tensor")
    elif v.shape != t.shape: bad.append(f"key {k!r}: the model expects shape {t.shape}, the state dict has {v.shape}")
  if bad: raise StateDictError("\n".join(f"load_state_dict: {b}" for b in bad))
  for k, t in own.items():
    if k not in state_dict: continue
    t.assign(state_dict[k].to(t.device).cast(t.dtype))
    if consume: del state_dict[k]
  if realize and own: Tensor.realize(*own.values())

# ---- safetensors: 8-byte little-endian header size, a JSON header, then the raw little-endian data ----

SAFE_DTYPES: dict[str, DType] = {"F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16,
                                 "BF16": dtypes.bfloat16, "F8_E4M3": dtypes.fp8e4m3, "F8_E5M2": dtypes.fp8e5m2,
                                 "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8,
                                 "U64": dtypes.uint64, "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8,
                                 "BOOL": dtypes.bool}
_SAFE_NAMES = {v: k for k, v in SAFE_DTYPES.items()}

def _raw(t: Tensor) -> bytes:
  """The bytes of t's buffer (bfloat16 and fp8 as their bit patterns), realized and contiguous."""
  from tinygrad.device import buffer_of
  from tinygrad.tensor import base_buffer
  t = t.realize()
  if base_buffer(t.uop) is None: t = t.contiguous().realize()
  base = base_buffer(t.uop)
  assert base is not None, "a realized tensor reads a buffer"
  return bytes(buffer_of(base).ensure_allocated().as_buffer()) if t.numel() else b""

def safe_save(tensors: dict[str, Tensor], fn: PathLike, metadata: dict[str, str] | None = None) -> None:
  """Write tensors to a safetensors file, atomically (a temporary file renamed over fn: a reader never sees half a
  file, and a failed save leaves the old file as it was)."""
  header: dict[str, Any] = {}
  if metadata:
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
      raise TypeError("safe_save: metadata must map str to str (the safetensors format)")
    header["__metadata__"] = metadata
  blobs, off = [], 0
  for k, t in tensors.items():
    if not isinstance(k, str) or k == "__metadata__":
      raise ValueError(f"safe_save: {fn}: tensor names must be strings other than '__metadata__', got {k!r}")
    if t.dtype not in _SAFE_NAMES:
      raise TypeError(f"safe_save: {fn}: tensor {k!r} has dtype {t.dtype}, which safetensors cannot store")
    data = _raw(t)
    header[k] = {"dtype": _SAFE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
    blobs.append(data)
    off += len(data)
  hj = json.dumps(header, separators=(",", ":")).encode()
  hj += b" " * (-len(hj) % 8)
  atomic_write(os.fspath(fn), b"".join([struct.pack("<Q", len(hj)), hj, *blobs]))

# the format's own limit on the header (safetensors refuses longer ones)
_SAFE_HEADER_MAX = 100_000_000

def _safe_header(src: _Source) -> tuple[dict[str, Any], int]:
  """The JSON header of a safetensors file and where its data starts; the header's claimed size is checked against
  the format's limit and the file before a byte of it is read."""
  name = src.name
  if src.size < 8: raise CheckpointError(f"safe_load: {name}: {src.size} bytes is too short for a safetensors file")
  n = struct.unpack("<Q", src.read(0, 8))[0]
  if n > _SAFE_HEADER_MAX:
    raise CheckpointError(f"safe_load: {name}: the header claims {n} bytes, over the format's limit of "
                          f"{_SAFE_HEADER_MAX} bytes")
  if 8 + n > src.size: raise CheckpointError(f"safe_load: {name}: header of {n} bytes runs past the end of the file")
  try: header = json.loads(src.read(8, n))
  except RecursionError as e:
    raise CheckpointError(f"safe_load: {name}: the header is not JSON a reader can take: it nests deeper than "
                          "Python's JSON parser allows") from e
  except ValueError as e: raise CheckpointError(f"safe_load: {name}: the header is not JSON ({e})") from e
  if not isinstance(header, dict): raise CheckpointError(f"safe_load: {name}: the header is not a JSON object")
  meta = header.get("__metadata__", {})
  if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
    raise CheckpointError(f"safe_load: {name}: __metadata__ must map str to str, got {_short(meta)}")
  return header, 8 + n

def _short(v: Any) -> str:
  r = repr(v)
  return r if len(r) <= 200 else r[:200] + "..."

@dataclass(frozen=True)
class _SafeEntry:
  name: str
  dtype: DType
  shape: tuple[int, ...]
  begin: int
  end: int

def _safe_entry(name: str, k: str, info: Any, nbytes: int) -> _SafeEntry:
  """One header entry, every field checked: a known dtype, a shape of ints >= 0 (each at most 2**63 - 1), offsets
  [begin, end] inside the data and a byte count that matches dtype and shape."""
  where = f"safe_load: {name}: tensor {k!r}"
  if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
    raise CheckpointError(f"{where} needs dtype, shape and data_offsets, got {_short(info)}")
  dt_name, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
  if not isinstance(dt_name, str) or dt_name not in SAFE_DTYPES:
    raise CheckpointError(f"{where} has unsupported dtype {_short(dt_name)} (known: {', '.join(SAFE_DTYPES)})")
  if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
    raise CheckpointError(f"{where}: shape must be a list of ints >= 0, got {_short(shape)}")
  if any(d > _INT64_MAX for d in shape): raise CheckpointError(f"{where} has shape {shape}: a dim over 2**63 - 1")
  if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets):
    raise CheckpointError(f"{where}: data_offsets must be [begin, end], got {_short(offsets)}")
  (s, e), dt = offsets, SAFE_DTYPES[dt_name]
  if not 0 <= s <= e <= nbytes:
    raise CheckpointError(f"{where} has data_offsets {[s, e]} outside the {nbytes} data bytes")
  if e - s != prod(shape) * dt.itemsize:
    raise CheckpointError(f"{where} has {e - s} bytes for shape {shape} of {dt_name} ({prod(shape) * dt.itemsize} "
                          "expected)")
  return _SafeEntry(k, dt, tuple(shape), s, e)

def _check_disjoint(entries: list[_SafeEntry], name: str) -> None:
  """No two tensors share bytes: a file cannot make its data count twice (so the data loaded is at most the file)."""
  spans = sorted((e for e in entries if e.end > e.begin), key=lambda e: e.begin)
  for a, b in zip(spans, spans[1:]):
    if b.begin < a.end:
      raise CheckpointError(f"safe_load: {name}: tensor {b.name!r} (data bytes [{b.begin}, {b.end})) overlaps tensor "
                            f"{a.name!r} (data bytes [{a.begin}, {a.end}))")

def safe_load_metadata(fn: PathLike | bytes) -> dict[str, str]:
  """The `__metadata__` of a safetensors file ({} when it has none)."""
  with _open_source(fn, "safe_load") as src: return dict(_safe_header(src)[0].get("__metadata__", {}))

def safe_load(fn: PathLike | bytes, device: str | None = None, max_bytes: int | None = None) -> dict[str, Tensor]:
  """The tensors of a safetensors file (a path or the file's bytes), in file order, on `device` (default: the default
  device). The header is at most 100 MB (the format's limit) and every entry is checked (see _safe_entry); no two
  tensors may share bytes; BOOL bytes must be 0 or 1. Each tensor's bytes are read once, straight into its buffer.
  max_bytes bounds the data loaded (default: the file's size). Every failure is a CheckpointError naming the file, the
  tensor and the rule."""
  with _open_source(fn, "safe_load") as src:
    header, start = _safe_header(src)
    entries = [_safe_entry(src.name, k, v, src.size - start) for k, v in header.items() if k != "__metadata__"]
    _check_disjoint(entries, src.name)
    limit = _Limit("safe_load", src.name, max_bytes, src.size, "the default: the file's size")
    ret: dict[str, Tensor] = {}
    for e in entries:
      limit.take(e.end - e.begin, f"tensor {e.name!r}")
      def fill(out: memoryview, e: _SafeEntry = e) -> None:
        src.readinto(start + e.begin, out)
        if sys.byteorder == "big": _byteswap(out, e.dtype.itemsize)
        if e.dtype is dtypes.bool:
          _check_bools(out, lambda b, i: f"safe_load: {src.name}: tensor {e.name!r} (BOOL) has byte 0x{b:02x} at "
                                         f"element {i}")
      ret[e.name] = _filled_buffer(prod(e.shape), e.dtype, device, fill).reshape(e.shape)
    return ret

# ---- torch checkpoints ----

# storage classes of torch's typed storages (each names its element dtype); UntypedStorage holds bytes and the dtype
# comes with _rebuild_tensor_v3
_TORCH_STORAGES: dict[str, DType | None] = {
  "FloatStorage": dtypes.float32, "DoubleStorage": dtypes.float64, "HalfStorage": dtypes.float16,
  "BFloat16Storage": dtypes.bfloat16, "LongStorage": dtypes.int64, "IntStorage": dtypes.int32,
  "ShortStorage": dtypes.int16, "CharStorage": dtypes.int8, "ByteStorage": dtypes.uint8, "BoolStorage": dtypes.bool}
_TORCH_DTYPES: dict[str, DType] = {
  "float32": dtypes.float32, "float": dtypes.float32, "float64": dtypes.float64, "double": dtypes.float64,
  "float16": dtypes.float16, "half": dtypes.float16, "bfloat16": dtypes.bfloat16, "float8_e4m3fn": dtypes.fp8e4m3,
  "float8_e5m2": dtypes.fp8e5m2, "int64": dtypes.int64, "long": dtypes.int64, "int32": dtypes.int32,
  "int": dtypes.int32, "int16": dtypes.int16, "short": dtypes.int16, "int8": dtypes.int8, "uint8": dtypes.uint8,
  "uint16": dtypes.uint16, "uint32": dtypes.uint32, "uint64": dtypes.uint64, "bool": dtypes.bool}
# a checkpoint is a few levels of dicts and lists; deeper nesting is refused before Python's recursion limit
_MAX_DEPTH = 64

class _Refused(Exception):
  """Raised inside the unpickler by our callbacks; _unpickle turns it into a CheckpointError naming the file."""

class _Sealed:
  """The objects the unpickler hands out (allow-listed globals, storages, tensors) are frozen, and a BUILD opcode on one
  (the pickle asking to set its state) is refused: a file must not change the loader's own objects."""
  def __setstate__(self, state: Any) -> None:
    raise _Refused(f"the pickle sets the state of {self!r} (a BUILD opcode on it); refused")

@dataclass(frozen=True, repr=False)
class _StorageType(_Sealed):
  """What `torch.FloatStorage` (etc.) resolves to: only a name and an element dtype (None: bytes)."""
  name: str
  dtype: DType | None
  def __repr__(self) -> str: return f"torch.{self.name}"

@dataclass(frozen=True, repr=False)
class _DTypeName(_Sealed):
  """What `torch.float16` (etc.) resolves to."""
  name: str
  dtype: DType
  def __repr__(self) -> str: return f"torch.{self.name}"

@dataclass(frozen=True, repr=False)
class _Allowed(_Sealed):
  """An allow-listed function of the pickle's (torch._utils._rebuild_tensor_v2, ...), mapped to ours."""
  name: str
  fn: Callable[..., Any]
  def __call__(self, *args: Any) -> Any: return self.fn(*args)
  def __repr__(self) -> str: return self.name

@dataclass(frozen=True, repr=False)
class _Storage(_Sealed):
  """A storage the pickle refers to: `numel` elements of `dtype` (None: bytes); a legacy storage view is `numel`
  elements starting `byte_offset` bytes into its root."""
  key: str
  dtype: DType | None
  numel: int
  root: _Storage | None = None
  byte_offset: int = 0
  @property
  def nbytes(self) -> int: return self.numel * (self.dtype.itemsize if self.dtype is not None else 1)
  def __repr__(self) -> str: return f"storage {self.key!r}"

@dataclass(frozen=True, repr=False)
class _LoadedTensor(_Sealed):
  """A tensor as the pickle describes it: a strided view of a storage; made into a Tensor after the pickle is read."""
  storage: _Storage
  dtype: DType
  offset: int
  size: tuple[int, ...]
  stride: tuple[int, ...]
  def __repr__(self) -> str: return f"a tensor of {self.storage!r}"

def _check_ints(v: Any, what: str) -> tuple[int, ...]:
  if not isinstance(v, (tuple, list)) or not all(type(x) is int and 0 <= x <= _INT64_MAX for x in v):
    raise _Refused(f"{what} must be a tuple of ints in [0, 2**63 - 1], got {v!r}")
  return tuple(v)

def _rebuild(storage: Any, offset: Any, size: Any, stride: Any, dtype: DType | None = None) -> _LoadedTensor:
  if type(storage) is not _Storage: raise _Refused(f"a tensor's storage is a {type(storage).__name__}")
  dt = dtype or storage.dtype
  if dt is None: raise _Refused(f"{storage!r} holds bytes but the tensor names no dtype")
  size_t, stride_t = _check_ints(size, "a tensor's size"), _check_ints(stride, "a tensor's stride")
  if type(offset) is not int or not 0 <= offset <= _INT64_MAX or len(size_t) != len(stride_t):
    raise _Refused(f"a tensor of {storage!r} has offset {offset!r}, size {size_t} and stride {stride_t}: need an "
                   "offset in [0, 2**63 - 1] and one stride per axis")
  if prod(size_t) * dt.itemsize > _INT64_MAX:
    raise _Refused(f"a tensor of {storage!r} has size {size_t}: its byte size overflows int64")
  return _LoadedTensor(storage, dt, offset, size_t, stride_t)

def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any) -> _LoadedTensor:
  return _rebuild(storage, offset, size, stride)
def _rebuild_tensor_v2(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                       backward_hooks: Any = None, metadata: Any = None) -> _LoadedTensor:
  return _rebuild(storage, offset, size, stride)
def _rebuild_tensor_v3(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any, backward_hooks: Any,
                       dtype: Any, metadata: Any = None) -> _LoadedTensor:
  if type(dtype) is not _DTypeName: raise _Refused(f"_rebuild_tensor_v3 names dtype {dtype!r}")
  return _rebuild(storage, offset, size, stride, dtype.dtype)
def _rebuild_parameter(data: Any, requires_grad: Any = False, backward_hooks: Any = None,
                       state: Any = None) -> _LoadedTensor:
  if type(data) is not _LoadedTensor: raise _Refused(f"a Parameter wraps a {type(data).__name__}")
  return data
def _codecs_encode(s: Any, encoding: Any = "utf-8") -> bytes:
  # NOTE: how protocol 2 pickles bytes (Python 2 compatibility): _codecs.encode(text, "latin1")
  if type(s) is not str or encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
    raise _Refused(f"_codecs.encode({type(s).__name__}, {encoding!r}) is not how a pickle spells bytes")
  return s.encode(encoding)

_SAFE_GLOBALS: dict[tuple[str, str], Any] = {
  **{("torch._utils", f.__name__): _Allowed(f"torch._utils.{f.__name__}", f)
     for f in (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter)},
  ("torch._utils", "_rebuild_parameter_with_state"): _Allowed("torch._utils._rebuild_parameter_with_state",
                                                              _rebuild_parameter),
  ("collections", "OrderedDict"): collections.OrderedDict, ("_codecs", "encode"): _Allowed("_codecs.encode",
                                                                                           _codecs_encode),
  ("torch.storage", "UntypedStorage"): _StorageType("UntypedStorage", None),
  **{("torch", n): _StorageType(n, d) for n, d in _TORCH_STORAGES.items()},
  **{("torch", n): _DTypeName(n, d) for n, d in _TORCH_DTYPES.items()}}

class _RestrictedUnpickler(pickle.Unpickler):
  """Resolves only _SAFE_GLOBALS; persistent ids (torch's storages) go to `storage`."""
  def __init__(self, f: Any, fn: str, storage: Callable[[tuple[Any, ...]], _Storage] | None):
    super().__init__(f)
    self.fn, self.storage = fn, storage
  def find_class(self, module: str, name: str) -> Any:
    if (ret := _SAFE_GLOBALS.get((module, name))) is not None: return ret
    raise CheckpointError(f"torch_load: {self.fn}: the pickle refers to {module}.{name}, which is not a tensor, a "
                          "dict, a list, a tuple or a number; refused (nothing from the file was run). Save a "
                          "state_dict (torch.save(model.state_dict(), ...)) rather than objects")
  def persistent_load(self, pid: Any) -> Any:
    if self.storage is None or type(pid) is not tuple or not pid or pid[0] != "storage":
      raise _Refused(f"unexpected persistent id {pid!r} (only torch storages are read)")
    return self.storage(pid)

def _check_pid(pid: tuple[Any, ...]) -> tuple[_StorageType, str, int]:
  if len(pid) < 5 or type(pid[1]) is not _StorageType or type(pid[2]) is not str or type(pid[4]) is not int or \
     not 0 <= pid[4] <= _INT64_MAX:
    raise _Refused(f"a storage reference {pid!r} is not (storage, type, key, location, numel)")
  return pid[1], pid[2], pid[4]

def _scan_pickle(f: Any, fn: str, end: int) -> None:
  """Walk the pickle's opcodes without building anything: every length it declares (a string, bytes, a frame) must fit
  in what is left of the file, and every memo index it stores to must be the next one or one already used. The C
  unpickler allocates a declared length before reading it and sizes its memo to the largest index, so a 10-byte
  pickle could ask for gigabytes."""
  start, memo = f.tell(), 0
  try:
    for op, arg, pos in pickletools.genops(f):
      if op.name == "FRAME" and arg > end - f.tell():
        raise CheckpointError(f"torch_load: {fn}: the pickle declares a frame of {arg} bytes at offset {pos}, but only "
                              f"{end - f.tell()} bytes remain")
      if op.name in ("PUT", "BINPUT", "LONG_BINPUT"):
        if (idx := int(arg or 0)) > memo:
          raise CheckpointError(f"torch_load: {fn}: the pickle stores to memo index {idx} at offset {pos} after {memo} "
                                "stores (a pickler numbers them in order)")
        memo = max(memo, idx + 1)
      elif op.name == "MEMOIZE": memo += 1
  except CheckpointError: raise
  except ValueError as e:
    raise CheckpointError(f"torch_load: {fn}: the pickle is cut short or malformed ({e})") from e
  f.seek(start)

def _unpickle(f: Any, fn: str, storage: Callable[[tuple[Any, ...]], _Storage] | None, end: int) -> Any:
  """The next pickle of f (which ends at `end`: a file object given to the unpickler must not read past it)."""
  _scan_pickle(f, fn, end)
  try: return _RestrictedUnpickler(f, fn, storage).load()
  except CheckpointError: raise
  except _Refused as e: raise CheckpointError(f"torch_load: {fn}: {e}") from None
  except Exception as e:
    raise CheckpointError(f"torch_load: {fn}: not a readable checkpoint pickle ({type(e).__name__}: {e})") from e

class _Bounded:
  """A file object that never reads past `end` (a pickle's declared lengths are checked against what remains)."""
  def __init__(self, f: Any, end: int): self.f, self.end = f, end
  def remaining(self) -> int: return max(self.end - self.f.tell(), 0)
  def read(self, n: int = -1) -> bytes: return self.f.read(self.remaining() if n < 0 else min(n, self.remaining()))
  def readline(self) -> bytes: return self.f.readline(self.remaining())
  def readinto(self, b: Any) -> int:
    with memoryview(b) as mv: return self.f.readinto(mv[:self.remaining()])
  def tell(self) -> int: return self.f.tell()
  def seek(self, pos: int, whence: int = 0) -> int: return self.f.seek(pos, whence)

def _window(t: Tensor, n: int, s: int, w: int) -> Tensor:
  """(..., m) -> (..., n, w) with out[..., i, j] = t[..., i*s + j], for m >= (n-1)*s + w: a reshape when rows do not
  overlap (s >= w), else n copies side by side, read on a diagonal (expand, no allocation)."""
  lead, m = t.shape[:-1], t.shape[-1]
  keep = tuple((0, d) for d in lead)
  if s >= w:
    t = t.pad(((0, 0),) * len(lead) + ((0, n * s - m),)) if m < n * s else t.shrink(keep + ((0, n * s),))
    return t.reshape(*lead, n, s).shrink(keep + ((0, n), (0, w)))
  t = t.reshape(*lead, 1, m).expand(*lead, n, m).reshape(*lead, n * m).pad(((0, 0),) * len(lead) + ((0, n * s),))
  return t.reshape(*lead, n, m + s).shrink(keep + ((0, n), (0, w)))

def _strided_view(base: Tensor, offset: int, size: tuple[int, ...], stride: tuple[int, ...]) -> Tensor:
  """The view (offset, size, stride) of the 1-d tensor base, built from movement ops: stride-0 axes are an expand, the
  others windows taken largest stride first. Nothing is allocated; the caller checked the view lies inside base."""
  if prod(size) == 0: return Tensor.empty(*size, dtype=base.dtype, device=base.device)
  axes = sorted((d for d in range(len(size)) if size[d] != 1 and stride[d] != 0), key=lambda d: -stride[d])
  extent = 1 + sum((size[d] - 1) * stride[d] for d in axes)
  t = base if (offset, extent) == (0, base.shape[0]) else base.shrink(((offset, offset + extent),))
  for d in axes:
    w = extent - (size[d] - 1) * stride[d]
    t, extent = _window(t, size[d], stride[d], w), w
  t = t.reshape(tuple(size[d] for d in axes))
  t = t.permute(tuple(sorted(range(len(axes)), key=lambda i: axes[i]))) if axes else t
  return Tensor(t.reshape(tuple(size[d] if d in axes else 1 for d in range(len(size)))).expand(size).uop)

class _Storages:
  """The storages' data, each read once into one buffer and shared by every view. A storage's buffer takes the dtype
  of the first tensor that asks; another dtype of the same size is a bitcast of it."""
  def __init__(self, fn: str, device: str | None, swap: bool, limit: _Limit):
    self.fn, self.device, self.swap, self.limit = fn, device, swap, limit
    self.buffers: dict[str, Tensor] = {}
  def read(self, st: _Storage, out: memoryview) -> None: raise NotImplementedError
  def fill(self, st: _Storage, dtype: DType, out: memoryview) -> None:
    self.read(st, out)
    if self.swap: _byteswap(out, dtype.itemsize)
    if dtype is dtypes.bool:
      _check_bools(out, lambda b, i: f"torch_load: {self.fn}: {st!r} (bool) has byte 0x{b:02x} at element {i}")
  def get(self, st: _Storage, dtype: DType) -> Tensor:
    if (buf := self.buffers.get(st.key)) is None:
      if st.nbytes % dtype.itemsize:
        raise CheckpointError(f"torch_load: {self.fn}: {st!r} holds {st.nbytes} bytes, not a whole number of {dtype} "
                              "elements")
      self.limit.take(st.nbytes, repr(st))
      buf = self.buffers[st.key] = _filled_buffer(st.nbytes // dtype.itemsize, dtype, self.device,
                                                  lambda out: self.fill(st, dtype, out))
    if buf.dtype is dtype: return buf
    if buf.dtype.itemsize != dtype.itemsize or dtype is dtypes.bool:
      raise CheckpointError(f"torch_load: {self.fn}: {st!r} is read as {buf.dtype} and as {dtype}: a storage shared by "
                            "tensors of different element sizes (or read as bool) is not supported")
    return buf.bitcast(dtype)

def _to_tensor(t: _LoadedTensor, storages: _Storages, path: str) -> Tensor:
  st, isz = t.storage, t.dtype.itemsize
  root = st.root if st.root is not None else st
  if st.byte_offset % isz:
    raise CheckpointError(f"torch_load: {storages.fn}: {path}: {st!r} starts {st.byte_offset} bytes into {root!r}, not "
                          f"on a {t.dtype} element")
  avail, n = st.nbytes // isz, prod(t.size)
  if n and t.offset + sum((s - 1) * d for s, d in zip(t.size, t.stride)) >= avail:
    raise CheckpointError(f"torch_load: {storages.fn}: {path}: a tensor of shape {t.size} (offset {t.offset}, stride "
                          f"{t.stride}) reads past the {avail} elements of {st!r}")
  if n == 0: return Tensor.empty(*t.size, dtype=t.dtype, device=storages.device)
  return _strided_view(storages.get(root, t.dtype), st.byte_offset // isz + t.offset, t.size, t.stride)

_PLAIN = (str, bytes, int, float, bool, complex, type(None))

def _materialize(obj: Any, storages: _Storages, memo: dict[int, tuple[Any, Any]], path: str = "checkpoint",
                 depth: int = 0) -> Any:
  """Tensors for _LoadedTensor, the same containers for dicts/lists/tuples, plain values as they are; anything else
  (a set, a storage on its own, a dtype) is an error naming where it is. An object the pickle shares (its memo) is
  converted once and shared in the result, so `x = [x, x]` nested 60 deep costs 60 steps, not 2**60. Types are
  compared exactly and dict items read with dict.items, so nothing an object could have overridden is called."""
  if type(obj) in _PLAIN: return obj
  if (hit := memo.get(id(obj))) is not None: return hit[1]
  if depth > _MAX_DEPTH:
    raise CheckpointError(f"torch_load: {storages.fn}: {path} nests deeper than {_MAX_DEPTH} levels (a checkpoint is a "
                          "few levels of dicts and lists)")
  out: Any
  if type(obj) is _LoadedTensor: out = _to_tensor(obj, storages, path)
  elif type(obj) in (dict, collections.OrderedDict):
    out = memo.setdefault(id(obj), (obj, type(obj)()))[1]
    for k, v in dict.items(obj):
      if type(k) not in _PLAIN:
        raise CheckpointError(f"torch_load: {storages.fn}: {path} has a key of type {type(k).__name__}")
      out[k] = _materialize(v, storages, memo, f"{path}[{k!r}]", depth + 1)
  elif type(obj) is list:
    out = memo.setdefault(id(obj), (obj, []))[1]
    out.extend(_materialize(v, storages, memo, f"{path}[{i}]", depth + 1) for i, v in enumerate(obj))
  elif type(obj) is tuple:
    out = tuple(_materialize(v, storages, memo, f"{path}[{i}]", depth + 1) for i, v in enumerate(obj))
  else:
    raise CheckpointError(f"torch_load: {storages.fn}: {path} is a {type(obj).__name__}, not a tensor, dict, list, "
                          "tuple or plain value")
  memo[id(obj)] = (obj, out)
  return out

class _ZipStorages(_Storages):
  """Storages of a zip checkpoint: member <prefix>data/<key>, stored or deflated."""
  def __init__(self, z: zipfile.ZipFile, prefix: str, size: int, fn: str, device: str | None, swap: bool,
               limit: _Limit):
    super().__init__(fn, device, swap, limit)
    self.z, self.prefix, self.size = z, prefix, size
  def read(self, st: _Storage, out: memoryview) -> None:
    info = _zip_member(self.z, f"{self.prefix}data/{st.key}", self.size, self.fn, repr(st))
    if info.file_size != st.nbytes:
      raise CheckpointError(f"torch_load: {self.fn}: {st!r} is {info.file_size} bytes in the archive but its reference "
                            f"says {st.numel} elements of {st.dtype or 'bytes'} ({st.nbytes} bytes)")
    _read_member(self.z, info, out, self.fn, repr(st))

# deflate emits at most 258 bytes per 2 bits of a compressed block: no entry decompresses to more than 1032x its size
_DEFLATE_MAX_RATIO = 1032

def _zip_member(z: zipfile.ZipFile, name: str, size: int, fn: str, what: str) -> zipfile.ZipInfo:
  """The entry `name`, after checking what it declares against the archive: inside the file, stored or deflated, not
  encrypted, and no larger than its compressed bytes can expand to."""
  try: info = z.getinfo(name)
  except KeyError: raise CheckpointError(f"torch_load: {fn}: {what} has no {name} in the archive") from None
  where = f"torch_load: {fn}: {what} ({name})"
  if info.flag_bits & 1: raise CheckpointError(f"{where} is encrypted")
  if info.header_offset + info.compress_size > size:
    raise CheckpointError(f"{where} declares {info.compress_size} bytes at offset {info.header_offset}, past the end "
                          f"of the {size}-byte file: truncated")
  if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
    raise CheckpointError(f"{where} is stored (not compressed) but declares {info.file_size} bytes in "
                          f"{info.compress_size}")
  if info.compress_type == zipfile.ZIP_DEFLATED and info.file_size > _DEFLATE_MAX_RATIO * info.compress_size + 1024:
    raise CheckpointError(f"{where} declares {info.file_size} bytes from {info.compress_size} deflated ones, more "
                          f"than deflate can produce ({_DEFLATE_MAX_RATIO}x)")
  if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
    raise CheckpointError(f"{where} uses zip compression method {info.compress_type}; torch.save stores entries and "
                          "only stored or deflated ones are read")
  return info

def _check_disjoint_members(z: zipfile.ZipFile, fn: str) -> None:
  """No entry's bytes (its local header and compressed data) may lie inside another's: overlapping entries decompress
  one stream many times (a quoted-overlap bomb), and torch.save never writes them."""
  spans = sorted((i.header_offset, i.header_offset + 30 + len(i.filename.encode()) + i.compress_size, i.filename)
                 for i in z.infolist())
  for (_, a_end, a), (b_at, _, b) in zip(spans, spans[1:]):
    if b_at < a_end:
      raise CheckpointError(f"torch_load: {fn}: zip entry {b} (at offset {b_at}) overlaps entry {a} (which runs to "
                            f"{a_end}): entries that share bytes are refused")

def _read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, out: memoryview, fn: str, what: str) -> None:
  """Decompress the entry into out, a chunk at a time, counting the bytes it actually produces: it must give exactly
  len(out) of them (its CRC is checked at the end)."""
  got, more = 0, b""
  try:
    with z.open(info) as f:
      while got < len(out) and (chunk := f.read(min(_CHUNK, len(out) - got))):
        out[got:got + len(chunk)] = chunk
        got += len(chunk)
      more = f.read(1)
  except Exception as e:
    raise CheckpointError(f"torch_load: {fn}: {what} ({info.filename}) cannot be read ({type(e).__name__}: {e})") from e
  if got != len(out) or more:
    raise CheckpointError(f"torch_load: {fn}: {what} ({info.filename}) decompresses to {'more than ' if more else ''}"
                          f"{got} bytes, not the {len(out)} its entry declares")

def _read_small(z: zipfile.ZipFile, name: str, size: int, fn: str, what: str, limit: int) -> bytes:
  info = _zip_member(z, name, size, fn, what)
  if info.file_size > limit:
    raise CheckpointError(f"torch_load: {fn}: {what} ({name}) is {info.file_size} bytes, over its limit of {limit}")
  out = memoryview(bytearray(info.file_size))
  _read_member(z, info, out, fn, what)
  return out.tobytes()

def _load_zip(src: _Source, device: str | None, max_bytes: int | None) -> Any:
  try: z = zipfile.ZipFile(src.f)
  except Exception as e:
    raise CheckpointError(f"torch_load: {src.name}: a zip archive whose directory cannot be read ({type(e).__name__}: "
                          f"{e}): truncated or damaged") from e
  with z:
    names = z.namelist()
    pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
    if len(pkl) != 1:
      raise CheckpointError(f"torch_load: {src.name}: a zip checkpoint holds one <name>/data.pkl, found {sorted(pkl)} "
                            "(a TorchScript archive is not a checkpoint)")
    prefix = pkl[0][:-len("data.pkl")]
    _check_disjoint_members(z, src.name)
    compressed = any(i.compress_type != zipfile.ZIP_STORED for i in z.infolist())
    default = max(src.size, _half_physical_memory()) if compressed else src.size
    limit = _Limit("torch_load", src.name, max_bytes, default, "the default for compressed entries: half the physical "
                   "memory" if compressed else "the default: the file's size")
    order = "little"
    if prefix + "byteorder" in names:
      order = _read_small(z, prefix + "byteorder", src.size, src.name, "the byteorder", 16).decode(errors="replace")
      if order.strip() not in ("little", "big"):
        raise CheckpointError(f"torch_load: {src.name}: byteorder {order!r} is neither 'little' nor 'big'")
    raw = _read_small(z, pkl[0], src.size, src.name, "the pickle", limit.limit)
    storages = _ZipStorages(z, prefix, src.size, src.name, device, order.strip() != sys.byteorder, limit)
    seen: dict[str, _Storage] = {}
    def storage(pid: tuple[Any, ...]) -> _Storage:
      stype, key, numel = _check_pid(pid)
      st = seen.setdefault(key, _Storage(key, stype.dtype, numel))
      if (st.dtype, st.numel) != (stype.dtype, numel):
        raise _Refused(f"{st!r} is referenced as {numel} elements of {stype!r} and as {st.numel} of {st.dtype}")
      return st
    obj = _unpickle(io.BytesIO(raw), src.name, storage, len(raw))
    return _materialize(obj, storages, {})

_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c

class _LegacyStorages(_Storages):
  """Storages of torch's legacy format: after the pickles, each storage's element count and bytes in file order; the
  positions are noted in one pass and a storage is read when a tensor first needs it."""
  def __init__(self, f: _Bounded, fn: str, device: str | None, swap: bool, limit: _Limit):
    super().__init__(fn, device, swap, limit)
    self.f, self.at = f, cast(dict[str, int], {})
  def read(self, st: _Storage, out: memoryview) -> None:
    self.f.seek(self.at[st.key])
    if self.f.readinto(out) != len(out): raise CheckpointError(f"torch_load: {self.fn}: {st!r} is cut short")

def _load_legacy(src: _Source, device: str | None, max_bytes: int | None) -> Any:
  """torch's pre-1.6 format: pickles of the magic number, the protocol version, system info, the object, the storage
  keys; then each storage as an int64 element count and its bytes."""
  f, fn = _Bounded(src.f, src.size), src.name
  if _unpickle(f, fn, None, src.size) != _LEGACY_MAGIC:
    raise CheckpointError(f"torch_load: {fn}: neither a zip checkpoint nor torch's legacy format (bad magic number)")
  version, info = _unpickle(f, fn, None, src.size), _unpickle(f, fn, None, src.size)
  if version != 1001 or type(info) is not dict:
    raise CheckpointError(f"torch_load: {fn}: legacy format version {version!r} is not supported (1001 is)")
  little = info.get("little_endian", True) is not False
  roots: dict[str, _Storage] = {}
  views: dict[str, _Storage] = {}
  def storage(pid: tuple[Any, ...]) -> _Storage:
    stype, key, numel = _check_pid(pid)
    root = roots.setdefault(key, _Storage(key, stype.dtype, numel))
    if (root.dtype, root.numel) != (stype.dtype, numel):
      raise _Refused(f"{root!r} is referenced as {numel} elements of {stype!r} and as {root.numel} of {root.dtype}")
    view = pid[5] if len(pid) > 5 else None
    if view is None: return root
    if type(view) is not tuple or len(view) != 3 or type(view[1]) is not int or type(view[2]) is not int:
      raise _Refused(f"storage view {view!r} is not (key, offset, size)")
    vkey, off, n = str(view[0]), view[1], view[2]
    if off < 0 or n < 0 or off + n > numel:
      raise _Refused(f"storage view {vkey!r} (elements [{off}, {off + n})) does not fit {root!r} of {numel} elements")
    isz = stype.dtype.itemsize if stype.dtype is not None else 1
    return views.setdefault(f"{key}/{vkey}/{off}/{n}", _Storage(vkey, stype.dtype, n, root, off * isz))
  obj = _unpickle(f, fn, storage, src.size)
  keys = _unpickle(f, fn, None, src.size)
  if type(keys) is not list or not all(type(k) is str for k in keys) or len(set(keys)) != len(keys):
    raise CheckpointError(f"torch_load: {fn}: the storage key list is {type(keys).__name__}, not a list of distinct "
                          "str")
  storages = _LegacyStorages(f, fn, device, little != (sys.byteorder == "little"),
                             _Limit("torch_load", fn, max_bytes, src.size, "the default: the file's size"))
  for k in keys:
    head = f.read(8)
    if len(head) != 8: raise CheckpointError(f"torch_load: {fn}: the file ends before storage {k!r}")
    n = struct.unpack("<q" if little else ">q", head)[0]
    st = roots.get(k)
    nbytes = n * (st.dtype.itemsize if st is not None and st.dtype is not None else 1)
    if n < 0 or nbytes > f.remaining():
      raise CheckpointError(f"torch_load: {fn}: storage {k!r} declares {n} elements ({nbytes} bytes) but "
                            f"{f.remaining()} bytes of the file remain: truncated or corrupt")
    if st is not None and n != st.numel:
      raise CheckpointError(f"torch_load: {fn}: {st!r} holds {n} elements but the pickle refers to {st.numel}")
    storages.at[k] = f.tell()
    f.seek(nbytes, 1)
  if (missing := sorted(set(roots) - set(storages.at))):
    raise CheckpointError(f"torch_load: {fn}: the pickle refers to storages {missing} the file holds no data for")
  return _materialize(obj, storages, {})

def _has_zip_end(f: Any) -> bool:
  """Whether the file ends with a zip end-of-central-directory record (one zipfile refuses, e.g. a multi-disk
  archive, counts: opening it then says why)."""
  try: return zipfile.is_zipfile(f)
  except Exception: return True
  finally: f.seek(0)

def torch_load(fn: PathLike | bytes, device: str | None = None, max_bytes: int | None = None) -> Any:
  """Read a torch checkpoint (torch.save's zip format, or its legacy format; a path or the file's bytes) into the same
  structure with Tensors for torch tensors, on `device`. Each storage is read once into one buffer and every tensor is
  a view of it (strides, offsets and stride-0 expands kept, nothing copied); a tensor the pickle shares is one Tensor.
  Accepts dicts, OrderedDicts, lists, tuples and plain values; anything else, and any pickle that would call a
  function other than torch's tensor rebuilders, is a CheckpointError naming it, raised before anything runs.
  max_bytes bounds the storage bytes allocated (default: the file's size, or half the physical memory when the
  archive has compressed entries); every failure is a CheckpointError naming the file, the storage or key, and the
  rule broken."""
  with _open_source(fn, "torch_load") as src:
    head = src.f.read(512)
    src.f.seek(0)
    if head[:4] == b"PK\x03\x04" or _has_zip_end(src.f):
      if not _has_zip_end(src.f):
        raise CheckpointError(f"torch_load: {src.name}: a zip archive (it starts with PK) with no end of central "
                              "directory record: truncated or damaged")
      src.f.seek(0)
      return _load_zip(src, device, max_bytes)
    src.f.seek(0)
    if head[257:262] == b"ustar":
      raise CheckpointError(f"torch_load: {src.name}: torch's old tar checkpoint format is not supported; re-save it")
    if head[:1] != pickle.PROTO and not head.startswith(pickle.dumps(_LEGACY_MAGIC, 0)):
      raise CheckpointError(f"torch_load: {src.name}: neither a zip checkpoint (PK) nor torch's legacy format (a "
                            f"pickle): the file starts with {head[:8]!r}")
    return _load_legacy(src, device, max_bytes)

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata",
           "torch_load", "CheckpointError", "StateDictError", "StateDictMismatch", "SAFE_DTYPES"]
