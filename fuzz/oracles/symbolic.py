"""The symbolic oracle: z3 proves that `simplify()` keeps an index expression's value and that vmin/vmax bound it.

Semantics modelled: the IR's, through its one z3 translation (spec/smt.py: dtypes.index an unbounded Int, fixed-width
ints wrapping bit-vectors, C truncating IDIV/MOD with x/0 = 0 and x%0 = x); a DEFINE_VAR ranges over [lo, hi], a RANGE
over [0, end). Invalid is poison: an ALU op with an invalid source is invalid, `where` is invalid when its condition is
or when the branch it picks is. The simplified expression must be valid exactly where the original is, and equal to it
there. Counterexamples replay without z3 through `eval_index`, which computes with tinygrad/uop/semantics.py.
"""
from __future__ import annotations
import itertools, math, random, time
from dataclasses import dataclass, field
from typing import Any
import numpy as np
import z3
from tinygrad.uop import Ops, semantics
from tinygrad.uop.ops import UOp, match_stats
from tinygrad.uop.symbolic import simplify
from tinygrad.dtype import InvalidType
from tinygrad.helpers import Context
from fuzz.strategies import IndexExprConfig, RandomChooser, build_index_expression
from spec.smt import Translator, bounds_hold, to_python

VARIABLE_OPS = (Ops.DEFINE_VAR, Ops.RANGE, Ops.SPECIAL)

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
    return (f"symbolic {self.kind} failure\n  expr:       {fmt_index(e)} (vmin={e.vmin}, vmax={e.vmax})\n"
            f"  simplified: {fmt_index(s)} (vmin={s.vmin}, vmax={s.vmax})\n  counterexample: {self.counterexample}")

def fmt_index(u: UOp) -> str:
  """Infix text of an index expression, for humans (pyrender is the exact form)."""
  if u.op is Ops.CONST: return repr(u.arg)
  if u.op is Ops.DEFINE_VAR: return f"{u.arg[0]}[{u.arg[1]}..{u.arg[2]}]"
  if u.op in (Ops.RANGE, Ops.SPECIAL): return f"r{u.arg[0] if u.op is Ops.RANGE else u.arg}<{fmt_index(u.src[0])}"
  sym = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%", Ops.CMPLT: "<", Ops.CMPNE: "!=",
         Ops.CMPEQ: "==", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^"}
  if u.op in sym: return f"({fmt_index(u.src[0])} {sym[u.op]} {fmt_index(u.src[1])})"
  if u.op is Ops.WHERE: return f"({fmt_index(u.src[0])} ? {fmt_index(u.src[1])} : {fmt_index(u.src[2])})"
  return f"{u.op.name.lower()}({', '.join(fmt_index(s) for s in u.src)})"

def _obligations(tr: Translator, expr: UOp, simp: UOp) -> dict[str, Any]:
  (ov, ook), (sv, sok) = tr.translate(expr), tr.translate(simp)
  obl = {"validity": ook == sok, "value": z3.Implies(ook, ov == sv),
         "bounds": z3.And(z3.Implies(ook, bounds_hold(expr, ov)), z3.Implies(sok, bounds_hold(simp, sv)),
                          *tr.assumed)}
  return {k: z3.BoolVal(v) if isinstance(v, bool) else v for k, v in obl.items()}

def _model_env(tr: Translator, m: Any) -> dict[UOp, int]:
  return {u: int(to_python(m.eval(v, model_completion=True), u.dtype)) for u, v in tr.vars.items()
          if u.op in VARIABLE_OPS}

def check_expression(expr: UOp, simplified: UOp | None = None, timeout_ms: int = 10_000) -> CheckResult:
  """Prove simplify() sound on `expr`: same validity, same value where valid, and vmin <= value <= vmax for both."""
  simp = simplify(expr) if simplified is None else simplified
  tr = Translator(exact=True, trust_bounds=True)
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

def _bounds_ok(u: UOp, vals: np.ndarray, ok: np.ndarray) -> np.ndarray:
  """Where u is valid, vmin <= value <= vmax (elementwise over the points)."""
  inside = np.array([bool(u.vmin <= v <= u.vmax) for v in vals.tolist()], dtype=bool) if vals.size else ok
  return ~ok | inside

def check_exhaustive(expr: UOp, simp: UOp, limit: int = 50_000) -> CheckResult | None:
  """The same verdict as check_expression by evaluating every variable assignment; None if there are over `limit`."""
  nodes = dict.fromkeys([*expr.toposort(), *simp.toposort()])
  variables = [u for u in nodes if u.op in VARIABLE_OPS]
  if any(v.op is not Ops.DEFINE_VAR and v.src[0].op is not Ops.CONST for v in variables): return None
  spans = [range(v.arg[1], v.arg[2] + 1) if v.op is Ops.DEFINE_VAR else range(int(v.src[0].arg)) for v in variables]
  if math.prod(len(r) for r in spans) > limit: return None
  grid = list(itertools.product(*spans))
  env = {v: np.array([p[i] for p in grid], dtype=object) for i, v in enumerate(variables)}
  (a, aok), (b, bok) = eval_points(expr, env, len(grid)), eval_points(simp, env, len(grid))
  checks = {"validity": aok == bok, "value": ~aok | (a == b),
            "bounds": _bounds_ok(expr, a, aok) & _bounds_ok(simp, b, bok)}
  for kind, good in checks.items():
    if (bad := np.flatnonzero(~good)).size:
      point = dict(zip(variables, grid[int(bad[0])]))
      return CheckResult(expr, simp, False, kind, {fmt_index(u): v for u, v in point.items()}, point)
  return CheckResult(expr, simp, True)

def check_batch(pairs: list[tuple[UOp, UOp]], chunk: int = 8, timeout_ms: int = 20_000) -> list[CheckResult]:
  """check_expression on many (expr, simplified) pairs, `chunk` per z3 query (z3 slows down on big conjunctions);
  a chunk that is not proved whole is checked one pair at a time, so each failure gets its own counterexample."""
  out: list[CheckResult] = []
  for i in range(0, len(pairs), chunk):
    part = pairs[i:i+chunk]
    tr = Translator(exact=True, trust_bounds=True)
    obls = [z3.And(*_obligations(tr, e, s).values()) for e, s in part]
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*tr.constraints)
    solver.add(z3.Not(z3.And(*obls)))
    if solver.check() == z3.unsat: out.extend(CheckResult(e, s, True) for e, s in part)
    else: out.extend(check_expression(e, s) for e, s in part)
  return out

# ---- a plain evaluator (tinygrad/uop/semantics.py), to replay a counterexample without z3 ----

def eval_points(u: UOp, env: dict[UOp, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
  """(values, valid) of `u` at n points at once: env maps each variable to its n values. Index values are exact."""
  vals: dict[UOp, tuple[np.ndarray, np.ndarray]] = {}
  every = np.ones(n, dtype=bool)
  for x in u.toposort():
    if x.op is Ops.CONST:
      invalid = isinstance(x.arg, InvalidType)
      v = np.full(n, 0 if invalid else x.arg, dtype=semantics.holder(x.dtype, exact_index=True))
      vals[x] = (v, ~every if invalid else every)
    elif x.op in VARIABLE_OPS: vals[x] = (np.asarray(env[x]).astype(semantics.holder(x.dtype, exact_index=True)), every)
    elif x.op is Ops.WHERE:
      (c, cok), (a, aok), (b, bok) = (vals[s] for s in x.src)
      vals[x] = (np.where(c, a, b), cok & np.where(c, aok, bok))
    else:
      srcs = [vals[s] for s in x.src]
      ok = np.logical_and.reduce([k for _, k in srcs]) if srcs else every
      vals[x] = (semantics.exec_alu(x.op, x.src[-1].dtype, *[v for v, _ in srcs]), ok)
  return vals[u]

def eval_index(u: UOp, env: dict[UOp, int]) -> Any:
  """The value of `u` with its variables bound by `env` (UOp -> int); None where it is invalid."""
  v, ok = eval_points(u, {k: np.array([x], dtype=object) for k, x in env.items()}, 1)
  return v.tolist()[0] if ok[0] else None

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
  with Context(TRACK_MATCH_STATS=1): s = simplify(e)
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

__all__ = ["fmt_index", "CheckResult", "check_expression", "check_exhaustive", "check_batch", "eval_index",
           "eval_points", "FuzzSummary", "run_symbolic_fuzz"]
