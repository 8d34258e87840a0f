"""The ledger's proof kit (fuzz/ledger/rules.py certifies matcher rules with it, fuzz/ledger/codegen.py codegen
rewrites): hashing a rule's source, edge constants and bounds, `InstanceBuilder` (instances of a pattern from a
Chooser), and the z3 proof of an instance's rewrite (`obligations`, `prove_one`, `prove_batch`, `prove_exact`) in
spec/smt.py's meanings.
"""
from __future__ import annotations
import hashlib, inspect, itertools, math, types
import numpy as np
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
import z3
from tinygrad.uop import Ops, GroupOp, semantics
from tinygrad.uop.ops import UOp, UPat, UPatAny
from tinygrad.dtype import DType, dtypes, InvalidType
from fuzz.gen.choosers import Chooser
from fuzz.oracles.symbolic import eval_index
from spec.smt import Translator, NotModeled, bool_term, bounds_hold, to_python

# NOTE: bump when the instance generation or the proof obligations change: every entry is then proved again
GENERATOR_VERSION = 1

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

def translator_for(instances: Iterable[tuple[UOp, UOp]]) -> Translator:
  """A Translator where bool and float variables are free values (it bounds only integer variables itself)."""
  tr = Translator(exact=True, trust_bounds=True)
  for o, r in instances:
    for v in _leaves(o) + _leaves(r):
      if (v, 0) in tr.cache or dtypes.is_int(v.dtype): continue
      tr.cache[(v, 0)] = (tr.fresh(v, v.arg[0]), True)
  return tr

def index_in_int64(tr: Translator, u: UOp) -> Any:
  """Every dtypes.index node under u, where valid, is within int64 (the contract index lowering relies on)."""
  terms = []
  for n in u.toposort():
    if n.dtype is not dtypes.index or (n.op is Ops.CONST and isinstance(n.arg, InvalidType)): continue
    v, ok = tr.translate(n)
    terms.append(z3.Implies(bool_term(ok), z3.And(v >= -2**63, v <= 2**63 - 1)))
  return z3.And(*terms)

def obligations(tr: Translator, o: UOp, r: UOp) -> tuple[Any, dict[str, Any]]:
  """(precondition, what a sound rewrite o -> r must satisfy under it), as z3 terms (see the module docstring).
  The precondition: the original's index values fit int64 (the contract of the index dtype). The rewritten graph's
  inner nodes may leave int64 where they are not used (a masked lane): only its value where valid counts."""
  (ov, ook), (rv, rok) = tr.translate(o), tr.translate(r)
  obl = {"validity": bool_term(ook) == bool_term(rok), "value": z3.Implies(bool_term(ook), ov == rv)}
  if dtypes.is_int(o.dtype) or o.dtype is dtypes.bool:
    obl["bounds"] = z3.And(z3.Implies(bool_term(ook), bounds_hold(o, ov)),
                           z3.Implies(bool_term(rok), bounds_hold(r, rv)))
  return index_in_int64(tr, o), obl

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
    terms.append(z3.Implies(bool_term(ok), z3.And(v >= int(dtypes.min(orig.dtype)), v <= int(dtypes.max(orig.dtype)))))
  return z3.And(*terms)

def prove_exact(o: UOp, r: UOp, timeout_ms: int = 4000) -> bool:
  """Proof of o == r for fixed-width int graphs through exact integers (fast where bit-vector multiplies are slow):
  True if every node of both stays within its dtype (so wrapping never happens) and the values agree. False: no
  verdict (a node may wrap, or z3 gave up)."""
  if any(dtypes.is_float(v.dtype) for v in _leaves(o) + _leaves(r)): return False
  cache: dict[UOp, UOp] = {}
  try: eo, er = as_exact_ints(o, cache), as_exact_ints(r, cache)
  except NotModeled: return False
  tr = translator_for([(eo, er)])
  try:
    (ov, ook), (rv, rok) = tr.translate(eo), tr.translate(er)
    ranges = _ranges_hold(tr, [(n, cache[n]) for n in dict.fromkeys([*o.toposort(), *r.toposort()])])
  except NotModeled: return False
  # NOTE: with no wrapping, the exact value is the fixed-width value (signed or unsigned as the dtype reads it)
  bounds = [z3.Implies(bool_term(ok), z3.And(v >= u.vmin, v <= u.vmax)) for u, v, ok in ((o, ov, ook), (r, rv, rok))
            if dtypes.is_int(u.dtype)]
  s = z3.Solver()
  s.set("timeout", timeout_ms)
  s.add(*tr.constraints, index_in_int64(tr, eo) if o.dtype is dtypes.index or o.dtype is dtypes.bool else True)
  same = z3.And(bool_term(ook) == bool_term(rok), z3.Implies(bool_term(ook), ov == rv))
  s.add(z3.Not(z3.And(ranges, same, *bounds, *tr.assumed)))
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
    tr = translator_for([(o, r)])
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
      tr = translator_for(part)
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

__all__ = ["GENERATOR_VERSION", "pattern_fingerprint", "function_sources", "rule_hash", "edge_constants", "edge_bounds",
           "INT_SWEEP", "FLOAT_SWEEP", "SWEEP", "EMULATED_SWEEP", "NoInstance", "Inexpressible", "InstanceBuilder",
           "Verdict", "translator_for", "index_in_int64", "obligations", "prove_exact", "eval_grid",
           "check_every_point", "prove_one", "prove_batch"]
