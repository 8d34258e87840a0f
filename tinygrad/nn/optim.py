"""Optimizers: SGD (momentum, dampening, nesterov, weight decay), LARS, Adam, AdamW, LAMB and Muon, and OptimizerGroup
(several optimizers stepped as one). `step()` assigns the new values to the parameters and realizes them together with
the optimizer state in one schedule; it runs only in training mode (Tensor.training, see Tensor.train()). A parameter
given twice (shared by two layers) is one parameter: its gradients from every use add up and it is updated once per
step.

Everything a step reads that may change between steps lives in a buffer: the learning rate (`opt.lr`, a Tensor;
`opt.lr = 0.01` or `opt.lr.assign(...)` writes it in place), the momentum (SGD's and Muon's `momentum`, Adam's,
AdamW's and LAMB's `b1`: `set_momentum()` writes it, as a learning-rate scheduler cycling it does) and Adam's step
count. So a TinyJit-captured step, which replays the same kernels, uses the current values. The other
hyperparameters are constants of the kernels."""
from __future__ import annotations
import math
import numpy as np
from tinygrad.tensor import Tensor, base_buffer, ArgumentError
from tinygrad.device import buffer_of
from tinygrad.dtype import DType, dtypes, to_storage_np
from tinygrad.uop import Ops

def _zeros_buffer(like: Tensor, dtype: DType) -> Tensor:
  # NOTE: zeros_like keeps a parameter's layout on several devices: its state is split as it is
  return like.zeros_like(dtype=dtype).contiguous().realize()

def _value_buffer(value: float, shape: tuple[int, ...], dtype: DType, device: str) -> Tensor:
  # NOTE: from host memory, not a constant: writing it with assign is one copy kernel whatever the value
  return Tensor(np.full(shape, value), device=device, dtype=dtype)

def _write_scalar(buf: Tensor, value: float | Tensor, what: str) -> None:
  """Write value into the realized one-element buffer buf at once (a number from the host, no kernel to schedule), so
  a captured step that reads buf sees it."""
  if isinstance(value, Tensor):
    if value.numel() != 1: raise ArgumentError(f"optimizer: {what} must have one element, got shape {value.shape}")
    buf.assign(value.reshape(buf.shape)).realize()
    return
  # NOTE: after any assign still queued for it
  buf.realize()
  base = base_buffer(buf.uop)
  assert base is not None, "a realized tensor reads a buffer"
  # NOTE: on several devices each shard is written (a one-element buffer split over them: the shards that hold it)
  for b in (base.src if base.op is Ops.MULTI else (base,)):
    data = np.ascontiguousarray(to_storage_np(np.full(b.shape, float(value)), buf.dtype)).reshape(-1)
    buffer_of(base_buffer(b) or b).copyin(data.view(np.uint8).data)

class TrainingModeError(RuntimeError, AssertionError):
  """step() outside training mode. Also an AssertionError, the type code written for tinygrad checks for."""

class Optimizer:
  """Holds the parameters that take gradients; `zero_grad()` clears them, `step()` applies one update. `lr` is a
  one-element Tensor (a float given to the constructor becomes a float32 buffer on the parameters' device)."""
  def __init__(self, params: list[Tensor], lr: float | Tensor):
    params = list(params)
    for p in params:
      if not isinstance(p, Tensor): raise TypeError(f"optimizer: params must be Tensors, got a {type(p).__name__}")
      if p.requires_grad is None: p.requires_grad = True
    # NOTE: by identity: a tensor listed twice would otherwise take two updates per step
    self.params = list({id(p): p for p in params if p.requires_grad}.values())
    if not self.params: raise ArgumentError("optimizer: no parameter requires a gradient")
    dev = self.params[0].device
    lr_t = lr if isinstance(lr, Tensor) else _value_buffer(float(lr), (1,), dtypes.float32, dev)
    if lr_t.numel() != 1: raise ArgumentError(f"optimizer: lr must have one element, got shape {lr_t.shape}")
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
    _write_scalar(self._lr, value, "lr")
  def _lr_scalar(self) -> Tensor: return self._lr.reshape(())
  def _momentum_buffer(self, value: float) -> Tensor:
    return _value_buffer(float(value), (1,), dtypes.float32, self.params[0].device).realize()
  def get_momentum(self) -> float | None:
    """The momentum a scheduler cycles (SGD's and Muon's momentum, Adam's b1), None where the optimizer has none."""
    return None
  def set_momentum(self, value: float) -> None:
    """Write the momentum (see get_momentum) into its buffer, read by the next step (a captured one too)."""
    raise ArgumentError(f"{type(self).__name__} has no momentum to set")
  def zero_grad(self) -> None:
    for p in self.params: p.grad = None
  def _grads(self) -> list[Tensor]:
    missing = [i for i, p in enumerate(self.params) if p.grad is None]
    if missing: raise RuntimeError(f"optimizer step: parameters {missing} have no .grad; call loss.backward() first")
    return [p.grad.detach() for p in self.params]  # type: ignore[union-attr]
  def step(self) -> None:
    """Apply one update from the parameters' .grad (only in training mode: outside it a step is almost always a bug,
    e.g. an evaluation loop that also steps)."""
    _run_steps(type(self).__name__, [self])
  def _step(self) -> list[Tensor]: raise NotImplementedError

def _run_steps(name: str, opts: list[Optimizer]) -> None:
  """Build every optimizer's update and realize them all in one schedule."""
  if not Tensor.training:
    raise TrainingModeError(f"{name}.step(): Tensor.training is False; run training steps inside "
                            "`with Tensor.train():`, in a function decorated @Tensor.train(), or after "
                            "Tensor.training = True")
  # NOTE: the gradients (and the losses backward() ran from) read the old parameter values, so they are realized in
  # the same schedule as the update, which orders every read of a buffer before the write that replaces it; with
  # several optimizers that is also why their updates share one schedule (one's gradients read another's parameters)
  from tinygrad.tensor import backward_roots, all_tensors
  from tinygrad.uop import Ops
  grads = [p.grad for o in opts for p in o.params if p.grad is not None]
  roots = [t for t in backward_roots if base_buffer(t.uop) is None]
  backward_roots.clear()
  # NOTE: writes the forward pass queued (BatchNorm running statistics) run with the step; left lazy they would chain
  # one more step per iteration and keep every batch alive
  pending = [t for t in all_tensors if t.uop.op is Ops.ASSIGN]
  updates = [u for o in opts for u in o._step()]
  Tensor.realize(*updates, *[b for o in opts for b in o.buffers], *grads, *roots, *pending)

class OptimizerGroup:
  """Several optimizers (say Muon for the matrices and AdamW for the rest) used as one: `zero_grad()` clears every
  parameter's gradient and `step()` applies each optimizer's update once, all in one schedule (so no optimizer reads a
  parameter another one has already updated). A parameter may belong to only one of them. `group[i]` is the i-th
  optimizer (each keeps its own `lr`)."""
  def __init__(self, *optimizers: Optimizer):
    if not optimizers: raise ArgumentError("OptimizerGroup: needs at least one optimizer")
    for o in optimizers:
      if not isinstance(o, Optimizer): raise TypeError(f"OptimizerGroup: takes optimizers, got a {type(o).__name__}")
    owner: dict[int, int] = {}
    for i, o in enumerate(optimizers):
      for p in o.params:
        if (j := owner.setdefault(id(p), i)) != i:
          raise ArgumentError(f"OptimizerGroup: a parameter of shape {p.shape} is in optimizers {j} "
                              f"({type(optimizers[j]).__name__}) and {i} ({type(o).__name__}); it would be updated "
                              "twice per step: give each parameter to one optimizer")
    self.optimizers = list(optimizers)
    self.params = [p for o in self.optimizers for p in o.params]
    self.buffers = [b for o in self.optimizers for b in o.buffers]
  def __getitem__(self, i: int) -> Optimizer: return self.optimizers[i]
  def __len__(self) -> int: return len(self.optimizers)
  def zero_grad(self) -> None:
    for o in self.optimizers: o.zero_grad()
  def step(self) -> None:
    """One update of every optimizer (only in training mode, as Optimizer.step)."""
    _run_steps(type(self).__name__, self.optimizers)

class SGD(Optimizer):
  """torch's SGD: g = grad + weight_decay * p; with momentum, b = g on the first step and then
  b = momentum * b + (1 - dampening) * g, and g = g + momentum * b (nesterov) or g = b; p -= lr * g."""
  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, momentum: float = 0.0,
               weight_decay: float = 0.0, nesterov: bool = False, dampening: float = 0.0):
    if nesterov and (momentum <= 0 or dampening != 0):
      raise ArgumentError(f"SGD: nesterov momentum needs momentum > 0 and dampening 0, got momentum {momentum} and "
                          f"dampening {dampening}")
    super().__init__(params, lr)
    self.momentum, self.wd, self.nesterov, self.dampening = momentum, weight_decay, nesterov, dampening
    self._mom = self._momentum_buffer(momentum) if momentum else None
    self.b = [_zeros_buffer(p, p.dtype) for p in self.params] if momentum else []
    # NOTE: the first step's buffer is g undamped; with dampening a step count (a buffer, so a replay sees it) tells
    self.t = Tensor.zeros(1, device=self.params[0].device).contiguous().realize() if momentum and dampening else None
    self.buffers = list(self.b) + ([self.t] if self.t is not None else [])
  def get_momentum(self) -> float | None: return self.momentum if self._mom is not None else None
  def set_momentum(self, value: float) -> None:
    if self._mom is None: raise ArgumentError("SGD: built without momentum (momentum=0): there is no momentum to set")
    self.momentum = float(value)
    _write_scalar(self._mom, value, "momentum")
  def _step(self) -> list[Tensor]:
    coef: Tensor | float = 1.0
    if self.t is not None:
      self.t.assign(self.t + 1)
      coef = (self.t.reshape(()) == 1).where(1.0, 1.0 - self.dampening)
    for i, (p, g) in enumerate(zip(self.params, self._grads())):
      g = g + p.detach() * self.wd if self.wd else g
      if self._mom is not None:
        mom = self._mom.reshape(()).cast(p.dtype)
        self.b[i].assign(self.b[i] * mom + g * coef)
        g = g + self.b[i] * mom if self.nesterov else self.b[i]
      p.assign(p.detach() - g * self._lr_scalar())
    return self.params

class LARS(Optimizer):
  """LARS (You, Gitman and Ginsburg 2017, "Large Batch Training of Convolutional Networks", Algorithm 1), per parameter
  tensor p with gradient g, in float32 whatever p's dtype:
    local_lr = tcoef * ||p|| / (||g|| + weight_decay * ||p||), or 1 where ||p|| or that denominator is 0;
    u = lr * local_lr * (g + weight_decay * p);  v = momentum * v + u  (v starts at 0);
    p -= u + momentum * v (nesterov) or v.
  With momentum 0, p -= u. Norms are Euclidean over the whole tensor. The learning rate is inside the velocity, as in
  the paper's v = m v + gamma * lambda * (g + beta w) (torch's SGD keeps it outside; the two agree while lr is
  constant)."""
  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, momentum: float = 0.9, weight_decay: float = 0.0,
               nesterov: bool = False, tcoef: float = 0.001):
    if nesterov and momentum <= 0: raise ArgumentError(f"LARS: nesterov momentum needs momentum > 0, got {momentum}")
    if tcoef <= 0: raise ArgumentError(f"LARS: the trust coefficient tcoef must be positive, got {tcoef}")
    super().__init__(params, lr)
    self.momentum, self.wd, self.nesterov, self.tcoef = momentum, weight_decay, nesterov, tcoef
    self.v = [_zeros_buffer(p, dtypes.float32) for p in self.params] if momentum else []
    self.buffers = list(self.v)
  def _step(self) -> list[Tensor]:
    lr = self._lr_scalar()
    for i, (p, g) in enumerate(zip(self.params, self._grads())):
      pf, g = p.detach().cast(dtypes.float32), g.cast(dtypes.float32)
      pn, gn = pf.square().sum().sqrt(), g.square().sum().sqrt()
      den = gn + pn * self.wd
      local = ((pn > 0) & (den > 0)).where(pn * self.tcoef / den, 1.0)
      u = (g + pf * self.wd if self.wd else g) * (lr * local)
      if self.momentum:
        self.v[i].assign(self.v[i] * self.momentum + u)
        u = u + self.v[i] * self.momentum if self.nesterov else self.v[i]
      p.assign((pf - u).cast(p.dtype))
    return self.params

class LAMB(Optimizer):
  """LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning", Algorithm 2 with phi the identity): Adam's
  moments and bias corrections, r = m_hat / (sqrt(v_hat) + eps) + weight_decay * p, and a per-parameter trust ratio
  ||p|| / ||r|| (1 where either norm is 0): p -= lr * ratio * r. With adam=True the ratio is 1 (AdamW). The step count
  `t` is a buffer and the bias corrections 1 - b**t come from it in the step's kernels, so every step runs the same
  kernels. Moments are float32 whatever the parameters' dtype."""
  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, b1: float = 0.9, b2: float = 0.999,
               eps: float = 1e-6, weight_decay: float = 0.0, adam: bool = False):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
    self._b1 = self._momentum_buffer(b1)
    self.l2 = 0.0  # NOTE: Adam's coupled weight decay (added to the gradient), 0 for LAMB and AdamW
    self.t = Tensor.zeros(1, device=self.params[0].device, dtype=dtypes.float32).contiguous().realize()
    self.m = [_zeros_buffer(p, dtypes.float32) for p in self.params]
    self.v = [_zeros_buffer(p, dtypes.float32) for p in self.params]
    self.buffers = [self.t, *self.m, *self.v]
  def get_momentum(self) -> float | None: return self.b1
  def set_momentum(self, value: float) -> None:
    self.b1 = float(value)
    _write_scalar(self._b1, value, "b1")
  def _step(self) -> list[Tensor]:
    self.t.assign(self.t + 1)
    t, b1 = self.t.reshape(()), self._b1.reshape(())
    # NOTE: b**t as exp2(t * log2(b)): one rounding of t*log2(b) instead of t roundings of a running product
    bc1, bc2 = 1 - (t * b1.log2()).exp2(), 1 - (t * math.log2(self.b2)).exp2()
    lr = self._lr_scalar()
    for i, (p, g) in enumerate(zip(self.params, self._grads())):
      pf = p.detach().cast(dtypes.float32)
      g = g.cast(dtypes.float32)
      if self.l2: g = g + pf * self.l2
      self.m[i].assign(self.m[i] * b1 + g * (1 - b1))
      self.v[i].assign(self.v[i] * self.b2 + g * g * (1 - self.b2))
      up = (self.m[i] / bc1) / ((self.v[i] / bc2).sqrt() + self.eps)
      if self.wd: up = up + pf * self.wd
      if not self.adam:
        r1, r2 = pf.square().sum().sqrt(), up.square().sum().sqrt()
        up = up * ((r1 > 0) & (r2 > 0)).where(r1 / r2, 1.0)
      p.assign((pf - up * lr).cast(p.dtype))
    return self.params

class AdamW(LAMB):
  """Adam with decoupled weight decay (torch's AdamW): p -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)."""
  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, b1: float = 0.9, b2: float = 0.999,
               eps: float = 1e-8, weight_decay: float = 0.01):
    super().__init__(params, lr, b1, b2, eps, weight_decay, adam=True)

class Adam(LAMB):
  """torch's Adam; weight_decay is the L2 penalty added to the gradient (coupled), 0 by default."""
  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.001, b1: float = 0.9, b2: float = 0.999,
               eps: float = 1e-8, weight_decay: float = 0.0):
    super().__init__(params, lr, b1, b2, eps, 0.0, adam=True)
    self.l2 = weight_decay

def _newton_schulz(g: Tensor, steps: int, coefficients: tuple[float, float, float], eps: float) -> Tensor:
  """The quintic Newton-Schulz iteration of Muon: X = G / (||G||_F + eps), then `steps` times A = X X^T,
  X = a X + (b A + c A A) X, on the wide orientation (rows <= cols) so A is the small Gram matrix."""
  a, b, c = coefficients
  tall = g.shape[0] > g.shape[1]
  x = g.T if tall else g
  x = x / (x.square().sum().sqrt() + eps)
  for _ in range(steps):
    A = x @ x.T
    x = x * a + (A * b + (A @ A) * c) @ x
  return x.T if tall else x

class Muon(Optimizer):
  """Muon (K. Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural networks"; torch.optim.Muon follows
  the same algorithm): b = momentum * b + g; u = g + momentum * b (nesterov) or b; O = Newton-Schulz(u) (ns_steps
  iterations with ns_coefficients, eps in the normalisation); p = p * (1 - lr * weight_decay) - lr * scale * O with
  scale = sqrt(max(1, rows / cols)) ("original", the published scaling) or 0.2 * sqrt(max(rows, cols))
  ("match_rms_adamw", Moonshot's). For matrices: a parameter with more than 2 axes is treated as (shape[0], rest) (a
  conv filter); 0-d and 1-d parameters are an error (optimise them with AdamW). The iteration runs in float32 (the
  reference implementation uses bfloat16)."""
  def __init__(self, params: list[Tensor], lr: float | Tensor = 0.02, momentum: float = 0.95, nesterov: bool = True,
               ns_steps: int = 5, ns_coefficients: tuple[float, float, float] = (3.4445, -4.775, 2.0315),
               weight_decay: float = 0.0, eps: float = 1e-7, adjust_lr_fn: str = "original"):
    super().__init__(params, lr)
    if bad := [(i, p.shape) for i, p in enumerate(self.params) if p.ndim < 2]:
      raise ArgumentError(f"Muon: orthogonalizes matrices; parameters {bad} have fewer than 2 axes (give biases, norms "
                          "and other vectors to AdamW)")
    if adjust_lr_fn not in ("original", "match_rms_adamw"):
      raise ArgumentError(f"Muon: adjust_lr_fn must be 'original' or 'match_rms_adamw', got {adjust_lr_fn!r}")
    if ns_steps < 0 or len(ns_coefficients) != 3:
      raise ArgumentError(f"Muon: ns_steps ({ns_steps}) must be >= 0 and ns_coefficients three numbers")
    self.momentum, self.nesterov, self.ns_steps, self.ns_coefficients = momentum, nesterov, ns_steps, ns_coefficients
    self.wd, self.eps, self.adjust_lr_fn = weight_decay, eps, adjust_lr_fn
    self._mom = self._momentum_buffer(momentum)
    self.b = [_zeros_buffer(p, dtypes.float32) for p in self.params]
    self.buffers = list(self.b)
  def get_momentum(self) -> float | None: return self.momentum
  def set_momentum(self, value: float) -> None:
    self.momentum = float(value)
    _write_scalar(self._mom, value, "momentum")
  def _scale(self, rows: int, cols: int) -> float:
    if self.adjust_lr_fn == "original": return math.sqrt(max(1.0, rows / cols))
    return 0.2 * math.sqrt(max(rows, cols))
  def _step(self) -> list[Tensor]:
    lr = self._lr_scalar()
    for i, (p, g) in enumerate(zip(self.params, self._grads())):
      g = g.cast(dtypes.float32)
      mom = self._mom.reshape(())
      self.b[i].assign(self.b[i] * mom + g)
      u = g + self.b[i] * mom if self.nesterov else self.b[i]
      rows = p.int_shape("Muon")[0]
      cols = math.prod(p.int_shape("Muon")) // rows if rows else 0
      o = _newton_schulz(u.reshape(rows, cols), self.ns_steps, self.ns_coefficients, self.eps).reshape(p.shape)
      pf = p.detach().cast(dtypes.float32)
      if self.wd: pf = pf * (1 - lr * self.wd)
      p.assign((pf - o * (lr * self._scale(rows, max(cols, 1)))).cast(p.dtype))
    return self.params

__all__ = ["Optimizer", "OptimizerGroup", "SGD", "LARS", "Adam", "AdamW", "LAMB", "Muon", "TrainingModeError"]
