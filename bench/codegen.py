"""Benchmark: codegen time per kernel (kernel AST -> rendered program, no C compiler) on the kernels of a few real
models, against the time the scheduler took to produce those kernels (measured in the same run, same process).

  python bench/codegen.py [--repeat 3]

Prints ms per kernel for codegen (get_program: opts, lowering, linearize, render) and for scheduling, and their ratio.
Every repeat lowers fresh copies of the ASTs (the kernel-name arg is changed so no cache inside codegen can help).
"""
from __future__ import annotations
import argparse, gc, time

def workloads() -> list:
  from tinygrad import Tensor
  Tensor.manual_seed(0)
  x, w1, w2 = Tensor.randn(32, 64, requires_grad=True), Tensor.randn(64, 128, requires_grad=True), Tensor.randn(128, 10)
  loss = (x @ w1).relu().matmul(w2).log_softmax().mean()
  loss.backward()
  img, k = Tensor.randn(4, 3, 16, 16), Tensor.randn(8, 3, 3, 3)
  conv = img.conv2d(k, padding=1).relu().max_pool2d().sum()
  att = Tensor.randn(2, 16, 32)
  attn = (att @ att.transpose(1, 2) / 5.6).softmax() @ att
  cat = Tensor.randn(7, 5).cat(Tensor.randn(3, 5)).pad(((1, 2), (0, 3))).cumsum(0)
  return [loss, x.grad, w1.grad, conv, attn, cat]

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--repeat", type=int, default=3)
  args = ap.parse_args()
  from tinygrad import Device
  from tinygrad.uop import Ops
  from tinygrad.uop.ops import UOp
  from tinygrad.codegen import get_program
  ren = Device["CPU"].renderer
  best_sched, best_cg, n = float("inf"), float("inf"), 0
  for rep in range(args.repeat):
    ts = workloads()
    gc.collect()
    st = time.perf_counter()
    items = ts[0].schedule(*ts[1:])
    sched = time.perf_counter() - st
    asts = [si.ast for si in items if si.ast.op is Ops.SINK]
    # NOTE: a fresh SINK arg per repeat so nothing memoized per AST survives between repeats
    asts = [UOp(a.op, a.dtype, a.src, a.arg, tag=("bench", rep)) for a in asts]
    gc.collect()
    st = time.perf_counter()
    for a in asts: get_program(a, ren)
    cg = time.perf_counter() - st
    n = len(asts)
    best_sched, best_cg = min(best_sched, sched / max(n, 1)), min(best_cg, cg / max(n, 1))
  print(f"{n} kernels (MLP fwd+bwd, conv+pool, attention, cat/pad/cumsum), best of {args.repeat}")
  print(f"  codegen:    {best_cg*1e3:8.2f} ms/kernel")
  print(f"  scheduling: {best_sched*1e3:8.2f} ms/kernel (reference)")
  print(f"  codegen costs {best_cg/best_sched:.2f}x the scheduling of the same kernels")

if __name__ == "__main__": main()
