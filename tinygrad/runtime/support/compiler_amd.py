"""AMD code objects: LLVM IR -> an AMDGPU object (llvmlite's AMDGPU target) -> a loadable code object (HSACO, an ELF
shared object) linked by LLD; and a reader of code objects that checks their structure without a GPU.

The linker is LLD (`ld.lld -shared`), from the `ziglang` package on PyPI (`zig ld.lld`: LLD of the same LLVM major as
llvmlite's LLVM), or the ld.lld that AMD_LD names. Why LLD and why this one: docs/llvm_amd.md."""
from __future__ import annotations
import functools, os, shlex, shutil, subprocess, tempfile
from dataclasses import dataclass
from typing import Any
from tinygrad.device import Compiler, CompileError, DeviceOpenError
from tinygrad.helpers import AMD_LD
from tinygrad.renderer.llvmir import AMD_CODE_OBJECT_VERSION
from tinygrad.renderer.archs import amd_arch
from tinygrad.runtime.support.compiler_llvm import llvm, llvm_version, parse_and_verify, optimize, llvm_lock
from tinygrad.runtime.support.elf import ELF, ELFError, unpack_msgpack, NT_AMDGPU_METADATA, EM_AMDGPU, ET_DYN

LINKER_HINT = ("install the project's `llvm` extra (`pip install -e '.[llvm]'`, which brings LLD as `zig ld.lld` in "
               "the ziglang package), or set AMD_LD to an ld.lld of LLVM 15 or newer (code object v5)")

@functools.cache
def find_linker() -> tuple[str, ...]:
  """The command that runs LLD: AMD_LD (a path or a command line), else the ziglang package's `zig ld.lld`."""
  if AMD_LD.value:
    cmd = tuple(shlex.split(AMD_LD.value))
    if not cmd or shutil.which(cmd[0]) is None: raise DeviceOpenError(f"AMD: AMD_LD={AMD_LD.value!r} is not a program")
    return cmd
  try: import ziglang
  except ImportError as e: raise DeviceOpenError(f"AMD: no linker for code objects (ld.lld): {LINKER_HINT}") from e
  zig = os.path.join(os.path.dirname(ziglang.__file__), "zig")
  if not os.access(zig, os.X_OK):
    raise DeviceOpenError(f"AMD: the ziglang package has no runnable {zig}: {LINKER_HINT}")
  return (zig, "ld.lld")

@functools.cache
def linker_version(cmd: tuple[str, ...]) -> str:
  try: out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
  except (OSError, subprocess.TimeoutExpired) as e: raise DeviceOpenError(f"AMD: linker {cmd} does not run: {e}") from e
  return out.splitlines()[0] if out else "unknown"

def link(obj: bytes, what: str) -> bytes:
  """An AMDGPU relocatable object -> a code object (ld.lld -shared)."""
  cmd = find_linker()
  with tempfile.TemporaryDirectory(prefix="tinygrad-amd-") as d:
    src, out = os.path.join(d, "kernel.o"), os.path.join(d, "kernel.hsaco")
    with open(src, "wb") as f: f.write(obj)
    proc = subprocess.run([*cmd, "-shared", "--no-undefined", src, "-o", out], capture_output=True, text=True)
    if proc.returncode != 0:
      raise CompileError(f"{what}: linking the code object failed ({' '.join(cmd)}, exit {proc.returncode}):\n"
                         f"{proc.stderr.strip()}\nThe linker must be LLD 15 or newer for code object "
                         f"v{AMD_CODE_OBJECT_VERSION}; {LINKER_HINT}")
    with open(out, "rb") as f: return f.read()

class AMDCompiler(Compiler):
  """LLVM IR -> code object for one architecture. The cache key holds the arch, the LLVM version, the code object
  version, the linker and the optimisation level."""
  def __init__(self, arch: str, opt: int = 3):
    self.target, self.opt = amd_arch(arch), opt
    b = llvm()
    # NOTE: the wave size is the arch's own, spelled out: 64 on CDNA, 32 on RDNA (where LLVM could also do 64)
    self.features = f"+wavefrontsize{self.target.wave}"
    self.tm = b.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(
      cpu=self.target.name, features=self.features, opt=opt, reloc="pic", codemodel="default")
    self.linker = find_linker()
    super().__init__(f"amd|{self.target.name}|{llvm_version()}|{self.features}|co-v{AMD_CODE_OBJECT_VERSION}|"
                     f"{linker_version(self.linker)}|O{opt}")
  def object(self, src: str) -> bytes:
    """The relocatable object (before linking)."""
    mod = parse_and_verify(src, f"AMD {self.target.name}")
    with llvm_lock:
      optimize(mod, self.tm, self.opt)
      return bytes(self.tm.emit_object(mod))
  def compile(self, src: str) -> bytes:
    what = f"AMD {self.target.name}"
    lib = link(self.object(src), what)
    try: read_code_object(lib)
    except (ELFError, KeyError) as e: raise CompileError(f"{what}: the linked code object is malformed: {e}") from e
    return lib
  def assembly(self, src: str) -> str:
    mod = parse_and_verify(src, f"AMD {self.target.name}")
    with llvm_lock:
      optimize(mod, self.tm, self.opt)
      return str(self.tm.emit_assembly(mod))
  def disassemble(self, lib: bytes) -> str: return "\n".join(str(k) for k in read_code_object(lib).kernels.values())
  def describe(self, lib: bytes) -> str:
    """The DEBUG=2 report, read from the code object: the arch, then per kernel VGPRs, SGPRs, LDS, scratch, spills."""
    return f"{self.target.name} " + "; ".join(str(k) for k in read_code_object(lib).kernels.values())

# ---- reading a code object ----

WAVE32_BIT = 1 << 10  # kernel_code_properties: ENABLE_WAVEFRONT_SIZE32 (gfx10+)

@dataclass(frozen=True)
class KernelDescriptor:
  """The 64-byte kernel descriptor (`<name>.kd`) the dispatch packet points at."""
  group_segment_fixed_size: int
  private_segment_fixed_size: int
  kernarg_size: int
  kernel_code_entry_byte_offset: int
  compute_pgm_rsrc3: int
  compute_pgm_rsrc1: int
  compute_pgm_rsrc2: int
  kernel_code_properties: int
  @staticmethod
  def unpack(raw: bytes) -> KernelDescriptor:
    import struct
    if len(raw) != 64: raise ELFError(f"a kernel descriptor is 64 bytes, not {len(raw)}")
    g, p, k = struct.unpack_from("<III", raw, 0)
    entry = struct.unpack_from("<q", raw, 16)[0]
    r3, r1, r2 = struct.unpack_from("<III", raw, 44)
    props = struct.unpack_from("<H", raw, 56)[0]
    return KernelDescriptor(g, p, k, entry, r3, r1, r2, props)
  @property
  def wave32(self) -> bool: return bool(self.kernel_code_properties & WAVE32_BIT)

@dataclass(frozen=True)
class KernelInfo:
  """One kernel of a code object: its metadata (from the `amdhsa.kernels` note) and its descriptor."""
  name: str
  meta: dict[str, Any]
  kd: KernelDescriptor
  @property
  def args(self) -> list[tuple[int, int, str]]:
    """(offset, size, value kind) of each argument, hidden ones included."""
    return [(a[".offset"], a[".size"], a[".value_kind"]) for a in self.meta.get(".args", [])]
  @property
  def explicit_args(self) -> list[tuple[int, int, str]]: return [a for a in self.args if not a[2].startswith("hidden_")]
  @property
  def wavefront_size(self) -> int: return int(self.meta[".wavefront_size"])
  @property
  def vgprs(self) -> int: return int(self.meta[".vgpr_count"])
  @property
  def sgprs(self) -> int: return int(self.meta[".sgpr_count"])
  @property
  def lds(self) -> int: return int(self.meta[".group_segment_fixed_size"])
  @property
  def scratch(self) -> int: return int(self.meta[".private_segment_fixed_size"])
  @property
  def spills(self) -> tuple[int, int]:
    """(SGPRs, VGPRs) spilled to scratch."""
    return int(self.meta.get(".sgpr_spill_count", 0)), int(self.meta.get(".vgpr_spill_count", 0))
  def __str__(self) -> str:
    ss, vs = self.spills
    return (f"{self.name}: VGPRs {self.vgprs}, SGPRs {self.sgprs}, LDS {self.lds} bytes, scratch {self.scratch} bytes "
            f"(spills: {vs} VGPRs, {ss} SGPRs), wave{self.wavefront_size}, kernarg {self.kd.kernarg_size} bytes")

@dataclass(frozen=True)
class CodeObject:
  target: str                     # "amdgcn-amd-amdhsa--gfx1100"
  version: tuple[int, ...]        # amdhsa.version: (1, 2) is code object v5
  kernels: dict[str, KernelInfo]
  elf: ELF

# amdhsa.version of each code object version (the metadata note's version, major 1 since v3)
CODE_OBJECT_VERSIONS = {(1, 0): 3, (1, 1): 4, (1, 2): 5, (1, 3): 6}

def read_code_object(lib: bytes) -> CodeObject:
  """The structure of a code object, checked: an AMDGPU shared object whose metadata note lists kernels, each with a
  64-byte `<name>.kd` symbol in the dynamic symbol table whose entry offset lands on the kernel's code."""
  elf = ELF(lib)
  if elf.machine != EM_AMDGPU or elf.type != ET_DYN:
    raise ELFError(f"not an AMDGPU code object (machine {elf.machine}, type {elf.type}; want {EM_AMDGPU}, {ET_DYN})")
  metas = [unpack_msgpack(desc) for name, ntype, desc in elf.notes()
           if name == "AMDGPU" and ntype == NT_AMDGPU_METADATA]
  if len(metas) != 1: raise ELFError(f"{len(metas)} AMDGPU metadata notes (want 1)")
  meta = metas[0]
  kernels = {}
  for k in meta["amdhsa.kernels"]:
    sym = elf.symbol(k[".symbol"], dynamic=True)
    if sym.size != 64: raise ELFError(f"kernel descriptor {sym.name} is {sym.size} bytes, not 64")
    kd = KernelDescriptor.unpack(elf.read(sym.value, 64))
    code = elf.symbol(k[".name"])
    if sym.value + kd.kernel_code_entry_byte_offset != code.value:
      raise ELFError(f"{sym.name}: entry offset {kd.kernel_code_entry_byte_offset} does not reach {k['.name']} at "
                     f"{code.value:#x}")
    kernels[k[".name"]] = KernelInfo(k[".name"], k, kd)
  return CodeObject(meta.get("amdhsa.target", ""), tuple(meta.get("amdhsa.version", ())), kernels, elf)

# ---- the kernel arguments as the runtime packs them ----

def kernarg_layout(nbufs: int, nvals: int) -> list[tuple[int, int]]:
  """(offset, size) of each explicit argument: buffer pointers (8 bytes), then the int32 variables (4 bytes), each at
  its natural alignment, as the HIP runtime packs a kernel's argument buffer."""
  ret, off = [], 0
  for size in [8] * nbufs + [4] * nvals:
    off = (off + size - 1) // size * size
    ret.append((off, size))
    off += size
  return ret

def pack_kernargs(bufs: list[int], vals: list[int]) -> bytes:
  """The explicit argument bytes: pointers then int32s at the offsets of `kernarg_layout`."""
  import struct
  layout = kernarg_layout(len(bufs), len(vals))
  out = bytearray(layout[-1][0] + layout[-1][1] if layout else 0)
  for (off, size), v in zip(layout, [*bufs, *vals]): struct.pack_into("<Q" if size == 8 else "<i", out, off, v)
  return bytes(out)

__all__ = ["AMDCompiler", "find_linker", "linker_version", "link", "read_code_object", "CodeObject", "KernelInfo",
           "KernelDescriptor", "kernarg_layout", "pack_kernargs", "CODE_OBJECT_VERSIONS", "LINKER_HINT"]
