"""State dicts: find the tensors of a model by walking its attributes, load them back, save/load safetensors files."""
from __future__ import annotations
import json, struct
from typing import Any
import numpy as np
from tinygrad.tensor import Tensor
from tinygrad.dtype import DType, dtypes, to_np_dtype
from tinygrad.helpers import prod

def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
  """Every Tensor reachable from obj through attributes, lists, tuples and dicts, keyed by its dotted path."""
  if isinstance(obj, Tensor): return {prefix.rstrip("."): obj}
  if isinstance(obj, (list, tuple)):
    return {k: v for i, x in enumerate(obj) for k, v in get_state_dict(x, f"{prefix}{i}.").items()}
  if isinstance(obj, dict): return {k: v for n, x in obj.items() for k, v in get_state_dict(x, f"{prefix}{n}.").items()}
  if hasattr(obj, "__dict__") and not isinstance(obj, type):
    items = {n: x for n, x in vars(obj).items() if not n.startswith("_")}
    return {k: v for n, x in items.items() for k, v in get_state_dict(x, f"{prefix}{n}.").items()}
  return {}

def get_parameters(obj: Any) -> list[Tensor]:
  """The distinct tensors of obj (see get_state_dict), in attribute order."""
  return list({id(t): t for t in get_state_dict(obj).values()}.values())

def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True) -> None:
  """Copy each tensor of state_dict into the model's tensor of the same name (shapes must match) and realize them."""
  own = get_state_dict(model)
  if strict and (missing := sorted(set(own) - set(state_dict))):
    raise KeyError(f"load_state_dict: missing keys {missing}")
  if strict and (extra := sorted(set(state_dict) - set(own))):
    raise KeyError(f"load_state_dict: unexpected keys {extra}")
  for k, t in own.items():
    if k not in state_dict: continue
    v = state_dict[k]
    if v.shape != t.shape:
      raise ValueError(f"load_state_dict: {k} has shape {v.shape} in the state dict but {t.shape} in the model")
    t.assign(v.cast(t.dtype))
  if own: Tensor.realize(*own.values())

# ---- safetensors: 8-byte little-endian header size, a JSON header, then the raw little-endian data ----

SAFE_DTYPES: dict[str, DType] = {"F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16,
                                 "BF16": dtypes.bfloat16, "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16,
                                 "I8": dtypes.int8,
                                 "U64": dtypes.uint64, "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8,
                                 "BOOL": dtypes.bool, "F8_E4M3": dtypes.fp8e4m3, "F8_E5M2": dtypes.fp8e5m2}
_SAFE_NAMES = {v: k for k, v in SAFE_DTYPES.items()}

def _raw(t: Tensor) -> bytes:
  from tinygrad.device import buffer_of
  from tinygrad.tensor import _base_buffer
  t = t.contiguous().realize() if _base_buffer(t.realize().uop) is None else t
  base = _base_buffer(t.uop)
  assert base is not None
  buf = buffer_of(base)
  return bytes(buf.ensure_allocated().as_buffer()) if t.numel() else b""

def safe_save(tensors: dict[str, Tensor], fn: str, metadata: dict[str, str] | None = None) -> None:
  header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
  blobs, off = [], 0
  for k, t in tensors.items():
    data = _raw(t)
    header[k] = {"dtype": _SAFE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
    blobs.append(data)
    off += len(data)
  hj = json.dumps(header, separators=(",", ":")).encode()
  hj += b" " * (-len(hj) % 8)
  with open(fn, "wb") as f:
    f.write(struct.pack("<Q", len(hj)) + hj)
    for b in blobs: f.write(b)

def safe_load(fn: str, device: str | None = None) -> dict[str, Tensor]:
  with open(fn, "rb") as f: raw = f.read()
  n = struct.unpack("<Q", raw[:8])[0]
  header = json.loads(raw[8:8 + n])
  ret: dict[str, Tensor] = {}
  for k, info in header.items():
    if k == "__metadata__": continue
    if info["dtype"] not in SAFE_DTYPES:
      raise ValueError(f"safe_load: {fn}: tensor {k} has unsupported dtype {info['dtype']}")
    dt, (s, e) = SAFE_DTYPES[info["dtype"]], info["data_offsets"]
    bits: np.ndarray = np.frombuffer(raw[8 + n + s:8 + n + e], dtype=to_np_dtype(dt))
    if bits.size != prod(info["shape"]):
      raise ValueError(f"safe_load: {fn}: tensor {k} has {bits.size} values for shape {info['shape']}")
    ret[k] = Tensor._from_storage(bits.reshape(info["shape"]), dt, device)
  return ret

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load"]
