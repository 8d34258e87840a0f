"""python -m tinygrad.models [--models resnet18,bert,...] [--size small|tiny] [--forward-only] [--steps N]: each zoo
model's forward, backward and one SGD-with-momentum step on the current device (DEV=...), realized; prints the kernels
each ran. What `make replay-models` captures."""
from __future__ import annotations
import argparse, sys
from tinygrad.tensor import Tensor
from tinygrad.nn.optim import SGD
from tinygrad.nn.state import get_parameters
from tinygrad.models import zoo, SIZES

def run(name: str, size: str, forward_only: bool, steps: int) -> None:
  z = zoo(size)[name]
  Tensor.manual_seed(0)
  model = z.make()
  xs = z.inputs(1)
  with Tensor.train(not forward_only):
    if forward_only:
      z.forward(model, *xs).realize()
      return
    opt = SGD(get_parameters(model), lr=0.01, momentum=0.9)
    for _ in range(steps):
      opt.zero_grad()
      loss = z.loss(z.forward(model, *xs))
      loss.backward()
      opt.step()
      print(f"{name}: loss {loss.item():.6g}", flush=True)

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.models", description=__doc__.splitlines()[0])
  ap.add_argument("--models", default=",".join(zoo()), help="comma-separated zoo names")
  ap.add_argument("--size", default="small", choices=SIZES)
  ap.add_argument("--forward-only", action="store_true")
  ap.add_argument("--steps", type=int, default=1)
  a = ap.parse_args(argv)
  names = a.models.split(",")
  if unknown := [n for n in names if n not in zoo()]: ap.error(f"unknown zoo model(s) {unknown}; known: {list(zoo())}")
  for n in names: run(n, a.size, a.forward_only, a.steps)
  return 0

if __name__ == "__main__": sys.exit(main())
