"""Compare a Tensor op with torch (the CPU wheel pinned in the testing extra): forward values, shapes and dtypes, and the
gradients torch autograd gives, from the same seeded inputs.

    check([(3, 4)], lambda x: x.tril(1))                          # the same call in both libraries
    check([(3, 4)], lambda x: x.sort(1)[0], lambda x: x.sort(1)[0])  # torch's spelling first, then ours
    check(None, f, vals=[[1.0, 2.0]])                             # explicit input values

Float outputs must have torch's dtype; int outputs may be any int dtype (our indices are int32 where torch's are int64).
Backward seeds the first float output with a random upstream gradient, so a rule that mixes up elements shows.
"""
from __future__ import annotations
from typing import Any, Callable, Sequence
import numpy as np
import torch
from tinygrad import Tensor, dtypes

NP_OF = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
         "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}
# forward (atol, rtol) per output dtype; gradients get ten times as much
TOLS = {torch.float16: (2e-3, 2e-3), torch.float32: (1e-5, 1e-5), torch.float64: (1e-10, 1e-10)}

def inputs(shapes: Sequence[tuple[int, ...]], dtype: str, low: float, high: float, seed: int) -> list[np.ndarray]:
  rng = np.random.default_rng(seed)
  if dtype == "bool": return [rng.integers(0, 2, size=s).astype(np.bool_) for s in shapes]
  if dtype.startswith("float"): return [rng.uniform(low, high, size=s).astype(NP_OF[dtype]) for s in shapes]
  return [rng.integers(int(low), int(high) + 1, size=s).astype(NP_OF[dtype]) for s in shapes]

def as_tuple(x: Any) -> tuple[Any, ...]: return tuple(x) if isinstance(x, (tuple, list)) else (x,)

def same(out: Tensor, ref: torch.Tensor, atol: float | None, rtol: float | None, what: str) -> None:
  assert out.shape == tuple(ref.shape), f"{what}: shape {out.shape}, torch {tuple(ref.shape)}"
  if ref.dtype.is_floating_point:
    want_dt = {torch.float16: dtypes.float16, torch.float32: dtypes.float32, torch.float64: dtypes.float64}[ref.dtype]
    assert out.dtype is want_dt, f"{what}: dtype {out.dtype}, torch {ref.dtype}"
    a, r = TOLS[ref.dtype]
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref.detach().double().numpy(), equal_nan=True,
                               atol=a if atol is None else atol, rtol=r if rtol is None else rtol, err_msg=what)
  else:
    assert dtypes.is_int(out.dtype) or out.dtype is dtypes.bool, f"{what}: dtype {out.dtype}, torch {ref.dtype}"
    assert (out.dtype is dtypes.bool) == (ref.dtype is torch.bool), f"{what}: dtype {out.dtype}, torch {ref.dtype}"
    np.testing.assert_array_equal(out.numpy(), ref.numpy(), err_msg=what)

def check(shapes: Sequence[tuple[int, ...]] | None, torch_fn: Callable[..., Any], tiny_fn: Callable[..., Any] | None = None,
          *, vals: Sequence[Any] | None = None, dtype: str = "float32", low: float = -2.0, high: float = 2.0,
          grad: bool | None = None, atol: float | None = None, rtol: float | None = None,
          grad_atol: float | None = None, seed: int = 0) -> list[Tensor]:
  """Run torch_fn on torch tensors and tiny_fn (default torch_fn) on Tensors holding the same values; compare every
  output, then (float inputs, unless grad=False) the gradient of every input. Returns our outputs."""
  xs = [np.asarray(v, dtype=NP_OF[dtype]) for v in vals] if vals is not None else inputs(shapes or [], dtype, low, high, seed)
  want_grad = dtype.startswith("float") if grad is None else grad
  tt = [torch.tensor(x).requires_grad_(want_grad) for x in xs]
  ts = [Tensor(x, requires_grad=want_grad) for x in xs]
  ref, out = as_tuple(torch_fn(*tt)), as_tuple((tiny_fn or torch_fn)(*ts))
  assert len(out) == len(ref), f"{len(out)} outputs, torch gives {len(ref)}"
  for k, (o, r) in enumerate(zip(out, ref)): same(o, r, atol, rtol, f"output {k}")
  if not want_grad: return list(out)
  k = next((k for k, r in enumerate(ref) if r.dtype.is_floating_point and r.requires_grad), None)
  if k is None or ref[k].numel() == 0: return list(out)
  up = np.random.default_rng(seed + 1).uniform(-1, 1, size=tuple(ref[k].shape)).astype(np.float32)
  tg = torch.autograd.grad(ref[k], tt, grad_outputs=torch.tensor(up).to(ref[k].dtype), allow_unused=True)
  og = out[k].gradient(*ts, gradient=Tensor(up).cast(out[k].dtype))
  a, r = TOLS[ref[k].dtype]
  for i, (g, o) in enumerate(zip(tg, og)):
    same(o, torch.zeros_like(tt[i]) if g is None else g, 10 * a if grad_atol is None else grad_atol, 10 * r,
         f"gradient of input {i}")
  return list(out)

def raises_like_torch(exc: type[BaseException], torch_call: Callable[[], Any], tiny_call: Callable[[], Any]) -> None:
  """torch raises exc for this call (the premise), and so do we."""
  try: torch_call()
  except exc: pass
  else: raise AssertionError(f"torch does not raise {exc.__name__} here")
  try: tiny_call()
  except exc: return
  raise AssertionError(f"we do not raise {exc.__name__}")

def kernels(*ts: Tensor) -> int:
  """Schedule items that realizing ts takes (nothing runs)."""
  return len(ts[0].schedule(*ts[1:]))
