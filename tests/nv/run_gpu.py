#!/usr/bin/env python3
"""`make test-gpu`: the NV backend on a GPU host, run with the host's python3 and numpy and what travels with the tree
(no virtual environment to create, no pip, no package registry).

1. Where the toolchain is (the pip wheels if this Python has them, else a `.venv` that travelled with the tree, else
   CUDA_PATH or /usr/local/cuda), the driver version against what the toolchain needs, and the GPUs.
2. With pytest and hypothesis importable: the gpu-marked tests (tests/nv/test_gpu.py: the checks of
   tests/nv/gpu_checks.py and the whole of tests/tensor on DEV=NV). Without them: the checks alone, run directly,
   and a line saying that tests/tensor did not run.
3. bench/gpu_matmul.py: float32/float16/bfloat16 4096^3 matmul TFLOPS against cuBLAS in the same run.
Exit status 0 only when everything ran and passed.
"""
from __future__ import annotations
import glob, importlib.util, os, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def travelled_toolchain() -> str | None:
  """The CUDA wheels' directory inside a .venv that came with the tree (any Python version: only its files are used)."""
  for d in sorted(glob.glob(os.path.join(ROOT, ".venv", "lib", "python3*", "site-packages", "nvidia", "cu1[0-9]"))):
    if glob.glob(os.path.join(d, "lib", "libnvrtc.so*")) and os.path.exists(os.path.join(d, "bin", "ptxas")): return d
  return None

def step(title: str) -> None: print(f"\n==== {title} ====", flush=True)

def main() -> int:
  # NOTE: the project targets 3.11, and this path (tinygrad, tests/nv/gpu_checks.py, bench/gpu_matmul.py) also runs on
  # 3.10 (checked on the fake driver); 3.9 lacks importlib.metadata.entry_points(group=), which tinygrad's import uses
  if sys.version_info < (3, 10):
    print(f"FAIL python {sys.version.split()[0]} ({sys.executable}) is too old: make test-gpu needs python 3.10 or newer "
          "(run it as `make test-gpu PYTHON=python3.11`, or with any python3.10+ that has numpy)")
    return 1
  sys.path.insert(0, ROOT)
  os.chdir(ROOT)
  step("environment")
  import numpy as np
  print(f"python {sys.version.split()[0]} ({sys.executable}), numpy {np.__version__}")
  # NOTE: CUDA_PATH is read when tinygrad is imported, so it is decided first
  if importlib.util.find_spec("nvidia") is None and not os.environ.get("CUDA_PATH") and (tc := travelled_toolchain()):
    os.environ["CUDA_PATH"] = tc
    print(f"toolchain: this Python has no nvidia wheels; using the ones that travelled in {tc} (CUDA_PATH)")
  from tinygrad.device import Device, DeviceOpenError
  from tinygrad.runtime.support.cuda_toolchain import find_toolchain, ToolchainError
  try: print(f"toolchain: {find_toolchain().describe()}")
  except ToolchainError as e:
    print(f"FAIL {e}")
    return 1
  try: dev = Device["NV"]
  except DeviceOpenError as e:
    print(f"FAIL {e}")
    return 1
  from tinygrad.runtime.support.cuda_driver import driver_version_str
  have, (need, need_str) = dev.drv.version(), dev.compiler.min_driver
  print(f"driver: CUDA {driver_version_str(have)} (the toolchain's cubins need CUDA {driver_version_str(need)}, "
        f"driver {need_str} or newer)")
  n = dev.drv.get_int("cuDeviceGetCount")
  print(f"GPUs: {n}; NV is {dev.gpu_name} (physical {dev.physical}), sm_{dev.capability[0]}{dev.capability[1]}, "
        f"compiling for {dev.arch}")
  failed = 0
  step("tests")
  env = {**os.environ, "RUN_GPU_TESTS": "1", "PYTHONPATH": ROOT}
  missing = [m for m in ("pytest", "hypothesis") if importlib.util.find_spec(m) is None]
  if not missing:
    st = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests/nv/test_gpu.py"],
                       env=env)
    print(f"pytest tests/nv/test_gpu.py (incl. tests/tensor on DEV=NV): exit {r.returncode} in "
          f"{time.perf_counter() - st:.0f} s")
    failed += r.returncode != 0
  else:
    print(f"NOTE: {' and '.join(missing)} not importable by {sys.executable}: tests/tensor on DEV=NV did NOT run; "
          "running the plain GPU checks of tests/nv/gpu_checks.py instead")
    from tests.nv.gpu_checks import run_all
    failed += run_all() != 0
  step("bench/gpu_matmul.py")
  r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gpu_matmul.py")], env=env)
  failed += r.returncode != 0
  step("result")
  print("PASS" if failed == 0 else f"FAIL ({failed} step(s) failed)")
  return 1 if failed else 0

if __name__ == "__main__": sys.exit(main())
