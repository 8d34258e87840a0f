"""Late passes: the lowering of `dtypes.index` to int32/int64 by bounds."""
from __future__ import annotations
from tinygrad.uop import Ops, GroupOp, hooks
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, InvalidType

# ---- dtypes.index -> int32 / int64 ----

INT32_MIN, INT32_MAX = -2**31, 2**31 - 1

def _fits32(u: UOp) -> bool:
  lo, hi = u.vmin, u.vmax
  return isinstance(lo, int) and isinstance(hi, int) and INT32_MIN <= lo and hi <= INT32_MAX

def _widen(s: UOp, t: object) -> UOp:
  return s if s.dtype.scalar() is t else s.cast(t.vec(s.dtype.count))  # type: ignore[attr-defined]

def lower_one(u: UOp, nsrc: tuple[UOp, ...]) -> UOp:
  ints = [s for s in nsrc if s.dtype.scalar() in (dtypes.int32, dtypes.int64)]
  if u.dtype.scalar() is dtypes.index:
    if u.op is Ops.CONST:
      if isinstance(u.arg, InvalidType): raise ValueError("index lowering: Invalid outside an INDEX mask")
      return UOp.const((dtypes.int32 if INT32_MIN <= u.arg <= INT32_MAX else dtypes.int64).vec(u.dtype.count), u.arg)
    if u.op is Ops.DEFINE_VAR:
      # NOTE: a variable is passed to the kernel as an int32 argument: a wider one would be truncated
      lo, hi = u.arg[1], u.arg[2]
      if not (isinstance(lo, int) and isinstance(hi, int) and INT32_MIN <= lo <= hi <= INT32_MAX):
        raise ValueError(f"index lowering: variable {u.arg[0]!r} has bounds [{lo}, {hi}] beyond int32; "
                         "kernel variables are int32 arguments: bind it to a value in range or split the loop")
      t = dtypes.int32
    elif any(s.dtype.scalar() is dtypes.int64 for s in ints) or not _fits32(u): t = dtypes.int64
    else: t = dtypes.int32
    # NOTE: a WHERE's condition stays bool; every integer operand is widened to the node's width
    return UOp(u.op, t.vec(u.dtype.count), tuple(_widen(s, t) if s in ints else s for s in nsrc), u.arg, u.tag)
  if u.op in GroupOp.Comparison and len({s.dtype.scalar() for s in ints}) > 1:
    nsrc = tuple(_widen(s, dtypes.int64) if s in ints else s for s in nsrc)
  return u if nsrc == u.src else UOp(u.op, u.dtype, nsrc, u.arg, u.tag)

def lower_index_dtype(sink: UOp) -> UOp:
  """Every dtypes.index node becomes int32 when its bounds fit, else int64 (DEFINE_VAR is int32); operands are widened
  to the node's width. Built once per node from the lowered sources, so no half-lowered node is ever created."""
  new: dict[UOp, UOp] = {}
  for u in sink.toposort():
    nsrc = tuple(new[s] for s in u.src)
    new[u] = lower_one(u, nsrc) if u.dtype.scalar() is dtypes.index or nsrc != u.src else u
  if hooks.rewrite_done:
    for fn in hooks.rewrite_done: fn("lower index to int32/int64", sink, new[sink])
  return new[sink]
