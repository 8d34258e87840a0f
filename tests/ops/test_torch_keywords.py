"""torch's spelling of the Tensor API, against torch 2.13: the dim/keepdim keywords on every method that takes
tinygrad's axis (walked with inspect.signature, so a new method cannot skip it), torch's (values, indices) named tuples
with dim=, median/mode/kthvalue and the other reductions torch users call, clamp(min=, max=), the Python conversions,
unique and no_grad."""
import inspect, math
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tinygrad import Tensor, dtypes
from tinygrad.tensor import ValuesIndices

X = np.random.default_rng(0).standard_normal((3, 5, 4)).astype(np.float32)

def _same(ours, ref, what, atol=1e-5):
  ours = tuple(ours) if isinstance(ours, tuple) else (ours,)
  ref = tuple(ref) if isinstance(ref, tuple) else (ref,)
  assert len(ours) == len(ref), f"{what}: {len(ours)} outputs, torch {len(ref)}"
  for k, (a, b) in enumerate(zip(ours, ref)):
    assert a.shape == tuple(b.shape), f"{what} output {k}: shape {a.shape}, torch {tuple(b.shape)}"
    if b.dtype is torch.bool: assert a.dtype is dtypes.bool, what
    elif not b.dtype.is_floating_point: assert dtypes.is_int(a.dtype), f"{what} output {k}: {a.dtype} for {b.dtype}"
    np.testing.assert_allclose(a.numpy().astype(np.float64), b.detach().double().numpy(), atol=atol, rtol=1e-5,
                               equal_nan=True, err_msg=f"{what} output {k}")

def _layernorm_ref(t, dim, keepdim=None):
  m = t.mean(dim, keepdim=True)
  return (t - m) / (t.var(dim, keepdim=True, unbiased=False) + 1e-5).sqrt()

def _batchnorm(t, dim):
  c = t.shape[dim]
  mean, invstd, w, b = (Tensor(np.linspace(-1, 1, c, dtype=np.float32) * s + o) for s, o in ((1, 0), (0.5, 1), (2, 0.5), (1, -1)))
  return t.batchnorm(w, b, mean, invstd, dim=dim)

def _batchnorm_ref(t, dim):
  c = t.shape[dim]
  mean, invstd, w, b = (torch.tensor(np.linspace(-1, 1, c, dtype=np.float32) * s + o) for s, o in ((1, 0), (0.5, 1), (2, 0.5), (1, -1)))
  # NOTE: torch's channels are axis 1: the axis is moved there and back
  return F.batch_norm(t.movedim(dim, 1), mean, 1 / invstd ** 2, w, b, eps=0.0).movedim(1, dim)

# every Tensor method with an `axis` parameter: (our call with torch's keywords, torch's call, whether keepdim applies)
DIM_CASES = {
  "sum": (None, None, True), "prod": (None, None, True), "mean": (None, None, True), "logsumexp": (None, None, True),
  "var": (None, None, True), "std": (None, None, True), "any": (None, None, True), "all": (None, None, True),
  "max": (None, None, True), "min": (None, None, True), "argmax": (None, None, True), "argmin": (None, None, True),
  "median": (None, None, True), "nanmedian": (None, None, True), "nansum": (None, None, True),
  "nanmean": (None, None, True), "softmax": (None, None, False), "log_softmax": (None, None, False),
  "cumsum": (None, None, False), "cumprod": (None, None, False), "logcumsumexp": (None, None, False),
  "cummax": (None, None, False), "cummin": (None, None, False),
  "var_mean": (lambda t, **kw: t.var_mean(**kw), lambda t, **kw: torch.var_mean(t, **kw), True),
  "std_mean": (lambda t, **kw: t.std_mean(**kw), lambda t, **kw: torch.std_mean(t, **kw), True),
  "flip": (lambda t, dim: t.flip(dims=(dim,)), lambda t, dim: t.flip(dims=(dim,)), False),
  "layernorm": (lambda t, dim: t.layernorm(dim=dim), _layernorm_ref, False),
  "batchnorm": (_batchnorm, _batchnorm_ref, False),
}

# methods torch's Tensor does not have, so there is no torch call to check `dim` against (multi-device placement)
NOT_IN_TORCH = {"shard", "shard_"}

def _axis_methods():
  return sorted(n for n in dir(Tensor) if not n.startswith("_") and callable(getattr(Tensor, n))
                and "axis" in inspect.signature(getattr(Tensor, n)).parameters and n not in NOT_IN_TORCH)

def test_every_axis_method_is_in_the_table():
  assert _axis_methods() == sorted(DIM_CASES), "a Tensor method takes `axis`: add it to DIM_CASES with torch's call"

@pytest.mark.parametrize("name", sorted(DIM_CASES))
def test_dim_and_keepdim_keywords_match_torch(name):
  ours, ref, has_keepdim = DIM_CASES[name]
  ours = ours or (lambda t, **kw: getattr(t, name)(**kw))
  ref = ref or (lambda t, **kw: getattr(t, name)(**kw))
  x = X if name not in ("any", "all") else X > 0.3
  t, r = Tensor(x), torch.tensor(x)
  _same(ours(t, dim=-1), ref(r, dim=-1), f"{name}(dim=-1)")
  if has_keepdim: _same(ours(t, dim=1, keepdim=True), ref(r, dim=1, keepdim=True), f"{name}(dim=1, keepdim=True)")
  else: _same(ours(t, dim=1), ref(r, dim=1), f"{name}(dim=1)")

def test_dim_with_axis_is_an_error_and_axis_keeps_tinygrad_results():
  t = Tensor(X)
  with pytest.raises(RuntimeError, match="give axis or dim, not both"): t.sum(axis=0, dim=1)
  assert isinstance(t.max(axis=1), Tensor) and isinstance(t.max(1), Tensor) and isinstance(t.median(axis=0), Tensor)
  r = t.max(dim=1)
  assert isinstance(r, ValuesIndices) and isinstance(r, tuple)
  v, i = r
  assert v is r.values and i is r.indices
  np.testing.assert_allclose(t.sum(axis=(0, 2), keepdim=True).numpy(), torch.tensor(X).sum(dim=(0, 2), keepdim=True).numpy(),
                             rtol=1e-5)

TUPLE_CASES = [
  ("max", lambda a: a.max(dim=0)), ("min", lambda a: a.min(dim=2, keepdim=True)),
  ("sort", lambda a: a.sort(dim=1, descending=True)), ("topk", lambda a: a.topk(2, dim=1)),
  ("kthvalue", lambda a: a.kthvalue(3, dim=1)), ("kthvalue_keepdim", lambda a: a.kthvalue(1, 0, keepdim=True)),
  ("median", lambda a: a.median(dim=1)), ("median_keepdim", lambda a: a.median(dim=0, keepdim=True)),
  ("mode", lambda a: a.mode(dim=1)), ("mode_keepdim", lambda a: a.mode(0, keepdim=True)),
  ("cummax", lambda a: a.cummax(dim=1)), ("cummin", lambda a: a.cummin(dim=2)),
]

@pytest.mark.parametrize("name,fn", TUPLE_CASES, ids=[c[0] for c in TUPLE_CASES])
def test_values_indices_named_tuples_match_torch(name, fn):
  # NOTE: small ints in a float tensor: ties everywhere, which is where the index rules show
  x = np.random.default_rng(1).integers(0, 4, size=(4, 7, 3)).astype(np.float32)
  if name.startswith(("kthvalue", "median", "sort", "topk")): x = X  # torch leaves the index of ties unspecified there
  ours, ref = fn(Tensor(x)), fn(torch.tensor(x))
  assert isinstance(ours, ValuesIndices) and ours._fields == ("values", "indices")
  _same(ours, ref, name)
  _same(ours.values, ref.values, name + ".values")

@pytest.mark.parametrize("vals", [[1.0, math.nan, 2.0, math.nan], [4.0, 3.0, 2.0, 1.0], [math.nan, math.nan, 1.0, 5.0],
                                  [2.0, 2.0, 2.0, 7.0]])
def test_median_nanmedian_mode_cummax_with_nan_and_ties_match_torch(vals):
  x = np.array([vals, vals[::-1]], dtype=np.float32)
  t, r = Tensor(x), torch.tensor(x)
  for name, fn in [("median", lambda a: a.median(dim=1)), ("nanmedian", lambda a: a.nanmedian(dim=1)),
                   ("max", lambda a: a.max(dim=1)), ("cummax", lambda a: a.cummax(dim=1)),
                   ("cummin", lambda a: a.cummin(dim=1))]:
    _same(fn(t), fn(r), f"{name} of {vals}")
  _same(t.median(), r.median(), "median of all")
  _same(t.nanmedian(), r.nanmedian(), "nanmedian of all")

def test_reductions_torch_users_call_match_torch():
  x = X.copy()
  x[0, 1, 2] = x[2, 3, 0] = np.nan
  t, r, tc, rc = Tensor(X), torch.tensor(X), Tensor(x), torch.tensor(x)
  _same(t.amax(dim=(0, 2)), r.amax(dim=(0, 2)), "amax")
  _same(t.amin(1, keepdim=True), r.amin(1, keepdim=True), "amin")
  _same(t.aminmax(dim=1), tuple(torch.aminmax(r, dim=1)), "aminmax")
  _same(tc.nansum(), rc.nansum(), "nansum")
  _same(tc.nanmean(dim=1), rc.nanmean(dim=1), "nanmean")
  _same((t > 0).count_nonzero(dim=1), (r > 0).count_nonzero(dim=1), "count_nonzero")
  _same(t.std(dim=1, unbiased=False), r.std(dim=1, unbiased=False), "std(unbiased=False)")
  _same(t.var(1, correction=0), r.var(1, correction=0), "var(correction=0)")
  _same(Tensor([[1, 2], [3, 4]]).sum(dtype="float32"), torch.tensor([[1, 2], [3, 4]]).sum(dtype=torch.float32), "sum(dtype=name)")
  _same(Tensor([[1, 2], [3, 4]]).prod(dim=0, dtype="int64"), torch.tensor([[1, 2], [3, 4]]).prod(dim=0, dtype=torch.int64),
        "prod(dtype=name)")
  assert Tensor([1, 2]).sum(dtype="float16").dtype is dtypes.float16 and Tensor([1.5]).sum(dtype=dtypes.int32).item() == 1
  _same(Tensor([[1, 2], [3, 4]]).cumsum(dim=1, dtype="float32"), torch.tensor([[1, 2], [3, 4]]).cumsum(dim=1, dtype=torch.float32),
        "cumsum(dtype=)")

def test_kthvalue_and_empty_axis_errors_as_torch():
  for bad in (lambda a: a.kthvalue(6, 1), lambda a: a.kthvalue(0, 1)):
    with pytest.raises(RuntimeError): bad(torch.tensor(X))
    with pytest.raises(RuntimeError, match="kthvalue: k="): bad(Tensor(X))
  for bad in (lambda a: a.median(dim=0), lambda a: a.mode(dim=0)):
    with pytest.raises(IndexError): bad(torch.ones(0, 3))
    with pytest.raises(IndexError, match="is empty"): bad(Tensor.ones(0, 3))

def test_clamp_and_clip_take_torch_keywords():
  x = np.array([-3.0, -0.5, 0.0, 0.7, 4.0, np.nan], dtype=np.float32)
  t, r = Tensor(x), torch.tensor(x)
  _same(t.clamp(min=-1), r.clamp(min=-1), "clamp(min=)")
  _same(t.clamp(max=0.5), r.clamp(max=0.5), "clamp(max=)")
  _same(t.clip(min=-1, max=1), r.clip(min=-1, max=1), "clip(min=, max=)")
  _same(t.clamp(-1, 1), r.clamp(-1, 1), "clamp positional")
  lo, hi = np.full(6, -0.6, np.float32), np.linspace(0, 2, 6, dtype=np.float32)
  _same(t.clamp(min=Tensor(lo), max=Tensor(hi)), r.clamp(min=torch.tensor(lo), max=torch.tensor(hi)), "clamp(tensors)")
  _same(t.clamp_min(0.1), r.clamp_min(0.1), "clamp_min")
  _same(t.clamp_max(0.1), r.clamp_max(0.1), "clamp_max")
  with pytest.raises(RuntimeError): r.clamp()
  with pytest.raises(RuntimeError, match="at least one of min and max"): t.clip()

def test_python_conversions_of_one_element_tensors_match_torch():
  for v in ([3.7], -3.7, [[2]], [True], 0.0, [-0.0]):
    tv, rv = Tensor(v), torch.tensor(v)
    assert float(tv) == float(rv) and int(tv) == int(rv) and bool(tv) == bool(rv), v
  assert bool(Tensor(math.nan)) is bool(torch.tensor(math.nan)) is True
  assert [10, 20, 30][Tensor([2])] == 30 and list(range(Tensor(3))) == [0, 1, 2]
  assert isinstance(int(Tensor([5], dtype=dtypes.int64)), int) and isinstance(float(Tensor(2)), float)
  for conv, exc in ((bool, RuntimeError), (float, ValueError), (int, ValueError)):
    with pytest.raises(exc): conv(torch.ones(2))
    with pytest.raises(exc): conv(Tensor.ones(2))
  with pytest.raises(TypeError): [1, 2][torch.tensor(1.0)]
  with pytest.raises(TypeError, match="only int tensors"): [1, 2][Tensor(1.0)]
  with pytest.raises(RuntimeError): Tensor.ones(2, 2).item()

@pytest.mark.parametrize("kw", [dict(), dict(return_inverse=True), dict(return_counts=True),
                                dict(return_inverse=True, return_counts=True), dict(sorted=False, return_counts=True),
                                dict(dim=0, return_inverse=True, return_counts=True), dict(dim=1, return_inverse=True)])
def test_unique_matches_torch(kw):
  x = np.array([[3, 1, 2, 1], [1, 3, 3, 0], [3, 1, 2, 1]], dtype=np.int32)
  _same(Tensor(x).unique(**kw), torch.unique(torch.tensor(x), **kw), f"unique({kw})")
  f = np.array([2.5, np.nan, -1.0, 2.5, np.nan], dtype=np.float32)
  _same(Tensor(f).unique(**kw) if "dim" not in kw else Tensor(f).unique(),
        torch.unique(torch.tensor(f), **kw) if "dim" not in kw else torch.unique(torch.tensor(f)), "unique with nan")
  assert Tensor([1.5], dtype=dtypes.float16).unique().dtype is dtypes.float16

def test_no_grad_context_and_decorator_cut_autograd_as_torch():
  w = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  rw = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
  with Tensor.no_grad():
    y = w * 2
    assert bool(Tensor.no_grad)
  with torch.no_grad(): ry = rw * 2
  assert not bool(Tensor.no_grad) and not y.requires_grad and not ry.requires_grad
  @Tensor.no_grad
  def f(a): return a.exp()
  @Tensor.no_grad()
  def g(a): return a.sin()
  assert not f(w).requires_grad and not g(w).requires_grad and (w * 1).requires_grad
  # a value computed under no_grad is a constant to a later backward: w's gradient is only the direct term
  loss = (y * w).sum()
  loss.backward()
  (ry * rw).sum().backward()
  np.testing.assert_allclose(w.grad.numpy(), rw.grad.numpy())
  np.testing.assert_allclose(y.numpy(), ry.numpy())
  with Tensor.no_grad():
    with Tensor.no_grad(): pass
    assert bool(Tensor.no_grad), "nested blocks restore the outer one"
    leaf = Tensor([1.0], requires_grad=True)
  assert leaf.requires_grad, "a leaf made inside no_grad still requires grad (torch)"
  with pytest.raises(RuntimeError): (f(w)).sum().backward()
