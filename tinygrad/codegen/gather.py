"""One-hot reduces to gathered loads, before the opts.

A gather, an embedding or an index by a tensor reaches the kernel as a sum over a table's rows of a select:
`sum_r where(x == r + c, g(r), 0)`, with x (the index, usually a loaded int) independent of r. At most one r passes
the compare (r + c is one-to-one), so the sum is `g(x - c)` where 0 <= x - c < n (the range's size) and 0 elsewhere:
no loop over the rows, and one row of the table read instead of all of them. The select must be a WHERE with a zero
branch: a one-hot product `cast(x == r) * g(r)` also sums a NaN or an inf of another row (0 * inf), which a gathered
load would not see, so it is left as the reduce it is.

`r + c` is found by reading the compared value as exact index math (an int step that cannot wrap, since its bounds
fit its dtype) and simplifying it: the Tensor front end's aranges are int32 sums of index terms
(`Tensor._arange_index`)."""
from __future__ import annotations
from typing import Iterator
from tinygrad.dtype import dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop.symbolic import symbolic

def _exact_index(e: UOp) -> UOp | None:
  """e (an int expression) as dtypes.index math with the same value, or None: only constants, casts of index terms, +
  and *, each int step's bounds inside its dtype (so it does not wrap)."""
  if e.dtype is dtypes.index: return e
  if not dtypes.is_int(e.dtype) or e.dtype.count != 1: return None
  if e.op is Ops.CONST: return UOp.const(dtypes.index, e.arg)
  if e.op is Ops.CAST and e.src[0].dtype is dtypes.index: ret: UOp | None = e.src[0]
  elif e.op is Ops.CAST and dtypes.is_int(e.src[0].dtype): ret = _exact_index(e.src[0])
  elif e.op in (Ops.ADD, Ops.MUL):
    srcs = [_exact_index(s) for s in e.src]
    ret = None if any(s is None for s in srcs) else UOp(e.op, dtypes.index, tuple(s for s in srcs if s is not None))
  else: return None
  if ret is None or not (dtypes.min(e.dtype) <= ret.vmin and ret.vmax <= dtypes.max(e.dtype)): return None
  return ret

def _offset(e: UOp, r: UOp) -> int | None:
  """c where e == r + c for every r (e read as exact index math and simplified), else None."""
  if r not in e._ranges or (ex := _exact_index(e)) is None: return None
  s = graph_rewrite(ex, symbolic, name="compared value as index math")
  if s is r: return 0
  if s.op is Ops.ADD and s.src[0] is r and s.src[1].op is Ops.CONST and isinstance(c := s.src[1].arg, int): return c
  return None

def _conjuncts(c: UOp) -> list[UOp]:
  return _conjuncts(c.src[0]) + _conjuncts(c.src[1]) if c.op is Ops.AND and c.dtype is dtypes.bool else [c]

def _select(src: UOp) -> tuple[list[UOp], UOp, list[UOp]] | None:
  """(the conjuncts of the condition, the picked value, the casts above the select, innermost first) of
  `cast(...(where(a & b & ..., g, 0)))`, or of `where(x != e, 0, g)` (one conjunct, x == e), else None."""
  casts: list[UOp] = []
  while src.op is Ops.CAST and dtypes.is_int(src.dtype) | dtypes.is_float(src.dtype):
    casts.insert(0, src)
    src = src.src[0]
  if src.op is not Ops.WHERE: return None
  cond, a, b = src.src
  def zero(u: UOp) -> bool: return u.op is Ops.CONST and u.arg == 0
  if zero(b): return _conjuncts(cond), a, casts
  if cond.op is Ops.CMPNE and zero(a): return [cond.src[0].eq(cond.src[1])], b, casts
  return None

def _picks(red: UOp, conds: list[UOp]) -> Iterator[tuple[int, UOp, UOp, int]]:
  """(k, r, x, c) for each conjunct conds[k] that is `x == r + c` over a range r of the reduce, x an int scalar that
  does not depend on r and whose values fit int64 (index math is lowered to int64 at most: a uint64 one could wrap)."""
  for k, cmp in enumerate(conds):
    if cmp.op is not Ops.CMPEQ: continue
    for r in (r for r in red.src[1:] if r.op is Ops.RANGE):
      for x, e in (cmp.src, cmp.src[::-1]):
        if r in x._ranges or not dtypes.is_int(x.dtype) or x.dtype.count != 1: continue
        if not (dtypes.min(dtypes.int64) <= x.vmin and x.vmax <= dtypes.max(dtypes.int64)): continue
        if (c := _offset(e, r)) is not None: yield k, r, x, c

def collapse_one_hot(red: UOp) -> UOp | None:
  """A sum over r of a select `x == r + c` (and any other conditions) of g(r) as g(x - c) inside the range, 0 outside;
  the reduce's other ranges stay (a select over two ranges collapses one, then the other). None where the reduce is not
  of that form."""
  if red.arg is not Ops.ADD or (sel := _select(red.src[0])) is None: return None
  conds, g, casts = sel
  if (pick := next(_picks(red, conds), None)) is None: return None
  k, r, x, c = pick
  n, xi = r.src[0], x.cast(dtypes.index)
  # NOTE: x is range-checked and clamped into the table as it is, and offset only after the clamp (x - c could leave
  # int64 and wrap): every load stays in bounds, and where x is outside, the select gives 0 (no r passed the compare)
  row = {r: xi.maximum(c).minimum(n - 1 + c) - c if c else xi.maximum(0).minimum(n - 1)}
  keep = (xi >= c) & (xi < n + c)
  for other in conds[:k] + conds[k + 1:]: keep = keep & other.substitute(row)
  picked = g.substitute(row)
  ret = keep.where(picked, picked.const_like(0))
  for cst in casts: ret = ret.cast(cst.dtype)
  rest = tuple(s for s in red.src[1:] if s is not r)
  if rest: return UOp(Ops.REDUCE, red.dtype, (ret,) + rest, Ops.ADD)
  # NOTE: the sum starts at +0.0, so a picked -0.0 sums to +0.0: adding 0.0 does the same (symbolic keeps a float
  # x + 0.0)
  return ret + ret.const_like(0.0) if dtypes.is_float(ret.dtype) else ret

pm_collapse_one_hot = PatternMatcher([(UPat(Ops.REDUCE, name="red"), collapse_one_hot)])
