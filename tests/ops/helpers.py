"""Per-op checks of the Tensor front end against torch (CPU, pinned in the testing extra): forward values, output dtype
and shape, and gradients from torch autograd.

    check_op([(3, 4), (4,)], lambda a, b: a.logaddexp(b))                 # same spelling in both libraries
    check_op([(3, 4)], torch.special.erf, Tensor.erf)                      # torch spelling, then ours
    check_op([(3, 4)], ..., dtype="int32", low=-5, high=5)                 # ints: forward only
    check_op(None, ..., vals=[[1.0, -2.0]])                                # explicit values

Conventions (shared by every file in tests/ops):
- inputs come from one seeded generator per call (`np.random.default_rng(seed)`), uniform in [low, high), cast to the
  dtype; torch and tinygrad get the same values, each in its own dtype.
- backward seeds the output with a random upstream gradient (not ones), so a rule that mixes up elements shows.
- tolerances default per dtype (TOL); pass atol/rtol (forward) or grad_atol/grad_rtol (backward) to override.
- ops that return several tensors (a tuple) compare each; backward then uses the first float output.
"""
from __future__ import annotations
from typing import Any, Callable, Sequence
import numpy as np
import torch
from tinygrad import Tensor, dtypes
from tinygrad.dtype import DType

TORCH_DTYPES: dict[str, torch.dtype] = {
  "bool": torch.bool, "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "int32": torch.int32,
  "int64": torch.int64, "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
  "float64": torch.float64}
TINY_DTYPES: dict[str, DType] = {"bool": dtypes.bool, "int8": dtypes.int8, "uint8": dtypes.uint8, "int16": dtypes.int16,
                                 "int32": dtypes.int32, "int64": dtypes.int64, "float16": dtypes.float16,
                                 "bfloat16": dtypes.bfloat16, "float32": dtypes.float32, "float64": dtypes.float64}
# (atol, rtol) of the forward comparison per output dtype; gradients get GRAD_SCALE times as much
TOL: dict[str, tuple[float, float]] = {"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2), "float32": (1e-5, 1e-4),
                                       "float64": (1e-10, 1e-9)}
GRAD_SCALE = 10.0

def torch_dtype_name(dt: torch.dtype) -> str: return next(k for k, v in TORCH_DTYPES.items() if v is dt)

def make_inputs(shapes: Sequence[tuple[int, ...]], dtype: str = "float32", low: float = -2.0, high: float = 2.0,
                seed: int = 0) -> list[np.ndarray]:
  """Seeded inputs of `dtype` (ints: uniform integers in [low, high]; bool: random)."""
  rng = np.random.default_rng(seed)
  out = []
  for s in shapes:
    if dtype == "bool": out.append(rng.integers(0, 2, size=s).astype(np.bool_))
    elif dtype in ("float16", "bfloat16", "float32", "float64"):
      # NOTE: bfloat16 has no numpy dtype: the values are made in float32 and rounded by each library
      npdt = np.float32 if dtype == "bfloat16" else np.dtype(dtype)
      out.append(rng.uniform(low, high, size=s).astype(npdt))
    else: out.append(rng.integers(int(low), int(high) + 1, size=s).astype(np.dtype(dtype)))
  return out

def to_torch(x: np.ndarray, dtype: str, grad: bool) -> torch.Tensor:
  t = torch.tensor(x).to(TORCH_DTYPES[dtype])
  return t.requires_grad_(grad)

def to_tiny(x: np.ndarray, dtype: str, grad: bool) -> Tensor:
  t = Tensor(x.astype(np.float32), dtype=dtypes.bfloat16) if dtype == "bfloat16" else Tensor(x)
  if grad: t.requires_grad = True
  return t

def to_np(t: torch.Tensor) -> np.ndarray:
  t = t.detach()
  return (t.float() if t.dtype is torch.bfloat16 else t).numpy()

def compare(out: Tensor, ref: torch.Tensor, atol: float | None, rtol: float | None, what: str,
            check_dtype: bool = True, any_int_width: bool = False, tol: dict[str, tuple[float, float]] = TOL) -> None:
  """out against ref: shape, dtype (by name; with any_int_width an int ref takes any int dtype) and values (nan where
  ref is nan, inf where ref is inf)."""
  name = torch_dtype_name(ref.dtype)
  if check_dtype and any_int_width and name != "bool" and not ref.dtype.is_floating_point:
    assert dtypes.is_int(out.dtype), f"{what}: dtype {out.dtype} != torch {ref.dtype} (any int dtype would do)"
  elif check_dtype:
    assert out.dtype is TINY_DTYPES[name], f"{what}: dtype {out.dtype} != torch {ref.dtype}"
  assert out.shape == tuple(ref.shape), f"{what}: shape {out.shape} != torch {tuple(ref.shape)}"
  got, want = out.numpy(), to_np(ref)
  a, r = tol.get(name, (0.0, 0.0))
  a, r = a if atol is None else atol, r if rtol is None else rtol
  if name in ("bool",) or name.startswith("int") or name.startswith("uint"):
    np.testing.assert_array_equal(got, want, err_msg=what)
    return
  np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=a, rtol=r, equal_nan=True,
                             err_msg=what)

def _tuple(x: Any) -> tuple[Any, ...]: return tuple(x) if isinstance(x, (tuple, list)) else (x,)

def check_op(shapes: Sequence[tuple[int, ...]] | None, torch_fn: Callable[..., Any],
             tiny_fn: Callable[..., Any] | None = None, *, vals: Sequence[Any] | None = None, dtype: str = "float32",
             low: float = -2.0, high: float = 2.0, grad: bool | None = None, atol: float | None = None,
             rtol: float | None = None, grad_atol: float | None = None, grad_rtol: float | None = None,
             check_dtype: bool = True, seed: int = 0, any_int_width: bool = False,
             tol: dict[str, tuple[float, float]] = TOL) -> list[Tensor]:
  """Run torch_fn on torch tensors and tiny_fn (default: torch_fn) on Tensors made from the same inputs; compare
  forward outputs and, for float inputs (or grad=True), the gradient of every input. Returns tinygrad's outputs.
  any_int_width: int outputs may have any int dtype (our indices are int32 where torch's are int64); tol: the
  default (atol, rtol) per dtype."""
  inputs = [np.asarray(v, dtype=np.dtype(dtype) if dtype != "bfloat16" else np.float32) for v in vals] if vals is not None \
    else make_inputs(shapes or [], dtype, low, high, seed)
  want_grad = dtype.startswith("float") or dtype == "bfloat16" if grad is None else grad
  tt = [to_torch(x, dtype, want_grad) for x in inputs]
  ts = [to_tiny(x, dtype, want_grad) for x in inputs]
  ref = _tuple(torch_fn(*tt))
  out = _tuple((tiny_fn or torch_fn)(*ts))
  assert len(out) == len(ref), f"{len(out)} outputs, torch has {len(ref)}"
  # backward from the first float output, seeded with a random upstream gradient
  k = next((k for k, r in enumerate(ref) if r.dtype.is_floating_point and r.requires_grad), None) if want_grad else None
  if k is not None and ref[k].numel() == 0: k = None
  ograds: list[Tensor] = []
  if k is not None:
    up = np.random.default_rng(seed + 1).uniform(-1, 1, size=tuple(ref[k].shape)).astype(np.float32)
    used = [t for t in tt if t.requires_grad]
    tgrads = torch.autograd.grad(ref[k], used, grad_outputs=torch.tensor(up).to(ref[k].dtype), allow_unused=True)
    ograds = out[k].gradient(*ts, gradient=Tensor(up).cast(out[k].dtype))
  # NOTE: one realize for the outputs and the gradients, so the kernels they share are scheduled once
  Tensor.realize(*out, *ograds)
  for j, (o, r) in enumerate(zip(out, ref)):
    compare(o, r, atol, rtol, f"forward output {j}", check_dtype, any_int_width, tol)
  if k is None: return list(out)
  name = torch_dtype_name(ref[k].dtype)
  a, r = tol.get(name, (0.0, 0.0))
  ga = a * GRAD_SCALE if grad_atol is None else grad_atol
  gr = r * GRAD_SCALE if grad_rtol is None else grad_rtol
  for i, (tg, og) in enumerate(zip(tgrads, ograds)):
    if tg is None: tg = torch.zeros_like(tt[i])
    compare(og, tg, ga, gr, f"gradient of input {i}", check_dtype, any_int_width, tol)
  return list(out)

def check_raises(exc: type[BaseException], torch_fn: Callable[[], Any], tiny_fn: Callable[[], Any],
                 match: str | None = None) -> None:
  """Both libraries raise `exc` (a subclass counts) for the same bad call; ours says `match` (a substring)."""
  try: torch_fn()
  except exc: pass
  else: raise AssertionError(f"torch does not raise {exc.__name__} here: the test's premise is wrong")
  try: tiny_fn()
  except exc as e:
    if match is not None: assert match in str(e), f"message {str(e)!r} does not say {match!r}"
    return
  raise AssertionError(f"tinygrad does not raise {exc.__name__}")

def kernel_count(*ts: Tensor) -> int:
  """Kernels that realizing ts takes (schedule items, nothing run)."""
  return len(ts[0].schedule(*ts[1:]))

# ---- the conventions of the shape, indexing and nn tests (test_shape_ops, test_indexing, test_nn_ops) ----
# NOTE: those ops move values more than they compute, so their tolerances are tighter; their index outputs are int32
# where torch's are int64
STRICT_TOL: dict[str, tuple[float, float]] = {"float16": (2e-3, 2e-3), "float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}

def check(shapes: Sequence[tuple[int, ...]] | None, torch_fn: Callable[..., Any], tiny_fn: Callable[..., Any] | None = None,
          *, vals: Sequence[Any] | None = None, dtype: str = "float32", low: float = -2.0, high: float = 2.0,
          grad: bool | None = None, atol: float | None = None, rtol: float | None = None,
          grad_atol: float | None = None, seed: int = 0) -> list[Tensor]:
  """check_op with STRICT_TOL and int outputs of any int width."""
  return check_op(shapes, torch_fn, tiny_fn, vals=vals, dtype=dtype, low=low, high=high, grad=grad, atol=atol,
                  rtol=rtol, grad_atol=grad_atol, seed=seed, any_int_width=True, tol=STRICT_TOL)

def raises_like_torch(exc: type[BaseException], torch_call: Callable[[], Any], tiny_call: Callable[[], Any]) -> None:
  """torch raises exc for this call (the premise), and so do we."""
  check_raises(exc, torch_call, tiny_call)

kernels = kernel_count
