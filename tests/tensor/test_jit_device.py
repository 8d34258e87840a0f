"""TinyJit on the default device (the PYTHON reference backend under `make test`): replays equal the plain function,
draw new random numbers, and use the optimizer's current learning rate."""
import numpy as np
from tinygrad import Tensor, TinyJit, Device, nn, hooks
from tinygrad.nn.optim import SGD

def test_replay_equals_plain_and_compiles_nothing():
  f = TinyJit(lambda x, w: (x @ w).relu().sum(1))
  rng = np.random.default_rng(0)
  for i in range(4):
    x, w = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    compiled: list = []
    fn = hooks.register("compiled", lambda *a: compiled.append(a))
    try: out = f(Tensor(x), Tensor(w)).numpy()
    finally: hooks.unregister("compiled", fn)
    np.testing.assert_allclose(out, np.maximum(x @ w, 0).sum(1), rtol=1e-5, atol=1e-6)
    if i >= 2: assert compiled == [], f"replay {i} on {Device.DEFAULT} compiled {len(compiled)} programs"

def test_training_step_with_dropout_matches_plain():
  def train(jit: bool) -> tuple[list[float], np.ndarray]:
    Tensor.manual_seed(0)
    lin = nn.Linear(3, 2)
    opt = SGD([lin.weight, lin.bias], lr=0.5)
    def step(x, y):
      opt.zero_grad()
      loss = (lin(x.dropout(0.25)) - y).square().mean()
      loss.backward()
      opt.step()
      return loss
    f = TinyJit(step) if jit else step
    X = np.random.default_rng(1).standard_normal((5, 4, 3)).astype(np.float32)
    old, Tensor.training = Tensor.training, True
    try:
      losses = []
      for i in range(5):
        opt.lr = 0.5 / (i + 1)
        losses.append(f(Tensor(X[i]), Tensor(X[i, :, :2] * 2)).item())
    finally: Tensor.training = old
    return losses, lin.weight.numpy()
  (lp, wp), (lj, wj) = train(False), train(True)
  np.testing.assert_allclose(lj, lp, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(wj, wp, rtol=1e-5, atol=1e-6)
