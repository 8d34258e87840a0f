"""On CPU, a store loop whose body compares its range against constants (the masks of cat and pad) is cut at those
points into several loops, each of which the simplifier makes branch-free."""
from __future__ import annotations
import weakref
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp, PatternMatcher, graph_rewrite
from tinygrad.uop.symbolic import symbolic

# NOTE: every piece is a simplified copy of the whole store (the terms of the other pieces stay, as `+ 0`), so cutting
# costs and emits pieces x body. Past this many loops per store a range keeps its gates: one loop, still correct.
MAX_PIECES = 32

def cut_points(r: UOp, body: UOp) -> list[int]:
  """Constants c with `r < c`, `r + k < c` or `c < r` in body, as the first index of a new piece (0 < c < end)."""
  pts: set[int] = set()
  for u in body.toposort():
    if u.op is not Ops.CMPLT: continue
    a, b = u.src
    if b.op is Ops.CONST and a is r: pts.add(b.arg)
    elif b.op is Ops.CONST and a.op is Ops.ADD and a.src[0] is r and a.src[1].op is Ops.CONST:
      pts.add(b.arg - a.src[1].arg)
    elif a.op is Ops.CONST and b is r: pts.add(a.arg + 1)
  n = r.src[0].arg
  return sorted(p for p in pts if isinstance(p, int) and 0 < p < n)

def cut_end(e: UOp, sym: PatternMatcher, next_id: list[int], budget: int) -> list[UOp]:
  """The pieces of END e: the first range with cut points that fit the budget is cut at all of them in one go, then
  each piece (with budget // pieces) tries the remaining ranges, so one store never becomes more than `budget` loops."""
  store, rngs = e.src[0], e.src[1:]
  for r in rngs:
    if r.arg[-1] is not AxisType.LOOP or r.src[0].op is not Ops.CONST: continue
    if not (pts := cut_points(r, store)) or len(pts) + 1 > budget: continue
    bounds = [0, *pts, r.src[0].arg]
    every = list(dict.fromkeys([*rngs, *(u for u in store.toposort() if u.op is Ops.RANGE)]))
    pieces: list[UOp] = []
    for lo, hi in zip(bounds, bounds[1:]):
      # NOTE: every piece gets fresh copies of all its ranges (reduce ranges too): two loops never share a RANGE
      fresh = {x: x.replace(arg=(next_id[0] + i, *x.arg[1:])) for i, x in enumerate(every)}
      next_id[0] += len(every)
      fresh[r] = UOp.range(hi - lo, fresh[r].arg[0], AxisType.LOOP)
      body = graph_rewrite(store.substitute({**fresh, r: fresh[r] + lo}), sym, name="simplify a cut piece")
      pieces.extend(cut_end(body.end(*[fresh[x] for x in rngs]), sym, next_id, budget // (len(bounds) - 1)))
    return pieces
  return [e]

# NOTE: the cut is a pure function of the (hash-consed, immutable) sink, and the costliest opt: the heuristics apply it,
# then apply_opts applies the chosen opts again, and BEAM re-applies it for every beam member. One cut per live sink.
# (None: nothing to cut; storing the sink itself as its own value would keep it alive forever)
_cuts: weakref.WeakKeyDictionary[UOp, UOp | None] = weakref.WeakKeyDictionary()

def forget_cuts() -> None:
  """Drop every remembered cut (a rule they were made with was swapped: fuzz/mutants.py)."""
  _cuts.clear()

def cut_store_ranges(sink: UOp) -> UOp:
  """`sink` with every store loop cut at its constant comparison points (`sink` itself where nothing is cut)."""
  if sink in _cuts: return sink if (got := _cuts[sink]) is None else got
  ret = _cut_store_ranges(sink, symbolic)
  _cuts[sink] = None if ret is sink else ret
  return ret

def _cut_store_ranges(sink: UOp, sym: PatternMatcher) -> UOp:
  if sink.op is not Ops.SINK: return sink
  rids = [u.arg[0] for u in sink.toposort() if u.op is Ops.RANGE and isinstance(u.arg[0], int)]
  next_id = [max(rids, default=-1) + 1]
  srcs = [p for s in sink.src for p in (cut_end(s, sym, next_id, MAX_PIECES) if s.op is Ops.END else [s])]
  return sink if len(srcs) == len(sink.src) else sink.replace(src=tuple(srcs))
