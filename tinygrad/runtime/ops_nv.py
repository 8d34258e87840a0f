"""NV backend: kernels rendered to CUDA C (tinygrad/renderer/cuda.py), compiled to a cubin by NVRTC and ptxas
(runtime/support/cuda_toolchain.py), run through the CUDA driver API (runtime/support/cuda_driver.py).

Opening `NV` (or `NV:n`):
- COMPILE_ONLY=1: no driver needed. The arch is NV_ARCH, else the first visible GPU's if a driver answers, else sm_90.
  Memory is a placeholder (CompileOnlyAllocator) and nothing is ever loaded or launched.
- otherwise: libcuda.so.1 must load, cuInit must find a GPU, and the driver must support the toolchain's CUDA major
  (CUDA 13.x needs r580 or newer: cuDriverGetVersion >= 13000). HCQ_VISIBLE_DEVICES=1,0 restricts and orders the GPUs:
  NV is physical GPU 1 and NV:1 is GPU 0. The arch is the GPU's (sm_86 runs sm_80 cubins); an NV_ARCH whose cubins
  cannot run on the GPU is an error.
Each failure is one DeviceOpenError line naming what is missing and what to install or set.

Launch: a grid of `global_size` blocks of `local_size` threads on the legacy default stream; buffers are CUdeviceptr
ints. `wait=True` times the launch with a pair of CUDA events.
"""
from __future__ import annotations
import ctypes, functools
from typing import Any
from tinygrad.device import Compiled, LRUAllocator, CompileOnlyAllocator, DeviceOpenError
from tinygrad.helpers import COMPILE_ONLY, NV_ARCH, HCQ_VISIBLE_DEVICES, prod
# NOTE: the device makes its NVCompiler itself: tests/nv/fake_nv.py swaps this name for a host-shim compiler
from tinygrad.runtime.support.cuda_toolchain import NVCompiler, NVBinary, check_arch, arch_for_device
from tinygrad.runtime import targets
from tinygrad.runtime.support.cuda_toolchain import cubin_runs_on
from tinygrad.runtime.support import cuda_driver as cu
from tinygrad.runtime.support.cuda_driver import CUDADriver, CUDADriverError, driver_version_str

def visible_devices(count: int, spec: str | None = None) -> list[int]:
  """The physical GPU ordinals NV, NV:1, ... map to: HCQ_VISIBLE_DEVICES (comma list, in that order), else all."""
  spec = HCQ_VISIBLE_DEVICES.value if spec is None else spec
  if not spec.strip(): return list(range(count))
  try: ids = [int(x) for x in spec.split(",") if x.strip()]
  except ValueError as e:
    raise DeviceOpenError(f"NV: HCQ_VISIBLE_DEVICES={spec!r} must be a comma list of GPU numbers like 1,0") from e
  bad = [i for i in ids if not 0 <= i < count]
  if bad:
    raise DeviceOpenError(f"NV: HCQ_VISIBLE_DEVICES={spec!r} names GPU(s) {bad}; this machine has {count} "
                          f"(0..{count - 1})")
  if len(set(ids)) != len(ids): raise DeviceOpenError(f"NV: HCQ_VISIBLE_DEVICES={spec!r} names a GPU twice")
  return ids

@functools.cache
def open_driver() -> CUDADriver:
  """libcuda (cuda_driver.LIBCUDA_NAMES), initialised once per process; a clear DeviceOpenError when there is no driver
  or no GPU."""
  drv = CUDADriver(cu.LIBCUDA_NAMES)
  try: drv.call("cuInit", 0)
  except CUDADriverError as e:
    if e.code == cu.CUDA_ERROR_NO_DEVICE:
      raise DeviceOpenError("NV: the NVIDIA driver is installed but reports no GPU (cuInit: CUDA_ERROR_NO_DEVICE); "
                            "check nvidia-smi, or set COMPILE_ONLY=1 to compile kernels without a GPU") from e
    raise DeviceOpenError(f"NV: the NVIDIA driver did not initialise: {e}") from e
  return drv

def _device_arch(drv: CUDADriver, dev: int) -> tuple[int, int]:
  return (drv.get_int("cuDeviceGetAttribute", cu.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
          drv.get_int("cuDeviceGetAttribute", cu.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))

def compile_only_arch() -> str:
  """NV_ARCH, else the first visible GPU's arch when a driver answers, else sm_90 (no GPU needed)."""
  if NV_ARCH.value: return check_arch(NV_ARCH.value)
  try:
    drv = open_driver()
    ids = visible_devices(drv.get_int("cuDeviceGetCount"))
    if not ids: return targets.NV_DEFAULT_ARCH
    dev = drv.get_int("cuDeviceGet", ids[0])
    return arch_for_device(*_device_arch(drv, dev))
  except (DeviceOpenError, CUDADriverError): return targets.NV_DEFAULT_ARCH

# ---- memory ----

class NVAllocator(LRUAllocator):
  """Device memory (cuMemAlloc, 256-byte aligned) as CUdeviceptr ints; a view is the base pointer plus its offset."""
  def __init__(self, dev: NVDevice):
    super().__init__()
    self.dev = dev
  def _alloc(self, nbytes: int, options: Any) -> Any:
    if nbytes == 0: return 0
    self.dev.make_current()
    ptr = ctypes.c_uint64()
    try: self.dev.drv.call("cuMemAlloc_v2", ctypes.byref(ptr), nbytes)
    except CUDADriverError as e:
      if e.code == cu.CUDA_ERROR_OUT_OF_MEMORY:
        raise MemoryError(f"{self.dev.device}: out of GPU memory for {nbytes} bytes") from e
      raise
    return ptr.value
  def _free(self, opaque: Any, nbytes: int, options: Any) -> None:
    if opaque:
      self.dev.make_current()
      self.dev.drv.call("cuMemFree_v2", opaque)
  def _offset(self, buf: Any, size: int, offset: int) -> Any: return buf + offset
  def _copyin(self, dest: Any, src: memoryview) -> None:
    if len(src) == 0: return
    arr = ctypes.c_char * len(src)
    host = arr.from_buffer_copy(src) if src.readonly else arr.from_buffer(src)
    self.dev.make_current()
    self.dev.drv.call("cuMemcpyHtoD_v2", dest, host, len(src))
  def _copyout(self, dest: memoryview, src: Any) -> None:
    if len(dest) == 0: return
    self.dev.make_current()
    # NOTE: a copy on the legacy default stream waits for every kernel launched before it
    self.dev.drv.call("cuMemcpyDtoH_v2", (ctypes.c_char * len(dest)).from_buffer(dest), src, len(dest))

# ---- programs ----

class NVProgram:
  """A cubin loaded as a module; called with CUdeviceptr ints (ProgramSpec.globals order) and the DEFINE_VAR values."""
  def __init__(self, dev: NVDevice, name: str, lib: bytes):
    self.dev, self.name = dev, name
    self.bin = NVBinary.unpack(lib)
    if not cubin_runs_on(self.bin.arch, *dev.capability):
      raise RuntimeError(f"NV kernel {name}: compiled for {self.bin.arch}, which does not run on this "
                         f"sm_{dev.capability[0]}{dev.capability[1]} GPU; unset NV_ARCH")
    dev.make_current()
    self.module, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
    self._image = ctypes.create_string_buffer(self.bin.cubin, len(self.bin.cubin))
    dev.drv.call("cuModuleLoadData", ctypes.byref(self.module), self._image)
    dev.drv.call("cuModuleGetFunction", ctypes.byref(self.fn), self.module, name.encode())
    self.registers = dev.drv.get_int("cuFuncGetAttribute", cu.CU_FUNC_ATTRIBUTE_NUM_REGS, self.fn)
    self.events: tuple[ctypes.c_void_p, ctypes.c_void_p] | None = None

  def check_launch(self, bufs: tuple[Any, ...], global_size: tuple[int, ...], local_size: tuple[int, ...],
                   vals: tuple[int, ...]) -> None:
    lim, where = self.dev.limits, f"NV kernel {self.name} ({self.bin.arch})"
    if len(bufs) + len(vals) != len(self.bin.params):
      raise ValueError(f"{where}: takes {len(self.bin.params)} parameters {self.bin.params}, got {len(bufs)} buffers "
                       f"and {len(vals)} values")
    if any(s < 1 for s in global_size + local_size):
      raise ValueError(f"{where}: launch sizes must be >= 1: {global_size}, {local_size}")
    for d, (s, m) in enumerate(zip(global_size, lim.global_max)):
      if s > m:
        raise ValueError(f"{where}: grid dimension {'xyz'[d]} of {s} blocks is over the limit {m} "
                         f"(grid limits {lim.global_max})")
    for d, (s, m) in enumerate(zip(local_size, lim.local_max)):
      if s > m: raise ValueError(f"{where}: block dimension {'xyz'[d]} of {s} threads is over the limit {m}")
    if prod(local_size) > lim.max_threads:
      raise ValueError(f"{where}: {prod(local_size)} threads per block, over {lim.max_threads}")
    for pname, ptr in zip(self.bin.params, bufs):
      if (a := self.bin.align.get(pname)) and ptr % a:
        raise ValueError(f"{where}: buffer {pname} at address {ptr:#x} is not {a}-byte aligned, and the kernel "
                         f"accesses it with {a}-byte vectors (a view at an odd byte offset); realize a contiguous copy")

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] | None = (1, 1, 1),
               local_size: tuple[int, ...] | None = (1, 1, 1), vals: tuple[int, ...] = (),
               wait: bool = False) -> float | None:
    gs = tuple(int(x) for x in (*(global_size or ()), 1, 1, 1)[:3])
    ls = tuple(int(x) for x in (*(local_size or ()), 1, 1, 1)[:3])
    self.check_launch(bufs, gs, ls, tuple(vals))
    args = [ctypes.c_uint64(b) for b in bufs] + [ctypes.c_int32(v) for v in vals]
    params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
    drv = self.dev.drv
    self.dev.make_current()
    if wait:
      if self.events is None:
        self.events = (ctypes.c_void_p(), ctypes.c_void_p())
        for ev in self.events: drv.call("cuEventCreate", ctypes.byref(ev), 0)
      drv.call("cuEventRecord", self.events[0], None)
    drv.call("cuLaunchKernel", self.fn, *gs, *ls, 0, None, params, None)
    if not wait: return None
    assert self.events is not None
    drv.call("cuEventRecord", self.events[1], None)
    drv.call("cuEventSynchronize", self.events[1])
    ms = ctypes.c_float()
    drv.call("cuEventElapsedTime", ctypes.byref(ms), self.events[0], self.events[1])
    return ms.value * 1e-3

  def __del__(self) -> None:
    try:
      if self.events is not None:
        for ev in self.events: self.dev.drv.call("cuEventDestroy_v2", ev)
      self.dev.drv.call("cuModuleUnload", self.module)
    except Exception: pass  # NOTE: at interpreter exit the driver may be gone already

class CompileOnlyProgram:
  """COMPILE_ONLY: the binary is checked (an NV binary for this device's arch, naming the kernel) and never loaded."""
  def __init__(self, dev: NVDevice, name: str, lib: bytes):
    self.dev, self.name, self.bin = dev, name, NVBinary.unpack(lib)
    if self.bin.arch != dev.arch: raise RuntimeError(f"NV kernel {name}: compiled for {self.bin.arch}, not {dev.arch}")
    if f".entry {name}(" not in self.bin.ptx: raise RuntimeError(f"NV kernel {name}: the PTX has no entry {name}")
  def __call__(self, *args: Any, **kwargs: Any) -> float | None:
    raise RuntimeError(f"{self.dev.device}: COMPILE_ONLY=1: kernel {self.name} was compiled for {self.dev.arch}; "
                       "nothing is loaded or run")

# ---- the device ----

def _renderer_factory(arch: str) -> Any:
  def make() -> Any: return targets.renderer("NV", arch)
  return make

class NVDevice(Compiled):
  def __init__(self, device: str = "NV"):
    from tinygrad.renderer.cuda import NV_ARCHS
    ordinal = int(device.partition(":")[2] or 0)
    if COMPILE_ONLY:
      self.arch, self.capability = compile_only_arch(), (0, 0)
      compiler = NVCompiler(self.arch)
      self.limits = NV_ARCHS[self.arch]
      super().__init__(device, CompileOnlyAllocator(), _renderer_factory(self.arch), compiler, self._no_runtime)
      return
    self.drv = open_driver()
    ids = visible_devices(self.drv.get_int("cuDeviceGetCount"))
    if ordinal >= len(ids):
      why = f" (HCQ_VISIBLE_DEVICES={HCQ_VISIBLE_DEVICES.value})" if HCQ_VISIBLE_DEVICES.value else ""
      raise DeviceOpenError(f"{device}: only {len(ids)} NVIDIA GPU(s) visible{why}")
    self.physical = ids[ordinal]
    self.cu_device = self.drv.get_int("cuDeviceGet", self.physical)
    self.capability = _device_arch(self.drv, self.cu_device)
    name = ctypes.create_string_buffer(256)
    self.drv.call("cuDeviceGetName", name, 256, self.cu_device)
    self.gpu_name = name.value.decode(errors="replace")
    if NV_ARCH.value:
      self.arch = check_arch(NV_ARCH.value)
      if not cubin_runs_on(self.arch, *self.capability):
        raise DeviceOpenError(f"{device}: NV_ARCH={NV_ARCH.value} cubins do not run on this {self.gpu_name} "
                              f"(sm_{self.capability[0]}{self.capability[1]}); unset NV_ARCH, or add COMPILE_ONLY=1 "
                              "to only compile for it")
    else: self.arch = arch_for_device(*self.capability)
    compiler = NVCompiler(self.arch)
    need, need_str = compiler.min_driver
    if (have := self.drv.version()) < need:
      raise DeviceOpenError(f"{device}: the NVIDIA driver supports CUDA {driver_version_str(have)}, and the CUDA "
                            f"{compiler.nvrtc.version[0]}.{compiler.nvrtc.version[1]} toolchain's cubins need CUDA "
                            f"{driver_version_str(need)}: update the driver to {need_str} or newer")
    self.limits = NV_ARCHS[self.arch]
    self.ctx = ctypes.c_void_p()
    self.drv.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.ctx), self.cu_device)
    super().__init__(device, NVAllocator(self), _renderer_factory(self.arch), compiler, self._load)

  def _load(self, name: str, lib: bytes) -> NVProgram: return NVProgram(self, name, lib)
  def _no_runtime(self, name: str, lib: bytes) -> Any: return CompileOnlyProgram(self, name, lib)
  def make_current(self) -> None: self.drv.call("cuCtxSetCurrent", self.ctx)
  def synchronize(self) -> None:
    if COMPILE_ONLY or not hasattr(self, "ctx"): return
    self.make_current()
    self.drv.call("cuCtxSynchronize")
