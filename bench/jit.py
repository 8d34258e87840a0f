"""Benchmark: steps per second of an MLP training step (Linear layers, dropout, Adam, a learning rate changed every
step) under TinyJit against the same step run plainly (schedule + launch every step), measured in the same run.

  python bench/jit.py [--steps 20] [--hidden 64] [--batch 64] [--device CPU]

Both runs start from the same seed and data; the script checks that they end with the same weights, then prints steps/s
for each and the ratio (jitted / plain). The jitted run's warm-up and capture calls are timed apart from its replays.
"""
from __future__ import annotations
import argparse, os, sys, time
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tinygrad import Tensor, TinyJit, nn
from tinygrad.nn.optim import Adam
from tinygrad.helpers import GlobalCounters

class MLP:
  def __init__(self, hidden: int):
    self.l1, self.l2, self.l3 = nn.Linear(16, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 4)
  def __call__(self, x: Tensor) -> Tensor: return self.l3(self.l2(self.l1(x).relu().dropout(0.1)).relu())
  def params(self) -> list[Tensor]: return [t for ly in (self.l1, self.l2, self.l3) for t in (ly.weight, ly.bias)]

def run(jit: bool, steps: int, hidden: int, batch: int, device: str) -> tuple[float, float, np.ndarray, int]:
  """(seconds of the steady-state steps, seconds of the first two, final weights, kernels per steady step)."""
  Tensor.manual_seed(0)
  m = MLP(hidden)
  for p in m.params(): p.replace(p.to(device).realize())
  opt = Adam(m.params(), lr=1e-3)
  rng = np.random.default_rng(0)
  X = rng.standard_normal((steps + 2, batch, 16)).astype(np.float32)
  Y = (X[..., :4].argmax(-1)).astype(np.int32)
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = m(x).cross_entropy(y)
    loss.backward()
    opt.step()
    return loss
  f = TinyJit(step) if jit else step
  Tensor.training = True
  st = time.perf_counter()
  for i in range(2):
    opt.lr = 1e-3 / (1 + i)
    f(Tensor(X[i], device=device), Tensor(Y[i], device=device)).realize()
  warm = time.perf_counter() - st
  GlobalCounters.reset()
  st = time.perf_counter()
  for i in range(2, steps + 2):
    opt.lr = 1e-3 / (1 + i)
    f(Tensor(X[i], device=device), Tensor(Y[i], device=device)).realize()
  Tensor.training = False
  return time.perf_counter() - st, warm, m.l1.weight.numpy(), GlobalCounters.kernel_count // steps

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--steps", type=int, default=20)
  ap.add_argument("--hidden", type=int, default=64)
  ap.add_argument("--batch", type=int, default=64)
  ap.add_argument("--device", default="CPU")
  args = ap.parse_args()
  plain_s, plain_warm, w_plain, k_plain = run(False, args.steps, args.hidden, args.batch, args.device)
  jit_s, jit_warm, w_jit, k_jit = run(True, args.steps, args.hidden, args.batch, args.device)
  if not np.allclose(w_plain, w_jit, rtol=1e-4, atol=1e-5):
    sys.exit(f"jitted and plain training ended with different weights (max diff {np.abs(w_plain - w_jit).max()})")
  print(f"MLP 16-{args.hidden}-{args.hidden}-4, batch {args.batch}, Adam + dropout, on {args.device}, "
        f"{args.steps} steps after 2 warm-up steps")
  print(f"  plain:  {args.steps / plain_s:8.2f} steps/s  ({k_plain} kernels/step; first two steps {plain_warm:.2f}s)")
  print(f"  TinyJit:{args.steps / jit_s:8.2f} steps/s  ({k_jit} kernels/step; warm-up + capture {jit_warm:.2f}s)")
  print(f"  TinyJit runs {plain_s / jit_s:.1f}x the steps per second of the plain step")

if __name__ == "__main__": main()
