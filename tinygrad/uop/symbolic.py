"""Symbolic algebra for index arithmetic: constant folding, identities, canonical sums, div/mod by bounds, comparisons.

Every rule here is sound for the IR's semantics (tinygrad/uop/semantics.py, docs/ir.md "Semantics"): integers wrap
at their width (dtypes.index is unbounded), IDIV and MOD truncate toward zero (x/0 = 0, x%0 = x), and a masked index
`cond.where(x, Invalid)` is invalid wherever cond is False. Invalid is poison: an index ALU op with an invalid source
is invalid, so a rule may never drop (cancel, multiply by zero, fold by bounds) a source that can be invalid.
`python -m fuzz symbolic` proves the rules with z3 on random expressions.
"""
from __future__ import annotations
import math
from typing import Iterator
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.dtype import dtypes, DType, Invalid, InvalidType
from tinygrad.helpers import cdiv
from tinygrad.uop import semantics

# ---- helpers ----

def has_invalid(x: UOp) -> bool:
  """True if Invalid appears anywhere under x (so x may be invalid, and must not be dropped by a rewrite)."""
  # NOTE: cached in the node's __dict__ (beside the key, like vmin/vmax): nodes are immutable
  if (r := x.__dict__.get("_has_invalid")) is not None: return bool(r)
  for u in x.toposort(lambda n: "_has_invalid" not in n.__dict__):
    if "_has_invalid" not in u.__dict__:
      own = u.op is Ops.CONST and u.arg is Invalid
      u.__dict__["_has_invalid"] = own or any(s.__dict__["_has_invalid"] for s in u.src)
  return bool(x.__dict__["_has_invalid"])

def is_scalar_int(dt: DType) -> bool: return dt.count == 1 and dtypes.is_int(dt)
def _is_const(x: UOp) -> bool: return x.op is Ops.CONST and not isinstance(x.arg, InvalidType)
def _fits(v: int, dt: DType) -> bool: return dtypes.min(dt) <= v <= dtypes.max(dt)

def split_uop(x: UOp, sep: Ops) -> Iterator[UOp]:
  """The operands of a chain of `sep` ops: split_uop(a+b+c, Ops.ADD) yields a, b, c."""
  if x.op is sep:
    for s in x.src: yield from split_uop(s, sep)
  else: yield x

# ---- constant folding: the values come from tinygrad/uop/semantics.py, the one definition of every op ----

def fold_alu(a: UOp) -> UOp | None:
  if a.dtype.count != 1: return None
  if any(s.arg is Invalid for s in a.src):
    if a.op is Ops.WHERE: return a.src[1] if a.src[0].arg else a.src[2]
    return UOp.invalid() if a.dtype is dtypes.index and a.op not in GroupOp.Comparison else None
  # NOTE: the operands' dtype: a comparison's sources, WHERE's branches (its condition is bool)
  if (r := semantics.fold_alu(a.op, a.src[-1].dtype, tuple(s.arg for s in a.src))) is None: return None
  return a.const_like(r)

def fold_cast(x: UOp, c: UOp) -> UOp | None:
  if x.dtype.count != 1 or c.dtype.count != 1 or isinstance(c.arg, InvalidType): return None
  return x.const_like(semantics.fold_cast(c.arg, c.dtype, x.dtype))

def fold_bitcast(x: UOp, c: UOp) -> UOp | None:
  # NOTE: a NaN constant has no fixed bits (renderers write the canonical NaN), so its bitcast is left to the target
  if x.dtype.count != 1 or c.dtype.count != 1 or c.dtype is dtypes.index or x.dtype is dtypes.index: return None
  if isinstance(c.arg, float) and math.isnan(c.arg): return None
  return x.const_like(semantics.fold_bitcast(c.arg, c.dtype, x.dtype))

def fold_by_bounds(x: UOp) -> UOp | None:
  """An integer or bool node whose bounds are a single value is that constant (unless it may be invalid)."""
  if x.dtype.count != 1 or not (dtypes.is_int(x.dtype) or x.dtype is dtypes.bool): return None
  if (lo := x.vmin) != x.vmax or isinstance(lo, InvalidType) or has_invalid(x): return None
  return x.const_like(lo)

# ---- Invalid ----

def lift_invalid(a: UOp) -> UOp | None:
  """`cond.where(x, Invalid) op y` -> `cond.where(x op y, Invalid)`: the gate of a masked index moves to the top."""
  for i, s in enumerate(a.src):
    if s.op is Ops.CONST and s.arg is Invalid: return UOp.invalid()
    if s.is_masked(): return s.src[0].where(a.replace(src=a.src[:i] + (s.src[1],) + a.src[i+1:]), UOp.invalid())
  return None

# ---- sums: flattened into terms with integer coefficients ----

def split_sum(x: UOp) -> tuple[dict[UOp, int], int]:
  """x as {term: coefficient} + constant, through ADD, SUB, NEG and MUL by a constant. Terms keep their first order."""
  terms: dict[UOp, int] = {}
  const = 0
  stack: list[tuple[UOp, int]] = [(x, 1)]
  while stack:
    u, k = stack.pop()
    if u.op is Ops.ADD: stack.extend([(u.src[1], k), (u.src[0], k)])
    elif u.op is Ops.SUB: stack.extend([(u.src[1], -k), (u.src[0], k)])
    elif u.op is Ops.NEG: stack.append((u.src[0], -k))
    elif u.op is Ops.MUL and _is_const(u.src[1]): stack.append((u.src[0], k * u.src[1].arg))
    elif u.op is Ops.MUL and _is_const(u.src[0]): stack.append((u.src[1], k * u.src[0].arg))
    elif _is_const(u): const += k * u.arg
    else: terms[u] = terms.get(u, 0) + k
  return terms, const

def build_sum(terms: dict[UOp, int], const: int, dtype: DType) -> UOp:
  """The canonical sum: terms in order, each `t` or `t*k`, left-associated, constant last."""
  ret: UOp | None = None
  for t, k in terms.items():
    if k == 0: continue
    tk = t if k == 1 else UOp(Ops.MUL, dtype, (t, UOp.const(dtype, k)))
    ret = tk if ret is None else UOp(Ops.ADD, dtype, (ret, tk))
  if ret is None: return UOp.const(dtype, const)
  return ret if dtypes.as_const(const, dtype) == 0 else UOp(Ops.ADD, dtype, (ret, UOp.const(dtype, const)))

def _recombine_divmod(terms: dict[UOp, int]) -> bool:
  """(x//c)*c*k + (x%c)*k -> x*k, and ((x//a)%b)*a*k + (x%a)*k -> (x%(a*b))*k (a, b > 0), in place. Sound in C: x ==
  (x/c)*c + x%c always, and x%(a*b) == x - (x/(a*b))*a*b == ((x/a)%b)*a + x%a, as (x/a)/b == x/(a*b) truncating too.
  The second joins the digits of a merged axis (a reshape of (c, 3, 3) to 9c, read back as (i//9)*9 + ((i//3)%3)*3 +
  i%3), so the first then gives back i."""
  for t, k in list(terms.items()):
    if t.op is not Ops.MOD or not _is_const(t.src[1]) or k == 0 or t not in terms: continue
    q = UOp(Ops.IDIV, t.dtype, t.src)
    if terms.get(q) == k * t.src[1].arg and not has_invalid(t):
      del terms[t], terms[q]
      terms[t.src[0]] = terms.get(t.src[0], 0) + k
      return True
    if (a := t.src[1].arg) <= 0 or has_invalid(t): continue
    for m, km in terms.items():
      if km != k * a or m.op is not Ops.MOD or not _is_const(m.src[1]) or m.src[1].arg <= 0: continue
      # NOTE: a*b must be a value of the dtype (int8's 16 * 16 would wrap to 0); where it is not, the remainder by b was
      # already folded away by its bounds, so this only keeps the rule sound on its own
      if dtypes.as_const(a * m.src[1].arg, t.dtype) != a * m.src[1].arg: continue
      if (d := m.src[0]).op is not Ops.IDIV or d.src[0] is not t.src[0] or not _is_const(d.src[1]) or d.src[1].arg != a:
        continue
      del terms[t], terms[m]
      joined = UOp(Ops.MOD, t.dtype, (t.src[0], UOp.const(t.dtype, a * m.src[1].arg)))
      terms[joined] = terms.get(joined, 0) + k
      return True
  return False

def fold_sum(x: UOp) -> UOp | None:
  if not is_scalar_int(x.dtype): return None
  terms, const = split_sum(x)
  while _recombine_divmod(terms): pass
  # NOTE: a term that may be invalid must not cancel away
  if any(k == 0 and has_invalid(t) for t, k in terms.items()): return None
  ret = build_sum(terms, const, x.dtype)
  return None if ret is x else ret

def distribute_mul(x: UOp, c: UOp) -> UOp | None:
  """(a+b)*c -> a*c + b*c for integers (exact modulo 2**n), so sums stay flat."""
  if not is_scalar_int(x.dtype) or not _is_const(c): return None
  terms, const = split_sum(x)
  # NOTE: a term whose coefficient becomes 0 is dropped, and a term that may be invalid must not be
  if any(k * c.arg == 0 and has_invalid(t) for t, k in terms.items()): return None
  return build_sum({t: k * c.arg for t, k in terms.items()}, const * c.arg, x.dtype)

# ---- div and mod (C truncation toward zero) ----

def _floordiv(a: int, b: int) -> int: return a // b
def _nonneg(b: UOp) -> bool: return bool(b.vmin >= 0)
def _nonpos(b: UOp) -> bool: return bool(b.vmax <= 0)
def _ceildiv(a: int, b: int) -> int: return -(-a // b)

def fold_divmod(d: UOp, x: UOp, c: UOp) -> UOp | None:
  if not is_scalar_int(d.dtype) or not _is_const(c): return None
  idiv, cv = d.op is Ops.IDIV, int(c.arg)
  # NOTE: the IR defines x/0 = 0 and x%0 = x (semantics.py); a dividend that may be invalid must stay
  if cv == 0: return x if not idiv else None if has_invalid(x) else d.const_like(0)
  if cv < 0:
    # trunc(x/c) == -trunc(x/-c) and x%c == x%(-c) in C
    if not _fits(-cv, d.dtype): return None
    return (x // -cv) * -1 if idiv else x % -cv
  if has_invalid(x): return None
  if cv == 1: return x if idiv else d.const_like(0)
  lo, hi = x.vmin, x.vmax
  if (q := cdiv(lo, cv)) == cdiv(hi, cv): return d.const_like(q) if idiv else x - q * cv
  terms, const = split_sum(x)
  # NOTE: the rules below reason about x as an integer sum; a fixed-width sum that may wrap is not that sum
  if not _sum_fits(terms, const, d.dtype): return None
  # a common factor divides out exactly whatever the signs: trunc(g*X/(g*C)) == trunc(X/C), and g*X % g*C == g*(X % C)
  if (g := math.gcd(cv, const, *terms.values())) > 1:
    xg = build_sum({t: k // g for t, k in terms.items()}, const // g, d.dtype)
    return xg // (cv // g) if idiv else (xg % (cv // g)) * g
  # x = g*X + e with g = gcd(c, the terms' coefficients) > 1 and 0 <= e < g: where g*X >= 0, e never carries x past a
  # multiple of c, so x//c == X//(c/g) and x%c == (X%(c/g))*g + e (lane e of an unrolled axis, 16*k + e split by 32:
  # every lane then shares lane 0's index and differs by its constant, so the lanes pack into one vector load)
  if terms and (g := math.gcd(cv, *terms.values())) > 1:
    e = const % g
    xg = build_sum({t: k // g for t, k in terms.items()}, (const - e) // g, d.dtype)
    if xg.vmin >= 0: return xg // (cv // g) if idiv else (xg % (cv // g)) * g + e
  # x = c*A + B; if x >= 0 then x/c truncates as floor: floor(x/c) = A + floor(B/c) (and ceil likewise when x <= 0)
  if lo >= 0: part, ok = _floordiv, _nonneg
  elif hi <= 0: part, ok = _ceildiv, _nonpos
  else: return None
  qs = {t: part(k, cv) for t, k in terms.items()}
  qc = part(const, cv)
  a = build_sum(qs, qc, d.dtype)
  b = build_sum({t: k - qs[t] * cv for t, k in terms.items()}, const - qc * cv, d.dtype)
  if (qb := part(b.vmin, cv)) == part(b.vmax, cv): return a + qb if idiv else b - qb * cv
  if a.op is Ops.CONST and a.arg == 0 or not ok(b): return None
  return a + b // cv if idiv else b % cv

def _sum_fits(terms: dict[UOp, int], const: int, dt: DType) -> bool:
  """True if no term, partial sum or total of sum(t*k) + const can leave dt's range: nothing wraps (index never)."""
  if dt is dtypes.index: return True
  # NOTE: an unsigned sum with a negative coefficient or constant wraps below zero (0 - x is 2**n - x)
  if dtypes.is_unsigned(dt) and (const < 0 or any(k < 0 for k in terms.values())): return False
  worst = abs(const) + sum(abs(k) * max(abs(t.vmin), abs(t.vmax)) for t, k in terms.items())
  return bool(worst <= dtypes.max(dt))

def positive_consts(*cs: UOp) -> bool: return all(_is_const(c) and c.arg > 0 for c in cs)

def fold_div_div(x: UOp, a: UOp, b: UOp) -> UOp | None:
  """(x//a)//b -> x//(a*b) for a, b > 0: true for truncation as for floor, since x//a keeps the sign of x."""
  if not is_scalar_int(x.dtype) or not positive_consts(a, b) or not _fits(a.arg * b.arg, x.dtype): return None
  return x // int(a.arg * b.arg)

def fold_mod_mod(x: UOp, a: UOp, b: UOp) -> UOp | None:
  """(x%a)%b -> x%b when b divides a (a, b > 0): both have the sign of x and magnitude |x| mod b."""
  if not is_scalar_int(x.dtype) or not positive_consts(a, b) or a.arg % b.arg != 0: return None
  return x % int(b.arg)

# ---- comparisons (dtypes.index only: it does not wrap, so terms may move across) ----

def fold_cmp_sum(cmp: UOp, x: UOp, c: UOp) -> UOp | None:
  """S + k < d -> T < floor((d-k-1)/g) + 1 with S = g*T; != and == divide by g (decided when g does not divide)."""
  if x.dtype is not dtypes.index or not _is_const(c) or has_invalid(x): return None
  terms, const = split_sum(x)
  terms = {t: k for t, k in terms.items() if k != 0}
  if not terms: return None
  g = math.gcd(*terms.values())
  if next(iter(terms.values())) < 0 and cmp.op is not Ops.CMPLT: g = -g
  t = build_sum({t: k // g for t, k in terms.items()}, 0, dtypes.index)
  d = c.arg - const
  if cmp.op is Ops.CMPLT:
    if g < 0: return None
    return t < _floordiv(d - 1, g) + 1
  if d % g != 0: return cmp.const_like(cmp.op is Ops.CMPNE)
  return t.ne(d // g) if cmp.op is Ops.CMPNE else t.eq(d // g)

def fold_self_cmp(cmp: UOp, x: UOp) -> UOp | None:
  if not is_scalar_int(x.dtype) or has_invalid(x): return None
  return cmp.const_like(cmp.op is Ops.CMPEQ)

def fold_not_lt(a: UOp, b: UOp) -> UOp | None:
  """!(a < b) -> b-1 < a on dtypes.index (b-1 cannot overflow there)."""
  return (b - 1 < a) if a.dtype is dtypes.index else None

# ---- where ----

def fold_where_invalid_nest(c: UOp, c2: UOp, x: UOp) -> UOp: return (c & c2).where(x, UOp.invalid())

def fold_max(m: UOp, x: UOp, y: UOp) -> UOp | None:
  if m.dtype.count != 1 or not (dtypes.is_int(m.dtype) or m.dtype is dtypes.bool): return None
  if x.vmin >= y.vmax and not has_invalid(y): return x
  if y.vmin >= x.vmax and not has_invalid(x): return y
  return None

def _cond_not(c: UOp) -> UOp: return c.ne(True)
def _int_or_bool(x: UOp) -> bool: return dtypes.is_int(x.dtype) or x.dtype is dtypes.bool

# ---- rules too long for one table line ----

def fold_invalid_first(c: UOp, x: UOp) -> UOp | None:
  """where(c, Invalid, x) -> where(!c, x, Invalid): the masked form keeps Invalid in the false branch."""
  return None if x.arg is Invalid else _cond_not(c).where(x, UOp.invalid())

def fold_flip_not(c: UOp, a: UOp, b: UOp) -> UOp | None:
  return None if a.arg is Invalid or b.arg is Invalid else c.where(b, a)

def fold_self_div(d: UOp, x: UOp) -> UOp | None:
  """x//x -> 1 and x%x -> 0 when x cannot be 0."""
  if not is_scalar_int(x.dtype) or has_invalid(x) or x.vmin <= 0 <= x.vmax: return None
  return d.const_like(int(d.op is Ops.IDIV))

def fold_mul_mul(x: UOp, a: UOp, b: UOp) -> UOp | None:
  return x * (a.arg * b.arg) if is_scalar_int(x.dtype) and _is_const(a) and _is_const(b) else None

# ---- the rule tables ----

V = UPat.var
cv, ca, cb = UPat(Ops.CONST, name="c"), UPat(Ops.CONST, name="a"), UPat(Ops.CONST, name="b")
inv = UPat(Ops.CONST, arg=Invalid)
TRUE, FALSE = UPat.const(dtypes.bool, True), UPat.const(dtypes.bool, False)
index_value_ops = (GroupOp.ALU - GroupOp.Comparison) - {Ops.WHERE}

symbolic_simple = PatternMatcher([
  # constant folding
  (UPat(GroupOp.ALU, src=UPat(Ops.CONST), name="a"), fold_alu),
  (UPat(Ops.CAST, src=(cv,), name="x"), fold_cast),
  (UPat(Ops.BITCAST, src=(cv,), name="x"), fold_bitcast),
  # Invalid is poison: an index value op with a masked source is masked by the same gate
  (UPat(index_value_ops, dtypes.index, name="a"), lift_invalid),
  # identities
  (V("x") * 1, lambda x: x),
  (V("x", dtypes.bool) & True, lambda x: x),
  (V("x", dtypes.bool) | False, lambda x: x),
  (V("x", dtypes.bool) ^ False, lambda x: x),
  (V("x", dtypes.bool).ne(False), lambda x: x),
  (V("x", dtypes.bool).ne(True).ne(True), lambda x: x),
  (V("x", dtypes.bool) & False, lambda x: None if has_invalid(x) else x.const_like(False)),
  (V("x", dtypes.bool) | True, lambda x: None if has_invalid(x) else x.const_like(True)),
  (UPat((Ops.AND, Ops.OR, Ops.MAX), src=[V("x"), V("x")]), lambda x: x if _int_or_bool(x) else None),
  # where
  (UPat(Ops.WHERE, src=(cv, V("a"), V("b"))), lambda c, a, b: a if c.arg else b),
  (UPat(Ops.WHERE, src=(V(), V("a"), V("a"))), lambda a: a),
  (UPat(Ops.WHERE, src=(V("c"), UPat(Ops.WHERE, src=(V("c"), V("a"), V())), V("b"))), lambda c, a, b: c.where(a, b)),
  (UPat(Ops.WHERE, src=(V("c"), V("a"), UPat(Ops.WHERE, src=(V("c"), V(), V("b"))))), lambda c, a, b: c.where(a, b)),
  (UPat(Ops.WHERE, src=(V("c"), UPat(Ops.WHERE, src=(V("c2"), V("x"), inv)), inv)), fold_where_invalid_nest),
  (UPat(Ops.WHERE, src=(V("c"), inv, V("x"))), fold_invalid_first),
  (UPat(Ops.WHERE, dtypes.bool, src=(V("c"), TRUE, FALSE)), lambda c: c),
  (UPat(Ops.WHERE, dtypes.bool, src=(V("c"), FALSE, TRUE)), _cond_not),
  (UPat(Ops.WHERE, src=(V("c", dtypes.bool).ne(True), V("a"), V("b"))), fold_flip_not),
])

def fold_empty_loop(x: UOp) -> UOp | None:
  """A REDUCE over a range that runs no iteration is its identity; an END over one does nothing (an empty GROUP).
  NOTE: such a range has bounds (0, 0), so the code under it folds as if it ran once: it must go (found by fuzz)."""
  if not any(r.op is Ops.RANGE and r.src[0].vmax < 1 for r in x.src[1:]): return None
  if x.op is Ops.END: return UOp.group()
  return x.const_like({Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: dtypes.min(x.dtype)}[x.arg])

symbolic = symbolic_simple + PatternMatcher([
  # a loop that runs no iteration
  (UPat((Ops.END, Ops.REDUCE), name="x"), fold_empty_loop),
  # a node whose bounds are one value is that value
  (UPat(GroupOp.ALU, name="x"), fold_by_bounds),
  # integer identities
  (V("x") + 0, lambda x: x if dtypes.is_int(x.dtype) else None),
  (V("x") * 0, lambda x: x.const_like(0) if dtypes.is_int(x.dtype) and not has_invalid(x) else None),
  (UPat(Ops.NEG, src=(V("x"),)), lambda x: x * -1 if is_scalar_int(x.dtype) else None),
  (UPat(Ops.SUB, src=(V("x"), V("y"))), lambda x, y: x + y * -1 if is_scalar_int(x.dtype) else None),
  (UPat((Ops.IDIV, Ops.MOD), src=(V("x"), V("x")), name="d"), fold_self_div),
  # canonical products and sums: constants on the right, x*c1*c2 -> x*(c1*c2), (a+b)*c distributed, like terms combined
  (UPat(Ops.MUL, src=(cv, V("x"))), lambda c, x: x * c if is_scalar_int(x.dtype) and not _is_const(x) else None),
  (UPat(Ops.MUL, src=(UPat(Ops.MUL, src=(V("x"), ca)), cb)), fold_mul_mul),
  (UPat(Ops.MUL, src=(UPat((Ops.ADD, Ops.SUB), name="x"), cv)), distribute_mul),
  (UPat(Ops.ADD, name="x"), fold_sum),
  # division and remainder by constants (C truncation; x/0 = 0 and x%0 = x), using bounds
  (UPat(Ops.IDIV, src=(UPat(Ops.IDIV, src=(V("x"), ca)), cb)), fold_div_div),
  (UPat(Ops.MOD, src=(UPat(Ops.MOD, src=(V("x"), ca)), cb)), fold_mod_mod),
  (UPat((Ops.IDIV, Ops.MOD), src=(V("x"), cv), name="d"), fold_divmod),
  # max by bounds
  (UPat(Ops.MAX, src=(V("x"), V("y")), name="m"), fold_max),
  # comparisons
  (UPat((Ops.CMPLT, Ops.CMPNE), src=(V("x"), V("x")), name="cmp"), fold_self_cmp),
  (UPat(Ops.CMPEQ, src=(V("x"), V("x")), name="cmp"), fold_self_cmp),
  (UPat(GroupOp.Comparison, src=(UPat((Ops.ADD, Ops.MUL), name="x"), cv), name="cmp"), fold_cmp_sum),
  (UPat(Ops.CMPLT, src=(V("a"), V("b"))).ne(True), fold_not_lt),
])

# the set codegen uses (more may be added here; everything in it must stay sound)
sym = symbolic

def simplify(u: UOp) -> UOp:
  """`u` rewritten by `symbolic` to a fixed point: constants folded, sums canonical, div/mod and comparisons by
  bounds."""
  return graph_rewrite(u, symbolic, name="simplify")

__all__ = ["symbolic_simple", "symbolic", "sym", "simplify", "split_uop", "split_sum", "build_sum", "has_invalid"]
