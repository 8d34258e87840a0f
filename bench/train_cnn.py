"""Benchmark: training steps per second of the examples/cnn.py model (two Conv2d + BatchNorm2d + ReLU + max-pool
blocks, a Linear head; Adam; cross entropy) with a TinyJit-captured step, against the same model, data and optimizer
in torch (eager, CPU), measured in the same run.

  python bench/train_cnn.py [--steps 30] [--batch 32] [--width 8]

torch starts from our initial weights, so both runs train the same network: the script checks that their losses agree
over the first steps, then prints steps/s of each (after 2 warm-up steps: our warm-up and capture, torch's first
allocations), kernels per replayed step, and the ratio ours / torch. torch is measured with its default thread count
and with one thread: on a shared, oversubscribed machine its OpenMP threads wait on each other and the default can be
many times slower than one thread, so both ratios are printed."""
from __future__ import annotations
import argparse, os, sys, time
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch
from tinygrad import Tensor, TinyJit
from tinygrad.helpers import GlobalCounters
from tinygrad.nn.optim import Adam
from tinygrad.nn.state import get_parameters, get_state_dict
from examples.cnn import CNN, make_data

class TorchCNN(torch.nn.Module):
  def __init__(self, width: int):
    super().__init__()
    self.c1, self.b1 = torch.nn.Conv2d(1, width, 3, padding=1), torch.nn.BatchNorm2d(width)
    self.c2, self.b2 = torch.nn.Conv2d(width, 2 * width, 3, padding=1), torch.nn.BatchNorm2d(2 * width)
    self.fc = torch.nn.Linear(2 * width, 4)
  def forward(self, x: torch.Tensor) -> torch.Tensor:
    x = torch.nn.functional.max_pool2d(torch.relu(self.b1(self.c1(x))), 2)
    x = torch.nn.functional.max_pool2d(torch.relu(self.b2(self.c2(x))), 2)
    return self.fc(x.mean((2, 3)))

def run_ours(model: CNN, X: np.ndarray, Y: np.ndarray, steps: int, batch: int) -> tuple[float, list[float], int]:
  opt = Adam(get_parameters(model), lr=0.01)
  @TinyJit
  @Tensor.train()
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = model(x).cross_entropy(y)
    loss.backward()
    opt.step()
    return loss
  losses, st = [], 0.0
  for i in range(steps + 2):
    if i == 2: st, _ = time.perf_counter(), GlobalCounters.reset()
    losses.append(step(Tensor(X[i * batch:(i + 1) * batch]), Tensor(Y[i * batch:(i + 1) * batch])).item())
  return time.perf_counter() - st, losses, GlobalCounters.kernel_count // steps

def run_torch(model: TorchCNN, X: np.ndarray, Y: np.ndarray, steps: int, batch: int) -> tuple[float, list[float]]:
  opt = torch.optim.Adam(model.parameters(), lr=0.01)
  model.train()
  losses, st = [], 0.0
  for i in range(steps + 2):
    if i == 2: st = time.perf_counter()
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(X[i * batch:(i + 1) * batch])),
                                             torch.from_numpy(Y[i * batch:(i + 1) * batch]).long())
    loss.backward()
    opt.step()
    losses.append(loss.item())
  return time.perf_counter() - st, losses

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--steps", type=int, default=30)
  ap.add_argument("--batch", type=int, default=32)
  ap.add_argument("--width", type=int, default=8)
  args = ap.parse_args()
  Tensor.manual_seed(0)
  ours = CNN(args.width)
  theirs = TorchCNN(args.width)
  with torch.no_grad():
    for k, v in get_state_dict(ours).items(): theirs.state_dict()[k].copy_(torch.from_numpy(v.numpy()))
  X, Y = make_data(args.batch * (args.steps + 2), 1)
  start = {k: v.clone() for k, v in theirs.state_dict().items()}
  t_ours, l_ours, kernels = run_ours(ours, X, Y, args.steps, args.batch)
  print(f"CNN width {args.width}, batch {args.batch} of 1x12x12, Adam, {args.steps} steps after 2 warm-up steps, "
        f"torch {torch.__version__}")
  print(f"  {'tinygrad (TinyJit):':28s}{args.steps / t_ours:8.1f} steps/s  ({kernels} kernels/step)")
  for threads in dict.fromkeys([torch.get_num_threads(), 1]):
    torch.set_num_threads(threads)
    theirs.load_state_dict(start)
    t_torch, l_torch = run_torch(theirs, X, Y, args.steps, args.batch)
    if not np.allclose(l_ours[:5], l_torch[:5], rtol=1e-3, atol=1e-4):
      sys.exit(f"the two runs do not train the same network: losses {l_ours[:5]} and {l_torch[:5]}")
    name = f"torch (eager, {threads} thread{'s' if threads > 1 else ''}):"
    print(f"  {name:28s}{args.steps / t_torch:8.1f} steps/s  ratio tinygrad / torch {t_torch / t_ours:.2f}")

if __name__ == "__main__": main()
