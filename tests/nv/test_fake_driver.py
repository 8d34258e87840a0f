"""The NV runtime (tinygrad/runtime/ops_nv.py) against a fake libcuda (tests/nv/fake_libcuda.c) that runs each kernel's
CUDA source built for the host: device open and its errors, HCQ_VISIBLE_DEVICES, memory, copies, module load, launch
with kernelParams, launch checks, event timing. The whole of tests/tensor on this path is `make test-nv`."""
import os, subprocess, sys
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.device import Device, DeviceOpenError, Buffer
from tinygrad.helpers import Context
from tinygrad.codegen import get_program
from tinygrad.runtime.support import cuda_driver
from tests.nv import fake_nv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

@pytest.fixture
def fake(monkeypatch, tmp_path):
  log = tmp_path / "driver.log"
  monkeypatch.setenv("FAKE_CUDA_LOG", str(log))
  for k in ("FAKE_CUDA_DEVICES", "FAKE_CUDA_DRIVER", "FAKE_CUDA_CC"): monkeypatch.delenv(k, raising=False)
  fake_nv.install(monkeypatch.setattr)
  return log

def log_lines(log): return log.read_text().splitlines() if log.exists() else []

def test_elementwise_and_reduce_run_on_nv(fake):
  with Context(NOOPT=1):
    a = np.linspace(-3, 3, 96, dtype=np.float32).reshape(8, 12)
    t = Tensor(a, device="NV")
    np.testing.assert_allclose((t * 2 + 1).relu().numpy(), np.maximum(a * 2 + 1, 0))
    np.testing.assert_allclose(t.sum(1).numpy(), a.sum(1), rtol=1e-6)
    np.testing.assert_array_equal(t.maximum(Tensor(np.full((8, 12), np.nan, np.float32), device="NV")).numpy(),
                                  np.full((8, 12), np.nan, np.float32))
    h = t.cast(dtypes.half).exp2().numpy()
    np.testing.assert_allclose(h.astype(np.float32), np.exp2(a.astype(np.float16).astype(np.float32)), rtol=2e-3)
  assert any(ln.startswith("launch ") for ln in log_lines(fake))

def test_debug2_reports_each_compiled_kernel(fake, capsys):
  with Context(NOOPT=1, DEBUG=2): (Tensor(np.arange(64, dtype=np.float32), device="NV") * 2).numpy()
  out = capsys.readouterr().out
  assert "compiled E_64: sm_90 regs" in out and "spills" in out and "smem" in out and "grid [64, 1, 1] block [1, 1, 1]" in out
  assert "*** NV" in out and "tm " in out

def test_upcast_kernels_with_vector_access_run_on_nv(fake):
  # the heuristics upcast this elementwise kernel: vector stores through tg_float4, checked at launch for alignment
  a = np.arange(1024, dtype=np.float32)
  np.testing.assert_array_equal((Tensor(a, device="NV") + 1).numpy(), a + 1)

def test_hcq_visible_devices_selects_and_orders(fake, monkeypatch):
  monkeypatch.setenv("FAKE_CUDA_DEVICES", "3")
  with Context(HCQ_VISIBLE_DEVICES="2,0", NOOPT=1):
    d0, d1 = Device["NV"], Device["NV:1"]
    assert (d0.physical, d1.physical) == (2, 0) and d0.gpu_name == "Fake GPU 2"
    np.testing.assert_array_equal((Tensor([1.0, 2.0], device="NV:1") * 3).numpy(), [3, 6])
    with pytest.raises(DeviceOpenError, match=r"NV:2: only 2 NVIDIA GPU\(s\) visible \(HCQ_VISIBLE_DEVICES=2,0\)"): Device["NV:2"]
  retains = [ln for ln in log_lines(fake) if ln.startswith("retain")]
  assert retains == ["retain 2", "retain 0"]
  # the launch ran in GPU 0's context (0x1000 + 0)
  assert any(ln.startswith(f"launch ctx={0x1000}") for ln in log_lines(fake))

@pytest.mark.parametrize("spec,msg", [("3", r"names GPU\(s\) \[3\]; this machine has 2"), ("0,0", "names a GPU twice"),
                                      ("a,b", "comma list of GPU numbers")])
def test_bad_hcq_visible_devices(fake, spec, msg):
  with Context(HCQ_VISIBLE_DEVICES=spec), pytest.raises(DeviceOpenError, match=msg): Device["NV"]

def test_no_driver_is_one_clear_line(monkeypatch):
  monkeypatch.setattr(cuda_driver, "LIBCUDA_NAMES", ("libcuda-that-does-not-exist.so.1",))
  with pytest.raises(DeviceOpenError) as e: Device["NV"]
  msg = str(e.value)
  assert "\n" not in msg and "no NVIDIA driver" in msg and "r580" in msg and "COMPILE_ONLY=1" in msg

def test_no_gpu_is_one_clear_line(fake, monkeypatch):
  monkeypatch.setenv("FAKE_CUDA_DEVICES", "0")
  with pytest.raises(DeviceOpenError) as e: Device["NV"]
  assert "\n" not in str(e.value) and "reports no GPU" in str(e.value) and "COMPILE_ONLY=1" in str(e.value)

def test_driver_too_old_for_the_toolchain(fake, monkeypatch):
  monkeypatch.setenv("FAKE_CUDA_DRIVER", "12040")
  with pytest.raises(DeviceOpenError, match=r"driver supports CUDA 12\.4.*need CUDA 13\.0: update the driver to 580\.65\.06"):
    Device["NV"]

def test_arch_follows_the_gpu(fake, monkeypatch):
  monkeypatch.setenv("FAKE_CUDA_CC", "86")
  assert Device["NV"].arch == "sm_80"

def test_nv_arch_that_cannot_run_on_the_gpu(fake, monkeypatch):
  monkeypatch.setenv("FAKE_CUDA_CC", "89")
  with Context(NV_ARCH="sm_90"), pytest.raises(DeviceOpenError, match="NV_ARCH=sm_90 cubins do not run on this Fake GPU 0 .sm_89."):
    Device["NV"]

def test_unsupported_gpu(fake, monkeypatch):
  monkeypatch.setenv("FAKE_CUDA_CC", "75")
  with pytest.raises(DeviceOpenError, match="sm_75.*sm_80, sm_89, sm_90"): Device["NV"]

def _program(t):
  si = t.schedule()[-1]
  dev = Device["NV"]
  p = get_program(si.ast, dev.renderer)
  return p, dev.runtime(p.name, dev.compiler.compile(p.src)), si

def test_launch_checks_grid_and_block_limits(fake):
  p, prg, si = _program(Tensor.ones(64, device="NV").contiguous() + 1)
  bufs = [b.ensure_allocated()._buf for b in si.bufs]
  with pytest.raises(ValueError, match=r"grid dimension y of 70000 blocks is over the limit 65535"):
    prg(*bufs, global_size=(1, 70000, 1), local_size=(1, 1, 1))
  with pytest.raises(ValueError, match="2048 threads per block, over 1024"):
    prg(*bufs, global_size=(1, 1, 1), local_size=(32, 64, 1))
  with pytest.raises(ValueError, match=r"takes 2 parameters \('data0', 'data1'\), got 1 buffers"): prg(bufs[0])

def test_launch_refuses_a_misaligned_vector_buffer(fake):
  base = Buffer("NV", 260, dtypes.float32).copyin(memoryview(np.arange(260, dtype=np.float32)))
  p, prg, si = _program(Tensor.ones(256, device="NV").contiguous() * 2)
  assert prg.bin.align.get("data0") == 16, p.src
  ok = base.view(256, dtypes.float32, 16).ensure_allocated()
  prg(ok._buf, si.bufs[1].ensure_allocated()._buf, global_size=p.global_size, local_size=p.local_size or (1, 1, 1))
  bad = base.view(256, dtypes.float32, 4).ensure_allocated()
  with pytest.raises(ValueError, match="buffer data0 at address 0x[0-9a-f]+ is not 16-byte aligned"):
    prg(bad._buf, si.bufs[1]._buf, global_size=p.global_size, local_size=p.local_size or (1, 1, 1))

def test_event_timing(fake):
  p, prg, si = _program(Tensor.ones(4096, device="NV").contiguous().exp())
  et = prg(*[b.ensure_allocated()._buf for b in si.bufs], global_size=p.global_size, local_size=p.local_size or (1, 1, 1), wait=True)
  assert isinstance(et, float) and 0 <= et < 60

def test_buffer_copy_roundtrip_and_views(fake):
  data = np.arange(100, dtype=np.int32)
  b = Buffer("NV", 100, dtypes.int32).copyin(memoryview(data))
  np.testing.assert_array_equal(b.numpy(), data)
  np.testing.assert_array_equal(b.view(10, dtypes.int32, 40).numpy(), data[10:20])
  assert Buffer("NV", 0, dtypes.float32).allocate().numpy().shape == (0,)

@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_tensor_suite_on_fake_nv():
  env = {**os.environ, "DEV": "NV", "NOOPT": "1", "PYTHONPATH": ROOT}
  r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.nv.fake_nv", "tests/tensor"],
                     cwd=ROOT, env=env, capture_output=True, text=True)
  assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]

def test_gpu_checks_pass_on_the_fake_driver(fake):
  # NOTE: validates the checks `make test-gpu` runs (those without shared memory; HCQ needs a real driver in a subprocess)
  from tests.nv import gpu_checks
  todo = [c for c in gpu_checks.CHECKS if c not in gpu_checks.SHARED and c is not gpu_checks.check_hcq_visible_devices]
  assert len(todo) >= 6
  with Context(NOOPT=1): assert gpu_checks.run_all(todo) == 0

def test_gpu_matmul_bench_runs_on_the_fake_driver(fake, capsys):
  import importlib.util
  spec = importlib.util.spec_from_file_location("gpu_matmul", os.path.join(ROOT, "bench", "gpu_matmul.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  with Context(NOOPT=1):
    for name in ("float32", "float16"):
      t, desc, a, b, c = mod.ours(16, mod.DTYPES[name], 2)
      assert t > 0 and mod.check(a, b, c, mod.DTYPES[name]) < 2e-2, name
