"""TinyJit: values equal to the plain function over many calls, replays that schedule and compile nothing, clear errors
for what a capture cannot replay, and a training step (dropout, optimizer, changing learning rate) that matches the
unjitted one. Runs on Device.DEFAULT."""
import numpy as np
import pytest
from tinygrad import Tensor, TinyJit, Device, dtypes, nn, hooks
from tinygrad.engine.jit import JitError
from tinygrad.helpers import GlobalCounters
from tinygrad.nn.optim import SGD, Adam

rng = np.random.default_rng(0)

def _rand(*shape): return rng.standard_normal(shape).astype(np.float32)

@pytest.fixture(autouse=True)
def _eval_mode():
  old = Tensor.training
  yield
  Tensor.training = old

class _Watch:
  """Counts scheduler graphs, kernel ASTs, compiled programs, compiler invocations and new UOps while active."""
  def __enter__(self):
    self.counts = {"tensor_graph": 0, "kernel_ast": 0, "compiled": 0, "uop_created": 0}
    self.fns = {k: (lambda *a, k=k: self.counts.__setitem__(k, self.counts[k] + 1)) for k in self.counts}
    for k, fn in self.fns.items(): hooks.register(k, fn)
    comp = Device[Device.DEFAULT].compiler
    self.comp, self.c0 = comp, (comp.compiles, comp.cache_hits)
    return self
  def __exit__(self, *exc):
    for k, fn in self.fns.items(): hooks.unregister(k, fn)
    self.counts["compiles"] = self.comp.compiles + self.comp.cache_hits - sum(self.c0)

# ---- values ----

FNS = {
  "elementwise": (lambda a, b: (a * b + 1).relu(), lambda a, b: np.maximum(a * b + 1, 0)),
  "matmul": (lambda a, b: a @ b.T, lambda a, b: a @ b.T),
  "reduce": (lambda a, b: (a - b).square().sum(1), lambda a, b: ((a - b) ** 2).sum(1)),
}

@pytest.mark.parametrize("name", list(FNS))
def test_values_equal_unjitted_over_calls(name):
  fn, ref = FNS[name]
  jf = TinyJit(fn)
  for _ in range(5):
    a, b = _rand(4, 6), _rand(4, 6)
    np.testing.assert_allclose(jf(Tensor(a), Tensor(b)).numpy(), ref(a, b), rtol=1e-5, atol=1e-5)
  assert jf.captured is not None and jf.cnt == 5

def test_two_outputs_kwargs_and_nested_arguments():
  @TinyJit
  def f(xs, scale, *, extra):
    return {"sum": xs[0] + xs[1] * scale["s"], "prod": (xs[0] * extra).sum()}, 7
  for _ in range(4):
    a, b, s, e = _rand(3), _rand(3), _rand(3), _rand(3)
    out, seven = f([Tensor(a), Tensor(b)], {"s": Tensor(s)}, extra=Tensor(e))
    assert seven == 7
    np.testing.assert_allclose(out["sum"].numpy(), a + b * s, rtol=1e-6)
    np.testing.assert_allclose(out["prod"].numpy(), (a * e).sum(), rtol=1e-5)

def test_positional_and_keyword_are_one_signature():
  f = TinyJit(lambda x, y: x - y)
  for i in range(4):
    a, b = _rand(5), _rand(5)
    out = f(Tensor(a), Tensor(b)) if i % 2 else f(y=Tensor(b), x=Tensor(a))
    np.testing.assert_allclose(out.numpy(), a - b)

def test_replay_schedules_compiles_and_builds_nothing():
  w = Tensor(_rand(6, 6)).realize()
  f = TinyJit(lambda x: ((x @ w).relu() + 1).sum(0))
  for _ in range(2): f(Tensor(_rand(4, 6)))
  x = Tensor(_rand(4, 6)).realize()
  GlobalCounters.reset()
  with _Watch() as wt: out = f(x)
  assert wt.counts == {"tensor_graph": 0, "kernel_ast": 0, "compiled": 0, "uop_created": 0, "compiles": 0}
  assert f.captured is not None
  assert GlobalCounters.kernel_count == len(f.captured.launches) > 0
  assert GlobalCounters.global_ops > 0 and GlobalCounters.global_mem > 0
  np.testing.assert_allclose(out.numpy(), np.maximum(x.numpy() @ w.numpy(), 0).__add__(1).sum(0), rtol=1e-5)

def test_capture_call_schedules_and_replay_does_not():
  calls = {"n": 0}
  def f(x):
    calls["n"] += 1
    return x * 2
  jf = TinyJit(f)
  for _ in range(5): jf(Tensor(_rand(3)))
  assert calls["n"] == 2, "call 1 warms up, call 2 captures, later calls replay without running the function"

# ---- what a capture cannot replay ----

def test_shape_dtype_and_count_changes_raise():
  f = TinyJit(lambda x, y: x + y)
  for _ in range(3): f(Tensor(_rand(2, 3)), Tensor(_rand(2, 3)))
  with pytest.raises(JitError, match=r"argument 'x' is a Tensor \(3, 3\).*captured as a Tensor \(2, 3\)"):
    f(Tensor(_rand(3, 3)), Tensor(_rand(2, 3)))
  with pytest.raises(JitError, match=r"argument 'y' is a Tensor \(2, 3\) dtypes.int32.*dtypes.float32"):
    f(Tensor(_rand(2, 3)), Tensor.ones(2, 3, dtype=dtypes.int32))
  g = TinyJit(lambda *xs: xs[0] + xs[-1])
  for _ in range(3): g(Tensor(_rand(2)), Tensor(_rand(2)))
  with pytest.raises(JitError, match=r"called with arguments \['xs\[0\]', 'xs\[1\]', 'xs\[2\]'\]"):
    g(Tensor(_rand(2)), Tensor(_rand(2)), Tensor(_rand(2)))

def test_shape_change_already_after_the_warmup_raises():
  f = TinyJit(lambda x: x * 2)
  f(Tensor(_rand(2)))
  with pytest.raises(JitError, match="captured as"): f(Tensor(_rand(3)))

def test_python_value_change_raises_and_same_value_replays():
  f = TinyJit(lambda x, k: x * k)
  for _ in range(3): np.testing.assert_allclose(f(Tensor([1.0, 2.0]), 3.0).numpy(), [3.0, 6.0])
  with pytest.raises(JitError, match=r"argument 'k' is 4.0 but was 3.0 at capture.*pass a Tensor"):
    f(Tensor([1.0, 2.0]), 4.0)
  with pytest.raises(JitError, match=r"argument 'x' is a numpy ndarray"): f(np.ones(2, np.float32), 3.0)

def test_tensor_in_place_of_python_value_raises():
  f = TinyJit(lambda x, k: x * k)
  for _ in range(3): f(Tensor([1.0]), 2.0)
  with pytest.raises(JitError, match=r"argument 'k' is a Tensor \(1,\).*but it was 2.0 at capture"):
    f(Tensor([1.0]), Tensor([2.0]))

def test_host_reads_inside_capture_raise():
  for read in (lambda t: float(t.numpy()[0]), lambda t: t.sum().item(), lambda t: t.tolist()[0]):
    f = TinyJit(lambda x, read=read: x * read(x + 1))
    f(Tensor([1.0]))
    with pytest.raises(RuntimeError, match="inside a function TinyJit is capturing"): f(Tensor([1.0]))

def test_returning_data_that_is_not_a_tensor_raises():
  f = TinyJit(lambda x: (x * 2, np.zeros(2)))
  with pytest.raises(JitError, match=r"return\[1\] is a ndarray"): f(Tensor([1.0]))

def test_manual_seed_inside_capture_raises():
  def f(x):
    Tensor.manual_seed(1)
    return x + Tensor.rand(1)
  jf = TinyJit(f)
  jf(Tensor([1.0]))
  with pytest.raises(RuntimeError, match="manual_seed inside a function TinyJit is capturing"): jf(Tensor([1.0]))

def test_training_mode_change_raises():
  f = TinyJit(lambda x: x.dropout(0.5))
  Tensor.training = True
  for _ in range(3): f(Tensor.ones(8))
  Tensor.training = False
  with pytest.raises(JitError, match="captured with Tensor.training=True"): f(Tensor.ones(8))

def test_argument_sharing_must_stay_as_captured():
  f = TinyJit(lambda x, y: x + y)
  t = Tensor(_rand(3))
  for _ in range(3): f(t, t)
  with pytest.raises(JitError, match="'x' and 'y' were the same tensor at capture and are not now"):
    f(Tensor(_rand(3)), Tensor(_rand(3)))

def test_reset_captures_again_with_a_new_shape():
  f = TinyJit(lambda x: x.sum())
  for _ in range(3): f(Tensor(_rand(4)))
  f.reset()
  assert f.captured is None
  for _ in range(3):
    a = _rand(7)
    np.testing.assert_allclose(f(Tensor(a)).numpy(), a.sum(), rtol=1e-5)

# ---- buffers: inputs written in place, outputs, methods, nesting ----

def test_assign_to_an_input_writes_the_new_input():
  @TinyJit
  def f(x):
    x.assign(x * 2 + 1)
    return x
  for _ in range(4):
    a = _rand(3)
    t = Tensor(a).realize()
    out = f(t)
    np.testing.assert_allclose(t.numpy(), a * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), a * 2 + 1, rtol=1e-6)

def test_outputs_are_the_captured_buffers():
  # NOTE: documented contract: a replay's outputs live in the capture's buffers, so the next call overwrites them
  f = TinyJit(lambda x: x + 1)
  outs = [f(Tensor([float(i)])) for i in range(4)]
  assert outs[3].numpy().tolist() == [4.0]
  assert outs[2].numpy().tolist() == [4.0], "the replay reused the buffer of the previous call's output"
  assert outs[0].numpy().tolist() == [1.0], "the warm-up call's output is its own buffer"

def test_state_outside_the_arguments_is_read_at_replay():
  w = Tensor([1.0, 1.0]).realize()
  f = TinyJit(lambda x: x * w)
  for _ in range(3): f(Tensor([1.0, 2.0]))
  w.assign(Tensor([3.0, 5.0]))  # lazy: TinyJit realizes pending assigns before replaying
  np.testing.assert_allclose(f(Tensor([1.0, 2.0])).numpy(), [3.0, 10.0])

def test_decorated_method():
  class M:
    def __init__(self): self.w = Tensor([2.0, 3.0]).realize()
    @TinyJit
    def __call__(self, x): return x * self.w
  m = M()
  for i in range(4): np.testing.assert_allclose(m(Tensor([float(i), 1.0])).numpy(), [2.0 * i, 3.0])

def test_jit_inside_a_jit():
  inner = TinyJit(lambda x: x * 3)
  outer = TinyJit(lambda x: inner(x + 1) - 1)
  for i in range(5): np.testing.assert_allclose(outer(Tensor([float(i)])).numpy(), [(i + 1) * 3 - 1])

# ---- random numbers and training ----

def test_random_numbers_differ_between_replays_and_follow_the_seed():
  f = TinyJit(lambda x: x + Tensor.rand(16))
  Tensor.manual_seed(3)
  jitted = [f(Tensor.zeros(16)).numpy() for _ in range(5)]
  assert len({a.tobytes() for a in jitted}) == 5, "every call draws new numbers"
  Tensor.manual_seed(3)
  plain = [(Tensor.zeros(16) + Tensor.rand(16)).numpy() for _ in range(5)]
  np.testing.assert_array_equal(np.stack(jitted), np.stack(plain))
  Tensor.manual_seed(3)
  np.testing.assert_array_equal(f(Tensor.zeros(16)).numpy(), plain[0], "a re-seed restarts the replayed stream")

def test_draws_outside_between_replays_do_not_repeat():
  f = TinyJit(lambda: Tensor.rand(8))
  Tensor.manual_seed(0)
  seen = []
  for _ in range(4):
    seen.append(f().numpy())
    seen.append(Tensor.rand(8).numpy())
  assert len({a.tobytes() for a in seen}) == len(seen)

class _MLP:
  def __init__(self):
    self.l1, self.l2 = nn.Linear(4, 16), nn.Linear(16, 3)
  def __call__(self, x): return self.l2(self.l1(x).relu().dropout(0.1))
  def params(self): return [t for l in (self.l1, self.l2) for t in (l.weight, l.bias)]

def _train(jit: bool, opt_cls, steps: int = 6, lr_schedule: bool = True):
  Tensor.manual_seed(0)
  m = _MLP()
  opt = opt_cls(m.params(), lr=0.03)
  data = np.random.default_rng(1)
  X = data.standard_normal((steps, 32, 4)).astype(np.float32)
  Y = ((X[..., 0] > 0).astype(np.int32) + (X[..., 1] > 0.5)).astype(np.int32)
  def step(x, y):
    opt.zero_grad()
    loss = m(x).cross_entropy(y)
    loss.backward()
    opt.step()
    return loss
  f = TinyJit(step) if jit else step
  losses = []
  Tensor.training = True
  for i in range(steps):
    if lr_schedule: opt.lr = 0.03 * (0.8 ** i)
    losses.append(f(Tensor(X[i]), Tensor(Y[i])).item())
  Tensor.training = False
  return np.array(losses), [p.numpy() for p in m.params()]

@pytest.mark.parametrize("opt_cls", [Adam, lambda ps, lr: SGD(ps, lr=lr * 5, momentum=0.9)], ids=["adam", "sgd"])
def test_training_step_matches_unjitted(opt_cls):
  l_plain, w_plain = _train(False, opt_cls)
  l_jit, w_jit = _train(True, opt_cls)
  np.testing.assert_allclose(l_jit, l_plain, rtol=1e-5, atol=1e-6)
  for a, b in zip(w_jit, w_plain): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert l_jit[-2:].mean() < l_jit[:2].mean(), f"the loss must fall: {l_jit}"

def test_learning_rate_change_reaches_the_replay():
  _, w_sched = _train(True, Adam, steps=6, lr_schedule=True)
  _, w_const = _train(True, Adam, steps=6, lr_schedule=False)
  assert not np.allclose(w_sched[0], w_const[0]), "a changed learning rate must change the replayed updates"

def test_learning_rate_assign_and_zero_lr_freezes_weights():
  Tensor.manual_seed(0)
  w = Tensor(_rand(3), requires_grad=True)
  opt = Adam([w], lr=0.1)
  @TinyJit
  def step(x):
    opt.zero_grad()
    loss = ((w - x) ** 2).sum()
    loss.backward()
    opt.step()
    return loss
  Tensor.training = True
  for _ in range(3): step(Tensor(_rand(3)))
  opt.lr.assign(Tensor([0.0]))  # lazy: realized by TinyJit before the replay
  before = w.numpy().copy()
  for _ in range(2): step(Tensor(_rand(3)))
  np.testing.assert_array_equal(w.numpy(), before)
  opt.lr = 0.1
  step(Tensor(_rand(3)))
  assert not np.array_equal(w.numpy(), before)

def test_keyword_order_does_not_change_the_slots():
  f = TinyJit(lambda **kw: kw["a"] - kw["b"])
  for i in range(4):
    a, b = _rand(3), _rand(3)
    out = f(a=Tensor(a), b=Tensor(b)) if i % 2 else f(b=Tensor(b), a=Tensor(a))
    np.testing.assert_allclose(out.numpy(), a - b)

def test_batchnorm_statistics_update_on_every_replay():
  def run(jit: bool):
    bn = nn.BatchNorm(3)
    f = TinyJit(lambda x: bn(x)) if jit else (lambda x: bn(x))
    Tensor.training = True
    for i in range(4):
      f(Tensor(np.full((4, 3), float(i), np.float32) + np.arange(3, dtype=np.float32))).realize()
    Tensor.training = False
    return bn.running_mean.numpy()
  plain, jitted = run(False), run(True)
  np.testing.assert_allclose(jitted, plain, rtol=1e-6)
  assert not np.allclose(jitted, 0)

def test_output_fed_back_as_input_reads_the_old_values():
  w = Tensor(_rand(64, 64) * 0.2).realize()
  f = TinyJit(lambda h: (h @ w).tanh())
  h, h_plain = Tensor.ones(4, 64), np.ones((4, 64), np.float32)
  for _ in range(5):
    h = f(h)
    h_plain = np.tanh(h_plain @ w.numpy())
    np.testing.assert_allclose(h.numpy(), h_plain, rtol=1e-5, atol=1e-6)

def test_output_fed_back_into_an_in_place_write_raises():
  @TinyJit
  def f(x):
    x.assign(x @ Tensor.ones(3, 3))
    return x * 1
  for _ in range(3): out = f(Tensor(_rand(2, 3)))
  with pytest.raises(JitError, match="an output of an earlier call"): f(out)
