"""llvmlite (LLVM 22, from PyPI) as the compiler of LLVM IR: target machines for the host CPU and for AMD GPUs, the
optimisation pipeline, object emission, errors that show the IR lines LLVM names, and the CPU's JIT loader.

CPU: `LLVMCompiler.compile(ir) -> object file bytes` (cached in sqlite like every compiler's output); the CPU runtime
loads the object into an MCJIT execution engine (`LLVMProgramLoader`) and calls the kernel through ctypes, so no C
compiler and no linker are involved.
"""
from __future__ import annotations
import ctypes, re, threading
from typing import Any
from tinygrad.device import Compiler, CompileError, DeviceOpenError

llvm_lock = threading.Lock()  # held around llvmlite set-up, optimization, emission, engines (compiler_amd too)
_LLVMLITE_HINT = "`pip install 'llvmlite==0.50.0'` (the project's `llvm` extra: pip install -e '.[llvm]')"
_llvm: Any = None

def llvm() -> Any:
  """llvmlite.binding, with every target initialised (once). A clear error when llvmlite is missing."""
  global _llvm
  if _llvm is not None: return _llvm
  with llvm_lock:
    if _llvm is None:
      # NOTE: llvmlite is an optional third-party extra (`llvm`): missing, it is an error naming the extra
      try: import llvmlite.binding as binding
      except ImportError as e: raise DeviceOpenError(f"LLVM: llvmlite is not installed ({e}); {_LLVMLITE_HINT}") from e
      binding.initialize_all_targets()
      binding.initialize_all_asmprinters()
      _llvm = binding
  return _llvm

def llvm_version() -> str:
  b = llvm()
  import llvmlite
  return f"llvmlite {llvmlite.__version__} LLVM {'.'.join(map(str, b.llvm_version_info))}"

# ---- errors with the IR lines they name ----

def explain_error(src: str, msg: str, context: int = 2) -> str:
  """LLVM's message, then the IR lines it points at: `<string>:L:C` positions of the parser, and the instructions the
  verifier quotes (found in the source by the value they define, else by their text), each with `context` lines
  around it."""
  lines = src.splitlines()
  hits: set[int] = {int(m.group(1)) - 1 for m in re.finditer(r"<string>:(\d+):\d+", msg)}
  quoted = [q.strip() for q in msg.splitlines() if q.startswith(("  ", "\t")) and q.strip()]
  defs = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"\s*(%[\w.\-]+) = ", line))}
  for q in quoted:
    # NOTE: LLVM prints instructions in its own spelling (constants in decimal): a result is found by its name
    if (m := re.match(r"(%[\w.\-]+) = ", q)) and m.group(1) in defs: hits.add(defs[m.group(1)])
    else: hits.update(i for i, line in enumerate(lines) if line.strip() == q)
  if not hits: return msg.strip()
  keep = sorted({j for i in hits for j in range(max(0, i - context), min(len(lines), i + context + 1))})
  out, prev = [], -2
  for j in keep:
    if j != prev + 1: out.append("     ...")
    out.append(f"{'>>' if j in hits else '  '}{j + 1:4d} | {lines[j]}")
    prev = j
  return f"{msg.strip()}\n---- the IR lines it names ----\n" + "\n".join(out)

def parse_and_verify(src: str, what: str) -> Any:
  """The module of `src`, verified; a CompileError with the IR lines the parser or the verifier names."""
  b = llvm()
  try:
    mod = b.parse_assembly(src)
    mod.verify()
  except RuntimeError as e:
    raise CompileError(f"{what}: LLVM rejected the IR:\n{explain_error(src, str(e))}") from e
  return mod

def optimize(mod: Any, tm: Any, level: int) -> None:
  b = llvm()
  pto = b.create_pipeline_tuning_options(level)
  pb = b.create_pass_builder(tm, pto)
  pb.getModulePassManager().run(mod, pb)

# ---- the host CPU ----

class HostTarget:
  """The machine this process runs on, as LLVM sees it: triple, CPU name, features, data layout, vector width."""
  def __init__(self) -> None:
    b = llvm()
    self.triple = b.get_process_triple()
    self.cpu = b.get_host_cpu_name()
    self.features = b.get_host_cpu_features().flatten()
    feats = set(self.features.split(","))
    self.vector_bits = 512 if "+avx512f" in feats else 256 if "+avx2" in feats or "+avx" in feats else 128
    self.target = b.Target.from_triple(self.triple)
  def machine(self, opt: int = 3) -> Any:
    return self.target.create_target_machine(cpu=self.cpu, features=self.features, opt=opt, reloc="pic",
                                             codemodel="default")
  @property
  def datalayout(self) -> str: return str(self.machine().target_data)

_host: HostTarget | None = None
def host_target() -> HostTarget:
  global _host
  if _host is None: _host = HostTarget()
  return _host

class LLVMCompiler(Compiler):
  """LLVM IR -> an object file for the host CPU (O`opt` pipeline, then the code generator). The cache key holds the LLVM
  version, the triple, the CPU and its features, and the optimisation level."""
  def __init__(self, opt: int = 2):
    self.host, self.opt = host_target(), opt
    super().__init__(f"llvm-cpu|{llvm_version()}|{self.host.triple}|{self.host.cpu}|{self.host.features}|O{opt}")
    self.tm = self.host.machine(opt)
  def compile(self, src: str) -> bytes:
    mod = parse_and_verify(src, "CPU (LLVM)")
    with llvm_lock:
      optimize(mod, self.tm, self.opt)
      return bytes(self.tm.emit_object(mod))
  def disassemble(self, lib: bytes) -> str:
    return "\n".join(f"{s.name()}: {len(s.data())} bytes" for s in llvm().ObjectFileRef.from_data(lib).sections())

class LLVMProgramLoader:
  """Loads object files into MCJIT execution engines, one per program or per batch: code is freed with its engine."""
  def __init__(self) -> None: self.host = host_target()
  def load(self, name: str, obj: bytes) -> tuple[Any, int]:
    """(the engine that owns the code, the address of kernel `name`)."""
    engine, addrs = self.load_many([(name, obj)])
    return engine, addrs[0]
  def load_many(self, objs: list[tuple[str, bytes]]) -> tuple[Any, list[int]]:
    """Several object files (kernel name, object) in one engine: (the engine, each kernel's address in order). Making
    an engine and its target machine costs more than loading a small object: a batch of kernels shares one."""
    b = llvm()
    with llvm_lock:
      # NOTE: an engine owns (and deletes) its target machine: each engine gets its own
      tm = self.host.target.create_target_machine(cpu=self.host.cpu, features=self.host.features, opt=2,
                                                  reloc="default", codemodel="jitdefault", jit=True)
      engine = b.create_mcjit_compiler(b.parse_assembly(""), tm)
      for _, obj in objs: engine.add_object_file(b.ObjectFileRef.from_data(obj))
      engine.finalize_object()
      addrs = [engine.get_function_address(name) for name, _ in objs]
    if missing := [name for (name, _), a in zip(objs, addrs) if not a]:
      raise RuntimeError(f"CPU (LLVM): the object has no function {missing[0]!r}")
    return engine, addrs

def cfunc(addr: int, nbufs: int, nvals: int) -> Any:
  """The kernel at `addr` as a ctypes function: (void* x nbufs, int32 x nvals, int32 core_id) -> void."""
  return ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nbufs), *([ctypes.c_int32] * (nvals + 1)))(addr)

__all__ = ["llvm", "llvm_lock", "llvm_version", "explain_error", "parse_and_verify", "optimize", "HostTarget",
           "host_target", "LLVMCompiler", "LLVMProgramLoader", "cfunc"]
