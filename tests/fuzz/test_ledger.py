"""The rule ledger (fuzz/ledger.py): the committed certificates are current and refute nothing, the certifier finds a
planted bug, and regressions for the rules it refuted."""
import json, re
import pytest
import numpy as np
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, UPat
from tinygrad.dtype import dtypes
from tinygrad.uop import symbolic as sym
from tinygrad.codegen import decompositions as dec
from tinygrad.renderer import Renderer
from tinygrad.codegen.late import lower_index_dtype
from fuzz import ledger
from fuzz.ledger import Budget, certify, check_ledger, ledger_rules, prove_one, prove_exact, rule_hash
from fuzz import ledger_codegen as lcg

def test_ledger_is_current_and_refutes_no_rule():
  # NOTE: a failure here says which rule: re-run `python -m fuzz ledger --update` (or fix the rule z3 refutes)
  problems = check_ledger()
  assert not problems, "\n".join(problems)

def test_ledger_covers_every_rule_table():
  led = ledger.load_ledger()
  names = {e["rule"] for e in led["rules"]}
  assert {r.name for r in ledger_rules()} == names
  assert {e["rule"] for e in led["codegen"]} == set(lcg.CODEGEN_CERTIFICATES)
  # NOTE: the verdicts the report quotes: every entry has one, and a proved rule was proved on some instance
  for e in led["rules"] + led["codegen"]:
    assert e["verdict"] in ("proved", "not expressible"), e
    assert e["verdict"] != "proved" or e["instances"]["proved"] > 0
    assert e["verdict"] != "not expressible" or e.get("reason")

def test_rule_hash_changes_with_a_helper(monkeypatch):
  fold_divmod = next(r for r in ledger_rules() if r.fn is sym.fold_divmod)
  before = fold_divmod.key
  def _sum_fits(terms, const, dt): return True
  monkeypatch.setattr(sym, "_sum_fits", _sum_fits)
  assert rule_hash(fold_divmod.pat, fold_divmod.fn) != before
  monkeypatch.undo()
  assert rule_hash(fold_divmod.pat, fold_divmod.fn) == before

def test_ledger_check_names_an_edited_rule(tmp_path, monkeypatch):
  path = tmp_path / "ledger.json"
  led = ledger.load_ledger()
  led["rules"] = [e for e in led["rules"] if e["function"] != "fold_mod_mod"]
  path.write_text(json.dumps(led))
  problems = check_ledger(path)
  assert len(problems) == 1 and "fold_mod_mod" in problems[0] and "--update" in problems[0]

def test_ledger_check_fails_on_a_counterexample(tmp_path):
  path = tmp_path / "ledger.json"
  led = ledger.load_ledger()
  led["rules"][0] = {**led["rules"][0], "verdict": "counterexample", "counterexample": {"kind": "value"}}
  path.write_text(json.dumps(led))
  assert any("refutes" in p for p in check_ledger(path))

def _fold_div_div_off_by_one(x, a, b):
  # planted: (x//a)//b -> x//(a*b - 1)
  if not sym.is_scalar_int(x.dtype) or not sym.positive_consts(a, b): return None
  return x // int(a.arg * b.arg - 1) if a.arg * b.arg > 2 else None

def test_certify_refutes_a_planted_bug_with_a_concrete_input():
  pat = UPat(Ops.IDIV, src=(UPat(Ops.IDIV, src=(UPat.var("x"), sym.ca)), sym.cb))
  e = certify(pat, _fold_div_div_off_by_one, Budget(draws=80, fired=8, dtypes=(dtypes.int8, dtypes.index)))
  assert e["verdict"] == "counterexample"
  cex = e["counterexample"]
  assert cex["kind"] in ("value", "bounds")
  # NOTE: the inputs name every variable of the instance (none when it is all constants)
  assert set(cex["inputs"]) == set(re.findall(r"\b(v\d+)\[", cex["instance"]))
  # NOTE: the replay evaluates both sides with the semantics table at the counterexample, without z3
  if cex["kind"] == "value":
    a, b = re.match(r"original = (.*), rewritten = (.*) \(None", cex["replay"]).groups()
    assert a != b

def test_certify_proves_the_real_rule():
  pat = UPat(Ops.IDIV, src=(UPat(Ops.IDIV, src=(UPat.var("x"), sym.ca)), sym.cb))
  e = certify(pat, sym.fold_div_div, Budget(draws=80, fired=8, dtypes=(dtypes.int8, dtypes.index)))
  assert e["verdict"] == "proved" and e["instances"]["proved"] >= 8

# ---- regressions: rules the ledger refuted (each instance is its counterexample) ----

def test_distribute_mul_keeps_a_masked_term():
  v0, v2 = UOp.variable("v0", 0, 3), UOp.variable("v2", -1, -1)
  c = UOp.variable("v1", 0, 1) < 1
  x = (c.where(v0, UOp.invalid()) - v2 * 2147483648)
  u = UOp(Ops.MUL, dtypes.index, (x, UOp.const(dtypes.index, 0)))
  r = sym.distribute_mul(x, u.src[1])
  assert r is None or prove_one(u, r).kind == ""

def test_fold_divmod_unsigned_negated_sum():
  v = UOp.variable("v", 0, 1, dtypes.uint32)
  u = UOp(Ops.IDIV, dtypes.uint32, (UOp(Ops.NEG, dtypes.uint32, (v,)), UOp.const(dtypes.uint32, 1783349834)))
  r = sym.fold_divmod(u, u.src[0], u.src[1])
  assert r is None or prove_one(u, r).kind == ""

def test_neg_bounds_at_the_wrap():
  x = UOp.variable("x", -128, -125, dtypes.int8)
  n = UOp(Ops.NEG, dtypes.int8, (x,))
  # -(-128) wraps to -128 in int8: the bounds must contain it
  assert n.vmin <= -128 <= n.vmax

def test_mulacc_of_floats_is_not_split():
  a, b, c = (UOp.variable(n, -1, 1, dtypes.float32) for n in "abc")
  m = UOp(Ops.MULACC, dtypes.float32, (a, b, c))
  assert dec.pm_decompose.rewrite(m, ctx=Renderer()) is None
  i = UOp(Ops.MULACC, dtypes.int32, tuple(UOp.variable(n, 0, 9, dtypes.int32) for n in "abc"))
  assert dec.pm_decompose.rewrite(i, ctx=Renderer()) is not None

# ---- codegen certificates ----

def test_lowering_refuses_a_variable_beyond_int32():
  with pytest.raises(ValueError, match="beyond int32"): lower_index_dtype(UOp.variable("n", 0, 2**33) + 1)

def test_lowering_proved_on_int64_instance():
  a = UOp.variable("a", 0, 2**31 - 1)
  u = (a * 4 + 7) // 3
  assert lcg.prove_lowering(u)[0] == ""

def test_fast_divmod_classes_and_single_divisors():
  assert lcg.divmod_class_unsigned(7) == ""
  assert lcg.divmod_class_signed(5, nonneg=False) == ""
  for d, dt in ((7, dtypes.uint32), (-3, dtypes.int32), (-2**31, dtypes.int32), (2**31 - 1, dtypes.int32)):
    assert lcg.divmod_one(d, dt) == "", (d, dt)

def test_fast_divmod_planted_wrong_magic_is_refuted(monkeypatch):
  real = dec.magic_unsigned
  def planted(d, bits):
    m, s = real(d, bits)
    return m - 1, s
  monkeypatch.setattr(dec, "magic_unsigned", planted)
  assert lcg.divmod_one(7, dtypes.uint32).startswith("refuted")

def test_fast_divmod_is_used_where_division_is_slow():
  from tinygrad.renderer.cuda import CUDARenderer
  from tinygrad.renderer.cstyle import CRenderer
  from tinygrad.renderer.llvmir import CPULLVMRenderer
  assert dtypes.int32 in CUDARenderer.div_by_multiply and not CRenderer.div_by_multiply
  # NOTE: the CPU LLVM path lowers only 8-bit division (LLVM 22's x86 lowering of narrow i8 vectors is wrong)
  assert CPULLVMRenderer.div_by_multiply == (dtypes.int8, dtypes.uint8)
  x = UOp.variable("x", -100, 100, dtypes.int32)
  r = dec.pm_fast_divmod.rewrite(x // UOp.const(dtypes.int32, 7), ctx=CUDARenderer.div_by_multiply)
  assert r is not None and Ops.IDIV not in {u.op for u in r.toposort()}
  assert dec.pm_fast_divmod.rewrite(x // UOp.const(dtypes.int32, 7), ctx=CPULLVMRenderer.div_by_multiply) is None

def _eval_int_graph(r: UOp, x: UOp, xs: np.ndarray) -> np.ndarray:
  """r's value for every x in xs, each node through the one semantics table (exec_alu / exec_cast)."""
  from tinygrad.uop import semantics
  vals: dict[UOp, np.ndarray] = {}
  for u in r.toposort():
    if u is x: vals[u] = xs.astype(semantics.holder(u.dtype))
    elif u.op is Ops.CONST: vals[u] = np.full(xs.shape, u.arg, dtype=semantics.holder(u.dtype))
    elif u.op is Ops.CAST: vals[u] = semantics.exec_cast(vals[u.src[0]], u.src[0].dtype, u.dtype)
    else: vals[u] = semantics.exec_alu(u.op, u.dtype, *[vals[s] for s in u.src])
  return vals[r]

def test_fast_divmod_narrow_ints_every_divisor_and_dividend():
  # NOTE: exhaustive for 8 bits: the graphs the rule emits, run on the one semantics table, equal C's division
  for dt in (dtypes.int8, dtypes.uint8):
    lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
    xs = np.arange(lo, hi + 1, dtype=np.int64)
    x = UOp.variable("x", lo, hi, dt)
    for d in range(lo, hi + 1):
      if d == 0: continue
      q = np.trunc(xs / d).astype(np.int64)
      for op, want in ((Ops.IDIV, q), (Ops.MOD, xs - q * d)):
        r = dec.lower_divmod_const(tuple(dec.DIVMOD_WIDE), UOp(op, dt, (x, UOp.const(dt, d))), x, UOp.const(dt, d))
        assert r is not None and not ({Ops.IDIV, Ops.MOD} & {u.op for u in r.toposort()})
        got = _eval_int_graph(r, x, xs).astype(np.int64)
        # NOTE: MIN // -1 wraps to MIN (C truncation in the dtype)
        assert (got == (want - lo) % 2**8 + lo if lo else got == want % 2**8).all(), (dt, d, op)

def test_exact_integer_proof_refuses_a_wrapping_graph():
  x = UOp.variable("x", -128, 127, dtypes.int8)
  # x * -1 wraps at -128: exact integers cannot stand for it, so that proof gives no verdict
  assert not prove_exact(UOp(Ops.NEG, dtypes.int8, (x,)), x * -1)
  y = UOp.variable("y", -100, 100, dtypes.int8)
  assert prove_exact(UOp(Ops.NEG, dtypes.int8, (y,)), y * -1)
