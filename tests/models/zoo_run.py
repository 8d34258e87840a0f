"""Helpers for the zoo's harness tests: the kernel ASTs a zoo model's training step runs (collected at the kernel_ast
checkpoint during a real step on the CPU), and `python -m tests.models.zoo_run --weights DIR --out OUT.npz --models
a,b [--size tiny]`: each model's forward in eval mode on the current device (DEV=..., EMULATE=...), its weights read
from DIR/<name>.safetensors (written there from Tensor.manual_seed(0) when missing), the outputs saved to OUT.npz."""
from __future__ import annotations
import argparse, functools, os, sys
import numpy as np
from tinygrad import Tensor
from tinygrad.uop import hooks
from tinygrad.uop.ops import UOp
from tinygrad.nn.state import get_state_dict, load_state_dict, safe_save, safe_load
from tinygrad.models import zoo
from tinygrad.models.__main__ import run

@functools.cache
def step_kernels(name: str, size: str = "tiny") -> tuple[UOp, ...]:
  """The distinct kernel ASTs of one training step (forward, backward, SGD with momentum) of zoo model `name`."""
  asts: list[UOp] = []
  collect = hooks.register("kernel_ast", lambda ast: asts.append(ast))
  try: run(name, size, forward_only=False, steps=1)
  finally: hooks.unregister("kernel_ast", collect)
  return tuple(dict.fromkeys(asts))

def forward(name: str, size: str, weights: str) -> np.ndarray:
  z = zoo(size)[name]
  Tensor.manual_seed(0)
  model = z.make()
  path = os.path.join(weights, f"{name}.safetensors")
  if not os.path.exists(path): safe_save(get_state_dict(model), path)
  load_state_dict(model, safe_load(path))
  with Tensor.test(): return z.forward(model, *z.inputs(1)).numpy()

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tests.models.zoo_run")
  ap.add_argument("--weights", required=True)
  ap.add_argument("--out", required=True)
  ap.add_argument("--models", default=",".join(zoo()))
  ap.add_argument("--size", default="tiny")
  a = ap.parse_args(argv)
  outs = {n: forward(n, a.size, a.weights) for n in a.models.split(",")}
  tmp = a.out + ".tmp.npz"
  np.savez(tmp, **outs)
  os.replace(tmp, a.out)
  return 0

if __name__ == "__main__": sys.exit(main())
