"""Train a small MLP on synthetic data (is a 2-d point inside the unit circle?) on the default device; the loss falls.

  python examples/mlp.py            (make demo runs it with SPEC=2)

Prints the loss every few steps, the final accuracy, how many kernels ran and how many distinct programs were compiled,
and, when the spec plugin is loaded and exposes its counters, how many UOps it verified."""
import sys, time
import numpy as np
from tinygrad import Tensor, nn, hooks
from tinygrad.helpers import getenv, IGNORE_OOB
from tinygrad.nn.optim import Adam
from tinygrad.nn.state import get_parameters

class MLP:
  def __init__(self, hidden: int = 32):
    self.l1, self.l2, self.l3 = nn.Linear(2, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 2)
  def __call__(self, x: Tensor) -> Tensor: return self.l3(self.l2(self.l1(x).relu()).relu())

def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  x = rng.uniform(-1.5, 1.5, size=(n, 2)).astype(np.float32)
  return x, ((x ** 2).sum(1) < 1.0).astype(np.int32)

def main() -> int:
  steps = getenv("STEPS", 60)
  counts = {"kernels": 0, "programs": 0}
  def count_kernel(ast: object) -> None: counts["kernels"] += 1
  def count_program(*args: object) -> None: counts["programs"] += 1
  hooks.register("kernel_ast", count_kernel)
  hooks.register("compiled", count_program)
  Tensor.manual_seed(0)
  model = MLP()
  opt = Adam(get_parameters(model), lr=0.02)
  X, Y = make_data(256, seed=1)
  Xt, Yt = Tensor(X), Tensor(Y)
  losses, st = [], time.perf_counter()
  with Tensor.train():
    for step in range(steps):
      opt.zero_grad()
      loss = model(Xt).cross_entropy(Yt)
      loss.backward()
      opt.step()
      losses.append(loss.item())
      if step % 10 == 0 or step == steps - 1: print(f"step {step:3d}  loss {losses[-1]:.4f}")
  acc = (model(Xt).argmax(-1) == Yt).float().mean().item()
  print(f"trained {steps} steps in {time.perf_counter() - st:.1f}s: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
        f"accuracy {acc:.3f}")
  print(f"kernels run: {counts['kernels']}, programs compiled: {counts['programs']}")
  plugin = sys.modules.get("spec.plugin")
  stats = getattr(plugin, "stats", None) if plugin is not None else None
  if stats is not None:
    print(f"spec (SPEC={plugin.level()}): {stats['uops_at_construction']} UOps verified against full_spec at "
          f"construction, {stats['boundary_graphs']} graphs verified at stage boundaries, {stats['round_trips']} "
          "round trips")
    if IGNORE_OOB.value:
      print("z3 bounds proofs: off (IGNORE_OOB=1, the default; IGNORE_OOB=0 proves every load and store of every "
            "kernel in bounds, with z3-solver installed)")
    else: print(f"z3 bounds proofs: every load and store proved in bounds in {stats['index_proofs']} kernels")
  else: print("spec: the plugin exposes no counters (spec.plugin.stats)")
  if not losses[-1] < losses[0] * 0.7:
    print("loss did not fall enough", file=sys.stderr)
    return 1
  return 0

if __name__ == "__main__": sys.exit(main())
