"""llvmlite (LLVM 22, from PyPI) as the compiler of LLVM IR: target machines for the host CPU and for AMD GPUs, the
optimisation pipeline, object emission, errors that show the IR lines LLVM names, and the CPU's JIT loader.

CPU: `LLVMCompiler.compile(ir) -> shared object bytes` (cached in sqlite like every compiler's output): llvmlite emits
an object file and the C compiler's linker links it (`link_shared`); the CPU runtime loads it with dlopen as it
loads the C path's, and calls the kernel through ctypes.
"""
from __future__ import annotations
import ctypes, functools, os, re, shutil, subprocess, tempfile, threading
from typing import Any, Sequence
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
    # LLVM 22's truncating masked stores exist only with AVX-512 (scalar_one_lane_stores, below)
    self.one_lane_store_fix = "+avx512f" in feats
    # glibc's vector math library computes float32 exp2/log2/sin 8 lanes a call (renderer/llvmir.py, LIBMVEC); its
    # AVX2 functions need AVX2 and FMA (without them glibc runs other code, with other bits)
    self.vector_math = "+avx2" in feats and "+fma" in feats and libmvec_present()
    self.target = b.Target.from_triple(self.triple)
  def machine(self, opt: int = 3) -> Any:
    return self.target.create_target_machine(cpu=self.cpu, features=self.features, opt=opt, reloc="pic",
                                             codemodel="default")
  @property
  def datalayout(self) -> str: return str(self.machine().target_data)

LIBMVEC_SONAME = "libmvec.so.1"

@functools.cache
def libmvec_present() -> bool:
  """Whether this process can load glibc's vector math library with every function the CPU renderer calls."""
  from tinygrad.renderer.llvmir import LIBMVEC
  try: lib = ctypes.CDLL(LIBMVEC_SONAME)
  except OSError: return False
  return all(hasattr(lib, name) for name in LIBMVEC.values())

_host: HostTarget | None = None
def host_target() -> HostTarget:
  global _host
  if _host is None: _host = HostTarget()
  return _host

# NOTE: the CPU path once loaded objects into llvmlite's JIT (MCJIT). Its memory manager maps a program's code and its
# constants in separate mappings, which the small code model's 32-bit PC-relative references must reach, and a whole
# suite on that path aborted inside finalize_object in 3 of 8 runs (docs/llvm_amd.md). A shared object is one image the
# dynamic loader maps and relocates: the C path's loader.
@functools.cache
def host_linker() -> str:
  """The linker the system C compiler's driver runs (`cc -print-prog-name=ld`, CC= if set), as a path."""
  from tinygrad.runtime.support.compiler_cpu import find_cc
  cc = find_cc()
  try: name = subprocess.run([cc, "-print-prog-name=ld"], capture_output=True, text=True, timeout=30).stdout.strip()
  except (OSError, subprocess.TimeoutExpired) as e: raise DeviceOpenError(f"CPU (LLVM): {cc} does not run: {e}") from e
  if not name or (path := shutil.which(name)) is None:
    raise DeviceOpenError(f"CPU (LLVM): the linker of {cc} ({name or 'none named'}) was not found: the LLVM path links "
                          "its objects into shared objects with it (install binutils, or use CPU_LLVM=0)")
  return path

def link_shared(objs: Sequence[bytes], what: str = "kernels") -> bytes:
  """Object files -> one shared object (bytes), linked by the C compiler's linker (`ld -shared`) with the math library
  (the transcendentals lower to `exp2f` and friends) and glibc's vector math library where it is installed. The C
  library is not named: linking through its script costs twice as long, and the process has it loaded; a symbol
  nothing defines fails when the object is loaded, by name."""
  ld = host_linker()
  with tempfile.TemporaryDirectory(prefix="tinygrad-ld-") as d:
    paths = [os.path.join(d, f"k{i}.o") for i in range(len(objs))]
    for path, obj in zip(paths, objs):
      with open(path, "wb") as f: f.write(obj)
    out = os.path.join(d, "kernels.so")
    # libmvec only where an object calls it (--as-needed): renderer/llvmir.py's LIBMVEC functions
    cmd = [ld, "-shared", "-z", "noexecstack", "-o", out, *paths, "-lm",
           *(["--as-needed", f"-l:{LIBMVEC_SONAME}"] if libmvec_present() else [])]
    proc = subprocess.run(cmd, capture_output=True)
    if proc.returncode != 0:
      msg = proc.stderr.decode(errors="replace").strip()
      raise CompileError(f"CPU (LLVM): linking {what} failed ({' '.join(cmd)}, exit {proc.returncode}):\n{msg}")
    with open(out, "rb") as f: return f.read()

# ---- LLVM 22's one-lane masked stores on AVX-512 ----

# NOTE: LLVM 22's x86 code generator turns a masked store whose constant mask enables one lane into a scalar store of
# that lane, and gets its width wrong where AVX-512 made the store a truncating one (a trunc of i32 lanes to i16 or
# i8, of i64 to narrower ints): it stores the whole wide lane, so the elements after it are overwritten
# (llvm/llvm-project#179489, fixed after LLVM 22). The loop vectorizer makes such stores from a gated store in a loop
# once its last iteration is unrolled. The fuzzer found it (docs/fuzz.md): a bfloat16 store gated to 18 of 27 elements
# also wrote element 18. So after the optimizer, and before the code generator, every masked store with a one-lane
# constant mask becomes the scalar store it means, which the code generator keeps at the element's width.
_MASKED_STORE = re.compile(r"^(\s*)(?:(?:tail|notail|musttail) )?call void @llvm\.masked\.store\.[\w.]+\((.*)\)"
                           r"((?: #\d+)*)((?:, ![\w.]+ ![\w.]+)*)$")
_PTR_ATTR = re.compile(r"^(?:align \d+|noundef|nonnull|writeonly|noalias|captures\([\w, ]*\)|dereferenceable\(\d+\)) ")

def _top_level_split(args: str) -> list[str]:
  """`args` split at the commas outside any <>, (), [] or {} (an argument list of LLVM IR)."""
  out, depth, start = [], 0, 0
  for i, c in enumerate(args):
    if c in "<([{": depth += 1
    elif c in ">)]}": depth -= 1
    elif c == "," and depth == 0:
      out.append(args[start:i].strip())
      start = i + 1
  out.append(args[start:].strip())
  return out

def _one_lane_store(line: str, n: int) -> str | None:
  """The scalar store (extractelement, getelementptr, store) a masked store with one enabled constant lane means, or
  None where `line` is not one."""
  if (m := _MASKED_STORE.match(line)) is None: return None
  indent, args, meta = m.group(1), _top_level_split(m.group(2)), m.group(4)
  if len(args) != 3 or (vm := re.match(r"^<(\d+) x ([^<>]+)> (.+)$", args[0])) is None: return None
  if (mm := re.match(r"^<\d+ x i1> <(.*)>$", args[2])) is None: return None
  lanes = [x.strip() for x in mm.group(1).split(",")]
  if any(x not in ("i1 true", "i1 false") for x in lanes) or lanes.count("i1 true") != 1: return None
  k, ety, vec = lanes.index("i1 true"), vm.group(2), vm.group(3)
  if (pm := re.match(r"^(ptr(?: addrspace\(\d+\))?) (.+)$", args[1])) is None: return None
  pty, rest, align = pm.group(1), pm.group(2) + " ", 1
  while (am := _PTR_ATTR.match(rest)) is not None:
    if am.group(0).startswith("align "): align = int(am.group(0).split()[1])
    rest = rest[am.end():]
  ptr = rest.strip()
  # NOTE: lane k's address is the vector's plus k elements: aligned to the vector's alignment and to k * its size
  esize = {"i8": 1, "i16": 2, "half": 2, "bfloat": 2, "i32": 4, "float": 4, "i64": 8, "double": 8}.get(ety)
  if esize is None: return None
  ealign = align if k == 0 else min(align, (k * esize) & -(k * esize))
  e, p = f"%tg.mst{n}.e", f"%tg.mst{n}.p"
  return (f"{indent}{e} = extractelement <{vm.group(1)} x {ety}> {vec}, i64 {k}\n"
          f"{indent}{p} = getelementptr {ety}, {pty} {ptr}, i64 {k}\n"
          f"{indent}store {ety} {e}, {pty} {p}, align {ealign}{meta}")

def scalar_one_lane_stores(src: str) -> str:
  """`src` (LLVM IR text) with every masked store whose constant mask enables one lane written as a scalar store."""
  if "@llvm.masked.store." not in src: return src
  lines = src.split("\n")
  for i, line in enumerate(lines):
    if "@llvm.masked.store." in line and (new := _one_lane_store(line, i)) is not None: lines[i] = new
  return "\n".join(lines)

class LLVMCompiler(Compiler):
  """LLVM IR -> a shared object for the host CPU: the O`opt` pipeline, the code generator's object file
  (`compile_object`), linked by `link_shared`. The cache key holds the LLVM version, the triple, the CPU and its
  features, the optimisation level and the linker with its version."""
  def __init__(self, opt: int = 2):
    from tinygrad.runtime.support.compiler_cpu import cc_version
    self.host, self.opt = host_target(), opt
    ld = host_linker()
    super().__init__(f"llvm-cpu|{llvm_version()}|{self.host.triple}|{self.host.cpu}|{self.host.features}|O{opt}|"
                     f"so:{ld}|{cc_version(ld)}{'|one-lane-stores' if self.host.one_lane_store_fix else ''}")
    self.tm = self.host.machine(opt)
  def compile_object(self, src: str) -> bytes:
    """The relocatable object file of `src` (what `compile` links; a fuzz batch links many into one)."""
    mod = parse_and_verify(src, "CPU (LLVM)")
    with llvm_lock:
      optimize(mod, self.tm, self.opt)
      if self.host.one_lane_store_fix:
        text = str(mod)
        if (fixed := scalar_one_lane_stores(text)) != text: mod = parse_and_verify(fixed, "CPU (LLVM), one-lane stores")
      return bytes(self.tm.emit_object(mod))
  def compile(self, src: str) -> bytes: return link_shared([self.compile_object(src)])
  def disassemble(self, lib: bytes) -> str:
    from tinygrad.runtime.support.compiler_cpu import objdump
    return objdump(lib)

__all__ = ["llvm", "llvm_lock", "llvm_version", "explain_error", "parse_and_verify", "optimize",
           "scalar_one_lane_stores", "HostTarget", "host_target", "host_linker", "link_shared", "LLVMCompiler",
           "LIBMVEC_SONAME", "libmvec_present"]
