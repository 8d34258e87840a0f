"""OpInfo adapters for movement, indexing, scatter/gather and creation ops: see driver.py.

Creation ops whose values are unspecified or random (empty, empty_like, rand_like, randn_like, randint) are compared
on what they promise: both sides return (zeros_like(out), property(out)), so the first output checks shape and dtype
and the second a property every value must have (in [0, 1) for rand_like, finite for randn_like, in [low, high) for
randint; True for empty, whose values are anything)."""
from __future__ import annotations
from typing import Any
import torch
from tinygrad import Tensor
from tests.ops.opinfo.driver import Adapter, method

# NOTE: dtypes per op keep the area's cases fast. Movement ops only move values: float16 and int32 take float32's path
# (bool differs where values combine, as cat's OR). Ops that compute with the values (one-hot sums, fills, masks,
# creation) run int32 too, and float16 where they accumulate or round (scatter reductions, arange, linspace).
MOVE = (torch.float32, torch.bool)
VALUES = (torch.float32, torch.int32, torch.bool)
ACC = (torch.float32, torch.float16, torch.int32)
FLOAT = (torch.float32, torch.float16)

def _cat(xs: list[Tensor], dim: int = 0) -> Tensor: return xs[0].cat(*xs[1:], dim=dim)
def _stack(xs: list[Tensor], dim: int = 0) -> Tensor: return Tensor.stack(*xs, dim=dim)
def _pad(x: Tensor, pad: tuple[int, ...], mode: str = "constant", value: float | None = None) -> Tensor:
  # NOTE: torch's value=None is a fill of 0
  return x.pad(pad, value=0 if value is None else value, mode=mode)
def _meshgrid_list(xs: list[Tensor], indexing: str = "ij") -> tuple[Tensor, ...]:
  return xs[0].meshgrid(*xs[1:], indexing=indexing)

# ---- unspecified or random values: shape, dtype and a property of the values ----
def _empty_ours(*shape: Any, **kw: Any) -> tuple[Tensor, Tensor]:
  e = Tensor.empty(*shape, **kw).realize()
  return e.zeros_like(), Tensor(True)
def _empty_torch(*shape: Any, **kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
  return torch.zeros_like(torch.empty(*shape, **kw)), torch.tensor(True)
def _empty_like_ours(x: Tensor, **kw: Any) -> tuple[Tensor, Tensor]: return x.empty_like(**kw).realize().zeros_like(), Tensor(True)
def _empty_like_torch(x: torch.Tensor, **kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
  return torch.zeros_like(torch.empty_like(x, **kw)), torch.tensor(True)
def _rand_like_ours(x: Tensor, **kw: Any) -> tuple[Tensor, Tensor]:
  r = x.rand_like(**kw)
  return r.zeros_like(), ((r >= 0) & (r < 1)).all()
def _rand_like_torch(x: torch.Tensor, **kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
  r = torch.rand_like(x, **kw)
  return torch.zeros_like(r), ((r >= 0) & (r < 1)).all()
def _randn_like_ours(x: Tensor, **kw: Any) -> tuple[Tensor, Tensor]:
  r = x.randn_like(**kw)
  return r.zeros_like(), r.isfinite().all()
def _randn_like_torch(x: torch.Tensor, **kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
  r = torch.randn_like(x, **kw)
  return torch.zeros_like(r), r.isfinite().all()
def _randint_args(a: tuple[Any, ...]) -> tuple[int, int, tuple[int, ...]]:
  # torch: randint(high, size) or randint(low, high, size)
  return (0, a[0], tuple(a[1])) if len(a) == 2 else (a[0], a[1], tuple(a[2]))
def _randint_ours(*a: Any, **kw: Any) -> tuple[Tensor, Tensor]:
  lo, hi, size = _randint_args(a)
  r = Tensor.randint(*size, low=lo, high=hi, **kw)
  return r.zeros_like(), ((r >= lo) & (r < hi)).all()
def _randint_torch(*a: Any, **kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
  lo, hi, _ = _randint_args(a)
  r = torch.randint(*a, **kw)
  return torch.zeros_like(r), ((r >= lo) & (r < hi)).all()

ADAPTERS: dict[str, Adapter] = {
  # ---- joining and splitting ----
  "cat": Adapter(_cat, dtypes=VALUES),
  "stack": Adapter(_stack, dtypes=VALUES),
  "chunk": Adapter(method("chunk"), dtypes=MOVE),
  "split": Adapter(method("split", split_size_or_sections="sizes"), dtypes=MOVE),
  "split.list_args": Adapter(method("split", split_size_or_sections="sizes"), dtypes=MOVE),
  # ---- movement ----
  "flip": Adapter(method("flip", dims="axis"), dtypes=MOVE),
  "fliplr": Adapter(lambda x: x.flip(1), dtypes=MOVE),  # torch.fliplr is flip along axis 1
  "flipud": Adapter(lambda x: x.flip(0), dtypes=MOVE),  # torch.flipud is flip along axis 0
  "roll": Adapter(method("roll"), dtypes=MOVE),
  "permute": Adapter(method("permute"), dtypes=MOVE),
  "reshape": Adapter(method("reshape"), dtypes=MOVE),
  "view": Adapter(method("view"), dtypes=MOVE),
  "expand": Adapter(method("expand"), dtypes=MOVE),
  "expand_as": Adapter(method("expand_as"), dtypes=MOVE),
  "broadcast_to": Adapter(method("broadcast_to"), dtypes=MOVE),
  "transpose": Adapter(method("transpose"), dtypes=MOVE),
  "t": Adapter(lambda x: x.T, dtypes=MOVE),
  "squeeze": Adapter(method("squeeze"), dtypes=MOVE),
  "squeeze.multiple": Adapter(method("squeeze"), dtypes=MOVE),
  "unsqueeze": Adapter(method("unsqueeze"), dtypes=MOVE),
  "flatten": Adapter(method("flatten"), dtypes=MOVE),
  "unflatten": Adapter(method("unflatten"), dtypes=MOVE),
  "repeat": Adapter(method("repeat"), dtypes=MOVE),
  "repeat_interleave": Adapter(method("repeat_interleave"), dtypes=VALUES),
  "unfold": Adapter(method("unfold"), dtypes=MOVE),
  "diag": Adapter(method("diag"), dtypes=VALUES),
  "diagonal": Adapter(method("diagonal"), dtypes=MOVE),
  "tril": Adapter(method("tril"), dtypes=VALUES),
  "triu": Adapter(method("triu"), dtypes=VALUES),
  "meshgrid.list_of_tensors": Adapter(_meshgrid_list, dtypes=MOVE),
  "meshgrid.variadic_tensors": Adapter(method("meshgrid"), dtypes=MOVE),
  "nn.functional.pad.constant": Adapter(_pad, dtypes=(torch.float32, torch.int32)),  # int32: the fill takes the dtype
  "nn.functional.pad.reflect": Adapter(_pad, dtypes=MOVE),
  "nn.functional.pad.replicate": Adapter(_pad, dtypes=MOVE),
  "nn.functional.pad.circular": Adapter(_pad, dtypes=MOVE),
  # ---- indexing, gather and scatter ----
  "__getitem__": Adapter(lambda x, idx: x[idx], dtypes=VALUES),
  "index_put": Adapter(method("index_put"), dtypes=VALUES),
  "gather": Adapter(method("gather"), dtypes=VALUES),
  "take_along_dim": Adapter(method("take_along_dim"), dtypes=VALUES),
  "scatter": Adapter(method("scatter"), dtypes=VALUES),
  "scatter_add": Adapter(method("scatter_add"), dtypes=VALUES),
  # NOTE: sum and mean accumulate (float16 rounds); prod, amax and amin of bools are AND and OR
  **{f"scatter_reduce.{r}": Adapter(method("scatter_reduce"), dtypes=ACC) for r in ("sum", "mean")},
  **{f"scatter_reduce.{r}": Adapter(method("scatter_reduce"), dtypes=VALUES) for r in ("prod", "amax", "amin")},
  "masked_fill": Adapter(method("masked_fill"), dtypes=VALUES),
  "masked_select": Adapter(method("masked_select"), dtypes=VALUES),
  # ---- creation ----
  "arange": Adapter(lambda *a, end=None, **kw: Tensor.arange(*a, *(() if end is None else (end,)), **kw)),
  "linspace": Adapter(Tensor.linspace),
  "eye": Adapter(Tensor.eye, dtypes=MOVE),  # 90 shapes per dtype: float32 and bool show the cast
  "full": Adapter(Tensor.full),
  "full_like": Adapter(method("full_like")),
  "zeros": Adapter(Tensor.zeros),
  "ones": Adapter(Tensor.ones),
  "zeros_like": Adapter(method("zeros_like")),
  "ones_like": Adapter(method("ones_like")),
  "empty": Adapter(_empty_ours, torch_fn=_empty_torch),
  "empty_like": Adapter(_empty_like_ours, torch_fn=_empty_like_torch),
  "rand_like": Adapter(_rand_like_ours, dtypes=FLOAT, torch_fn=_rand_like_torch),
  "randn_like": Adapter(_randn_like_ours, dtypes=FLOAT, torch_fn=_randn_like_torch),
  "randint": Adapter(_randint_ours, torch_fn=_randint_torch),
}
