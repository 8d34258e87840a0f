"""CPU backend: kernels rendered to C, compiled by the system C compiler into a shared object, called through ctypes;
or, with CPU_LLVM=1, rendered to LLVM IR, compiled by llvmlite to an object file and linked into a shared object.

THREAD axes: the kernel signature is `void name(T* data0, ..., int var0, ..., int core_id)`; a launch with
global_size[0] = n calls it n times, core_id = 0..n-1, on the C thread pool (runtime/support/host_pool.py: one per
thread count per process, its workers spinning between launches), or, for a kernel with more arguments than its call
sites, on a Python pool of OS threads (ctypes releases the GIL during a call).
"""
from __future__ import annotations
import ctypes, time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from tinygrad.device import Compiled, MallocAllocator
from tinygrad.helpers import CPU_LLVM
from tinygrad.runtime import targets
from tinygrad.runtime.support.host_pool import HostPool, host_pool

class CPUProgram:
  """A loaded kernel (a shared object, from C or from LLVM IR). Called with the allocator's
  ctypes buffers, the ints of the DEFINE_VARs, and launch sizes; launched by the registry's host launcher."""
  def __init__(self, dev: CPUDevice, name: str, lib: bytes):
    self.dev, self.name = dev, name
    # NOTE: the second value (the loaded shared object) owns the code: it lives as long as this program
    self.fxn, self.lib = targets.load_host("CPU_LLVM" if dev.llvm else "CPU", name, lib)
    self.addr = ctypes.cast(self.fxn, ctypes.c_void_p).value or 0
    self._cores: dict[tuple[Any, Any], int] = {}  # host_cores of each (global_size, local_size) launched with

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] | None = (1, 1, 1),
               local_size: tuple[int, ...] | None = (1, 1, 1), vals: tuple[int, ...] = (),
               wait: bool = False) -> float | None:
    # NOTE: tuple() of a tuple is the tuple itself; a caller's lists become a key
    if (n := self._cores.get(key := (tuple(global_size or ()), tuple(local_size or ())))) is None:
      n = self._cores[key] = targets.host_cores(self.name, global_size, local_size)
    st = time.perf_counter()
    # NOTE: one core: a direct call, the buffers (ctypes arrays) passed as the pointers they are (no address lookups and
    # no c_void_p objects: a TinyJit replay's launch of a 16 x 16 product 9.8 -> 7.0 us, bench/launch.py)
    if n == 1:
      self.fxn(*bufs, *[ctypes.c_int32(v) for v in vals], _CORE0)
      return time.perf_counter() - st if wait else None
    ptrs = [ctypes.addressof(b) for b in bufs]
    # NOTE: THREAD launches go to the C pool (host_pool.py: its workers spin between launches, ~4 us a launch instead of
    # a sleeping thread's wake-up); a kernel with more arguments than its call sites takes the Python pool
    if (pool := self.dev.host_pool) is None or not pool.launch(self.addr, ptrs, vals, n):
      targets.launch_host(self.fxn, ptrs, vals, n, self.dev.pool)
    return time.perf_counter() - st if wait else None

_CORE0 = ctypes.c_int32(0)

class CPUDevice(Compiled):
  """The host CPU. CPU_LLVM=1 (read when the device opens) compiles through LLVM IR instead of C."""
  def __init__(self, device: str = "CPU"):
    self.threads = targets.cpu_threads()
    self._pool: ThreadPoolExecutor | None = None
    self.llvm = bool(CPU_LLVM.value)
    target, threads = "CPU_LLVM" if self.llvm else "CPU", self.threads
    # NOTE: the renderer gets this device's thread count, so the heuristics never read the machine's core count; the
    # LLVM one is made when first asked for (llvmlite loads then)
    ren = (lambda: targets.renderer(target, threads=threads)) if self.llvm else \
      targets.renderer(target, threads=threads)
    super().__init__(device, MallocAllocator(), ren, targets.make_compiler(target), self._load)
  def _load(self, name: str, lib: bytes) -> CPUProgram: return CPUProgram(self, name, lib)
  @property
  def host_pool(self) -> HostPool | None:
    return host_pool(self.threads)
  @property
  def pool(self) -> ThreadPoolExecutor:
    if self._pool is None: self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="tinygrad-cpu")
    return self._pool
