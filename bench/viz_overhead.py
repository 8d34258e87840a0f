"""Benchmark: the cost of recording (VIZ=1) on codegen, against codegen of the same kernels with the recorder off,
measured alternately in the same process (best of --repeat each).

  python bench/viz_overhead.py [--repeat 3]

Prints ms per kernel with the recorder off and on, their ratio, and the trace's bytes per kernel.
"""
from __future__ import annotations
import argparse, gc, os, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--repeat", type=int, default=3)
  args = ap.parse_args()
  from codegen import workloads
  from tinygrad import Device
  from tinygrad.uop import Ops
  from tinygrad.uop.ops import UOp
  from tinygrad.codegen import get_program
  from tinygrad.viz import record
  ren = Device["CPU"].renderer
  ts = workloads()
  base = [si.ast for si in ts[0].schedule(*ts[1:]) if si.ast.op is Ops.SINK]
  best = {False: float("inf"), True: float("inf")}
  size = 0
  with tempfile.TemporaryDirectory() as d:
    for rep in range(args.repeat):
      for on in (False, True):
        # NOTE: a fresh SINK arg per run so nothing memoized per AST survives between runs
        asts = [UOp(a.op, a.dtype, a.src, a.arg, tag=("bench", rep, on)) for a in base]
        gc.collect()
        if on: rec = record.start(os.path.join(d, f"t{rep}.jsonl"))
        st = time.perf_counter()
        for a in asts: get_program(a, ren)
        best[on] = min(best[on], (time.perf_counter() - st) / len(asts))
        if on:
          record.stop()
          size = os.path.getsize(rec.path) // len(asts)
  print(f"{len(base)} kernels (bench/codegen.py's), best of {args.repeat}")
  print(f"  recorder off: {best[False]*1e3:8.2f} ms/kernel (reference)")
  print(f"  recorder on:  {best[True]*1e3:8.2f} ms/kernel, {size / 1e3:.0f} kB of trace per kernel")
  print(f"  VIZ=1 costs {best[True]/best[False]:.2f}x codegen with VIZ=0")

if __name__ == "__main__": main()
