"""The symbolic oracle: z3 proves that `simplify()` keeps an index expression's value and that vmin/vmax bound it.

Semantics modelled (C, as the compiler's targets compute): dtypes.index is an unbounded integer (z3 Int); signed
fixed-width ints wrap (z3 bit-vectors); IDIV and MOD truncate toward zero; a DEFINE_VAR ranges over [lo, hi], a RANGE
over [0, end). Invalid is poison: an ALU op with an invalid source is invalid, `where` is invalid when its condition is
or when the branch it picks is. The simplified expression must be valid exactly where the original is, and equal to it
there.
"""
from __future__ import annotations
import itertools, math, random, time
from dataclasses import dataclass, field
from typing import Any, Callable
import z3
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, match_stats
from tinygrad.dtype import dtypes, InvalidType
from tinygrad.helpers import Context, cdiv, cmod
from fuzz.strategies import IndexExprConfig, RandomChooser, build_index_expression

# ---- UOp -> z3 ----

def _tdiv(a: Any, b: Any) -> Any:
  # z3's integer `/` is floor-like for a positive divisor; C truncates toward zero: divide magnitudes, fix the sign
  if isinstance(b, int): return z3.If(a >= 0, a / abs(b), -((-a) / abs(b))) * (1 if b > 0 else -1)
  ab = z3.If(b >= 0, b, -b)
  q = z3.If(a >= 0, a / ab, -((-a) / ab))
  return z3.If(b >= 0, q, -q)

def _z3bool(x: Any) -> Any: return z3.BoolVal(x) if isinstance(x, bool) else x

def _and(*xs: Any) -> Any:
  # NOTE: validity is the Python constant True for the (common) expressions without Invalid: smaller z3 terms
  rest = [x for x in xs if x is not True]
  return True if not rest else rest[0] if len(rest) == 1 else z3.And(*rest)

class Z3Translator:
  """Translates UOps to (value, valid) pairs of z3 terms; the bounds of each variable it meets go into `constraints`."""
  def __init__(self) -> None:
    self.cache: dict[UOp, tuple[Any, Any]] = {}
    self.vars: dict[UOp, Any] = {}
    self.constraints: list[Any] = []

  def _var(self, u: UOp) -> Any:
    if (v := self.vars.get(u)) is not None: return v
    if u.op is Ops.DEFINE_VAR:
      name = f"{u.arg[0]}[{u.arg[1]},{u.arg[2]}]"
      v, lo, hi = (z3.Int(name) if (bits := _bv_bits(u.dtype)) is None else z3.BitVec(name, bits)), u.arg[1], u.arg[2]
    else:
      end, _ = self.translate(u.src[0])
      v = z3.Int(f"{'r' if u.op is Ops.RANGE else 's'}{u.arg if u.op is Ops.SPECIAL else u.arg[0]}_{len(self.vars)}")
      lo, hi = 0, end - 1
    self.vars[u] = v
    self.constraints.append(z3.And(lo <= v, v <= hi))
    return v

  def translate(self, root: UOp) -> tuple[Any, Any]:
    for u in root.toposort():
      if u not in self.cache: self.cache[u] = self._one(u)
    return self.cache[root]

  def _one(self, u: UOp) -> tuple[Any, Any]:
    op = u.op
    if op is Ops.CONST:
      if isinstance(u.arg, InvalidType): return z3.IntVal(0), z3.BoolVal(False)
      if (bits := _bv_bits(u.dtype)) is not None: return z3.BitVecVal(int(u.arg), bits), True
      return (bool(u.arg) if u.dtype is dtypes.bool else int(u.arg)), True
    if op in (Ops.DEFINE_VAR, Ops.RANGE, Ops.SPECIAL): return self._var(u), True
    s = [self.cache[x] for x in u.src]
    vals = [v for v, _ in s]
    if op is Ops.WHERE:
      (c, cv), (a, av), (b, bv) = s
      if isinstance(c, bool): return (a, av) if c else (b, bv)
      return z3.If(c, a, b), _and(cv, av if av is bv else z3.If(c, _z3bool(av), _z3bool(bv)))
    return self._alu(u, vals), _and(*[ok for _, ok in s])

  def _alu(self, u: UOp, v: list[Any]) -> Any:
    op, is_bool = u.op, u.dtype is dtypes.bool
    # constants stay Python values; z3 folds them into the terms it builds
    if all(isinstance(x, (int, bool)) for x in v): return _py_alu(u, v)
    if op is Ops.ADD: return v[0] + v[1]
    if op is Ops.SUB: return v[0] - v[1]
    if op is Ops.MUL: return v[0] * v[1]
    if op is Ops.NEG: return -v[0]
    if op is Ops.IDIV: return v[0] / v[1] if _bv_bits(u.dtype) else _tdiv(v[0], v[1])  # bit-vector `/` is bvsdiv
    if op is Ops.MOD: return z3.SRem(v[0], v[1]) if _bv_bits(u.dtype) else v[0] - v[1] * _tdiv(v[0], v[1])
    if op is Ops.MAX: return z3.Or(v[0], v[1]) if is_bool else z3.If(v[0] >= v[1], v[0], v[1])
    if op is Ops.CMPLT: return v[0] < v[1] if u.src[0].dtype is not dtypes.bool else z3.And(z3.Not(v[0]), v[1])
    if op is Ops.CMPNE: return v[0] != v[1]
    if op is Ops.CMPEQ: return v[0] == v[1]
    if op is Ops.AND and is_bool: return z3.And(v[0], v[1])
    if op is Ops.OR and is_bool: return z3.Or(v[0], v[1])
    if op is Ops.XOR and is_bool: return z3.Xor(v[0], v[1])
    raise NotImplementedError(f"z3 translation: {op} of {u.dtype} is not modelled (the oracle covers index arithmetic)")

# C semantics of the index ops on Python ints and bools (bools only meet AND/OR/XOR/CMPNE/CMPEQ here)
PY_OPS: dict[Ops, Callable[..., Any]] = {
  Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b, Ops.NEG: lambda a: -a,
  Ops.IDIV: cdiv, Ops.MOD: cmod, Ops.MAX: max, Ops.CMPLT: lambda a, b: a < b, Ops.CMPNE: lambda a, b: a != b,
  Ops.CMPEQ: lambda a, b: a == b, Ops.AND: lambda a, b: a & b, Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b,
}

def _bv_bits(dt: Any) -> int | None:
  """Bit width of a fixed-width signed int (modelled as a z3 bit-vector); None for index and bool."""
  if dt in dtypes.uints: raise NotImplementedError(f"z3 translation: unsigned {dt} is not modelled")
  return dt.itemsize * 8 if dt in dtypes.sints else None

def _py_alu(u: UOp, v: list[Any]) -> Any:
  if u.op in (Ops.IDIV, Ops.MOD) and v[1] == 0: raise ZeroDivisionError(f"z3 translation: {u.op} by constant 0")
  return PY_OPS[u.op](*v)

def _bounds_hold(u: UOp, val: Any) -> Any:
  lo, hi = u.vmin, u.vmax
  if u.dtype is dtypes.bool:
    return z3.And(z3.Implies(z3.BoolVal(bool(lo)), val), z3.Implies(z3.Not(z3.BoolVal(bool(hi))), z3.Not(val)))
  return z3.And(int(lo) <= val, val <= int(hi))

# ---- checking ----

@dataclass
class CheckResult:
  """The verdict on one expression. `kind` is "" when proved, else what failed: value, validity, bounds or unknown."""
  expr: UOp
  simplified: UOp
  ok: bool
  kind: str = ""
  counterexample: dict[str, int] = field(default_factory=dict)
  # the same counterexample keyed by the DEFINE_VAR/RANGE UOps, so eval_index can replay it
  env: dict[UOp, int] = field(default_factory=dict)
  def __str__(self) -> str:
    if self.ok: return "ok"
    e, s = self.expr, self.simplified
    return (f"symbolic {self.kind} failure\n  expr:       {_fmt(e)} (vmin={e.vmin}, vmax={e.vmax})\n"
            f"  simplified: {_fmt(s)} (vmin={s.vmin}, vmax={s.vmax})\n  counterexample: {self.counterexample}")

def _fmt(u: UOp) -> str:
  """Infix text of an index expression, for humans (pyrender is the exact form)."""
  if u.op is Ops.CONST: return repr(u.arg)
  if u.op is Ops.DEFINE_VAR: return f"{u.arg[0]}[{u.arg[1]}..{u.arg[2]}]"
  if u.op in (Ops.RANGE, Ops.SPECIAL): return f"r{u.arg[0] if u.op is Ops.RANGE else u.arg}<{_fmt(u.src[0])}"
  sym = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%", Ops.CMPLT: "<", Ops.CMPNE: "!=",
         Ops.CMPEQ: "==", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^"}
  if u.op in sym: return f"({_fmt(u.src[0])} {sym[u.op]} {_fmt(u.src[1])})"
  if u.op is Ops.WHERE: return f"({_fmt(u.src[0])} ? {_fmt(u.src[1])} : {_fmt(u.src[2])})"
  return f"{u.op.name.lower()}({', '.join(_fmt(s) for s in u.src)})"

def _obligations(tr: Z3Translator, expr: UOp, simp: UOp) -> dict[str, Any]:
  (ov, ook), (sv, sok) = tr.translate(expr), tr.translate(simp)
  obl = {"validity": ook == sok, "value": z3.Implies(ook, ov == sv),
         "bounds": z3.And(z3.Implies(ook, _bounds_hold(expr, ov)), z3.Implies(sok, _bounds_hold(simp, sv)))}
  return {k: z3.BoolVal(v) if isinstance(v, bool) else v for k, v in obl.items()}

def _model_env(tr: Z3Translator, m: Any) -> dict[UOp, int]:
  def val(v: Any) -> int:
    r = m.eval(v, model_completion=True)
    return int(r.as_signed_long()) if z3.is_bv(r) else int(r.as_long())
  return {u: val(v) for u, v in tr.vars.items()}

def check_expression(expr: UOp, simplified: UOp | None = None, timeout_ms: int = 10_000) -> CheckResult:
  """Prove simplify() sound on `expr`: same validity, same value where valid, and vmin <= value <= vmax for both."""
  simp = expr.simplify() if simplified is None else simplified
  tr = Z3Translator()
  obl = _obligations(tr, expr, simp)
  s = z3.Solver()
  s.set("timeout", timeout_ms)
  s.add(*tr.constraints)
  s.add(z3.Not(z3.And(*obl.values())))
  r = s.check()
  if r == z3.unsat: return CheckResult(expr, simp, True)
  # NOTE: z3 gives up on some nonlinear terms; a small domain is then proved by evaluating every point
  if r == z3.unknown: return check_exhaustive(expr, simp) or CheckResult(expr, simp, False, "unknown")
  m = s.model()
  kind = next(k for k, o in obl.items() if z3.is_false(m.eval(o, model_completion=True)))
  env = _model_env(tr, m)
  return CheckResult(expr, simp, False, kind, {str(tr.vars[u]): v for u, v in env.items()}, env)

def _bounds_ok(u: UOp, v: Any) -> bool: return v is None or bool(u.vmin <= v <= u.vmax)

def check_exhaustive(expr: UOp, simp: UOp, limit: int = 50_000) -> CheckResult | None:
  """The same verdict as check_expression by evaluating every variable assignment; None if there are over `limit`."""
  nodes = dict.fromkeys([*expr.toposort(), *simp.toposort()])
  variables = [u for u in nodes if u.op in (Ops.DEFINE_VAR, Ops.RANGE, Ops.SPECIAL)]
  if any(v.op is not Ops.DEFINE_VAR and v.src[0].op is not Ops.CONST for v in variables): return None
  spans = [range(v.arg[1], v.arg[2] + 1) if v.op is Ops.DEFINE_VAR else range(int(v.src[0].arg)) for v in variables]
  if math.prod(len(r) for r in spans) > limit: return None
  for point in itertools.product(*spans):
    env = dict(zip(variables, point))
    a, b = eval_index(expr, env), eval_index(simp, env)
    if (a is None) != (b is None): kind = "validity"
    elif a != b: kind = "value"
    else: kind = "" if _bounds_ok(expr, a) and _bounds_ok(simp, b) else "bounds"
    if kind: return CheckResult(expr, simp, False, kind, {_fmt(u): v for u, v in env.items()}, env)
  return CheckResult(expr, simp, True)

def check_batch(pairs: list[tuple[UOp, UOp]], chunk: int = 8, timeout_ms: int = 20_000) -> list[CheckResult]:
  """check_expression on many (expr, simplified) pairs, `chunk` per z3 query (z3 slows down on big conjunctions);
  a chunk that is not proved whole is checked one pair at a time, so each failure gets its own counterexample."""
  out: list[CheckResult] = []
  for i in range(0, len(pairs), chunk):
    part = pairs[i:i+chunk]
    tr = Z3Translator()
    obls = [z3.And(*_obligations(tr, e, s).values()) for e, s in part]
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*tr.constraints)
    solver.add(z3.Not(z3.And(*obls)))
    if solver.check() == z3.unsat: out.extend(CheckResult(e, s, True) for e, s in part)
    else: out.extend(check_expression(e, s) for e, s in part)
  return out

# ---- a plain evaluator (C semantics), to replay a counterexample without z3 ----

def eval_index(u: UOp, env: dict[UOp, int]) -> Any:
  """The value of `u` with its variables bound by `env` (UOp -> int); None where it is invalid."""
  vals: dict[UOp, Any] = {}
  for n in u.toposort():
    if n.op is Ops.CONST: vals[n] = None if isinstance(n.arg, InvalidType) else n.arg
    elif n.op in (Ops.DEFINE_VAR, Ops.RANGE, Ops.SPECIAL): vals[n] = env[n]
    elif n.op is Ops.WHERE: vals[n] = None if (c := vals[n.src[0]]) is None else vals[n.src[1] if c else n.src[2]]
    elif any(vals[s] is None for s in n.src): vals[n] = None
    else:
      r = PY_OPS[n.op](*[vals[s] for s in n.src])
      vals[n] = dtypes.as_const(r, n.dtype) if n.dtype in dtypes.sints else r  # fixed-width ints wrap
  return vals[u]

# ---- the fuzz loop ----

@dataclass
class FuzzSummary:
  checked: int = 0
  changed: int = 0
  rewrites: int = 0
  seconds: float = 0.0
  failures: list[CheckResult] = field(default_factory=list)
  # z3 gave up and the domain was too big to enumerate: neither proved nor refuted
  unproved: list[CheckResult] = field(default_factory=list)
  def __str__(self) -> str:
    rate = self.checked / self.seconds if self.seconds else 0.0
    lines = [f"symbolic fuzz: {self.checked} expressions checked ({rate:.0f}/s), {self.changed} changed by simplify, "
             f"{self.rewrites} rewrites applied, {len(self.failures)} failures, {len(self.unproved)} unproved"]
    return "\n".join(lines + [str(f) for f in self.failures[:10]])

def _simplify_counting(e: UOp) -> tuple[UOp, int]:
  before = sum(int(m) for m, _, _ in match_stats.get("simplify", {}).values())
  with Context(TRACK_MATCH_STATS=1): s = e.simplify()
  return s, sum(int(m) for m, _, _ in match_stats.get("simplify", {}).values()) - before

def run_symbolic_fuzz(seconds: float | None = None, n: int | None = None, seed: int = 0, batch: int = 40,
                      cfg: IndexExprConfig | None = None, verbose: bool = False) -> FuzzSummary:
  """Check random index expressions until `seconds` pass or `n` are checked (at least one must be given)."""
  if seconds is None and n is None: raise ValueError("run_symbolic_fuzz: give seconds= or n= (or both)")
  rng, summ, st = random.Random(seed), FuzzSummary(), time.perf_counter()
  while (n is None or summ.checked < n) and (seconds is None or time.perf_counter() - st < seconds):
    k = batch if n is None else min(batch, n - summ.checked)
    pairs = []
    for _ in range(k):
      e, _vars = build_index_expression(RandomChooser(rng.getrandbits(64)), cfg)
      s, nrw = _simplify_counting(e)
      summ.rewrites += nrw
      summ.changed += s is not e
      pairs.append((e, s))
    res = check_batch(pairs)
    summ.failures.extend(r for r in res if not r.ok and r.kind != "unknown")
    summ.unproved.extend(r for r in res if r.kind == "unknown")
    summ.checked += k
    if verbose: print(f"\r{summ.checked} checked, {len(summ.failures)} failures", end="", flush=True)
  if verbose: print()
  summ.seconds = time.perf_counter() - st
  return summ

__all__ = ["Z3Translator", "CheckResult", "check_expression", "check_batch", "eval_index", "FuzzSummary",
           "run_symbolic_fuzz"]
