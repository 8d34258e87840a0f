"""Learning-rate schedulers with torch.optim.lr_scheduler's names, arguments and values: StepLR, MultiStepLR,
ExponentialLR, LambdaLR, ConstantLR, LinearLR (linear warmup), CosineAnnealingLR, CosineAnnealingWarmRestarts,
OneCycleLR (which also cycles the momentum), SequentialLR (one schedule after another, e.g. warmup then cosine) and
ReduceLROnPlateau.

A scheduler works on any optimizer of tinygrad.nn.optim, or on an OptimizerGroup (one learning rate per optimizer, as
torch's per-parameter-group ones). Use it as in torch: `opt.step()` then `sched.step()` once per step (or epoch). Each
step computes the new rates on the host (closed forms, as torch's `_get_closed_form_lr`) and writes them into the
optimizers' learning-rate buffers (`opt.lr`, see tinygrad.nn.optim): a TinyJit-captured training step reads those
buffers, so changing the rate never recaptures or recompiles anything. Only ReduceLROnPlateau reads a value back (the
metric it is given)."""
from __future__ import annotations
import bisect, math
from typing import Any, Callable, Sequence
from tinygrad.tensor import Tensor, ArgumentError
from tinygrad.nn.optim import Optimizer, OptimizerGroup

def _optimizers(optimizer: Optimizer | OptimizerGroup) -> list[Optimizer]:
  if isinstance(optimizer, OptimizerGroup): return list(optimizer.optimizers)
  if isinstance(optimizer, Optimizer): return [optimizer]
  raise TypeError(f"scheduler: takes an Optimizer or an OptimizerGroup, got a {type(optimizer).__name__}")

def _per_optimizer(value: float | Sequence[float], n: int, what: str) -> list[float]:
  vals = [float(v) for v in value] if isinstance(value, Sequence) else [float(value)] * n
  if len(vals) != n: raise ArgumentError(f"scheduler: {what} has {len(vals)} values for {n} optimizers")
  return vals

class LRScheduler:
  """The base: `base_lrs` (each optimizer's rate when the scheduler was made), `last_epoch` (steps taken; the
  constructor takes step 0, as torch's), `step()`, `get_last_lr()`, `state_dict()` / `load_state_dict()`. A subclass
  gives the closed form `lr_at(epoch)`."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, last_epoch: int = -1):
    self.optimizer = optimizer
    self._opts = _optimizers(optimizer)
    self.base_lrs = [float(o.lr.item()) for o in self._opts]
    self.last_epoch = last_epoch
    self._last_lr = list(self.base_lrs)
    self.step()
  def lr_at(self, epoch: int) -> list[float]: raise NotImplementedError
  def step(self, epoch: int | None = None) -> None:
    """Advance one step (or go to `epoch`) and write the new rates into the optimizers."""
    self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
    self._set(self.lr_at(self.last_epoch))
  def _set(self, lrs: list[float]) -> None:
    for o, lr in zip(self._opts, lrs): o.lr = lr
    self._last_lr = list(lrs)
  def get_last_lr(self) -> list[float]:
    """The rates the last step set, one per optimizer."""
    return list(self._last_lr)
  def state_dict(self) -> dict[str, Any]:
    """Everything but the optimizer (torch's convention), for a checkpoint."""
    return {k: v for k, v in vars(self).items() if k not in ("optimizer", "_opts") and not callable(v)}
  def load_state_dict(self, state: dict[str, Any]) -> None:
    """Restore what state_dict() gave and write the restored rates into the optimizers."""
    vars(self).update(state)
    self._set(self._last_lr)

class LambdaLR(LRScheduler):
  """base_lr * lr_lambda(epoch) (one function, or one per optimizer)."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, lr_lambda: Callable[[int],
                                                                                float] | Sequence[Callable[[int],
                                                                                                           float]],
               last_epoch: int = -1):
    n = len(_optimizers(optimizer))
    fns: list[Callable[[int], float]] = list(lr_lambda) if isinstance(lr_lambda, Sequence) else [lr_lambda] * n
    self.lr_lambdas = fns
    if len(self.lr_lambdas) != n: raise ArgumentError(f"LambdaLR: {len(self.lr_lambdas)} functions for {n} optimizers")
    super().__init__(optimizer, last_epoch)
  def lr_at(self, epoch: int) -> list[float]: return [b * f(epoch) for b, f in zip(self.base_lrs, self.lr_lambdas)]

class StepLR(LRScheduler):
  """base_lr * gamma ** (epoch // step_size)."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
    if step_size <= 0: raise ArgumentError(f"StepLR: step_size must be positive, got {step_size}")
    self.step_size, self.gamma = step_size, gamma
    super().__init__(optimizer, last_epoch)
  def lr_at(self,
            epoch: int) -> list[float]: return [b * self.gamma ** (epoch // self.step_size) for b in self.base_lrs]

class MultiStepLR(LRScheduler):
  """base_lr * gamma ** (how many milestones are <= epoch); a milestone listed twice counts twice, as torch's."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, milestones: Sequence[int], gamma: float = 0.1,
               last_epoch: int = -1):
    self.milestones, self.gamma = sorted(int(m) for m in milestones), gamma
    super().__init__(optimizer, last_epoch)
  def lr_at(self, epoch: int) -> list[float]:
    return [b * self.gamma ** bisect.bisect_right(self.milestones, epoch) for b in self.base_lrs]

class ExponentialLR(LRScheduler):
  """base_lr * gamma ** epoch."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, gamma: float, last_epoch: int = -1):
    self.gamma = gamma
    super().__init__(optimizer, last_epoch)
  def lr_at(self, epoch: int) -> list[float]: return [b * self.gamma ** epoch for b in self.base_lrs]

class ConstantLR(LRScheduler):
  """base_lr * factor until total_iters, then base_lr."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, factor: float = 1.0 / 3, total_iters: int = 5,
               last_epoch: int = -1):
    if not 0 <= factor <= 1: raise ArgumentError(f"ConstantLR: factor must be between 0 and 1, got {factor}")
    self.factor, self.total_iters = factor, total_iters
    super().__init__(optimizer, last_epoch)
  def lr_at(self, epoch: int) -> list[float]:
    return [b * (self.factor if epoch < self.total_iters else 1.0) for b in self.base_lrs]

class LinearLR(LRScheduler):
  """Linear warmup (or decay): base_lr * factor, the factor going linearly from start_factor to end_factor over
  total_iters steps and staying there."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
               total_iters: int = 5, last_epoch: int = -1):
    if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
      raise ArgumentError(f"LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got {start_factor} and "
                          f"{end_factor}")
    self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
    super().__init__(optimizer, last_epoch)
  def lr_at(self, epoch: int) -> list[float]:
    f = self.start_factor + (self.end_factor - self.start_factor) * min(epoch, self.total_iters) / self.total_iters
    return [b * f for b in self.base_lrs]

class CosineAnnealingLR(LRScheduler):
  """eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (past T_max the cosine goes on, back up)."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
    if T_max <= 0: raise ArgumentError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
    self.T_max, self.eta_min = T_max, eta_min
    super().__init__(optimizer, last_epoch)
  def lr_at(self, epoch: int) -> list[float]:
    return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2 for b in self.base_lrs]

class CosineAnnealingWarmRestarts(LRScheduler):
  """SGDR (Loshchilov and Hutter 2017): cosine annealing from base_lr to eta_min over T_0 steps, then restart, each
  period T_mult times the previous one."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
               last_epoch: int = -1):
    if T_0 <= 0 or not isinstance(T_0, int): raise ArgumentError(f"CosineAnnealingWarmRestarts: T_0 must be a "
                                                                 f"positive int, got {T_0}")
    if T_mult < 1 or not isinstance(T_mult, int):
      raise ArgumentError(f"CosineAnnealingWarmRestarts: T_mult must be an int >= 1, got {T_mult}")
    self.T_0, self.T_mult, self.eta_min = T_0, T_mult, eta_min
    super().__init__(optimizer, last_epoch)
  def _cycle(self, epoch: int) -> tuple[int, int]:
    """(T_cur, T_i): the position in the current period and its length."""
    if self.T_mult == 1: return epoch % self.T_0, self.T_0
    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult)) if epoch >= self.T_0 else 0
    # NOTE: the float log can land one period off at a boundary; step to the period that holds epoch
    while n > 0 and self.T_0 * (self.T_mult ** n - 1) // (self.T_mult - 1) > epoch: n -= 1
    while self.T_0 * (self.T_mult ** (n + 1) - 1) // (self.T_mult - 1) <= epoch: n += 1
    return epoch - self.T_0 * (self.T_mult ** n - 1) // (self.T_mult - 1), self.T_0 * self.T_mult ** n
  def lr_at(self, epoch: int) -> list[float]:
    t_cur, t_i = self._cycle(epoch)
    return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2 for b in self.base_lrs]

class OneCycleLR(LRScheduler):
  """The 1cycle policy (Smith and Topin 2017): from max_lr / div_factor up to max_lr over pct_start of total_steps,
  then down to the initial rate / final_div_factor (three_phase: up, back down to the initial rate, then down to the
  minimum), each phase a cosine (anneal_strategy 'cos') or a line ('linear'). With cycle_momentum the momentum (SGD's,
  Muon's momentum, Adam's b1) goes the other way, between max_momentum and base_momentum; the optimizer must have one.
  total_steps, or epochs * steps_per_epoch; stepping past it is an error, as torch's."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, max_lr: float | Sequence[float],
               total_steps: int | None = None,
               epochs: int | None = None, steps_per_epoch: int | None = None, pct_start: float = 0.3,
               anneal_strategy: str = "cos", cycle_momentum: bool = True, base_momentum: float | Sequence[float] = 0.85,
               max_momentum: float | Sequence[float] = 0.95, div_factor: float = 25.0, final_div_factor: float = 1e4,
               three_phase: bool = False, last_epoch: int = -1):
    opts = _optimizers(optimizer)
    if total_steps is None:
      if epochs is None or steps_per_epoch is None or epochs <= 0 or steps_per_epoch <= 0:
        raise ArgumentError("OneCycleLR: give total_steps, or positive epochs and steps_per_epoch")
      total_steps = epochs * steps_per_epoch
    if total_steps <= 0: raise ArgumentError(f"OneCycleLR: total_steps must be positive, got {total_steps}")
    if not 0 <= pct_start <= 1: raise ArgumentError(f"OneCycleLR: pct_start must be in [0, 1], got {pct_start}")
    if anneal_strategy not in ("cos", "linear"):
      raise ArgumentError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
    self.total_steps, self.anneal_strategy, self.cycle_momentum = total_steps, anneal_strategy, cycle_momentum
    self.max_lrs = _per_optimizer(max_lr, len(opts), "max_lr")
    self.initial_lrs = [m / div_factor for m in self.max_lrs]
    self.min_lrs = [i / final_div_factor for i in self.initial_lrs]
    self.base_momentums = _per_optimizer(base_momentum, len(opts), "base_momentum")
    self.max_momentums = _per_optimizer(max_momentum, len(opts), "max_momentum")
    up = float(pct_start * total_steps) - 1
    # (end step, lr from, lr to, momentum from, momentum to), "initial"/"max"/"min" naming the per-optimizer rates
    self._phases = [(up, "initial", "max", "max", "base"), (float(2 * pct_start * total_steps) - 2, "max", "initial",
                                                            "base", "max"),
                    (total_steps - 1.0, "initial", "min", "max", "max")] if three_phase else \
      [(up, "initial", "max", "max", "base"), (total_steps - 1.0, "max", "min", "base", "max")]
    if cycle_momentum:
      if bad := [type(o).__name__ for o in opts if o.get_momentum() is None]:
        raise ArgumentError(f"OneCycleLR: cycle_momentum needs optimizers with a momentum, {bad} have none (SGD with "
                            "momentum=0 has none); pass cycle_momentum=False")
    # NOTE: as torch, the schedule starts from max_lr / div_factor whatever rate the optimizer was made with
    for o, lr in zip(opts, self.initial_lrs): o.lr = lr
    super().__init__(optimizer, last_epoch)
  def _anneal(self, start: float, end: float, pct: float) -> float:
    if self.anneal_strategy == "cos": return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)
    return (end - start) * pct + start
  def _at(self, epoch: int) -> tuple[list[float], list[float]]:
    if epoch > self.total_steps:
      raise ArgumentError(f"OneCycleLR: tried to step {epoch} times; total_steps is {self.total_steps}")
    rates = {"initial": self.initial_lrs, "max": self.max_lrs, "min": self.min_lrs}
    moms = {"base": self.base_momentums, "max": self.max_momentums}
    start = 0.0
    for k, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
      if epoch <= end or k == len(self._phases) - 1:
        pct = (epoch - start) / (end - start)
        lrs = [self._anneal(a, b, pct) for a, b in zip(rates[lr0], rates[lr1])]
        return lrs, [self._anneal(a, b, pct) for a, b in zip(moms[m0], moms[m1])]
      start = end
    raise AssertionError("unreachable: the last phase always matches")
  def lr_at(self, epoch: int) -> list[float]: return self._at(epoch)[0]
  def step(self, epoch: int | None = None) -> None:
    super().step(epoch)
    if not self.cycle_momentum: return
    for o, m in zip(self._opts, self._at(self.last_epoch)[1]): o.set_momentum(m)

class SequentialLR(LRScheduler):
  """schedulers[0] until milestones[0], then schedulers[1] from its epoch 0, and so on (torch's SequentialLR): e.g.
  LinearLR warmup for 5 steps then CosineAnnealingLR. Every scheduler must be on this optimizer; each one's own
  state is not advanced (this one computes their closed forms)."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, schedulers: Sequence[LRScheduler],
               milestones: Sequence[int],
               last_epoch: int = -1):
    if len(schedulers) < 1 or len(milestones) != len(schedulers) - 1:
      raise ArgumentError(f"SequentialLR: {len(schedulers)} schedulers need {len(schedulers) - 1} milestones, got "
                          f"{len(milestones)}")
    if any(s.optimizer is not optimizer for s in schedulers):
      raise ArgumentError("SequentialLR: every scheduler must be on the optimizer given to SequentialLR")
    if any(isinstance(s, (OneCycleLR, ReduceLROnPlateau)) for s in schedulers):
      raise ArgumentError("SequentialLR: OneCycleLR and ReduceLROnPlateau cannot be chained (no closed form)")
    self.schedulers, self.milestones = list(schedulers), [int(m) for m in milestones]
    # NOTE: every one starts from the rates the first one started from (the later ones were made after it changed them)
    for s in self.schedulers[1:]: s.base_lrs = list(self.schedulers[0].base_lrs)
    super().__init__(optimizer, last_epoch)
    self.base_lrs = list(self.schedulers[0].base_lrs)
  def lr_at(self, epoch: int) -> list[float]:
    k = bisect.bisect_right(self.milestones, epoch)
    return self.schedulers[k].lr_at(epoch - (self.milestones[k - 1] if k else 0))

class ReduceLROnPlateau:
  """Multiply each rate by factor (not below min_lr) once the metric given to `step(metric)` has not improved for more
  than patience steps; then wait cooldown steps. mode 'min' (a loss) or 'max' (an accuracy); an improvement beats
  the best by threshold, relative ('rel') or absolute ('abs'); a change smaller than eps is not made. The metric may
  be a one-element Tensor (read on the host) or a number."""
  def __init__(self, optimizer: Optimizer | OptimizerGroup, mode: str = "min", factor: float = 0.1, patience: int = 10,
               threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
               min_lr: float | Sequence[float] = 0.0, eps: float = 1e-8):
    if factor >= 1.0: raise ArgumentError(f"ReduceLROnPlateau: factor must be < 1, got {factor}")
    if mode not in ("min", "max"): raise ArgumentError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
    if threshold_mode not in ("rel", "abs"):
      raise ArgumentError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
    self.optimizer = optimizer
    self._opts = _optimizers(optimizer)
    self.min_lrs = _per_optimizer(min_lr, len(self._opts), "min_lr")
    self.mode, self.factor, self.patience, self.threshold = mode, factor, patience, threshold
    self.threshold_mode, self.cooldown, self.eps = threshold_mode, cooldown, eps
    self.best = math.inf if mode == "min" else -math.inf
    self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
    self._last_lr = [float(o.lr.item()) for o in self._opts]
  def _better(self, a: float) -> bool:
    rel = self.threshold_mode == "rel"
    if self.mode == "min": return a < (self.best * (1 - self.threshold) if rel else self.best - self.threshold)
    return a > (self.best * (1 + self.threshold) if rel else self.best + self.threshold)
  def step(self, metrics: float | Tensor) -> None:
    current = float(metrics.item() if isinstance(metrics, Tensor) else metrics)
    self.last_epoch += 1
    if self._better(current): self.best, self.num_bad_epochs = current, 0
    else: self.num_bad_epochs += 1
    if self.cooldown_counter > 0:
      self.cooldown_counter -= 1
      self.num_bad_epochs = 0
    if self.num_bad_epochs > self.patience:
      for k, (o, lr, low) in enumerate(zip(self._opts, self._last_lr, self.min_lrs)):
        new = max(lr * self.factor, low)
        if lr - new > self.eps:
          o.lr = new
          self._last_lr[k] = new
      self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
  def get_last_lr(self) -> list[float]: return list(self._last_lr)
  def state_dict(self) -> dict[str, Any]:
    return {k: v for k, v in vars(self).items() if k not in ("optimizer", "_opts")}
  def load_state_dict(self, state: dict[str, Any]) -> None:
    vars(self).update(state)
    for o, lr in zip(self._opts, self._last_lr): o.lr = lr

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR", "ConstantLR", "LinearLR",
           "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "OneCycleLR", "SequentialLR", "ReduceLROnPlateau"]
