"""A tiny numpy interpreter of kernel ASTs (docs/ir.md section 2): an oracle for the scheduler's output.

Every RANGE of the kernel gets its own numpy axis; a node evaluates to an array broadcast over the axes of the ranges it
depends on, a REDUCE reduces over its ranges' axes, and a STORE scatters the value (masked by the index's validity)."""
from __future__ import annotations
import numpy as np
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, to_np_dtype, Invalid

def _np_dtype(dt):
  return np.int64 if dt is dtypes.index else to_np_dtype(dt)

def _cdiv(a, b):
  q = np.abs(a) // np.abs(b)
  return np.where((a < 0) != (b < 0), -q, q)

_BINARY = {
  Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.MAX: np.maximum, Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal,
  Ops.CMPEQ: np.equal, Ops.XOR: np.bitwise_xor, Ops.OR: np.bitwise_or, Ops.AND: np.bitwise_and, Ops.FDIV: np.divide, Ops.POW: np.power,
  Ops.SHL: np.left_shift, Ops.SHR: np.right_shift, Ops.IDIV: _cdiv, Ops.MOD: lambda a, b: a - _cdiv(a, b) * b,
}
_UNARY = {
  Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin, Ops.SQRT: np.sqrt, Ops.RECIPROCAL: lambda x: 1 / x, Ops.NEG: np.negative,
  Ops.TRUNC: np.trunc,
}
_REDUCE = {Ops.ADD: np.sum, Ops.MUL: np.prod, Ops.MAX: np.max}

class KernelEval:
  def __init__(self, ast: UOp, bufs: list[np.ndarray], var_vals: dict[str, int] | None = None):
    self.ast, self.bufs, self.var_vals = ast, bufs, var_vals or {}
    self.axis = {r: i for i, r in enumerate(u for u in ast.toposort() if u.op is Ops.RANGE)}
    self.nd = len(self.axis)
    self.cache: dict[UOp, np.ndarray] = {}

  def ev(self, u: UOp) -> np.ndarray:
    if (r := self.cache.get(u)) is None: r = self.cache[u] = self._ev(u)
    return r

  def _shape1(self) -> list[int]: return [1] * self.nd

  def _ev(self, u: UOp) -> np.ndarray:
    if u.op is Ops.CONST:
      if u.arg is Invalid: raise ValueError("Invalid used as a value")
      return np.array(u.arg, dtype=_np_dtype(u.dtype)).reshape([1] * self.nd)
    if u.op is Ops.DEFINE_VAR: return np.array(self.var_vals[u.arg[0]], dtype=np.int64).reshape([1] * self.nd)
    if u.op is Ops.RANGE:
      sh = self._shape1()
      sh[self.axis[u]] = u.src[0].arg
      return np.arange(u.src[0].arg, dtype=np.int64).reshape(sh)
    if u.op is Ops.LOAD:
      buf, idx, valid = self.index(u.src[0])
      safe = np.where(valid, idx, 0)
      return np.where(valid, buf[safe], np.zeros((), dtype=buf.dtype))
    if u.op is Ops.REDUCE:
      v = self.ev(u.src[0])
      axes = tuple(self.axis[r] for r in u.src[1:])
      # a value that does not depend on a reduce range still counts once per iteration
      target = list(v.shape)
      for r in u.src[1:]: target[self.axis[r]] = r.src[0].arg
      v = np.broadcast_to(v, target)
      return _REDUCE[u.arg](v, axis=axes, keepdims=True).astype(_np_dtype(u.dtype))
    if u.op is Ops.WHERE: return np.where(self.ev(u.src[0]), self.ev(u.src[1]), self.ev(u.src[2])).astype(_np_dtype(u.dtype))
    if u.op is Ops.CAST: return self.ev(u.src[0]).astype(_np_dtype(u.dtype))
    if u.op is Ops.BITCAST: return self.ev(u.src[0]).view(_np_dtype(u.dtype))
    if u.op in _UNARY:
      with np.errstate(all="ignore"): return _UNARY[u.op](self.ev(u.src[0])).astype(_np_dtype(u.dtype))
    if u.op in _BINARY:
      with np.errstate(all="ignore"): return _BINARY[u.op](self.ev(u.src[0]), self.ev(u.src[1])).astype(_np_dtype(u.dtype))
    raise NotImplementedError(f"kernel_eval: {u.op}")

  def index(self, idx_uop: UOp):
    assert idx_uop.op is Ops.INDEX, idx_uop.op
    dg, idx = idx_uop.src[0], idx_uop.src[1]
    assert dg.op is Ops.DEFINE_GLOBAL
    buf = self.bufs[dg.arg]
    if idx.op is Ops.CONST and idx.arg is Invalid: return buf, np.zeros([1] * self.nd, np.int64), np.zeros([1] * self.nd, bool)
    valid = self.ev(idx.get_valid()) if idx.is_masked() else np.ones([1] * self.nd, dtype=bool)
    i = self.ev(idx.get_idx())
    i, valid = np.broadcast_arrays(i, valid)
    assert np.all((i[valid] >= 0) & (i[valid] < buf.size)), f"out of bounds access to buffer {dg.arg}"
    return buf, i, valid

  def run(self) -> None:
    for st in [u for u in self.ast.toposort() if u.op is Ops.STORE]:
      buf, idx, valid = self.index(st.src[0])
      val = self.ev(st.src[1])
      idx, valid, val = np.broadcast_arrays(idx, valid, val)
      buf[idx[valid]] = val[valid]

def eval_kernel(ast: UOp, bufs: list[np.ndarray], var_vals: dict[str, int] | None = None) -> None:
  """Run kernel `ast` on flat numpy arrays (bufs[i] is DEFINE_GLOBAL i), writing the outputs in place."""
  assert ast.op is Ops.SINK
  KernelEval(ast, bufs, var_vals).run()

# ---- running a whole kernel graph ----

def base_buffer(u: UOp) -> UOp:
  while u.op is Ops.AFTER: u = u.src[0]
  return u

def kernels_of(ksink: UOp) -> list[UOp]:
  """The KERNEL nodes of a kernel graph, each after the kernels it reads from."""
  return [u for u in ksink.toposort() if u.op is Ops.KERNEL]

def run_kernel_graph(ksink: UOp, arrays: dict[UOp, np.ndarray], var_vals: dict[str, int] | None = None) -> dict[UOp, np.ndarray]:
  """Evaluate every kernel of `ksink` in order. `arrays` maps input BUFFER UOps to flat numpy arrays; output buffers are
  created (zero-filled) and added. Returns `arrays`."""
  for k in kernels_of(ksink):
    for s in k.src:
      b = base_buffer(s)
      if b not in arrays: arrays[b] = np.zeros(b.arg, dtype=_np_dtype(b.dtype))
    bufs = [arrays[base_buffer(s)] for s in k.src]
    eval_kernel(k.arg, bufs, var_vals)
  return arrays

def read_view(view: UOp, arrays: dict[UOp, np.ndarray]) -> np.ndarray:
  """The value of a realized view (a BUFFER under RESHAPEs) as a shaped array."""
  base = view
  while base.op is Ops.RESHAPE: base = base.src[0]
  return arrays[base_buffer(base)].reshape(view.shape)

def eval_schedule(items) -> dict:
  """Evaluate ScheduleItems (ast, bufs) with the kernel evaluator instead of compiling them. Allocated input Buffers are
  read with .numpy(); returns {base Buffer: flat numpy array} with the outputs filled in."""
  arrays: dict = {}
  for it in items:
    for b in it.bufs:
      base = b.base
      if base in arrays: continue
      assert b is base or b.dtype is base.dtype, "dtype-changing buffer views are not supported by eval_schedule"
      arrays[base] = base.numpy() if base.is_allocated() else np.zeros(base.size, dtype=_np_dtype(base.dtype))
    eval_kernel(it.ast, [arrays[b.base] for b in it.bufs])
  return arrays
