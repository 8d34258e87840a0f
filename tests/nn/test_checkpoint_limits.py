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

@pytest.mark.xfail(strict=True, reason="issue 22: x = [x, x] nested 60 deep is walked as a tree of 2**60 leaves")
def test_torch_load_shared_nested_lists_load_in_linear_time(tmp_path):
  fn = H.nested_shared_lists(tmp_path / "nested.pth", depth=60)
  r = run_capped("from tinygrad.nn.state import torch_load\n"
                 "x, depth = torch_load(PATH), 0\n"
                 "while x:\n  assert x[0] is x[1]\n  x, depth = x[0], depth + 1\n"
                 "result = depth", fn, mem_mb=512, seconds=20)
  assert r.status == "ok" and r.result == 60, str(r)

@pytest.mark.xfail(strict=True, reason="issue 22: each view of one storage copies the whole storage (4 MB x 4096)")
def test_torch_load_materializes_a_shared_storage_once(tmp_path):
  numel = 1 << 20
  fn = H.shared_storage_views(tmp_path / "shared.pth", n_views=4096, numel=numel, fill="arange")
  r = run_capped("from tinygrad.nn.state import torch_load\n"
                 "from tinygrad.tensor import _view_base\n"
                 "ts = torch_load(PATH)\n"
                 "result = [len(ts), len({id(_view_base(t.uop)) for t in ts}), ts[4095][-2:].tolist()]",
                 fn, mem_mb=1024, seconds=30)
  assert r.status == "ok", str(r)
  assert r.result == [4096, 1, [numel - 2, numel - 1]], "4096 views of one storage, all on one buffer"
  assert _within(r.peak, 4 * numel), f"peak {r.peak / MB:.0f} MiB for one 4 MiB storage"

@pytest.mark.xfail(strict=True, reason="issue 22: a tensor pickled once and referenced twice loads as two tensors")
def test_torch_load_keeps_a_shared_tensor_shared(tmp_path):
  import torch
  from tinygrad.nn.state import torch_load
  t = torch.arange(6, dtype=torch.float32)
  torch.save({"a": t, "b": t, "both": [t, t]}, tmp_path / "tied.pth")
  got = torch_load(tmp_path / "tied.pth")
  assert got["a"] is got["b"] and got["both"][0] is got["a"] and got["both"][1] is got["a"]
  assert got["a"].tolist() == [0, 1, 2, 3, 4, 5]
