"""Optimizers: SGD (momentum, nesterov, weight decay), Adam and AdamW. `step()` assigns the new values to the parameters
and realizes them together with the optimizer state in one schedule.

Everything a step reads that may change between steps lives in a buffer: the learning rate (`opt.lr`, a Tensor;
`opt.lr = 0.01` or `opt.lr.assign(...)` writes it in place) and Adam's step count. So a TinyJit-captured step, which
replays the same kernels, uses the current values. The other hyperparameters are constants of the kernels."""
from __future__ import annotations
import math
import numpy as np
from tinygrad.tensor import Tensor, _base_buffer
from tinygrad.device import buffer_of
from tinygrad.dtype import DType, dtypes, to_storage_np

def _zeros_buffer(like: Tensor, dtype: DType) -> Tensor:
  return Tensor.zeros(*like.shape, device=like.device, dtype=dtype).contiguous().realize()

def _value_buffer(value: float, shape: tuple[int, ...], dtype: DType, device: str) -> Tensor:
  # NOTE: from host memory, not a constant: writing it with assign is one copy kernel whatever the value
  return Tensor(np.full(shape, value), device=device, dtype=dtype)

class Optimizer:
  """Holds the parameters that take gradients; `zero_grad()` clears them, `step()` applies one update. `lr` is a
  one-element Tensor (a float given to the constructor becomes a float32 buffer on the parameters' device)."""
  def __init__(self, params: list[Tensor], lr: float | Tensor):
    for p in params:
      if p.requires_grad is None: p.requires_grad = True
    self.params = [p for p in params if p.requires_grad]
    if not self.params: raise ValueError("optimizer: no parameter requires a gradient")
    dev = self.params[0].device
    lr_t = lr if isinstance(lr, Tensor) else _value_buffer(float(lr), (1,), dtypes.float32, dev)
    if lr_t.numel() != 1: raise ValueError(f"optimizer: lr must have one element, got shape {lr_t.shape}")
    if not dtypes.is_float(lr_t.dtype): raise TypeError(f"optimizer: lr must be a float tensor, got {lr_t.dtype}")
    self._lr = lr_t.realize()
    self.buffers: list[Tensor] = []
  @property
  def lr(self) -> Tensor:
    """The learning rate: a buffer read by every step (assign to it, or set `opt.lr = value`, between steps)."""
    return self._lr
  @lr.setter
  def lr(self, value: float | Tensor) -> None:
    # NOTE: written into the same buffer, and at once, so a captured step (which reads that buffer) sees it
    if isinstance(value, Tensor):
      if value.numel() != 1: raise ValueError(f"optimizer: lr must have one element, got shape {value.shape}")
      self._lr.assign(value.reshape(self._lr.shape)).realize()
      return
    # a number goes straight into the buffer from the host (after any assign still queued for it): no kernel to schedule
    self._lr.realize()
    base = _base_buffer(self._lr.uop)
    assert base is not None, "a realized tensor reads a buffer"
    data = np.ascontiguousarray(to_storage_np(np.full(self._lr.shape, float(value)), self._lr.dtype)).reshape(-1)
    buffer_of(base).copyin(data.view(np.uint8).data)
  def _lr_scalar(self) -> Tensor: return self._lr.reshape(())
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
  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, momentum: float = 0.0,
               weight_decay: float = 0.0, nesterov: bool = False):
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
      p.assign(p.detach() - g * self._lr_scalar())
    return self.params

class AdamW(Optimizer):
  """Adam with decoupled weight decay (AdamW); Adam is AdamW with weight_decay=0. The step count `t` is a buffer and the
  bias corrections 1 - b**t are computed from it in the step's kernels, so every step runs the same kernels."""
  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, b1: float = 0.9, b2: float = 0.999,
               eps: float = 1e-8, weight_decay: float = 0.01):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd = b1, b2, eps, weight_decay
    self.t = Tensor.zeros(1, device=self.params[0].device, dtype=dtypes.float32).contiguous().realize()
    self.m = [_zeros_buffer(p, dtypes.float32) for p in self.params]
    self.v = [_zeros_buffer(p, dtypes.float32) for p in self.params]
    self.buffers = [self.t, *self.m, *self.v]
  def _step(self) -> list[Tensor]:
    self.t.assign(self.t + 1)
    t = self.t.reshape(())
    # NOTE: b**t as exp2(t * log2(b)): one rounding of t*log2(b) instead of t roundings of a running product
    bc1, bc2 = 1 - (t * math.log2(self.b1)).exp2(), 1 - (t * math.log2(self.b2)).exp2()
    lr = self._lr_scalar()
    for i, (p, g) in enumerate(zip(self.params, self._grads())):
      g = g.cast(dtypes.float32)
      self.m[i].assign(self.m[i] * self.b1 + g * (1 - self.b1))
      self.v[i].assign(self.v[i] * self.b2 + g * g * (1 - self.b2))
      m_hat = self.m[i] / bc1
      v_hat = self.v[i] / bc2
      up = m_hat / (v_hat.sqrt() + self.eps) + p.detach().cast(dtypes.float32) * self.wd
      p.assign((p.detach().cast(dtypes.float32) - up * lr).cast(p.dtype))
    return self.params

def Adam(params: list[Tensor], lr: float | Tensor = 0.001, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> AdamW:
  return AdamW(params, lr, b1, b2, eps, weight_decay=0.0)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
