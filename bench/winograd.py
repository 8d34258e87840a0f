"""3x3 convolutions (stride 1, padding 1) on the CPU by Winograd's F(4, 3) against the direct sum, and torch's conv2d (2
threads) measured in the same run: one step of forward and both gradients (against a random upstream gradient), and the
choice WINO=2 (the default) makes for each shape.

  python bench/winograd.py [--shapes 8x64x16x16,32x64x32x32] [--steps 5] [--forward]

A shape is batch x channels x height x width (as many input as output channels). Ours runs under TinyJit, WINO=0 (the
direct sum) and WINO=1 (Winograd) each; every time is the best of --steps calls after two warm-ups (one captures).
--forward times the forward alone. The shapes by default are ResNet-18's 3x3 stages at batch 8 over 64x64 images and at
batch 32 over 128x128 (bench/models.py's rows), and some between, around WINO=2's threshold.
"""
from __future__ import annotations
import argparse, os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
from timing import best_of  # noqa: E402

SHAPES = ("8x64x16x16,8x128x8x8,8x256x4x4,8x512x2x2,32x64x32x32,32x128x16x16,32x256x8x8,32x512x4x4,16x64x16x16,"
          "8x64x32x32,16x128x8x8,8x256x8x8,8x512x4x4")

def ours(n: int, c: int, h: int, w: int, wino: int, grad: bool) -> float:
  from tinygrad import Tensor, TinyJit, Context
  rng = np.random.default_rng(0)
  with Context(WINO=wino):
    x = Tensor(rng.standard_normal((n, c, h, w)).astype(np.float32), requires_grad=grad).realize()
    wt = Tensor((rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32), requires_grad=grad).realize()
    g = Tensor(rng.standard_normal((n, c, h, w)).astype(np.float32)).realize()
    @TinyJit
    def step() -> list[Tensor]:
      x.grad = wt.grad = None
      o = x.conv2d(wt, padding=1)
      if not grad: return [o.realize()]
      (o * g).sum().backward()
      assert x.grad is not None and wt.grad is not None
      # NOTE: the three tensors: list(Tensor.realize(...)) would be o's images, one copy kernel each in the step
      Tensor.realize(o, x.grad, wt.grad)
      return [o, x.grad, wt.grad]
    for _ in range(2): step()
    return best_of(step, ARGS.steps)

def theirs(n: int, c: int, h: int, w: int, grad: bool) -> float:
  import torch
  torch.set_num_threads(2)
  rng = np.random.default_rng(0)
  x = torch.tensor(rng.standard_normal((n, c, h, w)).astype(np.float32), requires_grad=grad)
  wt = torch.tensor((rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32), requires_grad=grad)
  g = torch.tensor(rng.standard_normal((n, c, h, w)).astype(np.float32))
  def step() -> None:
    x.grad = wt.grad = None
    o = torch.nn.functional.conv2d(x, wt, padding=1)
    if grad: (o * g).sum().backward()
  with torch.set_grad_enabled(grad):
    for _ in range(2): step()
    return best_of(step, ARGS.steps)

def picks(n: int, c: int, h: int, w: int) -> bool:
  """Whether WINO=2 takes Winograd for this shape (the rule itself, on an unrealized input)."""
  from tinygrad import Tensor
  return Tensor.empty(n, c, h, w)._winograd_pays(Tensor.empty(c, c, 3, 3), 1, [(1, 1), (1, 1)])

def main() -> int:
  grad = not ARGS.forward
  print(f"3x3 convolutions, stride 1, padding 1, {'forward' if not grad else 'forward + both gradients'}; torch 2 "
        f"threads; best of {ARGS.steps}")
  print("| batch x channels x pixels | multiply-adds (direct) | torch ms | direct ms | Winograd ms | "
        "Winograd / direct | Winograd / torch | WINO=2 takes |")
  print("|---|---|---|---|---|---|---|---|")
  for spec in ARGS.shapes.split(","):
    n, c, h, w = (int(v) for v in spec.split("x"))
    t, d, wg = theirs(n, c, h, w, grad), ours(n, c, h, w, 0, grad), ours(n, c, h, w, 1, grad)
    macs = n * h * w * c * c * 9
    print(f"| {spec} | {macs / 1e6:.0f}M | {t * 1e3:.2f} | {d * 1e3:.2f} | {wg * 1e3:.2f} | {wg / d:.2f}x | "
          f"{wg / t:.2f}x | {'Winograd' if picks(n, c, h, w) else 'direct'} |", flush=True)
  return 0

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--shapes", default=SHAPES, help="comma-separated batch x channels x height x width")
ap.add_argument("--steps", type=int, default=5, help="timed calls per configuration")
ap.add_argument("--forward", action="store_true", help="time the forward alone")
ARGS = ap.parse_args()

if __name__ == "__main__": sys.exit(main())
