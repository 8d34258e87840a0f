"""The system C compiler (cc, clang or gcc) turning a rendered C kernel into a shared object (bytes)."""
from __future__ import annotations
import os, platform, shutil, subprocess, tempfile, functools
from tinygrad.device import Compiler, CompileError, DeviceOpenError, numbered
from tinygrad.helpers import CC

# NOTE: no -ffast-math: NaN/Inf semantics must hold (x != x, max with NaN, inf arithmetic). -fno-math-errno only lets
# sqrtf and friends inline; it does not change any result. -fwrapv: integer arithmetic in the IR wraps (exec_alu folds
# it so, the PYTHON backend and numpy compute it so); without it the C compiler may assume signed overflow never
# happens and fold (x+1) > x to true or (x*2)/2 to x.
# NOTE: -mprefer-vector-width=512 lets gcc use whole AVX-512 registers where the machine has them (a no-op elsewhere)
# NOTE: -fno-tree-loop-if-convert: gcc 12.2 (Debian 12's) at -O2 with AVX-512 (-march=native on an AVX-512 host,
# x86-64-v4) miscompiled a loop of gated loads into two accumulators: one summed a row its gate excluded (found by the
# fuzzer; tests/fuzz/test_regressions.py). The rendered C is right; -fno-tree-loop-vectorize or -mno-avx512f also fix
# it.
# Measured on the C path's steps (bench/models.py --quick --both, one run each, Intel Xeon): ResNet-18 b8 250.9 ->
# 240.7 ms, the D256 block 395.6 -> 345.6, the UNet 1322 -> 1144: no slower
CFLAGS = ("-O2", "-march=native", "-mprefer-vector-width=512", "-fPIC", "-shared", "-fno-math-errno", "-fwrapv",
          "-std=gnu11", "-Wno-unused-function", "-fno-tree-loop-if-convert")

def find_cc() -> str:
  """The C compiler to use: CC= if set, else the first of cc, clang, gcc on PATH."""
  if CC.value:
    if (path := shutil.which(CC.value)) is None: raise DeviceOpenError(f"CPU: CC={CC.value!r} was not found on PATH")
    return path
  for name in ("cc", "clang", "gcc"):
    if (path := shutil.which(name)) is not None: return path
  raise DeviceOpenError("CPU: no C compiler found (looked for cc, clang, gcc on PATH). Install one "
                        "(`apt-get install clang` or `apt-get install gcc`) or set CC= to its path")

# NOTE: gcc 12 with binutils 2.40 emits masked `vmovsh` (AVX512-FP16) for a _Float16 select, which the assembler
# rejects ("unsupported masking for `vmovsh'"): half kernels with nested where() fail to compile on machines with
# AVX512-FP16. Without the native half instructions gcc computes half through float (F16C), which both tools handle.
FALLBACK_FLAGS = ("-mno-avx512fp16",)

@functools.cache
def accepted_flags(cc: str, flags: tuple[str, ...]) -> tuple[str, ...]:
  """The flags of `flags` this compiler knows (an older one rejects -mno-avx512fp16, and needs none of it)."""
  def ok(flag: str) -> bool:
    try: return subprocess.run([cc, flag, "-fsyntax-only", "-x", "c", "-"], input=b"int x;", capture_output=True,
                               timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired): return False
  return tuple(f for f in flags if ok(f))

def cc_version(cc: str) -> str:
  try: out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
  except (OSError, subprocess.TimeoutExpired) as e:
    raise DeviceOpenError(f"CPU: C compiler {cc} does not run: {e}") from e
  return out.splitlines()[0] if out else "unknown"

class CCompiler(Compiler):
  """Compiles C source to a shared object. The cache key holds the compiler, its version, the machine and the flags."""
  def __init__(self, cc: str | None = None, flags: tuple[str, ...] = CFLAGS):
    self.cc = cc or find_cc()
    self.flags = tuple(flags) + accepted_flags(self.cc, FALLBACK_FLAGS)
    super().__init__(f"cc|{self.cc}|{cc_version(self.cc)}|{platform.machine()}|{' '.join(self.flags)}")
  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tinygrad-cc-") as d:
      out = os.path.join(d, "kernel.so")
      cmd = [self.cc, *self.flags, "-x", "c", "-", "-o", out, "-lm"]
      proc = subprocess.run(cmd, input=src.encode(), capture_output=True)
      if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip()
        raise CompileError(f"C compile failed ({' '.join(cmd)}, exit {proc.returncode}):\n{msg}\n"
                           f"---- source ----\n{numbered(src)}")
      with open(out, "rb") as f: return f.read()
  def disassemble(self, lib: bytes) -> str: return objdump(lib)

def objdump(lib: bytes) -> str:
  """The disassembly of a shared object (`objdump -d`), or a line saying objdump is missing."""
  if (tool := shutil.which("objdump")) is None: return "objdump not found"
  with tempfile.NamedTemporaryFile(suffix=".so") as f:
    f.write(lib); f.flush()
    return subprocess.run([tool, "-d", f.name], capture_output=True, text=True).stdout
