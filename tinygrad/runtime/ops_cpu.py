"""CPU backend: kernels rendered to C, compiled by the system C compiler into a shared object, called through ctypes;
or, with CPU_LLVM=1, rendered to LLVM IR, compiled by llvmlite to an object file and loaded by its JIT (MCJIT).

THREAD axes: the kernel signature is `void name(T* data0, ..., int var0, ..., int core_id)`; a launch with
global_size[0] = n calls it n times, core_id = 0..n-1, on a pool of OS threads (ctypes releases the GIL during a call).
"""
from __future__ import annotations
import ctypes, functools, os, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from tinygrad.device import Compiled, MallocAllocator
from tinygrad.helpers import CPU_THREADS, CPU_LLVM, file_stem
from tinygrad.runtime.support.compiler_cpu import CCompiler
from tinygrad.renderer.cstyle import CRenderer

def cpu_threads() -> int:
  """Threads for THREAD axes: CPU_THREADS=, else every core."""
  return max(1, int(CPU_THREADS.value or os.cpu_count() or 1))

def _llvm_renderer(threads: int) -> Any:
  from tinygrad.renderer.llvmir import CPULLVMRenderer
  from tinygrad.runtime.support.compiler_llvm import host_target
  host = host_target()
  return CPULLVMRenderer(host.triple, host.datalayout, host.vector_bits, threads)

class CPUProgram:
  """A loaded kernel. Called with the allocator's ctypes buffers, the ints of the DEFINE_VARs, and launch sizes."""
  def __init__(self, dev: CPUDevice, name: str, lib: bytes):
    self.dev, self.name = dev, name
    # NOTE: dlopen needs a file; unlinking it right after loading is fine on POSIX (the mapping stays)
    with tempfile.NamedTemporaryFile(prefix=f"tinygrad-{file_stem(name)}-", suffix=".so", delete=False) as f:
      f.write(lib)
      path = f.name
    try: self.lib = ctypes.CDLL(path)
    except OSError as e: raise RuntimeError(f"CPU: could not load the shared object of kernel {name!r}: {e}") from e
    finally: os.unlink(path)
    try: self.fxn = getattr(self.lib, name)
    except AttributeError as e: raise RuntimeError(f"CPU: the shared object has no function {name!r}") from e
    self.fxn.restype = None

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] | None = (1, 1, 1),
               local_size: tuple[int, ...] | None = (1, 1, 1), vals: tuple[int, ...] = (),
               wait: bool = False) -> float | None:
    global_size, local_size = tuple(global_size or (1,)), tuple(local_size or ())
    if any(s != 1 for s in local_size): raise ValueError(f"CPU kernel {self.name}: local_size {local_size} must be 1s")
    if any(s != 1 for s in global_size[1:]):
      raise ValueError(f"CPU kernel {self.name}: only global_size[0] (the THREAD count) may be > 1, got {global_size}")
    args = [ctypes.c_void_p(ctypes.addressof(b)) for b in bufs] + [ctypes.c_int32(v) for v in vals]
    n = int(global_size[0])
    st = time.perf_counter()
    # NOTE: core_id is always passed last; a kernel without a THREAD axis ignores the extra argument (C convention)
    if n == 1: self.fxn(*args, ctypes.c_int32(0))
    else:
      futs = [self.dev.pool.submit(functools.partial(self.fxn, *args, ctypes.c_int32(i))) for i in range(n)]
      for fut in futs: fut.result()
    return time.perf_counter() - st if wait else None

class LLVMCPUProgram(CPUProgram):
  """A kernel compiled from LLVM IR: its object file loaded by llvmlite's JIT; called exactly as a C kernel."""
  def __init__(self, dev: CPUDevice, name: str, lib: bytes):
    self.dev, self.name = dev, name
    assert dev.loader is not None
    # NOTE: the engine owns the code: it lives as long as this program
    self.engine, addr = dev.loader.load(name, lib)
    self.fxn = ctypes.CFUNCTYPE(None)(addr)

class CPUDevice(Compiled):
  """The host CPU. CPU_LLVM=1 (read when the device opens) compiles through LLVM IR instead of C."""
  def __init__(self, device: str = "CPU"):
    self.threads = cpu_threads()
    self._pool: ThreadPoolExecutor | None = None
    self.llvm = bool(CPU_LLVM.value)
    self.loader: Any = None
    # NOTE: the renderer gets this device's thread count, so the heuristics never read the machine's core count
    if self.llvm:
      from tinygrad.runtime.support.compiler_llvm import LLVMCompiler, LLVMProgramLoader
      self.loader = LLVMProgramLoader()
      threads = self.threads
      super().__init__(device, MallocAllocator(), lambda: _llvm_renderer(threads), LLVMCompiler(), self._load)
    else: super().__init__(device, MallocAllocator(), CRenderer(self.threads), CCompiler(), self._load)
  def _load(self, name: str, lib: bytes) -> CPUProgram:
    return LLVMCPUProgram(self, name, lib) if self.llvm else CPUProgram(self, name, lib)
  @property
  def pool(self) -> ThreadPoolExecutor:
    if self._pool is None: self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="tinygrad-cpu")
    return self._pool
