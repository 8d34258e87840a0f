"""Trees a rewrite rule's pattern matches, for the generators' directed inputs (fuzz/campaign/scheduler.py Director).

A rule is reached only when a case holds the shape its pattern (a UPat) describes: `c ? false : true`, `x // x` with
one node twice, `(x != true) != true`. Random trees almost never put such a shape together; `PatternBuilder.build`
builds it outright: the pattern's ops (one drawn where it names several), its dtypes, its constants, one node for a
name bound twice, and the pattern's free variables drawn by the level's own generator (a callback). It gives None
where the pattern cannot give the dtype asked for, names an op the level cannot build, or builds a node the level's
spec refuses; the generator then draws as usual. Used by fuzz/gen/kernels.py (kernel ASTs) and fuzz/strategies.py
(index expressions).
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any, Callable, Sequence
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, UPat
from tinygrad.dtype import DType, dtypes, InvalidType

# a pattern's source left open (`UPat()`): any tree
ANY = UPat()
COMPARISONS = (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)
# sources of the ops a pattern is built with
ARITY: dict[Ops, int] = {**{o: 1 for o in (Ops.NEG, Ops.RECIPROCAL, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.TRUNC,
                                           Ops.CAST, Ops.BITCAST)},
                         **{o: 2 for o in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.FDIV, Ops.POW, Ops.IDIV, Ops.MOD,
                                           Ops.SHL, Ops.SHR, Ops.AND, Ops.OR, Ops.XOR, *COMPARISONS, Ops.THREEFRY)},
                         Ops.WHERE: 3, Ops.MULACC: 3}

@dataclass
class PatternBuilder:
  """The level's side of building a pattern:
  ch        the level's Chooser (the choices are the case's bytes like every other)
  free      free(dtype, depth): a tree of that dtype (the pattern's free variables)
  const     const(dtype): a constant the level would draw
  can       can(op, dtype): the level builds `op` computing `dtype` (comparisons: their operand dtype)
  legal     legal(node): the level's spec holds for the node
  dtypes    the dtypes a cast's or comparison's operand may have
  other     other(op, dtype, depth): an op with no fixed sources (a LOAD, a REDUCE) built the level's way, or None"""
  ch: Any
  free: Callable[[DType, int], UOp]
  const: Callable[[DType], UOp]
  can: Callable[[Ops, DType], bool]
  legal: Callable[[UOp], bool]
  dtypes: Sequence[DType]
  other: Callable[[Ops, DType, int], UOp | None] = lambda op, dt, depth: None

  def build(self, p: Any, dt: DType, depth: int, bound: dict[str, UOp] | None = None) -> UOp | None:
    """A tree of dt that pattern `p` matches (`bound`: the names bound so far, shared by the whole pattern)."""
    bound = {} if bound is None else bound
    if p.name is not None and p.name in bound: return bound[p.name] if bound[p.name].dtype == dt else None
    if p.dtype is not None and dt not in p.dtype: return None
    if (alts := getattr(p, "alts", None)): ret = self.build(self.ch.choice(list(alts)), dt, depth, bound)
    elif p.op is None: ret = self.free(dt, depth - 1)
    else: ret = self.build_op(self.ch.choice(sorted(p.op, key=lambda o: o.value)), p, dt, depth, bound)
    if ret is not None and p.name is not None: bound[p.name] = ret
    return ret

  def build_op(self, op: Ops, p: Any, dt: DType, depth: int, bound: dict[str, UOp]) -> UOp | None:
    if op is Ops.CONST:
      if p.arg is None: return self.const(dt)
      if isinstance(p.arg, InvalidType): return UOp.invalid() if dt is dtypes.index and self.can(op, dt) else None
      return UOp.const(dt, p.arg) if isinstance(p.arg, (bool, int, float)) else None
    if (arity := ARITY.get(op)) is None: return self.other(op, dt, depth)
    if op in COMPARISONS and dt is not dtypes.bool: return None
    if op not in (*COMPARISONS, Ops.CAST, Ops.BITCAST) and not self.can(op, dt): return None
    srcs = p.src
    pats: tuple[Any, ...] = (tuple(self.ch.choice(srcs)) if isinstance(srcs, list) else (srcs,) * arity
                             if srcs is not None else (ANY,) * arity)
    if len(pats) != arity: return None
    kids: list[UOp] = []
    for i, sp in enumerate(pats):
      sdt = self.src_dtype(op, sp, i, dt, bound) if op not in COMPARISONS or i == 0 else kids[0].dtype
      if sdt is None or (k := self.build(sp, sdt, depth - 1, bound)) is None: return None
      kids.append(k)
    ret = kids[0].cast(dt) if op is Ops.CAST else kids[0].bitcast(dt) if op is Ops.BITCAST else UOp(op, dt, tuple(kids))
    return ret if self.legal(ret) else None

  def src_dtype(self, op: Ops, sp: Any, i: int, dt: DType, bound: dict[str, UOp]) -> DType | None:
    """The dtype of source i: the op's own rule, else what the pattern or an earlier binding says."""
    if op is Ops.WHERE: return dtypes.bool if i == 0 else dt
    if op not in (*COMPARISONS, Ops.CAST, Ops.BITCAST): return dt
    if sp.name is not None and sp.name in bound: return bound[sp.name].dtype
    fits = [d for d in dict.fromkeys(self.dtypes) if sp.dtype is None or d in sp.dtype]
    if op in COMPARISONS: fits = [d for d in fits if self.can(op, d)]
    if op is Ops.CAST: fits = [d for d in fits if d is not dt]
    if op is Ops.BITCAST: fits = [d for d in fits if d not in (dt, dtypes.bool) and d.itemsize == dt.itemsize]
    return self.ch.choice(fits) if fits else None

__all__ = ["PatternBuilder", "ARITY", "ANY", "COMPARISONS"]
