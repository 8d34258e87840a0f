"""Gathers on the CPU against torch (2 threads) in the same run: an embedding (torch.nn.functional.embedding), a gather
along an axis (torch.gather) and an index by two tensors (x[i, :, j]). Ours reaches the kernel as a select summed over
the table's rows, which codegen collapses to a load of the picked rows (tinygrad/codegen/gather.py).

  python bench/gather.py [--steps 10]

Ours runs under TinyJit (the result realized each call), torch eagerly; every time is the best of --steps calls after
two warm-ups. Each row prints both times and ours / torch.
"""
from __future__ import annotations
import argparse, os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from typing import Any, Callable
import numpy as np
from timing import best_of  # noqa: E402

def cases(rng: np.random.Generator) -> list[tuple[str, list[np.ndarray], Callable[..., Any], Callable[..., Any]]]:
  """(name, inputs, ours on Tensors, torch's on tensors)."""
  table = rng.standard_normal((32000, 2048)).astype(np.float32)
  small = rng.standard_normal((2000, 256)).astype(np.float32)
  x3 = rng.standard_normal((64, 512, 512)).astype(np.float32)
  return [
    ("embedding 32000x2048, 64 tokens", [rng.integers(0, 32000, (64,)), table],
     lambda i, w: i.embedding(w), lambda i, w: __import__("torch").nn.functional.embedding(i, w)),
    ("embedding 32000x2048, 512 tokens", [rng.integers(0, 32000, (512,)), table],
     lambda i, w: i.embedding(w), lambda i, w: __import__("torch").nn.functional.embedding(i, w)),
    ("embedding 2000x256, 16x32 tokens", [rng.integers(0, 2000, (16, 32)), small],
     lambda i, w: i.embedding(w), lambda i, w: __import__("torch").nn.functional.embedding(i, w)),
    ("gather (64, 512, 512) along 1, 64 per row", [rng.integers(0, 512, (64, 64, 512)), x3],
     lambda i, x: x.gather(1, i), lambda i, x: __import__("torch").gather(x, 1, i)),
    ("x[i, :, j], i and j (256,), x (64, 512, 512)", [rng.integers(0, 64, (256,)), rng.integers(0, 512, (256,)), x3],
     lambda i, j, x: x[i, :, j], lambda i, j, x: x[i, :, j]),
  ]

def main() -> None:
  import torch
  from tinygrad import Tensor, TinyJit, dtypes
  torch.set_num_threads(2)
  rng = np.random.default_rng(0)
  print(f"torch {torch.__version__} with 2 threads; ours: TinyJit; best of {ARGS.steps} calls")
  print("| case | torch ms | ours ms | ours / torch |")
  print("|---|---|---|---|")
  for name, arrays, ours_fn, torch_fn in cases(rng):
    ts = [Tensor(a.astype(np.int32), dtype=dtypes.int32).realize() if a.dtype.kind == "i" else Tensor(a).realize()
          for a in arrays]
    jit = TinyJit(lambda: ours_fn(*ts).realize())
    for _ in range(2): jit()
    ours = best_of(jit, ARGS.steps)
    tt = [torch.from_numpy(a.astype(np.int64) if a.dtype.kind == "i" else a) for a in arrays]
    got, want = jit().numpy(), torch_fn(*tt).numpy()
    if not np.array_equal(got, want): raise SystemExit(f"{name}: ours differs from torch's")
    for _ in range(2): torch_fn(*tt)
    theirs = best_of(lambda: torch_fn(*tt), ARGS.steps)
    print(f"| {name} | {theirs * 1e3:.3f} | {ours * 1e3:.3f} | {ours / theirs:.2f}x |")

if __name__ == "__main__":
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--steps", type=int, default=10, help="timed calls per side (default 10)")
  ARGS = ap.parse_args()
  main()
