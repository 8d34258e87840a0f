"""The rule ledger: a z3 certificate (Alive-style) for every rewrite rule of the symbolic matchers, and for the codegen
rewrites z3 can reach (fuzz/ledger_codegen.py), kept in fuzz/ledger.json and checked by the suite.

A rule's verification condition comes from the rule itself. `InstanceBuilder` walks the rule's pattern and builds
instances of it: a capture becomes a small expression (a bounded variable, a constant, a sum, a div/mod, a masked
index, ...) of the dtype being swept, a pattern constant becomes a constant drawn from edge values (0, +-1, powers of
two +-1, the dtype's limits), a variable's bounds come from edge intervals (empty-width, straddling zero, at the wrap).
The rule's own function decides whether it fires on an instance; where it fires, z3 proves (spec/smt.py's meanings:
dtypes.index an unbounded Int, fixed-width ints wrapping bit-vectors, floats IEEE) that the rewritten node

  - has the same dtype,
  - is valid exactly where the original is (Invalid is poison; a masked index must stay masked),
  - equals the original wherever the original is valid, for every value of every variable within its bounds,
  - and that both nodes lie within their vmin/vmax (a rule that builds a node with wrong bounds misleads later rules).

Constants and bounds are enumerated (the rule functions branch on them in Python), variable values are not: each
instance is a proof over all of them. A rule is `proved` when every instance it fired on is, `counterexample` when one
is not (with the instance and a concrete input), `not expressible` when no instance could be proved or built (and
why). Instances that z3 cannot state exactly (approximate float ops, fp8e4m3 bits) are counted as excluded, with the
reason; a rule is proved on what remains.

Each entry is keyed by a hash of the rule's pattern, its function's source and the source of every tinygrad function it
calls by name (transitively), so an edited rule, or an edited helper of one, must be proved again:
`python -m fuzz ledger --update`. tests/fuzz/test_ledger.py fails on a missing or stale entry and on a counterexample.
"""
from __future__ import annotations
import hashlib, inspect, itertools, json, math, pathlib, random, time, types
import numpy as np
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
import z3
from tinygrad.uop import Ops, GroupOp, semantics
from tinygrad.uop.ops import UOp, UPat, PatternMatcher
from tinygrad.uop.ops import UPatAny
from tinygrad.uop.symbolic import symbolic_simple, symbolic
from tinygrad.codegen.decompositions import pm_decompose, pm_emulated_dtypes, pm_fast_divmod, pm_transcendental
from tinygrad.codegen.decompositions import DIVMOD_WIDE
from tinygrad.dtype import DType, dtypes, InvalidType
from tinygrad.renderer import Renderer
from tinygrad.helpers import atomic_write, Context
from fuzz.strategies import Chooser, RandomChooser
from fuzz.symbolic import eval_index, _bounds_hold, _fmt
from spec.smt import Translator, NotModeled, to_python
from spec.verify import SpecError

LEDGER_PATH = pathlib.Path(__file__).resolve().parent / "ledger.json"
# NOTE: bump when the instance generation or the proof obligations change: every entry is then proved again
GENERATOR_VERSION = 1

# ---- the rules ----

@dataclass(frozen=True)
class RuleTable:
  """A matcher whose rules the ledger certifies: rules from `first` on (earlier ones belong to a table above it), the
  ctx its functions get, and the dtypes its instances are swept over."""
  matcher: PatternMatcher
  first: int = 0
  ctx: Any = None
  sweep: tuple[DType, ...] = ()
  # instances per swept dtype (Budget.fired): fewer where each proof is large (threefry's 20 rounds)
  fired: int = 40

@dataclass(frozen=True)
class RuleRef:
  """One rule of a matcher table: `table[index]` is (pat, fn)."""
  table: str
  index: int
  pat: UPat
  fn: Callable[..., Any]
  @property
  def name(self) -> str: return f"{self.table}[{self.index}] {getattr(self.fn, '__name__', '?')}"
  @property
  def key(self) -> str: return rule_hash(self.pat, self.fn)
  @property
  def spec(self) -> RuleTable: return RULE_TABLES[self.table]

def ledger_rules() -> list[RuleRef]:
  """Every rule of RULE_TABLES once, in table order."""
  return [RuleRef(name, i, *t.matcher.patterns[i]) for name, t in RULE_TABLES.items()
          for i in range(t.first, len(t.matcher.patterns))]

# ---- hashing a rule ----

def pattern_fingerprint(p: UPat) -> str:
  """A structural text of a pattern (ops, dtypes, arg, name, sources, how sources match): what the rule matches."""
  if isinstance(p, UPatAny): return f"any({p.name};" + ",".join(pattern_fingerprint(a) for a in p.alts) + ")"
  ops = "*" if p.op is None else "|".join(sorted(o.name for o in p.op))
  dts = "*" if p.dtype is None else "|".join(str(d) for d in p.dtype)
  if p.src_kind == "none": src = "-"
  elif isinstance(p.src, UPat): src = "all:" + pattern_fingerprint(p.src)
  else: src = "(" + ",".join(pattern_fingerprint(s) for s in p.src[0]) + (")*" if len(p.src) > 1 else ")")
  return f"{ops}:{dts}:{p.arg!r}:{p.name}:{int(p.allow_any_len)}:{src}"

def _code_names(code: types.CodeType) -> set[str]:
  names = set(code.co_names)
  for c in code.co_consts:
    if isinstance(c, types.CodeType): names |= _code_names(c)
  return names

def function_sources(fn: Callable[..., Any]) -> list[str]:
  """The source of fn and of every function of tinygrad it calls by a global name, transitively (sorted by name)."""
  seen: dict[str, str] = {}
  todo: list[Callable[..., Any]] = [fn]
  while todo:
    f = todo.pop()
    code = getattr(f, "__code__", None)
    if code is None: continue
    key = f"{f.__module__}.{f.__qualname__}:{code.co_firstlineno if f.__name__ == '<lambda>' else ''}"
    if key in seen: continue
    try: seen[key] = inspect.getsource(f)
    except (OSError, TypeError): seen[key] = code.co_code.hex()
    for n in sorted(_code_names(code)):
      g = f.__globals__.get(n)
      if isinstance(g, types.FunctionType) and g.__module__.startswith("tinygrad."): todo.append(g)
  # NOTE: keyed without line numbers (a lambda's line only tells lambdas apart), so moving a rule keeps its hash
  return [seen[k] for k in sorted(seen, key=lambda k: k.rsplit(":", 1)[0] + seen[k])]

def rule_hash(pat: UPat, fn: Callable[..., Any]) -> str:
  h = hashlib.sha256(f"v{GENERATOR_VERSION}\n{pattern_fingerprint(pat)}\n".encode())
  for src in function_sources(fn): h.update(src.encode())
  return h.hexdigest()[:16]

# ---- edge values ----

def _int_range(dt: DType) -> tuple[int, int]: return int(dtypes.min(dt)), int(dtypes.max(dt))

def edge_constants(dt: DType) -> list[Any]:
  """Constants a rule's branches turn on: 0, +-1, small primes, powers of two +-1, the dtype's limits."""
  if dt is dtypes.bool: return [False, True]
  if dtypes.is_float(dt):
    return [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -1.5, 7.25, 1e-3, 65504.0, 1e30, -1e30, 2.0 ** -24, 2.0 ** -140,
            math.inf, -math.inf, math.nan]
  small = [0, 1, -1, 2, -2, 3, -3, 4, 5, -5, 6, 7, 8, -8, 9, 12, 15, 16, -16, 17, 31, 32, 33, 64, 100, -100, 127, 128,
           255, 256, 1000, 1023, 1024]
  if dt is dtypes.index: return small + [2**31 - 1, 2**31, -2**31, 2**32, 2**40 + 3, -(2**40)]
  lo, hi = _int_range(dt)
  vals = [v for v in small if lo <= v <= hi] + [lo, lo + 1, lo + 2, hi, hi - 1, hi - 2, hi // 2, hi // 2 + 1, lo // 2]
  return list(dict.fromkeys(vals))

def edge_bounds(dt: DType) -> list[tuple[int, int]]:
  """Variable bounds a rule's branches turn on: a single value, small, negative, straddling zero, at the wrap."""
  small = [(0, 0), (1, 1), (0, 1), (0, 3), (0, 7), (1, 8), (0, 15), (2, 9), (3, 11), (-4, 4), (-8, -1), (-3, 0),
           (-16, 15), (-7, 2), (0, 255), (-100, 100), (5, 5), (-1, -1)]
  if dt is dtypes.index: return small + [(0, 2**31 - 1), (-2**31, 2**31 - 1), (0, 2**40), (-2**40, 2**40)]
  lo, hi = _int_range(dt)
  wide = [(lo, hi), (lo, lo + 3), (hi - 3, hi), (0, hi), (lo, -1), (lo, lo), (hi, hi), (hi // 2, hi),
          (lo // 2, hi // 2), (lo + 1, hi)]
  return list(dict.fromkeys([(a, b) for a, b in small + wide if lo <= a <= b <= hi]))

INT_SWEEP = (dtypes.index, dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32)
FLOAT_SWEEP = (dtypes.float16, dtypes.float32, dtypes.bfloat16)
SWEEP = INT_SWEEP + (dtypes.bool,) + FLOAT_SWEEP
EMULATED_SWEEP = (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2)
ALU_OPS = sorted(GroupOp.ALU)

# table name -> what it certifies; `symbolic` starts with symbolic_simple's rules, so its own begin after them
RULE_TABLES: dict[str, RuleTable] = {
  "symbolic_simple": RuleTable(symbolic_simple, sweep=SWEEP),
  "symbolic": RuleTable(symbolic, len(symbolic_simple), sweep=SWEEP),
  # codegen's decompositions, for the bare Renderer (it supports no op) / level 2: decompose everything the rule can
  "decompose": RuleTable(pm_decompose, ctx=Renderer(), sweep=(dtypes.uint64, dtypes.int8, dtypes.uint32, dtypes.int32,
                                                            dtypes.float16, dtypes.float32, dtypes.bfloat16), fired=12),
  "emulated_dtypes": RuleTable(pm_emulated_dtypes, sweep=EMULATED_SWEEP),
  "fast_divmod": RuleTable(pm_fast_divmod, ctx=tuple(DIVMOD_WIDE), sweep=tuple(DIVMOD_WIDE)),
  "transcendental": RuleTable(pm_transcendental, ctx=(Renderer(), 2), sweep=(dtypes.float16, dtypes.float32)),
}

class NoInstance(Exception):
  """This draw cannot instantiate the pattern (a dtype or arity conflict): draw again."""

class Inexpressible(Exception):
  """The pattern uses something the builder has no instance of (a vector op, a buffer): the rule is not expressible."""

# ---- instances of a pattern ----

class InstanceBuilder:
  """Builds one instance of a pattern from a Chooser: variables of `dt` (the dtype being swept) with edge bounds,
  edge constants, captures as small expressions over a shared pool of variables (so x//c and x%c share their x)."""
  def __init__(self, ch: Chooser, dt: DType, max_depth: int = 2):
    self.ch, self.dt, self.max_depth = ch, dt, max_depth
    self.pool: dict[DType, list[UOp]] = {}
    self.env: dict[str, UOp] = {}
    self.n_vars = 0

  # ---- leaves ----
  def var(self, dt: DType) -> UOp:
    pool = self.pool.setdefault(dt, [])
    if pool and (len(pool) >= 2 or self.ch.integer(0, 2) > 0): return self.ch.choice(pool)
    name = f"v{self.n_vars}"
    self.n_vars += 1
    # NOTE: DEFINE_VAR bounds are ints (the spec); a float variable's exceed every float, so they bound nothing
    if dt is dtypes.bool: u = UOp(Ops.DEFINE_VAR, dt, arg=(name, 0, 1))
    elif dtypes.is_float(dt): u = UOp(Ops.DEFINE_VAR, dt, arg=(name, -2**1100, 2**1100))
    else:
      bounds = edge_bounds(dt)
      if self.ch.integer(0, 4) == 0:
        lo, hi = _int_range(dt) if dt is not dtypes.index else (-2**40, 2**40)
        a = self.ch.integer(lo, hi)
        lo_b, hi_b = a, min(hi, a + self.ch.integer(0, 64))
      else: lo_b, hi_b = self.ch.choice(bounds)
      u = UOp(Ops.DEFINE_VAR, dt, arg=(name, lo_b, hi_b))
    pool.append(u)
    return u

  def const(self, dt: DType) -> UOp:
    if dtypes.is_int(dt) and dt is not dtypes.index and self.ch.integer(0, 3) == 0:
      return UOp.const(dt, self.ch.integer(*_int_range(dt)))
    return UOp.const(dt, self.ch.choice(edge_constants(dt)))

  # ---- expressions for free captures ----
  def expr(self, dt: DType, depth: int, allow_invalid: bool = True) -> UOp:
    if dt is dtypes.bool: return self.cond(depth)
    # NOTE: z3 proves float terms by bit-blasting them: one op deep keeps a proof to about a second
    if dtypes.is_float(dt): depth = min(depth, 1)
    if depth <= 0 or self.ch.integer(0, 2) == 0: return self.var(dt) if self.ch.integer(0, 4) else self.const(dt)
    kinds = ["add", "sub", "mulc", "neg", "where", "max"]
    if dtypes.is_int(dt): kinds += ["idiv", "mod", "mul", "mulc", "idiv", "mod"]
    if dt is dtypes.index and allow_invalid: kinds += ["masked"]
    k = self.ch.choice(kinds)
    a = self.expr(dt, depth - 1, allow_invalid)
    if k == "neg": return UOp(Ops.NEG, dt, (a,))
    if k == "masked": return self.cond(depth - 1).where(a, UOp.invalid())
    if k == "where": return self.cond(depth - 1).where(a, self.expr(dt, depth - 1, allow_invalid))
    if k in ("mulc", "idiv", "mod"):
      c = self.const(dt)
      return UOp(Ops.MUL if k == "mulc" else Ops.IDIV if k == "idiv" else Ops.MOD, dt, (a, c))
    b = self.expr(dt, depth - 1, allow_invalid)
    return UOp({"add": Ops.ADD, "sub": Ops.SUB, "mul": Ops.MUL, "max": Ops.MAX}[k], dt, (a, b))

  def cond(self, depth: int) -> UOp:
    k = self.ch.integer(0, 6) if depth > 0 else self.ch.integer(0, 2)
    if k == 0: return self.var(dtypes.bool)
    if k in (1, 2):
      it = self.dt if dtypes.is_int(self.dt) else dtypes.index
      a = self.expr(it, depth - 1, allow_invalid=False)
      return UOp(Ops.CMPLT if k == 1 else Ops.CMPNE, dtypes.bool, (a, self.const(it)))
    if k == 3: return self.const(dtypes.bool)
    if k == 4: return UOp(Ops.CMPNE, dtypes.bool, (self.cond(depth - 1), UOp.const(dtypes.bool, True)))
    return UOp(Ops.AND if k == 5 else Ops.OR, dtypes.bool, (self.cond(depth - 1), self.cond(depth - 1)))

  # ---- patterns ----
  def pattern(self, pat: UPat, want: DType | None, depth: int = 0) -> UOp:
    """An instance of `pat` whose dtype is `want` (None: the builder picks)."""
    name = pat.name
    if isinstance(pat, UPatAny): pat = self.ch.choice(list(pat.alts))
    if name is not None and name in self.env:
      if want is not None and self.env[name].dtype is not want: raise NoInstance(f"{name} bound to another dtype")
      return self.env[name]
    if pat.dtype is not None:
      allowed = [d for d in pat.dtype if d.count == 1]
      if want is None:
        if not allowed: raise Inexpressible(f"pattern dtypes {pat.dtype} are vectors")
        want = self.dt if self.dt in allowed else self.ch.choice(allowed)
      elif want not in allowed: raise NoInstance(f"{want} is not among the pattern's dtypes")
    u = self._node(pat, want, depth)
    if name is not None: self.env[name] = u
    return u

  def _node(self, pat: UPat, want: DType | None, depth: int) -> UOp:
    if pat.op is None: return self.expr(want or self.dt, self.ch.integer(0, self.max_depth - min(depth, 1)))
    if Ops.CONST in pat.op and pat.op <= {Ops.CONST, Ops.VCONST}:
      if pat.arg is None: return self.const(want or self.dt)
      if isinstance(pat.arg, InvalidType):
        if want not in (None, dtypes.index): raise NoInstance("Invalid is an index")
        return UOp.invalid()
      return UOp.const(want or self.dt, pat.arg)
    if pat.op <= {Ops.CAST, Ops.BITCAST}: return self._cast(pat, want, depth)
    ops = [o for o in ALU_OPS if o in pat.op]
    if not ops: raise Inexpressible(f"pattern op {'|'.join(sorted(o.name for o in pat.op))} has no instance here")
    op = self.ch.choice(ops)
    out, operand = self._types(op, want)
    arity = 1 if op in GroupOp.Unary else 2 if op in GroupOp.Binary else 3
    srcs = [pat.src] * arity if isinstance(pat.src, UPat) else [None] * arity if pat.src is None else \
      list(self.ch.choice(pat.src))
    if len(srcs) != arity and not (pat.allow_any_len and len(srcs) <= arity): raise NoInstance(f"{op} arity")
    srcs += [None] * (arity - len(srcs))
    wants = [dtypes.bool, out, out] if op is Ops.WHERE else [operand] * arity
    built = tuple(self.expr(w, self.max_depth - 1) if p is None else self.pattern(p, w, depth + 1)
                  for p, w in zip(srcs, wants))
    if op is not Ops.WHERE and any(s.dtype is not operand for s in built): raise NoInstance("operand dtypes differ")
    return UOp(op, out, built)

  def _types(self, op: Ops, want: DType | None) -> tuple[DType, DType]:
    """(output dtype, operand dtype) of op: comparisons give bool from an operand dtype; others keep their dtype."""
    if op in GroupOp.Comparison:
      if want not in (None, dtypes.bool): raise NoInstance("a comparison is bool")
      operand = self.dt if self.dt is not dtypes.bool or self.ch.integer(0, 1) else dtypes.index
      return dtypes.bool, operand
    out = want or self.dt
    if op is not Ops.WHERE and not semantics.defined_on(op, out): raise NoInstance(f"{op} undefined on {out}")
    return out, out

  def _cast(self, pat: UPat, want: DType | None, depth: int) -> UOp:
    op = self.ch.choice(sorted(pat.op or ()))
    out = want or self.ch.choice(SWEEP)
    cands = [d for d in SWEEP + (dtypes.int64, dtypes.uint64, dtypes.int16, dtypes.float64)
             if d is not out and (op is Ops.CAST or (d.itemsize == out.itemsize and dtypes.index not in (d, out)))]
    if not cands: raise NoInstance(f"no source dtype to {op} to {out}")
    src_dt = self.ch.choice(cands)
    src_pat = pat.src[0][0] if isinstance(pat.src, list) else pat.src
    src = self.expr(src_dt, 1) if src_pat is None else self.pattern(src_pat, src_dt, depth + 1)
    return UOp(op, out, (src,))

# ---- proof of one batch of instances ----

@dataclass
class Verdict:
  """The outcome for one instance: kind "" when proved, else value/validity/bounds/dtype/exception/unknown/excluded."""
  kind: str = ""
  detail: str = ""
  inputs: dict[str, Any] = field(default_factory=dict)

def _leaves(u: UOp) -> list[UOp]: return [x for x in u.toposort() if x.op is Ops.DEFINE_VAR]

def _translator(instances: Iterable[tuple[UOp, UOp]]) -> Translator:
  """A Translator where bool and float variables are free values (it bounds only integer variables itself)."""
  tr = Translator(exact=True, trust_bounds=True)
  for o, r in instances:
    for v in _leaves(o) + _leaves(r):
      if (v, 0) in tr.cache or dtypes.is_int(v.dtype): continue
      tr.cache[(v, 0)] = (tr.fresh(v, v.arg[0]), True)
  return tr

def _zb(x: Any) -> Any: return z3.BoolVal(x) if isinstance(x, bool) else x

def _index_in_int64(tr: Translator, u: UOp) -> Any:
  """Every dtypes.index node under u, where valid, is within int64 (the contract index lowering relies on)."""
  terms = []
  for n in u.toposort():
    if n.dtype is not dtypes.index or (n.op is Ops.CONST and isinstance(n.arg, InvalidType)): continue
    v, ok = tr.translate(n)
    terms.append(z3.Implies(_zb(ok), z3.And(v >= -2**63, v <= 2**63 - 1)))
  return z3.And(*terms)

def obligations(tr: Translator, o: UOp, r: UOp) -> tuple[Any, dict[str, Any]]:
  """(precondition, what a sound rewrite o -> r must satisfy under it), as z3 terms (see the module docstring).
  The precondition: the original's index values fit int64 (the contract of the index dtype). The rewritten graph's
  inner nodes may leave int64 where they are not used (a masked lane): only its value where valid counts."""
  (ov, ook), (rv, rok) = tr.translate(o), tr.translate(r)
  obl = {"validity": _zb(ook) == _zb(rok), "value": z3.Implies(_zb(ook), ov == rv)}
  if dtypes.is_int(o.dtype) or o.dtype is dtypes.bool:
    obl["bounds"] = z3.And(z3.Implies(_zb(ook), _bounds_hold(o, ov)), z3.Implies(_zb(rok), _bounds_hold(r, rv)))
  return _index_in_int64(tr, o), obl

def _model_inputs(tr: Translator, m: Any, o: UOp, r: UOp) -> dict[str, Any]:
  out: dict[str, Any] = {}
  for v in dict.fromkeys(_leaves(o) + _leaves(r)):
    if v in tr.vars:
      x = to_python(m.eval(tr.vars[v], model_completion=True), v.dtype)
      out[v.arg[0]] = repr(x) if isinstance(x, float) else x
  return out

def _replay_note(o: UOp, r: UOp, inputs: dict[str, Any]) -> str:
  """Evaluate both sides at the counterexample with the semantics table (no z3): the input a human can replay."""
  if not all(dtypes.is_int(v.dtype) for v in _leaves(o) + _leaves(r)) or not (dtypes.is_int(o.dtype) or
                                                                                o.dtype is dtypes.bool): return ""
  env = {v: int(inputs[v.arg[0]]) for v in dict.fromkeys(_leaves(o) + _leaves(r))}
  try: a, b = eval_index(o, env), eval_index(r, env)
  except Exception as e: return f"replay failed: {type(e).__name__}: {e}"
  return f"original = {a!r}, rewritten = {b!r} (None: invalid)"

def as_exact_ints(u: UOp, cache: dict[UOp, UOp]) -> UOp:
  """u with every fixed-width int node retyped to dtypes.index (exact integers): where every node's exact value is
  within its dtype, the wrapping graph computes the same values. Shift amounts are taken modulo the width first."""
  for n in u.toposort():
    if n in cache: continue
    src = tuple(cache[s] for s in n.src)
    if n.op is Ops.THREEFRY or n.op is Ops.BITCAST: raise NotModeled(f"{n.op} has no exact integer form")
    if n.op in (Ops.SHL, Ops.SHR) and dtypes.is_int(n.dtype) and n.dtype is not dtypes.index:
      if n.src[1].op is not Ops.CONST: raise NotModeled("a shift by a variable amount")
      src = (src[0], UOp.const(dtypes.index, semantics.shift_amount(n.dtype, n.src[1].arg)))
    dt = dtypes.index if dtypes.is_int(n.dtype) and n.dtype.count == 1 else n.dtype
    if n.op is Ops.CAST and dt is dtypes.index and src[0].dtype is dtypes.index: cache[n] = src[0]
    else: cache[n] = UOp(n.op, dt, src, n.arg, n.tag)
  return cache[u]

def _ranges_hold(tr: Translator, pairs: list[tuple[UOp, UOp]]) -> Any:
  """Every retyped node, where valid, holds a value of the fixed-width dtype it came from."""
  terms = []
  for orig, exact in pairs:
    if not dtypes.is_int(orig.dtype) or orig.dtype is dtypes.index or orig.op is Ops.CONST: continue
    v, ok = tr.translate(exact)
    terms.append(z3.Implies(_zb(ok), z3.And(v >= int(dtypes.min(orig.dtype)), v <= int(dtypes.max(orig.dtype)))))
  return z3.And(*terms)

def prove_exact(o: UOp, r: UOp, timeout_ms: int = 4000) -> bool:
  """Proof of o == r for fixed-width int graphs through exact integers (fast where bit-vector multiplies are slow):
  True if every node of both stays within its dtype (so wrapping never happens) and the values agree. False: no
  verdict (a node may wrap, or z3 gave up)."""
  if any(dtypes.is_float(v.dtype) for v in _leaves(o) + _leaves(r)): return False
  cache: dict[UOp, UOp] = {}
  try: eo, er = as_exact_ints(o, cache), as_exact_ints(r, cache)
  except NotModeled: return False
  tr = _translator([(eo, er)])
  try:
    (ov, ook), (rv, rok) = tr.translate(eo), tr.translate(er)
    ranges = _ranges_hold(tr, [(n, cache[n]) for n in dict.fromkeys([*o.toposort(), *r.toposort()])])
  except NotModeled: return False
  # NOTE: with no wrapping, the exact value is the fixed-width value (signed or unsigned as the dtype reads it)
  bounds = [z3.Implies(_zb(ok), z3.And(v >= u.vmin, v <= u.vmax)) for u, v, ok in ((o, ov, ook), (r, rv, rok))
            if dtypes.is_int(u.dtype)]
  s = z3.Solver()
  s.set("timeout", timeout_ms)
  s.add(*tr.constraints, _index_in_int64(tr, eo) if o.dtype is dtypes.index or o.dtype is dtypes.bool else True)
  s.add(z3.Not(z3.And(ranges, _zb(ook) == _zb(rok), z3.Implies(_zb(ook), ov == rv), *bounds, *tr.assumed)))
  return bool(s.check() == z3.unsat)

def eval_grid(u: UOp, env: dict[UOp, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
  """(values, valid) of u at n points (env: each variable's n values), by the semantics table; index values exact."""
  vals: dict[UOp, tuple[np.ndarray, np.ndarray]] = {}
  every = np.ones(n, dtype=bool)
  for x in u.toposort():
    srcs = [vals[s] for s in x.src]
    ok = np.logical_and.reduce([k for _, k in srcs]) if srcs else every
    if x.op is Ops.CONST:
      bad = isinstance(x.arg, InvalidType)
      v = np.full(n, 0 if bad else x.arg, dtype=semantics.holder(x.dtype, exact_index=True))
      vals[x] = (v, ~every if bad else every)
    elif x.op is Ops.DEFINE_VAR: vals[x] = (env[x], every)
    elif x.op is Ops.WHERE:
      (c, cok), (a, aok), (b, bok) = srcs
      vals[x] = (np.where(c, a, b), cok & np.where(c, aok, bok))
    elif x.op is Ops.CAST: vals[x] = (semantics.exec_cast(srcs[0][0], x.src[0].dtype, x.dtype, exact_index=True), ok)
    elif x.op is Ops.BITCAST: vals[x] = (semantics.exec_bitcast(srcs[0][0], x.src[0].dtype, x.dtype), ok)
    else: vals[x] = (semantics.exec_alu(x.op, x.src[-1].dtype, *[v for v, _ in srcs]), ok)
  return vals[u]

def check_every_point(o: UOp, r: UOp) -> Verdict:
  """prove_one's verdict by evaluating both sides at every assignment of the (integer and bool) variables."""
  vs = list(dict.fromkeys(_leaves(o) + _leaves(r)))
  grid = list(itertools.product(*[range(v.arg[1], v.arg[2] + 1) for v in vs]))
  env = {v: np.array([p[i] for p in grid], dtype=semantics.holder(v.dtype, exact_index=True)) for i, v in enumerate(vs)}
  (a, aok), (b, bok) = eval_grid(o, env, len(grid)), eval_grid(r, env, len(grid))
  def inside(u: UOp, x: np.ndarray, ok: np.ndarray) -> np.ndarray:
    return ~ok | np.array([bool(u.vmin <= v <= u.vmax) for v in x.tolist()], dtype=bool)
  checks = {"validity": aok == bok, "value": ~aok | (a == b), "bounds": inside(o, a, aok) & inside(r, b, bok)}
  for kind, good in checks.items():
    if (bad := np.flatnonzero(~good)).size:
      point = {v.arg[0]: grid[int(bad[0])][i] for i, v in enumerate(vs)}
      return Verdict(kind, "found by evaluating every point", point)
  return Verdict()

def _domain_size(o: UOp, r: UOp) -> float:
  """How many points an exhaustive check of the pair takes (inf where a variable is not an integer)."""
  vs = dict.fromkeys(_leaves(o) + _leaves(r))
  if not all(dtypes.is_int(v.dtype) for v in vs): return math.inf
  return float(math.prod(v.arg[2] - v.arg[1] + 1 for v in vs))

def prove_one(o: UOp, r: UOp, timeout_ms: int = 4000) -> Verdict:
  if r.dtype is not o.dtype: return Verdict("dtype", f"rewritten dtype {r.dtype} is not {o.dtype}")
  try:
    tr = _translator([(o, r)])
    pre, obl = obligations(tr, o, r)
  except NotModeled as e: return Verdict("excluded", str(e).removeprefix("z3 translation: "))
  s = z3.Solver()
  s.set("timeout", timeout_ms)
  s.add(*tr.constraints, pre)
  s.add(z3.Not(z3.And(*obl.values(), *tr.assumed)))
  res = s.check()
  if res == z3.unsat: return Verdict()
  if res == z3.unknown:
    # NOTE: z3 gives up on wide bit-vector multiplies: without wrapping they are exact integers, which it proves fast
    if o.dtype is not dtypes.bool and prove_exact(o, r, timeout_ms): return Verdict()
    # NOTE: z3 gives up on some nonlinear terms; a small integer domain is then proved by evaluating every point
    if _domain_size(o, r) > 50_000: return Verdict("unknown", "z3 gave up and the domain is too big to enumerate")
    return check_every_point(o, r)
  m = s.model()
  kind = next((k for k, t in obl.items() if z3.is_false(m.eval(t, model_completion=True))), "assumption")
  inputs = _model_inputs(tr, m, o, r)
  return Verdict(kind, _replay_note(o, r, inputs), inputs)

def prove_batch(pairs: list[tuple[UOp, UOp]], chunk: int = 8, timeout_ms: int = 5000) -> list[Verdict]:
  """prove_one on many instances, `chunk` per z3 query; a chunk not proved whole is proved one instance at a time."""
  out: list[Verdict] = []
  for i in range(0, len(pairs), chunk):
    part = pairs[i:i+chunk]
    try:
      if any(r.dtype is not o.dtype for o, r in part): raise NotModeled("dtype")
      tr = _translator(part)
      pres, obl = zip(*[obligations(tr, o, r) for o, r in part])
      s = z3.Solver()
      s.set("timeout", timeout_ms)
      s.add(*tr.constraints)
      # NOTE: instance i's obligations hold under its own precondition
      s.add(z3.Not(z3.And(*[z3.Implies(p, z3.And(*ob.values())) for p, ob in zip(pres, obl)], *tr.assumed)))
      if s.check() == z3.unsat:
        out.extend(Verdict() for _ in part)
        continue
    except NotModeled: pass
    out.extend(prove_one(o, r) for o, r in part)
  return out

# ---- certifying one rule ----

@dataclass
class Budget:
  """How hard to look: per swept dtype, stop after `fired` instances the rule rewrote or `draws` draws. `dtypes`:
  the dtypes to sweep (None: the rule's table's)."""
  draws: int = 300
  fired: int = 40
  dtypes: tuple[DType, ...] | None = None

def rule_fires(pat: UPat, fn: Callable[..., Any], u: UOp, ctx: Any = None) -> UOp | None:
  """What the rule rewrites u to, as PatternMatcher would (first match whose function returns a new node)."""
  has_ctx = "ctx" in inspect.signature(fn).parameters
  for m in pat.match(u, {}):
    ret = fn(ctx=ctx, **m) if has_ctx else fn(**m)
    if ret is not None and ret is not u: return ret
  return None

def draw_instances(pat: UPat, fn: Callable[..., Any], dt: DType, seed: int, budget: Budget,
                   errors: dict[str, int], ctx: Any = None) -> list[tuple[UOp, UOp | Exception]]:
  """Instances of the rule on `dt` where it fires, with what it rewrote each to (or the exception it raised)."""
  rng, seen = random.Random(seed), set()
  out: list[tuple[UOp, UOp | Exception]] = []
  # NOTE: instances and what the rule builds are checked by the full spec as they are made (SPEC=2): an instance the
  # spec rejects is not IR and is drawn again; a rule that builds an illegal node is refuted (an exception)
  with Context(SPEC=2):
    for _ in range(budget.draws):
      if len(out) >= budget.fired: break
      b = InstanceBuilder(RandomChooser(rng.getrandbits(64)), dt)
      try: u = b.pattern(pat, None)
      except (NoInstance, SpecError): continue
      except Inexpressible as e:
        errors[str(e)] = errors.get(str(e), 0) + 1
        return out
      if u in seen: continue
      seen.add(u)
      try: r = rule_fires(pat, fn, u, ctx)
      except Exception as e:
        out.append((u, e))
        continue
      if r is not None: out.append((u, r))
  return out

def describe_instance(u: UOp) -> str:
  return f"{u.dtype}: {_fmt(u)}"

def certify(pat: UPat, fn: Callable[..., Any], budget: Budget | None = None, seed: int = 0,
            ctx: Any = None) -> dict[str, Any]:
  """The ledger entry's verdict part for one rule: proved / counterexample / not expressible, with what was tried."""
  budget = budget or Budget()
  sweep = budget.dtypes or SWEEP
  st = time.perf_counter()
  errors: dict[str, int] = {}
  fired: dict[str, int] = {}
  excluded: dict[str, int] = {}
  counts = {"fired": 0, "proved": 0, "excluded": 0, "unknown": 0}
  cex: dict[str, Any] | None = None
  for di, dt in enumerate(sweep):
    inst = draw_instances(pat, fn, dt, seed * 1_000_003 + di, budget, errors, ctx)
    if not inst: continue
    fired[str(dt)] = len(inst)
    counts["fired"] += len(inst)
    crashed = [(u, e) for u, e in inst if isinstance(e, Exception)]
    if crashed and cex is None:
      u, e = crashed[0]
      cex = {"kind": "exception", "instance": describe_instance(u), "detail": f"{type(e).__name__}: {e}"}
    pairs = [(u, r) for u, r in inst if isinstance(r, UOp)]
    for (u, r), v in zip(pairs, prove_batch(pairs)):
      if v.kind == "": counts["proved"] += 1
      elif v.kind == "excluded":
        counts["excluded"] += 1
        excluded[v.detail] = excluded.get(v.detail, 0) + 1
      elif v.kind == "unknown": counts["unknown"] += 1
      elif cex is None:
        cex = {"kind": v.kind, "instance": describe_instance(u), "rewritten": describe_instance(r),
               "inputs": v.inputs, "replay": v.detail}
  entry: dict[str, Any] = {"instances": counts, "fired_per_dtype": fired, "seconds": round(time.perf_counter() - st, 2)}
  if excluded: entry["excluded"] = excluded
  if cex is not None: entry.update(verdict="counterexample", counterexample=cex)
  elif counts["proved"]: entry["verdict"] = "proved"
  else:
    entry["verdict"] = "not expressible"
    if errors: entry["reason"] = "; ".join(sorted(errors))
    elif excluded: entry["reason"] = "every instance it fires on is outside z3's exact meanings: " + \
      "; ".join(sorted(excluded))
    elif counts["unknown"]: entry["reason"] = "z3 gave up on every instance (nonlinear) and none could be enumerated"
    else: entry["reason"] = "it fired on no instance the pattern builder drew (the pattern needs a shape the " \
      f"builder does not make, within {budget.draws} draws per dtype)"
  return entry

def certify_rule(rule: RuleRef, budget: Budget | None = None) -> dict[str, Any]:
  """The full ledger entry of one rule."""
  seed = int(rule.key[:8], 16)
  b = budget or Budget()
  if b.dtypes is None: b = Budget(b.draws, min(b.fired, rule.spec.fired), rule.spec.sweep)
  return {"key": rule.key, "rule": rule.name, "table": rule.table, "index": rule.index,
          "function": getattr(rule.fn, "__name__", "?"), "module": getattr(rule.fn, "__module__", "?"),
          **certify(rule.pat, rule.fn, b, seed, rule.spec.ctx)}

# ---- the ledger file ----

def load_ledger(path: pathlib.Path = LEDGER_PATH) -> dict[str, Any]:
  if not path.exists(): return {"generator": GENERATOR_VERSION, "rules": [], "codegen": []}
  return json.loads(path.read_text())

def write_ledger(ledger: dict[str, Any], path: pathlib.Path = LEDGER_PATH) -> None:
  atomic_write(str(path), json.dumps(ledger, indent=1, sort_keys=True) + "\n")

def _certify_by_ref(table: str, index: int) -> dict[str, Any]:
  return certify_rule(RuleRef(table, index, *RULE_TABLES[table].matcher.patterns[index]))

def _codegen_entry(name: str) -> dict[str, Any]:
  from fuzz.ledger_codegen import CODEGEN_CERTIFICATES, certify_codegen
  return certify_codegen(CODEGEN_CERTIFICATES[name])

def update_ledger(jobs: int = 1, force: bool = False, only: str | None = None,
                  progress: Callable[[str], None] | None = None, path: pathlib.Path = LEDGER_PATH) -> dict[str, Any]:
  """Prove every rule whose key is not in the ledger (every rule with `force`), drop entries of rules that are gone,
  and write the ledger. `only`: a substring of the rule names to limit the work to."""
  from fuzz.ledger_codegen import CODEGEN_CERTIFICATES
  old = load_ledger(path)
  have = {e["key"]: e for e in old.get("rules", []) + old.get("codegen", [])}
  rules = ledger_rules()
  todo: list[tuple[Callable[..., dict[str, Any]], tuple[Any, ...], str]] = []
  for r in rules:
    if (force or r.key not in have) and (only is None or only in r.name):
      todo.append((_certify_by_ref, (r.table, r.index), r.name))
  for name, c in CODEGEN_CERTIFICATES.items():
    if (force or c.key not in have) and (only is None or only in name): todo.append((_codegen_entry, (name,), name))
  done = _run_all(todo, jobs, progress)
  # NOTE: an entry kept by its key takes the rule's current name: a rule inserted before it shifts the index
  new_rules = [done.get(r.name) or ({**have[r.key], "rule": r.name, "index": r.index} if r.key in have else None)
               for r in rules]
  new_cg = [done.get(n) or have.get(c.key) for n, c in CODEGEN_CERTIFICATES.items()]
  ledger = {"generator": GENERATOR_VERSION, "rules": [e for e in new_rules if e], "codegen": [e for e in new_cg if e]}
  write_ledger(ledger, path)
  return ledger

# rules that take minutes (float multiplies bit-blasted, nonlinear index bounds): scheduled first by --jobs
SLOW_FIRST = {"symbolic_simple[4] <lambda>", "symbolic_simple[12] <lambda>", "codegen lower_index_dtype",
              "emulated_dtypes[0] promote_emulated", "symbolic[33] fold_div_div", "symbolic[28] fold_self_div"}

def _run_all(todo: list[tuple[Callable[..., dict[str, Any]], tuple[Any, ...], str]], jobs: int,
             progress: Callable[[str], None] | None) -> dict[str, dict[str, Any]]:
  done: dict[str, dict[str, Any]] = {}
  def report(name: str, e: dict[str, Any]) -> None:
    done[name] = e
    if progress: progress(f"{len(done)}/{len(todo)} {name}: {e['verdict']} ({e.get('seconds', 0)}s)")
  if jobs <= 1:
    for fn, args, name in todo: report(name, fn(*args))
    return done
  # NOTE: the slowest first, so the pool does not end on one long rule
  todo = sorted(todo, key=lambda t: t[2] not in SLOW_FIRST)
  import concurrent.futures, multiprocessing
  # NOTE: spawn, not fork: z3's context is not safe to share with a forked child
  with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as ex:
    futs = {ex.submit(fn, *args): name for fn, args, name in todo}
    for f in concurrent.futures.as_completed(futs):
      # NOTE: a crash certifying one rule is reported and leaves it without an entry (the check then names it)
      try: report(futs[f], f.result())
      except Exception as e:
        if progress: progress(f"{futs[f]}: the certificate crashed: {type(e).__name__}: {e}")
  return done

# ---- the check the suite runs ----

def check_ledger(path: pathlib.Path = LEDGER_PATH) -> list[str]:
  """Problems with the committed ledger: rules without a current entry, counterexamples, entries for no rule."""
  from fuzz.ledger_codegen import CODEGEN_CERTIFICATES
  led = load_ledger(path)
  fix = "run `python -m fuzz ledger --update` and commit fuzz/ledger.json"
  if led.get("generator") != GENERATOR_VERSION:
    return [f"the ledger was made by generator v{led.get('generator')}, this is v{GENERATOR_VERSION}: {fix} "
            "(with --force)"]
  entries = {e["key"]: e for e in led.get("rules", []) + led.get("codegen", [])}
  problems: list[str] = []
  wanted = [(r.name, r.key) for r in ledger_rules()] + [(n, c.key) for n, c in CODEGEN_CERTIFICATES.items()]
  for name, key in wanted:
    if key not in entries: problems.append(f"{name}: no ledger entry for its current source (key {key}): new or "
                                           f"edited, so not proved; {fix}")
    elif entries[key]["verdict"] == "counterexample":
      problems.append(f"{name}: z3 refutes it: {json.dumps(entries[key]['counterexample'])}")
  live = {k for _, k in wanted}
  problems += [f"{e['rule']}: a ledger entry for a rule that no longer exists; {fix}" for k, e in entries.items()
               if k not in live]
  return problems

def summarize(path: pathlib.Path = LEDGER_PATH) -> str:
  led = load_ledger(path)
  lines = []
  for part in ("rules", "codegen"):
    es = led.get(part, [])
    by: dict[str, int] = {}
    for e in es: by[e["verdict"]] = by.get(e["verdict"], 0) + 1
    lines.append(f"{part}: {len(es)} entries: " + ", ".join(f"{n} {v}" for v, n in sorted(by.items())))
    for e in es:
      if e["verdict"] == "proved": continue
      lines.append(f"  {e['rule']}: {e['verdict']}: {e.get('reason') or e.get('counterexample')}")
  return "\n".join(lines)

__all__ = ["LEDGER_PATH", "GENERATOR_VERSION", "RuleTable", "RuleRef", "RULE_TABLES", "ledger_rules", "rule_hash",
           "InstanceBuilder", "Budget", "certify", "certify_rule", "prove_one", "prove_batch", "prove_exact",
           "obligations", "load_ledger", "update_ledger", "check_ledger", "summarize", "rule_fires", "edge_constants",
           "edge_bounds"]
