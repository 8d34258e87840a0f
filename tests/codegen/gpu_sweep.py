"""Every program that runs on the CPU compiles for every GPU target: random conv / conv_transpose / pool / matmul /
reduce / scan programs, forward and backward (the gradients of a random cotangent), scheduled once, and each kernel
compiled for each arch as `COMPILE_ONLY=1 realize()` compiles it: `get_program` with the arch's renderer and the
default heuristics, then the real toolchain (NVRTC + ptxas for sm_80/89/90, batched; llvmlite + LLD for
gfx942/1100/1201, each code object checked as tests/amd/checks.py does). A program fails on an arch if any of its
kernels does. Shapes are drawn where the GPU heuristics change their mind: channels, spatial sizes and batch sizes
from 1 to 64 and odd, strides, dilations, groups, padding, half and float32.

  python -m tests.codegen.gpu_sweep [--programs N] [--seed S] [--archs sm_80,...] [--jobs J]

Prints per arch the programs and kernels compiled and the failures (each with its program, reproducible from the
seed: `--programs 1 --seed S`); exits 1 on any failure. `make test-gpu-sweep` runs 2,000 programs per arch; the default
suite runs a slice (tests/codegen/test_gpu_sweep.py)."""
from __future__ import annotations
import argparse, math, multiprocessing, sys, time
from dataclasses import dataclass, field
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp

NV_ARCHS, AMD_ARCHS = ("sm_80", "sm_89", "sm_90"), ("gfx942", "gfx1100", "gfx1201")
ARCHS = NV_ARCHS + AMD_ARCHS
KINDS = ("conv", "conv", "conv_transpose", "pool", "matmul", "reduce", "scan")
EDGE = (1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64)

@dataclass
class Program:
  seed: int
  text: str                                 # the Tensor code, one line: what a failure prints
  kernels: list[UOp] = field(default_factory=list)

def _pick(rng: np.random.Generator, xs) -> int: return int(xs[rng.integers(len(xs))])

def _empty(shape: tuple[int, ...], dt) -> Tensor: return Tensor.empty(*shape, dtype=dt, requires_grad=True)

def _conv(rng: np.random.Generator, dt, transpose: bool) -> tuple[str, list[Tensor], Tensor]:
  n, cin, cout = _pick(rng, (1, 1, 2, 3, 4)), _pick(rng, (1, 2, 3, 4, 8, 16, 32, 64)), _pick(rng, (1, 2, 4, 8, 16, 32, 64))
  g = _pick(rng, [d for d in (1, 1, 1, 2, 4, 8, cin) if cin % d == 0 and cout % d == 0])
  kh, kw = _pick(rng, (1, 2, 3, 3, 5, 7)), _pick(rng, (1, 2, 3, 3, 5))
  st, dil, pad = _pick(rng, (1, 1, 2, 3)), _pick(rng, (1, 1, 2)), int(rng.integers(0, max(kh, kw) // 2 + 2))
  h, w = (_pick(rng, [s for s in EDGE if s >= (k - 1) * dil + 1] or [k * dil]) for k in (kh, kw))
  x = _empty((n, cin, h, w), dt)
  if transpose:
    wt = _empty((cin, cout // g, kh, kw), dt)
    pad = min(pad, (kh - 1) * dil, (kw - 1) * dil)
    out = x.conv_transpose2d(wt, groups=g, stride=st, dilation=dil, padding=pad)
    text = f"x{x.shape}.conv_transpose2d(w{wt.shape}, groups={g}, stride={st}, dilation={dil}, padding={pad})"
  else:
    wt = _empty((cout, cin // g, kh, kw), dt)
    if any(s + 2 * pad < (k - 1) * dil + 1 for s, k in ((h, kh), (w, kw))): pad = max(kh, kw) * dil
    out = x.conv2d(wt, groups=g, stride=st, dilation=dil, padding=pad)
    text = f"x{x.shape}.conv2d(w{wt.shape}, groups={g}, stride={st}, dilation={dil}, padding={pad})"
  return text, [x, wt], out

def _pool(rng: np.random.Generator, dt) -> tuple[str, list[Tensor], Tensor]:
  k = _pick(rng, (2, 2, 3, 4))
  st, f = _pick(rng, (1, 2, k)), ("max_pool2d", "avg_pool2d")[int(rng.integers(2))]
  shape = (_pick(rng, (1, 2, 4)), _pick(rng, (1, 3, 8, 16, 32)), _pick(rng, [s for s in EDGE if s >= k]),
           _pick(rng, [s for s in EDGE if s >= k]))
  x = _empty(shape, dt)
  return f"x{shape}.{f}({k}, {st})", [x], getattr(x, f)(k, st)

def _matmul(rng: np.random.Generator, dt) -> tuple[str, list[Tensor], Tensor]:
  sizes = EDGE + (100, 127, 128, 129, 255, 256, 257, 512)
  m, k, n = (_pick(rng, sizes) for _ in range(3))
  b = _pick(rng, (0, 0, 1, 2, 3, 8))
  a, w = _empty(((b,) if b else ()) + (m, k), dt), _empty((k, n), dt)
  if rng.integers(3) == 0:
    bias = _empty((n,), dt)
    return f"(a{a.shape} @ w{w.shape} + bias).relu()", [a, w, bias], (a @ w + bias).relu()
  return f"a{a.shape} @ w{w.shape}", [a, w], a @ w

def _shape(rng: np.random.Generator, max_numel: int) -> tuple[int, ...]:
  shape: list[int] = []
  for _ in range(int(rng.integers(1, 5))):
    s = _pick(rng, EDGE + (100, 128, 255, 256, 257, 1000, 1024, 4096))
    if math.prod(shape) * s <= max_numel: shape.append(s)
  return tuple(shape) or (1,)

def _reduce(rng: np.random.Generator, dt) -> tuple[str, list[Tensor], Tensor]:
  shape = _shape(rng, 1 << 22)
  x = _empty(shape, dt)
  ax = int(rng.integers(len(shape)))
  axes = tuple(sorted({ax, int(rng.integers(len(shape)))}))
  f = ("sum", "max", "mean", "var", "softmax", "log_softmax", "logsumexp")[int(rng.integers(7))]
  if f in ("softmax", "log_softmax"): return f"x{shape}.{f}({ax})", [x], getattr(x, f)(ax)
  return f"x{shape}.{f}({axes})", [x], getattr(x, f)(axes)

def _scan(rng: np.random.Generator, dt) -> tuple[str, list[Tensor], Tensor]:
  shape = _shape(rng, 1 << 16)
  x = _empty(shape, dt)
  ax, f = int(rng.integers(len(shape))), ("cumsum", "cummax", "cumsum")[int(rng.integers(3))]
  return f"x{shape}.{f}({ax})", [x], getattr(x, f)(ax)

def build_program(seed: int) -> Program:
  """Program `seed`: the forward op and the gradients of sum(out * c) with respect to its inputs, scheduled on CPU."""
  rng = np.random.default_rng(seed)
  kind = KINDS[int(rng.integers(len(KINDS)))]
  dt = dtypes.float16 if rng.integers(5) == 0 else dtypes.float32
  if kind in ("conv", "conv_transpose"): text, ins, out = _conv(rng, dt, kind == "conv_transpose")
  else: text, ins, out = {"pool": _pool, "matmul": _matmul, "reduce": _reduce, "scan": _scan}[kind](rng, dt)
  grads = (out * Tensor.empty(*out.shape, dtype=out.dtype)).sum().gradient(*ins)
  sched = out.schedule(*grads)
  return Program(seed, f"{text} [{dt}]", [si.ast for si in sched if si.ast.op is Ops.SINK])

# ---- compiling for one arch ----

def compile_nv(arch: str, asts: list[UOp]) -> dict[int, str]:
  """kernel index -> error, for the kernels that do not compile for `arch` (render, NVRTC or ptxas)."""
  from tinygrad.codegen import get_program
  from tinygrad.renderer.cuda import CUDARenderer
  from tinygrad.runtime.support.cuda_toolchain import NVCompiler, rename_kernel
  ren, bad, srcs = CUDARenderer(arch), {}, {}
  for i, a in enumerate(asts):
    try: srcs[i] = rename_kernel((p := get_program(a, ren)).src, f"k{i}_{p.name}")
    except Exception as e: bad[i] = f"codegen: {type(e).__name__}: {e}"
  idx = list(srcs)
  for i, err in zip(idx, NVCompiler(arch).verify([srcs[i] for i in idx])):
    if err is not None: bad[i] = f"compile: {err}"
  return bad

def compile_amd(arch: str, asts: list[UOp]) -> dict[int, str]:
  from tinygrad.codegen import get_program
  from tinygrad.renderer.llvmir import AMDLLVMRenderer
  from tinygrad.runtime.support.compiler_amd import AMDCompiler
  from tests.amd.checks import check_code_object
  ren, comp, bad = AMDLLVMRenderer(arch), AMDCompiler(arch), {}
  for i, a in enumerate(asts):
    try:
      p = get_program(a, ren)
      check_code_object(comp.compile(p.src), p, arch)
    except Exception as e: bad[i] = f"{type(e).__name__}: {e}"
  return bad

def compile_arch(arch: str, asts: list[UOp]) -> dict[int, str]:
  # NOTE: the on-disk compile cache off: every kernel goes through the toolchain in every sweep
  with Context(CACHELEVEL=0):
    return compile_nv(arch, asts) if arch in NV_ARCHS else compile_amd(arch, asts)

@dataclass
class ArchResult:
  arch: str
  programs: int
  kernels: int
  failed: dict[int, str]    # program seed -> the first failing kernel's error
  seconds: float

def sweep(programs: list[Program], archs: list[str], jobs: int = 1) -> list[ArchResult]:
  """Compile every distinct kernel of `programs` for each arch (one process per arch, `jobs` at a time)."""
  asts = list(dict.fromkeys(a for p in programs for a in p.kernels))
  global _ASTS
  _ASTS = asts
  if jobs > 1:
    with multiprocessing.get_context("fork").Pool(jobs) as pool: res = pool.map(_timed, archs)
  else: res = [_timed(a) for a in archs]
  pos = {a: i for i, a in enumerate(asts)}
  out = []
  for arch, (bad, dt) in zip(archs, res):
    failed = {}
    for p in programs:
      err = next((bad[pos[a]] for a in p.kernels if pos[a] in bad), None)
      if err is not None: failed[p.seed] = err
    out.append(ArchResult(arch, len(programs), len(asts), failed, dt))
  return out

_ASTS: list[UOp] = []
def _timed(arch: str) -> tuple[dict[int, str], float]:
  st = time.perf_counter()
  bad = compile_arch(arch, _ASTS)
  return bad, time.perf_counter() - st

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tests.codegen.gpu_sweep", description=__doc__.splitlines()[0])
  ap.add_argument("--programs", type=int, default=2000)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--archs", default=",".join(ARCHS))
  ap.add_argument("--jobs", "-j", type=int, default=1, help="archs compiled at once (one process each)")
  a = ap.parse_args(argv)
  st = time.perf_counter()
  progs, gen_fail = [], {}
  for s in range(a.seed, a.seed + a.programs):
    try: progs.append(build_program(s))
    except Exception as e: gen_fail[s] = f"{type(e).__name__}: {e}"
  nk = len({k for p in progs for k in p.kernels})
  print(f"{len(progs)} programs scheduled ({nk} distinct kernels) in {time.perf_counter() - st:.0f} s", flush=True)
  for s, e in gen_fail.items(): print(f"FAILED to schedule program {s}: {e[:500]}")
  bad = bool(gen_fail)
  for r in sweep(progs, a.archs.split(","), a.jobs):
    print(f"{r.arch}: {r.programs - len(r.failed)}/{r.programs} programs compiled ({r.kernels} kernels) in "
          f"{r.seconds:.0f} s, {len(r.failed)} failed", flush=True)
    for s, e in list(r.failed.items())[:20]:
      print(f"  FAILED {r.arch} program {s}: {next(p.text for p in progs if p.seed == s)}\n    {e[:600]}")
    bad |= bool(r.failed)
  return 1 if bad else 0

if __name__ == "__main__": sys.exit(main())
