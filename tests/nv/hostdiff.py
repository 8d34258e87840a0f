"""Differential check of the rendered CUDA text without a GPU: each kernel AST is rendered by the NV renderer and
compiled on the host as C++ with our shim (tinygrad/runtime/support/cuda_host.py), rendered by the C backend and
compiled with the system C compiler, both run on the same random inputs (specials included: NaN, +-inf, -0, subnormals,
values past the half/fp8 range), and every buffer compared exactly (NaN equals NaN; both sides are built with
-ffp-contract=off, so the only differences are in what the two texts mean). Kernels with shared memory or barriers are
left out (the shim runs one thread at a time)."""
from __future__ import annotations
import re, time
from dataclasses import dataclass, field
from typing import Any, Sequence
import numpy as np
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, PtrDType, dtypes, to_np_dtype, to_storage_np, from_storage_np
from tinygrad.codegen import get_program
from tinygrad.renderer import ProgramSpec
from tinygrad.renderer.cstyle import CRenderer
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.runtime.support.compiler_cpu import CCompiler, CFLAGS
from tinygrad.runtime.support.cuda_host import HostLibrary, build_host_library, host_refusal
from tinygrad.runtime.support.cuda_toolchain import rename_kernel

# ---- random inputs ----

_SPECIALS = (np.nan, np.inf, -np.inf, -0.0, 1e-40, -3e-39, 7e4, -1e6, 1e30, 0.5, -448.0, 480.0, 65520.0)

def random_values(dt: DType, n: int, rng: np.random.Generator, wide_ints: bool = False) -> np.ndarray:
  """The storage array of `n` random values of `dt`: ints never 0 (C and C++ both trap or diverge on x/0), small
  (-50..50) or, with `wide_ints`, over the whole range with 1 in 4 at or next to MIN/MAX (sums and products overflow);
  floats mostly in [-8, 8] with 1 in 16 a special value."""
  if dt is dtypes.bool: return rng.integers(0, 2, n).astype(np.bool_)
  if dtypes.is_int(dt) and wide_ints:
    lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
    v = rng.integers(lo, hi, n, endpoint=True, dtype=np.int64 if lo < 0 else np.uint64)
    edges = np.array([lo, lo + 1, hi, hi - 1, -1 if lo < 0 else 1], dtype=v.dtype)
    v = np.where(rng.random(n) < 1 / 4, edges[rng.integers(0, len(edges), n)], v)
    return np.where(v == 0, 1, v).astype(to_np_dtype(dt))
  if dtypes.is_int(dt):
    lo, hi = (1, 100) if dtypes.is_unsigned(dt) else (-50, 51)
    v = rng.integers(lo, hi, n)
    return np.where(v == 0, 1, v).astype(to_np_dtype(dt))
  v = rng.uniform(-8, 8, n) * np.where(rng.random(n) < 0.2, rng.uniform(0, 1e-3, n), 1.0)
  sp = rng.random(n) < 1 / 16
  v = np.where(sp, np.array(_SPECIALS)[rng.integers(0, len(_SPECIALS), n)], v)
  with np.errstate(over="ignore"): return to_storage_np(v.astype(np.float64) if dt is dtypes.float64 else v.astype(np.float32), dt)

# ---- building and running both sides ----

@dataclass
class Pair:
  ast: UOp
  nv: ProgramSpec
  c: ProgramSpec
  name: str = ""

@dataclass
class Report:
  checked: int = 0
  refused: dict[str, str] = field(default_factory=dict)  # kernel -> why the shim cannot run it
  mismatches: list[str] = field(default_factory=list)
  seconds: float = 0.0

_C_KERNEL = re.compile(r"^void (\w+)\(([^)]*)\) \{$", re.M)

def _c_parts(p: ProgramSpec, new: str) -> tuple[list[str], str, list[tuple[str, str]]]:
  """(prefix elements, renamed body, params without core_id) of a C-backend program."""
  pre = CRenderer().render_prefix(p.uops)
  m = _C_KERNEL.search(p.src)
  assert m is not None, p.src
  params = [q.strip().rsplit(" ", 1) for q in m.group(2).split(",") if q.strip()]
  body = p.src[m.start():m.start(1)] + new + p.src[m.end(1):]
  return pre, body, [(t.strip(), n) for t, n in params if n != "core_id"]

def _c_launcher(name: str, params: Sequence[tuple[str, str]]) -> str:
  args = "".join(f"*({t}*)p[{i}], " for i, (t, _) in enumerate(params))
  return (f"void tg_launch_{name}(void** p, const unsigned* g, const unsigned* l) {{\n"
          f"  for (unsigned c = 0; c < g[0]; c++) {name}({args}(int)c);\n}}\n")

def build_c_library(pairs: Sequence[Pair]) -> Any:
  prefix: dict[str, None] = {}
  bodies = []
  for pr in pairs:
    pre, body, params = _c_parts(pr.c, pr.name)
    prefix.update(dict.fromkeys(pre))
    bodies.append(body + "\n" + _c_launcher(pr.name, params))
  lib = CCompiler(flags=(*CFLAGS, "-ffp-contract=off", "-w")).compile("\n".join([*prefix, *bodies]))
  return HostLibrary(lib)

def make_pairs(asts: Sequence[UOp], nv_ren: CUDARenderer) -> tuple[list[Pair], dict[str, str]]:
  """The NV and C programs of each AST that the shim can run; the rest with the reason."""
  pairs, refused = [], {}
  c_ren = CRenderer()
  for i, ast in enumerate(asts):
    nv = get_program(ast, nv_ren)
    if (why := host_refusal(nv.src)) is not None:
      refused[f"{nv.name}#{i}"] = why
      continue
    pairs.append(Pair(ast, nv, get_program(ast, c_ren), f"k{i}_{nv.name}"))
  return pairs, refused

def _globals(p: ProgramSpec) -> dict[int, DType]:
  out = {}
  for u in p.uops:
    if u.op is Ops.DEFINE_GLOBAL:
      assert isinstance(u.dtype, PtrDType)
      out[u.arg] = u.dtype
  return out

def _compare(dt: DType, a: np.ndarray, b: np.ndarray) -> int | None:
  """Index of the first element where the two storage arrays differ in value (NaN equals NaN, -0 equals 0)."""
  va, vb = from_storage_np(a, dt), from_storage_np(b, dt)
  if dtypes.is_float(dt):
    fa, fb = va.astype(np.float64), vb.astype(np.float64)
    bad = ~((fa == fb) | (np.isnan(fa) & np.isnan(fb)))
  else: bad = va != vb
  return int(np.argmax(bad)) if bad.any() else None

def run_pair(pr: Pair, nv_lib: HostLibrary, c_lib: HostLibrary, seed: int, wide_ints: bool = False) -> str | None:
  """None when both sides agree, else a description of the first difference."""
  rng = np.random.default_rng(seed)
  gl = _globals(pr.nv)
  vv = {v.arg[0]: int(v.arg[2]) for v in pr.nv.vars}
  init = {i: random_values(pt.base, pt.size, rng, wide_ints) for i, pt in gl.items()}
  bufs_nv, bufs_c = {i: a.copy() for i, a in init.items()}, {i: a.copy() for i, a in init.items()}
  vals = [vv[n] for n in pr.nv.var_names]
  gs, ls = pr.nv.launch_dims(vv)
  nv_lib.run(pr.name, [bufs_nv[i].ctypes.data for i in pr.nv.globals], vals, gs, ls or [1, 1, 1])
  cgs, _ = pr.c.launch_dims(vv)
  c_lib.run(pr.name, [bufs_c[i].ctypes.data for i in pr.c.globals], vals, cgs, [1, 1, 1])
  for i, pt in gl.items():
    if (j := _compare(pt.base, bufs_nv[i], bufs_c[i])) is not None:
      a, b = from_storage_np(bufs_nv[i], pt.base)[j], from_storage_np(bufs_c[i], pt.base)[j]
      return (f"kernel {pr.nv.name} ({pr.name}): buffer data{i} ({pt.base}) element {j}: CUDA on the host gives {a!r}, "
              f"the C backend {b!r}\n---- CUDA ----\n{pr.nv.src}\n---- C ----\n{pr.c.src}")
  return None

def diff_asts(asts: Sequence[UOp], renderer: CUDARenderer | None = None, batch: int = 64, seed: int = 0,
              wide_ints: bool = False, trap_ub: bool = False) -> Report:
  """Render, build (in batches: one C++ and one C compile per batch) and compare every AST the shim can run.
  `wide_ints`: integer inputs over their whole range (random_values); `trap_ub`: the CUDA side is built so that a
  signed overflow in it traps (SIGILL, so call this in a subprocess)."""
  st = time.perf_counter()
  pairs, refused = make_pairs(asts, renderer or CUDARenderer("sm_90"))
  rep = Report(refused=refused)
  for b0 in range(0, len(pairs), batch):
    chunk = pairs[b0:b0 + batch]
    nv_lib = HostLibrary(build_host_library([rename_kernel(pr.nv.src, pr.name) for pr in chunk], trap_ub=trap_ub))
    c_lib = build_c_library(chunk)
    for k, pr in enumerate(chunk):
      if (msg := run_pair(pr, nv_lib, c_lib, seed + b0 + k, wide_ints)) is not None: rep.mismatches.append(msg)
      rep.checked += 1
  rep.seconds = time.perf_counter() - st
  return rep
