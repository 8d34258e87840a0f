"""Compare a tinygrad.nn layer with torch's layer of the same name: torch's weights (and buffers) are copied into ours,
both run on the same inputs, and the outputs, the gradients of the inputs and the gradients of every parameter must
agree. Backward seeds each output with a random upstream gradient (not ones), so a rule that mixes up elements shows.

    check_layer(nn.Conv2d(3, 4, 3), torch.nn.Conv2d(3, 4, 3), [x])          # x: a numpy array
    check_layer(ours, theirs, [x, h, c], call=lambda m, x, h, c: m(x, (h, c)))

float16: the torch layer runs in float32 on the same half-rounded inputs and weights (torch's CPU half kernels are
not all there), and the tolerance is the half one."""
from __future__ import annotations
from typing import Any, Callable, Sequence
import numpy as np
import torch
from tinygrad import Tensor, dtypes

TOL = {"float32": (2e-5, 2e-4), "float16": (1e-2, 1e-2)}
GRAD_TOL = {"float32": (1e-4, 1e-3), "float16": (3e-2, 3e-2)}

def rand(*shape: int, seed: int = 0, low: float = -1.0, high: float = 1.0) -> np.ndarray:
  return np.random.default_rng(seed).uniform(low, high, size=shape).astype(np.float32)

def _np_dtype(dtype: str) -> Any: return np.float16 if dtype == "float16" else np.float32

def copy_weights(ours: Any, theirs: torch.nn.Module, dtype: str = "float32") -> dict[str, Tensor]:
  """torch's parameters and buffers (by their state-dict names, which are our attribute names) into `ours`; returns
  our parameters by name. Float tensors go over in `dtype`, others as they are."""
  params = dict(theirs.named_parameters())
  out: dict[str, Tensor] = {}
  for name, t in theirs.state_dict().items():
    v = t.detach().numpy()
    if t.is_floating_point(): v = v.astype(_np_dtype(dtype))
    assert hasattr(ours, name), f"{type(ours).__name__} has no attribute {name} (torch's state dict has it)"
    ref = getattr(ours, name)
    assert ref is None or tuple(ref.shape) == tuple(v.shape), f"{name}: ours {ref.shape}, torch {v.shape}"
    new = Tensor(v, requires_grad=True if name in params else None)
    if name in params: out[name] = new
    setattr(ours, name, new)
  return out

def _outputs(r: Any) -> list[Any]: return list(r) if isinstance(r, (tuple, list)) else [r]

def check_layer(ours: Any, theirs: torch.nn.Module, inputs: Sequence[np.ndarray], dtype: str = "float32",
                call: Callable[..., Any] | None = None, grad: bool = True, int_inputs: Sequence[int] = (),
                tol: tuple[float, float] | None = None, grad_tol: tuple[float, float] | None = None,
                seed: int = 1) -> list[Tensor]:
  """Run both layers on `inputs` (positions in int_inputs are index tensors, no gradient) and compare forward and
  backward. Returns our outputs."""
  call = call or (lambda m, *xs: m(*xs))
  theirs = theirs.float()
  params = copy_weights(ours, theirs, dtype)
  if dtype == "float16":
    # NOTE: torch computes in float32 from exactly the half values we hold
    with torch.no_grad():
      for t in theirs.state_dict().values():
        if t.is_floating_point(): t.copy_(t.half().float())
  xs = [x if i in int_inputs else x.astype(_np_dtype(dtype)) for i, x in enumerate(inputs)]
  tx = [Tensor(x, requires_grad=None if i in int_inputs else grad) for i, x in enumerate(xs)]
  rx = [torch.tensor(x.astype(np.int64) if i in int_inputs else x.astype(np.float32), requires_grad=grad and
                     i not in int_inputs) for i, x in enumerate(xs)]
  t_out, r_out = _outputs(call(ours, *tx)), _outputs(call(theirs, *rx))
  assert len(t_out) == len(r_out)
  atol, rtol = tol or TOL[dtype]
  want_dt = dtypes.float16 if dtype == "float16" else dtypes.float32
  for k, (a, b) in enumerate(zip(t_out, r_out)):
    assert a.shape == tuple(b.shape), f"output {k}: shape {a.shape}, torch {tuple(b.shape)}"
    assert a.dtype is want_dt, f"output {k}: dtype {a.dtype}, expected {want_dt}"
    np.testing.assert_allclose(a.numpy().astype(np.float32), b.detach().numpy(), atol=atol, rtol=rtol,
                               err_msg=f"forward output {k}")
  if not grad: return t_out
  rng = np.random.default_rng(seed)
  gs = [rng.uniform(-1, 1, size=b.shape).astype(np.float32) for b in r_out]
  loss_t = None
  for a, g in zip(t_out, gs):
    term = (a.cast(dtypes.float32) * Tensor(g)).sum()
    loss_t = term if loss_t is None else loss_t + term
  assert loss_t is not None
  loss_t.backward()
  sum((b * torch.tensor(g)).sum() for b, g in zip(r_out, gs)).backward()  # type: ignore[union-attr]
  gatol, grtol = grad_tol or GRAD_TOL[dtype]
  for i, (a, b) in enumerate(zip(tx, rx)):
    if i in int_inputs: continue
    assert a.grad is not None and b.grad is not None, f"input {i} got no gradient"
    np.testing.assert_allclose(a.grad.numpy().astype(np.float32), b.grad.numpy(), atol=gatol, rtol=grtol,
                               err_msg=f"gradient of input {i}")
  theirs_params = dict(theirs.named_parameters())
  for name, p in params.items():
    ref = theirs_params[name].grad
    assert p.grad is not None and ref is not None, f"parameter {name} got no gradient"
    np.testing.assert_allclose(p.grad.numpy().astype(np.float32), ref.numpy(), atol=gatol, rtol=grtol,
                               err_msg=f"gradient of parameter {name}")
  return t_out
