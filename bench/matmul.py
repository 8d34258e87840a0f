"""float32 matmul on the CPU: GFLOPS of the kernels `Tensor @` schedules, compiled by the C path and by the LLVM path
(CPU_LLVM), each as a ratio to numpy measured in the same run (absolute times on shared machines mean little), over a
sweep of shapes (square 1024, 1000, 1023, thin, batched); then compile time per kernel of a small model on both paths.

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/matmul.py [--shapes 1024,1000,1023,thin,batched] [--runs 6]

NOTE: some machines here set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE), which pins numpy's OpenBLAS to an older, slower
kernel; unset both for this command alone (as above) so the reference is numpy at its best. The script says which.
On a machine shared with other jobs numpy's OpenBLAS threads suffer most (they spin and wait for each other): compare
one core each with `CPU_THREADS=1 OPENBLAS_NUM_THREADS=1` (the header says how many threads each side had).
"""
from __future__ import annotations
import argparse, os, sys, time
from typing import Any, Callable
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.helpers import Context
from tinygrad.runtime.ops_cpu import CPUDevice

# name -> (batch, M, K, N): square (a multiple of every block size, and two that are not), a thin K, a thin N, a batch
SHAPES = {"1024": (1, 1024, 1024, 1024), "1000": (1, 1000, 1000, 1000), "1023": (1, 1023, 1023, 1023),
          "thin": (1, 4096, 64, 4096), "tall": (1, 8192, 1024, 16), "batched": (16, 256, 256, 256)}

def open_paths() -> dict[str, CPUDevice]:
  """The C path and the LLVM path as two CPU devices of one process (both run on host memory)."""
  with Context(CPU_LLVM=0): c = CPUDevice("CPU")
  with Context(CPU_LLVM=1): ll = CPUDevice("CPU")
  return {"C": c, "LLVM": ll}

def build(dev: CPUDevice, items: list[Any]) -> tuple[Callable[[], None], float, list[str]]:
  """(run every kernel of the schedule once, compile seconds, the kernels' names and opts)."""
  st = time.perf_counter()
  runs, names = [], []
  with Context(CACHELEVEL=0):
    for si in items:
      p = get_program(si.ast, dev.renderer)
      prg = dev.runtime(p.name, dev.compiler.compile_cached(p.src, p.renderer))
      bufs = [si.bufs[i].ensure_allocated()._buf for i in p.globals]
      gs, ls = p.launch_dims({})
      runs.append((prg, bufs, gs, ls))
      names.append(f"{p.name} {[f'{o.op.name}{o.axis},{o.arg}' for o in p.applied_opts]}")
  ct = time.perf_counter() - st
  def run() -> None:
    for prg, bufs, gs, ls in runs: prg(*bufs, global_size=gs, local_size=ls)
  return run, ct, names

def race(fns: dict[str, Callable[[], None]], rounds: int) -> dict[str, float]:
  """Best time of each, measured round robin so that every one of them sees the same machine load. The order rotates
  every round: OpenBLAS's threads spin for a while after numpy returns, which slows whatever runs right after it
  (measured: the same C kernel 17 GFLOPS right after numpy, 24 after another kernel), so no one contender always is."""
  best = {k: float("inf") for k in fns}
  names = list(fns)
  for r in range(rounds):
    for k in names[r % len(names):] + names[:r % len(names)]:
      st = time.perf_counter()
      fns[k]()
      best[k] = min(best[k], time.perf_counter() - st)
  return best

def bench_shape(label: str, shape: tuple[int, int, int, int], paths: dict[str, CPUDevice], runs: int) -> None:
  bs, m, k, n = shape
  rng = np.random.default_rng(0)
  a = rng.standard_normal((bs, m, k) if bs > 1 else (m, k), dtype=np.float32)
  b = rng.standard_normal((bs, k, n) if bs > 1 else (k, n), dtype=np.float32)
  ta, tb = Tensor(a).realize(), Tensor(b).realize()
  out = ta @ tb
  items = out.schedule()  # type: ignore[attr-defined]
  ref = a @ b
  fns: dict[str, Callable[[], None]] = {"numpy": lambda: a @ b}
  info = {}
  for name, dev in paths.items():
    run, ct, kernels = build(dev, items)
    run()
    got = items[-1].bufs[0].numpy().reshape(ref.shape)
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3, err_msg=f"{name} path, shape {label}")
    fns[name], info[name] = run, (ct, kernels)
  best = race(fns, runs)
  flop = 2 * bs * m * k * n
  cols = "  ".join(f"{name} {flop / best[name] * 1e-9:7.1f} GFLOPS = {best['numpy'] / best[name]:4.2f}x"
                   for name in paths)
  print(f"{label:8s} {bs:3d}x{m}x{k}x{n:<5d} numpy {flop / best['numpy'] * 1e-9:7.1f} GFLOPS   {cols}")
  for name, (ct, kernels) in info.items():
    print(f"           {name:5s} compile {ct * 1e3:6.0f} ms: {'; '.join(kernels)}")

def small_model_compile_times(dev: CPUDevice) -> list[float]:
  """Compile (codegen + compiler, cache off) every kernel of a small MLP training step."""
  x = Tensor.randn(32, 64).realize()
  w1, w2 = Tensor.randn(64, 128, requires_grad=True).realize(), Tensor.randn(128, 10, requires_grad=True).realize()
  loss = (x @ w1).relu().matmul(w2).log_softmax(-1).mean()
  loss.backward()
  ret = []
  with Context(CACHELEVEL=0):
    for si in Tensor.schedule(loss, w1.grad, w2.grad):  # type: ignore[attr-defined]
      st = time.perf_counter()
      p = get_program(si.ast, dev.renderer)
      dev.compiler.compile_cached(p.src, p.renderer)
      ret.append(time.perf_counter() - st)
  return ret

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--shapes", default="1024,1000,1023,thin,tall,batched", help=f"comma list of {list(SHAPES)}")
  ap.add_argument("--runs", type=int, default=6)
  args = ap.parse_args()
  paths = open_paths()
  host = paths["LLVM"].renderer
  blas = os.environ.get("OPENBLAS_NUM_THREADS", "all cores")
  print(f"float32 matmul, CPU threads {paths['C'].threads}, numpy (OpenBLAS) threads {blas}, LLVM vectors "
        f"{host.vector_bits} bits; GFLOPS are the best "
        f"of {args.runs} rounds, each round running numpy and both paths once, in rotating order; ratios are to numpy")
  if pinned := {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}:
    print(f"  WARNING: {pinned} pins numpy's OpenBLAS kernel, so the numpy reference is slower than it can be; "
          "rerun with `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`")
  for label in args.shapes.split(","):
    if label not in SHAPES: raise SystemExit(f"unknown shape {label!r}; choose from {list(SHAPES)}")
    # NOTE: one shape failing to compile is a finding to print, not a reason to drop the others
    try: bench_shape(label, SHAPES[label], paths, args.runs)
    except Exception as e: print(f"{label:8s} FAILED: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
  for name, dev in paths.items():
    times = small_model_compile_times(dev)
    print(f"compile time per kernel, small model, {name} path ({len(times)} kernels): "
          f"mean {sum(times) / len(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms")

if __name__ == "__main__":
  main()
