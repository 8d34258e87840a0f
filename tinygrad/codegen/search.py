"""BEAM search: find the opts that make a kernel fastest by compiling and timing candidates on real buffers.

The beam starts from no opts and from the heuristics' opts. Each round extends every opt list in the beam by one
action, keeps the kernels that are legal and new, compiles and times them on the target device, and keeps the `amt`
fastest. It stops when a round finds nothing faster. Results are cached in sqlite keyed by the kernel (its pyrender
text), the renderer's identity, the codegen flags and the beam width.

Candidates are compiled with program.build_program and fire the `beam_candidate` checkpoint, never `compiled`.
"""
from __future__ import annotations
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
import numpy as np
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError, apply_opt, PACK_OPERAND
from tinygrad.codegen.heuristic import hand_coded_optimizations
from tinygrad.codegen.program import build_program
from tinygrad.device import Buffer, CompileOnlyAllocator, Device, DeviceOpenError
from tinygrad.dtype import dtypes, to_np_dtype, PtrDType
from tinygrad.helpers import DEBUG, CACHELEVEL, COMPILE_ONLY, diskcache_get, diskcache_put, codegen_flags
from tinygrad.renderer import Renderer, ProgramSpec
from tinygrad.uop import Ops, hooks
from tinygrad.uop.ops import UOp
from tinygrad.uop.pyrender import pyrender

MAX_ROUNDS = 10
TIMING_RUNS = 3
FINAL_ROUNDS = 5
# the actions BEAM tries on every beam member; the ones that do not fit are dropped by apply_opt
ACTIONS: list[Opt] = [
  *[Opt(OptOps.UPCAST, axis, amt) for amt in (0, 2, 3, 4, 5, 7, 8, 16) for axis in range(5)],
  *[Opt(OptOps.UNROLL, axis, amt) for amt in (0, 2, 3, 4, 8) for axis in range(3)],
  *[Opt(OptOps.LOCAL, axis, amt) for amt in (2, 3, 4, 8, 13, 16, 29) for axis in range(5)],
  *[Opt(OptOps.GROUPTOP, axis, amt) for amt in (13, 16, 28, 29, 32, 49, 64, 256) for axis in range(3)],
  *[Opt(OptOps.GROUP, axis, amt) for amt in (0, 4, 8, 16) for axis in range(3)],
  *[Opt(OptOps.THREAD, axis, amt) for amt in (2, 3, 4, 5, 8, 12, 16, 24, 32, 64) for axis in range(3)],
  *[Opt(OptOps.SWAP, axis, other) for axis in range(4) for other in range(axis + 1, 5)],
  *[Opt(OptOps.PADTO, axis, amt) for amt in (4, 16, 32) for axis in range(3)],
  *[Opt(OptOps.KBLOCK, axis, amt) for amt in (64, 128, 256, 512) for axis in range(2)],
  *[Opt(OptOps.PACK, axis, arg) for arg in (None, PACK_OPERAND) for axis in range(3)],
  Opt(OptOps.NOLOCALS), Opt(OptOps.CUT),
]

def kernel_key(ast: UOp) -> str:
  """A key of a kernel AST that is stable across processes: its pyrender text."""
  return pyrender(ast)

def apply_all(ast: UOp, opts: list[Opt], renderer: Renderer) -> UOp:
  """`opts` applied one by one, without the final grid assignment (the AST BEAM compares candidates by)."""
  applied: tuple[Opt, ...] = ()
  for o in opts:
    ast = apply_opt(ast, o, renderer, applied)
    applied += (o,)
  return ast

def candidates(ast: UOp, renderer: Renderer, beam: list[list[Opt]], seen: set[UOp]) -> list[list[Opt]]:
  """Every beam member extended by one action, where that is legal and gives a kernel not seen before."""
  ret = []
  # NOTE: the target's tensor cores are actions too (TC applies only as the first opt)
  actions = [*ACTIONS, *(Opt(OptOps.TC, 0, tc.name) for tc in renderer.tensor_cores)]
  for opts in beam:
    base = apply_all(ast, opts, renderer)
    for a in actions:
      try: k = apply_opt(base, a, renderer, tuple(opts))
      except KernelOptError: continue
      if k in seen: continue
      seen.add(k)
      ret.append(opts + [a])
  return ret

def _random_buffers(ast: UOp, device: str) -> dict[int, Any]:
  rng = np.random.default_rng(0)
  bufs = {}
  for g in sorted([u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL], key=lambda u: u.arg):
    dt, size = g.dtype.base, max(g.dtype.size if isinstance(g.dtype, PtrDType) else 1, 1)
    # NOTE: int buffers are zeros so that loaded indices stay in bounds; floats are random (no denormal slow paths)
    random = dtypes.is_float(dt) and dt.fmt is not None
    data: np.ndarray = rng.standard_normal(size).astype(to_np_dtype(dt)) if random else np.zeros(size, to_np_dtype(dt))
    bufs[g.arg] = Buffer(device, size, dt).copyin(data.view(np.uint8).data)
  return bufs

class BeamNeedsDeviceError(RuntimeError):
  """BEAM was asked for where no device can time the candidates (COMPILE_ONLY, or the device does not open)."""

def check_beam_device(device: str, amt: int) -> Any:
  """The opened device BEAM times candidates on; a clear error when there is none to time on."""
  if COMPILE_ONLY:
    raise BeamNeedsDeviceError(f"BEAM={amt} times candidate kernels on the device, and COMPILE_ONLY=1 runs nothing: "
                               "unset BEAM (the heuristics pick the opts) or unset COMPILE_ONLY on a machine with the "
                               f"device ({device})")
  fix = "Unset BEAM (the heuristics pick the opts; COMPILE_ONLY=1 compiles without a device) or run where the device is"
  try: dev = Device[device]
  except DeviceOpenError as e:
    raise BeamNeedsDeviceError(f"BEAM={amt} times candidate kernels on the device {device}, which does not open here: "
                               f"{e}. {fix}") from e
  if isinstance(dev.allocator, CompileOnlyAllocator):
    raise BeamNeedsDeviceError(f"BEAM={amt} times candidate kernels on the device {device}, which was opened under "
                               f"COMPILE_ONLY=1 (no driver, nothing runs on it). {fix}")
  return dev

class _Timer:
  """Compiles (several at once: the C compiler runs outside the GIL) and times candidates on the device."""
  def __init__(self, ast: UOp, renderer: Renderer, amt: int):
    self.ast, self.renderer, self.dev = ast, renderer, check_beam_device(renderer.device, amt)
    self.bufs = _random_buffers(ast, renderer.device)
    self.var_vals = {u.arg[0]: u.arg[2] for u in ast.toposort() if u.op is Ops.DEFINE_VAR}
  def compile(self, opts: list[Opt]) -> tuple[ProgramSpec, Any] | None:
    try:
      p = build_program(self.ast, self.ast, self.renderer, tuple(opts))
      if hooks.beam_candidate:
        for fn in hooks.beam_candidate: fn(self.ast, p, self.renderer)
      return p, self.dev.runtime(p.name, self.dev.compiler.compile_cached(p.src, p.renderer))
    except KernelOptError: return None
    except Exception as e:
      if DEBUG >= 2: print(f"BEAM: candidate {opts} failed to compile: {type(e).__name__}: {e}")
      return None
  def time(self, compiled: Any, best: float, runs: int = TIMING_RUNS) -> float:
    p, prg = compiled
    gs, ls = p.launch_dims(self.var_vals)
    args = [self.bufs[i]._buf for i in p.globals]
    vals = tuple(self.var_vals[v.arg[0]] for v in p.vars)
    tms = []
    for _ in range(runs):
      tms.append(prg(*args, global_size=gs, local_size=ls, vals=vals, wait=True))
      # a candidate far slower than the best is not worth more runs
      if tms[-1] > 3 * best: break
    return float(min(tms))
  def run(self, cands: list[list[Opt]], best: float) -> list[tuple[list[Opt], float]]:
    with ThreadPoolExecutor(max_workers=4) as pool: compiled = list(pool.map(self.compile, cands))
    ret = []
    for opts, c in zip(cands, compiled):
      if c is None: continue
      try: ret.append((opts, self.time(c, best)))
      except Exception as e:
        if DEBUG >= 2: print(f"BEAM: candidate {opts} failed to run: {type(e).__name__}: {e}")
    return ret

  def final_pick(self, cands: list[list[Opt]], rounds: int = FINAL_ROUNDS) -> tuple[list[Opt], float]:
    """The fastest of a few finalists, timed in alternation (round robin) so that a burst of load on a shared machine
    hits them all alike instead of deciding the winner."""
    compiled = [(o, c) for o in cands if (c := self.compile(o)) is not None]
    best: dict[int, float] = {}
    for _ in range(rounds):
      for i, (_, c) in enumerate(compiled): best[i] = min(best.get(i, float("inf")), self.time(c, float("inf"), runs=1))
    i = min(best, key=lambda k: best[k])
    return compiled[i][0], best[i]

def beam_search(ast: UOp, renderer: Renderer, amt: int, disable_cache: bool = False) -> list[Opt]:
  """The fastest opts found for `ast` (a prepared AST: program.prepare_kernel) on `renderer`'s device with a beam of
  width `amt`."""
  # NOTE: checked before the cache: a cached result would hide, in one run out of two, that BEAM cannot run here
  check_beam_device(renderer.device, amt)
  key = (kernel_key(ast), renderer.identity, codegen_flags(), amt)
  if not disable_cache and CACHELEVEL >= 1 and (hit := diskcache_get("beam_search", key)) is not None: return list(hit)
  st = time.perf_counter()
  timer = _Timer(ast, renderer, amt)
  # NOTE: the beam starts from no opts and from the heuristics' opts, so BEAM is never worse than the default, and
  # a fast start lets slow candidates be dropped after one run
  starts = [[], *([h] if (h := hand_coded_optimizations(ast, renderer)) else [])]
  base = sorted(timer.run(starts, float("inf")), key=lambda x: x[1])
  if not base: raise RuntimeError("BEAM: the kernel without opts does not compile or run; see the error with DEBUG=2")
  beam, seen = base[:max(amt, 1)], {apply_all(ast, o, renderer) for o in starts}
  for rnd in range(MAX_ROUNDS):
    cands = candidates(ast, renderer, [o for o, _ in beam], seen)
    timed = timer.run(cands, beam[0][1])
    new_beam = sorted(beam + timed, key=lambda x: x[1])[:amt]
    if DEBUG >= 2: print(f"BEAM round {rnd}: {len(cands)} tried, best {new_beam[0][1]*1e6:.1f} us {new_beam[0][0]}")
    if new_beam[0][1] >= beam[0][1]: break
    beam = new_beam
  finalists = [o for o, _ in beam] + [o for o in starts if o not in [b for b, _ in beam]]
  best, tm = timer.final_pick(finalists) if len(finalists) > 1 else beam[0]
  if DEBUG >= 1: print(f"BEAM: {best} at {tm*1e6:.1f} us, search took {time.perf_counter() - st:.1f} s")
  if not disable_cache and CACHELEVEL >= 1: diskcache_put("beam_search", key, best)
  return best
