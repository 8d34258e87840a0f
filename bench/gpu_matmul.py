"""NxNxN matmul on the NV backend (float32, float16, bfloat16; default N=4096): TFLOPS of the generated kernel against
cuBLAS measured in the same run (a ratio). The reference is torch's matmul where torch imports with CUDA, else cuBLAS
through ctypes (libcublas.so.13/.12 from the system or the nvidia-cublas wheel), else the script says there is none.
Each result is checked against numpy on a few rows. Needs only numpy and this tree (`make test-gpu` runs it).

  python3 bench/gpu_matmul.py [--n 4096] [--runs 5] [--dtypes float32,float16,bfloat16]
"""
from __future__ import annotations
import argparse, ctypes, glob, os, sys
from typing import Any, Callable
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tinygrad import Tensor, dtypes
from tinygrad.device import Device
from tinygrad.dtype import DType
from tinygrad.engine.realize import get_runner, run_schedule

DTYPES = {"float32": dtypes.float32, "float16": dtypes.float16, "bfloat16": dtypes.bfloat16}

def tflops(n: int, seconds: float) -> float: return 2 * n**3 / seconds / 1e12

# ---- ours ----

def ours(n: int, dt: DType, runs: int) -> tuple[float, str, Tensor, Tensor, Tensor]:
  """(best seconds of the matmul kernel, its name and report, a, b, c)."""
  Tensor.manual_seed(0)
  a = Tensor.rand(n, n, device="NV").cast(dt).realize()
  b = Tensor.rand(n, n, device="NV").cast(dt).realize()
  c = a @ b
  items = c.schedule()
  if len(items) != 1: raise RuntimeError(f"expected one matmul kernel, the schedule has {len(items)}")
  si = items[0]
  run_schedule(items)  # NOTE: compiles and runs once (warm-up); the timed runs below reuse the buffers
  runner = get_runner("NV", si.ast)
  best = min(float(runner(list(si.bufs), {}, wait=True) or 0.0) for _ in range(runs))
  c = c.realize()
  return best, f"{runner.display_name} ({getattr(runner, 'report', '')})", a, b, c

def check(a: Tensor, b: Tensor, c: Tensor, dt: DType) -> float:
  """Max relative error of 4 rows of c against numpy in float64."""
  A, B, C = a.numpy()[:4].astype(np.float64), b.numpy().astype(np.float64), c.numpy()[:4].astype(np.float64)
  ref = A @ B
  return float(np.max(np.abs(C - ref) / (np.abs(ref) + 1.0)))

# ---- references ----

def torch_reference(n: int, name: str, runs: int) -> float | None:
  try: import torch
  except ImportError: return None
  if not torch.cuda.is_available(): return None
  tdt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]
  a, b = torch.rand(n, n, device="cuda", dtype=tdt), torch.rand(n, n, device="cuda", dtype=tdt)
  torch.backends.cuda.matmul.allow_tf32 = False
  a @ b
  best = float("inf")
  for _ in range(runs):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); a @ b; e.record(); e.synchronize()
    best = min(best, s.elapsed_time(e) / 1e3)
  return best

def find_cublas() -> str | None:
  cands = ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]
  for entry in sys.path + ["/usr/local/cuda/lib64"]:
    cands += sorted(glob.glob(os.path.join(entry, "nvidia", "*", "lib", "libcublas.so.*")))
    cands += sorted(glob.glob(os.path.join(entry, "libcublas.so.*")))
  for c in cands:
    try:
      ctypes.CDLL(c)
      return c
    except OSError: continue
  return None

CUDA_R = {"float32": 0, "float16": 2, "bfloat16": 14}
CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT = 68, -1

def cublas_reference(n: int, name: str, runs: int, path: str) -> float:
  """cublasGemmEx on our own device buffers (the driver's primary context, which the runtime API shares)."""
  lib: Any = ctypes.CDLL(path)
  dev = Device["NV"]
  dev.make_current()
  handle = ctypes.c_void_p()
  if (rc := lib.cublasCreate_v2(ctypes.byref(handle))) != 0: raise RuntimeError(f"cublasCreate_v2 failed ({rc})")
  dt = DTYPES[name]
  bufs = [dev.allocator.alloc(n * n * dt.itemsize) for _ in range(3)]
  alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
  P, I = ctypes.c_void_p, ctypes.c_int
  lib.cublasGemmEx.argtypes = [P, I, I, I, I, I, P, ctypes.c_uint64, I, I, ctypes.c_uint64, I, I, P, ctypes.c_uint64, I,
                               I, I, I]
  def gemm() -> None:
    # NOTE: column-major cuBLAS computes C^T = B^T A^T, which is row-major C = A B
    t = CUDA_R[name]
    rc = lib.cublasGemmEx(handle, 0, 0, n, n, n, ctypes.byref(alpha), bufs[1], t, n, bufs[0], t, n, ctypes.byref(beta),
                          bufs[2], t, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
    if rc != 0: raise RuntimeError(f"cublasGemmEx failed ({rc})")
  try: return best_of(gemm, runs)
  finally:
    lib.cublasDestroy_v2(handle)
    for bf in bufs: dev.allocator.free(bf, n * n * dt.itemsize, None)

def best_of(fn: Callable[[], None], runs: int) -> float:
  """Best seconds of fn() on the default stream, timed with CUDA events."""
  dev = Device["NV"]
  drv = dev.drv
  ev = (ctypes.c_void_p(), ctypes.c_void_p())
  for e in ev: drv.call("cuEventCreate", ctypes.byref(e), 0)
  fn()
  best = float("inf")
  for _ in range(runs):
    drv.call("cuEventRecord", ev[0], None)
    fn()
    drv.call("cuEventRecord", ev[1], None)
    drv.call("cuEventSynchronize", ev[1])
    ms = ctypes.c_float()
    drv.call("cuEventElapsedTime", ctypes.byref(ms), ev[0], ev[1])
    best = min(best, ms.value / 1e3)
  for e in ev: drv.call("cuEventDestroy_v2", e)
  return best

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--n", type=int, default=4096)
  ap.add_argument("--runs", type=int, default=5)
  ap.add_argument("--dtypes", default="float32,float16,bfloat16")
  args = ap.parse_args()
  dev = Device["NV"]
  print(f"NV: {dev.gpu_name} ({dev.arch}), {args.n}x{args.n}x{args.n} matmul, best of {args.runs}")
  cublas = find_cublas()
  failed = 0
  for name in args.dtypes.split(","):
    t, desc, a, b, c = ours(args.n, DTYPES[name], args.runs)
    err = check(a, b, c, DTYPES[name])
    tol = {"float32": 1e-3, "float16": 2e-2, "bfloat16": 1e-1}[name]
    ok = err <= tol
    failed += not ok
    line = f"{name:9s} tinygrad {tflops(args.n, t):8.2f} TFLOPS [{desc}] max rel err {err:.1e}"
    if not ok: line += f" (WRONG: over {tol})"
    ref, how = torch_reference(args.n, name, args.runs), "torch"
    if ref is None and cublas is not None:
      ref, how = cublas_reference(args.n, name, args.runs, cublas), f"cuBLAS {cublas}"
    if ref is None: print(f"{line}; no reference (neither torch with CUDA nor libcublas found)")
    else: print(f"{line}; {how} {tflops(args.n, ref):8.2f} TFLOPS; ratio {ref / t:.3f}")
  return 1 if failed else 0

if __name__ == "__main__": sys.exit(main())
