"""OpInfo adapters for reductions, scans, sorts and contractions: see driver.py.

Our API is tinygrad's: `axis` for torch's `dim`, values only where torch returns (values, indices) from max/min with a
dim and from cummax/cummin (the indices of a max/min come from argmax/argmin), `correction` for std/var's `unbiased`.
"""
from __future__ import annotations
from typing import Any
import torch
from tinygrad import Tensor
from tests.ops.opinfo.driver import Adapter, method

def _unbiased(kw: dict[str, Any]) -> dict[str, Any]:
  """torch's std/var keywords on ours: dim -> axis, unbiased -> correction (True: 1, False: 0)."""
  kw = dict(kw)
  if "dim" in kw: kw["axis"] = kw.pop("dim")
  if "unbiased" in kw: kw["correction"] = int(kw.pop("unbiased"))
  if kw.get("correction", 0) is None: kw["correction"] = 1
  return kw

def _stat(name: str) -> Any:
  def call(x: Tensor, *args: Any, **kw: Any) -> Any:
    # NOTE: torch's positional form is (unbiased,) in the .unbiased variants
    if args: kw["unbiased"] = args[0]
    return getattr(x, name)(**_unbiased(kw))
  call.__name__ = name
  return call

def _with_dim(name: str, arg: str) -> Any:
  """torch.max/min(x, dim, keepdim) -> (values, indices): ours is x.max(axis, keepdim) and x.argmax(axis, keepdim)."""
  def call(x: Tensor, dim: int, keepdim: bool = False) -> Any:
    return getattr(x, name)(dim, keepdim), getattr(x, arg)(dim, keepdim)
  call.__name__ = name
  return call

def _dtype_kw(s: Any) -> str | None:
  return "torch-only keyword dtype (tinygrad's cumsum/cumprod take none)" if "dtype" in s.kwargs else None

def _values(fn: Any) -> Any:
  def call(*a: Any, **kw: Any) -> Any: return fn(*a, **kw).values
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
  "max.reduction_with_dim": Adapter(_with_dim("max", "argmax")),
  "max.binary": Adapter(method("maximum")),
  "min.reduction_no_dim": Adapter(method("min")),
  "min.reduction_with_dim": Adapter(_with_dim("min", "argmin")),
  "min.binary": Adapter(method("minimum")),
  "amax": Adapter(method("max")),
  "amin": Adapter(method("min")),
  "argmax": Adapter(method("argmax")),
  "argmin": Adapter(method("argmin")),
  "any": Adapter(method("any")),
  "all": Adapter(method("all")),
  "logsumexp": Adapter(method("logsumexp")),
  "softmax": Adapter(method("softmax")),
  "softmax.with_dtype": Adapter(method("softmax")),
  "log_softmax": Adapter(method("log_softmax")),
  "log_softmax.with_dtype": Adapter(method("log_softmax")),
  "cumsum": Adapter(method("cumsum"), skip=_dtype_kw),
  "cumprod": Adapter(method("cumprod"), skip=_dtype_kw),
  # NOTE: ours returns the running values only (tinygrad's API); torch's reference is its .values
  "cummax": Adapter(method("cummax"), torch_fn=_values(torch.cummax)),
  "cummin": Adapter(method("cummin"), torch_fn=_values(torch.cummin)),
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
