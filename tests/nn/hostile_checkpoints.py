"""Hostile checkpoints, built byte by byte: the inputs of issue 22 against safe_load, torch_load and gguf_load, for the
regression tests (tests/nn/test_checkpoint_limits.py) and the peak-memory bench (bench/loader_memory.py).

Each builder writes one file and returns its path. Pickles are spelled with raw opcodes (protocol 2) so the file holds
exactly the structure named, with no help from torch's pickler; zip archives follow torch.save's layout
(`archive/data.pkl`, `archive/data/<key>`, `archive/byteorder`)."""
from __future__ import annotations
import json, pathlib, pickle, struct, zipfile, zlib

# ---- pickle opcodes (protocol 2) ----

def _put(i: int) -> bytes: return pickle.BINPUT + bytes([i]) if i < 256 else pickle.LONG_BINPUT + struct.pack("<I", i)
def _get(i: int) -> bytes: return pickle.BINGET + bytes([i]) if i < 256 else pickle.LONG_BINGET + struct.pack("<I", i)
def _str(s: str) -> bytes: return pickle.BINUNICODE + struct.pack("<I", len(s.encode())) + s.encode()
def _int(v: int) -> bytes:
  if 0 <= v < 2**31: return pickle.BININT + struct.pack("<i", v)
  raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
  return pickle.LONG1 + bytes([len(raw)]) + raw
def _global(module: str, name: str) -> bytes: return pickle.GLOBAL + f"{module}\n{name}\n".encode()
def _tuple(*items: bytes) -> bytes: return pickle.MARK + b"".join(items) + pickle.TUPLE
def _ints(v: tuple[int, ...]) -> bytes: return _tuple(*(_int(x) for x in v))

PROTO = pickle.PROTO + b"\x02"

def storage_pid(key: str, numel: int, storage: str = "FloatStorage", memo: int | None = None,
                legacy: bool = False) -> bytes:
  """A torch storage reference: BINPERSID of ('storage', torch.<storage>, key, 'cpu', numel), optionally memoized; the
  legacy format adds a sixth entry, the view (None: the whole storage)."""
  pid = _tuple(_str("storage"), _global("torch", storage), _str(key), _str("cpu"), _int(numel),
               *([pickle.NONE] if legacy else []))
  return pid + (b"" if memo is None else _put(memo)) + pickle.BINPERSID

def rebuild_v2(storage: bytes, offset: int, size: tuple[int, ...], stride: tuple[int, ...]) -> bytes:
  """torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())."""
  args = _tuple(storage, _int(offset), _ints(size), _ints(stride), pickle.NEWFALSE,
                _global("collections", "OrderedDict") + pickle.EMPTY_TUPLE + pickle.REDUCE)
  return _global("torch._utils", "_rebuild_tensor_v2") + args + pickle.REDUCE

def pickle_dict(items: dict[str, bytes]) -> bytes:
  """A dict of the given pickled values, as the whole pickle (PROTO ... STOP)."""
  return PROTO + pickle.EMPTY_DICT + pickle.MARK + b"".join(_str(k) + v for k, v in items.items()) + pickle.SETITEMS + \
    pickle.STOP

# ---- torch containers ----

LEGACY_MAGIC = 0x1950a86a20f9469cfc6c

def legacy_file(fn: pathlib.Path, payload: bytes, storages: dict[str, bytes] | None = None,
                counts: dict[str, int] | None = None) -> pathlib.Path:
  """torch's legacy format: the magic, version 1001, system info, `payload` (a whole pickle), the storage keys, then
  each storage as its int64 element count (`counts`, default: its bytes / 4) and its bytes."""
  storages = storages or {}
  head = pickle.dumps(LEGACY_MAGIC, 2) + pickle.dumps(1001, 2) + pickle.dumps({"little_endian": True}, 2)
  body = b"".join(struct.pack("<q", (counts or {}).get(k, len(b) // 4)) + b for k, b in storages.items())
  fn.write_bytes(head + payload + pickle.dumps(list(storages), 2) + body)
  return fn

def torch_zip(fn: pathlib.Path, pkl: bytes, storages: dict[str, bytes] | None = None) -> pathlib.Path:
  """torch.save's zip layout holding `pkl` as data.pkl and each storage stored (uncompressed)."""
  with zipfile.ZipFile(fn, "w") as z:
    z.writestr("archive/data.pkl", pkl)
    z.writestr("archive/byteorder", "little")
    for k, b in (storages or {}).items(): z.writestr(f"archive/data/{k}", b)
    z.writestr("archive/version", "3\n")
  return fn

# ---- the inputs of issue 22 ----

def nested_shared_lists(fn: pathlib.Path, depth: int = 60) -> pathlib.Path:
  """`x = [x, x]` nested `depth` times (a legacy file of about 660 bytes): walked as a tree it has 2**depth leaves."""
  ops = pickle.EMPTY_LIST + _put(0) + pickle.POP
  for i in range(1, depth + 1):
    ops += pickle.EMPTY_LIST + _put(i) + pickle.MARK + _get(i - 1) + _get(i - 1) + pickle.APPENDS + pickle.POP
  return legacy_file(fn, PROTO + ops + _get(depth) + pickle.STOP)

def shared_storage_views(fn: pathlib.Path, n_views: int = 4096, numel: int = 1 << 20, fill: str = "zeros") -> pathlib.Path:
  """One storage of `numel` float32 (4 MB by default; zeros, or 0..numel-1 with fill="arange") and a list of `n_views`
  tensors, each a full view of it."""
  import numpy as np
  views = pickle.EMPTY_LIST + pickle.MARK
  views += rebuild_v2(storage_pid("0", numel, memo=0), 0, (numel,), (1,))
  for _ in range(n_views - 1): views += rebuild_v2(_get(0) + pickle.BINPERSID, 0, (numel,), (1,))
  data = np.arange(numel, dtype="<f4").tobytes() if fill == "arange" else bytes(4 * numel)
  return torch_zip(fn, PROTO + views + pickle.APPENDS + pickle.STOP, {"0": data})

def zip_bomb(fn: pathlib.Path, nbytes: int = 1600 << 20) -> pathlib.Path:
  """A zip checkpoint whose one float32 storage is `nbytes` of zeros, deflated at level 9 (about 1/1000 of it on disk);
  written in chunks, so building it never holds the data."""
  numel = nbytes // 4
  pkl = pickle_dict({"w": rebuild_v2(storage_pid("0", numel), 0, (numel,), (1,))})
  with zipfile.ZipFile(fn, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    z.writestr("archive/data.pkl", pkl)
    z.writestr("archive/byteorder", "little")
    with z.open("archive/data/0", "w", force_zip64=True) as f:
      chunk = bytes(1 << 24)
      for i in range(0, nbytes, len(chunk)): f.write(chunk[:min(len(chunk), nbytes - i)])
  return fn

def stride0_view(fn: pathlib.Path, numel: int = 10**10) -> pathlib.Path:
  """A legacy file of about 220 bytes: one float32 element (2.5) viewed as a tensor of `numel` elements, stride 0."""
  payload = pickle_dict({"w": rebuild_v2(storage_pid("0", 1, legacy=True), 0, (numel,), (0,))})
  return legacy_file(fn, payload, {"0": struct.pack("<f", 2.5)})

def deep_pickle(fn: pathlib.Path, depth: int = 100_000) -> pathlib.Path:
  """A zip checkpoint whose data.pkl is a list nested `depth` deep ([[[...]]]), about 2 bytes a level."""
  return torch_zip(fn, PROTO + pickle.MARK * depth + pickle.LIST * depth + pickle.STOP)

def storage_view_past_end(fn: pathlib.Path) -> pathlib.Path:
  """A legacy file whose tensor uses a storage view (key, offset 100, size 4) of a 4-element storage: the view starts
  96 elements past its end."""
  pid = _tuple(_str("storage"), _global("torch", "FloatStorage"), _str("0"), _str("cpu"), _int(4),
               _tuple(_str("0v"), _int(100), _int(4)))
  payload = pickle_dict({"w": rebuild_v2(pid + pickle.BINPERSID, 0, (4,), (1,))})
  return legacy_file(fn, payload, {"0": bytes(16)})

def truncated_zip(fn: pathlib.Path, src: pathlib.Path, keep: float = 0.6) -> pathlib.Path:
  """The first `keep` of the zip checkpoint src (its central directory cut off)."""
  raw = src.read_bytes()
  fn.write_bytes(raw[:int(len(raw) * keep)])
  return fn

def multi_disk_zip(fn: pathlib.Path, src: pathlib.Path) -> pathlib.Path:
  """The zip checkpoint src with its zip64 end-of-central-directory locator claiming 2 disks (found by the
  load_torch fuzz target: zipfile.is_zipfile raises BadZipFile on it instead of answering)."""
  raw = bytearray(src.read_bytes())
  at = raw.rfind(b"PK\x06\x07")
  assert at >= 0, "torch.save writes a zip64 end record"
  raw[at + 16:at + 20] = struct.pack("<I", 2)
  fn.write_bytes(bytes(raw))
  return fn

def _local_header(name: str, method: int, crc: int, csize: int, usize: int) -> bytes:
  return struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0, crc, csize, usize, len(name), 0) + name.encode()

def _central(name: str, method: int, crc: int, csize: int, usize: int, offset: int) -> bytes:
  return struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc, csize, usize, len(name), 0,
                     0, 0, 0, 0, offset) + name.encode()

def overlapping_zip(fn: pathlib.Path, nbytes: int = 64 << 20) -> pathlib.Path:
  """A zip checkpoint whose two deflated storages share one compressed stream (a quoted overlap): storage '0' is a
  stored deflate block quoting storage '1''s local header, followed by storage '1''s own stream, so the archive's
  `nbytes` of zeros are declared (and decompressed) twice from one copy of the compressed data."""
  zeros = bytes(1 << 20)
  comp, crc1 = zlib.compressobj(9, zlib.DEFLATED, -15), 0
  body = b""
  for i in range(0, nbytes, len(zeros)):
    chunk = zeros[:min(len(zeros), nbytes - i)]
    body, crc1 = body + comp.compress(chunk), zlib.crc32(chunk, crc1)
  body += comp.flush()
  lh1 = _local_header("archive/data/1", 8, crc1, len(body), nbytes)
  quoted = b"\x00" + struct.pack("<HH", len(lh1), 0xFFFF ^ len(lh1)) + lh1 + body
  crc0 = zlib.crc32(zeros[:0], zlib.crc32(lh1))
  for i in range(0, nbytes, len(zeros)): crc0 = zlib.crc32(zeros[:min(len(zeros), nbytes - i)], crc0)
  n0, n1 = (len(lh1) + nbytes) // 4, nbytes // 4
  assert len(lh1) % 4 == 0
  pkl = pickle_dict({"a": rebuild_v2(storage_pid("0", n0), 0, (n0,), (1,)),
                     "b": rebuild_v2(storage_pid("1", n1), 0, (n1,), (1,))})
  out, cd = b"", b""
  for name, method, crc, data, usize in [("archive/data.pkl", 0, zlib.crc32(pkl), pkl, len(pkl)),
                                         ("archive/data/0", 8, crc0, quoted, len(lh1) + nbytes)]:
    cd += _central(name, method, crc, len(data), usize, len(out))
    out += _local_header(name, method, crc, len(data), usize) + data
  at1 = len(out) - len(body) - len(lh1)
  cd += _central("archive/data/1", 8, crc1, len(body), nbytes, at1)
  eocd = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 3, 3, len(cd), len(out), 0)
  fn.write_bytes(out + cd + eocd)
  return fn

# ---- safetensors ----

def safetensors_file(fn: pathlib.Path, header: dict | bytes, data: bytes = b"") -> pathlib.Path:
  hj = header if isinstance(header, bytes) else json.dumps(header).encode()
  fn.write_bytes(struct.pack("<Q", len(hj)) + hj + data)
  return fn

def deep_json_header(fn: pathlib.Path, depth: int = 100_000) -> pathlib.Path:
  return safetensors_file(fn, b'{"a":' + b"[" * depth + b"]" * depth + b"}")

def bool_bytes(fn: pathlib.Path, raw: bytes = b"\x00\x01\x02\xff") -> pathlib.Path:
  return safetensors_file(fn, {"b": {"dtype": "BOOL", "shape": [len(raw)], "data_offsets": [0, len(raw)]}}, raw)

def huge_header_claim(fn: pathlib.Path, claim: int = 200_000_000) -> pathlib.Path:
  """A safetensors file whose first 8 bytes claim a header of `claim` bytes, then that many bytes of spaces."""
  with open(fn, "wb") as f:
    f.write(struct.pack("<Q", claim))
    f.seek(8 + claim - 2)
    f.write(b"{}")
  return fn

# ---- GGUF ----

def _gstr(s: str) -> bytes: return struct.pack("<Q", len(s.encode())) + s.encode()

def gguf_file(kvs: bytes = b"", n_kv: int = 0, tensors: list[tuple[str, tuple[int, ...], int, int]] | None = None,
              data: bytes = b"", align: int = 32) -> bytes:
  """A GGUF v3 file: the encoded key-values, tensor infos (name, dims fastest first, ggml type, offset), padding, data."""
  tensors = tensors or []
  head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), n_kv) + kvs
  for name, dims, typ, off in tensors:
    head += _gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    head += struct.pack("<IQ", typ, off)
  return head + b"\0" * (-len(head) % align) + data

def gguf_deep_array(depth: int = 5000) -> bytes:
  """One key whose value is an array of one array of ... `depth` levels, the innermost an empty uint32 array."""
  val = struct.pack("<IQ", 4, 0)
  for _ in range(depth - 1): val = struct.pack("<IQ", 9, 1) + val
  return gguf_file(_gstr("deep") + struct.pack("<I", 9) + val, n_kv=1)

def gguf_overlapping(n: int = 2) -> bytes:
  """Two F32 tensors of 8 elements, both at data offset 0."""
  import numpy as np
  return gguf_file(tensors=[(f"t{i}", (8,), 0, 0) for i in range(n)], data=np.arange(8, dtype=np.float32).tobytes())

def gguf_f32(fn: pathlib.Path, numel: int) -> pathlib.Path:
  """A GGUF file with one F32 tensor of `numel` zeros (written without holding the data)."""
  head = gguf_file(tensors=[("w", (numel,), 0, 0)])
  with open(fn, "wb") as f:
    f.write(head)
    f.truncate(len(head) + 4 * numel)
  return fn

def safetensors_f32(fn: pathlib.Path, numel: int) -> pathlib.Path:
  """A safetensors file with one F32 tensor of `numel` zeros (written without holding the data)."""
  hj = json.dumps({"w": {"dtype": "F32", "shape": [numel], "data_offsets": [0, 4 * numel]}}).encode()
  with open(fn, "wb") as f:
    f.write(struct.pack("<Q", len(hj)) + hj)
    f.truncate(8 + len(hj) + 4 * numel)
  return fn

def torch_zip_f32(fn: pathlib.Path, numel: int) -> pathlib.Path:
  """A zip checkpoint (stored, as torch.save writes) with one float32 storage of `numel` zeros."""
  pkl = pickle_dict({"w": rebuild_v2(storage_pid("0", numel), 0, (numel,), (1,))})
  with zipfile.ZipFile(fn, "w") as z:
    z.writestr("archive/data.pkl", pkl)
    z.writestr("archive/byteorder", "little")
    with z.open(zipfile.ZipInfo("archive/data/0"), "w", force_zip64=True) as f:
      chunk = bytes(1 << 24)
      for i in range(0, 4 * numel, len(chunk)): f.write(chunk[:min(len(chunk), 4 * numel - i)])
  return fn
