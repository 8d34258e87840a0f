"""The NV backend on a fake driver: tests/nv/fake_libcuda.c as libcuda, and a compiler whose "cubin" is the kernel's
CUDA source built for the host (tinygrad/runtime/support/cuda_host.py). Everything of ops_nv.py runs for real (driver
calls, memory, copies, module load, launch with kernelParams, events, HCQ_VISIBLE_DEVICES) on a machine without a GPU.
Kernels with shared memory or barriers cannot run on the host shim: run with NOOPT=1 (no GROUP opts).

`install(setattr_fn)` points the NV backend at the fake (setattr_fn is monkeypatch.setattr or plain setattr);
as a pytest plugin (`-p tests.nv.fake_nv`) it installs itself for the whole session."""
from __future__ import annotations
import hashlib, os, subprocess, tempfile
from typing import Any, Callable
from tinygrad.device import Device
from tinygrad.runtime import ops_nv
from tinygrad.runtime.support import cuda_driver
from tinygrad.runtime.support.cuda_toolchain import NVCompiler, NVBinary, parse_kernel, parse_align
from tinygrad.runtime.support.cuda_host import build_host_library, HOST_SHIM

HERE = os.path.dirname(os.path.abspath(__file__))

def build_fake_libcuda() -> str:
  """Compile fake_libcuda.c once per content (cached in the temp dir); the path of the shared object."""
  src = os.path.join(HERE, "fake_libcuda.c")
  with open(src, "rb") as f: digest = hashlib.sha256(f.read()).hexdigest()[:16]
  out = os.path.join(tempfile.gettempdir(), f"tg-fake-libcuda-{digest}.so")
  if not os.path.exists(out):
    tmp = f"{out}.{os.getpid()}.tmp"
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-Wall", "-Werror", "-o", tmp, src, "-ldl"], check=True)
    os.replace(tmp, out)
  return out

class HostNVCompiler(NVCompiler):
  """NVCompiler whose binary carries a host shared object where the cubin would be (for the fake driver)."""
  def __init__(self, arch: str = "sm_90", toolchain: Any = None):
    super().__init__(arch, toolchain)
    self.cachekey = f"nv-host|{hashlib.sha256(HOST_SHIM.encode()).hexdigest()[:16]}|{self.cachekey}"
  def compile(self, src: str) -> bytes:
    _, params = parse_kernel(src)
    return NVBinary(self.arch, "", build_host_library([src]), params=params, align=parse_align(src)).pack()

def reset_nv() -> None:
  for k in [k for k in Device._opened if k.split(":")[0] == "NV"]: del Device._opened[k]
  ops_nv.open_driver.cache_clear()

def install(set_attr: Callable[[Any, str, Any], None] = setattr) -> None:
  set_attr(cuda_driver, "LIBCUDA_NAMES", (build_fake_libcuda(),))
  set_attr(ops_nv, "NVCompiler", HostNVCompiler)
  reset_nv()

def pytest_configure(config: Any) -> None: install()
