"""A numpy evaluator of tensor graphs (docs/ir.md section 1): an oracle independent of the scheduler and codegen.

`eval_tensor_graph(uop)` computes the value of a tensor-graph node with numpy, following the IR's semantics: C integer
division and remainder (truncating), wrapping integer arithmetic, bool comparisons, keep-dim reductions. bfloat16 and
fp8 values are held as float32 arrays rounded to the format after every op.
"""
from __future__ import annotations
from typing import Any, Callable
import numpy as np
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.dtype import DType, dtypes, to_np_dtype
from tinygrad.dtype import bf16_to_float_np, float_to_bf16_np, fp8_to_float_np, float_to_fp8_np

# ---- values ----

def _np_dtype(dt: DType) -> Any:
  return np.float32 if dt is dtypes.bfloat16 or dt in dtypes.fp8s else to_np_dtype(dt)

def _fit(x: Any, dt: DType) -> np.ndarray:
  """x as an array of dt's value representation (rounding to bfloat16 / fp8 where needed)."""
  a = np.asarray(x)
  if dt is dtypes.bfloat16: return bf16_to_float_np(float_to_bf16_np(a.astype(np.float32)))
  if dt in dtypes.fp8s: return fp8_to_float_np(float_to_fp8_np(a.astype(np.float32), dt), dt)
  return a.astype(_np_dtype(dt), copy=False)

def _bits(x: np.ndarray, dt: DType) -> np.ndarray:
  """The raw bit pattern of values of dt (for BITCAST)."""
  if dt is dtypes.bfloat16: return float_to_bf16_np(x)
  if dt in dtypes.fp8s: return float_to_fp8_np(x, dt)
  return np.ascontiguousarray(x.astype(to_np_dtype(dt), copy=False))

def _from_bits(b: np.ndarray, dt: DType) -> np.ndarray:
  if dt is dtypes.bfloat16: return bf16_to_float_np(b.view(np.uint16))
  if dt in dtypes.fp8s: return fp8_to_float_np(b.view(np.uint8), dt)
  return b.view(to_np_dtype(dt))

def _cast(x: np.ndarray, dt: DType) -> np.ndarray:
  if dt is dtypes.bool: return np.asarray(x != 0)
  if dtypes.is_int(dt) and (x.dtype.kind == "f"):
    # NOTE: out-of-range float->int is undefined in C; truncate, then wrap like the integer conversion would
    t = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0))
    return t.astype(np.int64).astype(to_np_dtype(dt)) if dt is not dtypes.uint64 else t.astype(np.uint64)
  return _fit(x, dt)

# ---- threefry2x32 (Random123, 20 rounds): the reference the codegen decomposition must match ----

_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))

def threefry2x32(x: np.ndarray, key: np.ndarray) -> np.ndarray:
  """uint64 counter (low word x0, high word x1) and uint64 key (low k0, high k1) -> uint64 (x0 low, x1 high)."""
  x, key = np.asarray(x, dtype=np.uint64), np.asarray(key, dtype=np.uint64)
  m32 = np.uint64(0xFFFFFFFF)
  x0, x1 = (x & m32).astype(np.uint32), (x >> np.uint64(32)).astype(np.uint32)
  k0, k1 = (key & m32).astype(np.uint32), (key >> np.uint64(32)).astype(np.uint32)
  ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for i in range(5):
    for r in _ROT[i % 2]:
      x0 = x0 + x1
      x1 = ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))) ^ x0
    x0, x1 = x0 + ks[(i + 1) % 3], x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
  return x0.astype(np.uint64) | (x1.astype(np.uint64) << np.uint64(32))

# ---- ALU ----

def _cdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  if a.dtype.kind == "u": return np.where(b == 0, 0, a // np.where(b == 0, 1, b)).astype(a.dtype)
  bb = np.where(b == 0, 1, b)
  q = np.abs(a.astype(np.int64)) // np.abs(bb.astype(np.int64))
  q = np.where((a < 0) != (bb < 0), -q, q)
  return np.where(b == 0, 0, q).astype(a.dtype)

def _shift(a: np.ndarray, b: np.ndarray, left: bool) -> np.ndarray:
  # NOTE: the shift amount wraps at the bit width; SHR is arithmetic for signed types (as C compilers do), logical for
  # unsigned ones
  u = np.dtype(f"u{a.dtype.itemsize}")
  sh = (b.astype(np.int64) % (a.dtype.itemsize * 8)).astype(u)
  if left: return np.asarray((a.view(u) << sh).view(a.dtype))
  return np.asarray(a >> sh.astype(a.dtype))

def _where(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray: return np.where(c, a, b)

_ALU: dict[Ops, Callable[..., np.ndarray]] = {
  Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin, Ops.SQRT: np.sqrt, Ops.TRUNC: np.trunc, Ops.NEG: np.negative,
  Ops.RECIPROCAL: lambda a: np.reciprocal(a) if a.dtype.kind == "f" else _cdiv(np.ones_like(a), a),
  Ops.ADD: lambda a, b: np.logical_or(a, b) if a.dtype == np.bool_ else a + b,
  Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: np.logical_and(a, b) if a.dtype == np.bool_ else a * b,
  Ops.FDIV: lambda a, b: a / b, Ops.POW: lambda a, b: np.power(a, b),
  Ops.IDIV: _cdiv,
  Ops.MOD: lambda a, b: np.fmod(a, b) if a.dtype.kind == "f" else (a - _cdiv(a, b) * b).astype(a.dtype),
  Ops.MAX: np.maximum, Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.CMPEQ: np.equal,
  Ops.AND: lambda a, b: a & b, Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b,
  Ops.SHL: lambda a, b: _shift(a, b, True), Ops.SHR: lambda a, b: _shift(a, b, False),
  Ops.THREEFRY: threefry2x32, Ops.WHERE: _where, Ops.MULACC: lambda a, b, c: np.asarray(a * b + c),
}

# ---- the evaluator ----

def _buffer_value(u: UOp) -> np.ndarray:
  from tinygrad.device import buffer_of
  buf = buffer_of(u)
  if not buf.is_allocated():
    raise ValueError(f"eval_tensor_graph: {u.op} {u.dtype} size {u.arg} has no data (its Buffer is unallocated)")
  raw = buf.numpy()
  if u.dtype is dtypes.bfloat16: return bf16_to_float_np(raw)
  return fp8_to_float_np(raw, u.dtype) if u.dtype in dtypes.fp8s else raw

def _reduce(u: UOp, x: np.ndarray) -> np.ndarray:
  op, axes = u.arg
  nd = _np_dtype(u.dtype)
  if op is Ops.ADD: return _fit(np.add.reduce(x, axis=axes, keepdims=True, dtype=nd), u.dtype)
  if op is Ops.MUL: return _fit(np.multiply.reduce(x, axis=axes, keepdims=True, dtype=nd), u.dtype)
  if op is Ops.MAX:
    ident = -np.inf if dtypes.is_float(u.dtype) else dtypes.min(u.dtype)
    return np.maximum.reduce(x, axis=axes, keepdims=True, initial=ident).astype(nd)
  raise NotImplementedError(f"eval_tensor_graph: REDUCE_AXIS with {op}")

def _multi_value(u: UOp, s: list[np.ndarray]) -> np.ndarray:
  """A tensor on several devices as the one tensor it stands for: the shards put in place along the split axis (a
  replicated one: its first shard; a partial: op over the shards)."""
  axis, bounds, op = u.arg
  if op is not None:
    fn = {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: np.maximum}[op]
    acc = s[0]
    for x in s[1:]: acc = fn(acc, x)
    return _fit(acc, u.dtype)
  if axis is None: return s[0]
  order = sorted(range(len(s)), key=lambda i: bounds[i][0])
  return np.concatenate([s[i] for i in order if bounds[i][1] > bounds[i][0]] or [s[0]], axis=axis)

def _eval_node(u: UOp, s: list[np.ndarray]) -> np.ndarray:
  op = u.op
  if op is Ops.BUFFER: return _buffer_value(u)
  if op is Ops.BUFFER_VIEW: return s[0][u.arg[1]:u.arg[1] + u.arg[0]]
  if op is Ops.CONST: return _fit(np.array(u.arg), u.dtype)
  if op is Ops.RESHAPE: return s[0].reshape(u.arg)
  if op is Ops.PERMUTE: return np.transpose(s[0], u.arg)
  if op is Ops.EXPAND: return np.broadcast_to(s[0], u.arg)
  if op is Ops.PAD: return np.pad(s[0], u.arg)
  if op is Ops.SHRINK: return s[0][tuple(slice(b, e) for b, e in u.arg)]
  if op is Ops.FLIP: return s[0][tuple(slice(None, None, -1) if f else slice(None) for f in u.arg)]
  if op is Ops.REDUCE_AXIS: return _reduce(u, s[0])
  if op in (Ops.CONTIGUOUS, Ops.DETACH, Ops.COPY): return s[0]
  if op is Ops.ASSIGN: return s[1]
  if op is Ops.MULTI: return _multi_value(u, s)
  if op is Ops.BIND: return np.array(u.src[1].arg)
  if op is Ops.CAST: return _cast(s[0], u.dtype)
  if op is Ops.BITCAST: return _from_bits(_bits(s[0], u.src[0].dtype), u.dtype)
  if op in GroupOp.ALU:
    with np.errstate(all="ignore"): return _fit(_ALU[op](*s), u.dtype)
  raise NotImplementedError(f"eval_tensor_graph: {op} is not a tensor-graph op")

def eval_tensor_graph(uop: UOp) -> np.ndarray:
  """The value of tensor-graph node `uop` as a numpy array of its shape (bfloat16/fp8 as float32)."""
  vals: dict[UOp, np.ndarray] = {}
  for u in uop.toposort():
    if u.op in (Ops.DEVICE, Ops.UNIQUE, Ops.SINK): continue
    if u.op is Ops.CONST and not u.src: vals[u] = np.array(u.arg); continue
    vals[u] = _eval_node(u, [vals[x] for x in u.src if x.op not in (Ops.DEVICE, Ops.UNIQUE)])
  return np.asarray(vals[uop]).reshape(uop.shape) if uop.shape is not None else vals[uop]

__all__ = ["eval_tensor_graph", "threefry2x32"]
