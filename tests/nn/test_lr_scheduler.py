"""Learning-rate schedulers against torch.optim.lr_scheduler 2.13 with the same settings: the rates step by step, the
parameters after several training steps (SGD, Adam, AdamW; OneCycleLR also cycling the momentum), every optimizer
(and an OptimizerGroup) taking the schedule, and a TinyJit-captured step replaying with the new rates without
compiling anything."""
import numpy as np
import pytest
import torch
from tinygrad import Tensor, TinyJit
from tinygrad.nn import lr_scheduler as ls
from tinygrad.nn.optim import SGD, Adam, AdamW, LAMB, LARS, Muon, OptimizerGroup
from tests.nn.torch_ref import rand

STEPS = 12
SCHEDULES = {
  "step": (lambda o: ls.StepLR(o, step_size=3, gamma=0.5), lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)),
  "multistep": (lambda o: ls.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
                lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3)),
  "exponential": (lambda o: ls.ExponentialLR(o, gamma=0.8), lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.8)),
  "lambda": (lambda o: ls.LambdaLR(o, lambda e: 1 / (1 + e)), lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 1 / (1 + e))),
  "constant": (lambda o: ls.ConstantLR(o, factor=0.25, total_iters=4),
               lambda o: torch.optim.lr_scheduler.ConstantLR(o, factor=0.25, total_iters=4)),
  "linear_warmup": (lambda o: ls.LinearLR(o, start_factor=0.1, total_iters=5),
                    lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=5)),
  "cosine": (lambda o: ls.CosineAnnealingLR(o, T_max=8, eta_min=0.01),
             lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=8, eta_min=0.01)),
  "cosine_restarts": (lambda o: ls.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0.005),
                      lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0.005)),
  "cosine_restarts_fixed": (lambda o: ls.CosineAnnealingWarmRestarts(o, T_0=5),
                            lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=5)),
  "one_cycle": (lambda o: ls.OneCycleLR(o, max_lr=0.3, total_steps=STEPS + 1, cycle_momentum=False),
                lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.3, total_steps=STEPS + 1, cycle_momentum=False)),
  "one_cycle_linear_3phase": (
    lambda o: ls.OneCycleLR(o, max_lr=0.2, epochs=3, steps_per_epoch=5, anneal_strategy="linear", three_phase=True,
                            cycle_momentum=False),
    lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.2, epochs=3, steps_per_epoch=5, anneal_strategy="linear",
                                                  three_phase=True, cycle_momentum=False)),
  "warmup_then_cosine": (
    lambda o: ls.SequentialLR(o, [ls.LinearLR(o, start_factor=0.2, total_iters=4), ls.CosineAnnealingLR(o, T_max=6)], [4]),
    lambda o: torch.optim.lr_scheduler.SequentialLR(o, [torch.optim.lr_scheduler.LinearLR(o, start_factor=0.2, total_iters=4),
                                                        torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=6)], [4])),
}

def _lrs(make, opt):
  s = make(opt)
  out = [s.get_last_lr()]
  for _ in range(STEPS):
    s.step()
    out.append(s.get_last_lr())
  return out

@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_rates_match_torch(name):
  ours, theirs = SCHEDULES[name]
  # an OptimizerGroup has one rate per optimizer, as torch's parameter groups
  group = OptimizerGroup(SGD([Tensor.ones(2, requires_grad=True)], lr=0.1), Adam([Tensor.ones(2, requires_grad=True)], lr=0.05))
  topt = torch.optim.SGD([{"params": [torch.ones(2, requires_grad=True)], "lr": 0.1},
                          {"params": [torch.ones(2, requires_grad=True)], "lr": 0.05}])
  got, want = _lrs(ours, group), _lrs(theirs, topt)
  np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6, atol=1e-12)
  # the rates are in the optimizers' buffers
  np.testing.assert_allclose([o.lr.item() for o in group.optimizers], want[-1], rtol=1e-6)

def _loss(ps, x, y, lib):
  w1, w2 = ps
  h = (x @ w1).tanh()
  return ((h @ w2 - y) ** 2).mean()

TRAIN = [
  ("sgd_momentum_one_cycle", lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
   lambda o: ls.OneCycleLR(o, max_lr=0.5, total_steps=8), lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.5, total_steps=8)),
  ("adamw_cosine_restarts", lambda ps: AdamW(ps, lr=0.03), lambda ps: torch.optim.AdamW(ps, lr=0.03),
   lambda o: ls.CosineAnnealingWarmRestarts(o, T_0=3), lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=3)),
]

@pytest.mark.parametrize("ours_opt,torch_opt,ours_s,torch_s", [t[1:] for t in TRAIN], ids=[t[0] for t in TRAIN])
def test_training_with_a_schedule_matches_torch(ours_opt, torch_opt, ours_s, torch_s):
  p0, x, y = [rand(3, 4, seed=0), rand(4, 2, seed=1)], rand(6, 3, seed=2), rand(6, 2, seed=3)
  ps, tps = [Tensor(p, requires_grad=True) for p in p0], [torch.tensor(p, requires_grad=True) for p in p0]
  opt, topt = ours_opt(ps), torch_opt(tps)
  s, ts = ours_s(opt), torch_s(topt)
  with Tensor.train():
    for _ in range(7):
      opt.zero_grad()
      _loss(ps, Tensor(x), Tensor(y), Tensor).backward()
      opt.step()
      s.step()
      topt.zero_grad()
      _loss(tps, torch.tensor(x), torch.tensor(y), torch).backward()
      topt.step()
      ts.step()
  np.testing.assert_allclose(s.get_last_lr(), ts.get_last_lr(), rtol=1e-6)
  for a, b in zip(ps, tps): np.testing.assert_allclose(a.numpy(), b.detach().numpy(), atol=1e-5, rtol=1e-4)
  assert not np.allclose(ps[0].numpy(), p0[0])

@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1), lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: Adam(ps, lr=0.1),
                                  lambda ps: AdamW(ps, lr=0.1), lambda ps: LAMB(ps, lr=0.1), lambda ps: LARS(ps, lr=0.1),
                                  lambda ps: Muon(ps, lr=0.1)],
                         ids=["sgd", "sgd_momentum", "adam", "adamw", "lamb", "lars", "muon"])
def test_every_optimizer_takes_a_schedule(make):
  opt = make([Tensor.ones(2, 3, requires_grad=True)])
  topt = torch.optim.SGD([torch.ones(2, requires_grad=True)], lr=0.1)
  got = _lrs(lambda o: ls.CosineAnnealingLR(o, T_max=5), opt)
  np.testing.assert_allclose(got, _lrs(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5), topt), rtol=1e-6)
  assert abs(opt.lr.item() - got[-1][0]) < 1e-7
  m = opt.get_momentum()
  if m is None:
    with pytest.raises(RuntimeError, match="cycle_momentum needs optimizers with a momentum"): ls.OneCycleLR(opt, 1.0, 10)
  else:
    ls.OneCycleLR(opt, 1.0, 10, max_momentum=0.93)
    assert opt.get_momentum() == pytest.approx(0.93)

def test_reduce_on_plateau_matches_torch():
  metrics = [1.0, 0.9, 0.95, 0.93, 0.91, 0.92, 0.5, 0.6, 0.61, 0.62, 0.63, 0.64, 0.1, 0.2, 0.3]
  for kw in (dict(patience=1, factor=0.5), dict(mode="max", patience=0, cooldown=2, threshold=0.05, threshold_mode="abs"),
             dict(patience=2, min_lr=0.03, factor=0.2)):
    opt = SGD([Tensor.ones(2, requires_grad=True)], lr=0.4)
    topt = torch.optim.SGD([torch.ones(2, requires_grad=True)], lr=0.4)
    s, ts = ls.ReduceLROnPlateau(opt, **kw), torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    for m in metrics:
      s.step(Tensor(m))
      ts.step(m)
      np.testing.assert_allclose(s.get_last_lr(), ts.get_last_lr(), rtol=1e-6, err_msg=str(kw))
    assert opt.lr.item() == pytest.approx(ts.get_last_lr()[0], rel=1e-6)

def test_one_cycle_errors_as_torch():
  opt = SGD([Tensor.ones(2, requires_grad=True)], lr=0.1)
  s = ls.OneCycleLR(opt, max_lr=1.0, total_steps=2, cycle_momentum=False)
  s.step()
  s.step()
  with pytest.raises(ValueError, match="total_steps is 2"): s.step()
  with pytest.raises(ValueError): ls.OneCycleLR(opt, max_lr=1.0)

def test_jitted_step_takes_scheduled_rate_and_momentum_without_compiling(monkeypatch):
  import tinygrad.engine.realize as realize
  compiled = []
  orig = realize.get_program
  monkeypatch.setattr(realize, "get_program", lambda *a, **kw: compiled.append(1) or orig(*a, **kw))
  p0, x, y = [rand(3, 4, seed=0), rand(4, 2, seed=1)], rand(6, 3, seed=2), rand(6, 2, seed=3)
  ps, tps = [Tensor(p, requires_grad=True) for p in p0], [torch.tensor(p, requires_grad=True) for p in p0]
  opt, topt = Adam(ps, lr=0.01), torch.optim.Adam(tps, lr=0.01)
  # OneCycleLR writes the rate and Adam's b1 (cycle_momentum) before every step
  s, ts = ls.OneCycleLR(opt, max_lr=0.08, total_steps=10), torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.08, total_steps=10)
  @TinyJit
  @Tensor.train()
  def step(xt, yt):
    opt.zero_grad()
    loss = _loss(ps, xt, yt, Tensor)
    loss.backward()
    opt.step()
    return loss
  for i in range(8):
    if i == 2:
      assert compiled, "capturing compiles the step's programs (the count is live)"
      compiled.clear()
    step(Tensor(x), Tensor(y))
    s.step()
    topt.zero_grad()
    _loss(tps, torch.tensor(x), torch.tensor(y), torch).backward()
    topt.step()
    ts.step()
    for a, b in zip(ps, tps): np.testing.assert_allclose(a.numpy(), b.detach().numpy(), atol=1e-5, rtol=1e-4, err_msg=f"step {i}")
  assert step.cnt == 8 and not compiled, f"{len(compiled)} programs compiled while replaying with new rates"
