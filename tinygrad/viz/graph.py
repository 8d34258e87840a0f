"""Graphs of a trace: the whole graph before any step of a pass, its text, and a layered layout for drawing.

The graph before step k of a pass is its root with steps 0..k-1 applied: every matched node replaced by what its rule
returned, and every node whose sources changed rebuilt. A rebuilt node is looked up by (op, dtype, arg, sources) in the
node table, the way UOp hash-consing finds it, so it gets the id the recorder gave it when a later step matched it; a
node no step matched and the table lacks gets a negative id."""
from __future__ import annotations
import difflib
from tinygrad.viz.trace import Trace, Pass, Node, TraceError

class GraphBuilder:
  """Rebuilds the graphs of one trace (the node table's structural index is made once)."""
  def __init__(self, tr: Trace):
    self.tr = tr
    self.nodes: dict[int, Node] = dict(tr.nodes)
    self.index: dict[tuple[str, str, str, tuple[int, ...]], int] = {}
    self.n_made = 0
    self._roots: dict[tuple[int, int], int] = {}
    self._orders: dict[int, list[int]] = {}
    for n in tr.nodes.values(): self.index.setdefault((n.op, n.dtype, n.arg, n.src), n.id)

  def _intern(self, op: str, dt: str, arg: str, src: tuple[int, ...]) -> int:
    key = (op, dt, arg, src)
    if (i := self.index.get(key)) is not None: return i
    self.n_made += 1
    i = -self.n_made
    self.nodes[i] = Node(i, op, dt, arg, src)
    self.index[key] = i
    return i

  def apply_steps(self, root: int, subs: dict[int, int]) -> int:
    """`root` with every node in `subs` replaced (repeatedly) and its users rebuilt."""
    done: dict[int, int] = {}
    alias: dict[int, int] = {}
    budget = 20 * (len(self.nodes) + len(subs)) + 1000
    stack = [root]
    while stack:
      budget -= 1
      if budget < 0: raise TraceError(f"{self.tr.path}: the steps of this pass do not rebuild a finite graph (an "
                                      "edited trace: a rewrite whose result contains what it replaced)")
      x = stack[-1]
      if x in done:
        stack.pop()
        continue
      if (r := subs.get(x)) is not None and r != x:
        if r in done:
          done[x] = done[r]
          stack.pop()
        else: stack.append(r)
        continue
      if (a := alias.get(x)) is not None:
        if a in done:
          done[x] = done[a]
          stack.pop()
        else: stack.append(a)
        continue
      n = self.nodes[x]
      if (todo := [s for s in n.src if s not in done]):
        stack.extend(todo)
        continue
      nsrc = tuple(done[s] for s in n.src)
      if nsrc == n.src:
        done[x] = x
        stack.pop()
        continue
      alias[x] = self._intern(n.op, n.dtype, n.arg, nsrc)
    return done[root]

  def graph_at(self, p: Pass, k: int) -> int:
    """The root of pass `p`'s graph before its step k (k == len(steps): after the last step)."""
    if not 0 <= k <= len(p.steps): raise TraceError(f"pass {p.id} has {len(p.steps)} steps; step {k} does not exist")
    return self.apply_steps(p.root, {s.match: s.out for s in p.steps[:k]})

  def root_at(self, p: Pass, k: int) -> int:
    """graph_at, remembered: stepping through a pass asks for each graph twice (after one step, before the next)."""
    if (r := self._roots.get((p.id, k))) is not None: return r
    if len(self._roots) > 256: self._roots.clear()
    r = self._roots[(p.id, k)] = self.graph_at(p, k)
    return r

  def order(self, root: int) -> list[int]:
    """toposort(root), remembered."""
    if (o := self._orders.get(root)) is not None: return o
    if len(self._orders) > 64: self._orders.clear()
    o = self._orders[root] = self.toposort(root)
    return o

  def toposort(self, *roots: int) -> list[int]:
    """Every node under `roots`, each after its sources."""
    order: list[int] = []
    seen: set[int] = set()
    stack: list[tuple[int, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
      x, expanded = stack.pop()
      if expanded:
        order.append(x)
        continue
      if x in seen: continue
      seen.add(x)
      stack.append((x, True))
      stack.extend((s, False) for s in reversed(self.nodes[x].src) if s not in seen)
    return order

  def text(self, order: list[int]) -> list[str]:
    """One line per node in pyrender's layout (a name per node, sources by name), sources first."""
    return [f"n{i} = UOp(Ops.{n.op}, dtypes.{n.dtype}, src=({''.join(f'n{s}, ' for s in n.src)}), arg={n.arg})"
            for i in order for n in (self.nodes[i],)]

def changed_lines(before: list[str], after: list[str]) -> tuple[list[int], list[int]]:
  """Indexes of the lines of `before` that a step removed and of `after` that it added."""
  gone: list[int] = []
  new: list[int] = []
  for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
    if tag == "equal": continue
    gone.extend(range(i1, i2))
    new.extend(range(j1, j2))
  return gone, new

# ---- layout ----

NODE_W, NODE_H, GAP_X, GAP_Y = 150, 36, 20, 44

def layout(nodes: dict[int, Node], order: list[int]) -> dict[int, tuple[float, float]]:
  """A layered layout: each node one layer below its deepest source, nodes in a layer ordered by the mean position of
  their sources (a sweep down, then one up by their users), then spread evenly and centred."""
  srcs = {i: [s for s in nodes[i].src] for i in order}
  layer: dict[int, int] = {}
  for i in order:
    d = 0
    for s in srcs[i]:
      if layer[s] >= d: d = layer[s] + 1
    layer[i] = d
  rows: list[list[int]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
  for i in order: rows[layer[i]].append(i)
  users: dict[int, list[int]] = {i: [] for i in order}
  for i in order:
    for s in srcs[i]: users[s].append(i)
  pos: dict[int, float] = {}
  for row in rows:
    for k, i in enumerate(row): pos[i] = float(k)
  def sweep(seq: list[list[int]], nbrs: dict[int, list[int]]) -> None:
    for row in seq:
      key: dict[int, float] = {}
      for i in row:
        ns = nbrs[i]
        key[i] = sum(pos[s] for s in ns) / len(ns) if ns else pos[i]
      row.sort(key=key.__getitem__)
      for k, i in enumerate(row): pos[i] = float(k)
  sweep(rows[1:], srcs)
  sweep(rows[-2::-1], users)
  width = max((len(r) for r in rows), default=0)
  ret: dict[int, tuple[float, float]] = {}
  for d, row in enumerate(rows):
    off = (width - len(row)) / 2
    for k, i in enumerate(row): ret[i] = ((off + k) * (NODE_W + GAP_X), d * (NODE_H + GAP_Y))
  return ret
