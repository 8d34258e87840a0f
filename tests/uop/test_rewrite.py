"""graph_rewrite: fixed point, bottom_up, memoization, commutative sources, ctx, non-termination guards, match stats."""
import pytest
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, graph_rewrite_map, RewriteNotConverging, match_stats
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context

x = UOp.variable("rw_x", 0, 10)
def idx(v): return UOp.const(dtypes.index, v)

def test_fixed_point_through_parents():
  pm = PatternMatcher([
    (UPat.var("a") + 0, lambda a: a),
    (UPat.var("a") * 1, lambda a: a),
    (UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("a"))), lambda a: a * 2),
  ])
  assert graph_rewrite(((x + 0) + 0) + 0, pm, name="fp") is x
  # the children become x, then the parent x + x matches the third rule
  assert graph_rewrite(x * 1 + (x + 0), pm, name="fp") is x * 2

def test_result_of_a_rule_is_rewritten_again():
  pm = PatternMatcher([(UPat(Ops.CONST, dtypes.index, name="c"), lambda c: idx(c.arg - 1) if c.arg > 0 else None)])
  assert graph_rewrite(x + 5, pm, name="countdown") is x + 0

def test_bottom_up_rewrites_parents_first():
  pm = PatternMatcher([
    (UPat.var("a") + 1, lambda a: a * 10),
    (UPat(Ops.CONST, dtypes.index, arg=1), lambda: idx(2)),
  ])
  assert graph_rewrite(x + 1, pm, name="td") is x + 2
  assert graph_rewrite(x + 1, pm, bottom_up=True, name="bu") is x * 10

def test_memoized_shared_subgraph_visited_once():
  calls = []
  def count(a):
    calls.append(a)
    return None
  pm = PatternMatcher([(UPat(Ops.ADD, name="a"), count)])
  y = x
  for _ in range(30): y = y + y   # 2**30 paths, 30 distinct nodes
  graph_rewrite(y, pm, name="memo")
  assert len(calls) == 30 and len(set(calls)) == 30

def test_graph_rewrite_map():
  pm = PatternMatcher([(UPat.var("a") + 0, lambda a: a)])
  e = (x + 0) * 3
  m = graph_rewrite_map(e, pm, name="map")
  assert m[e] is x * 3 and m[x + 0] is x and m[x] is x

def test_commutative_list_sources_match_either_order():
  seen = []
  pm = PatternMatcher([(UPat(Ops.ADD, src=[UPat.var("v", dtypes.index), UPat.cvar("c")]), lambda v, c: seen.append((v, c.arg)))])
  graph_rewrite(x + 3, pm, name="comm")
  graph_rewrite(UOp(Ops.ADD, dtypes.index, (idx(4), x)), pm, name="comm")
  assert seen == [(x, 3), (x, 4)]
  # a tuple is exact order
  pm2 = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("v"), UPat.cvar("c"))), lambda v, c: v)])
  assert graph_rewrite(UOp(Ops.ADD, dtypes.index, (idx(4), x)), pm2, name="tuple").op is Ops.ADD

def test_ctx_is_passed_to_rules_that_ask():
  pm = PatternMatcher([
    (UPat(Ops.DEFINE_VAR, name="v"), lambda ctx, v: ctx.setdefault(v.arg[0], idx(v.arg[2]))),
  ])
  ctx = {}
  assert graph_rewrite(x + 1, pm, ctx=ctx, name="ctx") is idx(10) + 1
  assert ctx == {"rw_x": idx(10)}

def test_rule_returning_non_uop_is_an_error():
  pm = PatternMatcher([(UPat(Ops.DEFINE_VAR), lambda: 5)])
  with pytest.raises(TypeError, match="not_a_uop_pass"):
    graph_rewrite(x + 1, pm, name="not_a_uop_pass")

# ---- non-termination guards: each raises RewriteNotConverging naming the pass and the rule ----

def swap_a(): return UOp.variable("rw_b", 0, 1)
def swap_b(): return UOp.variable("rw_a", 0, 1)

def test_cycle_of_rewrites_is_reported():
  pm = PatternMatcher([
    (UPat(Ops.DEFINE_VAR, arg=("rw_a", 0, 1)), swap_a),
    (UPat(Ops.DEFINE_VAR, arg=("rw_b", 0, 1)), swap_b),
  ])
  for bottom_up in (False, True):
    with pytest.raises(RewriteNotConverging) as ei: graph_rewrite(UOp.variable("rw_a", 0, 1) + 1, pm, bottom_up=bottom_up, name="cycle_pass")
    msg = str(ei.value)
    assert "cycle_pass" in msg and ("swap_a" in msg or "swap_b" in msg)

def grow_const(c): return idx(c.arg + 1)

def test_growth_without_end_is_reported():
  pm = PatternMatcher([(UPat(Ops.CONST, dtypes.index, name="c"), grow_const)])
  with Context(REWRITE_STEP_LIMIT=2000):
    with pytest.raises(RewriteNotConverging) as ei: graph_rewrite(x + 1, pm, name="growth_pass")
  assert "growth_pass" in str(ei.value) and "grow_const" in str(ei.value)

def wrap_self(a): return a + 0

def test_growth_around_itself_is_reported():
  pm = PatternMatcher([(UPat(Ops.ADD, name="a"), wrap_self)])
  with Context(REWRITE_STEP_LIMIT=2000):
    with pytest.raises(RewriteNotConverging) as ei: graph_rewrite(x + 1, pm, name="wrap_pass")
  assert "wrap_pass" in str(ei.value) and "wrap_self" in str(ei.value)

def retag(a): return a.replace(tag=None if a.tag else 1)

def test_livelock_is_reported():
  # the node flips between two forms forever without the graph ever changing otherwise
  pm = PatternMatcher([(UPat(Ops.MUL, name="a"), retag)])
  for bottom_up in (False, True):
    with Context(REWRITE_STEP_LIMIT=2000):
      with pytest.raises(RewriteNotConverging) as ei: graph_rewrite((x * 2) + 1, pm, bottom_up=bottom_up, name="livelock_pass")
    assert "livelock_pass" in str(ei.value) and "retag" in str(ei.value)

# ---- match stats ----

def drop_zero(a): return a

def test_track_match_stats_per_pass_per_rule():
  pm = PatternMatcher([(UPat.var("a") + 0, drop_zero), (UPat(Ops.MUL, name="m"), lambda m: None)])
  match_stats.pop("stats_pass", None)
  with Context(TRACK_MATCH_STATS=1): graph_rewrite(((x + 0) * 2 + 0) * 3, pm, name="stats_pass")
  rules = match_stats["stats_pass"]
  drop = [v for k, v in rules.items() if "drop_zero" in k]
  assert len(drop) == 1 and drop[0][0] == 2 and drop[0][1] >= 2 and drop[0][2] >= 0
  assert any(v[0] == 0 and v[1] >= 2 for k, v in rules.items() if "drop_zero" not in k)
  # off by default: nothing recorded
  match_stats.pop("stats_off_pass", None)
  with Context(TRACK_MATCH_STATS=0): graph_rewrite(x + 0, pm, name="stats_off_pass")
  assert "stats_off_pass" not in match_stats

def test_bottom_up_rewrite_to_a_finished_node_is_not_a_cycle():
  # two nodes rewritten at the top to the same leaf: the second must find it done, not "still being rewritten"
  a, b, x = UOp.variable("a", 0, 5), UOp.variable("b", 0, 5), UOp.const(dtypes.index, 7)
  pm = PatternMatcher([(UPat(Ops.DEFINE_VAR), lambda: x)])
  assert graph_rewrite(UOp.sink(a, b), pm, bottom_up=True, name="test") is UOp.sink(x, x)

def test_matcher_sum_is_kept_until_an_operand_is_given_other_rules():
  plus0 = PatternMatcher([(UPat.var("a") + 0, drop_zero)])
  times1 = PatternMatcher([(UPat.var("a") * 1, lambda a: a)])
  s = plus0 + times1
  assert plus0 + times1 is s and len(s) == 2
  assert graph_rewrite((x + 0) * 1, s, name="sum") is x
  # rules replaced in place (as fuzz/measure/mutants.py swap_rule does): the next sum has the new rules, not the kept ones
  times1.__init__([(UPat.var("a") * 1, lambda a: a + 1)])
  s2 = plus0 + times1
  assert s2 is not s and graph_rewrite((x + 0) * 1, s2, name="sum") is x + 1
  assert (times1 + plus0) is not s2 and len(times1 + plus0) == 2
