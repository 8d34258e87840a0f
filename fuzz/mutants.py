"""Planted bugs for the mutation score: each one changes one rewrite rule of this process, subtly, and can be taken
out again. A campaign level "kills" a mutant when a case fails with the mutant in and passes without it (so a bug the
compiler has anyway does not count). `python -m fuzz mutants` reports the share each level kills in a fixed budget,
guided (the scheduler of fuzz/scheduler.py) vs unguided; fuzz/targets/common.py takes `--mutant=NAME`.

  boundary_off_by_one  fold_cmp_sum: `S + k < d` folds to `T < floor(d-k)/g + 1`, one too many (`<=` at the boundary)
  negative_sign_slip   fold_divmod: a sum that is never positive is split with floor division instead of truncation
  unsigned_wrap        fold_cmp_sum: `u + k < d` on an unsigned u folds to `u < d - k` as if the sum could not wrap
  wrong_gate           fold_where_invalid_nest: c ? (c2 ? x : Invalid) : Invalid keeps only the inner gate c2
  dropped_cast         promote_emulated: an operand that is a float32 result cast to bfloat16/fp8 is used without
                       that cast (the intermediate rounding to the emulated dtype is dropped; dtypes stay consistent)
  mod_mod_any          fold_mod_mod: (x%a)%b folds to x%b even where b does not divide a (a missing side condition)

Swapping a rule's function rebuilds every PatternMatcher that holds it (the module tables and any matcher made from
them with `+`: tinygrad's live_matchers()), so the change is in exactly one rule wherever that rule is used. While a
mutant is in, the replay capture is paused (replay.capture.pause): what the compiler makes then is no record of the
code."""
from __future__ import annotations
import operator, types
from dataclasses import dataclass
from typing import Any, Callable
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, PatternMatcher, live_matchers
from tinygrad.uop import symbolic as sym
from tinygrad.codegen import decompositions as dec, cutting
from tinygrad.dtype import dtypes
from replay import capture

def _matchers_with(fn: Callable[..., Any]) -> list[PatternMatcher]:
  return [pm for pm in live_matchers() if any(f is fn for _, f in pm.patterns)]

def swap_rule(old: Callable[..., Any], new: Callable[..., Any]) -> int:
  """Every PatternMatcher rule whose function is `old` gets `new` instead (in place); the number of matchers changed."""
  pms = _matchers_with(old)
  for pm in pms: pm.__init__([(p, new if f is old else f) for p, f in pm.patterns])  # type: ignore[misc]
  # NOTE: CUT keeps its cut of each kernel (made with the rules): a cut made with the other rule must not be reused
  cutting.forget_cuts()
  return len(pms)

def with_globals(fn: Callable[..., Any], **names: Any) -> Callable[..., Any]:
  """A copy of `fn` that sees `names` instead of its module's globals of those names (the module is untouched)."""
  g = {**fn.__globals__, **names}
  new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
  new.__qualname__, new.__doc__ = fn.__qualname__, fn.__doc__
  return new

# ---- the mutated rules ----

def _off_by_one_cmp_sum(cmp: UOp, x: UOp, c: UOp) -> UOp | None:
  r = sym.fold_cmp_sum(cmp, x, c)
  # NOTE: only where the real rule rewrites to `T < k`: a rewrite of its own output would never converge
  if r is None or r is cmp or cmp.op is not Ops.CMPLT or r.op is not Ops.CMPLT or r.src[1].op is not Ops.CONST: return r
  return r.src[0] < r.src[1].arg + 1

def _cmp_sum_ignoring_wrap(cmp: UOp, x: UOp, c: UOp) -> UOp | None:
  if cmp.op is not Ops.CMPLT or x.dtype.count != 1 or not dtypes.is_unsigned(x.dtype) or c.op is not Ops.CONST:
    return sym.fold_cmp_sum(cmp, x, c)
  terms, const = sym.split_sum(x)
  if len(terms) != 1 or const == 0 or next(iter(terms.values())) != 1: return None
  # NOTE: the planted slip: u + k < d is u < d - k only if u + k does not wrap
  return cmp.const_like(False) if c.arg - const <= 0 else next(iter(terms)) < UOp.const(x.dtype, c.arg - const)

def _drop_outer_gate(c: UOp, c2: UOp, x: UOp) -> UOp: return c2.where(x, UOp.invalid())

def _mod_mod_any(x: UOp, a: UOp, b: UOp) -> UOp | None:
  # NOTE: the planted slip: the rule's side condition, b divides a, is gone
  if not sym.is_scalar_int(x.dtype) or not sym.positive_consts(a, b): return None
  return x % int(b.arg)

def _promote_without_rounding(a: UOp) -> UOp | None:
  if a.op is Ops.WHERE or not any(x.dtype.scalar() in dec.EMULATED for x in (a, *a.src)): return None
  f = dtypes.float32
  def widen(s: UOp) -> UOp:
    if s.dtype.scalar() not in dec.EMULATED: return s
    if s.op is Ops.CAST and s.src[0].dtype.scalar() is f: return s.src[0]
    return s.cast(f.vec(s.dtype.count))
  out = a.dtype if a.dtype.scalar() not in dec.EMULATED else f.vec(a.dtype.count)
  ret = UOp(a.op, out, tuple(widen(s) for s in a.src), a.arg)
  return ret if out is a.dtype else ret.cast(a.dtype)

@dataclass
class Mutant:
  name: str
  kind: str
  rule: Callable[..., Any]
  make: Callable[[], Callable[..., Any]]
  applied: Callable[..., Any] | None = None
  paused: Any = None  # the replay capture session paused while the mutant is in
  def apply(self) -> None:
    if self.applied is not None: return
    applied = self.make()
    if swap_rule(self.rule, applied) == 0: raise RuntimeError(f"mutant {self.name}: no matcher holds its rule")
    self.applied, self.paused = applied, capture.pause()
  def revert(self) -> None:
    if self.applied is None: return
    swap_rule(self.applied, self.rule)
    capture.resume(self.paused)
    self.applied = self.paused = None

MUTANTS: dict[str, Mutant] = {m.name: m for m in [
  Mutant("boundary_off_by_one", "off-by-one at a boundary", sym.fold_cmp_sum, lambda: _off_by_one_cmp_sum),
  Mutant("negative_sign_slip", "sign slip for negative operands", sym.fold_divmod,
         lambda: with_globals(sym.fold_divmod, _ceildiv=operator.floordiv)),
  Mutant("unsigned_wrap", "unsigned wrap", sym.fold_cmp_sum, lambda: _cmp_sum_ignoring_wrap),
  Mutant("wrong_gate", "wrong gate", sym.fold_where_invalid_nest, lambda: _drop_outer_gate),
  Mutant("dropped_cast", "dropped cast", dec.promote_emulated, lambda: _promote_without_rounding),
  Mutant("mod_mod_any", "missing side condition", sym.fold_mod_mod, lambda: _mod_mod_any),
]}

def apply_mutant(name: str) -> Mutant:
  if name not in MUTANTS: raise ValueError(f"unknown mutant {name!r}; one of {', '.join(MUTANTS)}")
  m = MUTANTS[name]
  m.apply()
  return m


# ---- `python -m fuzz run --setup fuzz.mutants:<name>`: a campaign's workers with one mutant planted ----

def boundary_off_by_one() -> None: apply_mutant("boundary_off_by_one")
def negative_sign_slip() -> None: apply_mutant("negative_sign_slip")
def unsigned_wrap() -> None: apply_mutant("unsigned_wrap")
def wrong_gate() -> None: apply_mutant("wrong_gate")
def dropped_cast() -> None: apply_mutant("dropped_cast")
def mod_mod_any() -> None: apply_mutant("mod_mod_any")

__all__ = ["MUTANTS", "Mutant", "apply_mutant", "swap_rule", "with_globals", *MUTANTS]
