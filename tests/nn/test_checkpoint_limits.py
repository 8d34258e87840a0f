"""Hostile checkpoints (issue 22): every input here is built byte by byte (tests/nn/hostile_checkpoints.py) to attack a
loader: shared pickle objects that explode when walked as a tree, storages that are copied once per view, archives
that decompress to gigabytes, views that claim more elements than their storage holds, headers that nest or claim
without limit. A load that could hang or blow up runs in a child process under a time and an address-space cap
(tests/nn/capped.py) and reports its peak traced memory, which must stay within 1.2x the bytes of the data plus 64 MB."""
import pytest
from tests.nn import hostile_checkpoints as H
from tests.nn.capped import run_capped

MB = 1 << 20

def _within(peak: int, data: int) -> bool: return peak <= 1.2 * data + 64 * MB

# ---- torch_load: shared pickle objects are walked once ----

def test_torch_load_shared_nested_lists_load_in_linear_time(tmp_path):
  fn = H.nested_shared_lists(tmp_path / "nested.pth", depth=60)
  r = run_capped("from tinygrad.nn.state import torch_load\n"
                 "x, depth = torch_load(PATH), 0\n"
                 "while x:\n  assert x[0] is x[1]\n  x, depth = x[0], depth + 1\n"
                 "result = depth", fn, mem_mb=512, seconds=60)
  assert r.status == "ok" and r.result == 60, str(r)

def test_torch_load_materializes_a_shared_storage_once(tmp_path):
  numel = 1 << 20
  fn = H.shared_storage_views(tmp_path / "shared.pth", n_views=4096, numel=numel, fill="arange")
  r = run_capped("from tinygrad.nn.state import torch_load\n"
                 "from tinygrad.tensor import _view_base\n"
                 "ts = torch_load(PATH)\n"
                 "result = [len(ts), len({id(_view_base(t.uop)) for t in ts}), ts[4095][-2:].tolist()]",
                 fn, mem_mb=1024, seconds=90)
  assert r.status == "ok", str(r)
  assert r.result == [4096, 1, [numel - 2, numel - 1]], "4096 views of one storage, all on one buffer"
  assert _within(r.peak, 4 * numel), f"peak {r.peak / MB:.0f} MiB for one 4 MiB storage"

def test_torch_load_keeps_a_shared_tensor_shared(tmp_path):
  import torch
  from tinygrad.nn.state import torch_load
  t = torch.arange(6, dtype=torch.float32)
  torch.save({"a": t, "b": t, "both": [t, t]}, tmp_path / "tied.pth")
  got = torch_load(tmp_path / "tied.pth")
  assert got["a"] is got["b"] and got["both"][0] is got["a"] and got["both"][1] is got["a"]
  assert got["a"].tolist() == [0, 1, 2, 3, 4, 5]

# ---- size limits: declared sizes checked against the file, data copied once, views kept as views ----

_LOAD = {"torch": "from tinygrad.nn.state import torch_load as load\n",
         "safetensors": "from tinygrad.nn.state import safe_load as load\n",
         "gguf": "from tinygrad.nn.gguf import gguf_load as load\n"}

def test_torch_load_zip_bomb_copies_its_data_once(tmp_path):
  nbytes = 96 * MB
  fn = H.zip_bomb(tmp_path / "bomb.pth", nbytes)
  assert fn.stat().st_size < nbytes // 500
  r = run_capped(_LOAD["torch"] + "w = load(PATH)['w']\nresult = [w.shape[0], w[-3:].tolist()]", fn, mem_mb=1024,
                 seconds=60)
  assert r.status == "ok" and r.result == [nbytes // 4, [0.0, 0.0, 0.0]], str(r)
  assert _within(r.peak, nbytes), f"peak {r.peak / MB:.0f} MiB for {nbytes / MB:.0f} MiB of data"

def test_torch_load_zip_bomb_stops_at_max_bytes(tmp_path):
  fn = H.zip_bomb(tmp_path / "bomb.pth", 96 * MB)
  r = run_capped(_LOAD["torch"] + "load(PATH, max_bytes=32 << 20)", fn, mem_mb=1024, seconds=60)
  assert r.status == "error" and r.error_type == "CheckpointError", str(r)
  assert "max_bytes" in r.message and "bomb.pth" in r.message and "storage '0'" in r.message, r.message
  assert r.peak < 48 * MB, f"peak {r.peak / MB:.0f} MiB before refusing a storage over a 32 MiB limit"

def test_torch_load_stride0_view_is_an_expanded_tensor(tmp_path):
  fn = H.stride0_view(tmp_path / "stride0.pth", numel=10**10)
  assert fn.stat().st_size < 300
  r = run_capped(_LOAD["torch"] + "w = load(PATH)['w']\nresult = [w.shape[0], w[:3].tolist(), w[-1].item()]", fn,
                 mem_mb=512, seconds=60)
  assert r.status == "ok" and r.result == [10**10, [2.5, 2.5, 2.5], 2.5], str(r)
  assert r.peak < 64 * MB

def test_torch_load_legacy_storage_count_is_checked_against_the_file(tmp_path):
  payload = H.pickle_dict({"w": H.rebuild_v2(H.storage_pid("0", 4, legacy=True), 0, (4,), (1,))})
  fn = H.legacy_file(tmp_path / "count.pth", payload, {"0": bytes(16)}, counts={"0": 1 << 40})
  r = run_capped(_LOAD["torch"] + "load(PATH)", fn, mem_mb=512, seconds=90)
  assert r.status == "error" and r.error_type == "CheckpointError", str(r)
  assert "count.pth" in r.message and "storage '0'" in r.message and str(1 << 40) in r.message, r.message
  assert r.peak < 64 * MB

def test_safe_load_of_dev_zero_is_refused():
  r = run_capped(_LOAD["safetensors"] + "load(PATH)", "/dev/zero", mem_mb=512, seconds=90)
  assert r.status == "error" and r.error_type == "CheckpointError" and "/dev/zero" in r.message, str(r)
  assert r.peak < 64 * MB

@pytest.mark.parametrize("container", ["zip", "legacy"])
def test_torch_load_pickle_string_lengths_are_checked_before_allocating(tmp_path, container):
  import pickle, struct
  claim = 2 << 30
  payload = b"\x80\x04" + pickle.BINBYTES8 + struct.pack("<Q", claim) + b"tiny" + pickle.STOP
  fn = (H.torch_zip if container == "zip" else H.legacy_file)(tmp_path / "claim.pth", payload)
  r = run_capped(_LOAD["torch"] + "load(PATH)", fn, mem_mb=4096, seconds=90)
  assert r.status == "error" and r.error_type == "CheckpointError", str(r)
  assert "claim.pth" in r.message and str(claim) in r.message, r.message
  assert r.peak < 64 * MB, f"peak {r.peak / MB:.0f} MiB for a {fn.stat().st_size}-byte file"

_PLAIN = {"torch": H.torch_zip_f32, "safetensors": H.safetensors_f32, "gguf": H.gguf_f32}

@pytest.mark.parametrize("fmt", list(_PLAIN))
def test_plain_file_loads_with_one_copy(tmp_path, fmt):
  numel = 16 * MB
  fn = _PLAIN[fmt](tmp_path / f"plain.{fmt}", numel)
  r = run_capped(_LOAD[fmt] + "r = load(PATH)\nw = (r[1] if isinstance(r, tuple) else r)['w']\n"
                 "result = [w.shape, w[-2:].tolist()]", fn, mem_mb=1024, seconds=60)
  assert r.status == "ok" and r.result == [[numel], [0.0, 0.0]], str(r)
  assert _within(r.peak, 4 * numel), f"peak {r.peak / MB:.0f} MiB for {4 * numel / MB:.0f} MiB of data"

@pytest.mark.parametrize("fmt", list(_PLAIN))
def test_max_bytes_names_itself(tmp_path, fmt):
  from tinygrad.nn.state import CheckpointError, safe_load, torch_load
  from tinygrad.nn.gguf import gguf_load
  fn = _PLAIN[fmt](tmp_path / f"small.{fmt}", 1024)
  load = {"torch": torch_load, "safetensors": safe_load, "gguf": gguf_load}[fmt]
  with pytest.raises(CheckpointError, match=rf"small\.{fmt}: .*over max_bytes=1000"): load(fn, max_bytes=1000)
  assert load(fn, max_bytes=4096) is not None

# ---- format rules: the safetensors header limit, BOOL bytes, GGUF alignment, offsets, dims and nesting ----

def test_safe_load_header_over_100_mb_is_refused_before_reading(tmp_path):
  fn = H.huge_header_claim(tmp_path / "claim.safetensors", 200_000_000)
  r = run_capped(_LOAD["safetensors"] + "load(PATH)", fn, mem_mb=128, seconds=90)
  assert r.status == "error" and r.error_type == "CheckpointError", str(r)
  assert "claim.safetensors" in r.message and "200000000" in r.message and "100000000" in r.message, r.message
  assert r.peak < 16 * MB

def test_safe_load_bool_bytes_other_than_0_1_are_refused(tmp_path):
  from tinygrad.nn.state import CheckpointError, safe_load
  fn = H.bool_bytes(tmp_path / "bool.safetensors", b"\x00\x01\x02\xff")
  with pytest.raises(CheckpointError, match=r"bool\.safetensors: tensor 'b' \(BOOL\) has byte 0x02 at element 2"):
    safe_load(fn)
  assert safe_load(H.bool_bytes(tmp_path / "ok.safetensors", b"\x00\x01\x01\x00"), device="PYTHON")["b"].sum().item() == 2

def test_torch_load_bool_bytes_other_than_0_1_are_refused(tmp_path):
  from tinygrad.nn.state import CheckpointError, torch_load
  pkl = H.pickle_dict({"m": H.rebuild_v2(H.storage_pid("0", 4, "BoolStorage"), 0, (4,), (1,))})
  with pytest.raises(CheckpointError, match=r"bool\.pth: storage '0' \(bool\) has byte 0xff at element 3"):
    torch_load(H.torch_zip(tmp_path / "bool.pth", pkl, {"0": b"\x00\x01\x01\xff"}))
  assert torch_load(H.torch_zip(tmp_path / "ok.pth", pkl, {"0": b"\x00\x01\x01\x00"}))["m"].tolist() == \
    [False, True, True, False]

def test_safe_load_tensors_sharing_bytes_are_refused(tmp_path):
  from tinygrad.nn.state import CheckpointError, safe_load
  # two names over the same 8 bytes would load the data twice: the data loaded is bounded by the file only if disjoint
  fn = H.safetensors_file(tmp_path / "twice.safetensors", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                                           "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}},
                          bytes(8))
  with pytest.raises(CheckpointError, match=r"twice\.safetensors: tensor 'b' \(data bytes \[4, 8\)\) overlaps tensor "
                                            r"'a' \(data bytes \[0, 8\)\)"):
    safe_load(fn)
  fn = H.safetensors_file(tmp_path / "dim.safetensors", {"a": {"dtype": "F32", "shape": [0, 2**64],
                                                               "data_offsets": [0, 0]}})
  with pytest.raises(CheckpointError, match=r"tensor 'a' has shape \[0, 18446744073709551616\]: a dim over 2\*\*63"):
    safe_load(fn)

def test_safe_load_reads_bytes_and_refuses_what_is_not_a_file(tmp_path):
  import numpy as np
  from tinygrad import Tensor
  from tinygrad.nn.state import CheckpointError, safe_load, safe_save
  safe_save({"w": Tensor([1.5, -2.0]), "e": Tensor.ones(0, 3)}, tmp_path / "ok.safetensors")
  got = safe_load((tmp_path / "ok.safetensors").read_bytes())
  np.testing.assert_array_equal(got["w"].numpy(), np.array([1.5, -2.0], np.float32))
  assert got["e"].shape == (0, 3)
  with pytest.raises(CheckpointError, match=r"safe_load: .*missing\.safetensors: cannot be opened"):
    safe_load(tmp_path / "missing.safetensors")
  with pytest.raises(CheckpointError, match=r"safe_load: .*: cannot be opened|not a regular file"): safe_load(tmp_path)

def _gguf_load(raw: bytes):
  from tinygrad.nn.gguf import gguf_load
  return gguf_load(raw)

@pytest.mark.parametrize("second_offset", [0, 32])
def test_gguf_overlapping_tensor_data_is_refused(second_offset):
  import numpy as np
  from tinygrad.nn.state import CheckpointError
  raw = H.gguf_file(tensors=[("a", (16,), 0, 0), ("b", (8,), 0, second_offset)], data=np.zeros(24, np.float32).tobytes())
  with pytest.raises(CheckpointError, match=rf"tensor 'b' \(bytes \[{second_offset}, {second_offset + 32}\) of the data "
                                            r"section\) overlaps tensor 'a' \(bytes \[0, 64\)\)"):
    _gguf_load(raw)

def test_gguf_deeply_nested_array_is_a_checkpoint_error():
  from tinygrad.nn.state import CheckpointError
  with pytest.raises(CheckpointError, match=r"key 'deep' nests arrays deeper than 16"): _gguf_load(H.gguf_deep_array(5000))
  assert _gguf_load(H.gguf_deep_array(16))[0]["deep"] == [[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]

def test_gguf_alignment_past_the_end_is_named():
  import struct
  import numpy as np
  from tinygrad.nn.state import CheckpointError
  kv = H._gstr("general.alignment") + struct.pack("<II", 4, 2**31)
  raw = H.gguf_file(kv, 1, [("w", (2,), 0, 0)], np.ones(2, np.float32).tobytes())
  with pytest.raises(CheckpointError, match=r"general\.alignment 2147483648 puts the data section at offset 2147483648, "
                                            r"past the end of the \d+-byte file"):
    _gguf_load(raw)
  kv64 = H._gstr("general.alignment") + struct.pack("<IQ", 10, 32)
  with pytest.raises(CheckpointError, match=r"general\.alignment is a UINT64; GGUF stores it as a UINT32"):
    _gguf_load(H.gguf_file(kv64, 1, [("w", (2,), 0, 0)], np.ones(2, np.float32).tobytes()))

@pytest.mark.parametrize("dims,match", [((0, 2**64 - 1), r"tensor 'w' has dims \[0, 18446744073709551615\]: a dim "
                                                           r"over 2\*\*63 - 1"),
                                        ((1,) * 5, r"tensor 'w' has 5 dims; ggml allows at most 4")])
def test_gguf_dims_are_bounded(dims, match):
  from tinygrad.nn.state import CheckpointError
  with pytest.raises(CheckpointError, match=match): _gguf_load(H.gguf_file(tensors=[("w", dims, 0, 0)], data=bytes(4)))

# ---- every failure is a CheckpointError naming the file, the tensor or key, and the rule ----

def test_torch_load_deep_pickle_is_a_checkpoint_error(tmp_path):
  from tinygrad.nn.state import CheckpointError, torch_load
  with pytest.raises(CheckpointError, match=r"deep\.pth: checkpoint(\[0\]){10,}.* nests deeper than 64 levels"):
    torch_load(H.deep_pickle(tmp_path / "deep.pth", 100_000))
  assert torch_load(H.deep_pickle(tmp_path / "ok.pth", 60)) is not None

def test_safe_load_deep_json_header_is_a_checkpoint_error(tmp_path):
  from tinygrad.nn.state import CheckpointError, safe_load
  with pytest.raises(CheckpointError, match=r"deep\.safetensors: the header is not JSON .*nest"):
    safe_load(H.deep_json_header(tmp_path / "deep.safetensors", 100_000))

_BAD_ENTRIES = [
  ({"dtype": "F32", "shape": [1], "data_offsets": 4}, r"tensor 'a': data_offsets must be \[begin, end\], got 4"),
  ({"dtype": "F32", "shape": None, "data_offsets": [0, 4]}, r"tensor 'a': shape must be a list of ints >= 0, got None"),
  ({"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}, r"tensor 'a': shape must be a list of ints >= 0, got "
                                                                r"\[True\]"),
  ({"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}, r"tensor 'a': shape must be a list of ints >= 0"),
  ({"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}, r"tensor 'a' has unsupported dtype \['F32'\]"),
  ({"dtype": "F32", "shape": [1], "data_offsets": [0, 2, 4]}, r"tensor 'a': data_offsets must be \[begin, end\]"),
  ({"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}, r"tensor 'a': data_offsets must be \[begin, end\]"),
]

@pytest.mark.parametrize("entry,match", _BAD_ENTRIES, ids=[m[:40] for _, m in _BAD_ENTRIES])
def test_safe_load_malformed_entry_is_a_checkpoint_error(tmp_path, entry, match):
  from tinygrad.nn.state import CheckpointError, safe_load
  fn = H.safetensors_file(tmp_path / "bad.safetensors", {"a": entry}, bytes(4))
  with pytest.raises(CheckpointError, match=r"safe_load: .*bad\.safetensors: " + match): safe_load(fn)

def test_safe_load_metadata_of_the_wrong_type_is_a_checkpoint_error(tmp_path):
  from tinygrad.nn.state import CheckpointError, safe_load, safe_load_metadata
  fn = H.safetensors_file(tmp_path / "meta.safetensors", {"__metadata__": [1, 2]})
  with pytest.raises(CheckpointError, match=r"meta\.safetensors: __metadata__ must map str to str, got \[1, 2\]"):
    safe_load_metadata(fn)
  with pytest.raises(CheckpointError, match=r"meta\.safetensors: __metadata__ must map str to str"): safe_load(fn)

def test_torch_load_truncated_zip_says_so(tmp_path):
  import torch
  from tinygrad.nn.state import CheckpointError, torch_load
  torch.save({"w": torch.ones(1000)}, tmp_path / "full.pth")
  with pytest.raises(CheckpointError, match=r"cut\.pth: a zip archive .*no end of central directory.*truncated") as e:
    torch_load(H.truncated_zip(tmp_path / "cut.pth", tmp_path / "full.pth"))
  assert "persistent" not in str(e.value)

def test_torch_load_storage_view_past_the_end_names_the_view(tmp_path):
  from tinygrad.nn.state import CheckpointError, torch_load
  with pytest.raises(CheckpointError, match=r"view\.pth: storage view '0v' \(elements \[100, 104\)\) does not fit "
                                            r"storage '0' of 4 elements") as e:
    torch_load(H.storage_view_past_end(tmp_path / "view.pth"))
  # NOTE: after the file's name: pytest's temporary directory can itself be named "pytest-96"
  assert "-96" not in str(e.value).split("view.pth:", 1)[1]

class _Model:
  def __init__(self):
    from tinygrad import Tensor
    self.a = Tensor.zeros(2, 3).contiguous().realize()
    self.layers = [Tensor.zeros(4).contiguous().realize()]

def test_load_state_dict_errors_are_checkpoint_errors_naming_the_key():
  from tinygrad import Tensor
  from tinygrad.nn.state import CheckpointError, load_state_dict
  m = _Model()
  with pytest.raises(CheckpointError, match=r"missing keys \['layers\.0'\], unexpected keys \['b'\]"):
    load_state_dict(m, {"a": Tensor.ones(2, 3), "b": Tensor.ones(1)})
  with pytest.raises(CheckpointError, match=r"^load_state_dict: key 'layers\.0' is a list in the state dict, not a "
                                            r"Tensor$"):
    load_state_dict(m, {"a": Tensor.ones(2, 3), "layers.0": [1.0] * 4})
  with pytest.raises(CheckpointError, match=r"^load_state_dict: key 'layers\.0': the model expects shape \(4,\), the "
                                            r"state dict has \(5,\)$"):
    load_state_dict(m, {"a": Tensor.ones(2, 3), "layers.0": Tensor.ones(5)})
  with pytest.raises(CheckpointError, match=r"the state dict is a list, not a dict"): load_state_dict(m, [])
  # torch raises RuntimeError for a state dict that does not fit; ours are that too
  with pytest.raises(RuntimeError, match=r"key 'layers\.0': the model expects shape \(4,\)"):
    load_state_dict(m, {"a": Tensor.ones(2, 3), "layers.0": Tensor.ones(5)})
  with pytest.raises(RuntimeError, match="missing keys"): load_state_dict(m, {"a": Tensor.ones(2, 3)})

def test_load_state_dict_checks_every_key_before_writing_any():
  from tinygrad import Tensor
  from tinygrad.nn.state import CheckpointError, load_state_dict
  m = _Model()
  with pytest.raises(CheckpointError, match=r"key 'layers\.0': the model expects shape \(4,\), the state dict has \(3,\)"):
    load_state_dict(m, {"a": Tensor.ones(2, 3), "layers.0": Tensor.ones(3)})
  assert m.a.tolist() == [[0.0] * 3] * 2, "nothing is written when one key does not fit"

# ---- shapes whose element count or byte size overflows int64 are refused where they are made ----

@pytest.mark.parametrize("make,shape", [
  (lambda T: T.ones(2**64), (2**64,)),
  (lambda T: T.ones(2**63, dtype="int8"), (2**63,)),
  (lambda T: T.empty(2**61, dtype="float64"), (2**61,)),
  (lambda T: T.zeros(2**32, 2**32), (2**32, 2**32)),
  (lambda T: T.ones(2**32, 1).expand(2**32, 2**32), (2**32, 2**32)),
  (lambda T: T.ones(1).expand(2**63), (2**63,)),
  (lambda T: T.ones(2**62, dtype="int8").pad(((0, 2**62),)), (2**63,)),
  (lambda T: T.full((2**31, 2**31, 2), 1.0), (2**31, 2**31, 2)),
], ids=["ones_2^64", "ones_int8_2^63", "empty_float64_2^61", "zeros_2^32x2^32", "expand_2^32x2^32", "expand_2^63",
        "pad_2^63", "full_2^63"])
def test_shape_overflowing_int64_is_refused_at_construction(make, shape):
  import re
  from tinygrad import Tensor
  from tinygrad.tensor import ShapeMismatchError
  with pytest.raises(ShapeMismatchError, match=re.escape(f"shape {shape} ") + r".*2\*\*63 - 1"): make(Tensor)

def test_shape_up_to_int64_is_kept():
  from tinygrad import Tensor, dtypes
  assert Tensor.ones(2**62, dtype=dtypes.int8).numel() == 2**62
  assert Tensor.ones(1).expand(2**60).shape == (2**60,)

def test_sum_of_2_pow_63_ones_is_refused_not_run():
  r = run_capped("from tinygrad import Tensor\nTensor.ones(2**63).sum().item()", "", mem_mb=1024, seconds=90)
  assert r.status == "error" and r.error_type == "ShapeMismatchError" and "2**63 - 1" in r.message, str(r)

@pytest.mark.parametrize("target,state", [
  (("torch", "FloatStorage"), "dict"), (("torch._utils", "_rebuild_tensor_v2"), "slots")], ids=["storage", "function"])
def test_torch_load_pickle_cannot_change_the_allow_list(tmp_path, target, state):
  import pickle
  import torch
  from tinygrad import dtypes
  from tinygrad.nn.state import CheckpointError, torch_load
  # BUILD on an allow-listed global: {"dtype": torch.int8} into its __dict__, or (None, {"__defaults__": ...}) by setattr
  attrs = pickle.EMPTY_DICT + H._str("dtype") + H._global("torch", "int8") + pickle.SETITEM
  if state == "slots":
    attrs = H._tuple(pickle.NONE, pickle.EMPTY_DICT + H._str("__defaults__") + H._tuple(pickle.NEWTRUE) + pickle.SETITEM)
  pkl = H.PROTO + H._global(*target) + attrs + pickle.BUILD + pickle.POP + pickle.EMPTY_DICT + pickle.STOP
  with pytest.raises(CheckpointError, match=rf"poison\.pth: .*{target[1]}"):
    torch_load(H.torch_zip(tmp_path / "poison.pth", pkl))
  torch.save({"w": torch.ones(2)}, tmp_path / "after.pth")
  w = torch_load(tmp_path / "after.pth")["w"]
  assert w.dtype is dtypes.float32 and w.tolist() == [1.0, 1.0]

# ---- found by the atheris targets (fuzz/targets/load_*_target.py) ----

def test_torch_load_multi_disk_zip_is_a_checkpoint_error(tmp_path):
  import torch
  from tinygrad.nn.state import CheckpointError, torch_load
  torch.save({"w": torch.ones(3)}, tmp_path / "ok.pth")
  with pytest.raises(CheckpointError, match=r"disks\.pth: a zip archive whose directory cannot be read .*multiple disks"):
    torch_load(H.multi_disk_zip(tmp_path / "disks.pth", tmp_path / "ok.pth"))

def test_torch_load_overlapping_zip_entries_are_refused(tmp_path):
  fn = H.overlapping_zip(tmp_path / "overlap.pth", 64 * MB)
  assert fn.stat().st_size < 100_000
  r = run_capped(_LOAD["torch"] + "load(PATH)", fn, mem_mb=1024, seconds=60)
  assert r.status == "error" and r.error_type == "CheckpointError", str(r)
  assert "overlap.pth" in r.message and "archive/data/1" in r.message and "overlaps" in r.message, r.message
  assert r.peak < 32 * MB, f"peak {r.peak / MB:.0f} MiB before refusing"

@pytest.mark.parametrize("fmt", list(_LOAD))
def test_named_pipe_is_refused_without_blocking(tmp_path, fmt):
  import os
  os.mkfifo(fifo := tmp_path / "pipe")
  r = run_capped(_LOAD[fmt] + "load(PATH)", fifo, mem_mb=512, seconds=60)
  assert r.status == "error" and r.error_type == "CheckpointError" and "not a regular file" in r.message, str(r)

@pytest.mark.parametrize("container", ["zip", "legacy"])
def test_torch_load_pickle_memo_index_far_ahead_is_refused(tmp_path, container):
  import pickle, struct
  payload = H.PROTO + pickle.NONE + pickle.LONG_BINPUT + struct.pack("<I", 1 << 27) + pickle.STOP
  fn = (H.torch_zip if container == "zip" else H.legacy_file)(tmp_path / "memo.pth", payload)
  r = run_capped(_LOAD["torch"] + "load(PATH)", fn, mem_mb=4096, seconds=90)
  assert r.status == "error" and r.error_type == "CheckpointError", str(r)
  assert "memo.pth" in r.message and str(1 << 27) in r.message and "memo" in r.message, r.message
  assert r.peak < 64 * MB, f"peak {r.peak / MB:.0f} MiB for a {fn.stat().st_size}-byte file"
