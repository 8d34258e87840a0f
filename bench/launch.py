"""Benchmark: the cost of one launch in a TinyJit replay on the CPU, against the same kernels called directly through
ctypes in the same run (the floor: the kernel and the foreign call, no Python of ours).

  python bench/launch.py [--kernels 100] [--n 16] [--reps 20]

The jitted function chains --kernels products of an n x n matrix by another (each made contiguous, so each is a kernel
of its own: about n^3 multiply-adds, a microsecond at n = 16). It prints, per launch, the replay's best time, the direct
calls' best time, and their difference: what a launch costs beyond its kernel (the launch bookkeeping of
engine/realize.py and engine/jit.py, the CPU runtime's call).
"""
from __future__ import annotations
import argparse, ctypes, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tinygrad import Tensor, TinyJit, Device
from tinygrad.device import buffer_of
from tinygrad.tensor import base_buffer

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--kernels", type=int, default=100)
  ap.add_argument("--n", type=int, default=16)
  ap.add_argument("--reps", type=int, default=20)
  args = ap.parse_args()
  if not Device.DEFAULT.startswith("CPU"):
    sys.exit(f"bench/launch.py times CPU launches; the default device is {Device.DEFAULT}")
  x0 = Tensor.ones(args.n, args.n).contiguous().realize()
  w = (Tensor.ones(args.n, args.n) * 0.01).contiguous().realize()
  @TinyJit
  def chain(x: Tensor) -> Tensor:
    for _ in range(args.kernels): x = (x @ w).contiguous()
    return x
  for _ in range(3): chain(x0)
  assert chain.captured is not None
  launches = chain.captured.launches
  jit = min(_timed(lambda: chain(x0)) for _ in range(args.reps)) / len(launches)
  # the same programs called directly, each with its launch's buffers (a launch whose buffer is the argument takes x0)
  calls = []
  arg = buffer_of(base_buffer(x0.uop))._buf
  for ln in launches:
    bufs = [b._buf if b is not None else arg for b in ln.bufs]
    if (n := ln.runner.p.launch_dims({})[0][0]) != 1:
      sys.exit(f"kernel {ln.runner.display_name} runs on {n} cores; choose a smaller --n")
    calls.append((ln.runner.prg.fxn, [bufs[i] for i in ln.runner.p.globals]))
  core0 = ctypes.c_int32(0)
  def direct() -> None:
    for fxn, bufs in calls: fxn(*bufs, core0)
  raw = min(_timed(direct) for _ in range(args.reps)) / len(launches)
  print(f"{len(launches)} launches of {args.n}x{args.n} products: TinyJit replay {jit * 1e6:.1f} us a launch, direct "
        f"ctypes calls {raw * 1e6:.1f} us; overhead {(jit - raw) * 1e6:.1f} us a launch ({jit / raw:.1f}x the direct "
        "call)")

def _timed(fn) -> float:
  st = time.perf_counter()
  fn()
  return time.perf_counter() - st

if __name__ == "__main__": main()
