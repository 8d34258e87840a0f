"""The targets a campaign checks, one line each in `BACKENDS` (name -> the class that checks kernels on it).

A backend checks a batch of prepared kernels (`KernelItem`: the case, its input data and the reference run with error
bounds, fuzz/oracles/budget.py): lower each with the target's renderer and the case's candidate opts that fit it
(`fit_opts`), build the batch (several kernels in one shared object where a compiler dominates), run each, and compare
every buffer with the reference within the ULP budget. It returns, per kernel, None or a `Failure` (stage, kind, code
site, message). Before each step of each kernel it calls `note(i, backend, stage)`, so that a worker that dies (a
segfault in compiled code) or hangs is attributed to the kernel and the step it was in.

  cpu     C (CRenderer), the batch compiled by the system C compiler into one shared object, run through ctypes
  llvm    LLVM IR (CPULLVMRenderer) compiled by llvmlite for the host kernel by kernel, the batch's objects linked into
          one shared object (the CPU_LLVM=1 path)
  python  the PYTHON renderer and interpreter (checks every access; the semantics table's arithmetic)
  nv      CUDA C (CUDARenderer, NV_ARCH or sm_90): the batch compiled by NVRTC + ptxas (as COMPILE_ONLY=1 does), and
          run on the host through the CUDA shim (tinygrad/runtime/support/cuda_host.py); kernels with shared memory or
          barriers, which the shim cannot run, run their NV lowering on the PYTHON interpreter instead
  amd     LLVM IR for AMD (AMDLLVMRenderer), one arch per kernel in turn (gfx942, gfx1100, gfx1201): compiled and linked
          into a code object whose structure is checked (kernel descriptor, wave size, kernargs as the runtime packs
          them, LDS), and the AMD lowering run on the PYTHON interpreter
  nvgpu   a real NV GPU (the driver must open one): compiled and run on the device

`unavailable()` says why a backend cannot run here (a missing toolchain), or None; a campaign names each such backend
with its reason and does not run it. Tensor programs run through the public API on `tensor_device()` under
`tensor_context()`: cpu, llvm, python, nvgpu on their devices, nv and amd on the PYTHON device emulating their target
(EMULATE=NV, AMD_GFX942/1100/1201 turning per program); nv and amd (and a backend without a device) also check the
program's scheduled kernels as the kernel level does.
"""
from __future__ import annotations
import contextlib, functools, os, traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence
import numpy as np
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, PtrDType, to_np_dtype
from tinygrad.device import DeviceOpenError
from tinygrad.runtime.support.compiler_llvm import llvm_version
from tinygrad.runtime import targets as registry
from fuzz.oracles.budget import BudgetRef, compare_with_budget

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# note(item index, backend, stage): called before each step, so a crash is attributed to it
Note = Callable[[int, str, str], None]
# the AMD archs a campaign turns through, kernel by kernel
AMD_ARCH_CYCLE = tuple(registry.AMD_ARCHS)

def _no_note(i: int, backend: str, stage: str) -> None: pass

# ---- failures ----

@dataclass(frozen=True)
class Failure:
  """A check that did not pass: the stage (generate, spec, roundtrip, reference, opts, codegen, compile, load,
  codeobject, run, compare, crash, hang), the kind (exception class, mismatch class, signal), the code site
  (file:function of the innermost frame in tinygrad/, spec/ or the oracles), the backend and the full message."""
  stage: str
  kind: str
  site: str
  backend: str
  message: str

def exception_site(e: BaseException) -> str:
  """file:function of the frame that raised, preferring compiler code (tinygrad/, spec/) and then the oracles."""
  frames = traceback.extract_tb(e.__traceback__)
  def rel(f: traceback.FrameSummary) -> str: return os.path.relpath(f.filename, REPO)
  def prefer(pred: Callable[[str], bool]) -> str | None:
    hits = [f for f in frames if pred(rel(f))]
    return f"{rel(hits[-1])}:{hits[-1].name}" if hits else None
  return (prefer(lambda p: p.startswith(("tinygrad/", "spec/")))
          or prefer(lambda p: p in ("fuzz/oracles/kernel_ref.py", "fuzz/oracles/budget.py", "fuzz/oracles/symbolic.py"))
          or prefer(lambda p: not p.startswith("..")) or (f"{frames[-1].name}" if frames else "?"))

def failure_from(e: BaseException, stage: str, backend: str) -> Failure:
  """A Failure for an exception raised in `stage`; spec, round-trip, bounds and reference errors name their own."""
  name = type(e).__name__
  own = {"SpecError": "spec", "RoundTripError": "roundtrip", "ProgramRoundTripError": "roundtrip",
         "IndexOutOfBounds": "index-bounds",
         "KernelRefError": "reference", "CompileError": "compile", "EmulatedKernelError": "run"}
  if name == "SpecError": name = f"SpecError[{getattr(e, 'stage', '?')}]"
  msg = f"{type(e).__name__}: {e}"
  return Failure(own.get(type(e).__name__, stage), name, exception_site(e), backend, msg[:20000])

# ---- what a backend checks ----

@dataclass
class KernelItem:
  """A kernel ready to check: the AST, its DEFINE_VAR values, candidate opts (None: heuristics), the input storage
  arrays by buffer number, the reference run (with error bounds) and each buffer's dtype."""
  ast: UOp
  var_vals: dict[str, int]
  opts: tuple[Any, ...] | None
  inputs: dict[int, np.ndarray]
  ref: BudgetRef
  dtypes: dict[int, DType]
  seed: int = 0
  # name -> (the AST under that kernel name, prepare_kernel of it): every backend lowers the same one (see `prepared`)
  _prepared: dict[str, tuple[UOp, UOp]] = field(default_factory=dict, repr=False, compare=False)

  def prepared(self, name: str) -> tuple[UOp, UOp]:
    """(the AST named `name`, codegen's first pass on it), computed once per item: each backend fits its opts to it and
    lowers from it, as get_program would prepare it again (one symbolic rewrite of the graph per backend saved)."""
    if (hit := self._prepared.get(name)) is None:
      from tinygrad.codegen.program import prepare_kernel
      ast = named(self.ast, name)
      hit = self._prepared[name] = (ast, prepare_kernel(ast))
    return hit

class ProgramRoundTripError(AssertionError):
  """A lowered program's pyrender text did not read back as the same uops."""

class LoweredProgram:
  """A ProgramSpec and the arch it was lowered for (attributes are the ProgramSpec's)."""
  def __init__(self, prg: Any, arch: str): self.prg, self.device_arch = prg, arch
  def __getattr__(self, k: str) -> Any: return getattr(self.prg, k)

def fit_opts(ast: UOp, renderer: Any, cands: Sequence[Any] | None, prepared: UOp | None = None) -> list[Any] | None:
  """The candidate opts that apply to this kernel on this target, in order (each tried after the ones kept). Opts
  apply after codegen's first pass folds the index math (which may fold ranges away), so they are fitted to that
  (`prepared`: that pass's result when the caller has it)."""
  if cands is None: return None
  from tinygrad.codegen.opt import apply_opt, KernelInfo, KernelOptError
  from tinygrad.codegen.program import prepare_kernel
  cur = prepare_kernel(ast) if prepared is None else prepared
  done = tuple(cur.arg.applied_opts) if isinstance(cur.arg, KernelInfo) else ()
  kept: list[Any] = []
  # NOTE: apply_opts(ast, [*kept, o]) is apply_opt of each in turn: the AST with the kept opts applied is kept, and each
  # candidate is applied once to it (not every kept opt again per candidate)
  for o in cands:
    try: cur = apply_opt(cur, o, renderer, done + tuple(kept))
    except KernelOptError: continue
    kept.append(o)
  return kept

def named(ast: UOp, name: str) -> UOp:
  """The kernel under another name (KernelInfo.name), so a batch of kernels has distinct function names."""
  from tinygrad.codegen.opt import KernelInfo
  info = ast.arg if isinstance(ast.arg, KernelInfo) else KernelInfo()
  return ast.replace(arg=KernelInfo(name, info.opts, info.applied_opts))

def host_arrays(item: KernelItem) -> dict[int, np.ndarray]:
  """Fresh writable copies of the inputs (every buffer of the kernel, by number)."""
  out = {}
  for u in item.ast.toposort():
    if u.op is not Ops.DEFINE_GLOBAL or not isinstance(u.dtype, PtrDType): continue
    data = item.inputs.get(u.arg)
    out[u.arg] = np.zeros(u.dtype.size, to_np_dtype(u.dtype.base)) if data is None else np.array(data, copy=True)
  return out

class Backend:
  """Lower, build, run and compare a batch of kernels on one target. Subclasses set `name` and `renderer()` and
  override `build`/`run` (and `unavailable` when they need a toolchain)."""
  name = ""
  def unavailable(self) -> str | None: return None
  def describe(self) -> str: return self.name
  def renderer(self, item: KernelItem) -> Any: raise NotImplementedError
  def tensor_device(self) -> str | None: return None
  def tensor_shard_devices(self) -> tuple[str, ...] | None:
    """The devices a sharded tensor program runs on here (fuzz/gen/tensor_programs.py), each opened as
    tensor_device() is; None: it runs unsharded on tensor_device()."""
    from fuzz.gen.tensor_programs import shard_devices
    return None if (dev := self.tensor_device()) is None else shard_devices(dev)
  def tensor_context(self, key: int) -> Any:
    """What a tensor program on `tensor_device()` runs under (an emulation; `key` turns an arch per case)."""
    return contextlib.nullcontext()
  def checks_scheduled(self) -> bool:
    """Whether the tensor level checks a program's scheduled kernels here, as at the kernel level."""
    return self.tensor_device() is None

  def lower(self, item: KernelItem, i: int) -> Any:
    from tinygrad.codegen import get_program
    ren = self.renderer(item)
    ast, prepared = item.prepared(f"k{i}")
    prg = get_program(ast, ren, fit_opts(ast, ren, item.opts, prepared), prepared=prepared)
    from tinygrad.helpers import SPEC
    if int(SPEC.value) >= 2:
      # NOTE: the lowered program reads back from its pyrender text too (the AST's round trip is the level's check)
      from spec.roundtrip import check_roundtrip
      try: check_roundtrip(list(prg.uops))
      except Exception as e: raise ProgramRoundTripError(f"{self.name}: {e}") from e
    return LoweredProgram(prg, ren.arch)

  def build(self, progs: dict[int, Any], note: Note) -> dict[int, Any]:
    """index -> something `run` takes, or a Failure."""
    return progs

  def run(self, built: Any, prg: Any, item: KernelItem) -> dict[int, np.ndarray]: raise NotImplementedError

  def check_kernels(self, items: Sequence[KernelItem], note: Note = _no_note) -> list[Failure | None]:
    out: list[Failure | None] = [None] * len(items)
    progs: dict[int, Any] = {}
    for i, it in enumerate(items):
      note(i, self.name, "codegen")
      try: progs[i] = self.lower(it, i)
      except Exception as e: out[i] = failure_from(e, "codegen", self.name)
    built = self.build(progs, note)
    for i, b in built.items():
      if isinstance(b, Failure):
        out[i] = b
        continue
      note(i, self.name, "run")
      try: got = self.run(b, progs[i], items[i])
      except Exception as e:
        out[i] = failure_from(e, "run", self.name)
        continue
      note(i, self.name, "compare")
      if (msg := compare_with_budget(items[i].ref, got, items[i].dtypes)) is not None:
        out[i] = Failure("compare", msg.split(":")[0], "", self.name, msg)
    return out

def launch_host(fn: Any, prg: Any, arrs: dict[int, np.ndarray], var_vals: Mapping[str, int]) -> None:
  """Run a host kernel on the item's arrays with the registry's host launcher (one call per core id, in turn)."""
  gs, ls = prg.launch_dims(dict(var_vals))
  registry.launch_host(fn, [arrs[n].ctypes.data for n in prg.globals], [int(var_vals[v]) for v in prg.var_names],
                       registry.host_cores(prg.name, gs, ls))

def open_cpu_devices(names: tuple[str, ...], llvm: int) -> tuple[str, ...]:
  """CPU devices `names`, each opened (once per process) under CPU_LLVM=`llvm`: a backend's own C or LLVM devices,
  whatever the plain CPU device compiles with."""
  from tinygrad.device import Device
  from tinygrad.helpers import Context
  with Context(CPU_LLVM=llvm):
    for n in names: Device[n]
  return names

# ---- the backends ----

class PythonBackend(Backend):
  name = "python"
  @functools.cached_property
  def _renderer(self) -> Any:
    from tinygrad.runtime.ops_python import PythonRenderer
    return PythonRenderer()
  def renderer(self, item: KernelItem) -> Any: return self._renderer
  def describe(self) -> str: return "python: the PYTHON interpreter (every access checked)"
  def tensor_device(self) -> str | None: return "PYTHON"
  def run(self, built: Any, prg: Any, item: KernelItem) -> dict[int, np.ndarray]:
    # NOTE: the PYTHON renderer's source is the interpreter's program text (render_program of the uops) already
    return run_python(prg, item, prg.src)

def run_python(prg: Any, item: KernelItem, text: str | None = None, emulate: dict[str, str] | None = None) \
    -> dict[int, np.ndarray]:
  """Interpret a lowered program (any target's lowering) on the PYTHON backend, on copies of the inputs. `text` is the
  program's interpreter text when the caller has it (the PYTHON renderer's own source), else it is rendered here.
  `emulate` (EMULATE and an arch flag) makes the interpreter the GPU the program was lowered for: its launch limits,
  wave and shared memory, not the generic GPU's."""
  from tinygrad.helpers import Context
  from tinygrad.runtime.ops_python import PythonProgram, render_program
  with Context(**(emulate or {})):
    fxn = PythonProgram(prg.name, (render_program(prg.uops) if text is None else text).encode())
    arrs = host_arrays(item)
    gs, ls = prg.launch_dims(dict(item.var_vals))
    fxn(*[arrs[n] for n in prg.globals], global_size=tuple(gs), local_size=tuple(ls) if ls is not None else (1, 1, 1),
        vals=tuple(int(item.var_vals[v]) for v in prg.var_names))
  return arrs

class CBackend(Backend):
  name = "cpu"
  def unavailable(self) -> str | None:
    from tinygrad.runtime.support.compiler_cpu import find_cc
    try: find_cc()
    except Exception as e: return str(e)
    return None
  def describe(self) -> str:
    from tinygrad.runtime.support.compiler_cpu import find_cc, cc_version
    return f"cpu: C, one shared object per batch ({cc_version(find_cc())})"
  # NOTE: the plain CPU device is LLVM where llvmlite is installed (CPU_LLVM's default): this backend opens its own
  # devices with CPU_LLVM=0, CPU:2 and CPU:4 (CPU:1 and CPU:3 are the llvm backend's)
  SHARD_DEVICES = ("CPU:2", "CPU:4")
  def tensor_device(self) -> str | None: return open_cpu_devices(self.SHARD_DEVICES[:1], llvm=0)[0]
  def tensor_shard_devices(self) -> tuple[str, ...] | None: return open_cpu_devices(self.SHARD_DEVICES, llvm=0)
  @functools.cached_property
  def _renderer(self) -> Any: return registry.renderer("CPU", threads=1)
  def renderer(self, item: KernelItem) -> Any: return self._renderer
  @functools.cached_property
  def _compiler(self) -> Any: return registry.compiler("CPU")

  def build(self, progs: dict[int, Any], note: Note) -> dict[int, Any]:
    if not progs: return {}
    for i in progs: note(i, self.name, "compile")
    cc = self._compiler
    try: lib = registry.load_shared(cc.compile(self.merged(progs)))
    except Exception:
      # NOTE: one kernel that does not compile must not hide the others: each alone names its own error
      out: dict[int, Any] = {}
      for i, p in progs.items():
        note(i, self.name, "compile")
        try: out[i] = registry.load_shared(cc.compile(p.src), p.name)
        except Exception as e: out[i] = failure_from(e, "compile", self.name)
      return out
    return {i: lib for i in progs}

  def merged(self, progs: dict[int, Any]) -> str:
    """One C translation unit: every kernel's prefix pieces once (helpers, vector typedefs), then every kernel."""
    prefix: dict[str, None] = {}
    bodies = []
    for p in progs.values():
      start = p.src.find(f" {p.name}(")
      start = p.src.rfind("\n", 0, start) + 1
      prefix.update(dict.fromkeys(self._renderer.render_prefix(p.uops)))
      bodies.append(p.src[start:])
    return "\n".join([*prefix, *bodies])

  def run(self, built: Any, prg: Any, item: KernelItem) -> dict[int, np.ndarray]:
    arrs = host_arrays(item)
    launch_host(registry.host_function(built, prg.name), prg, arrs, item.var_vals)
    return arrs

class LLVMBackend(Backend):
  name = "llvm"
  def unavailable(self) -> str | None:
    # NOTE: llvm() names a missing llvmlite (an optional extra) in its DeviceOpenError; our own module always imports
    try: llvm_version()
    except DeviceOpenError as e: return str(e)
    except Exception as e: return f"llvmlite does not load: {e}"
    return None
  def describe(self) -> str:
    from tinygrad.runtime.support.compiler_llvm import llvm_version
    return f"llvm: LLVM IR through llvmlite (LLVM {llvm_version()}), one linked shared object per batch"
  # NOTE: CPU devices of its own, opened with CPU_LLVM=1, whatever the plain CPU device compiles with
  SHARD_DEVICES = ("CPU:1", "CPU:3")
  def tensor_device(self) -> str | None: return open_cpu_devices(self.SHARD_DEVICES[:1], llvm=1)[0]
  def tensor_shard_devices(self) -> tuple[str, ...] | None: return open_cpu_devices(self.SHARD_DEVICES, llvm=1)
  @functools.cached_property
  def _renderer(self) -> Any: return registry.renderer("CPU_LLVM")
  def renderer(self, item: KernelItem) -> Any: return self._renderer
  @functools.cached_property
  def _compiler(self) -> Any: return registry.compiler("CPU_LLVM")
  def build(self, progs: dict[int, Any], note: Note) -> dict[int, Any]:
    from tinygrad.runtime.support.compiler_llvm import link_shared
    comp = self._compiler
    out: dict[int, Any] = {}
    objs: dict[int, bytes] = {}
    # NOTE: each kernel is optimised and emitted on its own (an LLVM abort names the kernel it was in); the objects are
    # linked into one shared object per batch, as one C translation unit holds a batch on cpu
    for i, p in progs.items():
      note(i, self.name, "compile")
      try: objs[i] = comp.compile_object(p.src)
      except Exception as e: out[i] = failure_from(e, "compile", self.name)
    if not objs: return out
    for i in objs: note(i, self.name, "load")
    try:
      lib = registry.load_shared(link_shared(list(objs.values()), f"a batch of {len(objs)} kernels"), "llvm-batch")
      out.update({i: (lib, registry.host_function(lib, progs[i].name)) for i in objs})
    except Exception:
      # NOTE: one object that does not link or lacks its kernel must not hide the others: each alone names its error
      for i, o in objs.items():
        note(i, self.name, "load")
        try:
          one = registry.load_shared(link_shared([o], progs[i].name), progs[i].name)
          out[i] = (one, registry.host_function(one, progs[i].name))
        except Exception as e: out[i] = failure_from(e, "load", self.name)
    return out
  def run(self, built: Any, prg: Any, item: KernelItem) -> dict[int, np.ndarray]:
    _lib, fxn = built
    arrs = host_arrays(item)
    launch_host(fxn, prg, arrs, item.var_vals)
    return arrs

class NVBackend(Backend):
  name = "nv"
  def unavailable(self) -> str | None:
    try: self._compiler
    except Exception as e: return f"no CUDA toolchain (NVRTC + ptxas): {e}"
    from tinygrad.runtime.support.cuda_host import find_cxx
    try: find_cxx()
    except Exception as e: return f"the host CUDA shim needs a C++ compiler: {e}"
    return None
  @functools.cached_property
  def _compiler(self) -> Any: return registry.compiler("NV", registry.default_arch("NV"))
  def describe(self) -> str:
    c = self._compiler
    return (f"nv: CUDA C for {c.arch}, NVRTC {c.nvrtc.version[0]}.{c.nvrtc.version[1]} + ptxas {c.ptxas_version} "
            "(compile only), run on the host CUDA shim (kernels with shared memory/barriers: their NV lowering on "
            "the PYTHON interpreter)")
  @functools.cached_property
  def _renderer(self) -> Any: return registry.renderer("NV", self._compiler.arch)
  def renderer(self, item: KernelItem) -> Any: return self._renderer
  # NOTE: tensor programs run on the PYTHON device emulating NV (its renderer's exact programs); their kernels are also
  # compiled here and run on the host shim, as at the kernel level
  def tensor_device(self) -> str | None: return "PYTHON"
  def tensor_context(self, key: int) -> Any:
    from tinygrad.helpers import Context
    return Context(EMULATE="NV", NV_ARCH=self._compiler.arch)
  def checks_scheduled(self) -> bool: return True
  def build(self, progs: dict[int, Any], note: Note) -> dict[int, Any]:
    from tinygrad.runtime.support.cuda_host import HostLibrary, build_host_library, host_refusal
    out: dict[int, Any] = {}
    if not progs: return out
    idx = list(progs)
    for i in idx: note(i, self.name, "compile")
    errs = self._compiler.verify([progs[i].src for i in idx])
    ok = []
    for i, err in zip(idx, errs):
      if err is None: ok.append(i)
      else: out[i] = Failure("compile", "CompileError", "tinygrad/runtime/support/cuda_toolchain.py:compile", self.name,
                             err[:20000])
    shim = [i for i in ok if host_refusal(progs[i].src) is None]
    for i in ok:
      if i not in shim: out[i] = "python"
    if shim:
      for i in shim: note(i, self.name, "host-compile")
      try:
        lib = HostLibrary(build_host_library([progs[i].src for i in shim]))
        out.update({i: lib for i in shim})
      except Exception:
        for i in shim:
          note(i, self.name, "host-compile")
          try: out[i] = HostLibrary(build_host_library([progs[i].src]))
          except Exception as e: out[i] = failure_from(e, "host-compile", self.name)
    return out
  def run(self, built: Any, prg: Any, item: KernelItem) -> dict[int, np.ndarray]:
    if built == "python": return run_python(prg, item, emulate={"EMULATE": "NV", "NV_ARCH": prg.device_arch})
    arrs = host_arrays(item)
    gs, ls = prg.launch_dims(dict(item.var_vals))
    built.run(prg.name, [arrs[n].ctypes.data for n in prg.globals], [int(item.var_vals[v]) for v in prg.var_names],
              gs, ls or [1, 1, 1])
    return arrs

class AMDBackend(Backend):
  name = "amd"
  def unavailable(self) -> str | None:
    try:
      from tinygrad.runtime.support.compiler_amd import find_linker
      find_linker()
      self._compiler(registry.AMD_DEFAULT_ARCH)
    except Exception as e: return f"no AMD toolchain (llvmlite AMDGPU + ld.lld): {e}"
    return None
  def describe(self) -> str:
    return (f"amd: LLVM IR for {', '.join(AMD_ARCH_CYCLE)} (one per kernel in turn), compiled + linked, code object "
            "checked, the AMD lowering run on the PYTHON interpreter")
  def _compiler(self, arch: str) -> Any: return registry.compiler("AMD", arch)
  @functools.lru_cache(maxsize=None)
  def _renderer(self, arch: str) -> Any: return registry.renderer("AMD", arch)
  # NOTE: the arch turns with the kernel's seed, so a reproducer gets the same arch again
  def renderer(self, item: KernelItem) -> Any: return self._renderer(AMD_ARCH_CYCLE[item.seed % len(AMD_ARCH_CYCLE)])
  # NOTE: tensor programs run on the PYTHON device emulating one arch per program (turning with its length)
  def tensor_device(self) -> str | None: return "PYTHON"
  def tensor_context(self, key: int) -> Any:
    from tinygrad.helpers import Context
    return Context(EMULATE=f"AMD_{AMD_ARCH_CYCLE[key % len(AMD_ARCH_CYCLE)].upper()}")
  def checks_scheduled(self) -> bool: return True
  def build(self, progs: dict[int, Any], note: Note) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for i, p in progs.items():
      note(i, self.name, "compile")
      arch = p.device_arch
      try: lib = self._compiler(arch).compile(p.src)
      except Exception as e:
        out[i] = failure_from(e, "compile", self.name)
        continue
      note(i, self.name, "codeobject")
      try: check_code_object(lib, p, arch)
      except Exception as e:
        out[i] = Failure("codeobject", type(e).__name__, "fuzz/campaign/backends.py:check_code_object", self.name,
                         f"{arch}: {e}")
        continue
      out[i] = lib
    return out
  def run(self, built: Any, prg: Any, item: KernelItem) -> dict[int, np.ndarray]:
    return run_python(prg, item, emulate={"EMULATE": f"AMD_{prg.device_arch.upper()}"})

class CodeObjectError(AssertionError):
  """An AMD code object that does not fit the program it was compiled from."""

def check_code_object(lib: bytes, prg: Any, arch: str) -> None:
  """The code object is v5 for `arch`, holds the kernel with the arch's wave size, explicit kernargs where the runtime
  packs them (buffer pointers, then int32 vars), and at least the program's DEFINE_LOCAL bytes of LDS."""
  from tinygrad.runtime.support.compiler_amd import read_code_object, kernarg_layout
  target, co = registry.amd_arch(arch), read_code_object(lib)
  def need(cond: bool, what: str) -> None:
    if not cond: raise CodeObjectError(f"kernel {prg.name}: {what}")
  need(co.version == (1, 2), f"code object version {co.version}, want (1, 2) (v5)")
  need(co.target.split("--")[-1].split(":")[0] == arch, f"target {co.target}, want {arch}")
  need(prg.name in co.kernels, f"not in the code object (it has {sorted(co.kernels)})")
  k = co.kernels[prg.name]
  need(k.wavefront_size == target.wave and k.kd.wave32 == (target.wave == 32), f"wave size {k.wavefront_size}")
  want = [(off, size, "global_buffer" if size == 8 else "by_value")
          for off, size in kernarg_layout(len(prg.globals), len(prg.vars))]
  need(k.explicit_args == want, f"kernargs {k.explicit_args}, the runtime packs {want}")
  local = sum(u.dtype.size * u.dtype.base.itemsize for u in prg.uops
              if u.op is Ops.DEFINE_LOCAL and isinstance(u.dtype, PtrDType))
  # NOTE: LLVM may delete a local buffer whose value it folded (LDS 0); what it keeps must be allocated whole
  need(k.lds == k.kd.group_segment_fixed_size and (k.lds == 0 or k.lds >= local),
       f"LDS {k.lds} bytes, the program needs {local}")

class NVGPUBackend(Backend):
  name = "nvgpu"
  def unavailable(self) -> str | None:
    from tinygrad.helpers import COMPILE_ONLY
    if COMPILE_ONLY.value: return "COMPILE_ONLY=1 is set (nothing runs on the GPU)"
    try:
      from tinygrad.device import Device
      Device["NV"]
    except Exception as e: return f"no NV GPU here: {e}"
    return None
  def describe(self) -> str:
    from tinygrad.device import Device
    return f"nvgpu: the NV GPU for real ({getattr(Device['NV'], 'arch', '?')})"
  def tensor_device(self) -> str | None: return "NV"
  # NOTE: one GPU is all this backend assumes; a sharded program runs unsharded on it
  def tensor_shard_devices(self) -> tuple[str, ...] | None: return None
  def renderer(self, item: KernelItem) -> Any:
    from tinygrad.device import Device
    return Device["NV"].renderer
  def build(self, progs: dict[int, Any], note: Note) -> dict[int, Any]:
    from tinygrad.device import Device
    dev = Device["NV"]
    out: dict[int, Any] = {}
    for i, p in progs.items():
      note(i, self.name, "compile")
      try: out[i] = dev.runtime(p.name, dev.compiler.compile_cached(p.src))
      except Exception as e: out[i] = failure_from(e, "compile", self.name)
    return out
  def run(self, built: Any, prg: Any, item: KernelItem) -> dict[int, np.ndarray]:
    from tinygrad.device import Buffer
    arrs = host_arrays(item)
    bufs = {}
    for n, a in arrs.items():
      pdt = next(u.dtype for u in item.ast.toposort() if u.op is Ops.DEFINE_GLOBAL and u.arg == n)
      bufs[n] = Buffer("NV", a.size, pdt.base).allocate()
      bufs[n].copyin(memoryview(a.view(np.uint8).data))
    gs, ls = prg.launch_dims(dict(item.var_vals))
    built(*[bufs[n]._buf for n in prg.globals], global_size=tuple(gs), local_size=tuple(ls or (1, 1, 1)),
          vals=tuple(int(item.var_vals[v]) for v in prg.var_names), wait=True)
    return {n: b.numpy() for n, b in bufs.items()}

# name -> the backend's class: registering a target is one line here
BACKENDS: dict[str, Callable[[], Backend]] = {
  "cpu": CBackend, "llvm": LLVMBackend, "python": PythonBackend, "nv": NVBackend, "amd": AMDBackend,
  "nvgpu": NVGPUBackend,
}
# what `--backends all` means: every target that exists without special hardware
DEFAULT_BACKENDS = ("cpu", "llvm", "python", "nv", "amd")

def open_backends(names: Sequence[str]) -> tuple[dict[str, Backend], dict[str, str]]:
  """(the backends that can run here, name -> why not for the others). An unknown name is a ValueError."""
  bad = [n for n in names if n not in BACKENDS]
  if bad: raise ValueError(f"unknown backend(s) {bad}; known: {', '.join(BACKENDS)}")
  ok, missing = {}, {}
  for n in names:
    b = BACKENDS[n]()
    if (why := b.unavailable()) is None: ok[n] = b
    else: missing[n] = why
  return ok, missing

__all__ = ["Failure", "KernelItem", "Backend", "BACKENDS", "DEFAULT_BACKENDS", "open_backends", "fit_opts", "named",
           "failure_from", "exception_site", "run_python", "check_code_object", "Note"]
