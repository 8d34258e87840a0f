"""Targets and their renderers, built from a fixed table (never from a class name read out of a record).

A target is a device plus the flags that pick its renderer: CPU (C), CPU_LLVM (LLVM IR for the host), PYTHON,
NV (CUDA), AMD (LLVM IR for AMDGPU). NV and AMD render without a GPU: a renderer is a pure object, compiling is the
caller's choice. `compile_only` compiles an NV or AMD program with the target's own toolchain (NVRTC + ptxas; llvmlite
+ LLD), no GPU or driver needed.
"""
from __future__ import annotations
import functools, re
from typing import Any, Callable
from tinygrad.renderer import Renderer

def _c(arch: str, threads: int) -> Renderer:
  from tinygrad.renderer.cstyle import CRenderer
  return CRenderer(threads)

def _cpu_llvm(arch: str, threads: int) -> Renderer:
  from tinygrad.runtime.ops_cpu import _llvm_renderer
  r: Renderer = _llvm_renderer(threads)
  return r

def _python(arch: str, threads: int) -> Renderer:
  """The generic PYTHON renderer (arch PYTHON), or one emulating NV or AMD (arch `NV:sm_90`, `AMD:gfx942`): the EMULATE
  target of that device and arch, else the device's default one (its arch from NV_ARCH / AMD_ARCH, a codegen flag)."""
  from tinygrad.runtime.ops_python import PythonRenderer, EMULATED
  if arch in ("", "PYTHON"): return PythonRenderer("")
  dev, _, a = arch.partition(":")
  key = next((k for want in ((dev, a), (dev, "")) for k, v in EMULATED.items() if v == want), None)
  if key is None: raise IncompatibleRecord(f"PYTHON renderer arch {arch!r}: this version emulates {sorted(EMULATED)}")
  return PythonRenderer(key)

def _nv(arch: str, threads: int) -> Renderer:
  from tinygrad.renderer.cuda import CUDARenderer
  from tinygrad.helpers import NV_ARCH
  return CUDARenderer(arch or NV_ARCH.value or "sm_90")

def _amd(arch: str, threads: int) -> Renderer:
  from tinygrad.renderer.llvmir import AMDLLVMRenderer
  from tinygrad.helpers import AMD_ARCH
  return AMDLLVMRenderer(arch or AMD_ARCH.value or "gfx1100")

# target -> (renderer class name in Renderer.identity, constructor(arch, threads))
TARGETS: dict[str, tuple[str, Callable[[str, int], Renderer]]] = {
  "CPU": ("tinygrad.renderer.cstyle.CRenderer", _c),
  "CPU_LLVM": ("tinygrad.renderer.llvmir.CPULLVMRenderer", _cpu_llvm),
  "PYTHON": ("tinygrad.runtime.ops_python.PythonRenderer", _python),
  "NV": ("tinygrad.renderer.cuda.CUDARenderer", _nv),
  "AMD": ("tinygrad.renderer.llvmir.AMDLLVMRenderer", _amd),
}
_CLASS_TARGET = {cls: t for t, (cls, _) in TARGETS.items()}
_IDENTITY_RE = re.compile(r"^([\w.]+)\(device=(\w*), arch=([\w.:-]*), threads=(\d+), [0-9a-f]+\)$")

class IncompatibleRecord(ValueError):
  """A record names something this version does not have (an Op, a dtype, an arg class, an opt, a renderer, a flag)."""

def parse_identity(identity: str) -> tuple[str, str, int]:
  """Renderer.identity -> (target, arch, threads). Raises IncompatibleRecord for a renderer this version lacks."""
  m = _IDENTITY_RE.match(identity)
  if m is None: raise IncompatibleRecord(f"renderer identity {identity[:120]!r} is not in the form this version writes")
  if (t := _CLASS_TARGET.get(m.group(1))) is None:
    raise IncompatibleRecord(f"renderer {m.group(1)} is not one this version has ({sorted(_CLASS_TARGET)})")
  return t, m.group(3), int(m.group(4))

def target_flags(target: str) -> dict[str, Any]:
  """The codegen flags that select the target's renderer (recorded with each of its programs)."""
  return {"CPU_LLVM": 1} if target == "CPU_LLVM" else {}

def target_renderer(target: str, identity: str | None) -> Renderer:
  """The renderer of `target`, with the arch and thread count of `identity` when given (a recorded renderer), else the
  defaults (the arch flags, the host's thread count)."""
  if target not in TARGETS: raise ValueError(f"unknown target {target!r}; targets are {sorted(TARGETS)}")
  arch, threads = "", 0
  if identity is not None:
    rt, arch, threads = parse_identity(identity)
    if rt != target: raise ValueError(f"renderer {identity} is for {rt}, not {target}")
  if not threads:
    from tinygrad.runtime.ops_cpu import cpu_threads
    threads = cpu_threads()
  return TARGETS[target][1](arch, threads)

def target_of(identity: str) -> str:
  try: return parse_identity(identity)[0]
  except IncompatibleRecord: return "?"

# ---- compile-only ----

COMPILE_TARGETS = ("NV", "AMD")
def target_compiler(target: str, identity: str) -> Any:
  """The compiler of an NV or AMD program rendered by `identity` (its arch), built once per process. Raises
  DeviceOpenError (or a subclass) when the toolchain is not installed."""
  return _compiler(target, parse_identity(identity)[1])

@functools.cache
def _compiler(target: str, arch: str) -> Any:
  if target == "NV":
    from tinygrad.runtime.support.cuda_toolchain import NVCompiler
    return NVCompiler(arch or "sm_90")
  if target == "AMD":
    from tinygrad.runtime.support.compiler_amd import AMDCompiler
    return AMDCompiler(arch or "gfx1100")
  raise ValueError(f"compile-only is for {COMPILE_TARGETS}, not {target}")

def compile_only(target: str, identity: str, src: str) -> dict[str, Any]:
  """Compile `src` (a program of `target` rendered by `identity`) with the target's toolchain, nothing run:
  {"ok": True, "bytes": n, "report": the compiler's one-line report} or {"ok": False, "error": the compile error}.
  Raises DeviceOpenError when there is no toolchain (not a verdict on the program)."""
  from tinygrad.device import CompileError
  comp = target_compiler(target, identity)
  try: lib = comp.compile_cached(src, identity)
  except CompileError as e: return {"ok": False, "error": f"{type(e).__name__}: {e}"[:4000]}
  try: report = str(comp.describe(lib))[:500]
  except Exception as e: report = f"(no report: {type(e).__name__}: {e})"
  return {"ok": True, "bytes": len(lib), "report": report}
