"""Property tests: simplify() keeps the value of random index expressions (z3 proof) and vmin/vmax bound them.

Together these check a little over 10,000 expressions per run (the issue's floor), in batches so z3 stays cheap.
"""
from hypothesis import given, settings
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop.symbolic import simplify
from tinygrad.dtype import dtypes
from fuzz.strategies import (index_expressions, index_expression_batches, build_index_expression, RandomChooser, IndexExprConfig,
                             variables_of, wrapping_config)
from fuzz.oracles.symbolic import check_expression, check_batch, eval_index, run_symbolic_fuzz
from fuzz.__main__ import main as fuzz_main

BATCH, BATCHES = 50, 200

@settings(max_examples=200)
@given(index_expressions())
def test_simplify_sound_on_random_expressions(ev):
  e, variables = ev
  assert all(v.op in (Ops.DEFINE_VAR, Ops.RANGE) for v in variables)
  res = check_expression(e)
  assert res.ok, str(res)

@settings(max_examples=BATCHES)
@given(index_expression_batches(BATCH))
def test_simplify_sound_on_batches(batch):
  pairs = [(e, simplify(e)) for e, _ in batch]
  bad = [r for r in check_batch(pairs) if not r.ok]
  assert not bad, "\n".join(str(r) for r in bad[:3])
  # simplify reaches a fixed point: a second run changes nothing
  for _, s in pairs: assert simplify(s) is s, f"simplify is not idempotent on {s}"

@settings(max_examples=20)
@given(index_expression_batches(BATCH, wrapping_config(dtypes.int8)))
def test_simplify_sound_on_wrapping_int8(batch):
  # the same rules on a fixed-width int: sums may wrap, so rules that reason about integer sums must notice
  pairs = [(e, simplify(e)) for e, _ in batch]
  assert all(e.dtype in (dtypes.int8, dtypes.bool) for e, _ in pairs)
  bad = [r for r in check_batch(pairs) if not r.ok]
  assert not bad, "\n".join(str(r) for r in bad[:3])

def test_strategy_covers_the_ops():
  seen: set[Ops] = set()
  for i in range(300):
    e, _ = build_index_expression(RandomChooser(i))
    seen |= {u.op for u in e.toposort()}
  assert {Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.WHERE, Ops.CMPLT, Ops.CMPNE, Ops.RANGE, Ops.DEFINE_VAR} <= seen
  assert any(u.op is Ops.CONST and u.arg is not None and not isinstance(u.arg, bool) and u.arg < 0
             for i in range(50) for u in build_index_expression(RandomChooser(i))[0].toposort())

def test_strategy_divides_only_by_nonzero():
  for i in range(300):
    e, _ = build_index_expression(RandomChooser(i), IndexExprConfig(invalid=False))
    for u in e.toposort():
      if u.op in (Ops.IDIV, Ops.MOD): assert u.src[1].vmin > 0 or u.src[1].vmax < 0, f"divisor may be 0 in {u}"

def test_seeded_builder_is_deterministic():
  assert build_index_expression(RandomChooser(123))[0] is build_index_expression(RandomChooser(123))[0]

# ---- the oracle itself must catch unsound rewrites ----

# floor-division thinking applied to C truncation: (a*c + b)//c -> a + b//c without the sign conditions (wrong for negatives)
_unsound = PatternMatcher([
  (UPat(Ops.IDIV, src=(UPat(Ops.ADD, src=[UPat(Ops.MUL, src=(UPat.var("a"), UPat.cvar("c"))), UPat.var("b")]), UPat.cvar("c"))),
   lambda a, b, c: a + b // c),
])

def test_checker_catches_unsound_rule_with_counterexample():
  y = UOp.variable("y", -5, 5)
  e = (y * 4 + 3) // 4
  bad = graph_rewrite(e, _unsound, name="unsound")
  assert bad is not e
  res = check_expression(e, bad)
  assert not res.ok and res.kind == "value" and res.counterexample
  # the counterexample replays without z3
  assert eval_index(e, res.env) != eval_index(bad, res.env)

def test_checker_catches_validity_and_bounds():
  x = UOp.variable("x", 0, 10)
  masked = (x < 5).where(x, UOp.invalid())
  res = check_expression(masked, x)
  assert not res.ok and res.kind == "validity"
  liar = UOp.variable("liar_for_bounds_test", 0, 10) + 1
  liar.__dict__["_min_max"] = (1, 5)   # NOTE: a fresh node, poisoned on purpose to prove the bounds check runs
  res = check_expression(liar, liar)
  assert not res.ok and res.kind == "bounds"

def test_run_symbolic_fuzz_summary():
  s = run_symbolic_fuzz(n=40, seed=1)
  assert s.checked == 40 and not s.failures and s.rewrites > 0 and 0 < s.changed <= 40
  assert "40 expressions checked" in str(s)

def test_cli_symbolic(capsys):
  assert fuzz_main(["symbolic", "-n", "16", "--seed", "3"]) == 0
  out = capsys.readouterr().out
  assert "16 expressions checked" in out and "0 failures" in out
  assert fuzz_main(["symbolic", "-n", "8", "--dtype", "int8"]) == 0
  assert "8 expressions checked" in capsys.readouterr().out

def test_variables_of_lists_leaves():
  x, r = UOp.variable("x", 0, 3), UOp.range(5, 0)
  assert set(variables_of(x * r + 1)) == {x, r}
  assert variables_of(UOp.const(dtypes.index, 3)) == []

def test_exhaustive_check_agrees_with_z3():
  from fuzz.oracles.symbolic import check_exhaustive
  y = UOp.variable("y", -5, 5)
  e = (y * 4 + 3) // 4
  bad = graph_rewrite(e, _unsound, name="unsound")
  ex = check_exhaustive(e, bad)
  assert ex is not None and not ex.ok and ex.kind == "value"
  assert eval_index(e, ex.env) != eval_index(bad, ex.env)
  good = check_exhaustive(e, simplify(e))
  assert good is not None and good.ok
  assert check_exhaustive(UOp.variable("huge", 0, 10**9) + 1, UOp.variable("huge", 0, 10**9) + 1) is None
