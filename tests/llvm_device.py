"""A CPU device of this process that compiles through LLVM, for tests that run the LLVM path next to the C one."""
from tinygrad.device import Device
from tinygrad.helpers import Context, HOST_DEVICES

def llvm_cpu_device() -> str:
  """The name of a CPU:k opened under CPU_LLVM=1 (the flag is read when a device opens). Multi-device tests open CPU:1..
  as C devices in the same worker process, so this takes the highest index that is not open yet or is already LLVM."""
  for k in range(int(HOST_DEVICES.value) - 1, 0, -1):
    name = f"CPU:{k}"
    if (dev := Device.opened(name)) is None:
      with Context(CPU_LLVM=1): dev = Device[name]
    if getattr(dev, "llvm", False): return name
  raise RuntimeError(f"every CPU:1..CPU:{int(HOST_DEVICES.value) - 1} is open as a C device; none is left for CPU_LLVM")
