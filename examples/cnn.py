"""Train a small CNN (Conv2d, BatchNorm2d, max pooling, Linear) on synthetic images with Adam and a TinyJit-captured
training step; the loss falls.

  python examples/cnn.py            STEPS=60 BATCH=32 by default

Each 1x12x12 image holds one noisy bar, horizontal, vertical or on one of the two diagonals, at a random position; the
class is its orientation. The first call of the jitted step runs it, the second captures its kernels, every later one
replays them (the learning rate decays each step: it is a tensor the replay reads). Prints the loss, the accuracy of the
trained model in eval mode (BatchNorm's running statistics) and the steps per second of the replayed steps."""
from __future__ import annotations
import os, sys, time
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import getenv
from tinygrad.nn.optim import Adam
from tinygrad.nn.state import get_parameters

SIZE, CLASSES = 12, 4

class CNN:
  def __init__(self, width: int = 8):
    self.c1, self.b1 = nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width)
    self.c2, self.b2 = nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width)
    self.fc = nn.Linear(2 * width, CLASSES)
  def __call__(self, x: Tensor) -> Tensor:
    x = self.b1(self.c1(x)).relu().max_pool2d(2)
    x = self.b2(self.c2(x)).relu().max_pool2d(2)
    return self.fc(x.mean((2, 3)))

def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """n images (n, 1, SIZE, SIZE) float32 and their classes (n,) int32."""
  rng = np.random.default_rng(seed)
  ys = rng.integers(0, CLASSES, size=n).astype(np.int32)
  xs = rng.normal(0, 0.3, size=(n, 1, SIZE, SIZE)).astype(np.float32)
  ar = np.arange(SIZE - 4)
  for img, y in zip(xs, ys):
    r, c = rng.integers(2, SIZE - 2, size=2)
    o = rng.integers(0, 4)
    if y == 0: img[0, r, o + ar] += 1.5
    elif y == 1: img[0, o + ar, c] += 1.5
    elif y == 2: img[0, o + ar, o + ar] += 1.5
    else: img[0, o + ar, SIZE - 1 - o - ar] += 1.5
  return xs, ys

def train(steps: int, batch: int = 32, lr: float = 0.01, seed: int = 0, verbose: bool = True) -> dict[str, float]:
  """Train from scratch; returns the mean loss of the first and last three steps, the test accuracy and the replayed
  steps per second."""
  Tensor.manual_seed(seed)
  model = CNN()
  opt = Adam(get_parameters(model), lr=lr)
  X, Y = make_data(batch * steps, seed + 1)

  @TinyJit
  @Tensor.train()
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = model(x).cross_entropy(y)
    loss.backward()
    opt.step()
    return loss

  losses, st = [], 0.0
  for i in range(steps):
    if i == 2: st = time.perf_counter()
    opt.lr = lr * (0.97 ** i)
    losses.append(step(Tensor(X[i * batch:(i + 1) * batch]), Tensor(Y[i * batch:(i + 1) * batch])).item())
    if verbose and (i % 10 == 0 or i == steps - 1): print(f"step {i:3d}  loss {losses[-1]:.4f}")
  sps = (steps - 2) / (time.perf_counter() - st) if steps > 2 else 0.0
  Xt, Yt = make_data(256, seed + 2)
  with Tensor.test():
    acc = float((model(Tensor(Xt)).argmax(-1) == Tensor(Yt)).float().mean().item())
  k = min(3, steps)
  return {"first_loss": float(np.mean(losses[:k])), "last_loss": float(np.mean(losses[-k:])), "accuracy": acc,
          "steps_per_s": sps}

def main() -> int:
  r = train(getenv("STEPS", 60), getenv("BATCH", 32))
  print(f"loss {r['first_loss']:.4f} -> {r['last_loss']:.4f}, test accuracy {r['accuracy']:.3f}, "
        f"{r['steps_per_s']:.1f} replayed steps/s")
  if not r["last_loss"] < r["first_loss"] * 0.7:
    print("loss did not fall enough", file=sys.stderr)
    return 1
  return 0

if __name__ == "__main__": sys.exit(main())
