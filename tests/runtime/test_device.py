import ctypes, gc, weakref
import numpy as np
import pytest
from tinygrad.device import Device, Buffer, DeviceOpenError, MallocAllocator, buffer_of, set_buffer, has_buffer, next_unique
from tinygrad.dtype import dtypes, to_np_dtype
from tinygrad.helpers import Context
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp

def test_default_device_is_cpu_without_flags():
  with Context(DEV=""): assert Device.DEFAULT in ("CPU", "PYTHON", "NV", "AMD")

def test_default_device_follows_dev_flag():
  with Context(DEV="python"): assert Device.DEFAULT == "PYTHON"

def test_default_device_setter_overrides_and_resets():
  Device.DEFAULT = "python"
  try: assert Device.DEFAULT == "PYTHON"
  finally: Device.DEFAULT = None
  with Context(DEV="CPU"): assert Device.DEFAULT == "CPU"

def test_device_canonicalize():
  assert Device.canonicalize("cpu") == "CPU"
  assert Device.canonicalize("nv:1") == "NV:1"
  assert Device.canonicalize("NV:0") == "NV"

def test_unknown_device_names_itself_and_known_ones():
  with pytest.raises(DeviceOpenError, match="FOOBAR.*CPU"): Device["foobar"]

def test_bad_device_name_rejected():
  with pytest.raises(DeviceOpenError, match="not a device name"): Device["a-b"]

def test_device_is_opened_once():
  assert Device["CPU"] is Device["cpu"]

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int8, dtypes.uint16, dtypes.int64, dtypes.float16, dtypes.bool, dtypes.float64])
def test_buffer_roundtrip(dt):
  npdt = to_np_dtype(dt)
  data = (np.arange(37) % 2).astype(npdt) if dt is dtypes.bool else (np.arange(37) * 3 - 20).astype(npdt)
  b = Buffer("CPU", 37, dt).copyin(memoryview(data))
  assert b.is_allocated() and b.nbytes == 37 * dt.itemsize
  out = b.numpy()
  assert out.dtype == npdt and np.array_equal(out, data)
  assert bytes(b.as_buffer()) == data.tobytes()

def test_buffer_copyin_size_mismatch_names_both_sizes():
  b = Buffer("CPU", 4, dtypes.float32)
  with pytest.raises(ValueError, match="8 bytes.*16 bytes"): b.copyin(memoryview(np.zeros(2, np.float32)))

def test_buffer_empty():
  b = Buffer("CPU", 0, dtypes.float32).allocate()
  assert b.numpy().shape == (0,)

def test_buffer_rejects_vector_dtype():
  with pytest.raises(ValueError, match="scalar"): Buffer("CPU", 4, dtypes.float32.vec(4))

def test_buffer_view_shares_memory():
  base = Buffer("CPU", 8, dtypes.float32).copyin(memoryview(np.arange(8, dtype=np.float32)))
  v = base.view(3, dtypes.float32, 4 * 2)
  assert np.array_equal(v.numpy(), np.array([2, 3, 4], np.float32))
  v.copyin(memoryview(np.array([-1, -2, -3], np.float32)))
  assert np.array_equal(base.numpy(), np.array([0, 1, -1, -2, -3, 5, 6, 7], np.float32))
  # a view of a view is a view of the base with the offsets added
  vv = v.view(1, dtypes.int32, 4)
  assert vv.base is base and vv.offset == 12 and vv.numpy()[0] == np.array([-2], np.float32).view(np.int32)[0]

def test_buffer_view_out_of_range():
  with pytest.raises(ValueError, match="outside"): Buffer("CPU", 4, dtypes.float32).view(4, dtypes.float32, 4)

def test_zero_copy_as_buffer_is_live():
  b = Buffer("CPU", 4, dtypes.int32).copyin(memoryview(np.zeros(4, np.int32)))
  mv = b.as_buffer(allow_zero_copy=True)
  mv[0] = 7
  assert b.numpy()[0] == 7

def test_lru_allocator_reuses_freed_memory():
  a = MallocAllocator()
  x = a.alloc(64)
  a.free(x, 64)
  assert a.alloc(64) is x
  assert a.alloc(64) is not x
  a.free_cache()
  assert not a.cache

def test_next_unique_is_fresh():
  a, b = next_unique(), next_unique()
  assert b > a

def _buffer_uop(n, dt=dtypes.float32, dev="CPU"):
  return UOp(Ops.BUFFER, dt, (UOp(Ops.UNIQUE, arg=next_unique()), UOp(Ops.DEVICE, arg=dev)), n)

def test_buffer_of_is_lazy_and_cached():
  u = _buffer_uop(5)
  b = buffer_of(u)
  assert not b.is_allocated() and b.size == 5 and b.dtype is dtypes.float32 and b.device == "CPU"
  assert buffer_of(u) is b and buffer_of(u.after(u)) is b

def test_buffer_of_buffer_view_offset_in_elements():
  u = _buffer_uop(6, dtypes.int32)
  buffer_of(u).copyin(memoryview(np.arange(6, dtype=np.int32)))
  v = UOp(Ops.BUFFER_VIEW, dtypes.int32, (u,), (2, 3))
  assert buffer_of(v).numpy().tolist() == [3, 4]

def test_buffer_registry_is_weak():
  u = _buffer_uop(3)
  wb = weakref.ref(buffer_of(u))
  assert has_buffer(u)
  del u
  gc.collect()
  assert wb() is None

def test_set_buffer_checks_size():
  u = _buffer_uop(4)
  with pytest.raises(ValueError, match="does not match"): set_buffer(u, Buffer("CPU", 5, dtypes.float32))
  b = set_buffer(u, Buffer("CPU", 4, dtypes.float32))
  assert buffer_of(u) is b

def test_buffer_of_rejects_non_buffer():
  with pytest.raises(TypeError, match="CONST"): buffer_of(UOp.const(dtypes.int32, 1))

def test_default_device_from_short_env_flag(monkeypatch):
  from tinygrad.helpers import getenv
  monkeypatch.setenv("PYTHON", "1")
  getenv.cache_clear()
  try:
    with Context(DEV=""): assert Device.DEFAULT == "PYTHON"
  finally:
    monkeypatch.delenv("PYTHON")
    getenv.cache_clear()

def test_missing_backend_dependency_names_module_and_hint(monkeypatch):
  # a backend module whose own import fails on a missing package (here llvmlite for AMD)
  import importlib
  real = importlib.import_module
  def fake(name, *a):
    if name == "tinygrad.runtime.ops_amd": raise ModuleNotFoundError("No module named 'llvmlite'", name="llvmlite")
    return real(name, *a)
  monkeypatch.setattr(importlib, "import_module", fake)
  Device._opened.pop("AMD", None)
  with pytest.raises(DeviceOpenError, match="llvmlite.*pip install llvmlite"): Device["AMD"]

def test_backend_constructor_failure_is_wrapped(monkeypatch):
  import tinygrad.runtime.ops_cpu as ops_cpu
  def boom(self, device="CPU"): raise OSError("libfoo.so: cannot open shared object file")
  monkeypatch.setattr(ops_cpu.CPUDevice, "__init__", boom)
  # NOTE: a CPU:k this worker has not opened yet (tests/llvm_device.py opens the highest ones as C or LLVM devices)
  from tinygrad.helpers import HOST_DEVICES
  name = next((f"CPU:{k}" for k in range(1, int(HOST_DEVICES.value)) if Device.opened(f"CPU:{k}") is None), None)
  if name is None: pytest.skip("every CPU:k is already open in this worker")
  with pytest.raises(DeviceOpenError, match=f"{name} could not be opened: OSError: libfoo.so.*Hint"): Device[name]

def test_lru_allocator_caps_cached_bytes():
  a = MallocAllocator()
  a.max_cached = 100
  x, y = a.alloc(64), a.alloc(64)
  a.free(x, 64); a.free(y, 64)
  assert a.cached_bytes == 64 and sum(len(v) for v in a.cache.values()) == 1
  a.alloc(64)
  assert a.cached_bytes == 0

def test_global_counters_count_held_memory_and_its_peak():
  from tinygrad.helpers import GlobalCounters
  a = MallocAllocator()
  GlobalCounters.reset()
  used = GlobalCounters.mem_used
  x, y = a.alloc(1000), a.alloc(500)
  assert GlobalCounters.mem_used == used + 1500 and GlobalCounters.mem_peak == used + 1500
  # a freed buffer the LRU cache keeps is still held; really freeing it lowers mem_used, not the peak
  a.free(x, 1000)
  assert GlobalCounters.mem_used == used + 1500
  a.free_cache()
  assert GlobalCounters.mem_used == used + 500 and GlobalCounters.mem_peak == used + 1500
  GlobalCounters.reset()
  assert GlobalCounters.mem_peak == used + 500
  # a buffer over memory it does not own (a mapped file) is not counted
  b = Buffer("CPU", 256, dtypes.uint8, opaque=(ctypes.c_uint8 * 256)())
  assert b.is_allocated() and GlobalCounters.mem_used == used + 500
  a.free(y, 500); a.free_cache()
  assert GlobalCounters.mem_used == used
