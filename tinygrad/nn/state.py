"""State dicts and checkpoints: find a model's tensors by walking its attributes, load them back (strictly by default),
save/load safetensors files, and read torch checkpoints (.pth/.pt) without running anything from the file.

torch checkpoints are pickles, and a pickle can name any Python function for the loader to call. `torch_load` walks
the pickle with a restricted unpickler: the only globals it resolves are torch's tensor-rebuild functions, its storage
and dtype names and `collections.OrderedDict`, each mapped to an implementation of ours that builds plain data; any
other global (a class, `os.system`, ...) stops the load with a CheckpointError naming it before anything is called."""
from __future__ import annotations
import collections, io, json, os, pickle, struct, sys, tarfile, zipfile
from dataclasses import dataclass
from typing import Any, Callable, Union, cast
import numpy as np
from tinygrad.tensor import Tensor
from tinygrad.dtype import DType, dtypes, to_np_dtype
from tinygrad.helpers import prod, atomic_write

PathLike = Union[str, "os.PathLike[str]"]

class CheckpointError(ValueError):
  """A checkpoint that cannot be read safely or faithfully; the message names the file and what was wrong."""

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

def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, realize: bool = True,
                    consume: bool = False) -> None:
  """Copy each tensor of state_dict into the model's tensor of the same name (in place, cast to the model's dtype,
  moved to its device). strict: a key the model has and the state dict lacks, or the other way round, is a KeyError
  naming every such key. A shape mismatch is a ValueError naming the key and both shapes (also when not strict).
  consume: delete each loaded key from state_dict (frees memory as it goes)."""
  own = get_state_dict(model)
  if strict:
    missing, extra = sorted(set(own) - set(state_dict)), sorted(set(state_dict) - set(own))
    if missing or extra:
      raise KeyError(f"load_state_dict: the state dict does not match the model: missing keys {missing}, unexpected "
                     f"keys {extra} (pass strict=False to load the keys both have)")
  for k, t in own.items():
    if k not in state_dict: continue
    v = state_dict[k]
    if not isinstance(v, Tensor):
      raise TypeError(f"load_state_dict: {k} is a {type(v).__name__} in the state dict, not a Tensor")
    if v.shape != t.shape:
      raise ValueError(f"load_state_dict: {k} has shape {v.shape} in the state dict but {t.shape} in the model")
    t.assign(v.to(t.device).cast(t.dtype))
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
  from tinygrad.tensor import _base_buffer
  t = t.realize()
  if _base_buffer(t.uop) is None: t = t.contiguous().realize()
  base = _base_buffer(t.uop)
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

def _safe_header(raw: bytes, fn: PathLike) -> tuple[dict[str, Any], int]:
  if len(raw) < 8: raise CheckpointError(f"safe_load: {fn}: {len(raw)} bytes is too short for a safetensors file")
  n = struct.unpack("<Q", raw[:8])[0]
  if 8 + n > len(raw): raise CheckpointError(f"safe_load: {fn}: header of {n} bytes runs past the end of the file")
  try: header = json.loads(raw[8:8 + n])
  except ValueError as e: raise CheckpointError(f"safe_load: {fn}: the header is not JSON ({e})") from e
  if not isinstance(header, dict): raise CheckpointError(f"safe_load: {fn}: the header is not a JSON object")
  return header, 8 + n

def safe_load_metadata(fn: PathLike) -> dict[str, str]:
  """The `__metadata__` of a safetensors file ({} when it has none)."""
  with open(fn, "rb") as f: raw = f.read()
  return dict(_safe_header(raw, fn)[0].get("__metadata__") or {})

def safe_load(fn: PathLike, device: str | None = None) -> dict[str, Tensor]:
  """The tensors of a safetensors file, in file order, on `device` (default: the default device). Every entry is
  checked: a known dtype, offsets inside the file and a byte count that matches dtype and shape."""
  with open(fn, "rb") as f: raw = f.read()
  header, start = _safe_header(raw, fn)
  ret: dict[str, Tensor] = {}
  for k, info in header.items():
    if k == "__metadata__": continue
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
      raise CheckpointError(f"safe_load: {fn}: tensor {k!r} needs dtype, shape and data_offsets, got {info!r}")
    if info["dtype"] not in SAFE_DTYPES:
      raise CheckpointError(f"safe_load: {fn}: tensor {k!r} has unsupported dtype {info['dtype']!r} (known: "
                            f"{', '.join(SAFE_DTYPES)})")
    dt, shape, (s, e) = SAFE_DTYPES[info["dtype"]], tuple(info["shape"]), info["data_offsets"]
    if not all(isinstance(d, int) and d >= 0 for d in shape):
      raise CheckpointError(f"safe_load: {fn}: tensor {k!r} has a bad shape {info['shape']!r}")
    if not (isinstance(s, int) and isinstance(e, int) and 0 <= s <= e <= len(raw) - start):
      raise CheckpointError(f"safe_load: {fn}: tensor {k!r} has data_offsets {[s, e]} outside the {len(raw) - start} "
                            "data bytes")
    if e - s != prod(shape) * dt.itemsize:
      raise CheckpointError(f"safe_load: {fn}: tensor {k!r} has {e - s} bytes for shape {list(shape)} of "
                            f"{info['dtype']} ({prod(shape) * dt.itemsize} expected)")
    bits: np.ndarray = np.frombuffer(raw, dtype=np.dtype(to_np_dtype(dt)).newbyteorder("<"), count=prod(shape),
                                     offset=start + s)
    ret[k] = Tensor._from_storage(bits.reshape(shape), dt, device)
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

@dataclass(frozen=True)
class _StorageType:
  """What `torch.FloatStorage` (etc.) resolves to: only a name and an element dtype (None: bytes)."""
  name: str
  dtype: DType | None

@dataclass(frozen=True)
class _DTypeName:
  """What `torch.float16` (etc.) resolves to."""
  name: str
  dtype: DType

class _Storage:
  """One storage of the checkpoint: raw bytes (filled in after the pickle for the legacy format) of `dtype`."""
  __slots__ = ("key", "dtype", "numel", "data", "root", "byte_offset")
  def __init__(self, key: str, dtype: DType | None, numel: int, root: _Storage | None = None, byte_offset: int = 0):
    self.key, self.dtype, self.numel = key, dtype, numel
    self.data: bytes | None = None
    self.root, self.byte_offset = root, byte_offset

@dataclass(frozen=True)
class _LoadedTensor:
  """A tensor as the pickle describes it: a strided view of a storage; made into a Tensor after the pickle is read."""
  storage: _Storage
  dtype: DType
  offset: int
  size: tuple[int, ...]
  stride: tuple[int, ...]

def _check_ints(v: Any, what: str) -> tuple[int, ...]:
  if not isinstance(v, (tuple, list)) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
    raise CheckpointError(f"{what} must be a tuple of ints, got {v!r}")
  return tuple(v)

def _rebuild(storage: Any, offset: Any, size: Any, stride: Any, dtype: DType | None = None) -> _LoadedTensor:
  if not isinstance(storage, _Storage): raise CheckpointError(f"a tensor's storage is a {type(storage).__name__}")
  dt = dtype or storage.dtype
  if dt is None: raise CheckpointError(f"storage {storage.key} holds bytes but the tensor names no dtype")
  size_t, stride_t = _check_ints(size, "a tensor's size"), _check_ints(stride, "a tensor's stride")
  if not isinstance(offset, int) or offset < 0 or len(size_t) != len(stride_t) or any(s < 0 for s in size_t + stride_t):
    raise CheckpointError(f"a tensor of storage {storage.key} has offset {offset!r}, size {size_t} and stride "
                          f"{stride_t}: need a non-negative offset and one non-negative stride per axis")
  return _LoadedTensor(storage, dt, offset, size_t, stride_t)

def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any) -> _LoadedTensor:
  return _rebuild(storage, offset, size, stride)
def _rebuild_tensor_v2(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                       backward_hooks: Any = None, metadata: Any = None) -> _LoadedTensor:
  return _rebuild(storage, offset, size, stride)
def _rebuild_tensor_v3(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any, backward_hooks: Any,
                       dtype: Any, metadata: Any = None) -> _LoadedTensor:
  if not isinstance(dtype, _DTypeName): raise CheckpointError(f"_rebuild_tensor_v3 names dtype {dtype!r}")
  return _rebuild(storage, offset, size, stride, dtype.dtype)
def _rebuild_parameter(data: Any, requires_grad: Any = False, backward_hooks: Any = None,
                       state: Any = None) -> _LoadedTensor:
  if not isinstance(data, _LoadedTensor): raise CheckpointError(f"a Parameter wraps a {type(data).__name__}")
  return data
def _codecs_encode(s: Any, encoding: Any = "utf-8") -> bytes:
  # NOTE: how protocol 2 pickles bytes (Python 2 compatibility): _codecs.encode(text, "latin1")
  if not isinstance(s, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
    raise CheckpointError(f"_codecs.encode({type(s).__name__}, {encoding!r}) is not how a pickle spells bytes")
  return s.encode(encoding)

_SAFE_GLOBALS: dict[tuple[str, str], Any] = {
  ("torch._utils", "_rebuild_tensor"): _rebuild_tensor, ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
  ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
  ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
  ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
  ("collections", "OrderedDict"): collections.OrderedDict, ("_codecs", "encode"): _codecs_encode,
  ("torch.storage", "UntypedStorage"): _StorageType("UntypedStorage", None),
  **{("torch", n): _StorageType(n, d) for n, d in _TORCH_STORAGES.items()},
  **{("torch", n): _DTypeName(n, d) for n, d in _TORCH_DTYPES.items()}}

class _RestrictedUnpickler(pickle.Unpickler):
  """Resolves only _SAFE_GLOBALS; persistent ids (torch's storages) go to `storage`."""
  def __init__(self, f: Any, fn: PathLike, storage: Callable[[tuple[Any, ...]], _Storage] | None):
    super().__init__(f)
    self.fn, self.storage = fn, storage
  def find_class(self, module: str, name: str) -> Any:
    if (ret := _SAFE_GLOBALS.get((module, name))) is not None: return ret
    raise CheckpointError(f"torch_load: {self.fn}: the pickle refers to {module}.{name}, which is not a tensor, a "
                          "dict, a list, a tuple or a number; refused (nothing from the file was run). Save a "
                          "state_dict (torch.save(model.state_dict(), ...)) rather than objects")
  def persistent_load(self, pid: Any) -> Any:
    if self.storage is None or not isinstance(pid, tuple) or not pid or pid[0] != "storage":
      raise CheckpointError(f"torch_load: {self.fn}: unexpected persistent id {pid!r} (only torch storages are read)")
    return self.storage(pid)

def _check_pid(pid: tuple[Any, ...], fn: PathLike) -> tuple[_StorageType, str, int]:
  if len(pid) < 5 or not isinstance(pid[1], _StorageType) or not isinstance(pid[2], str) or not isinstance(pid[4], int):
    raise CheckpointError(f"torch_load: {fn}: a storage reference {pid!r} is not (storage, type, key, location, numel)")
  return pid[1], pid[2], pid[4]

def _unpickle(f: Any, fn: PathLike, storage: Callable[[tuple[Any, ...]], _Storage] | None) -> Any:
  try: return _RestrictedUnpickler(f, fn, storage).load()
  except CheckpointError: raise
  except Exception as e:
    raise CheckpointError(f"torch_load: {fn}: not a readable checkpoint pickle ({type(e).__name__}: {e})") from e

def _to_tensor(t: _LoadedTensor, swap: bool, device: str | None, fn: PathLike) -> Tensor:
  st, off = t.storage, t.storage.byte_offset
  while st.root is not None: st = st.root
  if st.data is None: raise CheckpointError(f"torch_load: {fn}: storage {st.key} has no data")
  npdt = np.dtype(to_np_dtype(t.dtype))
  n_avail = (len(st.data) - off) // t.dtype.itemsize
  if prod(t.size) and t.offset + sum((s - 1) * d for s, d in zip(t.size, t.stride)) >= n_avail:
    raise CheckpointError(f"torch_load: {fn}: a tensor of shape {t.size} (offset {t.offset}, stride {t.stride}) reads "
                          f"past the {n_avail} elements of storage {st.key}")
  flat = np.frombuffer(st.data, dtype=npdt, count=max(n_avail, 0), offset=off)
  if swap: flat = flat.byteswap()
  view = np.lib.stride_tricks.as_strided(flat[t.offset:], shape=t.size, strides=[s * npdt.itemsize for s in t.stride])
  return Tensor._from_storage(np.array(view, order="C"), t.dtype, device)  # NOTE: keeps 0-d as 0-d

_PLAIN = (str, bytes, int, float, bool, complex, type(None))

def _materialize(obj: Any, swap: bool, device: str | None, fn: PathLike, path: str = "checkpoint") -> Any:
  """Tensors for _LoadedTensor, the same containers for dicts/lists/tuples, plain values as they are; anything else
  (a set, a storage on its own, a dtype) is an error naming where it is. Types are compared exactly and dict items read
  with dict.items, so nothing an object could have overridden is called."""
  if type(obj) is _LoadedTensor: return _to_tensor(obj, swap, device, fn)
  if type(obj) in _PLAIN: return obj
  if type(obj) in (dict, collections.OrderedDict):
    out = type(obj)()
    for k, v in dict.items(obj):
      if type(k) not in _PLAIN: raise CheckpointError(f"torch_load: {fn}: {path} has a key of type {type(k).__name__}")
      out[k] = _materialize(v, swap, device, fn, f"{path}[{k!r}]")
    return out
  if type(obj) in (list, tuple):
    items = [_materialize(v, swap, device, fn, f"{path}[{i}]") for i, v in enumerate(obj)]
    return items if type(obj) is list else tuple(items)
  raise CheckpointError(f"torch_load: {fn}: {path} is a {type(obj).__name__}, not a tensor, dict, list, tuple or plain "
                        "value")

def _load_zip(fn: PathLike, device: str | None) -> Any:
  with zipfile.ZipFile(fn) as z:
    names = set(z.namelist())
    pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
    if len(pkl) != 1:
      raise CheckpointError(f"torch_load: {fn}: a zip checkpoint holds one <name>/data.pkl, found {sorted(pkl)} (a "
                            "TorchScript archive is not a checkpoint)")
    prefix = pkl[0][:-len("data.pkl")]
    order = z.read(prefix + "byteorder").decode().strip() if prefix + "byteorder" in names else "little"
    if order not in ("little", "big"): raise CheckpointError(f"torch_load: {fn}: byteorder {order!r}")
    storages: dict[str, _Storage] = {}
    def storage(pid: tuple[Any, ...]) -> _Storage:
      stype, key, numel = _check_pid(pid, fn)
      if key not in storages:
        if (member := f"{prefix}data/{key}") not in names:
          raise CheckpointError(f"torch_load: {fn}: storage {key!r} has no {member} in the archive")
        nbytes = numel * (stype.dtype.itemsize if stype.dtype is not None else 1)
        if (size := z.getinfo(member).file_size) != nbytes:
          raise CheckpointError(f"torch_load: {fn}: storage {key!r} is {size} bytes in the archive but its reference "
                                f"says {numel} elements of {stype.name} ({nbytes} bytes)")
        storages[key] = _Storage(key, stype.dtype, numel)
        storages[key].data = z.read(member)
      return storages[key]
    obj = _unpickle(io.BytesIO(z.read(pkl[0])), fn, storage)
  return _materialize(obj, order != sys.byteorder, device, fn)

_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c

def _load_legacy(fn: PathLike, device: str | None) -> Any:
  """torch's pre-1.6 format: pickles of the magic number, the protocol version, system info, the object, the storage
  keys; then each storage as an int64 element count and its bytes."""
  with open(fn, "rb") as f:
    if _unpickle(f, fn, None) != _LEGACY_MAGIC:
      raise CheckpointError(f"torch_load: {fn}: neither a zip checkpoint nor torch's legacy format (bad magic number)")
    version, info = _unpickle(f, fn, None), _unpickle(f, fn, None)
    if version != 1001 or not isinstance(info, dict):
      raise CheckpointError(f"torch_load: {fn}: legacy format version {version!r} is not supported (1001 is)")
    little = info.get("little_endian", True)
    roots: dict[str, _Storage] = {}
    def storage(pid: tuple[Any, ...]) -> _Storage:
      stype, key, numel = _check_pid(pid, fn)
      root = roots.setdefault(key, _Storage(key, stype.dtype, numel))
      view = pid[5] if len(pid) > 5 else None
      if view is None: return root
      if not (isinstance(view, tuple) and len(view) == 3 and isinstance(view[1], int) and isinstance(view[2], int)):
        raise CheckpointError(f"torch_load: {fn}: storage view {view!r} is not (key, offset, size)")
      return _Storage(str(view[0]), stype.dtype, view[2], root, view[1] * (stype.dtype.itemsize if stype.dtype else 1))
    obj = _unpickle(f, fn, storage)
    keys = _unpickle(f, fn, None)
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
      raise CheckpointError(f"torch_load: {fn}: the storage key list is {type(keys).__name__}, not a list of str")
    for k in keys:
      head = f.read(8)
      if len(head) != 8: raise CheckpointError(f"torch_load: {fn}: the file ends before storage {k}")
      n = struct.unpack("<q" if little else ">q", head)[0]
      st = roots.get(k)
      size = n * (st.dtype.itemsize if st is not None and st.dtype is not None else 1)
      data = f.read(size)
      if len(data) != size: raise CheckpointError(f"torch_load: {fn}: storage {k} is cut short")
      if st is not None: st.data = data
  return _materialize(obj, little != (sys.byteorder == "little"), device, fn)

def torch_load(fn: PathLike, device: str | None = None) -> Any:
  """Read a torch checkpoint (torch.save's zip format, or its legacy format) into the same structure with Tensors for
  torch tensors (views, strides and storage offsets kept; every dtype tinygrad has), on `device`. Accepts dicts,
  OrderedDicts, lists, tuples and plain values; anything else, and any pickle that would call a function other than
  torch's tensor rebuilders, is a CheckpointError naming it, raised before anything runs."""
  if zipfile.is_zipfile(fn): return _load_zip(fn, device)
  if tarfile.is_tarfile(fn):
    raise CheckpointError(f"torch_load: {fn}: torch's old tar checkpoint format is not supported; re-save it")
  return _load_legacy(fn, device)

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata",
           "torch_load", "CheckpointError", "SAFE_DTYPES"]
