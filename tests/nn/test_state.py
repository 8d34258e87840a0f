"""State dicts (names as torch's, strict loading and its errors), safetensors round trips of every dtype (atomic writes,
checked headers), and torch checkpoints read by our restricted unpickler: the zip and legacy formats, views, strides
and offsets, and hostile pickles refused before anything in them runs."""
import collections, io, os, pickle, struct, zipfile
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes, nn
from tinygrad.nn.state import (get_state_dict, get_parameters, load_state_dict, safe_save, safe_load, safe_load_metadata,
                               torch_load, CheckpointError)
from tests.nn.torch_ref import rand

class Net:
  def __init__(self):
    self.conv = nn.Conv2d(2, 3, 3)
    self.bn = nn.BatchNorm2d(3)
    self.layers = [nn.Linear(3, 4), nn.LayerNorm(4)]
  def __call__(self, x): return self.layers[1](self.layers[0](self.bn(self.conv(x)).mean((2, 3))))

def _torch_net():
  return torch.nn.ModuleDict({"conv": torch.nn.Conv2d(2, 3, 3), "bn": torch.nn.BatchNorm2d(3),
                              "layers": torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))})

# ---- state dicts ----

def test_state_dict_names_and_shapes_are_torchs():
  sd = get_state_dict(Net())
  ref = _torch_net().state_dict()
  assert {k: v.shape for k, v in sd.items()} == {k: tuple(v.shape) for k, v in ref.items()}

def test_get_parameters_lists_a_shared_tensor_once_and_survives_cycles():
  net = Net()
  net.layers[0].weight = net.layers[1].weight = Tensor.ones(4, 3, requires_grad=True)
  net.parent = net  # a cycle
  sd = get_state_dict(net)
  assert sd["layers.0.weight"] is sd["layers.1.weight"]
  ps = get_parameters(net)
  assert len(ps) == len(sd) - 1 and len({id(p) for p in ps}) == len(ps)

def test_load_state_dict_from_torch_matches_torch_forward():
  tnet = _torch_net()
  tnet.eval()
  with torch.no_grad():
    tnet["bn"].running_mean.copy_(torch.tensor([0.1, -0.2, 0.3]))
    tnet["bn"].running_var.copy_(torch.tensor([1.5, 0.5, 2.0]))
  net = Net()
  load_state_dict(net, {k: Tensor(v.numpy()) for k, v in tnet.state_dict().items()})
  assert net.bn.num_batches_tracked.dtype is dtypes.int64
  x = rand(2, 2, 5, 5)
  want = tnet["layers"](tnet["bn"](tnet["conv"](torch.tensor(x))).mean((2, 3))).detach().numpy()
  with Tensor.test():
    np.testing.assert_allclose(net(Tensor(x)).numpy(), want, atol=1e-5)

def test_load_state_dict_writes_the_same_buffers_in_place():
  net, src = Net(), Net()
  w = net.layers[0].weight
  load_state_dict(net, get_state_dict(src))
  assert net.layers[0].weight is w
  np.testing.assert_array_equal(w.numpy(), src.layers[0].weight.numpy())

def test_load_state_dict_strict_errors_name_the_keys_and_shapes():
  net = Net()
  sd = get_state_dict(Net())
  del sd["bn.running_mean"]
  sd["extra.weight"] = Tensor.ones(2)
  with pytest.raises(CheckpointError, match=r"missing keys \['bn.running_mean'\], unexpected keys \['extra.weight'\]"):
    load_state_dict(net, sd)
  with pytest.raises(KeyError): load_state_dict(net, sd)  # still a KeyError, as before it was a CheckpointError
  load_state_dict(net, sd, strict=False)  # loads what both have
  sd = get_state_dict(Net())
  sd["layers.0.weight"] = Tensor.ones(3, 4)
  with pytest.raises(CheckpointError, match=r"key 'layers.0.weight': the model expects shape \(4, 3\), the state dict "
                                            r"has \(3, 4\)"):
    load_state_dict(net, sd, strict=False)

def test_load_state_dict_casts_and_consumes():
  net = nn.Linear(2, 2)
  sd = {"weight": Tensor([[1, 2], [3, 4]], dtype=dtypes.float16), "bias": Tensor([5, 6], dtype=dtypes.int32)}
  load_state_dict(net, sd, consume=True)
  assert sd == {} and net.weight.dtype is dtypes.float32
  np.testing.assert_array_equal(net.bias.numpy(), [5, 6])

# ---- safetensors ----

ALL_DTYPES = [dtypes.float64, dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2,
              dtypes.int64, dtypes.int32, dtypes.int16, dtypes.int8, dtypes.uint64, dtypes.uint32, dtypes.uint16,
              dtypes.uint8, dtypes.bool]

def test_safetensors_round_trip_of_every_dtype(tmp_path):
  vals = np.array([[0, 1, 2], [3, 4, 5]], dtype=np.float32)
  ts = {f"t_{dt.name}": Tensor(vals if dt is not dtypes.bool else vals % 2 == 1, dtype=dt) for dt in ALL_DTYPES}
  ts["view"] = Tensor(rand(4, 5)).T[1:3]  # a non-contiguous view is written as its values
  ts["empty"] = Tensor.zeros(0, 3)
  fn = tmp_path / "all.safetensors"
  safe_save(ts, fn, metadata={"format": "pt"})
  back = safe_load(fn)
  assert list(back) == list(ts) and safe_load_metadata(fn) == {"format": "pt"}
  for k, t in ts.items():
    assert back[k].dtype is t.dtype and back[k].shape == t.shape, k
    np.testing.assert_array_equal(back[k].numpy(), t.numpy(), err_msg=k)

def test_safetensors_bits_match_torchs_reading(tmp_path):
  # NOTE: the file format is the contract: torch reads our bytes back to the same values (bf16 and fp8 bit patterns)
  vals = np.array([1.5, -0.013, 300.0, 2.0 ** -9], dtype=np.float32)
  fn = tmp_path / "x.safetensors"
  safe_save({"bf": Tensor(vals, dtype=dtypes.bfloat16), "f8": Tensor(vals, dtype=dtypes.fp8e4m3),
             "f5": Tensor(vals, dtype=dtypes.fp8e5m2)}, fn)
  raw = fn.read_bytes()
  n = struct.unpack("<Q", raw[:8])[0]
  hdr = __import__("json").loads(raw[8:8 + n])
  assert n % 8 == 0 and hdr["bf"]["dtype"] == "BF16" and hdr["f8"]["dtype"] == "F8_E4M3"
  for key, tdt in [("bf", torch.bfloat16), ("f8", torch.float8_e4m3fn), ("f5", torch.float8_e5m2)]:
    s, e = hdr[key]["data_offsets"]
    got = torch.frombuffer(bytearray(raw[8 + n + s:8 + n + e]), dtype=tdt).float().numpy()
    np.testing.assert_array_equal(got, torch.tensor(vals).to(tdt).float().numpy(), err_msg=key)

def test_safe_save_is_atomic(tmp_path, monkeypatch):
  fn = tmp_path / "m.safetensors"
  safe_save({"a": Tensor([1.0])}, fn)
  with pytest.raises(TypeError, match="'c' has dtype"):
    safe_save({"a": Tensor([2.0]), "c": _NoSafe()}, fn)
  import tinygrad.helpers
  def fail(*a): raise OSError("disk full")
  monkeypatch.setattr(tinygrad.helpers.os, "replace", fail)
  with pytest.raises(OSError, match="disk full"): safe_save({"a": Tensor([3.0])}, fn)
  monkeypatch.undo()
  assert safe_load(fn)["a"].numpy().tolist() == [1.0], "the old file is intact"
  assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"], "no temporary file left behind"

class _NoSafe:
  dtype = dtypes.index

@pytest.mark.parametrize("mutate,match", [
  (lambda h: h.update(a={**h["a"], "dtype": "F4"}), "unsupported dtype 'F4'"),
  (lambda h: h.update(a={**h["a"], "data_offsets": [0, 400]}), "outside the"),
  (lambda h: h.update(a={**h["a"], "shape": [3]}), "has 8 bytes for shape"),
])
def test_safe_load_rejects_bad_headers(tmp_path, mutate, match):
  fn = tmp_path / "bad.safetensors"
  safe_save({"a": Tensor([1.0, 2.0])}, fn)
  raw = fn.read_bytes()
  n = struct.unpack("<Q", raw[:8])[0]
  h = __import__("json").loads(raw[8:8 + n])
  mutate(h)
  hj = __import__("json").dumps(h).encode()
  fn.write_bytes(struct.pack("<Q", len(hj)) + hj + raw[8 + n:])
  with pytest.raises(CheckpointError, match=match): safe_load(fn)
  fn.write_bytes(raw[:20])
  with pytest.raises(CheckpointError, match="runs past the end"): safe_load(fn)

# ---- torch checkpoints ----

TORCH_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int16,
                torch.int8, torch.uint8, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32,
                torch.uint64]

def _sample_checkpoint():
  base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
  sd = collections.OrderedDict()
  for dt in TORCH_DTYPES: sd[str(dt)] = (torch.arange(6).reshape(2, 3) % 5).to(dt)
  sd["base"] = base
  sd["transposed_slice"] = base.t()[2:5, 1:]      # strides and a storage offset, sharing base's storage
  sd["every_other"] = base[1, ::2]
  sd["scalar"] = torch.tensor(3.5)
  sd["param"] = torch.nn.Parameter(torch.ones(2, 2))
  sd["meta"] = {"epoch": 3, "lr": 0.1, "name": "run", "tags": ["a", None, True], "shape": (2, 3), "blob": b"\x00\xff"}
  return sd

def _check_loaded(got, ref):
  for k, v in ref.items():
    if isinstance(v, torch.Tensor):
      assert got[k].shape == tuple(v.shape), k
      np.testing.assert_array_equal(got[k].numpy(), v.detach().float().numpy() if v.dtype in
                                    (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2) else v.detach().numpy(), k)
    else: assert got[k] == v, k

@pytest.mark.parametrize("zipfmt", [True, False], ids=["zip", "legacy"])
def test_torch_load_reads_every_dtype_and_view(tmp_path, zipfmt):
  ref = _sample_checkpoint()
  fn = tmp_path / "ckpt.pth"
  torch.save(ref, fn, _use_new_zipfile_serialization=zipfmt)
  got = torch_load(fn)
  assert type(got) is collections.OrderedDict and list(got) == list(ref)
  assert got["torch.bfloat16"].dtype is dtypes.bfloat16 and got["torch.float8_e4m3fn"].dtype is dtypes.fp8e4m3
  assert got["torch.uint64"].dtype is dtypes.uint64 and got["torch.bool"].dtype is dtypes.bool
  _check_loaded(got, ref)

def test_torch_load_state_dict_into_our_model(tmp_path):
  tnet = _torch_net()
  fn = tmp_path / "net.pth"
  torch.save({"model": tnet.state_dict(), "step": 7}, fn)
  ck = torch_load(fn)
  net = Net()
  load_state_dict(net, ck["model"])
  assert ck["step"] == 7
  np.testing.assert_array_equal(net.conv.weight.numpy(), tnet["conv"].weight.detach().numpy())

class _Evil:
  marker = ""
  def __reduce__(self): return (os.system, (f"touch {_Evil.marker}",))

class _EvilEval:
  def __reduce__(self): return (eval, (f"open({_Evil.marker!r}, 'w')",))

def _pickle_zip(fn, obj_bytes):
  with zipfile.ZipFile(fn, "w") as z:
    z.writestr("archive/data.pkl", obj_bytes)
    z.writestr("archive/version", "3\n")

def test_hostile_pickle_is_refused_and_nothing_runs(tmp_path):
  marker = tmp_path / "pwned"
  _Evil.marker = str(marker)
  payload = pickle.dumps({"weight": _Evil()}, protocol=2)
  zfn = tmp_path / "evil.pth"
  _pickle_zip(zfn, payload)
  with pytest.raises(CheckpointError, match=r"refers to (posix|os)\.system.*refused \(nothing from the file was run\)"):
    torch_load(zfn)
  # the same payload in the legacy format
  lfn = tmp_path / "evil_legacy.pth"
  lfn.write_bytes(pickle.dumps(0x1950a86a20f9469cfc6c, 2) + pickle.dumps(1001, 2) +
                  pickle.dumps({"little_endian": True}, 2) + payload)
  with pytest.raises(CheckpointError, match=r"(posix|os)\.system"): torch_load(lfn)
  # eval, hidden inside the arguments of an allowed torch rebuild function
  evil = (torch._utils._rebuild_tensor_v2, (_EvilEval(), 0, (1,), (1,), False, collections.OrderedDict()))
  class Wrap:
    def __reduce__(self): return evil
  _pickle_zip(zfn, pickle.dumps({"w": Wrap()}, protocol=2))
  with pytest.raises(CheckpointError, match=r"(__builtin__|builtins)\.eval"): torch_load(zfn)
  assert not marker.exists(), "nothing from the file may run"

def test_whole_module_pickle_is_refused_with_its_class_name(tmp_path):
  fn = tmp_path / "module.pth"
  torch.save(torch.nn.Linear(2, 2), fn)
  with pytest.raises(CheckpointError, match=r"torch\.nn\.modules\.linear\.Linear.*Save a state_dict"): torch_load(fn)

def test_plain_objects_outside_the_allowed_kinds_are_named(tmp_path):
  fn = tmp_path / "set.pth"
  torch.save({"a": {1, 2}}, fn)  # protocol 2 spells a set as a call of builtins.set
  with pytest.raises(CheckpointError, match=r"__builtin__\.set"): torch_load(fn)
  torch.save({"a": [0, {1, 2}]}, fn, pickle_protocol=4)  # protocol 4 has a set opcode
  with pytest.raises(CheckpointError, match=r"checkpoint\['a'\]\[1\] is a set, not a tensor"): torch_load(fn)

def _rewrite_zip(fn, edit):
  with zipfile.ZipFile(fn) as z: members = {n: z.read(n) for n in z.namelist()}
  edit(members)
  with zipfile.ZipFile(fn, "w") as z:
    for n, b in members.items(): z.writestr(n, b)

def test_torch_load_rejects_storages_and_views_that_do_not_fit(tmp_path):
  fn = tmp_path / "oob.pth"
  torch.save({"x": torch.ones(5)}, fn)
  def grow_size(m):
    pkl = next(n for n in m if n.endswith("data.pkl"))
    assert m[pkl].count(b"K\x05\x85") == 1  # the size tuple (5,): BININT1 5, TUPLE1
    m[pkl] = m[pkl].replace(b"K\x05\x85", b"K\x09\x85")
  _rewrite_zip(fn, grow_size)
  with pytest.raises(CheckpointError, match=r"shape \(9,\) .* reads past the 5 elements"): torch_load(fn)
  torch.save({"x": torch.ones(5)}, fn)
  def cut_storage(m):
    data = next(n for n in m if "/data/" in n)
    m[data] = m[data][:8]
  _rewrite_zip(fn, cut_storage)
  with pytest.raises(CheckpointError, match="is 8 bytes in the archive but its reference says 5 elements"): torch_load(fn)

def test_torch_load_of_garbage_is_a_clear_error(tmp_path):
  fn = tmp_path / "junk.pth"
  fn.write_bytes(b"not a checkpoint at all")
  with pytest.raises(CheckpointError, match="junk.pth"): torch_load(fn)
  buf = io.BytesIO()
  torch.save({"a": torch.ones(1)}, buf)
  fn.write_bytes(buf.getvalue()[:50])
  with pytest.raises(CheckpointError): torch_load(fn)

def test_torch_load_big_endian_zip(tmp_path):
  # a big-endian writer's archive: byteorder "big" and every storage's elements byte-swapped
  ref = {"f": torch.tensor([1.5, -2.0, 3.25]), "i": torch.tensor([[1, -2], [300, 4]], dtype=torch.int32),
         "h": torch.tensor([0.5, 7.0], dtype=torch.bfloat16)}
  fn = tmp_path / "be.pth"
  torch.save(ref, fn)
  with zipfile.ZipFile(fn) as z: members = {n: z.read(n) for n in z.namelist()}
  prefix = next(n for n in members if n.endswith("data.pkl"))[:-len("data.pkl")]
  for n in [n for n in members if n.startswith(prefix + "data/")]:
    itemsize = {12: 4, 16: 4, 4: 2}[len(members[n])]  # the three storages have different byte counts
    members[n] = np.frombuffer(members[n], dtype=f"<u{itemsize}").byteswap().tobytes()
  members[prefix + "byteorder"] = b"big"
  with zipfile.ZipFile(fn, "w") as z:
    for n, b in members.items(): z.writestr(n, b)
  got = torch_load(fn)
  for k, v in ref.items(): np.testing.assert_array_equal(got[k].numpy(), v.float().numpy() if k == "h" else v.numpy())

def test_torch_load_random_strided_views_match_torch(tmp_path):
  # views of one storage with random sizes, strides (0, overlapping, gapped, any order) and offsets, as torch.save
  # keeps them; each loads as movement ops on the one storage buffer and must read what torch reads
  rng = np.random.default_rng(7)
  base = torch.arange(600, dtype=torch.float32)
  views = {}
  for i in range(40):
    nd = int(rng.integers(0, 4))
    size = [int(rng.integers(1, 6)) for _ in range(nd)]
    stride = [int(rng.choice([0, 1, 2, 3, 5, 7, 12, 30, 41])) for _ in range(nd)]
    span = sum((s - 1) * d for s, d in zip(size, stride))
    views[f"v{i}"] = base.as_strided(size, stride, int(rng.integers(0, 600 - span)))
  views.update(window=base.as_strided((4, 3), (1, 1), 5), bcast_mid=base.as_strided((2, 4, 3), (7, 0, 2), 1),
               gapped_t=base.as_strided((3, 4), (1, 50), 10), scalar=base.as_strided((), (), 599))
  torch.save(views, fn := tmp_path / "views.pth")
  got = torch_load(fn, device="PYTHON")
  from tinygrad.tensor import _view_base
  assert len({id(_view_base(t.uop)) for t in got.values()}) == 1, "every view reads the one storage buffer"
  for k, v in views.items():
    assert got[k].shape == tuple(v.shape), k
    np.testing.assert_array_equal(got[k].numpy(), v.numpy(), err_msg=f"{k}: size {tuple(v.shape)} stride {v.stride()}")

@pytest.mark.parametrize("proto", [1, 2, 4])
def test_torch_load_legacy_format_of_any_pickle_protocol(tmp_path, proto):
  torch.save({"w": torch.arange(3.0)}, fn := tmp_path / "p.pth", _use_new_zipfile_serialization=False,
             pickle_protocol=proto)
  assert torch_load(fn)["w"].tolist() == [0.0, 1.0, 2.0]
