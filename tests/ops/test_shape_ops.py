"""Shape ops against torch, forward and backward: tril/triu, diag/diagonal, roll, repeat_interleave, meshgrid, unfold,
pad modes, one_hot, scatter/scatter_reduce, sort/argsort/topk (with ties, nan, empty and size-1 axes)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tinygrad import Tensor, dtypes
from tests.ops.helpers import check, raises_like_torch, kernels

DTYPES = ["float32", "float16", "int32"]

@pytest.mark.parametrize("dtype", DTYPES)
def test_tril_triu_match_torch(dtype):
  check([(2, 3, 5)], lambda x: x.tril(2), dtype=dtype, low=-9, high=9)
  check([(4, 3)], lambda x: x.triu(-1), dtype=dtype, low=-9, high=9)
  check([(3, 3)], lambda x: x.triu(), dtype=dtype, low=-9, high=9)

@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (3, 0, 2)])
def test_tril_empty_and_size_one(shape):
  check([shape], lambda x: x.tril(-1))

def test_tril_needs_two_dims():
  raises_like_torch(RuntimeError, lambda: torch.zeros(3).tril(), lambda: Tensor.zeros(3).tril())

@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 0, 2), (-2, 2, 0), (3, -1, 1), (9, 0, 1)])
def test_diagonal_matches_torch(offset, d1, d2):
  check([(3, 4, 5)], lambda x: x.diagonal(offset, d1, d2))

@pytest.mark.parametrize("dtype", DTYPES)
def test_diag_matches_torch(dtype):
  for k in (0, 1, -2):
    check([(4,)], lambda x: x.diag(k), dtype=dtype, low=-9, high=9)
    check([(3, 5)], lambda x: x.diag(k), dtype=dtype, low=-9, high=9)
  check([(0,)], lambda x: x.diag())

def test_diagonal_same_dims_is_a_runtime_error():
  raises_like_torch(RuntimeError, lambda: torch.zeros(3, 3).diagonal(0, 1, 1), lambda: Tensor.zeros(3, 3).diagonal(0, 1, 1))

@pytest.mark.parametrize("shifts,dims", [(1, 0), (-7, 1), ((1, 2), (0, 1)), (5, None), (0, 1)])
def test_roll_matches_torch(shifts, dims):
  check([(3, 4)], lambda x: x.roll(shifts, dims))

def test_roll_int_and_empty():
  check([(3, 4)], lambda x: x.roll(2, 1), dtype="int32", low=-9, high=9)
  check([(0, 4)], lambda x: x.roll(2, 0))

@pytest.mark.parametrize("repeats,dim", [(2, 1), (3, None), (0, 0), ([1, 0, 2], 0)])
def test_repeat_interleave_matches_torch(repeats, dim):
  tr = torch.tensor(repeats) if isinstance(repeats, list) else repeats
  check([(3, 2)], lambda x: x.repeat_interleave(tr, dim), lambda x: x.repeat_interleave(repeats, dim))

def test_repeat_interleave_tensor_repeats_matches_torch():
  check([(3, 2)], lambda x: x.repeat_interleave(torch.tensor([2, 0, 1]), 0),
        lambda x: x.repeat_interleave(Tensor([2, 0, 1]), 0))

@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_matches_torch(indexing):
  check([(3,), (4,), (2,)], lambda a, b, c: torch.meshgrid(a, b, c, indexing=indexing),
        lambda a, b, c: a.meshgrid(b, c, indexing=indexing))
  check([(3,), ()], lambda a, b: torch.meshgrid(a, b, indexing=indexing), lambda a, b: a.meshgrid(b, indexing=indexing))

@pytest.mark.parametrize("dim,size,step", [(1, 3, 2), (0, 2, 1), (1, 7, 1), (-1, 1, 3), (0, 0, 2)])
def test_unfold_matches_torch(dim, size, step):
  check([(5, 7)], lambda x: x.unfold(dim, size, step))

def test_unfold_errors_match_torch():
  raises_like_torch(RuntimeError, lambda: torch.zeros(3, 4).unfold(1, 5, 1), lambda: Tensor.zeros(3, 4).unfold(1, 5, 1))

PADS = [("reflect", (2, 3, 5), (2, 1)), ("replicate", (1, 2, 4, 5), (2, 1, 0, 3)), ("circular", (1, 2, 4, 5), (0, 4, 3, 1)),
        ("reflect", (1, 1, 3, 4, 5), (1, 1, 2, 0, 1, 2)), ("reflect", (1, 1, 5, 6), (-1, 2, -3, 4)),
        ("replicate", (1, 1, 5, 6), (-3, 5, 4, -4)), ("circular", (1, 1, 5, 6), (2, -1, 1, -2))]

@pytest.mark.parametrize("mode,shape,pad", PADS)
def test_pad_modes_match_torch(mode, shape, pad):
  check([shape], lambda x: F.pad(x, pad, mode=mode), lambda x: x.pad(pad, mode=mode))

def test_pad_modes_int_and_half():
  check([(1, 2, 5)], lambda x: F.pad(x, (2, 2), mode="reflect"), lambda x: x.pad((2, 2), mode="reflect"), dtype="float16")
  check([(1, 2, 5)], lambda x: F.pad(x, (3, 1), mode="replicate"), lambda x: x.pad((3, 1), mode="replicate"),
        dtype="int32", low=-9, high=9)

def test_pad_reflect_too_large_is_a_runtime_error():
  raises_like_torch(RuntimeError, lambda: F.pad(torch.zeros(1, 2, 3), (3, 0), mode="reflect"),
                    lambda: Tensor.zeros(1, 2, 3).pad((3, 0), mode="reflect"))
  with pytest.raises(ValueError, match="mode"): Tensor.zeros(3).pad((1, 1), mode="wrap")

def test_one_hot_infers_num_classes_as_torch():
  check([(5,)], lambda x: F.one_hot(x.long()), lambda x: x.one_hot(), dtype="int32", low=0, high=4)
  check([(2, 3)], lambda x: F.one_hot(x.long(), 6), lambda x: x.one_hot(6), dtype="int32", low=0, high=4)

def test_one_hot_needs_int_indices():
  with pytest.raises(TypeError, match="one_hot"): Tensor([0.0, 1.0]).one_hot(2)

# ---- scatter ----

IDX = np.array([[0, 1, 2, 0], [1, 2, 0, 0]])

@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_torch(reduce, include_self):
  ti, ty = torch.tensor(IDX), Tensor(IDX.astype(np.int32))
  check([(3, 5), (2, 4)], lambda x, s: x.scatter_reduce(0, ti, s, reduce, include_self=include_self),
        lambda x, s: x.scatter_reduce(0, ty, s, reduce, include_self=include_self))
  if include_self:
    check([(3, 5), (2, 4)], lambda x, s: x.scatter_reduce(0, ti, s, reduce, include_self=include_self),
          lambda x, s: x.scatter_reduce(0, ty, s, reduce, include_self=include_self), dtype="int32", low=-5, high=5)

def test_scatter_reduce_amax_ties_share_the_gradient_as_torch():
  ti, ty = torch.tensor([[0, 0, 1]]), Tensor([[0, 0, 1]])
  check(None, lambda x, s: x.scatter_reduce(1, ti, s, "amax"), lambda x, s: x.scatter_reduce(1, ty, s, "amax"),
        vals=[[[2.0, 1.0, 0.0]], [[2.0, 2.0, 5.0]]])

def test_scatter_matches_torch():
  ti, ty = torch.tensor(IDX), Tensor(IDX.astype(np.int32))
  # repeated targets: the last write wins (as torch's CPU kernel), every write gets the gradient (as torch)
  check([(3, 5), (2, 4)], lambda x, s: x.scatter(1, ti, s), lambda x, s: x.scatter(1, ty, s))
  check([(3, 5)], lambda x: x.scatter(1, ti, 2.5), lambda x: x.scatter(1, ty, 2.5))
  check([(3, 5), (2, 4)], lambda x, s: x.scatter(1, ti, s, reduce="add"), lambda x, s: x.scatter(1, ty, s, reduce="add"),
        grad=False)
  check([(3, 5), (2, 4)], lambda x, s: x.scatter(0, ti, s), lambda x, s: x.scatter(0, ty, s), dtype="float16")
  check([(3, 5), (2, 4)], lambda x, s: x.scatter_add(1, ti, s), lambda x, s: x.scatter_add(1, ty, s))

@pytest.mark.parametrize("device", ["C", "LLVM", "PYTHON"])
def test_scatter_by_a_shared_index_is_segment_sums_as_torch(device, monkeypatch):
  # an index broadcast over the other axes (a graph's messages summed or averaged into its nodes, index_add) scatters
  # as segment sums (the one-hot's limit set to 0): values and both gradients against torch for every reduce that takes
  # it, along the first and the last axis of 2-d and 3-d tensors, targets named many times and targets named by none
  import tinygrad.tensor as tensor_mod
  from tinygrad.helpers import Context
  monkeypatch.setattr(tensor_mod, "SCATTER_SEGMENT_WORK", 0)
  used = []
  seg = tensor_mod.Tensor._segment_sums
  monkeypatch.setattr(Tensor, "_segment_sums", staticmethod(lambda i, v, t: used.append(t) or seg(i, v, t)))
  dev = _sort_device(device)
  rng = np.random.default_rng(12)
  with Context(SPEC=2):
    for shape, d in [((7, 5), 0), ((5, 7), 1), ((6, 3, 4), 0), ((3, 4, 6), 2)]:
      n, m = shape[d], 11
      ishape = tuple(m if k == d else s for k, s in enumerate(shape))
      idx = rng.integers(0, n - 1, m)  # the last target is named by none
      view = tuple(m if k == d else 1 for k in range(len(shape)))
      xs, ss = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(ishape).astype(np.float32)
      up = rng.standard_normal(shape).astype(np.float32)
      for reduce in ("sum", "mean"):
        for inc in (True, False):
          tx, ts = torch.tensor(xs, requires_grad=True), torch.tensor(ss, requires_grad=True)
          to = tx.scatter_reduce(d, torch.tensor(idx).reshape(view).expand(ishape), ts, reduce, include_self=inc)
          to.backward(torch.tensor(up))
          x, s = Tensor(xs, device=dev, requires_grad=True), Tensor(ss, device=dev, requires_grad=True)
          yi = Tensor(idx.astype(np.int32), device=dev).reshape(view).expand(ishape)
          out = x.scatter_reduce(d, yi, s, reduce, include_self=inc)
          out.backward(Tensor(up, device=dev))
          what = f"{shape} dim={d} {reduce} include_self={inc}"
          np.testing.assert_allclose(out.numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=what)
          np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=what)
          np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=what)
    # scatter_add and index-outside-the-targets (torch raises; none is summed here, and its source gets no gradient)
    idx = np.array([0, -1, 3, 9, 3, 2, 0])
    ss = rng.standard_normal((7, 4)).astype(np.float32)
    s = Tensor(ss, device=dev, requires_grad=True)
    yi = Tensor(idx.astype(np.int32), device=dev).unsqueeze(1).expand(7, 4)
    out = Tensor.ones(4, 4, device=dev).scatter_add(0, yi, s)
    out.backward(Tensor.arange(16, device=dev).reshape(4, 4).float())
    want = np.ones((4, 4), np.float32)
    np.add.at(want, idx[(idx >= 0) & (idx < 4)], ss[(idx >= 0) & (idx < 4)])
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-6)
    gw = np.where(((idx >= 0) & (idx < 4))[:, None], np.arange(16).reshape(4, 4)[np.clip(idx, 0, 3)], 0)
    np.testing.assert_array_equal(s.grad.numpy(), gw)
  assert len(used) == 4 * 4 + 1, used

@pytest.mark.parametrize("device", ["C", "LLVM", "PYTHON"])
@pytest.mark.parametrize("segments", [False, True])
def test_index_add_and_accumulating_index_put_match_torch(device, segments, monkeypatch):
  # by the one-hot and by segment sums (the limit set to 0): repeated and negative (index_put) positions, alpha, a
  # middle axis; values and both gradients
  import tinygrad.tensor as tensor_mod
  from tinygrad.helpers import Context
  monkeypatch.setattr(tensor_mod, "SCATTER_SEGMENT_WORK", 0 if segments else 1 << 62)
  used = []
  seg = tensor_mod.Tensor._segment_sums
  monkeypatch.setattr(Tensor, "_segment_sums", staticmethod(lambda i, v, t: used.append(t) or seg(i, v, t)))
  dev = _sort_device(device)
  rng = np.random.default_rng(13)
  xs, up = rng.standard_normal((4, 6, 3)).astype(np.float32), rng.standard_normal((4, 6, 3)).astype(np.float32)
  with Context(SPEC=2):
    for dim, idx, alpha in [(0, [3, 0, 3, 1, 3], 1), (1, [5, 0, 2, 0], -0.5)]:
      ss = rng.standard_normal(tuple(len(idx) if k == dim else s for k, s in enumerate(xs.shape))).astype(np.float32)
      tx, ts = torch.tensor(xs, requires_grad=True), torch.tensor(ss, requires_grad=True)
      to = tx.index_add(dim, torch.tensor(idx), ts, alpha=alpha)
      to.backward(torch.tensor(up))
      x, s = Tensor(xs, device=dev, requires_grad=True), Tensor(ss, device=dev, requires_grad=True)
      out = x.index_add(dim, Tensor(idx, device=dev), s, alpha=alpha)
      out.backward(Tensor(up, device=dev))
      np.testing.assert_allclose(out.numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
      np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-6)
    idx = [2, -1, 2, 0, -4]
    vs = rng.standard_normal((5, 6, 3)).astype(np.float32)
    tx, tv = torch.tensor(xs, requires_grad=True), torch.tensor(vs, requires_grad=True)
    to = tx.index_put((torch.tensor(idx),), tv, accumulate=True)
    to.backward(torch.tensor(up))
    x, v = Tensor(xs, device=dev, requires_grad=True), Tensor(vs, device=dev, requires_grad=True)
    out = x.index_put((Tensor(idx, device=dev),), v, accumulate=True)
    out.backward(Tensor(up, device=dev))
    np.testing.assert_allclose(out.numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-6)
    # narrow index dtypes (an int8 index compared with 300 rows, a uint8 one wrapped) on either path
    for dt, idx in ((dtypes.int8, [5, 100, -1, 5]), (dtypes.uint8, [5, 250, 5, 0])):
      want = np.zeros((300, 2), np.float32)
      np.add.at(want, np.array(idx) % 300, np.arange(8, dtype=np.float32).reshape(4, 2))
      vals = Tensor(np.arange(8, dtype=np.float32).reshape(4, 2), device=dev)
      got = Tensor.zeros(300, 2, device=dev).index_put((Tensor(idx, dtype=dt, device=dev),), vals, accumulate=True)
      np.testing.assert_array_equal(got.numpy(), want)
      if dt is dtypes.uint8:
        np.testing.assert_array_equal(Tensor.zeros(300, 2, device=dev).index_add(
          0, Tensor(idx, dtype=dt, device=dev), vals).numpy(), want)
  assert len(used) == (6 if segments else 0), used
  with pytest.raises(ValueError, match="source"): Tensor.zeros(3, 4).index_add(0, Tensor([0, 1]), Tensor.ones(3, 4))
  with pytest.raises(ValueError, match="index"): Tensor.zeros(3, 4).index_add(0, Tensor([[0]]), Tensor.ones(1, 4))

def test_scatter_errors_match_torch():
  raises_like_torch(RuntimeError, lambda: torch.zeros(3, 4).scatter(0, torch.zeros(3, 5, dtype=torch.long), torch.ones(3, 5)),
                    lambda: Tensor.zeros(3, 4).scatter(0, Tensor.zeros(3, 5, dtype=dtypes.int32), Tensor.ones(3, 5)))
  with pytest.raises(TypeError, match="index"): Tensor.zeros(3).scatter(0, Tensor([0.0]), 1.0)
  with pytest.raises(ValueError, match="reduce"): Tensor.zeros(3).scatter_reduce(0, Tensor([0]), Tensor([1.0]), "max")

# ---- sort, argsort, topk ----

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_torch(dtype, descending):
  # NOTE: few distinct values, so ties are everywhere: their order must be torch's stable one
  dim = 0 if descending else -1
  check([(6, 5)], lambda x: x.sort(stable=True, dim=dim, descending=descending),
        lambda x: x.sort(dim, descending=descending), dtype=dtype, low=-2, high=2)

def test_sort_puts_nan_last_as_torch():
  vals = [[1.0, float("nan"), -2.0, float("inf"), float("nan"), -float("inf"), 0.0]]
  for desc in (False, True):
    check(None, lambda x: x.sort(stable=True, descending=desc), lambda x: x.sort(descending=desc), vals=vals)

@pytest.mark.parametrize("shape", [(0,), (1,), (3, 0), (1, 4), ()])
def test_sort_empty_size_one_and_scalar(shape):
  check([shape], lambda x: x.sort(stable=True), lambda x: x.sort())
  check([shape], lambda x: x.argsort(stable=True), lambda x: x.argsort())

def _sort_device(device: str) -> str:
  import importlib.util
  from tests.llvm_device import llvm_cpu_device, c_cpu_device
  if device == "LLVM" and importlib.util.find_spec("llvmlite") is None: pytest.skip("the LLVM path needs llvmlite")
  return {"C": c_cpu_device, "LLVM": llvm_cpu_device}[device]() if device != "PYTHON" else "PYTHON"

@pytest.mark.parametrize("device", ["C", "LLVM", "PYTHON"])
def test_sort_by_network_matches_torch_stable(device, monkeypatch):
  # every sort here runs the bitonic network over packed keys (the rank count's limit set to 0): ties everywhere (their
  # order torch's stable one), nan, +-inf, -0.0 beside 0.0 (equal: their order is their positions', and each keeps its
  # sign), the ints' extremes; n not a power of two (padded), and a sort along the first axis
  import tinygrad.tensor as tensor_mod
  from tinygrad.helpers import Context
  monkeypatch.setattr(tensor_mod, "SORT_RANK_MAX_WORK", 0)
  dev = _sort_device(device)
  rng = np.random.default_rng(7)
  f = rng.integers(-3, 4, (3, 37)).astype(np.float32)
  f[:, ::6], f[:, 1::5], f[0, 2::9], f[1, 3::7], f[2, 4::8] = 0.0, -0.0, np.nan, np.inf, -np.inf
  i32 = rng.integers(-3, 4, (2, 21)).astype(np.int32)
  i32[:, ::4], i32[:, 1::5] = np.iinfo(np.int32).min, np.iinfo(np.int32).max
  u32 = rng.integers(0, 3, (2, 19)).astype(np.uint32) * np.uint32(0x7FFFFFFF)
  cases = [(f, -1), (f.T.copy(), 0), (f.astype(np.float16), -1), (i32, -1), (u32, -1),
           (rng.integers(-128, 128, (2, 30)).astype(np.int8), -1), (rng.integers(0, 2, (2, 13)).astype(bool), -1)]
  with Context(SPEC=2):
    for a, dim in cases:
      for desc in (False, True):
        x = Tensor(a, device=dev)
        assert x.transpose(dim, -1).contiguous()._sorts_by_network()
        v, p = x.sort(dim, descending=desc)
        tv, tp = torch.sort(torch.tensor(a), dim=dim, descending=desc, stable=True)
        what = f"{a.dtype} {a.shape} dim={dim} descending={desc}"
        np.testing.assert_array_equal(v.numpy(), tv.numpy(), err_msg=what)
        np.testing.assert_array_equal(p.numpy(), tp.numpy(), err_msg=what)
        if a.dtype.kind == "f": np.testing.assert_array_equal(np.signbit(v.numpy()), np.signbit(tv.numpy()), err_msg=what)
        np.testing.assert_array_equal(x.argsort(dim, descending=desc).numpy(), tp.numpy(), err_msg=what)

@pytest.mark.parametrize("device", ["C", "LLVM", "PYTHON"])
def test_searchsorted_and_bucketize_match_torch(device):
  # sorted rows with ties, +-inf and values between, on, below and above them; a 1-d sequence against values of any
  # shape and rows against rows; both sides; ints (the search by powers of two) and floats (torch's midpoints, so a
  # nan in the sequence or among the values lands where torch's probes put it); sizes 1 and not a power of two
  from tinygrad.helpers import Context
  dev = _sort_device(device)
  rng = np.random.default_rng(11)
  f = np.sort(rng.integers(-4, 5, (3, 13)).astype(np.float32), -1)
  f[0, -1], f[1, 0] = np.inf, -np.inf
  fv = rng.integers(-6, 7, (3, 9)).astype(np.float32)
  fv[0, :3] = np.nan, np.inf, -np.inf
  fn = np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32)
  i32 = np.sort(rng.integers(-50, 50, (2, 1, 100)).astype(np.int32), -1)
  cases = [(f, fv), (f[0], fv), (fn, np.array([np.nan, 2.0, -np.inf, np.inf, 5.0, 3.0], np.float32)), (f[:, :1], fv),
           (i32, rng.integers(-60, 60, (2, 1, 37)).astype(np.int32)), (i32[0, 0], rng.integers(-60, 60, (4, 5, 6)))]
  with Context(SPEC=2):
    for seq, vals in cases:
      for right in (False, True):
        got = Tensor(seq, device=dev).searchsorted(Tensor(vals, device=dev), right=right)
        want = torch.searchsorted(torch.tensor(seq), torch.tensor(vals).to(torch.tensor(seq).dtype), right=right)
        assert got.dtype == dtypes.int64 and got.shape == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"{seq.dtype} {seq.shape} right={right}")
    seq, vals = Tensor(f[0], device=dev), Tensor(fv, device=dev)
    np.testing.assert_array_equal(vals.bucketize(seq, right=True).numpy(),
                                  torch.bucketize(torch.tensor(fv), torch.tensor(f[0]), right=True).numpy())
    out = seq.searchsorted(vals, side="right", out_int32=True)
    assert out.dtype == dtypes.int32
    np.testing.assert_array_equal(out.numpy(), torch.searchsorted(torch.tensor(f[0]), torch.tensor(fv), side="right"))
    # an unsorted sequence with the positions that sort it; a Python scalar; an empty sequence
    u = rng.permutation(np.arange(10, dtype=np.float32))
    srt = np.argsort(u).astype(np.int64)
    np.testing.assert_array_equal(
      Tensor(u, device=dev).searchsorted(Tensor(fv[0], device=dev), sorter=Tensor(srt, device=dev)).numpy(),
      torch.searchsorted(torch.tensor(u), torch.tensor(fv[0]), sorter=torch.tensor(srt)).numpy())
    assert Tensor([1, 3, 5], device=dev).searchsorted(4).item() == 2
    np.testing.assert_array_equal(Tensor.zeros(0, device=dev).searchsorted(Tensor([1.0, 2.0], device=dev)).numpy(), [0, 0])

def test_searchsorted_errors():
  from tinygrad.tensor import ShapeMismatchError, ArgumentError
  with pytest.raises(ShapeMismatchError, match="leading axes"): Tensor.zeros(2, 3).searchsorted(Tensor.zeros(3, 1))
  with pytest.raises(ArgumentError, match="contradict"): Tensor.zeros(3).searchsorted(1.0, right=True, side="left")
  with pytest.raises(ArgumentError, match="side"): Tensor.zeros(3).searchsorted(1.0, side="middle")
  with pytest.raises(ShapeMismatchError, match="sorter"): Tensor.zeros(3).searchsorted(1.0, sorter=Tensor([0, 1]))
  with pytest.raises(ShapeMismatchError, match="1-d"): Tensor.zeros(3).bucketize(Tensor.zeros(2, 2))

@pytest.mark.parametrize("device", ["C", "LLVM", "PYTHON"])
def test_sort_by_network_gradient_median_and_kthvalue_match_torch(device, monkeypatch):
  import tinygrad.tensor as tensor_mod
  from tinygrad.helpers import Context
  monkeypatch.setattr(tensor_mod, "SORT_RANK_MAX_WORK", 0)
  dev = _sort_device(device)
  rng = np.random.default_rng(8)
  a, up = rng.standard_normal((3, 45)).astype(np.float32), rng.standard_normal((3, 45)).astype(np.float32)
  with Context(SPEC=2):
    # the values' gradient is the upstream one put back where each value came from
    for desc in (False, True):
      x = Tensor(a, device=dev, requires_grad=True)
      x.sort(1, descending=desc)[0].backward(Tensor(up, device=dev))
      xt = torch.tensor(a, requires_grad=True)
      torch.sort(xt, dim=1, descending=desc, stable=True)[0].backward(torch.tensor(up))
      np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
    # the values realized before the gradient is asked (the values come from int keys, which pass no requires_grad on:
    # the gradient was 0 once they were realized)
    x = Tensor(a, device=dev, requires_grad=True)
    v = x.sort(1)[0]
    v.numpy()
    g, = (v * Tensor(up, device=dev)).sum().gradient(x)
    xt = torch.tensor(a, requires_grad=True)
    tg, = torch.autograd.grad(torch.sort(xt, dim=1, stable=True)[0], xt, torch.tensor(up))
    np.testing.assert_array_equal(g.numpy(), tg.numpy())
    x, xt = Tensor(a, device=dev, requires_grad=True), torch.tensor(a, requires_grad=True)
    v, p = x.median(dim=1)
    tv, tp = xt.median(dim=1)
    v.backward(Tensor(up[:, 0], device=dev)); tv.backward(torch.tensor(up[:, 0]))
    np.testing.assert_array_equal(v.numpy(), tv.detach().numpy())
    np.testing.assert_array_equal(p.numpy(), tp.numpy())
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
    kv, kp = Tensor(a, device=dev).kthvalue(5, 1)
    tkv, tkp = torch.tensor(a).kthvalue(5, 1)
    np.testing.assert_array_equal(kv.numpy(), tkv.numpy())
    np.testing.assert_array_equal(kp.numpy(), tkp.numpy())
    b = a.copy()
    b[0, ::3], b[2, :] = np.nan, np.nan
    nv, npos = Tensor(b, device=dev).nanmedian(dim=1)
    tnv, tnp = torch.tensor(b).nanmedian(dim=1)
    np.testing.assert_array_equal(nv.numpy(), tnv.numpy())
    np.testing.assert_array_equal(npos.numpy()[:2], tnp.numpy()[:2])  # torch's position of an all-nan row is its own

def test_big_sort_runs_the_network_in_log_squared_steps():
  from tinygrad.codegen import get_program
  from tinygrad.device import Device
  x = Tensor.rand(4, 4096).realize()
  assert x._sorts_by_network()
  # 4096: 12 merges, 78 compare-exchange steps (one kernel each), the keys' kernel and the values' and positions'
  # decoding. Ranked, one kernel of 4096 compares an element and a pick of as many (38 ms for (64, 1024) on 2 threads,
  # torch 1.8; by the network 3.0)
  sched = Tensor.schedule(*x.sort(-1))
  assert len(sched) == 78 + 3, len(sched)
  ops = sum(get_program(si.ast, Device[x.device].renderer, []).estimates.ops for si in sched)
  assert ops < 4 * 4096 * 78 * 8, ops

@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
def test_topk_matches_torch(largest, dtype):
  # NOTE: distinct values: torch leaves the order of ties unspecified
  vals = np.random.default_rng(5).permutation(30).reshape(5, 6).astype(np.float32) - 15
  k, dim = (3, 0) if largest else (6, -1)
  check(None, lambda x: x.topk(k, dim, largest=largest), vals=[vals], dtype=dtype)

def test_topk_ties_take_the_earlier_position():
  v, i = Tensor([1.0, 3.0, 3.0, 2.0, 3.0]).topk(2)
  assert v.tolist() == [3.0, 3.0] and i.tolist() == [1, 2]
  v, i = Tensor([1.0, 3.0, 1.0, 2.0]).topk(2, largest=False)
  assert v.tolist() == [1.0, 1.0] and i.tolist() == [0, 2]

def test_topk_k_out_of_range_is_a_runtime_error():
  raises_like_torch(RuntimeError, lambda: torch.zeros(3).topk(4), lambda: Tensor.zeros(3).topk(4))

@pytest.mark.parametrize("n", [8, 64])
def test_sort_and_topk_kernel_count_does_not_grow_with_n(n):
  x = Tensor.rand(3, n).realize()
  assert kernels(*x.sort(-1)) == 3
  # topk: one rank of the row (n = 8), or a rank of each block of 32 and the candidates' topk (n = 64: one level)
  assert kernels(*x.topk(4)) == (3 if n == 8 else 7)
  assert kernels(x.argsort()) == 2

def test_topk_kernels_grow_with_the_levels_of_blocks_and_its_work_with_n_times_the_block():
  from tinygrad.codegen import get_program
  from tinygrad.device import Device
  x = Tensor.rand(4, 4096).realize()
  # 4 levels of blocks of 32 (4096 -> 1024 -> 256 -> 64 -> 16 candidates), 4 kernels each, and the last rank's 3
  assert kernels(*x.topk(8)) <= 20
  # ranked whole, 4096 compares an element (176 ms for (64, 4096) on 2 threads, torch 0.26); by blocks of 32, a few
  # dozen over every level
  ops = sum(get_program(si.ast, Device[x.device].renderer, []).estimates.ops for si in Tensor.schedule(*x.topk(8)))
  assert ops < 4 * 4096 * 1024, ops

def _stable_topk(a: np.ndarray, k: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
  """Along the last axis: by value (nan above every number), ties to the earlier position."""
  nan = np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
  key = np.where(nan, 0, -a.astype(np.float64) if largest else a.astype(np.float64))
  pos = np.broadcast_to(np.arange(a.shape[-1]), a.shape)
  order = np.lexsort((pos, key, ~nan if largest else nan), axis=-1)[..., :k]
  return np.take_along_axis(a, order, -1), order

@pytest.mark.parametrize("device", ["C", "LLVM", "PYTHON"])
def test_topk_by_blocks_matches_a_stable_reference(device):
  # few distinct values (ties everywhere), nan and +-inf in the float rows; n not a multiple of the blocks (padded)
  import importlib.util
  from tinygrad.helpers import Context
  from tests.llvm_device import llvm_cpu_device, c_cpu_device
  if device == "LLVM" and importlib.util.find_spec("llvmlite") is None: pytest.skip("the LLVM path needs llvmlite")
  dev = {"C": c_cpu_device, "LLVM": llvm_cpu_device}[device]() if device != "PYTHON" else "PYTHON"
  rng = np.random.default_rng(3)
  f = rng.integers(-4, 5, (3, 300)).astype(np.float32)
  f[0, rng.integers(0, 300, 9)], f[1, rng.integers(0, 300, 5)], f[2, rng.integers(0, 300, 7)] = np.nan, np.inf, -np.inf
  i = rng.integers(-4, 5, (2, 150)).astype(np.int32)
  with Context(SPEC=2):
    for a, k in ((f, 1), (f, 3), (f, 20), (i, 3), (i[:, :70], 8)):
      for largest in (True, False):
        v, p = Tensor(a, device=dev).topk(k, largest=largest)
        want_v, want_p = _stable_topk(a, k, largest)
        np.testing.assert_array_equal(v.numpy(), want_v, err_msg=f"{a.dtype} k={k} largest={largest}")
        np.testing.assert_array_equal(p.numpy(), want_p, err_msg=f"{a.dtype} k={k} largest={largest}")

@pytest.mark.parametrize("k", [1, 5])
def test_topk_by_blocks_gradient_matches_torch(k):
  # distinct values (torch's order of ties is its own); 100 of them hold blocks of 32 and of 20
  check([(3, 100)], lambda x: x.topk(k, largest=k == 1), lambda x: x.topk(k, largest=k == 1))

@pytest.mark.parametrize("device", ["C", "LLVM", "PYTHON"])
def test_topk_by_networks_matches_a_stable_reference_and_torch_gradient(device, monkeypatch):
  # every topk here with n of 2 blocks or more runs the bitonic networks (the ranks' limit set to 0): ties everywhere,
  # nan and +-inf, n not a power of two, k not a power of two
  import tinygrad.tensor as tensor_mod
  from tinygrad.helpers import Context
  monkeypatch.setattr(tensor_mod, "SORT_RANK_MAX_WORK", 0)
  ran: list[int] = []
  net = Tensor._network_topk
  monkeypatch.setattr(Tensor, "_network_topk", lambda self, k, largest: ran.append(k) or net(self, k, largest))
  dev = _sort_device(device)
  rng = np.random.default_rng(4)
  f = rng.integers(-4, 5, (3, 150)).astype(np.float32)
  f[0, rng.integers(0, 150, 9)], f[1, rng.integers(0, 150, 5)], f[2, rng.integers(0, 150, 7)] = np.nan, np.inf, -np.inf
  i = rng.integers(-4, 5, (2, 150)).astype(np.int32)
  with Context(SPEC=2):
    for a, k in ((f, 3), (f, 5), (i, 3), (i[:, :70], 8)):
      for largest in (True, False):
        v, p = Tensor(a, device=dev).topk(k, largest=largest)
        want_v, want_p = _stable_topk(a, k, largest)
        what = f"{a.dtype} k={k} largest={largest}"
        np.testing.assert_array_equal(v.numpy(), want_v, err_msg=what)
        np.testing.assert_array_equal(p.numpy(), want_p, err_msg=what)
        assert ran.pop() == k and not ran, what
    # the gradient goes to the picked positions (distinct values: torch's order of ties is its own)
    a = rng.permutation(300).reshape(3, 100).astype(np.float32)
    up = rng.standard_normal((3, 5)).astype(np.float32)
    x, xt = Tensor(a, device=dev, requires_grad=True), torch.tensor(a, requires_grad=True)
    x.topk(5, largest=False)[0].backward(Tensor(up, device=dev))
    xt.topk(5, largest=False)[0].backward(torch.tensor(up))
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
