"""validate_index: a z3 proof that every LOAD/STORE index is inside its buffer whenever its gate is true.

Model of the index math: unbounded integers, C truncating IDIV/MOD, RANGE and SPECIAL in [0, end), DEFINE_VAR in
[lo, hi]; loaded integers (and anything not modeled, e.g. a cast from a float) are free values bounded by their dtype.
The gate is the `cond.where(idx, Invalid)` mask of a kernel, or the third source of a program's INDEX and the IF blocks
around the access. One solver per call; proved accesses are cached per node, so a kernel seen again costs nothing.
"""
from __future__ import annotations
import weakref
from typing import Any, NamedTuple, Sequence
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import PtrDType, dtypes
from spec.shared_spec import is_invalid, is_masked

class IndexOutOfBounds(Exception):
  """An access z3 shows can leave its buffer: `model` maps variable names to a witness, `index` is the bad offset."""
  def __init__(self, msg: str, node: UOp, model: dict[str, int], index: int | None):
    self.node, self.model, self.index = node, model, index
    super().__init__(msg)

_proved: weakref.WeakSet[UOp] = weakref.WeakSet()

# integer and bool ops with a z3 meaning; any other op (a LOAD, a float cast, ...) is a free value bounded by its dtype
MODELED = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.MAX, Ops.MULACC, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ,
                     Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR, Ops.AND, Ops.OR, Ops.XOR})
BOOL_OPS = (Ops.AND, Ops.OR, Ops.XOR, Ops.CMPNE, Ops.CMPEQ)

def _tdiv(z3: Any, a: Any, b: Any) -> Any:
  # C division truncates toward zero; z3's integer division rounds toward minus infinity for positive divisors
  q = z3.Abs(a) / z3.Abs(b)
  return z3.If((a >= 0) == (b > 0), q, -q)

class _Z3Index:
  """Translates index math into z3 terms; `pending` holds the bounds of the variables made since the last flush."""
  def __init__(self, z3: Any):
    self.z3 = z3
    self.cache: dict[tuple[UOp, int], Any] = {}
    self.pending: list[Any] = []
    self.names: dict[str, Any] = {}

  def fresh(self, u: UOp, base: str) -> Any:
    """A free value of u's dtype (within the dtype's range for ints): z3 may choose anything u could be."""
    name = base if base not in self.names else f"{base}_{len(self.names)}"
    if u.dtype.scalar() is dtypes.bool: v = self.z3.Bool(name)
    else:
      v = self.z3.Int(name)
      if dtypes.is_int(u.dtype) and not isinstance(u.dtype, PtrDType):
        self.pending += [v >= int(dtypes.min(u.dtype)), v <= int(dtypes.max(u.dtype))]
    self.names[name] = v
    return v

  def __call__(self, u: UOp, lane: int = 0) -> Any:
    key = (u, lane if u.dtype.count > 1 else 0)
    if (ret := self.cache.get(key)) is None: ret = self.cache[key] = self.build(u, key[1])
    return ret

  def build(self, u: UOp, lane: int) -> Any:
    z3, op, s = self.z3, u.op, u.src
    if isinstance(u.dtype, PtrDType) or not (dtypes.is_int(u.dtype) or u.dtype.scalar() is dtypes.bool):
      return self.fresh(u, "value")
    if op is Ops.CONST: return self.fresh(u, "invalid") if is_invalid(u) else self.const(u.dtype.scalar(), u.arg)
    if op is Ops.VCONST: return self.const(u.dtype.scalar(), u.arg[lane])
    if op is Ops.VECTORIZE: return self(s[lane])
    if op is Ops.GEP: return self(s[0], u.arg[lane])
    if op is Ops.DEFINE_VAR:
      v = self.fresh(u, u.arg[0])
      self.pending += [v >= u.arg[1], v <= u.arg[2]]
      return v
    if op in (Ops.RANGE, Ops.SPECIAL):
      v = self.fresh(u, f"r{u.arg[0]}" if op is Ops.RANGE else str(u.arg))
      self.pending += [v >= 0, v < self(s[0])]
      return v
    if op is Ops.BIND: return self(s[0])
    if op is Ops.CAST: return self.cast(u, s[0], lane)
    if op is Ops.WHERE: return z3.If(self(s[0], lane), self(s[1], lane), self(s[2], lane))
    if op not in MODELED: return self.fresh(u, op.name.lower())
    srcs = [self(x, lane) for x in s]
    if u.dtype.scalar() is dtypes.bool and op in BOOL_OPS and s[0].dtype.scalar() is dtypes.bool:
      a, b = srcs
      if op is Ops.AND: return z3.And(a, b)
      if op is Ops.OR: return z3.Or(a, b)
      return a == b if op is Ops.CMPEQ else z3.Xor(a, b)
    return self.alu(u, srcs)

  def const(self, dt: Any, v: Any) -> Any:
    return self.z3.BoolVal(bool(v)) if dt is dtypes.bool else self.z3.IntVal(int(v))

  def cast(self, u: UOp, x: UOp, lane: int) -> Any:
    src_bool = x.dtype.scalar() is dtypes.bool
    if not (dtypes.is_int(x.dtype) or src_bool): return self.fresh(u, "cast")
    v = self(x, lane)
    if u.dtype.scalar() is dtypes.bool: return v if src_bool else v != 0
    # NOTE: integer casts are exact here: index math is lowered to a dtype its bounds fit in
    return self.z3.If(v, 1, 0) if src_bool else v

  def alu(self, u: UOp, srcs: list[Any]) -> Any:
    op = u.op
    if op is Ops.ADD: return srcs[0] + srcs[1]
    if op is Ops.SUB: return srcs[0] - srcs[1]
    if op is Ops.MUL: return srcs[0] * srcs[1]
    if op is Ops.NEG: return -srcs[0]
    if op is Ops.MAX: return self.z3.If(srcs[0] >= srcs[1], srcs[0], srcs[1])
    if op is Ops.MULACC: return srcs[0] * srcs[1] + srcs[2]
    if op is Ops.CMPLT: return srcs[0] < srcs[1]
    if op is Ops.CMPNE: return srcs[0] != srcs[1]
    if op is Ops.CMPEQ: return srcs[0] == srcs[1]
    if op in (Ops.IDIV, Ops.MOD):
      # NOTE: C leaves x/0 undefined; z3 leaves it unconstrained, which is as much as can be said
      q = _tdiv(self.z3, srcs[0], srcs[1])
      return q if op is Ops.IDIV else srcs[0] - srcs[1] * q
    b = u.src[1] if len(u.src) == 2 else None
    if b is not None and b.op is Ops.CONST and type(b.arg) is int:
      if op is Ops.SHL and 0 <= b.arg < 64: return srcs[0] * (1 << b.arg)
      # an arithmetic right shift rounds down, as z3's division by a positive constant does
      if op is Ops.SHR and 0 <= b.arg < 64: return srcs[0] / (1 << b.arg)
      if op is Ops.AND and b.arg >= 0:
        v = self.fresh(u, "and")
        self.pending += [v >= 0, v <= b.arg, self.z3.Implies(srcs[0] >= 0, v <= srcs[0])]
        return v
    return self.fresh(u, op.name.lower())

class Access(NamedTuple):
  buf: UOp          # the DEFINE_GLOBAL/LOCAL/REG under the INDEX (through AFTERs)
  size: int         # its PtrDType.size in elements
  idx: UOp          # the flat index, mask removed
  gates: list[UOp]  # the mask's conditions and the INDEX's gate
  width: int        # elements accessed from idx on (a pointer vector's width)

def access_of(u: UOp) -> Access | None:
  """What a LOAD/STORE touches, or None when it has no sized buffer to check against."""
  if u.op not in (Ops.LOAD, Ops.STORE) or not u.src or u.src[0].op is not Ops.INDEX: return None
  index = u.src[0]
  if len(index.src) < 2: return None
  buf, idx, gates = index.src[0], index.src[1], list(index.src[2:3])
  while buf.op is Ops.AFTER: buf = buf.src[0]
  while is_masked(idx): gates, idx = gates + [idx.src[0]], idx.src[1]
  if not isinstance(buf.dtype, PtrDType) or buf.dtype.size < 0: return None
  return Access(buf, buf.dtype.size, idx, gates, index.dtype.vcount if isinstance(index.dtype, PtrDType) else 1)

def accesses(graph_or_list: UOp | Sequence[UOp]) -> list[tuple[int, UOp, tuple[UOp, ...]]]:
  """(position, LOAD/STORE, gates of the IF blocks around it) for every access; a graph has no IF blocks."""
  if isinstance(graph_or_list, UOp):
    return [(i, u, ()) for i, u in enumerate(graph_or_list.toposort()) if u.op in (Ops.LOAD, Ops.STORE)]
  ret: list[tuple[int, UOp, tuple[UOp, ...]]] = []
  ifs: list[UOp] = []
  for i, u in enumerate(graph_or_list):
    if u.op is Ops.IF: ifs.append(u.src[0])
    elif u.op is Ops.ENDIF and ifs: ifs.pop()
    elif u.op in (Ops.LOAD, Ops.STORE): ret.append((i, u, tuple(ifs)))
  return ret

def validate_index(graph_or_list: UOp | Sequence[UOp]) -> None:
  """Prove every LOAD/STORE in bounds under its gate (and, in a program, the IF blocks around it); raise
  IndexOutOfBounds with a witness (the variable values) otherwise."""
  # NOTE: a proof under enclosing IFs holds only at that place in the program, so only IF-free verdicts are cached
  todo = [(i, u, ifs, a) for i, u, ifs in accesses(graph_or_list)
          if (ifs or u not in _proved) and (a := access_of(u)) is not None]
  if not todo: return
  import z3
  tr, solver = _Z3Index(z3), z3.Solver()
  solver.set("timeout", 10_000)
  for pos, u, ifs, a in todo:
    for lane in range(a.idx.dtype.count):
      i, conds = tr(a.idx, lane), [tr(g, lane) for g in a.gates + list(ifs)]
      solver.add(*tr.pending)
      tr.pending = []
      solver.push()
      solver.add(*conds, z3.Or(i < 0, i + (a.width - 1) >= a.size))
      res = solver.check()
      if res == z3.sat: _report(z3, solver.model(), tr, pos, u, a, i, lane)
      if res == z3.unknown and not (0 <= a.idx.vmin and a.idx.vmax + a.width - 1 < a.size):
        raise IndexOutOfBounds(f"{u.op} at position {pos}: z3 could not prove its index within {a.buf.op} {a.buf.arg} "
                               f"(size {a.size}): {solver.reason_unknown()}", u, {}, None)
      solver.pop()
    if not ifs: _proved.add(u)

def _report(z3: Any, m: Any, tr: _Z3Index, pos: int, u: UOp, a: Access, i: Any, lane: int) -> None:
  def val(v: Any) -> int:
    e = m.eval(v, model_completion=True)
    return int(z3.is_true(e)) if z3.is_bool(e) else int(e.as_long())
  model = {name: val(v) for name, v in sorted(tr.names.items())}
  bad = val(i)
  shown = ", ".join(f"{k}={v}" for k, v in model.items())
  where = f"[{bad}..{bad + a.width - 1}]" if a.width > 1 else f"[{bad}]"
  if a.idx.dtype.count > 1: where += f" (lane {lane})"
  raise IndexOutOfBounds(f"{u.op} at position {pos} can access {a.buf.op} {a.buf.arg}{where}, outside its size "
                         f"{a.size}, when {shown or 'always'}", u, model, bad)
