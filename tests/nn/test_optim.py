"""Optimizers over several steps: SGD, Adam and AdamW against torch.optim (same parameters, same loss, the gradients
from each library's own autograd); LARS, LAMB and Muon against numpy implementations of the published algorithms (Muon
also against torch.optim.Muon); OptimizerGroup against torch optimizers stepped together; a shared parameter is updated
once per step; the learning rate is a tensor a TinyJit-captured step reads; step() outside training mode is an
error."""
import numpy as np
import pytest
import torch
from tinygrad import Tensor, TinyJit, dtypes, nn
from tinygrad.nn.optim import SGD, LARS, Adam, AdamW, LAMB, Muon, OptimizerGroup, TrainingModeError
from tinygrad.nn.state import get_parameters
from tests.nn.torch_ref import rand

STEPS = 4
SHAPES = [(3, 5), (6, 4), (5,)]

def _inputs():
  p0 = [rand(*s, seed=i) for i, s in enumerate(SHAPES)]
  x, y = rand(7, 3, seed=10), rand(7, 6, seed=11)
  return p0, x, y

def _loss(ps, x, y):
  # NOTE: a small two-layer net, so gradients differ from step to step and between parameters
  w1, w2, b = ps
  out = ((x @ w1)[:, :4].tanh() + b[:4]) @ w2.T
  return ((out - y) ** 2).mean()

def _run_tiny(make_opt, p0, x, y, steps=STEPS, dtype=dtypes.float32):
  ps = [Tensor(p, dtype=dtype, requires_grad=True) for p in p0]
  opt = make_opt(ps)
  with Tensor.train():
    for _ in range(steps):
      opt.zero_grad()
      _loss([p.float() for p in ps], Tensor(x), Tensor(y)).backward()
      opt.step()
  return [p.numpy().astype(np.float32) for p in ps]

def _run_torch(make_opt, p0, x, y, steps=STEPS):
  ps = [torch.tensor(p, requires_grad=True) for p in p0]
  opt = make_opt(ps)
  for _ in range(steps):
    opt.zero_grad()
    _loss(ps, torch.tensor(x), torch.tensor(y)).backward()
    opt.step()
  return [p.detach().numpy() for p in ps]

def _close(ours, ref, atol=1e-5, rtol=1e-4):
  for i, (a, b) in enumerate(zip(ours, ref)): np.testing.assert_allclose(a, b, atol=atol, rtol=rtol, err_msg=f"param {i}")

SGD_CASES = [dict(), dict(momentum=0.9), dict(momentum=0.8, nesterov=True, weight_decay=0.05),
             dict(momentum=0.9, dampening=0.3, weight_decay=0.1)]

@pytest.mark.parametrize("kw", SGD_CASES, ids=["plain", "momentum", "nesterov_wd", "dampening_wd"])
def test_sgd_matches_torch(kw):
  p0, x, y = _inputs()
  _close(_run_tiny(lambda ps: SGD(ps, lr=0.3, **kw), p0, x, y), _run_torch(lambda ps: torch.optim.SGD(ps, lr=0.3, **kw),
                                                                           p0, x, y))

@pytest.mark.parametrize("kw", [dict(), dict(b1=0.8, b2=0.99, eps=1e-6, weight_decay=0.1)], ids=["default", "l2"])
def test_adam_matches_torch(kw):
  p0, x, y = _inputs()
  tkw = {k: v for k, v in kw.items() if k not in ("b1", "b2")}
  if "b1" in kw: tkw["betas"] = (kw["b1"], kw["b2"])
  _close(_run_tiny(lambda ps: Adam(ps, lr=0.05, **kw), p0, x, y), _run_torch(lambda ps: torch.optim.Adam(ps, lr=0.05,
                                                                                                         **tkw), p0, x, y))

@pytest.mark.parametrize("wd", [0.01, 0.3])
def test_adamw_matches_torch(wd):
  p0, x, y = _inputs()
  _close(_run_tiny(lambda ps: AdamW(ps, lr=0.05, weight_decay=wd), p0, x, y),
         _run_torch(lambda ps: torch.optim.AdamW(ps, lr=0.05, weight_decay=wd), p0, x, y))

def test_adam_and_sgd_on_float16_params_track_torch_in_float32():
  p0, x, y = _inputs()
  p0 = [p.astype(np.float16).astype(np.float32) for p in p0]
  for ours, theirs in [(lambda ps: Adam(ps, lr=0.01), lambda ps: torch.optim.Adam(ps, lr=0.01)),
                       (lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9))]:
    got = _run_tiny(ours, p0, x, y, dtype=dtypes.float16)
    _close(got, _run_torch(theirs, p0, x, y), atol=3e-3, rtol=3e-3)

# ---- LAMB: numpy reference of You et al. 2019, Algorithm 2 (phi = identity) ----

def _quadratic(p0):
  """A loss with known gradients: sum(c * (p - target)**2), grad 2 c (p - target)."""
  rng = np.random.default_rng(5)
  return [(rng.uniform(0.5, 2, size=p.shape), rng.uniform(-1, 1, size=p.shape)) for p in p0]

def _tiny_quadratic(make_opt, p0, steps=STEPS):
  ct = _quadratic(p0)
  ps = [Tensor(p, requires_grad=True) for p in p0]
  opt = make_opt(ps)
  with Tensor.train():
    for _ in range(steps):
      opt.zero_grad()
      sum(((p - Tensor(t.astype(np.float32))) ** 2 * Tensor(c.astype(np.float32))).sum()
          for p, (c, t) in zip(ps, ct)).backward()
      opt.step()
  return [p.numpy() for p in ps]

def _lamb_reference(p0, lr, b1, b2, eps, wd, adam=False, steps=STEPS):
  ps = [p.astype(np.float64) for p in p0]
  ct = _quadratic(p0)
  m, v = [np.zeros_like(p) for p in ps], [np.zeros_like(p) for p in ps]
  for t in range(1, steps + 1):
    for i, (p, (c, tg)) in enumerate(zip(ps, ct)):
      g = 2 * c * (p - tg)
      m[i] = b1 * m[i] + (1 - b1) * g
      v[i] = b2 * v[i] + (1 - b2) * g * g
      r = (m[i] / (1 - b1 ** t)) / (np.sqrt(v[i] / (1 - b2 ** t)) + eps) + wd * p
      n1, n2 = np.linalg.norm(p), np.linalg.norm(r)
      ratio = 1.0 if adam or n1 == 0 or n2 == 0 else n1 / n2
      ps[i] = p - lr * ratio * r
  return ps

@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, b1=0.8, eps=1e-4), dict(weight_decay=0.05, adam=True)],
                         ids=["default", "wd", "adam"])
def test_lamb_matches_published_algorithm(kw):
  p0, _, _ = _inputs()
  p0[2][:] = 0  # a zero parameter: trust ratio 1 (its norm is 0)
  full = dict(lr=0.05, b1=0.9, b2=0.999, eps=1e-6, wd=0.0, adam=False)
  full.update({("wd" if k == "weight_decay" else k): v for k, v in kw.items()})
  ref = _lamb_reference(p0, **full)
  got = _tiny_quadratic(lambda ps: LAMB(ps, lr=0.05, **kw), p0)
  _close(got, ref)
  assert not np.allclose(got[0], p0[0])

# ---- Muon: numpy reference of the published algorithm (K. Jordan 2024), and torch.optim.Muon ----

def _newton_schulz_np(g, steps, coefs, eps):
  a, b, c = coefs
  x = g.T if g.shape[0] > g.shape[1] else g
  x = x / (np.linalg.norm(x) + eps)
  for _ in range(steps):
    A = x @ x.T
    x = a * x + (b * A + c * A @ A) @ x
  return x.T if g.shape[0] > g.shape[1] else x

def _muon_reference(p0, lr, momentum, nesterov, steps_ns, coefs, wd, eps=1e-7, steps=STEPS):
  # NOTE: the published form keeps the momentum as an average (buf.lerp(g, 1 - mu)) and blends g.lerp(buf, mu) for
  # nesterov; that is (1 - mu) times torch's b = mu b + g, and the Newton-Schulz normalisation removes the factor
  ps = [p.astype(np.float64) for p in p0]
  ct = _quadratic(p0)
  bufs = [np.zeros_like(p) for p in ps]
  for _ in range(steps):
    for i, (p, (c, tg)) in enumerate(zip(ps, ct)):
      g = 2 * c * (p - tg)
      bufs[i] = bufs[i] + (1 - momentum) * (g - bufs[i])
      u = g + momentum * (bufs[i] - g) if nesterov else bufs[i]
      o = _newton_schulz_np(u, steps_ns, coefs, eps)
      p = p * (1 - lr * wd)
      ps[i] = p - lr * max(1, p.shape[0] / p.shape[1]) ** 0.5 * o
  return ps

@pytest.mark.parametrize("kw", [dict(), dict(nesterov=False, weight_decay=0.1, momentum=0.9),
                                dict(ns_steps=3, ns_coefficients=(2.0, -1.5, 0.5))], ids=["default", "wd", "ns"])
def test_muon_matches_published_algorithm(kw):
  p0 = [rand(3, 5, seed=0), rand(6, 4, seed=1)]
  full = dict(lr=0.02, momentum=0.95, nesterov=True, steps_ns=5, coefs=(3.4445, -4.775, 2.0315), wd=0.0)
  names = {"weight_decay": "wd", "ns_steps": "steps_ns", "ns_coefficients": "coefs"}
  full.update({names.get(k, k): v for k, v in kw.items()})
  got = _tiny_quadratic(lambda ps: Muon(ps, **kw), p0)
  _close(got, _muon_reference(p0, **full), atol=2e-5)
  assert not np.allclose(got[0], p0[0])

def _torch_muon(p0, full, monkeypatch=None):
  """torch.optim.Muon over STEPS steps of the quadratic; with monkeypatch its Newton-Schulz step runs in float32 (its
  one bfloat16 cast makes a float32 copy instead)."""
  ps = [torch.tensor(p, requires_grad=True) for p in p0]
  opt = torch.optim.Muon(ps, **full)
  ct = _quadratic(p0)
  casts = []
  def float32_copy(self, *a, **k):
    casts.append(self.shape)
    return self.float().clone()
  for _ in range(STEPS):
    opt.zero_grad()
    sum(((p - torch.tensor(t, dtype=torch.float32)) ** 2 * torch.tensor(c, dtype=torch.float32)).sum()
        for p, (c, t) in zip(ps, ct)).backward()
    if monkeypatch is None: opt.step()
    else:
      with monkeypatch.context() as m:
        m.setattr(torch.Tensor, "bfloat16", float32_copy)
        opt.step()
  if monkeypatch is not None:
    assert len(casts) == STEPS * len(ps), "torch's Newton-Schulz step casts to bfloat16 once per parameter and step"
  return [p.detach().numpy() for p in ps]

@pytest.mark.parametrize("kw", [dict(), dict(nesterov=False, weight_decay=0.2), dict(adjust_lr_fn="match_rms_adamw")])
def test_muon_matches_torch(kw, monkeypatch):
  # NOTE: torch runs the Newton-Schulz iteration in bfloat16 (as the reference implementation), we in float32: the
  # orthogonalized update differs by bfloat16 rounding (about 1% of it), so the check against torch's own step is
  # against the distance moved. With torch's Newton-Schulz step in float32 the rest of its step is torch's, and the
  # two agree within 1e-6: the bfloat16 rounding is the whole difference
  p0 = [rand(3, 5, seed=0), rand(6, 4, seed=1)]
  full = dict(lr=0.02, weight_decay=0.0)
  full.update(kw)
  got = _tiny_quadratic(lambda ps: Muon(ps, **full), p0)
  for a, b, p in zip(got, _torch_muon(p0, full), p0):
    moved = np.abs(b - p).max()
    assert moved > 0.01 and np.abs(a - b).max() < 0.03 * moved, f"off by {np.abs(a - b).max()} of a move of {moved}"
  for a, b in zip(got, _torch_muon(p0, full, monkeypatch)): np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)

def test_muon_rejects_vectors():
  with pytest.raises(ValueError, match=r"parameters \[\(1, \(4,\)\)\] have fewer than 2 axes"):
    Muon([Tensor.ones(2, 3, requires_grad=True), Tensor.ones(4, requires_grad=True)])

# ---- shared parameters, training mode, TinyJit ----

class _Tied:
  def __init__(self):
    self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
    self.b.weight = self.a.weight
  def __call__(self, x): return self.b(self.a(x).relu())

def test_shared_parameter_is_updated_once_per_step():
  Tensor.manual_seed(1)
  m = _Tied()
  params = get_parameters(m)
  assert len(params) == 3
  tm = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
  tm[2].weight = tm[0].weight
  with torch.no_grad():
    tm[0].weight.copy_(torch.tensor(m.a.weight.numpy()))
    tm[0].bias.copy_(torch.tensor(m.a.bias.numpy()))
    tm[2].bias.copy_(torch.tensor(m.b.bias.numpy()))
  x = rand(5, 4, seed=3)
  # the tied weight listed twice is still one parameter
  opt = SGD([m.a.weight, m.a.bias, m.b.weight, m.b.bias], lr=0.1, momentum=0.9)
  assert len(opt.params) == 3
  topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
  with Tensor.train():
    for _ in range(3):
      opt.zero_grad()
      m(Tensor(x)).square().mean().backward()
      opt.step()
      topt.zero_grad()
      tm(torch.tensor(x)).square().mean().backward()
      topt.step()
  np.testing.assert_allclose(m.a.weight.numpy(), tm[0].weight.detach().numpy(), atol=1e-6)
  np.testing.assert_allclose(m.b.bias.numpy(), tm[2].bias.detach().numpy(), atol=1e-6)

def test_step_outside_training_mode_is_a_clear_error():
  w = Tensor([1.0, 2.0], requires_grad=True)
  for opt in (SGD([w], lr=0.1), Adam([w]), Muon([Tensor.ones(2, 2, requires_grad=True)])):
    with Tensor.test(), pytest.raises(RuntimeError, match=r"step\(\): Tensor.training is False; run training steps inside"):
      opt.step()
    with Tensor.test(), pytest.raises(AssertionError): opt.step()  # the type tinygrad code checks for

def test_jitted_step_reads_the_current_learning_rate_as_torch():
  p0, x, y = _inputs()
  lrs = [0.05, 0.02, 0.0, 0.1, 0.03, 0.01]
  ps = [Tensor(p, requires_grad=True) for p in p0]
  opt = Adam(ps, lr=lrs[0])
  @TinyJit
  @Tensor.train()
  def step(xt, yt):
    opt.zero_grad()
    loss = _loss(ps, xt, yt)
    loss.backward()
    opt.step()
    return loss
  tps = [torch.tensor(p, requires_grad=True) for p in p0]
  topt = torch.optim.Adam(tps, lr=lrs[0])
  for i, lr in enumerate(lrs):
    opt.lr = lr
    for g in topt.param_groups: g["lr"] = lr
    step(Tensor(x * (1 + i)), Tensor(y))
    topt.zero_grad()
    _loss(tps, torch.tensor(x * (1 + i)), torch.tensor(y)).backward()
    topt.step()
    _close([p.numpy() for p in ps], [p.detach().numpy() for p in tps])
  assert step.captured is not None and step.cnt == len(lrs), "steps 3 on were replays"

# ---- LARS: numpy reference of You, Gitman and Ginsburg 2017, Algorithm 1 (with nesterov as the docstring states) ----

def _lars_reference(p0, lrs, momentum, wd, nesterov, tcoef):
  ps = [p.astype(np.float64) for p in p0]
  ct = _quadratic(p0)
  vs = [np.zeros_like(p) for p in ps]
  for lr in lrs:
    for i, (p, (c, tg)) in enumerate(zip(ps, ct)):
      g = 2 * c * (p - tg)
      pn, gn = np.linalg.norm(p), np.linalg.norm(g)
      den = gn + wd * pn
      local = tcoef * pn / den if pn > 0 and den > 0 else 1.0
      u = lr * local * (g + wd * p)
      vs[i] = momentum * vs[i] + u
      ps[i] = p - (u + momentum * vs[i] if nesterov else vs[i])
  return ps

LARS_CASES = [dict(), dict(momentum=0.0), dict(momentum=0.8, nesterov=True, weight_decay=0.05, tcoef=0.01),
              dict(momentum=0.9, weight_decay=0.3, tcoef=0.05)]

@pytest.mark.parametrize("kw", LARS_CASES, ids=["default", "no_momentum", "nesterov_wd", "wd"])
def test_lars_matches_published_algorithm(kw):
  p0, _, _ = _inputs()
  p0[2][:] = 0  # a zero parameter: local learning rate 1 (its norm is 0)
  full = dict(momentum=0.9, wd=0.0, nesterov=False, tcoef=0.001)
  full.update({("wd" if k == "weight_decay" else k): v for k, v in kw.items()})
  lr = 2.0
  got = _tiny_quadratic(lambda ps: LARS(ps, lr=lr, **kw), p0)
  ref = _lars_reference(p0, [lr] * STEPS, **full)
  _close(got, ref, atol=1e-6)
  assert not np.allclose(got[0], p0[0], atol=1e-4) and not np.allclose(got[2], 0), "the test must move the parameters"

def test_lars_float16_params_and_bad_arguments():
  p0, _, _ = _inputs()
  p0 = [p.astype(np.float16).astype(np.float32) for p in p0]
  ps = [Tensor(p, dtype=dtypes.float16, requires_grad=True) for p in p0]
  opt = LARS(ps, lr=2.0, tcoef=0.01)
  ct = _quadratic(p0)
  with Tensor.train():
    for _ in range(STEPS):
      opt.zero_grad()
      sum(((p.float() - Tensor(t.astype(np.float32))) ** 2 * Tensor(c.astype(np.float32))).sum()
          for p, (c, t) in zip(ps, ct)).backward()
      opt.step()
  assert all(p.dtype is dtypes.float16 for p in ps) and all(v.dtype is dtypes.float32 for v in opt.v)
  _close([p.numpy().astype(np.float32) for p in ps], _lars_reference(p0, [2.0] * STEPS, 0.9, 0.0, False, 0.01),
         atol=3e-3, rtol=3e-3)
  with pytest.raises(ValueError, match="nesterov momentum needs momentum > 0"): LARS(ps, momentum=0, nesterov=True)
  with pytest.raises(ValueError, match="tcoef must be positive"): LARS(ps, tcoef=0)

def test_lars_zero_gradient_keeps_parameter():
  # ||g|| = 0 and no weight decay: the denominator is 0, the local rate 1 and the update 0 (no nan)
  w, z = Tensor([3.0, 4.0], requires_grad=True), Tensor([1.0, -1.0], requires_grad=True)
  opt = LARS([w, z], lr=0.5, momentum=0.9)
  with Tensor.train():
    for _ in range(2):
      opt.zero_grad()
      ((w * 0).sum() + (z * z).sum()).backward()
      opt.step()
  np.testing.assert_array_equal(w.numpy(), [3.0, 4.0])
  assert np.all(np.isfinite(z.numpy())) and not np.allclose(z.numpy(), [1.0, -1.0])

def test_jitted_lars_in_a_group_reads_the_current_learning_rate():
  p0, x, y = _inputs()
  lrs = [0.5, 2.0, 0.0, 1.0, 0.7]
  def make(ps):
    return OptimizerGroup(LARS(ps[:2], lr=lrs[0], momentum=0.9, nesterov=True, weight_decay=0.01, tcoef=0.02),
                          Adam(ps[2:], lr=0.05))
  def run(jit):
    ps = [Tensor(p, requires_grad=True) for p in p0]
    opt = make(ps)
    def step(xt, yt):
      opt.zero_grad()
      loss = _loss(ps, xt, yt)
      loss.backward()
      opt.step()
      return loss
    fn = TinyJit(Tensor.train()(step)) if jit else Tensor.train()(step)
    out = []
    for i, lr in enumerate(lrs):
      opt[0].lr = lr
      fn(Tensor(x * (1 + i)), Tensor(y))
      out.append([p.numpy() for p in ps])
    return out, fn
  eager, _ = run(False)
  jitted, fn = run(True)
  for a, b in zip(jitted, eager): _close(a, b, atol=1e-6)
  assert fn.captured is not None and fn.cnt == len(lrs), "steps 3 on were replays"
  assert not np.allclose(eager[1][0], eager[0][0]), "the test must move the parameters"

# ---- OptimizerGroup ----

def test_optimizer_group_matches_torch_optimizers_stepped_together():
  # NOTE: the loss couples the parameters, so one optimizer's gradients read the other's parameters: the group's
  # updates must all read the values from before the step
  p0, x, y = _inputs()
  ps = [Tensor(p, requires_grad=True) for p in p0]
  group = OptimizerGroup(SGD(ps[:2], lr=0.3, momentum=0.9), Adam(ps[2:], lr=0.05))
  tps = [torch.tensor(p, requires_grad=True) for p in p0]
  topts = [torch.optim.SGD(tps[:2], lr=0.3, momentum=0.9), torch.optim.Adam(tps[2:], lr=0.05)]
  with Tensor.train():
    for _ in range(STEPS):
      group.zero_grad()
      assert all(p.grad is None for p in ps)
      _loss(ps, Tensor(x), Tensor(y)).backward()
      group.step()
      for o in topts: o.zero_grad()
      _loss(tps, torch.tensor(x), torch.tensor(y)).backward()
      for o in topts: o.step()
  _close([p.numpy() for p in ps], [p.detach().numpy() for p in tps])
  assert len(group) == 2 and isinstance(group[1], Adam) and len(group.params) == 3

def test_optimizer_group_errors():
  a, b = Tensor.ones(2, 2, requires_grad=True), Tensor.ones(3, requires_grad=True)
  group = OptimizerGroup(SGD([a], lr=0.1), Adam([b]))
  with Tensor.test(), pytest.raises(TrainingModeError, match=r"OptimizerGroup.step\(\): Tensor.training is False"):
    group.step()
  with pytest.raises(ValueError, match=r"parameter of shape \(3,\) is in optimizers 0 \(SGD\) and 1 \(Adam\)"):
    OptimizerGroup(SGD([b], lr=0.1), Adam([a, b]))
  with pytest.raises(TypeError, match="takes optimizers"): OptimizerGroup(SGD([a]), [b])  # type: ignore[arg-type]
  with pytest.raises(ValueError, match="at least one optimizer"): OptimizerGroup()
