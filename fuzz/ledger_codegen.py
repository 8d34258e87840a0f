"""Ledger certificates for codegen rewrites that are not one rule of a matcher (fuzz/ledger.py certifies those):

- `lower_index_dtype` (codegen/late.py): dtypes.index lowered to int32, or int64 where bounds need it. Proved on
  instances (index expressions of every ALU op, bounds at the int32 edge, constants beyond it): for every value of the
  variables, the lowered bit-vector graph read as a signed integer equals the unbounded index expression, wherever the
  index values fit int64 (the index dtype's contract). A DEFINE_VAR is int32 after lowering: the variables' bounds are
  within int32 (a wider one is refused by the lowering, which the certificate checks too).
- `fast_divmod` for every divisor (codegen/decompositions.py): the multiply-and-shift graphs for 8-, 16- and 32-bit
  division and remainder by a constant, proved for all divisors at once: per shift class (divisors with the same
  ceil(log2 d)), z3 proves over symbolic dividend, divisor and magic number (integers, nonlinear) that the graph, built
  by the same functions codegen calls but in dtypes.index, equals C's truncating division, and that no step leaves the
  fixed-width dtype codegen computes it in (so the bit-vector graph computes the same integers). The divisors without a
  class (+-1, MIN, powers of two) are proved one by one over the dividend; the `fast_divmod` rule table in the ledger
  proves the emitted graphs themselves, with their constants, for a sample of divisors.
"""
from __future__ import annotations
import hashlib, random, time
from dataclasses import dataclass
from typing import Any, Callable
import z3
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
from tinygrad.dtype import dtypes
from tinygrad.codegen import late
from tinygrad.codegen.late import lower_index_dtype
from tinygrad.codegen import decompositions as dec
from fuzz.strategies import RandomChooser
from fuzz.ledger import GENERATOR_VERSION, InstanceBuilder, NoInstance, function_sources, prove_exact
from fuzz.ledger import _index_in_int64, _translator, _zb
from spec.smt import Translator, NotModeled, tdiv_int, to_python

@dataclass(frozen=True)
class CodegenCert:
  """One certificate: `run()` gives the verdict part of the ledger entry; the key hashes `sources`' code."""
  name: str
  what: str
  sources: tuple[Callable[..., Any], ...]
  run: Callable[[], dict[str, Any]]
  @property
  def key(self) -> str:
    h = hashlib.sha256(f"v{GENERATOR_VERSION}\n{self.name}\n".encode())
    for fn in self.sources:
      for src in function_sources(fn): h.update(src.encode())
    return h.hexdigest()[:16]

def certify_codegen(c: CodegenCert) -> dict[str, Any]:
  st = time.perf_counter()
  entry = {"key": c.key, "rule": c.name, "table": "codegen", "what": c.what, **c.run()}
  entry["seconds"] = round(time.perf_counter() - st, 2)
  return entry

# ---- index lowering ----

INT32_MIN, INT32_MAX = -2**31, 2**31 - 1

def _lowering_instances(n: int, seed: int) -> list[UOp]:
  """Index expressions (and comparisons of them) without Invalid, over variables whose bounds fit int32."""
  rng, out = random.Random(seed), list[UOp]()
  while len(out) < n:
    b = InstanceBuilder(RandomChooser(rng.getrandbits(64)), dtypes.index, max_depth=3)
    try: u = b.cond(3) if rng.random() < 0.2 else b.expr(dtypes.index, 3, allow_invalid=False)
    except NoInstance: continue
    if any(v.op is Ops.DEFINE_VAR and v.dtype is dtypes.index and not INT32_MIN <= v.arg[1] <= v.arg[2] <= INT32_MAX
           for v in u.toposort()): continue
    if u.dtype is dtypes.bool and not any(v.dtype is dtypes.index for v in u.toposort()): continue
    out.append(u)
  return out

def prove_lowering(u: UOp, timeout_ms: int = 4000) -> tuple[str, dict[str, Any]]:
  """("", {}) when the lowered graph equals u wherever u's index values fit int64; else (kind, inputs)."""
  low = lower_index_dtype(u)
  # NOTE: exact integers first: every lowered node within its int32/int64 range is the claim, and z3 proves it faster
  # than the bit-vector equivalence (which decides when the exact proof has no verdict)
  if prove_exact(u, low, timeout_ms): return "", {}
  tr = _translator([(u, u)])
  ov, ook = tr.translate(u)
  for v in u.toposort():
    if v.op is not Ops.DEFINE_VAR or v.dtype is not dtypes.index: continue
    lv = UOp(Ops.DEFINE_VAR, dtypes.int32 if v.dtype is dtypes.index else v.dtype, arg=v.arg)
    # NOTE: the runtime passes a variable's value as an int32 argument
    tr.cache[(lv, 0)] = (z3.Int2BV(tr.vars[v], 32), True)
  lv_, lok = tr.translate(low)
  if low.dtype is dtypes.bool: same = lv_ == ov
  elif low.dtype.scalar() not in (dtypes.int32, dtypes.int64): return "dtype", {"lowered": str(low.dtype)}
  else: same = z3.BV2Int(lv_, is_signed=True) == ov
  s = z3.Solver()
  s.set("timeout", timeout_ms)
  s.add(*tr.constraints, _index_in_int64(tr, u))
  s.add(z3.Not(z3.And(_zb(ook) == _zb(lok), z3.Implies(_zb(ook), same), *tr.assumed)))
  r = s.check()
  if r == z3.unsat: return "", {}
  if r == z3.unknown: return "unknown", {}
  m = s.model()
  return "value", {v.arg[0]: to_python(m.eval(tr.vars[v], model_completion=True), v.dtype)
                   for v in u.toposort() if v.op is Ops.DEFINE_VAR and v in tr.vars}

def _refuses_wide_variable() -> bool:
  """A DEFINE_VAR beyond int32 cannot be an int32 argument: the lowering must refuse it, not truncate it."""
  v = UOp.variable("wide", 0, 2**33)
  try: lower_index_dtype(v + 1)
  except ValueError: return True
  return False

def run_lowering(n: int = 240, seed: int = 7) -> dict[str, Any]:
  counts = {"fired": 0, "proved": 0, "excluded": 0, "unknown": 0}
  wide = {"int32": 0, "int64": 0}
  for u in _lowering_instances(n, seed):
    counts["fired"] += 1
    low = lower_index_dtype(u)
    for x in low.toposort():
      if x.dtype.scalar() is dtypes.int64: wide["int64"] += 1
      elif x.dtype.scalar() is dtypes.int32: wide["int32"] += 1
    try: kind, inputs = prove_lowering(u)
    except NotModeled:
      counts["excluded"] += 1
      continue
    if kind == "": counts["proved"] += 1
    elif kind == "unknown": counts["unknown"] += 1
    else:
      return {"verdict": "counterexample", "instances": counts,
              "counterexample": {"kind": kind, "instance": str(u), "inputs": inputs}}
  if not _refuses_wide_variable():
    return {"verdict": "counterexample", "instances": counts, "counterexample": {
      "kind": "value", "instance": "DEFINE_VAR('wide', 0, 2**33) + 1", "detail": "lowered to an int32 variable: a "
      "value above 2**31-1 is truncated when passed"}}
  return {"verdict": "proved", "instances": counts, "lowered_nodes": wide}

# ---- integer division by a constant, every divisor ----

def _prove(claims: Any, constraints: list[Any], timeout_ms: int = 60_000) -> str:
  s = z3.Solver()
  s.set("timeout", timeout_ms)
  s.add(*constraints)
  s.add(z3.Not(claims))
  r = s.check()
  return "" if r == z3.unsat else "unknown" if r == z3.unknown else f"refuted: {s.model()}"

def _in(tr: Translator, u: UOp, lo: int, hi: int) -> Any:
  """Every node of u (an index graph) is within [lo, hi]: the fixed-width graph computes the same integers."""
  return z3.And(*[z3.And(tr.value(n) >= lo, tr.value(n) <= hi) for n in u.toposort() if n.op is not Ops.CONST])

def divmod_class_unsigned(s: int, bits: int = 32) -> str:
  """uint`bits` divisors 2**(s-1) < d < 2**s: udiv_magic(x, m - 2**bits, s) == x // d and x - q*d == x % d."""
  # NOTE: the magic number's variable is unbounded here: its range is what the claims prove, not assume
  x, ml = UOp.variable("x", 0, 2**bits - 1), UOp.variable("mlow", -2**80, 2**80)
  q = dec.udiv_magic(x, ml, s, bits, dtypes.index)
  tr = Translator(exact=True)
  qv, xv, mv = tr.value(q), tr.vars[x], tr.vars[ml]
  d = z3.Int("d")
  # NOTE: mlow as magic_unsigned computes it: m = 2**(bits+s) // d + 1, less its top bit
  defs = [d > 2**(s - 1), d < 2**s, mv == 2**(bits + s) / d + 1 - 2**bits]
  claims = z3.And(qv == xv / d, xv - qv * d == xv % d, _in(tr, q, 0, 2**(2 * bits) - 1), qv <= 2**bits - 1)
  return _prove(claims, tr.constraints + defs)

def divmod_class_signed(s: int, nonneg: bool, bits: int = 32) -> str:
  """int`bits` divisors 2**(s-1) < d <= 2**s (d < 2**(bits-1)), and their negatives: sdiv_magic(x, m, bits-1+s) ==
  trunc(x / d) (negated for -d) and x - q*d == x % d (C's remainder). `nonneg`: x >= 0 (the graph leaves its sign term
  out)."""
  lo, hi = -2**(bits - 1), 2**(bits - 1) - 1
  x, mm = UOp.variable("x", 0 if nonneg else lo, hi), UOp.variable("m", -2**80, 2**80)
  q = dec.sdiv_magic(x, mm, bits - 1 + s, bits, dtypes.index)
  tr = Translator(exact=True)
  qv, xv, mv = tr.value(q), tr.vars[x], tr.vars[mm]
  d = z3.Int("d")
  defs = [d > 2**(s - 1), d <= min(2**s, hi), mv == 2**(bits - 1 + s) / d + 1]
  want = tdiv_int(xv, d, nonzero=True)
  claims = z3.And(qv == want, -qv == tdiv_int(xv, -d, nonzero=True), xv - qv * d == xv - want * d,
                  _in(tr, q, -2**(2 * bits - 1), 2**(2 * bits - 1) - 1), qv >= lo, qv <= hi, qv * d >= lo, qv * d <= hi)
  return _prove(claims, tr.constraints + defs)

def divmod_one(d: int, dt: Any) -> str:
  """fast_idiv/lower_divmod_const for one divisor, z3 over every dividend (bit-vectors, the emitted graph)."""
  x = UOp.variable("x", int(dtypes.min(dt)), int(dtypes.max(dt)), dt)
  c = UOp.const(dt, d)
  for op in (Ops.IDIV, Ops.MOD):
    orig = UOp(op, dt, (x, c))
    new = dec.lower_divmod_const(tuple(dec.DIVMOD_WIDE), orig, x, c)
    assert new is not None
    # NOTE: exact integers first (z3 is slow on 64-bit multiplies as bit-vectors); where the graph relies on wrapping
    # (x * -1 at MIN) that proof has no verdict and the bit-vector one decides
    if prove_exact(orig, new, 60_000): continue
    tr = Translator(exact=True)
    if (r := _prove(tr.value(orig) == tr.value(new), tr.constraints)) != "": return r
  return ""

def run_fast_divmod() -> dict[str, Any]:
  cases: list[tuple[str, Callable[..., str], tuple[Any, ...]]] = []
  for bits in (8, 16, 32):
    cases += [(f"uint{bits} 2**{s-1} < d < 2**{s}", divmod_class_unsigned, (s, bits)) for s in range(2, bits + 1)]
    cases += [(f"int{bits} 2**{s-1} < |d| <= 2**{s}" + (" x >= 0" if nn else ""), divmod_class_signed, (s, nn, bits))
              for s in range(1, bits) for nn in (False, True)]
  # NOTE: the divisors the graph builder treats apart: powers of two (a shift), 1, -1 and MIN
  singles = [(dt, 2**k) for dt in (dtypes.uint8, dtypes.uint16, dtypes.uint32) for k in range(dt.itemsize * 8)]
  singles += [(dt, d) for dt in (dtypes.int8, dtypes.int16, dtypes.int32) for d in (1, -1, -2**(dt.itemsize * 8 - 1))]
  cases += [(f"{dt} d = {d}", divmod_one, (d, dt)) for dt, d in singles]
  proved, failed = 0, []
  for name, fn, args in cases:
    r = fn(*args)
    if r == "": proved += 1
    else: failed.append(f"{name}: {r}")
  out: dict[str, Any] = {"instances": {"fired": len(cases), "proved": proved, "excluded": 0,
                                       "unknown": sum(f.endswith("unknown") for f in failed)}}
  refuted = [f for f in failed if not f.endswith("unknown")]
  if refuted: return {**out, "verdict": "counterexample", "counterexample": {"kind": "value", "detail": refuted[0]}}
  if failed: return {**out, "verdict": "not expressible", "reason": "z3 gave up on: " + "; ".join(failed)}
  return {**out, "verdict": "proved"}

CODEGEN_CERTIFICATES: dict[str, CodegenCert] = {c.name: c for c in [
  CodegenCert("codegen lower_index_dtype", "the int32/int64 lowering of index expressions equals the unbounded "
              "expression where index values fit int64 (variables within int32)", (lower_index_dtype, late.lower_one),
              run_lowering),
  CodegenCert("codegen fast_divmod every divisor", "8/16/32-bit IDIV and MOD by any constant as a multiply and shifts "
              "equal C's division, per shift class over symbolic divisor, magic number and dividend",
              (dec.fast_idiv, dec.lower_divmod_const, dec.magic_unsigned, dec.magic_signed), run_fast_divmod),
]}

__all__ = ["CodegenCert", "CODEGEN_CERTIFICATES", "certify_codegen", "prove_lowering", "run_lowering",
           "run_fast_divmod", "divmod_class_unsigned", "divmod_class_signed", "divmod_one"]
