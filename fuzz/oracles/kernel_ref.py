"""The reference executor of kernel ASTs (docs/ir.md section 2): an oracle for the scheduler's output and for codegen.

It computes with the one semantics table (tinygrad/uop/semantics.py), so its values are those constant folding and the
PYTHON backend compute, and it is vectorized with numpy: every RANGE of the kernel is one axis, a node evaluates to an
array broadcast over the axes of the ranges it depends on. It ignores AxisTypes on purpose: opts change how ranges are
lowered, never what a kernel computes. The one exception is a KBLOCK range (OptOps.KBLOCK): its iterations run one
after another, each reading what the ones before stored (a reduce blocked into partial sums in the output buffer).

  - LOAD(INDEX(buf, idx)): a masked index (`cond.where(idx, Invalid)`, or an INDEX gate) reads 0 where invalid; a valid
    index outside the buffer raises KernelRefError naming the buffer, the index and the range values
  - STORE writes where the index is valid; stores run in graph order, a later one wins
  - REDUCE(value, *ranges) folds from the identity (ADD 0, MUL 1, MAX the dtype's minimum) in row-major order of its
    ranges, as the lowered loop does: `acc = op(acc, value)`, every step through the table (floats round as C does in
    that order; integers wrap)
  - a local BUFFERIZE(value, *ranges) holds the value over its ranges, row-major; INDEX(BUFFERIZE, i) reads offset i
  - DEFINE_VAR takes its value from var_vals (by name); index math is int64 (the widest lowering)

Buffers are numpy arrays by DEFINE_GLOBAL number. An array whose numpy dtype is the buffer's storage dtype
(`to_np_dtype`: fp8 as uint8 bits, bfloat16 as uint16 bits) is read and written as storage; any other numeric array is
read and written as values (a float64 array for a float32 buffer keeps what the kernel stores, converted).
"""
from __future__ import annotations
import itertools, math
from typing import Any, Mapping, Sequence
import numpy as np
from tinygrad.uop import Ops, GroupOp, AxisType, semantics
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, PtrDType, dtypes, to_np_dtype, to_storage_np, from_storage_np, InvalidType

class KernelRefError(Exception):
  """The kernel did something the IR does not define (an access outside its buffer), or has a node this oracle does
  not know."""

REDUCE_IDENTITY = {Ops.ADD: lambda dt: 0, Ops.MUL: lambda dt: 1, Ops.MAX: lambda dt: dtypes.min(dt)}

class KernelRef:
  """One run of one kernel AST."""
  def __init__(self, ast: UOp, bufs: Mapping[int, np.ndarray], var_vals: Mapping[str, int] | None = None):
    self.ast, self.bufs, self.var_vals = ast, bufs, dict(var_vals or {})
    self.vals: dict[UOp, np.ndarray] = {}
    self.ranges = sorted((u for u in ast.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg)
    self.axis = {r: i for i, r in enumerate(self.ranges)}
    self.nd = len(self.ranges)
    self.size = {r: self._extent(r) for r in self.ranges}

  # ---- helpers ----
  def _extent(self, r: UOp) -> int:
    end = r.src[0]
    if end._ranges: raise KernelRefError(f"RANGE {r.arg}: its end depends on other ranges {end.ranges}")
    return int(np.asarray(self._scalar_eval(end)).reshape(-1)[0])

  def _scalar_eval(self, u: UOp) -> np.ndarray:
    """A node that depends on no range (a range's end): evaluated on its own."""
    for x in u.toposort():
      if x not in self.vals: self.vals[x] = self.eval(x)
    return self.vals[u]

  def _ones(self) -> list[int]: return [1] * self.nd

  def _full(self, v: np.ndarray, ranges: Sequence[UOp]) -> np.ndarray:
    """v broadcast to its ranges' full sizes on their axes."""
    shape = list(v.shape)
    for r in ranges: shape[self.axis[r]] = self.size[r]
    return np.broadcast_to(v, shape)

  # ---- evaluation ----
  def run(self) -> None:
    for u in self.ast.toposort():
      if u not in self.vals: self.vals[u] = self.eval(u)

  def eval(self, u: UOp) -> Any:
    op, dt, src = u.op, u.dtype, u.src
    if dt.count > 1: raise KernelRefError(f"{op} of vector dtype {dt}: kernel ASTs are scalar")
    if op in (Ops.SINK, Ops.GROUP, Ops.END, Ops.DEFINE_GLOBAL, Ops.BUFFERIZE): return None
    if op is Ops.CONST:
      if isinstance(u.arg, InvalidType): return None
      return np.full(self._ones(), u.arg, dtype=semantics.holder(dt))
    if op is Ops.DEFINE_VAR:
      if u.arg[0] not in self.var_vals: raise KernelRefError(f"DEFINE_VAR {u.arg[0]!r} has no value in var_vals")
      return np.full(self._ones(), self.var_vals[u.arg[0]], dtype=semantics.holder(dt))
    if op is Ops.BIND: return self.vals[src[0]]
    if op is Ops.RANGE:
      shape = self._ones()
      shape[self.axis[u]] = self.size[u]
      return np.arange(self.size[u], dtype=semantics.holder(dt)).reshape(shape)
    if op is Ops.INDEX: return None
    if op is Ops.LOAD: return self.load(src[0], dt)
    if op is Ops.STORE:
      self.store(src[0], self.vals[src[1]])
      return None
    if op is Ops.REDUCE: return self.reduce(u)
    if op is Ops.CAST: return semantics.exec_cast(self.vals[src[0]], src[0].dtype, dt)
    if op is Ops.BITCAST: return semantics.exec_bitcast(self.vals[src[0]], src[0].dtype, dt)
    # NOTE: a masked index is read only by the INDEX it feeds
    if op is Ops.WHERE and src[2].op is Ops.CONST and isinstance(src[2].arg, InvalidType): return None
    if op in GroupOp.ALU:
      if any(self.vals.get(s) is None for s in src):
        raise KernelRefError(f"{op}: a source is Invalid or not a value (Invalid belongs only under an INDEX)")
      return semantics.exec_alu(op, src[-1].dtype, *[self.vals[s] for s in src])
    raise KernelRefError(f"kernel_ref: {op} is not part of a kernel AST (docs/ir.md section 2)")

  def index(self, idx: UOp) -> tuple[UOp, np.ndarray, np.ndarray]:
    """(buffer node, flat offsets, valid mask) of an INDEX, all broadcast to one shape."""
    if idx.op is not Ops.INDEX: raise KernelRefError(f"LOAD/STORE through {idx.op}, not an INDEX")
    buf, i = idx.src[0], idx.src[1]
    valid = np.ones(self._ones(), dtype=bool)
    if len(idx.src) > 2: valid = valid & self.ev(idx.src[2])
    while i.op is Ops.WHERE and i.src[2].op is Ops.CONST and isinstance(i.src[2].arg, InvalidType):
      valid, i = valid & self.ev(i.src[0]), i.src[1]
    if i.op is Ops.CONST and isinstance(i.arg, InvalidType): return buf, np.zeros(self._ones(), np.int64), ~valid
    off, valid = np.broadcast_arrays(self.ev(i).astype(np.int64), valid)
    return buf, off, valid

  def ev(self, u: UOp) -> np.ndarray:
    if (v := self.vals.get(u)) is None:
      raise KernelRefError(f"{u.op} ({u.dtype}) is not a value here (Invalid outside a mask, or a side effect)")
    return v

  def _check(self, what: str, buf: UOp, off: np.ndarray, valid: np.ndarray, size: int) -> None:
    bad = valid & ((off < 0) | (off >= size))
    if not bad.any(): return
    pos = tuple(int(x[0]) for x in np.nonzero(bad))
    at = ", ".join(f"r{r.arg[0]}={pos[self.axis[r]] if off.shape[self.axis[r]] > 1 else 0}" for r in self.ranges)
    raise KernelRefError(f"{what} of {buf.op} {buf.arg} (size {size}) at index {int(off[pos])} when {at or 'always'}")

  def load(self, idx: UOp, dt: DType) -> np.ndarray:
    buf, off, valid = self.index(idx)
    zero = np.zeros((), dtype=semantics.holder(dt))
    if buf.op is Ops.BUFFERIZE: return self.load_bufferize(buf, off, valid, zero)
    arr = self._buffer(buf)
    self._check("LOAD", buf, off, valid, arr.size)
    # NOTE: a buffer with no element (an empty tensor's) is only read under a gate that is never true (_check holds it)
    if arr.size == 0: return np.broadcast_to(zero, np.broadcast_shapes(np.shape(off), np.shape(valid))).copy()
    got = self._decode(arr, buf, np.where(valid, off, 0))
    return np.where(valid, got, zero)

  def store(self, idx: UOp, v: np.ndarray) -> None:
    buf, off, valid = self.index(idx)
    if buf.op is not Ops.DEFINE_GLOBAL: raise KernelRefError(f"STORE into {buf.op}: kernels store to DEFINE_GLOBALs")
    arr = self._buffer(buf)
    self._check("STORE", buf, off, valid, arr.size)
    off, valid, v = np.broadcast_arrays(off, valid, v)
    arr[off[valid]] = self._encode(arr, buf, v[valid])

  def _buffer(self, buf: UOp) -> np.ndarray:
    if buf.op is not Ops.DEFINE_GLOBAL: raise KernelRefError(f"INDEX of {buf.op}")
    if buf.arg not in self.bufs: raise KernelRefError(f"no array for buffer {buf.arg} (DEFINE_GLOBAL {buf.dtype})")
    return self.bufs[buf.arg]

  def _decode(self, arr: np.ndarray, buf: UOp, off: np.ndarray) -> np.ndarray:
    dt = buf.dtype.base if isinstance(buf.dtype, PtrDType) else buf.dtype
    raw = arr[off]
    vals = from_storage_np(raw, dt) if arr.dtype == np.dtype(to_np_dtype(dt)) else raw
    return semantics.exec_cast(vals, _np_value_dtype(vals), dt) if vals.dtype != semantics.holder(dt) else vals

  def _encode(self, arr: np.ndarray, buf: UOp, v: np.ndarray) -> np.ndarray:
    dt = buf.dtype.base if isinstance(buf.dtype, PtrDType) else buf.dtype
    return to_storage_np(v, dt) if arr.dtype == np.dtype(to_np_dtype(dt)) else v.astype(arr.dtype)

  def load_bufferize(self, bz: UOp, off: np.ndarray, valid: np.ndarray, zero: np.ndarray,
                     value: np.ndarray | None = None) -> np.ndarray:
    """Read a local BUFFERIZE at offsets `off` (0 where not valid). `value` stands in for the bufferized value's array
    (an oracle reads a companion array, such as an error bound, through the same layout)."""
    rngs = list(bz.src[1:])
    if any(r.op is not Ops.RANGE for r in rngs): raise KernelRefError("BUFFERIZE(value, *ranges) closes RANGEs")
    size = math.prod(self.size[r] for r in rngs)
    v = self._full(self.ev(bz.src[0]) if value is None else value, rngs)
    # the buffer's own axes last, flattened row-major in the order of its ranges
    axes = [self.axis[r] for r in rngs]
    flat = np.moveaxis(v, axes, list(range(self.nd - len(axes), self.nd)))
    flat = flat.reshape(*flat.shape[:self.nd - len(axes)], size)
    for a in sorted(axes): flat = np.expand_dims(flat, a)
    self._check("LOAD", bz, off, valid, size)
    safe = np.where(valid, off, 0)
    shape = np.broadcast_shapes(flat.shape[:-1], safe.shape)
    got = np.take_along_axis(np.broadcast_to(flat, (*shape, size)), np.broadcast_to(safe, shape)[..., None], axis=-1)
    return np.where(valid, got[..., 0], zero)

  def reduce(self, u: UOp) -> np.ndarray:
    rngs = sorted(u.src[1:], key=lambda r: r.arg)
    if any(r.op is not Ops.RANGE for r in rngs): raise KernelRefError("REDUCE(value, *ranges) closes RANGEs")
    if u.arg not in REDUCE_IDENTITY: raise KernelRefError(f"REDUCE with {u.arg}: ADD, MUL and MAX only")
    v, dt = self._full(self.ev(u.src[0]), rngs), u.dtype
    keep = list(v.shape)
    for r in rngs: keep[self.axis[r]] = 1
    acc = np.full(keep, REDUCE_IDENTITY[u.arg](dt), dtype=semantics.holder(dt))
    fn = semantics.alu_fn(u.arg, dt)
    if not dtypes.is_float(dt):
      # NOTE: integer (wrapping) and bool reductions give the same result in any order: one numpy reduction
      axes = tuple(self.axis[r] for r in rngs)
      part = np.logical_or if dt is dtypes.bool and u.arg is not Ops.MUL else np.logical_and if dt is dtypes.bool else \
        {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: np.maximum}[u.arg]
      # NOTE: the identity as numpy's initial value too: a reduction over an empty range has no elements
      init = bool(REDUCE_IDENTITY[u.arg](dt)) if dt is dtypes.bool else REDUCE_IDENTITY[u.arg](dt)
      return fn(acc, part.reduce(v, axis=axes, keepdims=True, dtype=semantics.holder(dt), initial=init))
    # NOTE: step by step in the loop's order, through the table: the float sums round as the lowered loop's do
    with np.errstate(all="ignore"):
      for point in itertools.product(*[range(self.size[r]) for r in rngs]):
        sl: list[Any] = [slice(None)] * self.nd
        for r, p in zip(rngs, point): sl[self.axis[r]] = slice(p, p + 1)
        acc = fn(acc, v[tuple(sl)])
    return acc

def _np_value_dtype(v: np.ndarray) -> DType:
  """The dtype whose values a plain numpy array holds (for arrays given as values rather than storage)."""
  from tinygrad.dtype import from_np_dtype
  return from_np_dtype(v.dtype)

Bufs = Mapping[int, np.ndarray] | Sequence[np.ndarray]

def run_kernel(ast: UOp, bufs: Bufs, var_vals: Mapping[str, int] | None = None) -> None:
  """Run kernel `ast` on arrays by DEFINE_GLOBAL number (a dict, or a list: bufs[i] is buffer i), writing in place."""
  if ast.op is not Ops.SINK: raise KernelRefError(f"a kernel AST is a SINK, got {ast.op}")
  b = dict(enumerate(bufs)) if isinstance(bufs, Sequence) else bufs
  kb = [u for u in ast.toposort() if u.op is Ops.RANGE and u.arg[-1] is AxisType.KBLOCK]
  if len(kb) > 1: raise KernelRefError(f"{len(kb)} KBLOCK ranges: a kernel has at most one (OptOps.KBLOCK)")
  if not kb: return KernelRef(ast, b, var_vals).run()
  # NOTE: the KBLOCK range is the outermost loop and its iterations depend on each other through memory: one run each
  for v in range(KernelRef(ast, b, var_vals).size[kb[0]]):
    KernelRef(ast.substitute({kb[0]: kb[0].const_like(v)}), b, var_vals).run()

# ---- whole kernel graphs and schedules ----

def base_buffer(u: UOp) -> UOp:
  """The BUFFER under a chain of AFTERs."""
  while u.op is Ops.AFTER: u = u.src[0]
  return u

def kernels_of(ksink: UOp) -> list[UOp]:
  """The KERNEL nodes of a kernel graph, each after the kernels it reads from."""
  return [u for u in ksink.toposort() if u.op is Ops.KERNEL]

def run_kernel_graph(ksink: UOp, arrays: dict[UOp, np.ndarray],
                     var_vals: Mapping[str, int] | None = None) -> dict[UOp, np.ndarray]:
  """Evaluate every kernel of `ksink` in order. `arrays` maps input BUFFER UOps to flat storage arrays; output buffers
  are created (zero-filled) and added. Returns `arrays`."""
  for k in kernels_of(ksink):
    for s in k.src:
      b = base_buffer(s)
      if b not in arrays: arrays[b] = np.zeros(b.arg, dtype=to_np_dtype(b.dtype))
    run_kernel(k.arg, [arrays[base_buffer(s)] for s in k.src], var_vals)
  return arrays

def read_view(view: UOp, arrays: dict[UOp, np.ndarray]) -> np.ndarray:
  """The storage of a realized view (a BUFFER under RESHAPEs) as a shaped array."""
  base = view
  while base.op is Ops.RESHAPE: base = base.src[0]
  return arrays[base_buffer(base)].reshape(view.shape)

def eval_schedule(items: Sequence[Any], var_vals: Mapping[str, int] | None = None) -> dict[Any, np.ndarray]:
  """Evaluate ScheduleItems (ast, bufs) with the reference executor instead of compiling them. Allocated input Buffers
  are read with .numpy(); returns {base Buffer: flat storage array} with the outputs filled in."""
  arrays: dict[Any, np.ndarray] = {}
  for it in items:
    for b in it.bufs:
      base = b.base
      if base in arrays: continue
      if b is not base and b.dtype is not base.dtype:
        raise KernelRefError(f"eval_schedule: a view of {base.dtype} as {b.dtype} (dtype-changing views are not "
                             "supported)")
      arrays[base] = base.numpy() if base.is_allocated() else np.zeros(base.size, dtype=to_np_dtype(base.dtype))
    run_kernel(it.ast, [arrays[b.base] for b in it.bufs], var_vals)
  return arrays

__all__ = ["KernelRef", "KernelRefError", "run_kernel", "base_buffer", "kernels_of", "run_kernel_graph", "read_view",
           "eval_schedule"]
