"""GGUF checkpoints: files written by ggml's own Python package (GGUFWriter) with every ggml type we load, compared with
its reference dequantizer (gguf.quants.dequantize) on the same bytes; metadata of every value type; the shape
convention; one kernel per dequantized tensor; and malformed files, built by hand here, each refused with a
CheckpointError that names what was wrong."""
import pathlib, struct
import numpy as np
import pytest
from tinygrad import Tensor, GlobalCounters, dtypes, nn
from tinygrad.nn.state import load_state_dict, CheckpointError
from tinygrad.nn.gguf import gguf_load, ggml_data_to_tensor, ggml_type_name, GGML_TYPES

# ---- a minimal GGUF writer of our own, for the malformed files (fields as the format lays them out) ----

def _str(s: str | bytes) -> bytes:
  b = s.encode() if isinstance(s, str) else s
  return struct.pack("<Q", len(b)) + b

def _kv(key: str, vtype: int, payload: bytes) -> bytes: return _str(key) + struct.pack("<I", vtype) + payload

def _gguf(kvs: tuple[bytes, ...] | list[bytes] = (), tensors: tuple | list = (), data: bytes = b"",
          version: int = 3, magic: bytes = b"GGUF", align: int = 32, n_tensors: int | None = None,
          n_kv: int | None = None) -> bytes:
  """A GGUF file: header, the given encoded key-values, tensor infos (name, dims fastest first, ggml type, offset),
  padding to `align`, then data."""
  head = magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                             len(kvs) if n_kv is None else n_kv)
  head += b"".join(kvs)
  for name, dims, typ, off in tensors:
    head += _str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    head += struct.pack("<IQ", typ, off)
  return head + b"\0" * (-len(head) % align) + data

def _f32_file(dims=(4, 2), off=0, typ=0, nbytes=None) -> bytes:
  return _gguf(tensors=[("w", dims, typ, off)], data=np.arange(8, dtype=np.float32).tobytes()[:nbytes])

# ---- every type against ggml's reference dequantizer ----

_rng = np.random.default_rng(1234)
_NP_PLAIN = {0: np.float32, 1: np.float16, 28: np.float64, 24: np.int8, 25: np.int16, 26: np.int32, 27: np.int64,
             30: np.uint16}
# byte ranges of each block quantization's float16 fields (scales and mins), filled with finite values
_F16_FIELDS = {2: [0], 3: [0, 2], 6: [0], 7: [0, 2], 8: [0], 10: [80, 82], 11: [108], 12: [0, 2], 13: [0, 2],
               14: [208], 20: [0], 23: [0], 34: [52], 35: [64]}
_SHAPES = [lambda b: (2 * b,), lambda b: (3, 2 * b), lambda b: (2, 3, b), lambda b: (5, b)]

def _random_blocks(t: int, nblocks: int) -> np.ndarray:
  """Random bytes for nblocks blocks of type t: every quant bit pattern; scales finite (the reference computes in
  float32 too, so an inf scale would only compare nan with nan)."""
  _, block, bb = GGML_TYPES[t]
  raw = _rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
  for o in _F16_FIELDS.get(t, []):
    raw[:, o:o + 2] = (_rng.standard_normal(nblocks) * 0.05).astype(np.float16).view(np.uint8).reshape(nblocks, 2)
  if t == 39:  # MXFP4: shared exponents across the range, the subnormal scales 0 and 1 included
    raw[:, 0] = np.resize(np.array([0, 1, 2, 100, 127, 128, 140, 160], np.uint8), nblocks)
  return raw

def _write_all_types(fn: pathlib.Path) -> dict[str, tuple[int, np.ndarray]]:
  """A file with one tensor per supported type (shapes 1-d, 2-d non-square and 3-d in turn); returns, by name, the
  type and the reference dequantization (numpy row-major shape)."""
  gguf = pytest.importorskip("gguf")
  w, refs = gguf.GGUFWriter(str(fn), "llama"), {}
  for i, (t, (name, block, bb)) in enumerate(GGML_TYPES.items()):
    shape = _SHAPES[i % len(_SHAPES)](block)
    n = int(np.prod(shape))
    if block == 1:
      # every bit pattern (nan payloads, infs, subnormals) for the float types
      arr = _rng.integers(0, 256, size=n * bb, dtype=np.uint8).view(_NP_PLAIN[t]).reshape(shape)
      if t == 30:  # BF16 has no numpy dtype: raw bytes, finite values so float32 nan payloads cannot differ
        arr = (_rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        w.add_tensor(name, arr.view(np.uint8).reshape(*shape[:-1], -1), raw_dtype=gguf.GGMLQuantizationType(t))
        refs[name] = (t, gguf.quants.dequantize(arr.view(np.uint8), gguf.GGMLQuantizationType.BF16).reshape(shape))
      else:
        w.add_tensor(name, arr)
        refs[name] = (t, arr)
      continue
    raw = _random_blocks(t, n // block).reshape(*shape[:-1], -1)
    w.add_tensor(name, raw, raw_dtype=gguf.GGMLQuantizationType(t))
    refs[name] = (t, gguf.quants.dequantize(raw, gguf.GGMLQuantizationType(t)))
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return refs

@pytest.fixture(scope="module")
def all_types(tmp_path_factory):
  fn = tmp_path_factory.mktemp("gguf") / "all.gguf"
  refs = _write_all_types(fn)
  return fn, refs, gguf_load(fn)

_PLAIN_DTYPES = {0: dtypes.float32, 1: dtypes.float16, 28: dtypes.float64, 24: dtypes.int8, 25: dtypes.int16,
                 26: dtypes.int32, 27: dtypes.int64, 30: dtypes.bfloat16}

@pytest.mark.parametrize("name", [v[0] for v in GGML_TYPES.values()])
def test_type_matches_reference_in_one_kernel(all_types, name):
  _, refs, (kv, ts) = all_types
  assert list(ts) == list(refs) and kv["general.architecture"] == "llama"
  t, ref = refs[name]
  assert ts[name].shape == ref.shape
  GlobalCounters.reset()
  got = ts[name].numpy()
  assert GlobalCounters.kernel_count == 1, f"{GlobalCounters.kernel_count} kernels to dequantize {name}"
  if t == 30: np.testing.assert_array_equal(got, ref)  # bfloat16 reads back as float32
  elif t in _PLAIN_DTYPES: assert got.tobytes() == ref.tobytes(), "not bit-exact"
  else:
    assert np.isfinite(ref).all()
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())
  assert ts[name].dtype is _PLAIN_DTYPES.get(t, dtypes.float32)

def test_tensor_and_bytes_sources_match_path(all_types):
  fn = all_types[0]
  by_path = gguf_load(str(fn))[1]
  from_tensor = gguf_load(Tensor(np.fromfile(fn, dtype=np.uint8)))[1]
  from_bytes = gguf_load(fn.read_bytes())[1]
  for name in ("Q4_K", "Q6_K", "F16"):
    want = by_path[name].numpy()
    assert from_tensor[name].numpy().tobytes() == want.tobytes() == from_bytes[name].numpy().tobytes()

def test_tensor_source_reads_header_in_chunks():
  # a header larger than the first 1 MiB read from a tensor source: the reader fetches more as it goes
  big = ["tok%06d" % i for i in range(80_000)]
  kvs = [_kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, len(big)) + b"".join(_str(s) for s in big))]
  raw = _gguf(kvs, [("w", (4,), 0, 0)], np.arange(4, dtype=np.float32).tobytes())
  assert len(raw) > 1 << 20
  kv, ts = gguf_load(Tensor(np.frombuffer(raw, np.uint8)))
  assert kv["tokenizer.ggml.tokens"] == big and ts["w"].tolist() == [0, 1, 2, 3]

def test_tensor_source_copies_only_the_header_to_the_host():
  raw = _gguf(tensors=[("w", (1 << 20,), 0, 0)], data=np.ones(1 << 20, np.float32).tobytes())  # 4 MiB of data
  src = Tensor(np.frombuffer(raw, np.uint8)).realize()
  GlobalCounters.reset()
  ts = gguf_load(src)[1]
  # NOTE: the first 1 MiB chunk is read and written once (GlobalCounters counts every thread's loads and stores)
  assert GlobalCounters.global_mem <= 2 << 20, f"{GlobalCounters.global_mem} bytes moved to read the header"
  assert ts["w"].sum().item() == 1 << 20

def test_shape_is_dims_reversed_row_major():
  dims = (4, 3, 2)  # fastest first
  ts = gguf_load(_gguf(tensors=[("w", dims, 0, 0)], data=np.arange(24, dtype=np.float32).tobytes()))[1]
  assert ts["w"].shape == (2, 3, 4)
  np.testing.assert_array_equal(ts["w"].numpy(), np.arange(24, dtype=np.float32).reshape(2, 3, 4))

def test_metadata_of_every_value_type_round_trips(tmp_path):
  gguf = pytest.importorskip("gguf")
  V = gguf.GGUFValueType
  want = {"u8": 255, "i8": -128, "u16": 65535, "i16": -32768, "u32": 2**32 - 1, "i32": -2**31, "f32": 0.15625,
          "b": True, "s": "héllo ✓", "u64": 2**64 - 1, "i64": -2**63, "f64": 0.1, "arr_i": [1, -2, 3],
          "arr_s": ["a", "bc", ""], "arr_nested": [[1, 2], [3]], "arr_u8": [1, 2, 250], "arr_f": [0.5, -1.5],
          "arr_b": [True, False], "general.alignment": 64}
  types = {"u8": V.UINT8, "i8": V.INT8, "u16": V.UINT16, "i16": V.INT16, "u32": V.UINT32, "i32": V.INT32,
           "f32": V.FLOAT32, "b": V.BOOL, "s": V.STRING, "u64": V.UINT64, "i64": V.INT64, "f64": V.FLOAT64}
  w = gguf.GGUFWriter(str(tmp_path / "kv.gguf"), "llama")
  for k, v in want.items():
    if k in types: w.add_key_value(k, v, types[k])
    elif k == "arr_u8": w.add_key_value(k, v, V.ARRAY, sub_type=V.UINT8)
    elif k == "general.alignment": w.add_custom_alignment(v)
    else: w.add_array(k, v)
  w.add_tensor("w", np.arange(6, dtype=np.float32).reshape(2, 3))
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  kv, ts = gguf_load(tmp_path / "kv.gguf")
  assert kv == {"general.architecture": "llama", **want}
  assert [type(kv[k]) for k in ("u64", "f32", "b", "s")] == [int, float, bool, str]
  assert ts["w"].tolist() == [[0, 1, 2], [3, 4, 5]]

def test_empty_array_and_version_2_load():
  kvs = [_kv("empty", 9, struct.pack("<IQ", 5, 0)), _kv("n", 4, struct.pack("<I", 7))]
  kv, ts = gguf_load(_gguf(kvs, [("w", (2,), 0, 0)], np.ones(2, np.float32).tobytes(), version=2))
  assert kv == {"empty": [], "n": 7} and ts["w"].tolist() == [1, 1]

def test_alignment_places_data_and_offsets():
  kvs = [_kv("general.alignment", 4, struct.pack("<I", 8))]
  data = np.arange(2, dtype=np.float32).tobytes() + np.arange(10, 14, dtype=np.float32).tobytes()
  ts = gguf_load(_gguf(kvs, [("a", (2,), 0, 0), ("b", (4,), 0, 8)], data, align=8))[1]
  assert ts["a"].tolist() == [0, 1] and ts["b"].tolist() == [10, 11, 12, 13]

def test_loaded_weights_drive_a_linear_layer():
  # a (3, 64) Linear weight as Q8_0 (dims [64, 3], two blocks per row) and its bias as F16, through load_state_dict
  rng = np.random.default_rng(7)
  d, q = rng.uniform(0.01, 0.1, size=6).astype(np.float16), rng.integers(-128, 128, size=(6, 32)).astype(np.int8)
  blocks = b"".join(d[i].tobytes() + q[i].tobytes() for i in range(6))
  bias = rng.standard_normal(3).astype(np.float16)
  raw = _gguf(tensors=[("lin.weight", (64, 3), 8, 0), ("lin.bias", (3,), 1, 224)],
              data=blocks + bytes(224 - len(blocks)) + bias.tobytes())
  class M:
    def __init__(self): self.lin = nn.Linear(64, 3)
  m = M()
  load_state_dict(m, gguf_load(raw)[1])
  w = (d.astype(np.float32)[:, None] * q.astype(np.float32)).reshape(3, 64)
  x = rng.standard_normal((2, 64)).astype(np.float32)
  np.testing.assert_allclose(m.lin(Tensor(x)).numpy(), x @ w.T + bias.astype(np.float32), rtol=1e-5, atol=1e-5)

# ---- ggml_data_to_tensor ----

def test_ggml_data_to_tensor_q8_0_values():
  d = np.float16(0.5)
  qs = np.arange(-16, 16, dtype=np.int8)
  raw = np.concatenate([np.frombuffer(d.tobytes(), np.uint8), qs.view(np.uint8)])
  out = ggml_data_to_tensor(Tensor(raw), 32, 8)
  assert out.shape == (32,) and out.dtype is dtypes.float32
  assert out.tolist() == (qs.astype(np.float32) * 0.5).tolist()

@pytest.mark.parametrize("n,typ,nbytes,match", [
  (32, 15, 292, r"ggml type 15 \(Q8_K\) is not supported"),
  (32, 99, 84, r"ggml type 99 \(unknown\) is not supported"),
  (33, 2, 36, "not a whole number of 32-element blocks"),
  (64, 2, 18, "need 36 bytes, got 18")])
def test_ggml_data_to_tensor_rejects_bad_arguments(n, typ, nbytes, match):
  with pytest.raises(ValueError, match=match): ggml_data_to_tensor(Tensor(np.zeros(nbytes, np.uint8)), n, typ)

def test_ggml_type_names():
  assert [ggml_type_name(t) for t in (0, 12, 39, 16, 1000)] == ["F32", "Q4_K", "MXFP4", "IQ2_XXS", "unknown"]

# ---- malformed files ----

_MALFORMED = [
  (b"GGML" + bytes(20), r"not a GGUF file \(starts with b'GGML'"),
  (_gguf(version=1), "version 1 is not supported .*version 1 predates"),
  (_gguf(version=4), "version 4 is not supported"),
  (_gguf(version=3 << 24), "version 50331648 is not supported .*big-endian"),
  (b"GGUF\x03\0", "the file ends inside the version"),
  (_gguf(n_kv=1, align=1), "the file ends inside the key of key-value 0"),
  (_gguf(n_tensors=10**15), "claims 1000000000000000 tensors"),
  (_gguf([_kv("k", 13, b"")]), "key 'k' has value type 13"),
  (_gguf([_kv("k", 9, struct.pack("<IQ", 13, 0))]), "key 'k' is an array of value type 13"),
  (_gguf([_kv("k", 9, struct.pack("<IQ", 8, 10**9))]), "the file ends inside key 'k'"),
  (_gguf([_kv("k", 9, struct.pack("<IQ", 4, 10**9))]), "the file ends inside key 'k'"),
  (_gguf([_kv("k", 8, _str(b"\xff\xfe"))]), "key 'k' is not UTF-8"),
  (_gguf([_kv("k", 4, struct.pack("<I", 1))] * 2), "key 'k' appears twice"),
  (_gguf([_kv("general.alignment", 4, struct.pack("<I", 24))]), "general.alignment is 24, not a positive power of two"),
  (_gguf([_kv("general.alignment", 8, _str("32"))]), "general.alignment is '32'"),
  (_gguf(tensors=[("w", (2,), 0, 0), ("w", (2,), 0, 32)], data=bytes(64)), "tensor 'w' appears twice"),
  (_f32_file(nbytes=31), r"tensor 'w' \(F32, dims \[4, 2\], 32 bytes at data offset 0\) runs past the end"),
  (_f32_file(off=32), "tensor 'w' .* runs past the end .*truncated"),
  (_f32_file(off=4), "tensor 'w' has offset 4, not a multiple of the alignment 32"),
  (_f32_file(dims=(2**40, 2**40)), r"tensor 'w' has dims \[1099511627776, 1099511627776\]: its \d+ bytes overflow "
                                   "int64"),
  (_f32_file(dims=(2**20, 2**20)), "tensor 'w' .* runs past the end"),
  (_f32_file(typ=16), r"tensor 'w' has ggml type 16 \(IQ2_XXS\), which is not supported"),
  (_f32_file(typ=77), r"tensor 'w' has ggml type 77 \(unknown\)"),
  (_f32_file(dims=(16, 2), typ=2), "tensor 'w' of Q4_0 has dims \\[16, 2\\]: the first .* multiple of the 32"),
  (_gguf(tensors=[("w", (), 2, 0)], data=bytes(18)), r"tensor 'w' of Q4_0 has dims \[\]: the first"),
  (_gguf(n_tensors=1, align=1) + _str("w") + struct.pack("<IQQ", 10**6, 2, 2), "tensor 'w' has 1000000 dims; ggml "
                                                                                  "allows at most 4"),
  (_gguf(n_tensors=1, align=1) + _str("w") + struct.pack("<IQQ", 4, 2, 2), "the file ends inside the dims of tensor 'w'"),
]

@pytest.mark.parametrize("raw,match", _MALFORMED, ids=[m for _, m in _MALFORMED])
def test_malformed_file_is_a_clear_checkpoint_error(raw, match):
  with pytest.raises(CheckpointError, match=match): gguf_load(raw)

def test_error_names_the_file(tmp_path):
  fn = tmp_path / "model.gguf"
  fn.write_bytes(_f32_file(nbytes=8))
  with pytest.raises(CheckpointError, match=f"gguf_load: {fn}: tensor 'w'"): gguf_load(fn)
  (tmp_path / "empty.gguf").write_bytes(b"")
  with pytest.raises(CheckpointError, match="empty.gguf: the file ends inside the magic"):
    gguf_load(str(tmp_path / "empty.gguf"))
  with pytest.raises(CheckpointError, match=r"<uint8 tensor of \d+ bytes>: tensor 'w'"):
    gguf_load(Tensor(np.frombuffer(_f32_file(nbytes=8), np.uint8)))

def test_non_uint8_tensor_source_is_a_type_error():
  with pytest.raises(TypeError, match="uint8 tensor, got dtypes.float32"): gguf_load(Tensor.zeros(8))

def test_zero_element_tensor_loads_empty():
  # no data bytes at all, not even the padding before the data section
  raw = _gguf(tensors=[("e", (0, 3), 12, 0), ("w", (2,), 0, 0)], data=np.ones(2, np.float32).tobytes())
  ts = gguf_load(raw)[1]
  assert ts["e"].shape == (3, 0) and ts["e"].dtype is dtypes.float32 and ts["w"].tolist() == [1, 1]
  empty_only = _gguf(tensors=[("e", (0,), 1, 0)], align=1)
  assert gguf_load(empty_only)[1]["e"].numpy().shape == (0,)

def test_device_with_tensor_source_is_refused():
  raw = Tensor(np.frombuffer(_f32_file(), np.uint8))
  with pytest.raises(ValueError, match="a tensor source loads on its own device"): gguf_load(raw, device="CPU")

def test_zero_dim_tensor_is_a_scalar():
  ts = gguf_load(_gguf(tensors=[("s", (), 0, 0)], data=np.float32(2.5).tobytes()))[1]
  assert ts["s"].shape == () and ts["s"].item() == 2.5
