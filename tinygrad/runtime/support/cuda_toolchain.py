"""The NV toolchain: NVRTC (libnvrtc through ctypes) turns CUDA C into PTX, ptxas turns the PTX into a cubin (SASS for
one GPU architecture) and reports registers, spills and shared memory. Nothing here needs a GPU or a driver.

Lookup (`find_toolchain`), each of the three pieces on its own, first hit wins:
  1. the pip wheels importable by this Python (`nvidia-cuda-nvrtc`, `nvidia-cuda-runtime`, `nvidia-cuda-nvcc`):
     site-packages/nvidia/cu13/{lib,include,bin} (CUDA 13 layout) or nvidia/cuda_{nvrtc,runtime,nvcc} (CUDA 12 layout);
  2. a system CUDA: $CUDA_PATH, then /usr/local/cuda.
The pieces: libnvrtc (lib/ or lib64/), the headers cuda_fp16.h, cuda_bf16.h and cuda_fp8.h (include/), and ptxas
(bin/). ptxas must be at least as new as NVRTC: an older ptxas rejects the newer PTX ISA version NVRTC writes.

A compiled kernel is an `NVBinary` (packed to bytes for the compile cache): the arch, the PTX, the cubin, ptxas's
report, and the byte alignment each buffer parameter must have at launch (from the renderer's vector accesses).
"""
from __future__ import annotations
import ctypes, glob, json, os, re, struct, subprocess, sys, tempfile
from dataclasses import dataclass, field
from typing import Any, Sequence
from tinygrad.device import Compiler, CompileError, DeviceOpenError
from tinygrad.helpers import CUDA_PATH, file_stem
from tinygrad.renderer.archs import NV_DEFAULT_ARCH, NV_SUPPORTED_ARCHS, check_arch

# ---- architectures and versions ----

# the versions `pip install .[nv]` pins (pyproject.toml)
PINNED_CUDA = "13.5.37"
# NOTE: CUDA minor version compatibility: a cubin built by any CUDA 13.x toolkit loads on every driver of the 13.0
# release or newer (r580, 580.65.06 on Linux); cuDriverGetVersion() reports 13000 for it. CUDA 12.x needs r525.
MIN_DRIVER = {12: (12000, "525.60.13"), 13: (13000, "580.65.06")}
INSTALL_HINT = (f"pip install nvidia-cuda-nvrtc=={PINNED_CUDA} nvidia-cuda-runtime=={PINNED_CUDA} "
                f"nvidia-cuda-nvcc=={PINNED_CUDA} (or `pip install -e '.[nv]'`), or install a CUDA toolkit and set "
                "CUDA_PATH to it")

class ToolchainError(DeviceOpenError):
  """The NV toolchain (NVRTC, the CUDA headers, ptxas) is missing or unusable: the message says which piece and what
  to install."""

def arch_for_device(major: int, minor: int) -> str:
  """The newest supported arch whose cubin runs on a GPU of compute capability major.minor (SASS runs on the same
  major with an equal or higher minor), else a clear error."""
  fits = [a for a in NV_SUPPORTED_ARCHS if int(a[3:]) // 10 == major and int(a[3:]) % 10 <= minor]
  if not fits:
    raise DeviceOpenError(f"NV: the GPU is sm_{major}{minor}; this backend builds cubins for "
                          f"{', '.join(NV_SUPPORTED_ARCHS)} and none of them runs on it")
  return fits[-1]

def cubin_runs_on(arch: str, major: int, minor: int) -> bool:
  sm = int(check_arch(arch)[3:])
  return sm // 10 == major and sm % 10 <= minor

# ---- finding the pieces ----

def wheel_roots() -> list[str]:
  """Directories of the NVIDIA pip wheels importable by this Python (one per layout found on sys.path)."""
  ret: list[str] = []
  for entry in sys.path:
    base = os.path.join(entry or ".", "nvidia")
    if not os.path.isdir(base): continue
    for sub in ("cu13", "cu12", "cuda_nvrtc", "cuda_runtime", "cuda_nvcc"):
      if os.path.isdir(d := os.path.join(base, sub)) and d not in ret: ret.append(d)
  return ret

def system_roots() -> list[str]:
  """A system CUDA: $CUDA_PATH, then /usr/local/cuda."""
  return [r for r in (CUDA_PATH.value, "/usr/local/cuda") if r]

def _first(roots: Sequence[str], patterns: Sequence[str]) -> str | None:
  for r in roots:
    for p in patterns:
      hits = sorted(glob.glob(os.path.join(r, p)))
      if hits: return hits[-1]
  return None

NVRTC_PATTERNS = ("lib/libnvrtc.so.*[0-9]", "lib64/libnvrtc.so.*[0-9]", "lib/libnvrtc.so", "lib64/libnvrtc.so",
                  "targets/*/lib/libnvrtc.so.*[0-9]")
HEADERS = ("cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h")
PTXAS_PATTERNS = ("bin/ptxas",)

@dataclass(frozen=True)
class Toolchain:
  """Where each piece was found (absolute paths)."""
  nvrtc: str
  include: str
  ptxas: str

  def describe(self) -> str: return f"libnvrtc {self.nvrtc}; headers {self.include}; ptxas {self.ptxas}"

def _find_include(roots: Sequence[str]) -> str | None:
  for r in roots:
    for d in (os.path.join(r, "include"), *sorted(glob.glob(os.path.join(r, "targets", "*", "include")))):
      if all(os.path.isfile(os.path.join(d, h)) for h in HEADERS): return d
  return None

def find_toolchain(wheels: Sequence[str] | None = None, system: Sequence[str] | None = None) -> Toolchain:
  """Each piece from the wheels first, then the system CUDA (`wheels`/`system` replace the default search roots)."""
  w = wheel_roots() if wheels is None else list(wheels)
  s = system_roots() if system is None else list(system)
  roots = [*w, *s]
  nvrtc, include = _first(roots, NVRTC_PATTERNS), _find_include(roots)
  ptxas = next((p for p in (_first([r], PTXAS_PATTERNS) for r in roots) if p and os.access(p, os.X_OK)), None)
  missing = [what for what, got in (("libnvrtc (pip: nvidia-cuda-nvrtc)", nvrtc),
                                    ("the headers cuda_fp16.h, cuda_bf16.h, cuda_fp8.h (pip: nvidia-cuda-runtime)",
                                     include),
                                    ("ptxas (pip: nvidia-cuda-nvcc)", ptxas)) if got is None]
  if missing:
    looked = ", ".join(roots) if roots else "no candidate directories (no nvidia wheels on sys.path, no system CUDA)"
    raise ToolchainError(f"NV toolchain incomplete: missing {'; '.join(missing)}. Looked in: {looked}. "
                         f"To fix: {INSTALL_HINT}")
  assert nvrtc is not None and include is not None and ptxas is not None
  return Toolchain(os.path.abspath(nvrtc), os.path.abspath(include), os.path.abspath(ptxas))

# ---- NVRTC through ctypes ----

class NVRTC:
  """libnvrtc: CUDA C++ source -> PTX for a virtual architecture (compute_XX)."""
  def __init__(self, path: str):
    try: self.lib = ctypes.CDLL(path)
    except OSError as e: raise ToolchainError(f"NV: could not load libnvrtc {path}: {e}. To fix: {INSTALL_HINT}") from e
    self.path = path
    L, P, I, S = self.lib, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    for fn, args in (("nvrtcVersion", [ctypes.POINTER(I), ctypes.POINTER(I)]),
                     ("nvrtcCreateProgram", [ctypes.POINTER(P), ctypes.c_char_p, ctypes.c_char_p, I, P, P]),
                     ("nvrtcCompileProgram", [P, I, ctypes.POINTER(ctypes.c_char_p)]),
                     ("nvrtcGetProgramLogSize", [P, ctypes.POINTER(S)]), ("nvrtcGetProgramLog", [P, ctypes.c_char_p]),
                     ("nvrtcGetPTXSize", [P, ctypes.POINTER(S)]), ("nvrtcGetPTX", [P, ctypes.c_char_p]),
                     ("nvrtcDestroyProgram", [ctypes.POINTER(P)])):
      f = getattr(L, fn)
      f.argtypes, f.restype = args, I
    L.nvrtcGetErrorString.argtypes, L.nvrtcGetErrorString.restype = [I], ctypes.c_char_p
    major, minor = I(), I()
    self._check(L.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    self.version = (major.value, minor.value)

  def _check(self, rc: int, what: str) -> None:
    if rc != 0: raise CompileError(f"NVRTC {what} failed: {self.lib.nvrtcGetErrorString(rc).decode()} (code {rc})")

  def compile(self, src: str, opts: Sequence[str], fname: str = "kernel.cu") -> tuple[str, str]:
    """(ptx, log). A failed compile raises CompileError with the log and the source lines it names."""
    prog = ctypes.c_void_p()
    self._check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), fname.encode(), 0, None, None),
                "nvrtcCreateProgram")
    try:
      copts = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
      rc = self.lib.nvrtcCompileProgram(prog, len(opts), copts)
      sz = ctypes.c_size_t()
      self._check(self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(sz)), "nvrtcGetProgramLogSize")
      buf = ctypes.create_string_buffer(sz.value)
      self._check(self.lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
      log = buf.value.decode(errors="replace").strip()
      if rc != 0:
        raise CompileError(f"NVRTC {self.version[0]}.{self.version[1]} could not compile {fname} "
                           f"({self.lib.nvrtcGetErrorString(rc).decode()}):\n{log}\n{source_excerpt(src, log, fname)}")
      self._check(self.lib.nvrtcGetPTXSize(prog, ctypes.byref(sz)), "nvrtcGetPTXSize")
      buf = ctypes.create_string_buffer(sz.value)
      self._check(self.lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
      return buf.value.decode(), log
    finally: self.lib.nvrtcDestroyProgram(ctypes.byref(prog))

def source_excerpt(src: str, log: str, fname: str, context: int = 2) -> str:
  """The source lines a compiler log names (`fname(12): error ...` or `fname, line 12;`), each with `context` lines
  around it and line numbers; the whole numbered source when the log names none."""
  lines = src.splitlines()
  hits = re.findall(rf"{re.escape(fname)}(?:\((\d+)\)|, line (\d+))", log)
  named = sorted({int(a or b) for a, b in hits if 0 < int(a or b) <= len(lines)})
  if not named: return "---- source ----\n" + "\n".join(f"{i:4d} | {s}" for i, s in enumerate(lines, 1))
  show = sorted({j for n in named for j in range(max(1, n - context), min(len(lines), n + context) + 1)})
  out, prev = ["---- source lines named above ----"], 0
  for j in show:
    if prev and j != prev + 1: out.append("     ...")
    out.append(f"{'>' if j in named else ' '}{j:4d} | {lines[j - 1]}")
    prev = j
  return "\n".join(out)

# ---- ptxas ----

@dataclass(frozen=True)
class PtxasReport:
  """What `ptxas -v` says about one kernel."""
  registers: int = 0
  spill_stores: int = 0
  spill_loads: int = 0
  stack: int = 0
  smem: int = 0
  def describe(self) -> str:
    return (f"regs {self.registers}, spills {self.spill_stores}/{self.spill_loads} B (st/ld), stack {self.stack} B, "
            f"smem {self.smem} B")

def parse_ptxas_report(text: str) -> PtxasReport:
  def num(pat: str) -> int: return int(m.group(1)) if (m := re.search(pat, text)) else 0
  return PtxasReport(num(r"Used (\d+) registers"), num(r"(\d+) bytes spill stores"), num(r"(\d+) bytes spill loads"),
                     num(r"(\d+) bytes stack frame"), num(r"(\d+) bytes smem"))

def tool_version(path: str) -> str:
  """`release 13.5, V13.5.37` -> "13.5.37" (from `<tool> --version`)."""
  try: out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
  except (OSError, subprocess.TimeoutExpired) as e: raise ToolchainError(f"NV: {path} does not run: {e}") from e
  if (m := re.search(r"V(\d+\.\d+(?:\.\d+)?)", out)) is None: raise ToolchainError(f"NV: {path} --version says {out!r}")
  return m.group(1)

def assemble(ptxas: str, ptx: str, arch: str, name: str = "kernel") -> tuple[bytes, PtxasReport, str]:
  """(cubin, report, ptxas's text). An error raises CompileError with ptxas's message and the PTX lines it names."""
  with tempfile.TemporaryDirectory(prefix="tinygrad-nv-") as d:
    src, out = os.path.join(d, f"{file_stem(name)}.ptx"), os.path.join(d, f"{file_stem(name)}.cubin")
    with open(src, "w") as f: f.write(ptx)
    cmd = [ptxas, f"-arch={arch}", "-v", "-o", out, src]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    text = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
      raise CompileError(f"ptxas ({' '.join(cmd[:-3])}) rejected the PTX of {name}:\n{text}\n"
                         f"{source_excerpt(ptx, text.replace(src, f'{name}.ptx'), f'{name}.ptx')}")
    with open(out, "rb") as f: return f.read(), parse_ptxas_report(text), text

# ---- the compiled kernel ----

NVBIN_MAGIC = b"TGNVBIN1"

@dataclass(frozen=True)
class NVBinary:
  """A compiled kernel: `cubin` is what the driver loads; `params` are the kernel's parameter names in order (data0,
  ..., then the variables); `align` maps a buffer parameter to the byte alignment its pointer must have (the renderer
  proved the rest of each vector access aligned)."""
  arch: str
  ptx: str
  cubin: bytes
  report: PtxasReport = field(default_factory=PtxasReport)
  params: tuple[str, ...] = ()
  align: dict[str, int] = field(default_factory=dict)

  def pack(self) -> bytes:
    head = json.dumps({"arch": self.arch, "ptx": len(self.ptx.encode()), "cubin": len(self.cubin),
                       "report": self.report.__dict__, "params": list(self.params),
                       "align": self.align}).encode()
    return NVBIN_MAGIC + struct.pack("<I", len(head)) + head + self.ptx.encode() + self.cubin

  @staticmethod
  def unpack(lib: bytes) -> NVBinary:
    if not lib.startswith(NVBIN_MAGIC): raise ValueError("not an NV kernel binary (made by NVCompiler)")
    (n,) = struct.unpack_from("<I", lib, len(NVBIN_MAGIC))
    off = len(NVBIN_MAGIC) + 4
    head: dict[str, Any] = json.loads(lib[off:off + n])
    off += n
    ptx = lib[off:off + head["ptx"]].decode()
    cubin = lib[off + head["ptx"]:off + head["ptx"] + head["cubin"]]
    return NVBinary(head["arch"], ptx, cubin, PtxasReport(**head["report"]), tuple(head["params"]),
                    {k: int(v) for k, v in head["align"].items()})

# NOTE: the renderer states the alignment it relies on in one comment line, `// tinygrad-nv align: data0=16 data2=8`
ALIGN_RE = re.compile(r"^// tinygrad-nv align:((?: \w+=\d+)+)$", re.M)

def parse_align(src: str) -> dict[str, int]:
  m = ALIGN_RE.search(src)
  return {} if m is None else {k: int(v) for k, v in (kv.split("=") for kv in m.group(1).split())}

# ---- source-level helpers: one kernel's parts, several kernels in one translation unit ----

KERNEL_LINE = re.compile(r'^extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(([^)]*)\) \{$', re.M)

def split_kernel(src: str) -> tuple[list[str], str, str, list[tuple[str, str]]]:
  """(prefix lines, body from the kernel line on, name, [(param type, param name), ...]) of a rendered CUDA kernel."""
  m = KERNEL_LINE.search(src)
  if m is None: raise ValueError('not a rendered CUDA kernel: no `extern "C" __global__ void name(...) {` line')
  params = [p.strip().rsplit(" ", 1) for p in m.group(2).split(",") if p.strip()]
  prefix = [ln for ln in src[:m.start()].splitlines() if ln.strip() and not ln.startswith("// tinygrad-nv align:")]
  return prefix, src[m.start():], m.group(1), [(t.strip(), n) for t, n in params]

def rename_kernel(src: str, new: str) -> str:
  """The same kernel under another name (only the kernel line changes)."""
  m = KERNEL_LINE.search(src)
  if m is None: raise ValueError("not a rendered CUDA kernel")
  return src[:m.start(1)] + new + src[m.end(1):]

def merge_kernels(srcs: Sequence[str]) -> str:
  """One translation unit holding several rendered kernels (their names must differ): each prefix line once (the
  renderer writes every include, helper and struct on one line of its own), then every kernel body."""
  prefix: dict[str, None] = {}
  bodies, names = [], set()
  for src in srcs:
    pre, body, name, _ = split_kernel(src)
    if name in names: raise ValueError(f"merge_kernels: two kernels named {name}; rename one (rename_kernel)")
    names.add(name)
    prefix.update(dict.fromkeys(pre))
    bodies.append(body)
  return "\n".join([*prefix, *bodies]) + "\n"

def parse_kernel(src: str) -> tuple[str, tuple[str, ...]]:
  """(name, parameter names in order) of a rendered kernel; a CompileError when there is no kernel line."""
  try: _, _, name, params = split_kernel(src)
  except ValueError as e: raise CompileError(f"NV: {e}") from e
  return name, tuple(n for _, n in params)

# NOTE: fmad stays on (NVRTC's default, as every CUDA build): a*b+c may become one fused multiply-add. Division and
# sqrt are IEEE (-prec-div, -prec-sqrt default to true) and denormals are kept (-ftz=false): no --use_fast_math.
NVRTC_FLAGS = ("--std=c++17", "--fmad=true", "-ftz=false", "-prec-div=true", "-prec-sqrt=true")

class NVCompiler(Compiler):
  """CUDA C -> PTX (NVRTC) -> cubin (ptxas) for one arch. The cache key holds both tools' versions, where the headers
  are, the arch and the flags."""
  def __init__(self, arch: str = NV_DEFAULT_ARCH, toolchain: Toolchain | None = None):
    self.arch = check_arch(arch)
    self.toolchain = toolchain or find_toolchain()
    self.nvrtc = NVRTC(self.toolchain.nvrtc)
    self.ptxas_version = tool_version(self.toolchain.ptxas)
    pv = tuple(int(x) for x in self.ptxas_version.split(".")[:2])
    if pv < self.nvrtc.version:
      raise ToolchainError(f"NV: ptxas {self.ptxas_version} ({self.toolchain.ptxas}) is older than NVRTC "
                           f"{self.nvrtc.version[0]}.{self.nvrtc.version[1]} ({self.toolchain.nvrtc}): it cannot "
                           f"assemble the newer PTX. To fix: pip install nvidia-cuda-nvcc=={PINNED_CUDA}")
    self.flags = (f"--gpu-architecture=compute_{self.arch[3:]}", *NVRTC_FLAGS)
    super().__init__(f"nv|nvrtc {self.nvrtc.version}|ptxas {self.ptxas_version}|{self.toolchain.include}|{self.arch}|"
                     f"{' '.join(self.flags)}")

  @property
  def min_driver(self) -> tuple[int, str]:
    """(cuDriverGetVersion value, Linux driver version) the cubins of this toolchain need."""
    major = self.nvrtc.version[0]
    return MIN_DRIVER.get(major, (major * 1000, f"one for CUDA {major}"))

  def to_ptx(self, src: str, name: str = "kernel") -> str:
    return self.nvrtc.compile(src, [*self.flags, f"-I{self.toolchain.include}"], f"{name}.cu")[0]

  def compile(self, src: str) -> bytes:
    name, params = parse_kernel(src)
    ptx = self.to_ptx(src, name)
    cubin, report, _ = assemble(self.toolchain.ptxas, ptx, self.arch, name)
    return NVBinary(self.arch, ptx, cubin, report, params, parse_align(src)).pack()

  def verify(self, srcs: Sequence[str], batch: int = 64) -> list[str | None]:
    """Compile and assemble many kernels (distinct names), `batch` per NVRTC and ptxas call; per source None, or the
    error. A batch that fails is retried kernel by kernel, so each error names its own kernel."""
    out: list[str | None] = []
    for b0 in range(0, len(srcs), batch):
      chunk = list(srcs[b0:b0 + batch])
      try:
        assemble(self.toolchain.ptxas, self.to_ptx(merge_kernels(chunk), f"batch{b0}"), self.arch, f"batch{b0}")
        out += [None] * len(chunk)
        continue
      except CompileError: pass
      for src in chunk:
        try: self.compile(src); out.append(None)
        except CompileError as e: out.append(str(e))
    return out

  def describe(self, lib: bytes) -> str:
    b = NVBinary.unpack(lib)
    return f"{b.arch} {b.report.describe()}"
  def disassemble(self, lib: bytes) -> str: return NVBinary.unpack(lib).ptx
