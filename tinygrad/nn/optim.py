"""Optimizers: SGD (momentum, nesterov, weight decay), Adam and AdamW. `step()` assigns the new values to the parameters
and realizes them together with the optimizer state in one schedule."""
from __future__ import annotations
from tinygrad.tensor import Tensor
from tinygrad.dtype import DType, dtypes

def _zeros_buffer(like: Tensor, dtype: DType) -> Tensor:
  return Tensor.zeros(*like.shape, device=like.device, dtype=dtype).contiguous().realize()

class Optimizer:
  """Holds the parameters that take gradients; `zero_grad()` clears them, `step()` applies one update."""
  def __init__(self, params: list[Tensor], lr: float):
    for p in params:
      if p.requires_grad is None: p.requires_grad = True
    self.params = [p for p in params if p.requires_grad]
    if not self.params: raise ValueError("optimizer: no parameter requires a gradient")
    self.lr = lr
    self.buffers: list[Tensor] = []
  def zero_grad(self) -> None:
    for p in self.params: p.grad = None
  def _grads(self) -> list[Tensor]:
    missing = [i for i, p in enumerate(self.params) if p.grad is None]
    if missing: raise RuntimeError(f"optimizer step: parameters {missing} have no .grad; call loss.backward() first")
    return [p.grad.detach() for p in self.params]  # type: ignore[union-attr]
  def step(self) -> None:
    # NOTE: the gradients (and the losses backward() ran from) read the old parameter values, so they are realized in
    # the same schedule as the update, which orders every read of a buffer before the write that replaces it
    from tinygrad.tensor import _backward_roots, _base_buffer, _all_tensors
    from tinygrad.uop import Ops
    grads = [p.grad for p in self.params if p.grad is not None]
    roots = [t for t in list(_backward_roots) if _base_buffer(t.uop) is None]
    _backward_roots.clear()
    # NOTE: writes the forward pass queued (BatchNorm running statistics) run with the step; left lazy they would chain
    # one more step per iteration and keep every batch alive
    pending = [t for t in list(_all_tensors) if t.uop.op is Ops.ASSIGN]
    updates = self._step()
    Tensor.realize(*updates, *self.buffers, *grads, *roots, *pending)
  def _step(self) -> list[Tensor]: raise NotImplementedError

class SGD(Optimizer):
  """p -= lr * (g + weight_decay * p), with momentum b = momentum * b + g (nesterov: g + momentum * b)."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0,
               nesterov: bool = False):
    super().__init__(params, lr)
    self.momentum, self.wd, self.nesterov = momentum, weight_decay, nesterov
    self.b = [_zeros_buffer(p, p.dtype) for p in self.params] if momentum else []
    self.buffers = list(self.b)
  def _step(self) -> list[Tensor]:
    for i, (p, g) in enumerate(zip(self.params, self._grads())):
      g = g + p.detach() * self.wd if self.wd else g
      if self.momentum:
        self.b[i].assign(self.b[i] * self.momentum + g)
        g = g + self.b[i] * self.momentum if self.nesterov else self.b[i]
      p.assign(p.detach() - g * self.lr)
    return self.params

class AdamW(Optimizer):
  """Adam with decoupled weight decay (AdamW); Adam is AdamW with weight_decay=0. The bias corrections b1**t, b2**t live
  in buffers so every step runs the same kernels."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
               weight_decay: float = 0.01):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd = b1, b2, eps, weight_decay
    dev = self.params[0].device
    self.b1_t = Tensor.ones(1, device=dev, dtype=dtypes.float32).contiguous().realize()
    self.b2_t = Tensor.ones(1, device=dev, dtype=dtypes.float32).contiguous().realize()
    self.m = [_zeros_buffer(p, dtypes.float32) for p in self.params]
    self.v = [_zeros_buffer(p, dtypes.float32) for p in self.params]
    self.buffers = [self.b1_t, self.b2_t, *self.m, *self.v]
  def _step(self) -> list[Tensor]:
    self.b1_t.assign(self.b1_t * self.b1)
    self.b2_t.assign(self.b2_t * self.b2)
    for i, (p, g) in enumerate(zip(self.params, self._grads())):
      g = g.cast(dtypes.float32)
      self.m[i].assign(self.m[i] * self.b1 + g * (1 - self.b1))
      self.v[i].assign(self.v[i] * self.b2 + g * g * (1 - self.b2))
      m_hat = self.m[i] / (1 - self.b1_t)
      v_hat = self.v[i] / (1 - self.b2_t)
      up = m_hat / (v_hat.sqrt() + self.eps) + p.detach().cast(dtypes.float32) * self.wd
      p.assign((p.detach().cast(dtypes.float32) - up * self.lr).cast(p.dtype))
    return self.params

def Adam(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> AdamW:
  return AdamW(params, lr, b1, b2, eps, weight_decay=0.0)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
