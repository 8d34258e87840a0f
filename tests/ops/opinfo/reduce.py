"""OpInfo adapters for reductions, scans, sorts and contractions: see driver.py.

Our methods take torch's keywords (`dim`, `keepdim`, `unbiased`, `dtype`), and with `dim=` max/min/cummax/cummin/
median return torch's (values, indices), so most adapters call the method of the same name with torch's arguments.
"""
from __future__ import annotations
from typing import Any
import torch
from tinygrad import Tensor
from tests.ops.opinfo.driver import Adapter, method

def _stat(name: str) -> Any:
  def call(x: Tensor, *args: Any, **kw: Any) -> Any:
    # NOTE: torch's positional form is (unbiased,) in the .unbiased variants (ours takes axis first)
    if args: kw["unbiased"] = args[0]
    if kw.get("correction", 0) is None: kw["correction"] = 1
    return getattr(x, name)(**kw)
  call.__name__ = name
  return call

def _with_dim(name: str) -> Any:
  """torch.max(x, dim, keepdim) -> (values, indices): ours with dim= as a keyword gives the same named tuple."""
  def call(x: Tensor, dim: int, keepdim: bool = False) -> Any: return getattr(x, name)(dim=dim, keepdim=keepdim)
  call.__name__ = name
  return call

# NOTE: torch leaves the index of median/kthvalue/mode among equal values unspecified (small ints and bools tie), so both
# sides give (values, the value at the index): an index that points at another value shows, a tie broken the other way
# does not
def _picked(name: str) -> Any:
  def call(x: Tensor, *args: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    lead, rest = (args[:1], list(args[1:])) if name == "kthvalue" else ((), list(args))
    if rest: dim = rest.pop(0)
    if rest: keepdim = rest.pop(0)
    if name in ("median", "nanmedian") and dim is None: return getattr(x, name)()
    d = -1 if dim is None else dim
    r = getattr(x, name)(*lead, dim=d, keepdim=keepdim)
    if x.ndim == 0: return r.values, x
    d %= x.ndim
    at = x.gather(d, r.indices if keepdim else r.indices.unsqueeze(d))
    return r.values, at if keepdim else at.squeeze(d)
  call.__name__ = name
  return call

def _picked_ref(fn: Any) -> Any:
  def call(x: torch.Tensor, *args: Any, **kw: Any) -> Any:
    r = fn(x, *args, **kw)
    return r if isinstance(r, torch.Tensor) else (r.values, r.values)
  return call

# NOTE: ours sorts stably always (equal elements keep their order), and topk takes the earlier of equal elements first;
# torch leaves the order of ties unspecified unless stable=True (its 8000-element float16/bool samples and small-int
# topk samples have ties), so the reference is torch's stable sort
def _stable_sort(x: torch.Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
  return torch.sort(x, stable=True, dim=dim, descending=descending)

def _stable_argsort(x: torch.Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
  return torch.sort(x, stable=True, dim=dim, descending=descending).indices

def _stable_topk(x: torch.Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
  if x.ndim == 0: return torch.topk(x, k, dim, largest, sorted)
  v, i = torch.sort(x, stable=True, dim=dim, descending=largest)
  return v.narrow(dim, 0, k), i.narrow(dim, 0, k)

def _einsum(xs: list[Tensor], eq: str) -> Tensor: return Tensor.einsum(eq, *xs)

def _sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
  return x.sort(dim, descending)

def _argsort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
  return x.argsort(dim, descending)

# NOTE: the reductions torch users call that tinygrad had not, float32 and int32 only (the suite's time budget; the
# sort-based ones share the kernels of sort, which runs every dtype)
NEW = (torch.float32, torch.int32)

ADAPTERS: dict[str, Adapter] = {
  "sum": Adapter(method("sum")),
  "prod": Adapter(method("prod")),
  "mean": Adapter(method("mean")),
  "std": Adapter(_stat("std")),
  "std.unbiased": Adapter(_stat("std")),
  "var": Adapter(_stat("var")),
  "var.unbiased": Adapter(_stat("var")),
  "std_mean": Adapter(_stat("std_mean")),
  "std_mean.unbiased": Adapter(_stat("std_mean")),
  "var_mean": Adapter(_stat("var_mean")),
  "var_mean.unbiased": Adapter(_stat("var_mean")),
  "max.reduction_no_dim": Adapter(method("max")),
  "max.reduction_with_dim": Adapter(_with_dim("max")),
  "max.binary": Adapter(method("maximum")),
  "min.reduction_no_dim": Adapter(method("min")),
  "min.reduction_with_dim": Adapter(_with_dim("min")),
  "min.binary": Adapter(method("minimum")),
  "amax": Adapter(method("amax")),
  "amin": Adapter(method("amin")),
  "aminmax": Adapter(method("aminmax"), dtypes=NEW),
  "median": Adapter(_picked("median"), torch_fn=_picked_ref(torch.median), dtypes=NEW),
  "nanmedian": Adapter(_picked("nanmedian"), torch_fn=_picked_ref(torch.nanmedian), dtypes=NEW),
  "mode": Adapter(_picked("mode"), torch_fn=_picked_ref(torch.mode), dtypes=NEW),
  "kthvalue": Adapter(_picked("kthvalue"), torch_fn=_picked_ref(torch.kthvalue), dtypes=NEW),
  "nansum": Adapter(method("nansum"), dtypes=NEW),
  "nanmean": Adapter(method("nanmean"), dtypes=NEW),
  "count_nonzero": Adapter(method("count_nonzero"), dtypes=NEW),
  "argmax": Adapter(method("argmax")),
  "argmin": Adapter(method("argmin")),
  "any": Adapter(method("any")),
  "all": Adapter(method("all")),
  "logsumexp": Adapter(method("logsumexp")),
  "softmax": Adapter(method("softmax")),
  "softmax.with_dtype": Adapter(method("softmax")),
  "log_softmax": Adapter(method("log_softmax")),
  "log_softmax.with_dtype": Adapter(method("log_softmax")),
  "cumsum": Adapter(method("cumsum")),
  "cumprod": Adapter(method("cumprod")),
  "cummax": Adapter(lambda x, dim: x.cummax(dim=dim)),
  "cummin": Adapter(lambda x, dim: x.cummin(dim=dim)),
  "logcumsumexp": Adapter(method("logcumsumexp")),
  "sort": Adapter(_sort, torch_fn=_stable_sort),
  "argsort": Adapter(_argsort, torch_fn=_stable_argsort),
  "msort": Adapter(lambda x: x.sort(0)[0]),
  "topk": Adapter(method("topk"), torch_fn=_stable_topk),
  "trace": Adapter(method("trace")),
  "matmul": Adapter(method("matmul")),
  "__rmatmul__": Adapter(method("__rmatmul__")),
  "mm": Adapter(method("matmul")),
  "bmm": Adapter(method("matmul")),
  "mv": Adapter(method("matmul")),
  "dot": Adapter(method("dot")),
  "outer": Adapter(method("outer")),
  "einsum": Adapter(_einsum),
}
