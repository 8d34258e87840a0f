"""Checks of the NV backend on a real GPU, as plain functions (numpy and asserts, no pytest): tests/nv/test_gpu.py runs
them under pytest (`gpu`-marked), tests/nv/run_gpu.py (`make test-gpu`) runs them directly where pytest is missing.

Each check takes no arguments and raises AssertionError (or the backend's own error) on failure. `SHARED` lists the
checks that need shared memory and barriers (a fake driver running kernels on the host cannot run those)."""
from __future__ import annotations
import os, subprocess, sys
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.device import Device
from tinygrad.helpers import Context

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
rng = np.random.default_rng(0)

def check_device_opens() -> None:
  dev = Device["NV"]
  from tinygrad.renderer.archs import NV_SUPPORTED_ARCHS
  assert dev.arch in NV_SUPPORTED_ARCHS, dev.arch
  need, _ = dev.compiler.min_driver
  assert dev.drv.version() >= need
  print(f"  {dev.device}: {dev.gpu_name}, sm_{dev.capability[0]}{dev.capability[1]} -> {dev.arch}, driver CUDA "
        f"{dev.drv.version() // 1000}.{dev.drv.version() % 1000 // 10}")

def check_elementwise_float32() -> None:
  a, b = rng.standard_normal((33, 65)).astype(np.float32), rng.standard_normal((33, 65)).astype(np.float32)
  out = ((Tensor(a, device="NV") * 2 - Tensor(b, device="NV")).relu() + 1).numpy()
  np.testing.assert_allclose(out, np.maximum(a * 2 - b, 0) + 1, rtol=1e-6)

def check_nan_max_and_conversions() -> None:
  a = np.array([np.nan, 1, -np.inf, 1000, 0.1, 61440, -3.5, 2**-20], np.float32)
  b = np.array([1, np.nan, 3, 5, 0.2, 1, -3.5, 0], np.float32)
  t, u = Tensor(a, device="NV"), Tensor(b, device="NV")
  np.testing.assert_array_equal(t.maximum(u).numpy(), np.maximum(a, b))
  np.testing.assert_array_equal(t.cast(dtypes.fp8e4m3).cast(dtypes.float32).numpy(),
                                Tensor(a, device="CPU").cast(dtypes.fp8e4m3).cast(dtypes.float32).numpy())
  np.testing.assert_array_equal(t.cast(dtypes.fp8e5m2).cast(dtypes.float32).numpy(),
                                Tensor(a, device="CPU").cast(dtypes.fp8e5m2).cast(dtypes.float32).numpy())
  np.testing.assert_array_equal(t.cast(dtypes.half).numpy(), a.astype(np.float16))
  np.testing.assert_array_equal(t.cast(dtypes.bfloat16).cast(dtypes.float32).numpy(),
                                Tensor(a, device="CPU").cast(dtypes.bfloat16).cast(dtypes.float32).numpy())

def check_int_arithmetic() -> None:
  a = rng.integers(-1000, 1000, 257).astype(np.int32)
  b = np.where((v := rng.integers(-50, 50, 257)) == 0, 7, v).astype(np.int32)
  t, u = Tensor(a, device="NV"), Tensor(b, device="NV")
  np.testing.assert_array_equal((t * u + 3).numpy(), a * b + 3)
  np.testing.assert_array_equal((t // u).numpy(), a // b)

def check_reduce_and_matmul() -> None:
  a, b = rng.standard_normal((64, 96)).astype(np.float32), rng.standard_normal((96, 48)).astype(np.float32)
  np.testing.assert_allclose((Tensor(a, device="NV") @ Tensor(b, device="NV")).numpy(), a @ b, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(Tensor(a, device="NV").max(1).numpy(), a.max(1))

def check_half_and_bfloat16_matmul() -> None:
  a, b = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((128, 32)).astype(np.float32)
  for dt, tol in ((dtypes.half, 2e-2), (dtypes.bfloat16, 1e-1)):
    out = (Tensor(a, device="NV").cast(dt) @ Tensor(b, device="NV").cast(dt)).cast(dtypes.float32).numpy()
    np.testing.assert_allclose(out, a @ b, rtol=tol, atol=tol * 4)

def check_big_group_reduce() -> None:
  # a reduce of few outputs goes through shared memory and __syncthreads (GROUPTOP)
  x = rng.standard_normal(1 << 20).astype(np.float32)
  np.testing.assert_allclose(Tensor(x, device="NV").sum().numpy(), x.astype(np.float64).sum(), rtol=1e-4)
  y = rng.standard_normal((16, 4096)).astype(np.float32)
  np.testing.assert_allclose(Tensor(y, device="NV").sum(1).numpy(), y.sum(1), rtol=1e-4, atol=1e-3)

def check_copies_between_devices() -> None:
  a = np.arange(1000, dtype=np.float32)
  t = (Tensor(a, device="NV") + 1).to("CPU")
  np.testing.assert_array_equal(t.numpy(), a + 1)

def check_event_timing() -> None:
  from tinygrad.codegen import get_program
  si = (Tensor.ones(1 << 16, device="NV").contiguous() * 3).schedule()[-1]
  dev = Device["NV"]
  p = get_program(si.ast, dev.renderer)
  prg = dev.runtime(p.name, dev.compiler.compile(p.src))
  bufs = [b.ensure_allocated()._buf for b in si.bufs]
  et = prg(*bufs, global_size=p.global_size, local_size=p.local_size or (1, 1, 1), wait=True)
  assert isinstance(et, float) and 0 < et < 10, et

def check_hcq_visible_devices() -> None:
  code = ("from tinygrad.device import Device; d = Device['NV']; print(d.physical, d.gpu_name)")
  env = {**os.environ, "HCQ_VISIBLE_DEVICES": "0", "PYTHONPATH": ROOT}
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)
  assert out.returncode == 0 and out.stdout.split()[0] == "0", out.stdout + out.stderr
  from tinygrad.runtime.ops_nv import open_driver
  if open_driver().get_int("cuDeviceGetCount") < 2: return
  env["HCQ_VISIBLE_DEVICES"] = "1,0"
  out = subprocess.run([sys.executable, "-c", code.replace("Device['NV']", "Device['NV:1']")], env=env,
                       capture_output=True, text=True, cwd=ROOT)
  assert out.returncode == 0 and out.stdout.split()[0] == "0", out.stdout + out.stderr

def check_beam_times_on_the_gpu() -> None:
  a = rng.standard_normal((256, 256)).astype(np.float32)
  with Context(BEAM=2):
    np.testing.assert_allclose((Tensor(a, device="NV") * 2).sum(0).numpy(), (a * 2).sum(0), rtol=1e-4, atol=1e-4)

CHECKS = [check_device_opens, check_elementwise_float32, check_nan_max_and_conversions, check_int_arithmetic,
          check_reduce_and_matmul, check_half_and_bfloat16_matmul, check_big_group_reduce, check_copies_between_devices,
          check_event_timing, check_hcq_visible_devices, check_beam_times_on_the_gpu]
SHARED = {check_big_group_reduce, check_reduce_and_matmul, check_half_and_bfloat16_matmul, check_beam_times_on_the_gpu}

def run_all(checks: list = CHECKS) -> int:
  """Run the checks, print one line each; the number that failed."""
  failed = 0
  for fn in checks:
    try:
      fn()
      print(f"PASS {fn.__name__}")
    except Exception as e:
      failed += 1
      print(f"FAIL {fn.__name__}: {type(e).__name__}: {str(e)[:2000]}")
  return failed
