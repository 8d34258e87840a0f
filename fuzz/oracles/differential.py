"""Differential execution: run one kernel AST on several devices and compare what it wrote.

`run_ast_on(device, ast, inputs)` compiles the AST with the device's renderer (docs/ir.md section 4), fills its buffers
and launches it; `compare_outputs(a, b, dtype)` compares two results with a tolerance that follows the dtype and with
NaN/Inf matched exactly; `differential(ast, inputs)` does both for CPU and PYTHON (or any devices) and raises
`DifferentialMismatch` naming the devices, the buffer and the first differing element. `run_lowered_on_python` runs
another target's lowering (NV, AMD, CPU) on the PYTHON interpreter.
"""
from __future__ import annotations
from typing import Any, Mapping, Sequence
import numpy as np
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, PtrDType, dtypes, to_np_dtype, bf16_to_float_np, fp8_to_float_np

class DifferentialMismatch(AssertionError):
  """Two devices ran the same kernel AST and wrote different values."""

# (rtol, atol) per dtype: one or two units in the last place of the format, enough for a different summation order
TOLERANCE: dict[DType, tuple[float, float]] = {
  dtypes.float64: (1e-9, 1e-12), dtypes.float32: (1e-4, 1e-5), dtypes.float16: (4e-3, 1e-3),
  dtypes.bfloat16: (2e-2, 1e-2), dtypes.fp8e4m3: (0.13, 0.02), dtypes.fp8e5m2: (0.26, 0.04),
}

# the most elements a kernel's buffers may hold in all: its inputs are allocated and filled from their sizes, and a
# reproducer or a seed file names any size it likes (the generator's kernels hold a few thousand, a model's millions)
MAX_KERNEL_ELEMENTS = 1 << 25

def kernel_buffers(ast: UOp) -> dict[int, PtrDType]:
  """Buffer number -> pointer dtype of every DEFINE_GLOBAL of a kernel AST; ValueError for a buffer with no size and
  for buffers over MAX_KERNEL_ELEMENTS in all (nothing is allocated for them)."""
  found = {u.arg: u.dtype for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL}
  ret = {n: dt for n, dt in found.items() if isinstance(dt, PtrDType) and dt.size >= 0}
  if bad := sorted(set(found) - set(ret)):
    raise ValueError(f"kernel buffers {bad} have no size in their pointer dtype; cannot allocate them")
  if (total := sum(dt.size for dt in ret.values())) > MAX_KERNEL_ELEMENTS:
    raise ValueError(f"kernel buffers hold {total} elements in all, over {MAX_KERNEL_ELEMENTS}: not allocated")
  return ret

def random_inputs(ast: UOp, seed: int = 0) -> dict[int, np.ndarray]:
  """Data for every buffer of the kernel, as storage arrays (fp8/bfloat16 as bits): floats ~ N(0, 2), small ints."""
  rs = np.random.default_rng(seed)
  ret: dict[int, np.ndarray] = {}
  for n, pdt in sorted(kernel_buffers(ast).items()):
    dt, size = pdt.base.scalar(), pdt.size
    if dt is dtypes.bool: ret[n] = rs.integers(0, 2, size).astype(np.bool_)
    elif dtypes.is_int(dt): ret[n] = rs.integers(0 if dtypes.is_unsigned(dt) else -20, 20, size).astype(to_np_dtype(dt))
    else: ret[n] = storage_of(rs.normal(0, 2, size), dt)
  return ret

def edge_values(dt: DType) -> list[float | int]:
  """The values of dt where bugs hide: its extremes, 0, +-1, and for floats -0.0, NaN, +-inf and the smallest
  subnormal and normal magnitudes."""
  if dt is dtypes.bool: return [0, 1]
  if dtypes.is_int(dt):
    lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
    return sorted({lo, lo + 1, hi, hi - 1, 0, 1, 2, (hi + 1) // 2, *([-1, -2] if lo < 0 else [])})
  from fuzz.oracles.budget import FLOAT_FORMAT
  mant, emin, maxf = FLOAT_FORMAT[dt.scalar()]
  return [0.0, -0.0, 1.0, -1.0, 0.5, float("nan"), float("inf"), float("-inf"), maxf, -maxf, 2.0 ** (emin - mant),
          -(2.0 ** emin), 2.0 ** emin, 3.0, -7.5]

def kernel_inputs(ast: UOp, seed: int = 0, p_edge: float = 0.15) -> dict[int, np.ndarray]:
  """Data for every buffer of a kernel, as storage arrays, each buffer drawn from (seed, its number) so that a buffer
  keeps its data when others are added or removed (a reducer relies on it): floats ~ N(0, 2) and small ints, with a
  share `p_edge` of edge values (NaN, +-inf, -0.0, subnormals, the extremes)."""
  ret: dict[int, np.ndarray] = {}
  for n, pdt in sorted(kernel_buffers(ast).items()):
    dt, size = pdt.base.scalar(), pdt.size
    rs = np.random.default_rng([seed & 0xFFFFFFFF, n])
    ev = edge_values(dt)
    pick = rs.random(size) < p_edge
    if dt is dtypes.bool: v: np.ndarray = rs.integers(0, 2, size).astype(np.bool_)
    elif dtypes.is_int(dt):
      # NOTE: in the buffer's own dtype (every edge value and every small int fits it), not as Python ints: the same
      # draws, the same values
      npdt = to_np_dtype(dt)
      lo, hi = (0, 40) if dtypes.is_unsigned(dt) else (-20, 21)
      v = rs.integers(lo, hi, size).astype(npdt)
      v = np.where(pick, np.array(ev, dtype=npdt)[rs.integers(0, len(ev), size)], v)
    else:
      f = np.where(rs.random(size) < 0.3, rs.integers(-8, 9, size).astype(np.float64), rs.normal(0, 2, size))
      f = np.where(pick, np.array(ev, dtype=np.float64)[rs.integers(0, len(ev), size)], f)
      with np.errstate(over="ignore"): v = storage_of(f, dt)
    ret[n] = v
  return ret

def storage_of(x: np.ndarray, dt: DType) -> np.ndarray:
  """Values -> the array a buffer of `dt` holds (fp8/bfloat16 rounded to the format and given as bits)."""
  from tinygrad.dtype import to_storage_np
  return to_storage_np(x, dt)

def run_ast_on(device: str, ast: UOp, inputs: Mapping[int, np.ndarray] | Sequence[np.ndarray | None],
               var_vals: Mapping[str, int] | None = None, opts: Any = None) -> dict[int, np.ndarray]:
  """Compile `ast` for `device`, load `inputs` (buffer number -> storage array; missing buffers start zeroed), run it
  once and return every buffer's contents after the run, by number (fp8/bfloat16 as bits, as `Buffer.numpy()` does)."""
  from tinygrad.device import Device, Buffer
  from tinygrad.codegen import get_program
  given = dict(enumerate(inputs)) if isinstance(inputs, Sequence) else dict(inputs)
  dev = Device[device]
  prg = get_program(ast, dev.renderer, opts)
  fxn = dev.runtime(prg.name, dev.compiler.compile_cached(prg.src, prg.renderer))
  bufs: dict[int, Buffer] = {}
  for n, pdt in sorted(kernel_buffers(ast).items()):
    b = bufs[n] = Buffer(device, pdt.size, pdt.base.scalar()).allocate()
    data, npdt = given.get(n), to_np_dtype(pdt.base.scalar())
    host: np.ndarray = np.zeros(pdt.size, npdt) if data is None else np.ascontiguousarray(data, npdt)
    if host.size != pdt.size:
      raise ValueError(f"run_ast_on({device}): input for buffer {n} has {host.size} elements, the kernel's {pdt.size}")
    b.copyin(memoryview(host.view(np.uint8).data))
  vv = dict(var_vals or {})
  gs, ls = prg.launch_dims(vv)
  vals = tuple(int(vv[name]) for name in prg.var_names)
  lsz = tuple(ls) if ls is not None else (1, 1, 1)
  fxn(*[bufs[n]._buf for n in prg.globals], global_size=tuple(gs), local_size=lsz, vals=vals)
  return {n: b.numpy() for n, b in bufs.items()}

def run_lowered_on_python(ast: UOp, renderer: Any, inputs: Mapping[int, np.ndarray] | Sequence[np.ndarray | None],
                          var_vals: Mapping[str, int] | None = None, opts: Any = None) -> dict[int, np.ndarray]:
  """Lower `ast` with another target's renderer (NV, AMD, the CPU's C renderer: its opts, grid and devectorization)
  and interpret that linear program on the PYTHON backend, which checks every access. Returns the buffers by number.
  This separates a lowering bug (wrong here too) from a rendering or runtime bug (right here, wrong on the device)."""
  from tinygrad.codegen import get_program
  from tinygrad.runtime.ops_python import PythonProgram, render_program
  given = dict(enumerate(inputs)) if isinstance(inputs, Sequence) else dict(inputs)
  prg = get_program(ast, renderer, opts)
  fxn = PythonProgram(prg.name, render_program(prg.uops).encode())
  host: dict[int, np.ndarray] = {}
  for n, pdt in sorted(kernel_buffers(ast).items()):
    npdt, data = to_np_dtype(pdt.base.scalar()), given.get(n)
    host[n] = np.zeros(pdt.size, npdt) if data is None else np.array(data, npdt).ravel()
  vv = dict(var_vals or {})
  gs, ls = prg.launch_dims(vv)
  lsz = tuple(ls) if ls is not None else (1, 1, 1)
  vals = tuple(int(vv[k]) for k in prg.var_names)
  fxn(*[host[n] for n in prg.globals], global_size=tuple(gs), local_size=lsz, vals=vals)
  return host

def _as_values(x: np.ndarray, dtype: DType) -> np.ndarray:
  dt = dtype.scalar()
  if dt is dtypes.bfloat16 and x.dtype == np.uint16: return bf16_to_float_np(x)
  if dt in dtypes.fp8s and x.dtype == np.uint8: return fp8_to_float_np(x, dt)
  return np.asarray(x)

def compare_outputs(a: np.ndarray, b: np.ndarray, dtype: DType, rtol: float | None = None,
                    atol: float | None = None) -> str | None:
  """None when `a` and `b` (values, or bits for fp8/bfloat16) agree for `dtype`, else what differs. Integers and bools
  must be equal; floats within (rtol, atol) of TOLERANCE, with NaN where the other has NaN and Inf of the same sign."""
  x, y = _as_values(np.asarray(a), dtype).ravel(), _as_values(np.asarray(b), dtype).ravel()
  if x.shape != y.shape: return f"shapes differ: {x.shape} vs {y.shape}"
  if not dtypes.is_float(dtype):
    bad = np.flatnonzero(x != y)
    return None if bad.size == 0 else _describe(bad, x, y, "differ")
  x, y = x.astype(np.float64), y.astype(np.float64)
  nan_x, nan_y = np.isnan(x), np.isnan(y)
  if (bad := np.flatnonzero(nan_x != nan_y)).size: return _describe(bad, x, y, "NaN on one side only")
  inf_x, inf_y = np.isinf(x), np.isinf(y)
  if (bad := np.flatnonzero((inf_x | inf_y) & (x != y) & ~nan_x)).size: return _describe(bad, x, y, "Inf differs")
  rt, at = TOLERANCE.get(dtype.scalar(), (1e-4, 1e-5))
  rt, at = rtol if rtol is not None else rt, atol if atol is not None else at
  fin = ~(nan_x | inf_x | inf_y)
  with np.errstate(invalid="ignore"): far = fin & (np.abs(x - y) > at + rt * np.abs(y))
  return None if not far.any() else _describe(np.flatnonzero(far), x, y, f"differ beyond rtol={rt} atol={at}")

def _describe(bad: np.ndarray, x: np.ndarray, y: np.ndarray, what: str) -> str:
  i = int(bad[0])
  return f"{bad.size} of {x.size} elements {what}; first at [{i}]: {x[i]!r} vs {y[i]!r}"

def differential(ast: UOp, inputs: Mapping[int, np.ndarray] | Sequence[np.ndarray | None] | None = None,
                 devices: Sequence[str] = ("CPU", "PYTHON"), var_vals: Mapping[str, int] | None = None,
                 opts: Any = None, seed: int = 0) -> dict[str, dict[int, np.ndarray]]:
  """Run `ast` on every device (inputs default to `random_inputs(ast, seed)`) and compare each buffer the kernel writes
  with the first device's. `opts` is one opts list for all devices, or a dict device -> opts (missing devices: None, the
  device's heuristics). Returns the outputs per device; raises DifferentialMismatch on the first disagreement."""
  if inputs is None: inputs = random_inputs(ast, seed)
  per_dev = opts if isinstance(opts, Mapping) else {d: opts for d in devices}
  results = {d: run_ast_on(d, ast, inputs, var_vals, per_dev.get(d)) for d in devices}
  written = sorted({u.src[0].src[0].arg for u in ast.toposort() if u.op is Ops.STORE and u.src[0].op is Ops.INDEX
                    and u.src[0].src[0].op is Ops.DEFINE_GLOBAL})
  bufs = kernel_buffers(ast)
  ref = devices[0]
  for d in devices[1:]:
    for n in written:
      if (msg := compare_outputs(results[d][n], results[ref][n], bufs[n].base)) is not None:
        raise DifferentialMismatch(f"{d} vs {ref}, buffer {n} ({bufs[n].base}): {msg}")
  return results
