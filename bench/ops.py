"""Common ops outside the bench's models against torch (2 threads), measured in the same run: scans, topk, sort,
column and full sums, an embedding's gradient over a big vocabulary, scatter and index_add, searchsorted, pooling,
norms, odd matmuls. Each op runs under TinyJit on the default device (the CPU's LLVM path where llvmlite is installed);
"+grad" rows take the gradient of every input with a random upstream gradient (torch.autograd.grad with the same one).
Prints each op's best wall time of `--runs`, torch's, and the ratio (ours / torch: under 1 is faster). It found the
scans, topk and the embedding's gradient 6x to 4600x slower than torch (docs/perf.md, thirty-sixth session).

  python bench/ops.py [--only SUBSTRING] [--runs 8]
"""
from __future__ import annotations
import argparse, os, sys, time
from typing import Any, Callable
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch
import torch.nn.functional as F
from tinygrad import Tensor, TinyJit

# name, input shapes, ours, torch's, with the gradient, (index bound, index shape) for an int index input
CASES: list[tuple[str, list[tuple[int, ...]], Callable[..., Any], Callable[..., Any], bool, tuple | None]] = [
  ("cumsum last axis 1024x1024 +grad", [(1024, 1024)], lambda x: x.cumsum(1), lambda x: x.cumsum(1), True, None),
  ("cumsum first axis 1024x1024 +grad", [(1024, 1024)], lambda x: x.cumsum(0), lambda x: x.cumsum(0), True, None),
  ("logcumsumexp 256x2048", [(256, 2048)], lambda x: x.logcumsumexp(1), lambda x: x.logcumsumexp(1), False, None),
  ("topk 64x4096 k=8", [(64, 4096)], lambda x: x.topk(8)[0], lambda x: x.topk(8)[0], False, None),
  ("topk 1x50257 k=40", [(1, 50257)], lambda x: x.topk(40)[0], lambda x: x.topk(40)[0], False, None),
  ("sort 64x1024", [(64, 1024)], lambda x: x.sort(1)[0], lambda x: x.sort(1)[0], False, None),
  ("topk 64x1024 k=100", [(64, 1024)], lambda x: x.topk(100)[0], lambda x: x.topk(100)[0], False, None),
  ("argsort 4096", [(4096,)], lambda x: x.argsort(), lambda x: x.argsort(), False, None),
  ("sort 1x50257 +grad", [(1, 50257)], lambda x: x.sort(1)[0], lambda x: x.sort(1)[0], True, None),
  ("median 64x4096 rows", [(64, 4096)], lambda x: x.median(1), lambda x: x.median(1).values, False, None),
  ("column sum 256x4096", [(256, 4096)], lambda x: x.sum(0), lambda x: x.sum(0), False, None),
  ("column sum 1024x768", [(1024, 768)], lambda x: x.sum(0), lambda x: x.sum(0), False, None),
  ("row sum 4096x1024", [(4096, 1024)], lambda x: x.sum(1), lambda x: x.sum(1), False, None),
  ("full sum 8192x8192", [(8192, 8192)], lambda x: x.sum(), lambda x: x.sum(), False, None),
  ("embedding 50257x768, 2048 tokens +grad", [(50257, 768)], lambda w, i: i.embedding(w),
   lambda w, i: F.embedding(i, w), True, (50257, (2048,))),
  ("embedding 50257x768, 8192 tokens +grad", [(50257, 768)], lambda w, i: i.embedding(w),
   lambda w, i: F.embedding(i, w), True, (50257, (8192,))),
  ("index rows 5000x256 by 1024 +grad", [(5000, 256)], lambda w, i: w[i], lambda w, i: w[i], True, (5000, (1024,))),
  ("gather 1024x1024 by 1024x64", [(1024, 1024)], lambda x, i: x.gather(1, i), lambda x, i: x.gather(1, i), False,
   (1024, (1024, 64))),
  ("scatter_add 1024x1024 from 1024x64", [(1024, 64)],
   lambda s, i: Tensor.zeros(1024, 1024).scatter_reduce(1, i, s, "sum"),
   lambda s, i: torch.zeros(1024, 1024).scatter_add(1, i, s), False, (1024, (1024, 64))),
  ("scatter_add by a shared index 10000x64 from 50000 rows +grad", [(50000, 64)],
   lambda s, i: Tensor.zeros(10000, 64).scatter_add(0, i.unsqueeze(1).expand(50000, 64), s),
   lambda s, i: torch.zeros(10000, 64).scatter_add(0, i.unsqueeze(1).expand(50000, 64), s), True, (10000, (50000,))),
  ("index_add 10000x64 from 50000 rows +grad", [(10000, 64), (50000, 64)], lambda x, s, i: x.index_add(0, i, s),
   lambda x, s, i: x.index_add(0, i, s), True, (10000, (50000,))),
  ("searchsorted 1024x64 rows by 1024x1024", [(1024, 64), (1024, 1024)], lambda a, v: a.sort(1)[0].searchsorted(v),
   lambda a, v: torch.searchsorted(a.sort(1)[0], v), False, None),
  ("cross_entropy 1024x32000 +grad", [(1024, 32000)], lambda x, i: x.cross_entropy(i),
   lambda x, i: F.cross_entropy(x, i), True, (32000, (1024,))),
  ("layernorm 8192x768 +grad", [(8192, 768)], lambda x: x.layernorm(), lambda x: F.layer_norm(x, (768,)), True, None),
  ("softmax 8192x1024 +grad", [(8192, 1024)], lambda x: x.softmax(1), lambda x: x.softmax(1), True, None),
  ("max_pool2d 32x64x64x64 k3s2 +grad", [(32, 64, 64, 64)], lambda x: x.max_pool2d(3, 2, padding=1),
   lambda x: F.max_pool2d(x, 3, 2, 1), True, None),
  ("interpolate bilinear 8x64x64x64 x2", [(8, 64, 64, 64)], lambda x: x.interpolate((128, 128), mode="linear"),
   lambda x: F.interpolate(x, (128, 128), mode="bilinear"), False, None),
  ("conv1d 16x256x1024 k3 +grad", [(16, 256, 1024), (256, 256, 3)], lambda x, w: x.conv2d(w, padding=1),
   lambda x, w: F.conv1d(x, w, padding=1), True, None),
  ("conv_transpose2d 8x64x32x32 k4s2 +grad", [(8, 64, 32, 32), (64, 32, 4, 4)],
   lambda x, w: x.conv_transpose2d(w, stride=2, padding=1),
   lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1), True, None),
  ("matmul 4097x512x512", [(4097, 512), (512, 512)], lambda a, b: a @ b, lambda a, b: a @ b, False, None),
  ("matmul 777x333x555", [(777, 333), (333, 555)], lambda a, b: a @ b, lambda a, b: a @ b, False, None),
]

def best(f: Callable[[], Any], runs: int) -> float:
  f(); f()
  ts = []
  for _ in range(runs):
    t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
  return min(ts) * 1e3

def run_case(case: tuple, runs: int) -> tuple[float, float]:
  _, shapes, ours, theirs, grad, ints = case
  rng = np.random.default_rng(0)
  arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
  idx = rng.integers(0, ints[0], ints[1]).astype(np.int64) if ints else None
  ts = [Tensor(a, requires_grad=grad).realize() for a in arrs]
  ti = [Tensor(idx.astype(np.int32)).realize()] if idx is not None else []
  up_np = rng.standard_normal(ours(*ts, *ti).shape).astype(np.float32) if grad else None
  up = Tensor(up_np).realize() if up_np is not None else None
  def step() -> Any:
    y = ours(*ts, *ti)
    return Tensor.realize(y, *y.gradient(*ts, gradient=up)) if grad else y.realize()
  mine = best(TinyJit(step), runs)
  tt = [torch.tensor(a, requires_grad=grad) for a in arrs]
  tti = [torch.tensor(idx)] if idx is not None else []
  def tstep() -> None:
    y = theirs(*tt, *tti)
    if grad: torch.autograd.grad(y, tt, grad_outputs=torch.tensor(up_np).reshape(y.shape))
  with torch.set_grad_enabled(grad): ref = best(tstep, runs)
  return mine, ref

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--only", help="run the ops whose name has this substring")
  ap.add_argument("--runs", type=int, default=8)
  a = ap.parse_args()
  torch.set_num_threads(2)
  print(f"torch {torch.__version__} with {torch.get_num_threads()} threads; ours: TinyJit, best of {a.runs}")
  print("| op | ours ms | torch ms | ours / torch |\n|---|---|---|---|")
  for case in CASES:
    if a.only and a.only not in case[0]: continue
    mine, ref = run_case(case, a.runs)
    print(f"| {case[0]} | {mine:.3f} | {ref:.3f} | {mine / ref:.2f}x |", flush=True)

if __name__ == "__main__": main()
