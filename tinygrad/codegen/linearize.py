"""linearize: the graph (a SINK with no open ranges) -> a list of UOps in execution order, loops properly nested;
line_rewrite: the one place a line becomes several (a gated STORE -> IF, STORE, ENDIF)."""
from __future__ import annotations
import heapq
from typing import Any
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp

def _priority(u: UOp) -> int:
  # lower sorts earlier among ready nodes of a block: definitions and constants first, then loads, then the rest
  if u.op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR): return -20
  if u.op in (Ops.DEFINE_LOCAL, Ops.DEFINE_REG, Ops.SPECIAL): return -10
  if u.op in (Ops.CONST, Ops.VCONST): return -5
  if u.op is Ops.LOAD: return -1
  return 0

def loop_nesting(nodes: list[UOp]) -> dict[UOp, tuple[UOp, ...]]:
  """For every node, the loops it runs in, outermost first. A loop runs inside every range still open at its END."""
  ends = {u.src[1]: u for u in nodes if u.op is Ops.END}
  for u in nodes:
    if u.op is Ops.END and len(u.src) != 2: raise ValueError(f"linearize: END closes one range, got {len(u.src) - 1}")
    if u.op is Ops.RANGE and u not in ends: raise ValueError(f"linearize: RANGE {u.arg} is never closed by an END")
  # NOTE: a side effect runs in the loops whose END closes it even when it does not use their range: such an END
  # survives only when its loop may run no iteration (found by fuzz: a store hoisted out of an empty loop ran once)
  wrapped: dict[UOp, set[UOp]] = {}
  for e in nodes:
    if e.op is not Ops.END: continue
    todo_fx = [e.src[0]]
    while todo_fx:
      x = todo_fx.pop()
      if x.op not in (Ops.STORE, Ops.GROUP, Ops.END) or e.src[1] in wrapped.get(x, ()): continue
      wrapped.setdefault(x, set()).add(e.src[1])
      if x.op is not Ops.STORE: todo_fx.extend(x.src if x.op is Ops.GROUP else x.src[:1])
  memo: dict[UOp, frozenset[UOp]] = {}
  def enclosing(u: UOp) -> frozenset[UOp]:
    if (got := memo.get(u)) is not None: return got
    seen: set[UOp] = set()
    todo = [r for r in u._ranges if r is not u] + [r for r in wrapped.get(u, ()) if r is not u]
    while todo:
      if (rng := todo.pop()) in seen: continue
      seen.add(rng)
      todo.extend(ends[rng]._ranges)
      todo.extend(wrapped.get(ends[rng], ()))
    memo[u] = ret = frozenset(seen)
    return ret
  depth = {r: len(enclosing(ends[r])) for r in ends}
  ret: dict[UOp, tuple[UOp, ...]] = {}
  # NOTE: a path depends only on the set of enclosing loops, which most nodes share: sorted and checked once per set
  paths: dict[frozenset[UOp], tuple[UOp, ...]] = {}
  for u in nodes:
    ch = enclosing(ends[u.src[1]] if u.op is Ops.END else ends[u] if u.op is Ops.RANGE else u)
    if (path := paths.get(ch)) is None:
      path = tuple(sorted(ch, key=lambda r: depth[r]))
      if [depth[r] for r in path] != list(range(len(path))):
        raise ValueError(f"linearize: loops are not properly nested around {u.op} (ranges {[r.arg for r in path]})")
      paths[ch] = path
    ret[u] = path
  return ret

def linearize(sink: UOp) -> list[UOp]:
  """Priority topological sort. Everything that depends on a RANGE goes after it and before its END; sibling loops are
  emitted one after the other (never interleaved), ordered by readiness and then by AxisType and range id."""
  nodes = [u for u in sink.toposort() if u.op is not Ops.SINK]
  order = {u: i for i, u in enumerate(nodes)}
  nest = loop_nesting(nodes)
  # full[u]: the loops u belongs to, counting a RANGE and its END as part of their own loop
  full = {u: nest[u] + ((u,) if u.op is Ops.RANGE else (u.src[1],) if u.op is Ops.END else ()) for u in nodes}
  out: list[UOp] = []
  _emit_block((), nodes, full, order, out)
  return out

def _emit_block(chain: tuple[UOp, ...], nodes: list[UOp], full: dict[UOp, tuple[UOp, ...]], order: dict[UOp, int],
                out: list[UOp]) -> None:
  d = len(chain)
  inside = [u for u in nodes if full[u][:d] == chain]
  # an item of this block is a node of this block, or a whole child loop (keyed by its RANGE)
  owner = {u: (u if len(full[u]) == d else full[u][d]) for u in inside}
  deps: dict[UOp, set[UOp]] = {}
  users: dict[UOp, set[UOp]] = {}
  for u in inside:
    k = owner[u]
    deps.setdefault(k, set()); users.setdefault(k, set())
    for s in u.src:
      if (o := owner.get(s)) is not None and o is not k: deps[k].add(o); users.setdefault(o, set()).add(k)
  def key(k: UOp) -> tuple[Any, ...]:
    return (1, k.arg[-1], k.arg[0], order[k]) if len(full[k]) > d else (0, _priority(k), order[k])
  heap = [(key(k), k.op, order[k], k) for k in deps if not deps[k]]
  heapq.heapify(heap)
  while heap:
    *_, k = heapq.heappop(heap)
    if len(full[k]) > d:
      out.append(k)
      end = next(u for u in inside if u.op is Ops.END and u.src[1] is k)
      body = [u for u in inside if full[u][:d + 1] == chain + (k,) and u is not k and u is not end]
      _emit_block(chain + (k,), body, full, order, out)
      out.append(end)
    else: out.append(k)
    for us in users[k]:
      deps[us].discard(k)
      if not deps[us]: heapq.heappush(heap, (key(us), us.op, order[us], us))
  if any(deps.values()): raise RuntimeError(f"linearize: a dependency cycle in the loop nest {[r.arg for r in chain]}")

# ---- line_rewrite ----

def line_rewrite(lst: list[UOp]) -> list[UOp]:
  """A STORE whose INDEX has a gate becomes IF(gate), STORE(ungated INDEX), ENDIF; the ungated INDEX is defined right
  after the gated one, where linearize put it; later lines are rebuilt over it."""
  replace: dict[UOp, UOp] = {}
  ret: list[UOp] = []
  emitted: set[UOp] = set()
  # NOTE: the ungated INDEX goes where the gated one is, never at the store: linearize placed the gated INDEX where it
  # dominates every store of it, which may sit in other loops (found by fuzz: after CUT, two store loops shared one
  # INDEX and the second used a definition inside the first: LLVM "does not dominate all uses"), and never inside the
  # IF (PYTHON read None there). A line of the list is always emitted: a duplicate definition of the same value is
  # harmless, a missing one is not.
  for_stores = {u.src[0] for u in lst if u.op is Ops.STORE and u.src[0].op is Ops.INDEX and len(u.src[0].src) == 3}
  for orig in lst:
    u = orig.replace(src=tuple(replace.get(s, s) for s in orig.src)) if any(s in replace for s in orig.src) else orig
    if u is not orig: replace[orig] = u
    if u.op is Ops.STORE and len(u.src[0].src) == 3:
      idx = u.src[0]
      iff = UOp(Ops.IF, src=(idx.src[2],))
      st = idx.replace(src=idx.src[:2]).store(u.src[1])
      # NOTE: the IF/STORE/ENDIF lines always go in: two lanes gated by the same condition share one hash-consed IF
      ret.extend([iff, st, UOp(Ops.ENDIF, src=(iff,))])
      replace[orig] = st
      continue
    ret.append(u)
    emitted.add(u)
    if orig in for_stores and (nidx := u.replace(src=u.src[:2])) not in emitted:
      ret.append(nidx)
      emitted.add(nidx)
  # a gated INDEX that only fed a now-ungated STORE is dead
  used = {s for u in ret for s in u.src}
  return [u for u in ret if not (u.op is Ops.INDEX and len(u.src) == 3 and u not in used)]
