"""Benchmark: latency of exported ONNX models (tests/onnx/torch_models.py: the ResNet and the transformer encoder),
OnnxRunner under TinyJit against onnxruntime on the same model and inputs, measured in the same run.

  python bench/onnx.py [--iters 20] [--batch 8] [--threads 0]

Each model is exported by torch.onnx.export, run once by both to check the outputs agree, then timed: the median of
--iters calls each (ours: TinyJit replays after the warm-up and capture calls; onnxruntime: InferenceSession.run with
--threads intra-op threads, 0 = its default). Prints the milliseconds of each and the ratio (ours / onnxruntime).
"""
from __future__ import annotations
import argparse, os, statistics, sys, time
import numpy as np
# NOTE: run as a script, bench/ is sys.path[0], where this file would shadow the onnx package the exporter imports
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))
from tinygrad import Tensor, TinyJit
from tinygrad.nn.onnx import OnnxRunner

def _median_ms(fn, iters: int) -> float:
  ts = []
  for _ in range(iters):
    st = time.perf_counter()
    fn()
    ts.append((time.perf_counter() - st) * 1000)
  return statistics.median(ts)

def bench(name: str, iters: int, batch: int, threads: int) -> tuple[float, float]:
  import onnxruntime as ort
  from tests.onnx import torch_models as tm
  model = tm.export(name)
  feeds = tm.inputs(name, batch)
  opts = ort.SessionOptions()
  if threads: opts.intra_op_num_threads = threads
  sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
  runner = OnnxRunner(model)
  out_name = runner.outputs[0].name
  jit = TinyJit(lambda **kw: runner(kw)[out_name])
  args = {k: Tensor(v).realize() for k, v in feeds.items()}
  for _ in range(3): ours = jit(**args).numpy()  # warm-up, capture, first replay
  ref = sess.run(None, feeds)[0]
  np.testing.assert_allclose(ours, ref, rtol=1e-3, atol=1e-4)
  t_ours = _median_ms(lambda: jit(**args).numpy(), iters)
  t_ort = _median_ms(lambda: sess.run(None, feeds), iters)
  return t_ours, t_ort

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--iters", type=int, default=20)
  ap.add_argument("--batch", type=int, default=8)
  ap.add_argument("--threads", type=int, default=0)
  args = ap.parse_args()
  print(f"{'model':10s} {'ours ms':>9s} {'onnxruntime ms':>15s} {'ratio':>7s}")
  for name in ("resnet", "encoder"):
    ours, theirs = bench(name, args.iters, args.batch, args.threads)
    print(f"{name:10s} {ours:9.2f} {theirs:15.2f} {ours / theirs:7.2f}")

if __name__ == "__main__": main()
