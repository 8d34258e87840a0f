"""1024x1024 float32 matmul on CPU: GFLOPS of the generated kernel against numpy in the same run (a ratio; absolute
times on shared machines mean little), with the default heuristics and with BEAM; then compile time per kernel of a
small model.

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/matmul.py [--n 1024] [--beam 2] [--runs 5]

NOTE: some machines here set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE), which pins numpy's OpenBLAS to an older, slower
kernel; unset both for this command alone (as above) so the reference is numpy at its best. The script says which.
"""
from __future__ import annotations
import argparse, os, sys, time
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import KernelInfo, hand_coded_optimizations
from tinygrad.codegen.search import beam_search
from tinygrad.device import Device, Buffer
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp

def matmul_ast(M: int, N: int, K: int) -> UOp:
  """out[i, j] = sum_k a[i, k] * b[k, j], as the scheduler would hand it to codegen."""
  i, j, k = UOp.range(M, 0), UOp.range(N, 1), UOp.range(K, 2, AxisType.REDUCE)
  g = [UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), arg=x) for x, n in enumerate((M * N, M * K, K * N))]
  acc = (g[1].index(i * K + k).load() * g[2].index(k * N + j).load()).reduce(k, arg=Ops.ADD)
  return UOp.sink(g[0].index(i * N + j).store(acc).end(i, j), arg=KernelInfo(name=f"matmul_{M}_{N}_{K}"))

def timed(fn) -> float:
  st = time.perf_counter()
  fn()
  return time.perf_counter() - st

def build_kernel(n: int, opts, a: np.ndarray, b: np.ndarray):
  """(a runner of the generated kernel, compile seconds, applied opts); checks the result against numpy."""
  dev = Device["CPU"]
  st = time.perf_counter()
  with Context(CACHELEVEL=0):
    p = get_program(matmul_ast(n, n, n), dev.renderer, opts=opts)
    prg = dev.runtime(p.name, dev.compiler.compile_cached(p.src))
  ct = time.perf_counter() - st
  out = Buffer("CPU", n * n, dtypes.float32).allocate()
  ba, bb = [Buffer("CPU", n * n, dtypes.float32).copyin(memoryview(x.reshape(-1))) for x in (a, b)]
  gs, ls = p.launch_dims({})
  def run() -> None: prg(out._buf, ba._buf, bb._buf, global_size=gs, local_size=ls)
  run()
  np.testing.assert_allclose(out.numpy().reshape(n, n), a @ b, rtol=1e-3, atol=1e-3)
  return run, ct, str(list(p.applied_opts))

def race(runs_by_label: dict[str, object], rounds: int) -> dict[str, float]:
  """Best time of each runner, measured round robin so that every one of them sees the same machine load."""
  best = {k: float("inf") for k in runs_by_label}
  for _ in range(rounds):
    for k, fn in runs_by_label.items(): best[k] = min(best[k], timed(fn))
  return best

def small_model_compile_times() -> list[tuple[str, float]]:
  """Compile (codegen + C compiler, cache off) every kernel of a small MLP step (Tensor API; else hand-built)."""
  dev = Device["CPU"]
  asts = []
  try:
    from tinygrad import Tensor
    x = Tensor.randn(32, 64).realize()
    w1, w2 = Tensor.randn(64, 128, requires_grad=True).realize(), Tensor.randn(128, 10, requires_grad=True).realize()
    loss = (x @ w1).relu().matmul(w2).log_softmax(-1).mean()
    loss.backward()
    asts = [si.ast for si in Tensor.schedule(loss, w1.grad, w2.grad)]  # type: ignore[attr-defined]
  except Exception as e:
    print(f"(Tensor API not usable for the model yet: {type(e).__name__}: {e}; timing hand-built kernels)")
    asts = [matmul_ast(32, 128, 64), matmul_ast(32, 10, 128), matmul_ast(64, 128, 32)]
  ret = []
  with Context(CACHELEVEL=0):
    for ast in asts:
      st = time.perf_counter()
      p = get_program(ast, dev.renderer)
      dev.compiler.compile_cached(p.src)
      ret.append((p.name, time.perf_counter() - st))
  return ret

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--n", type=int, default=1024)
  ap.add_argument("--beam", type=int, default=2)
  ap.add_argument("--runs", type=int, default=5)
  args = ap.parse_args()
  n = args.n
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
  flop = 2 * n ** 3
  print(f"{n}x{n} float32 matmul, CPU threads {Device['CPU'].threads}; GFLOPS are the best of {args.runs} "
        "rounds, each round running numpy and every variant once")
  if pinned := {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}:
    print(f"  WARNING: {pinned} pins numpy's OpenBLAS kernel, so the numpy reference is slower than it can be; "
          "rerun with `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`")
  ren = Device["CPU"].renderer
  rows = [("heuristics", hand_coded_optimizations(matmul_ast(n, n, n), ren))]
  if args.beam:
    st = time.perf_counter()
    rows.append((f"BEAM={args.beam}", beam_search(matmul_ast(n, n, n), ren, args.beam)))
    print(f"  (BEAM search took {time.perf_counter() - st:.1f} s; cached in sqlite for the next run)")
  built = {label: build_kernel(n, opts, a, b) for label, opts in rows}
  best = race({"numpy": lambda: a @ b, **{label: run for label, (run, _, _) in built.items()}}, args.runs)
  print(f"  numpy                {flop / best['numpy'] * 1e-9:7.2f} GFLOPS")
  for label, (_, ct, applied) in built.items():
    ratio = best["numpy"] / best[label]
    print(f"  tinygrad {label:11s} {flop / best[label] * 1e-9:7.2f} GFLOPS = {ratio:5.2f}x numpy  "
          f"(compile {ct * 1e3:.0f} ms, opts {applied})")
  times = small_model_compile_times()
  print(f"compile time per kernel, small model ({len(times)} kernels): "
        f"mean {sum(t for _, t in times) / len(times) * 1e3:.1f} ms, max {max(t for _, t in times) * 1e3:.1f} ms")

if __name__ == "__main__":
  main()
