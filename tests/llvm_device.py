"""CPU devices of this process that compile through LLVM or through C, for tests that run both paths side by side
(CPU_LLVM is read when a device opens; the default CPU is LLVM where llvmlite is installed, else C)."""
from tinygrad.device import Device
from tinygrad.helpers import Context, HOST_DEVICES

def cpu_device(llvm: bool, own: bool = False) -> str:
  """The name of a CPU device that compiles through LLVM (llvm=True) or C: "CPU" when it is of that kind (and `own` is
  not asked: a device other tests do not run on, so its runner cache is this caller's), else a CPU:k opened under
  CPU_LLVM=1/0. Multi-device tests open CPU:1.. as default devices in the same worker process, so this takes the
  highest index that is not open yet or is already of that kind."""
  if Device["CPU"].llvm == llvm and not own: return "CPU"
  for k in range(int(HOST_DEVICES.value) - 1, 0, -1):
    name = f"CPU:{k}"
    if (dev := Device.opened(name)) is None:
      with Context(CPU_LLVM=int(llvm)): dev = Device[name]
    if getattr(dev, "llvm", False) == llvm and name not in _PINNED.values(): return name
  raise RuntimeError(f"every CPU:1..CPU:{int(HOST_DEVICES.value) - 1} is open as the other kind of CPU device; none is "
                     f"left for CPU_LLVM={int(llvm)}")

def llvm_cpu_device(own: bool = False) -> str: return cpu_device(True, own)

_PINNED: dict[int, str] = {}
def llvm_cpu_device_at(bits: int) -> str:
  """An LLVM CPU device (a CPU:k of its own) whose renderer has `bits`-wide vector registers whatever this host has: the
  heuristics' register tiles for AVX-512 (bits=512) or AVX2 (256), checked on any x86-64 host (LLVM splits vectors
  wider than the host's, so the values are the same). Other callers of cpu_device never get it."""
  if bits not in _PINNED:
    from tinygrad.renderer.llvmir import CPULLVMRenderer
    from tinygrad.runtime.support.compiler_llvm import host_target
    name = cpu_device(True, own=True)
    dev, host = Device[name], host_target()
    dev.renderer = CPULLVMRenderer(host.triple, host.datalayout, bits, dev.renderer.threads, host.vector_math)
    _PINNED[bits] = name
  return _PINNED[bits]
def c_cpu_device() -> str: return cpu_device(False)
