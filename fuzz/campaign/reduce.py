"""The reducer: a finding's case made as small as it goes while it keeps the same signature.

`candidates(level, case)` proposes smaller cases, the biggest cuts first; `Reduction` walks them greedily: it hands out
batches of candidates (a campaign checks them in its worker processes, so a candidate that crashes or hangs is an
answer too), accepts the first that fails with the same signature, and starts again from it until no candidate is
accepted or its budget of checks runs out. Every accepted case is strictly cheaper (`cost`: nodes, then opts, then
the work of its loops), so reduction ends.

Kernel ASTs: drop a store; drop the candidate opts (all, then one at a time); replace a value by a constant of its
dtype (0, 1) or by one of its same-dtype sources, a load by another load; replace a REDUCE by its value at the first
point of its ranges, and a load of a local BUFFERIZE by the value it buffered at that address; store a cast's source,
the buffer retyped to its dtype; remove a range (its index becomes 0) or shrink it (to 1, to half); turn a DEFINE_VAR
end into its value; drop an index mask; fold index math of one value; replace a constant address by a loop index or
another address in the graph; renumber the buffers and ranges. Symbolic expressions: a node replaced by a source or a
small constant. Tensor programs: keep one output; replace a step by an input of its shape.
"""
from __future__ import annotations
import dataclasses, time
from typing import Any, Callable, Iterator
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, PtrDType, InvalidType
from tinygrad.uop.symbolic import has_invalid

# ---- rebuilding graphs ----

def rebuild(root: UOp, fn: Callable[[UOp, tuple[UOp, ...]], UOp | None]) -> UOp:
  """Rebuild `root` bottom-up: fn(node, new sources) returns a replacement, or None to keep the node (with its new
  sources). Nodes in args (a KERNEL's AST) are not entered."""
  new: dict[UOp, UOp] = {}
  for u in root.toposort():
    src = tuple(new[s] for s in u.src)
    r = fn(u, src)
    new[u] = r if r is not None else (u if src == u.src else u.replace(src=src))
  return new[root]

def substitute(root: UOp, mapping: dict[UOp, UOp]) -> UOp:
  return rebuild(root, lambda u, src: mapping.get(u))

def is_value(u: UOp) -> bool:
  """A node computing a value of the kernel (not index math, not structure)."""
  if u.dtype in (dtypes.void, dtypes.index) or isinstance(u.dtype, PtrDType) or u.dtype.count != 1: return False
  return u.op in GroupOp.ALU or u.op in (Ops.LOAD, Ops.REDUCE, Ops.CAST, Ops.BITCAST)

def drop_range(ast: UOp, r: UOp) -> UOp:
  """The kernel with range `r` gone: its index is 0, an END or REDUCE no longer closes it (and one that closes
  nothing else becomes its value)."""
  zero = UOp.const(dtypes.index, 0)
  def fn(u: UOp, src: tuple[UOp, ...]) -> UOp | None:
    if u is r: return zero
    if u.op in (Ops.END, Ops.REDUCE, Ops.BUFFERIZE) and r in u.src[1:]:
      keep = tuple(s for s, o in zip(src[1:], u.src[1:]) if o is not r)
      if not keep and u.op is not Ops.BUFFERIZE: return src[0]
      return u.replace(src=(src[0], *keep))
    return None
  return rebuild(ast, fn)

def resize_range(ast: UOp, r: UOp, n: int) -> UOp:
  return substitute(ast, {r: r.replace(src=(UOp.const(dtypes.index, n),))})

def normalize(ast: UOp) -> UOp:
  """Buffers renumbered 0.. in order of their first use (stores first), ranges 0.. in order of appearance."""
  topo = ast.toposort()
  globs = sorted({u.arg for u in topo if u.op is Ops.DEFINE_GLOBAL})
  bmap = {old: i for i, old in enumerate(globs)}
  rngs = [u for u in topo if u.op is Ops.RANGE]
  rmap = {r.arg[0]: i for i, r in enumerate(sorted(rngs, key=lambda r: r.arg[0]))}
  def fn(u: UOp, src: tuple[UOp, ...]) -> UOp | None:
    if u.op is Ops.DEFINE_GLOBAL: return u.replace(arg=bmap[u.arg])
    if u.op is Ops.RANGE: return u.replace(src=src, arg=(rmap[u.arg[0]], *u.arg[1:]))
    return None
  return rebuild(ast, fn)

def subtree_size(u: UOp) -> int: return len(u.toposort())

def store_uncast(ast: UOp, st: UOp) -> UOp:
  """STORE `st` of a CAST: the buffer retyped to the cast's source dtype, stored without the cast (its other loads
  and stores retyped too: a candidate that is then not kernel_spec is refused like any other)."""
  g, x = st.src[0].src[0], st.src[1].src[0]
  if g.op is not Ops.DEFINE_GLOBAL or not isinstance(g.dtype, PtrDType) or x.dtype.count != 1: return ast
  g2 = g.replace(dtype=x.dtype.ptr(g.dtype.size))
  def fn(u: UOp, src: tuple[UOp, ...]) -> UOp | None:
    if u is g: return g2
    if u.op is Ops.INDEX and u.src[0] is g: return u.replace(dtype=g2.dtype, src=src)
    if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0] is g: return u.replace(dtype=x.dtype, src=src)
    if u is st: return u.replace(src=(src[0], src[1].src[0], *src[2:]))
    return None
  return rebuild(ast, fn)

def shrink_buffers(ast: UOp) -> UOp:
  """Every buffer cut to the elements its indices can reach (by their bounds)."""
  need: dict[UOp, int] = {}
  for u in ast.toposort():
    if u.op is not Ops.INDEX or u.src[0].op is not Ops.DEFINE_GLOBAL: continue
    idx = u.src[1].src[1] if u.src[1].op is Ops.WHERE and isinstance(u.src[1].src[2].arg, InvalidType) else u.src[1]
    if isinstance(idx.arg, InvalidType): continue
    need[u.src[0]] = max(need.get(u.src[0], 1), int(idx.vmax) + 1)
  sizes = {g: n for g, n in need.items() if isinstance(g.dtype, PtrDType) and 0 < n < g.dtype.size}
  if not sizes: return ast
  def fn(u: UOp, src: tuple[UOp, ...]) -> UOp | None:
    if u in sizes: return u.replace(dtype=u.dtype.base.ptr(sizes[u]))
    if u.op is Ops.INDEX and u.src[0] in sizes: return u.replace(dtype=src[0].dtype, src=src)
    return None
  return rebuild(ast, fn)

# ---- kernel candidates ----

def kernel_candidates(case: Any) -> Iterator[Any]:
  """Smaller KernelCases, the biggest cuts first (see the module docstring)."""
  ast = case.ast
  def with_ast(a: UOp) -> Any: return dataclasses.replace(case, ast=a)
  if len(ast.src) > 1:
    for i in range(len(ast.src)): yield with_ast(ast.replace(src=ast.src[:i] + ast.src[i + 1:]))
  if case.opts:
    yield dataclasses.replace(case, opts=())
    for i in range(len(case.opts)): yield dataclasses.replace(case, opts=case.opts[:i] + case.opts[i + 1:])
  elif case.opts is None: yield dataclasses.replace(case, opts=())
  topo = ast.toposort()
  values = sorted((u for u in topo if is_value(u)), key=subtree_size, reverse=True)
  loads: dict[Any, list[UOp]] = {}
  for u in topo:
    if u.op is Ops.LOAD and is_value(u): loads.setdefault(u.dtype, []).append(u)
  for u in values:
    if u.op is Ops.REDUCE:
      zeros = {r: UOp.const(dtypes.index, 0) for r in u.src[1:]}
      yield with_ast(substitute(ast, {u: substitute(u.src[0], zeros)}))
    # a load of a local BUFFERIZE: the value it buffered, at the first point of the buffer's ranges
    if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and (bz := u.src[0].src[0]).op is Ops.BUFFERIZE and \
       bz.src[0].dtype == u.dtype:
      # NOTE: over one range and read at a plain address, the value at that address (the same element); else the first
      idx = u.src[0].src[1]
      if len(bz.src) == 2 and idx.op is not Ops.WHERE:
        yield with_ast(substitute(ast, {u: substitute(bz.src[0], {bz.src[1]: idx})}))
      yield with_ast(substitute(ast, {u: substitute(bz.src[0], {r: UOp.const(dtypes.index, 0) for r in bz.src[1:]})}))
    for s in u.src:
      if s.dtype == u.dtype and is_value(s) and u.op is not Ops.REDUCE: yield with_ast(substitute(ast, {u: s}))
    # a load replaced by another load of its dtype (two inputs become one: a node or more fewer)
    if u.op is Ops.LOAD:
      for v in loads.get(u.dtype, ()):
        if v is not u and u not in v.toposort(): yield with_ast(substitute(ast, {u: v}))
    if u.op is Ops.CONST: continue
    yield with_ast(substitute(ast, {u: UOp.const(u.dtype, 0)}))
    yield with_ast(substitute(ast, {u: UOp.const(u.dtype, 1)}))
  for u in topo:
    if u.op is Ops.STORE and u.src[1].op is Ops.CAST and u.src[0].op is Ops.INDEX:
      if (un := store_uncast(ast, u)) is not ast: yield with_ast(un)
  rngs = sorted((u for u in topo if u.op is Ops.RANGE), key=lambda r: -int(r.src[0].vmax))
  for r in rngs: yield with_ast(drop_range(ast, r))
  for r in rngs:
    if r.src[0].op is Ops.DEFINE_VAR and r.src[0].arg[0] in case.var_vals:
      yield with_ast(resize_range(ast, r, case.var_vals[r.src[0].arg[0]]))
    n = int(r.src[0].vmax)
    for m in dict.fromkeys((1, n // 2, n - 1)):
      if 0 < m < n and r.src[0].op is Ops.CONST: yield with_ast(resize_range(ast, r, m))
  for u in topo:
    if u.op is Ops.WHERE and len(u.src) == 3 and isinstance(u.src[2].arg, InvalidType):
      yield with_ast(substitute(ast, {u: u.src[1]}))
  # index math: a term of one value replaced by it (the same address, fewer nodes); a term replaced by one of its parts
  # (0 + x -> x, x * 1 -> x, ...)
  for u in sorted((u for u in topo if u.dtype is dtypes.index and u.op in GroupOp.ALU), key=subtree_size, reverse=True):
    if u.vmin == u.vmax and isinstance(u.vmin, int) and not has_invalid(u):
      yield with_ast(substitute(ast, {u: UOp.const(dtypes.index, u.vmin)}))
    for s in u.src:
      if s.dtype is dtypes.index and not isinstance(s.arg, InvalidType): yield with_ast(substitute(ast, {u: s}))
  # a constant address replaced by a loop index or another address the graph has anyway (a node fewer)
  addrs = [u.src[1] for u in topo if u.op is Ops.INDEX and u.src[1].op is Ops.CONST and isinstance(u.src[1].arg, int)]
  for u in topo:
    if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL and u.src[1].op is Ops.CONST and \
       isinstance(u.src[0].dtype, PtrDType):
      for r in [*rngs, *dict.fromkeys(addrs)]:
        if r is not u.src[1] and int(r.vmax) < u.src[0].dtype.size:
          yield with_ast(substitute(ast, {u: u.replace(src=(u.src[0], r))}))
  if (small := shrink_buffers(ast)) is not ast: yield with_ast(small)
  for u in topo:
    if u.op is Ops.CONST and is_value(u) and u.arg not in (0, 1, False, True):
      yield with_ast(substitute(ast, {u: UOp.const(u.dtype, 0)}))
  if (norm := normalize(ast)) is not ast: yield with_ast(norm)

def kernel_cost(case: Any) -> tuple[int, ...]:
  topo = case.ast.toposort()
  work = sum(int(u.src[0].vmax) for u in topo if u.op is Ops.RANGE)
  consts = sum(1 for u in topo if u.op is Ops.CONST and u.arg not in (0, 1, False, True))
  order = sum(u.arg for u in topo if u.op is Ops.DEFINE_GLOBAL) + sum(u.arg[0] for u in topo if u.op is Ops.RANGE)
  return (len(topo), len(case.opts) if case.opts is not None else 99, work, consts, order)

# ---- symbolic candidates ----

def symbolic_candidates(expr: UOp) -> Iterator[UOp]:
  for u in sorted(expr.toposort(), key=subtree_size, reverse=True):
    if u.op in (Ops.CONST, Ops.DEFINE_VAR, Ops.RANGE): continue
    for s in u.src:
      if s.dtype == u.dtype and not isinstance(s.arg, InvalidType): yield substitute(expr, {u: s})
    if u.dtype is dtypes.bool: yield substitute(expr, {u: UOp.const(dtypes.bool, True)})
    elif not dtypes.is_float(u.dtype):
      for c in (0, 1): yield substitute(expr, {u: UOp.const(u.dtype, c)})
  for u in expr.toposort():
    if u.op is Ops.CONST and type(u.arg) is int and u.arg not in (0, 1):
      for c in dict.fromkeys((0, 1, u.arg // 2)): yield substitute(expr, {u: UOp.const(u.dtype, c)})
    if u.op is Ops.DEFINE_VAR and u.arg[2] > u.arg[1]:
      yield substitute(expr, {u: UOp.variable(u.arg[0], u.arg[1], u.arg[1] + (u.arg[2] - u.arg[1]) // 2, u.dtype)})

def symbolic_cost(expr: UOp) -> tuple[int, ...]:
  topo = expr.toposort()
  return (len(topo), sum(abs(u.arg) for u in topo if u.op is Ops.CONST and type(u.arg) is int),
          sum(u.arg[2] - u.arg[1] for u in topo if u.op is Ops.DEFINE_VAR))

# ---- tensor candidates ----

def tensor_candidates(case: Any, build: Callable[[Any], Any]) -> Iterator[Any]:
  prog = case.program
  if len(prog.outputs) > 1:
    for o in prog.outputs: yield build(dataclasses.replace(case, outputs=(o,), program=None))
  steps = [i for i, d in enumerate(prog.defs) if isinstance(d, tuple)]
  for i in reversed(steps):
    yield build(dataclasses.replace(case, replaced=tuple(sorted({*case.replaced, i})), program=None))

def tensor_cost(case: Any) -> tuple[int, ...]:
  prog = case.program
  return (sum(isinstance(d, tuple) for d in prog.defs), len(prog.outputs))

# ---- the greedy walk ----

def candidates_for(level: Any, case: Any) -> Iterator[Any]:
  if level.name == "kernel": return kernel_candidates(case)
  if level.name == "symbolic": return symbolic_candidates(case)
  return tensor_candidates(case, level.build)

def cost_of(level: Any, case: Any) -> tuple[int, ...]:
  if level.name == "kernel": return kernel_cost(case)
  if level.name == "symbolic": return symbolic_cost(case)
  return tensor_cost(case)

class Reduction:
  """Greedy reduction of one case, driven from outside: `next_batch(n)` gives up to n candidates to check (as
  (case, its state)), `answer(batch, reproduced)` says which kept the signature (in batch order; the first wins).
  `done` when no candidate is left or `max_checks`/`max_seconds` are spent."""
  def __init__(self, level: Any, case: Any, valid: Callable[[Any], bool] | None = None, max_checks: int = 400,
               max_seconds: float = 300.0):
    self.level, self.current, self.valid = level, case, valid or (lambda c: True)
    self.cost = cost_of(level, case)
    self.checks, self.accepted, self.max_checks = 0, 0, max_checks
    self.deadline = time.monotonic() + max_seconds
    self.seen: set[str] = set()
    self._it: Iterator[Any] | None = candidates_for(level, case)
    self.done = False
    self.busy = False   # a batch is out for checking
    self.message = ""   # what the current case's failure says

  def next_batch(self, n: int) -> list[Any]:
    out: list[Any] = []
    while len(out) < n and self._it is not None:
      if self.checks + len(out) >= self.max_checks or time.monotonic() > self.deadline: break
      try: c = next(self._it)
      except StopIteration:
        self._it = None
        break
      except Exception: continue   # NOTE: a candidate the IR refuses to build (spec at construction) is no candidate
      try:
        if cost_of(self.level, c) >= self.cost or not self.valid(c): continue
        key = self.level.text(c) + repr(getattr(c, "opts", None))
      except Exception: continue
      if key in self.seen: continue
      self.seen.add(key)
      out.append(c)
    if not out: self.done = True
    return out

  def answer(self, batch: list[Any], reproduced: list[bool]) -> int | None:
    """Take the first candidate that reproduced (its index in the batch), if any."""
    self.checks += len(batch)
    for i, (c, ok) in enumerate(zip(batch, reproduced)):
      if not ok: continue
      self.current, self.cost = c, cost_of(self.level, c)
      self.accepted += 1
      self._it = candidates_for(self.level, c)
      return i
    return None

def reduce_locally(level: Any, case: Any, reproduces: Callable[[Any], bool], max_checks: int = 400,
                   valid: Callable[[Any], bool] | None = None) -> Any:
  """Reduce in this process (no crash isolation): for tests and for findings that cannot crash."""
  r = Reduction(level, case, valid, max_checks)
  while not r.done:
    batch = r.next_batch(1)
    if batch: r.answer(batch, [reproduces(batch[0])])
  return r.current

__all__ = ["Reduction", "reduce_locally", "kernel_candidates", "symbolic_candidates", "tensor_candidates", "normalize",
           "drop_range", "resize_range", "rebuild", "substitute", "kernel_cost", "cost_of", "candidates_for"]
