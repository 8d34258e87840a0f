"""The target registry: for each target the compiler renders for, its renderer, its compiler, its default arch, what the
PYTHON device emulates, and how a host kernel is loaded and launched. Runtime devices, replay and fuzz all ask here.

  CPU       C (CRenderer), compiled by the system C compiler into a shared object, run through ctypes
  CPU_LLVM  LLVM IR for the host (CPULLVMRenderer), compiled by llvmlite, linked into a shared object by cc
  PYTHON    the PYTHON interpreter's program text (PythonRenderer): a generic GPU, or an emulated NV or AMD arch
  NV        CUDA C (CUDARenderer) for an NV arch (the renderer's NV_ARCHS), compiled by NVRTC + ptxas
  AMD       LLVM IR for an AMD arch (AMD_ARCHS), compiled by llvmlite's AMDGPU target and linked by LLD

The arch tables, default archs and the EMULATE mapping are the registry's data, in tinygrad/renderer/archs.py so that
renderers and compilers read them without importing this module (which imports them). Device-free: nothing here opens a
device, and renderers and compilers are imported when first asked for (an NV or AMD toolchain is needed only to compile
for it). The host ABI (`launch_host`): `void name(T* data0, ..., int var0, ..., int core_id)`, called once per core id.
"""
from __future__ import annotations
import ctypes, functools, os, re, tempfile
from dataclasses import dataclass
from typing import Any, Callable, Sequence
from concurrent.futures import Executor
from tinygrad.helpers import CPU_THREADS, file_stem
from tinygrad.renderer.archs import NV_SUPPORTED_ARCHS, NV_DEFAULT_ARCH, AMD_DEFAULT_ARCH, AMDArch, AMD_ARCHS, amd_arch
from tinygrad.renderer.archs import default_arch, EMULATED, emulated

def emulate_key(device: str, arch: str) -> str:
  """The EMULATE value that emulates `device` at `arch`: the one naming the arch, else the device's own (its arch then
  comes from NV_ARCH / AMD_ARCH). Raises UnknownTarget when nothing emulates it."""
  for want in ((device, arch), (device, "")):
    if (k := next((k for k, v in EMULATED.items() if v == want), None)) is not None: return k
  raise UnknownTarget(f"PYTHON renderer arch {device}:{arch}: this version emulates {sorted(EMULATED)}")

def cpu_threads() -> int:
  """Threads for THREAD axes on the host: CPU_THREADS=, else every core."""
  return max(1, int(CPU_THREADS.value or os.cpu_count() or 1))

# ---- the targets ----

class UnknownTarget(ValueError):
  """A target, or a renderer identity, that this version does not have."""

@dataclass(frozen=True)
class Target:
  name: str
  renderer_class: str                  # the qualified class name Renderer.identity starts with
  flags: tuple[tuple[str, Any], ...]   # the codegen flags that select this target's renderer on its device
  compile_only: bool                   # its programs compile without the device (the toolchain alone): NV, AMD
  host: bool                           # its programs run on the host through launch_host: CPU, CPU_LLVM

TARGETS: dict[str, Target] = {t.name: t for t in (
  Target("CPU", "tinygrad.renderer.cstyle.CRenderer", (), False, True),
  Target("CPU_LLVM", "tinygrad.renderer.llvmir.CPULLVMRenderer", (("CPU_LLVM", 1),), False, True),
  Target("PYTHON", "tinygrad.runtime.ops_python.PythonRenderer", (), False, False),
  Target("NV", "tinygrad.renderer.cuda.CUDARenderer", (), True, False),
  Target("AMD", "tinygrad.renderer.llvmir.AMDLLVMRenderer", (), True, False),
)}
_CLASS_TARGET = {t.renderer_class: t.name for t in TARGETS.values()}
_IDENTITY_RE = re.compile(r"^([\w.]+)\(device=(\w*), arch=([\w.:-]*), threads=(\d+), [0-9a-f]+\)$")

def target(name: str) -> Target:
  if name not in TARGETS: raise UnknownTarget(f"unknown target {name!r}; targets are {sorted(TARGETS)}")
  return TARGETS[name]

def archs(name: str) -> tuple[str, ...]:
  """The archs a target renders for (() for the host and generic targets)."""
  return NV_SUPPORTED_ARCHS if name == "NV" else tuple(AMD_ARCHS) if name == "AMD" else ()

def renderer(name: str, arch: str = "", threads: int = 0) -> Any:
  """A fresh renderer of target `name`: for NV and AMD at `arch` ("" : default_arch), for PYTHON emulating `arch` (""
  or PYTHON: the generic GPU; an EMULATE value; or a PythonRenderer arch "NV:sm_90"), for CPU and CPU_LLVM with
  `threads` THREAD cores (0: cpu_threads())."""
  if name == "CPU":
    from tinygrad.renderer.cstyle import CRenderer
    return CRenderer(threads or cpu_threads())
  if name == "CPU_LLVM":
    from tinygrad.renderer.llvmir import CPULLVMRenderer
    from tinygrad.runtime.support.compiler_llvm import host_target
    host = host_target()
    return CPULLVMRenderer(host.triple, host.datalayout, host.vector_bits, threads or cpu_threads(), host.vector_math)
  if name == "PYTHON":
    from tinygrad.runtime.ops_python import PythonRenderer
    if arch in ("", "PYTHON"): return PythonRenderer("")
    if arch.upper() in EMULATED: return PythonRenderer(arch.upper())
    dev, _, a = arch.partition(":")
    return PythonRenderer(emulate_key(dev, a))
  if name == "NV":
    from tinygrad.renderer.cuda import CUDARenderer
    return CUDARenderer(arch or default_arch("NV"))
  if name == "AMD":
    from tinygrad.renderer.llvmir import AMDLLVMRenderer
    return AMDLLVMRenderer(arch or default_arch("AMD"))
  raise UnknownTarget(f"unknown target {name!r}; targets are {sorted(TARGETS)}")

def make_compiler(name: str, arch: str = "") -> Any:
  """A fresh compiler of target `name` (NV and AMD at `arch`, "" : default_arch). Raises DeviceOpenError (or a
  subclass) when the target's toolchain is not installed."""
  if name == "CPU":
    from tinygrad.runtime.support.compiler_cpu import CCompiler
    return CCompiler()
  if name == "CPU_LLVM":
    from tinygrad.runtime.support.compiler_llvm import LLVMCompiler
    return LLVMCompiler()
  if name == "PYTHON":
    from tinygrad.runtime.ops_python import PythonCompiler
    return PythonCompiler()
  if name == "NV":
    from tinygrad.runtime.support.cuda_toolchain import NVCompiler
    return NVCompiler(arch or default_arch("NV"))
  if name == "AMD":
    from tinygrad.runtime.support.compiler_amd import AMDCompiler
    return AMDCompiler(arch or default_arch("AMD"))
  raise UnknownTarget(f"unknown target {name!r}; targets are {sorted(TARGETS)}")

@functools.cache
def compiler(name: str, arch: str = "") -> Any:
  """make_compiler, one per (target, arch) per process: making one asks the toolchain for its version."""
  return make_compiler(name, arch)

def parse_identity(identity: str) -> tuple[str, str, int]:
  """Renderer.identity -> (target, arch, threads). Raises UnknownTarget for a renderer this version lacks."""
  m = _IDENTITY_RE.match(identity)
  if m is None: raise UnknownTarget(f"renderer identity {identity[:120]!r} is not in the form this version writes")
  if (t := _CLASS_TARGET.get(m.group(1))) is None:
    raise UnknownTarget(f"renderer {m.group(1)} is not one this version has ({sorted(_CLASS_TARGET)})")
  return t, m.group(3), int(m.group(4))

def target_of(identity: str) -> str:
  """The target of a renderer identity, "?" when it is not one this version has."""
  try: return parse_identity(identity)[0]
  except UnknownTarget: return "?"

def renderer_of(identity: str) -> Any:
  """A fresh renderer rebuilt from its identity (its target, arch and thread count)."""
  name, arch, threads = parse_identity(identity)
  return renderer(name, arch, threads)

# ---- the host: load and launch ----

def load_shared(lib: bytes, what: str = "kernels") -> ctypes.CDLL:
  """A shared object given as bytes, loaded. dlopen needs a file: it is unlinked right after (the mapping stays)."""
  with tempfile.NamedTemporaryFile(prefix=f"tinygrad-{file_stem(what)}-", suffix=".so", delete=False) as f:
    f.write(lib)
    path = f.name
  try: return ctypes.CDLL(path)
  except OSError as e: raise RuntimeError(f"CPU: could not load the shared object of {what!r}: {e}") from e
  finally: os.unlink(path)

def host_function(lib: ctypes.CDLL, name: str) -> Any:
  """Kernel `name` of a loaded shared object, as a ctypes function returning nothing."""
  try: fxn = getattr(lib, name)
  except AttributeError as e: raise RuntimeError(f"CPU: the shared object has no function {name!r}") from e
  fxn.restype = None
  return fxn

def load_host(name: str, kernel: str, lib: bytes) -> tuple[Any, Any]:
  """(kernel `kernel` of a compiled program of host target `name` as a ctypes function, the loaded shared object that
  keeps its code alive). Both host targets compile to a shared object: CPU from C, CPU_LLVM from LLVM's object file."""
  if name not in ("CPU", "CPU_LLVM"):
    raise UnknownTarget(f"{name} programs do not run on the host; CPU and CPU_LLVM do")
  so = load_shared(lib, kernel)
  return host_function(so, kernel), so

def host_cores(kernel: str, global_size: Sequence[int] | None, local_size: Sequence[int] | None = None) -> int:
  """The core ids a host launch calls the kernel with: global_size[0] (the THREAD count); the rest must be 1s."""
  gs, ls = tuple(global_size or (1,)), tuple(local_size or ())
  if any(s != 1 for s in ls): raise ValueError(f"CPU kernel {kernel}: local_size {ls} must be 1s")
  if any(s != 1 for s in gs[1:]):
    raise ValueError(f"CPU kernel {kernel}: only global_size[0] (the THREAD count) may be > 1, got {gs}")
  return int(gs[0])

def launch_host(fxn: Callable[..., Any], ptrs: Sequence[int], vals: Sequence[int], cores: int,
                pool: Executor | None = None) -> None:
  """Call a host kernel once per core id 0..cores-1 with (buffer addresses, int32 vars, int32 core id): core 0 on the
  calling thread and the others on `pool`'s threads when given (ctypes releases the GIL during a call), else one after
  another. core_id is always passed last;
  a kernel without a THREAD axis ignores it (C convention)."""
  args = [ctypes.c_void_p(p) for p in ptrs] + [ctypes.c_int32(v) for v in vals]
  if pool is None or cores == 1:
    for core in range(cores): fxn(*args, ctypes.c_int32(core))
    return
  # NOTE: core 0 runs on the calling thread while the pool runs the others: one thread wake-up fewer per launch (2
  # threads: 16 us a launch instead of 23, measured with a trivial C function)
  futs = [pool.submit(functools.partial(fxn, *args, ctypes.c_int32(i))) for i in range(1, cores)]
  try: fxn(*args, ctypes.c_int32(0))
  finally:
    for fut in futs: fut.result()

__all__ = ["NV_SUPPORTED_ARCHS", "NV_DEFAULT_ARCH", "AMD_DEFAULT_ARCH", "AMDArch", "AMD_ARCHS", "amd_arch",
           "default_arch", "EMULATED", "emulated", "emulate_key", "cpu_threads", "UnknownTarget", "Target", "TARGETS",
           "target", "archs", "renderer", "make_compiler", "compiler", "parse_identity", "target_of", "renderer_of",
           "load_shared", "host_function", "load_host", "host_cores", "launch_host"]
