"""The CUDA driver API (libcuda.so.1, installed with the NVIDIA driver) through ctypes: the calls the NV runtime makes.

Every call goes through `CUDADriver.call(name, *args)`, which raises `CUDADriverError` naming the call, the error's
name and the driver's description of it. Opening (`CUDADriver()`) never raises a ctypes error: a missing library is a
`DeviceOpenError` saying what to install.
"""
from __future__ import annotations
import ctypes
from typing import Any
from tinygrad.device import DeviceOpenError

LIBCUDA_NAMES = ("libcuda.so.1", "libcuda.so")

CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NO_DEVICE = 100

class CUDADriverError(RuntimeError):
  """A driver call failed: `code` is the CUresult."""
  def __init__(self, msg: str, code: int):
    super().__init__(msg)
    self.code = code

P, I, U, S, U64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_uint64
PP, PI = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int)
# the driver entry points used, with their argument types (every one returns a CUresult)
SIGNATURES: dict[str, list[Any]] = {
  "cuInit": [U], "cuDriverGetVersion": [PI], "cuDeviceGetCount": [PI], "cuDeviceGet": [PI, I],
  "cuDeviceGetName": [ctypes.c_char_p, I, I], "cuDeviceGetAttribute": [PI, I, I],
  "cuDeviceTotalMem_v2": [ctypes.POINTER(S), I],
  "cuDevicePrimaryCtxRetain": [PP, I], "cuDevicePrimaryCtxRelease_v2": [I], "cuCtxSetCurrent": [P],
  "cuCtxSynchronize": [],
  "cuMemAlloc_v2": [ctypes.POINTER(U64), S], "cuMemFree_v2": [U64],
  "cuMemcpyHtoD_v2": [U64, P, S], "cuMemcpyDtoH_v2": [P, U64, S], "cuMemcpyDtoD_v2": [U64, U64, S],
  "cuModuleLoadData": [PP, P], "cuModuleUnload": [P], "cuModuleGetFunction": [PP, P, ctypes.c_char_p],
  "cuFuncGetAttribute": [PI, I, P],
  "cuLaunchKernel": [P, U, U, U, U, U, U, U, P, PP, PP],
  "cuEventCreate": [PP, U], "cuEventRecord": [P, P], "cuEventSynchronize": [P], "cuEventDestroy_v2": [P],
  "cuEventElapsedTime": [ctypes.POINTER(ctypes.c_float), P, P],
  "cuGetErrorName": [I, ctypes.POINTER(ctypes.c_char_p)], "cuGetErrorString": [I, ctypes.POINTER(ctypes.c_char_p)],
}
# NOTE: CUDA 12.8 added cuEventElapsedTime_v2 (the header maps the plain name to it); older drivers have only the first
VERSIONED = {"cuEventElapsedTime": ("cuEventElapsedTime_v2", "cuEventElapsedTime")}

class CUDADriver:
  """libcuda with typed entry points. `names` replaces the library names tried (a test points it at a fake driver)."""
  def __init__(self, names: tuple[str, ...] | None = None):
    names = LIBCUDA_NAMES if names is None else names
    errors = []
    self.lib: Any = None
    for n in names:
      try:
        self.lib = ctypes.CDLL(n)
        self.path = n
        break
      except OSError as e: errors.append(f"{n}: {e}")
    if self.lib is None:
      raise DeviceOpenError("NV: no NVIDIA driver on this machine (libcuda.so.1 not found). Install the NVIDIA driver "
                            "(r580 or newer for the pinned CUDA 13.5 toolchain), or set COMPILE_ONLY=1 to compile "
                            f"kernels without a GPU. Tried: {'; '.join(errors)}")
    self.fns: dict[str, Any] = {}
    for name, args in SIGNATURES.items():
      fn = next((getattr(self.lib, n) for n in VERSIONED.get(name, (name,)) if hasattr(self.lib, n)), None)
      if fn is None: raise DeviceOpenError(f"NV: {self.path} has no {name}: the driver is too old or not a CUDA driver")
      fn.argtypes, fn.restype = args, ctypes.c_int
      self.fns[name] = fn

  def error_text(self, rc: int) -> str:
    name, desc = ctypes.c_char_p(), ctypes.c_char_p()
    self.fns["cuGetErrorName"](rc, ctypes.byref(name))
    self.fns["cuGetErrorString"](rc, ctypes.byref(desc))
    return f"{(name.value or b'CUDA_ERROR_?').decode()} ({(desc.value or b'unknown error').decode()}, code {rc})"

  def call(self, name: str, *args: Any) -> None:
    rc = self.fns[name](*args)
    if rc != 0: raise CUDADriverError(f"NV: {name} failed: {self.error_text(rc)}", rc)

  def get_int(self, name: str, *args: Any) -> int:
    """A call whose first argument is an int out-parameter."""
    out = ctypes.c_int()
    self.call(name, ctypes.byref(out), *args)
    return out.value

  def version(self) -> int:
    """cuDriverGetVersion: 1000 * major + 10 * minor of the newest CUDA the driver supports (13000 for 13.0)."""
    return self.get_int("cuDriverGetVersion")

def driver_version_str(v: int) -> str: return f"{v // 1000}.{v % 1000 // 10}"
