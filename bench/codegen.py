"""Benchmark: codegen time per kernel (kernel AST -> rendered program, no C compiler) on the kernels of a few real
models, against the time the scheduler took to produce those kernels (measured in the same run, same process).

  python bench/codegen.py [--repeat 3] [--model resnet18|lstm]

Prints ms per kernel for codegen (get_program: opts, lowering, linearize, render) and for scheduling, and their ratio.
Every repeat lowers fresh copies of the ASTs (the kernel-name arg is changed so no cache inside codegen can help).
--model: instead, the kernels of one training step of bench/models.py's ResNet-18 (batch 8, 64x64) or LSTM (batch 16),
captured as one eager step compiles them, and the seconds their codegen takes per repeat (what the first step of a
model pays before its C or LLVM compile). No scheduling reference there.
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

def model_kernels(model: str) -> list:
  """The ASTs of every kernel one eager training step of `model` compiles (bench/models.py's step), in launch order."""
  import os, sys
  import numpy as np
  from tinygrad import Tensor
  from tinygrad.uop import hooks
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from models import ours_train_step, resnet_loss, lm_loss, bench_input, lstm_model, LSTM_VOCAB, LSTM_TOKENS
  Tensor.manual_seed(0)
  if model == "lstm":
    step = ours_train_step(lstm_model(), lm_loss, jit=False)
    x = Tensor(bench_input((16, LSTM_TOKENS), LSTM_VOCAB)).realize()
  else:
    from tinygrad.models.resnet import resnet18
    step = ours_train_step(resnet18(num_classes=10), resnet_loss, jit=False)
    x = Tensor(np.random.default_rng(0).standard_normal((8, 3, 64, 64)).astype(np.float32)).realize()
  asts: dict = {}
  def on_launch(runner, bufs, start, seconds):
    if hasattr(runner, "p"): asts.setdefault(runner.p.ast, None)
  hooks.launched.append(on_launch)
  try: step(x)
  finally: hooks.launched.remove(on_launch)
  return list(asts)

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--model", choices=("resnet18", "lstm"))
  args = ap.parse_args()
  if args.model:
    from tinygrad import Device
    from tinygrad.uop.ops import UOp
    from tinygrad.codegen import get_program
    base, ren, best = model_kernels(args.model), Device["CPU"].renderer, float("inf")
    for rep in range(args.repeat):
      asts = [UOp(a.op, a.dtype, a.src, a.arg, tag=("bench", rep)) for a in base]
      gc.collect()
      st = time.perf_counter()
      for a in asts: get_program(a, ren)
      best = min(best, time.perf_counter() - st)
    print(f"{args.model}: {len(base)} kernels of one training step, best of {args.repeat}: codegen {best:.2f} s "
          f"({best / max(len(base), 1) * 1e3:.1f} ms/kernel)")
    return
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
