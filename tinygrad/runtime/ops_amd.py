"""AMD backend: kernels rendered to LLVM IR, compiled by llvmlite's AMDGPU target and linked by LLD into a code object
(HSACO) for AMD_ARCH (gfx942, gfx1100, gfx1201); run through the HIP runtime (libamdhip64, ctypes) where one exists.

COMPILE_ONLY=1 needs no GPU: the device opens with the generic CompileOnlyAllocator (data copied in reads back), the
engine compiles every kernel (its code object read and checked here) and runs none, and reading a kernel's output
raises NotComputedError (tinygrad/engine/realize.py). DEBUG>=2 prints each kernel's VGPRs, SGPRs, LDS bytes and scratch
(spills), read from its code object (AMDCompiler.describe). HCQ_VISIBLE_DEVICES=0,2 makes AMD:0 and AMD:1 the GPUs 0
and 2.
"""
from __future__ import annotations
import ctypes, ctypes.util, glob, time
from typing import Any
from tinygrad.device import Compiled, Allocator, CompileOnlyAllocator, DeviceOpenError
from tinygrad.helpers import AMD_ARCH, COMPILE_ONLY, HCQ_VISIBLE_DEVICES
from tinygrad.runtime.support.compiler_amd import read_code_object, pack_kernargs
from tinygrad.runtime import targets

def visible_devices(n_physical: int | None = None) -> list[int]:
  """The physical GPU ids this process may open, in AMD:0, AMD:1, ... order (HCQ_VISIBLE_DEVICES, else all)."""
  spec = str(HCQ_VISIBLE_DEVICES.value).strip()
  if not spec: return list(range(n_physical if n_physical is not None else 1))
  try: ids = [int(x) for x in spec.split(",") if x.strip()]
  except ValueError as e: raise DeviceOpenError(f"HCQ_VISIBLE_DEVICES={spec!r}: not a comma list of GPU ids") from e
  if any(i < 0 or (n_physical is not None and i >= n_physical) for i in ids):
    raise DeviceOpenError(f"HCQ_VISIBLE_DEVICES={spec!r}: ids must be in [0, {n_physical}) on this machine")
  return ids

def gfx_name(target_version: int) -> str:
  """KFD's gfx_target_version (major * 10000 + minor * 100 + stepping) as a gfx name: 90402 -> gfx942."""
  return f"gfx{target_version // 10000}{(target_version // 100) % 100:x}{target_version % 100:x}"

def kfd_archs() -> list[str]:
  """The gfx names of the GPUs the kernel driver (KFD) lists, in node order (empty without a driver)."""
  ret = []
  for props in sorted(glob.glob("/sys/class/kfd/kfd/topology/nodes/*/properties"), key=lambda p: int(p.split("/")[-2])):
    try:
      with open(props) as f: kv = dict(line.split() for line in f if len(line.split()) == 2)
    except OSError: continue
    if (v := int(kv.get("gfx_target_version", "0"))) == 0: continue  # a CPU node
    ret.append(gfx_name(v))
  return ret

def choose_arch(physical: int | None) -> str:
  """AMD_ARCH if set (an unknown one is an error), else the GPU's own, else gfx1100."""
  if AMD_ARCH.value: return targets.amd_arch(AMD_ARCH.value).name
  archs = kfd_archs()
  if physical is not None and physical < len(archs): return targets.amd_arch(archs[physical]).name
  return targets.AMD_DEFAULT_ARCH

# ---- HIP through ctypes ----

HIP_LAUNCH_PARAM_BUFFER_POINTER, HIP_LAUNCH_PARAM_BUFFER_SIZE, HIP_LAUNCH_PARAM_END = 1, 2, 3
HIP_MEMCPY_HOST_TO_DEVICE, HIP_MEMCPY_DEVICE_TO_HOST = 1, 2

def open_hip() -> Any:
  """libamdhip64 (ROCm's HIP runtime), or None where it is not installed."""
  names = [ctypes.util.find_library("amdhip64"), "libamdhip64.so", "/opt/rocm/lib/libamdhip64.so"]
  for n in names:
    if not n: continue
    try: return ctypes.CDLL(n)
    except OSError: continue
  return None

class HIP:
  """The few HIP calls the backend makes; every error names the call and HIP's message."""
  def __init__(self, lib: Any):
    self.lib = lib
    lib.hipGetErrorString.restype = ctypes.c_char_p
  def check(self, what: str, status: int) -> None:
    if status == 0: return
    raise RuntimeError(f"AMD: {what} failed: HIP error {status} ({self.lib.hipGetErrorString(status).decode()})")
  def device_count(self) -> int:
    n = ctypes.c_int(0)
    self.check("hipGetDeviceCount", self.lib.hipGetDeviceCount(ctypes.byref(n)))
    return n.value

class HIPAllocator(Allocator):
  """Device memory through hipMalloc/hipMemcpy; the opaque handle is the device pointer (ctypes.c_void_p)."""
  def __init__(self, dev: AMDDevice, hip: HIP): self.dev, self.hip = dev, hip
  def _alloc(self, nbytes: int, options: Any) -> Any:
    self.dev.select()
    p = ctypes.c_void_p()
    self.hip.check(f"hipMalloc({nbytes})", self.hip.lib.hipMalloc(ctypes.byref(p), ctypes.c_size_t(max(nbytes, 1))))
    return p
  def _free(self, opaque: Any, nbytes: int, options: Any) -> None:
    self.dev.select()
    self.hip.check("hipFree", self.hip.lib.hipFree(opaque))
  def _copyin(self, dest: Any, src: memoryview) -> None:
    if not len(src): return
    self.dev.select()
    host = (ctypes.c_char * len(src)).from_buffer_copy(src)
    self.hip.check("hipMemcpy (host to device)",
                   self.hip.lib.hipMemcpy(dest, host, ctypes.c_size_t(len(src)), HIP_MEMCPY_HOST_TO_DEVICE))
  def _copyout(self, dest: memoryview, src: Any) -> None:
    if not len(dest): return
    self.dev.select()
    host = (ctypes.c_char * len(dest)).from_buffer(dest)
    self.hip.check("hipMemcpy (device to host)",
                   self.hip.lib.hipMemcpy(host, src, ctypes.c_size_t(len(dest)), HIP_MEMCPY_DEVICE_TO_HOST))
  def _offset(self, buf: Any, size: int, offset: int) -> Any: return ctypes.c_void_p((buf.value or 0) + offset)

# ---- programs ----

class AMDProgram:
  """A code object loaded by HIP; called with device pointers, the variables, and the launch sizes."""
  def __init__(self, dev: AMDDevice, name: str, lib: bytes):
    self.dev, self.name, self.lib = dev, name, lib
    # NOTE: read (and so checked) under COMPILE_ONLY too: a code object without this kernel fails here, not on a GPU
    kernels = read_code_object(lib).kernels
    if name not in kernels: raise RuntimeError(f"AMD kernel {name}: the code object has only {sorted(kernels)}")
    self.info = kernels[name]
    self.module, self.fxn = ctypes.c_void_p(), ctypes.c_void_p()
    if dev.hip is None: return
    dev.select()
    self.image = ctypes.create_string_buffer(lib, len(lib))
    dev.hip.check(f"hipModuleLoadData({name})", dev.hip.lib.hipModuleLoadData(ctypes.byref(self.module), self.image))
    dev.hip.check(f"hipModuleGetFunction({name})",
                  dev.hip.lib.hipModuleGetFunction(ctypes.byref(self.fxn), self.module, name.encode()))

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    if self.dev.hip is None:
      raise RuntimeError(f"{self.dev.device}: opened under COMPILE_ONLY=1: kernel {self.name} was compiled for "
                         f"{self.dev.arch}; nothing is loaded or run")
    gs, ls = [*global_size, 1, 1, 1][:3], [*(local_size or ()), 1, 1, 1][:3]
    args = pack_kernargs([b.value or 0 for b in bufs], list(vals))
    argbuf = ctypes.create_string_buffer(args, max(len(args), 1))
    size = ctypes.c_size_t(len(args))
    extra = (ctypes.c_void_p * 5)(HIP_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(argbuf),
                                  HIP_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size), HIP_LAUNCH_PARAM_END)
    self.dev.select()
    st = time.perf_counter()
    self.dev.hip.check(f"hipModuleLaunchKernel({self.name})", self.dev.hip.lib.hipModuleLaunchKernel(
      self.fxn, *[ctypes.c_uint(x) for x in gs], *[ctypes.c_uint(x) for x in ls], ctypes.c_uint(0), None, None, extra))
    if not wait: return None
    self.dev.synchronize()
    return time.perf_counter() - st

# ---- the device ----

class AMDDevice(Compiled):
  """`AMD` / `AMD:n`. With COMPILE_ONLY=1 it opens without a GPU (host buffers, compile and check only)."""
  def __init__(self, device: str = "AMD"):
    _, _, num = device.partition(":")
    self.index = int(num or 0)
    self.compile_only = bool(COMPILE_ONLY.value)
    lib = None if self.compile_only else open_hip()
    if lib is None and not self.compile_only:
      raise DeviceOpenError("AMD: the HIP runtime (libamdhip64.so) was not found: install ROCm's HIP runtime to run on "
                            "an AMD GPU, or set COMPILE_ONLY=1 to compile for AMD_ARCH without one")
    self.hip = HIP(lib) if lib is not None else None
    self.physical: int | None = None
    if self.hip is not None:
      ids = visible_devices(self.hip.device_count())
      if self.index >= len(ids): raise DeviceOpenError(f"{device}: only {len(ids)} AMD GPU(s) visible ({ids})")
      self.physical = ids[self.index]
    try: self.arch = choose_arch(self.physical)
    except ValueError as e: raise DeviceOpenError(f"{device}: {e}") from e
    allocator = HIPAllocator(self, self.hip) if self.hip is not None else CompileOnlyAllocator()
    arch = self.arch
    super().__init__(device, allocator, lambda: targets.renderer("AMD", arch), targets.make_compiler("AMD", arch),
                     self._load)
  def _load(self, name: str, lib: bytes) -> AMDProgram: return AMDProgram(self, name, lib)
  def select(self) -> None:
    if self.hip is not None: self.hip.check("hipSetDevice", self.hip.lib.hipSetDevice(self.physical))
  def synchronize(self) -> None:
    if self.hip is None: return
    self.select()
    self.hip.check("hipDeviceSynchronize", self.hip.lib.hipDeviceSynchronize())

__all__ = ["AMDDevice", "AMDProgram", "visible_devices", "gfx_name", "kfd_archs", "choose_arch", "open_hip"]
