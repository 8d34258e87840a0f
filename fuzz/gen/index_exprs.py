"""The symbolic-level generator: random index expressions (dtypes.index or a wrapping fixed-width int) over bounded
variables and ranges, with masks, pads and div/mod, drawn from a `Chooser`. Public through fuzz.strategies
(`build_index_expression`, `index_expressions`)."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Any, Callable
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes, DType, InvalidType
from fuzz.gen.choosers import Chooser

DEFAULT_OP_WEIGHTS = {"add": 6, "sub": 3, "mul": 4, "mulx": 1, "div": 4, "mod": 4, "divx": 1, "modx": 1, "max": 2,
                      "where": 2, "neg": 1, "masked": 1, "pad": 1}

@dataclass
class IndexExprConfig:
  """Knobs of the index expression builder. Small bounds keep the z3 proofs cheap; negative values are on purpose."""
  max_depth: int = 4
  n_vars: tuple[int, int] = (1, 3)
  var_lo: tuple[int, int] = (-8, 8)
  var_span: tuple[int, int] = (0, 16)
  range_end: tuple[int, int] = (1, 16)
  const: tuple[int, int] = (-12, 12)
  invalid: bool = True
  # a fixed-width signed int (e.g. dtypes.int32) has no ranges and no Invalid, and wraps; `big_const` draws some
  # constants from a wide range so the wrapping matters
  dtype: DType = dtypes.index
  big_const: tuple[int, int] | None = None
  # op names and their weights; "mulx" multiplies two expressions (nonlinear), "divx"/"modx" divide by an expression;
  # "masked" gates an expression by a random condition, "pad" is the coordinate of one to three pads of a view (each a
  # shift valid inside its extent: a pad of a pad nests the gates, as views compose)
  ops: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_OP_WEIGHTS))
  # rewrite-rule patterns (UPats) an expression or condition is built from one time in 1/p_pattern: a directed
  # config's (fuzz/gen/patterns.py), for a rule the plain builder's shapes do not reach
  patterns: tuple[Any, ...] = ()
  p_pattern: float = 0.0

def wrapping_config(dtype: DType, max_depth: int = 4) -> IndexExprConfig:
  """Expressions in a fixed-width int (signed or unsigned) whose values reach the wrap-around: variables anywhere in the
  range, some constants as wide as the type. Nonlinear ops are left out: z3 proves them slowly on bit-vectors wider
  than 8."""
  lo, m = int(dtypes.min(dtype)), int(dtypes.max(dtype))
  ops = DEFAULT_OP_WEIGHTS if dtype.itemsize == 1 else {**DEFAULT_OP_WEIGHTS, "mulx": 0, "divx": 0, "modx": 0}
  return IndexExprConfig(max_depth=max_depth, dtype=dtype, var_lo=(lo, m), var_span=(0, max((m - lo) // 8, 16)),
                         big_const=(lo, m), ops=dict(ops))

def _leaf_pool(ch: Chooser, cfg: IndexExprConfig) -> list[UOp]:
  pool: list[UOp] = []
  for i in range(ch.integer(*cfg.n_vars)):
    if cfg.dtype is dtypes.index and ch.integer(0, 2) == 0:
      pool.append(UOp.range(ch.integer(*cfg.range_end), i, ch.choice([AxisType.LOOP, AxisType.REDUCE])))
    else:
      lo = ch.integer(*cfg.var_lo)
      hi = min(lo + ch.integer(*cfg.var_span), int(dtypes.max(cfg.dtype)))
      pool.append(UOp.variable("abc"[i % 3] + str(i // 3), lo, hi, cfg.dtype))
  return pool

class _IndexBuilder:
  def __init__(self, ch: Chooser, cfg: IndexExprConfig):
    self.ch, self.cfg, self.pool = ch, cfg, _leaf_pool(ch, cfg)
    masks = cfg.invalid and cfg.dtype is dtypes.index
    self.op_names = [k for k, w in cfg.ops.items() for _ in range(w) if k not in ("masked", "pad") or masks]

  def const(self, nonzero: bool = False) -> UOp:
    big = self.cfg.big_const is not None and self.ch.integer(0, 3) == 0
    v = self.ch.integer(*(self.cfg.big_const if big and self.cfg.big_const is not None else self.cfg.const))
    return UOp.const(self.cfg.dtype, (v or 1) if nonzero else v)

  def leaf(self) -> tuple[UOp, bool]:
    return (self.const(), False) if self.ch.integer(0, 3) == 0 else (self.ch.choice(self.pool), False)

  def cond(self, depth: int) -> UOp:
    """A bool built only from expressions that are never invalid (an index gate must itself be valid)."""
    if depth > 0 and (got := self.instance(dtypes.bool, depth, False)) is not None: return got
    k = self.ch.integer(0, 5) if depth > 0 else self.ch.integer(0, 1)
    a = self.valid_expr(depth - 1)
    if k in (0, 2): return a < (self.const() if k == 0 else self.valid_expr(depth - 1))
    if k in (1, 3): return a.ne(self.const() if k == 1 else self.valid_expr(depth - 1))
    if k == 4:
      l, r = self.cond(depth - 1), self.cond(depth - 1)
      return l & r if self.ch.integer(0, 1) else l | r
    return self.cond(depth - 1).ne(True)

  def pad(self, depth: int) -> UOp:
    """A coordinate through 1-3 pads (and shrinks) of a view: each shifts it by s and is valid where the shifted
    coordinate is inside [0, n); the gate is on the valid coordinate and wraps the inner, already gated, one."""
    core = self.valid_expr(depth - 1)
    e = core
    for _ in range(self.ch.integer(1, 3)):
      s, n = self.ch.integer(-4, 4), self.ch.integer(1, 16)
      core, e = core + s, e + s
      e = ((core < 0).logical_not() & (core < n)).where(e, UOp.invalid())
    return e

  def valid_expr(self, depth: int) -> UOp:
    e, _ = self.expr(max(depth, 0), allow_invalid=False)
    return e

  def divisor(self, depth: int) -> UOp:
    d = self.valid_expr(depth - 1)
    return d if d.vmin > 0 or d.vmax < 0 else self.const(nonzero=True)

  def expr(self, depth: int, allow_invalid: bool = True) -> tuple[UOp, bool]:
    """(expression, may it be invalid)."""
    if depth <= 0 or self.ch.integer(0, 4) == 0: return self.leaf()
    if (got := self.instance(self.cfg.dtype, depth, allow_invalid)) is not None:
      return got, any(u.op is Ops.CONST and isinstance(u.arg, InvalidType) for u in got.toposort())
    op = self.ch.choice(self.op_names)
    if op in ("masked", "pad") and not allow_invalid: op = "add"
    if op == "pad": return self.pad(depth), True
    if op == "masked":
      e, _ = self.expr(depth - 1, allow_invalid)
      return self.cond(depth - 1).where(e, UOp.invalid()), True
    if op == "neg":
      e, m = self.expr(depth - 1, allow_invalid)
      return -e, m
    if op == "where":
      (a, ma), (b, mb) = self.expr(depth - 1, allow_invalid), self.expr(depth - 1, allow_invalid)
      return self.cond(depth - 1).where(a, b), ma or mb
    a, ma = self.expr(depth - 1, allow_invalid)
    if op in ("mul", "div", "mod"): b, mb = self.const(nonzero=op != "mul"), False
    elif op in ("divx", "modx"): b, mb = self.divisor(depth), False
    else: b, mb = self.expr(depth - 1, allow_invalid)
    if self.ch.integer(0, 5) == 0 and op in ("add", "mul", "max", "mulx"): a, b = b, a
    return _BINARY[op](a, b), ma or mb

  def instance(self, dt: DType, depth: int, allow_invalid: bool) -> UOp | None:
    """One time in 1/p_pattern, a tree of dt one of the config's patterns matches (fuzz/gen/patterns.py), or None."""
    if not self.cfg.patterns or self.ch.integer(0, 9999) >= int(self.cfg.p_pattern * 10000): return None
    from fuzz.gen.patterns import PatternBuilder, COMPARISONS
    idx_ops = {Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.NEG, Ops.WHERE, Ops.CONST}
    def can(op: Ops, d: DType) -> bool:
      if op is Ops.CONST: return True
      if d is dtypes.bool: return op in (Ops.AND, Ops.OR, Ops.WHERE, *COMPARISONS)
      return d is self.cfg.dtype and (op in idx_ops or op in COMPARISONS)
    def legal(u: UOp) -> bool:
      # a divisor that may be 0 is the builder's own business (divisor()); Invalid only where masks are built
      if u.op in (Ops.IDIV, Ops.MOD) and u.src[1].vmin <= 0 <= u.src[1].vmax: return False
      inv = any(x.op is Ops.CONST and isinstance(x.arg, InvalidType) for x in u.src)
      return not inv or (allow_invalid and self.cfg.invalid and self.cfg.dtype is dtypes.index)
    def free(d: DType, k: int) -> UOp: return self.cond(k) if d is dtypes.bool else self.expr(k, allow_invalid)[0]
    def const(d: DType) -> UOp: return UOp.const(d, bool(self.ch.integer(0, 1))) if d is dtypes.bool else self.const()
    pb = PatternBuilder(self.ch, free, const, can, legal, (self.cfg.dtype, dtypes.bool))
    return pb.build(self.ch.choice(self.cfg.patterns), dt, depth)

_BINARY: dict[str, Callable[[UOp, UOp], UOp]] = {
  "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "mulx": lambda a, b: a * b,
  "div": lambda a, b: a // b, "divx": lambda a, b: a // b, "mod": lambda a, b: a % b, "modx": lambda a, b: a % b,
  "max": lambda a, b: a.maximum(b)}

def variables_of(expr: UOp) -> list[UOp]:
  """The DEFINE_VARs and RANGEs an expression depends on, in toposort order."""
  return [u for u in expr.toposort() if u.op in (Ops.DEFINE_VAR, Ops.RANGE, Ops.SPECIAL)]

def build_index_expression(ch: Chooser, cfg: IndexExprConfig | None = None) -> tuple[UOp, list[UOp]]:
  """A random index expression (dtypes.index, or bool for a comparison at the root) and the variables it uses."""
  cfg = cfg or IndexExprConfig()
  b = _IndexBuilder(ch, cfg)
  e = b.cond(cfg.max_depth - 1) if ch.integer(0, 7) == 0 else b.expr(cfg.max_depth)[0]
  return e, variables_of(e)

__all__ = ["DEFAULT_OP_WEIGHTS", "IndexExprConfig", "wrapping_config", "variables_of", "build_index_expression"]
