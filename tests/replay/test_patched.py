"""Process replay at the same commit: programs and schedules made while a rewrite rule was patched (a planted mutant, a
test's own matcher) are counted as skips, not recorded, so a same-code diff of such a run is clean."""
import gc
import pytest
from tinygrad import Tensor
from tinygrad.uop import Ops
from tinygrad.uop.ops import UPat, PatternMatcher, graph_rewrite, UOp
from tinygrad.uop import symbolic as sym
from tinygrad.dtype import dtypes
from tinygrad.codegen import get_program
from tinygrad.renderer.cstyle import CRenderer
from fuzz.mutants import apply_mutant, swap_rule, with_globals
from replay.db import DB
from replay.diff import diff
from tests.replay.helpers import programs, kernels as _kernels, capturing

def _tinygrad_matchers() -> list[PatternMatcher]:
  return [o for o in gc.get_objects() if isinstance(o, PatternMatcher) and any(
    getattr(fn, "__module__", "").startswith("tinygrad") for _, fn in o.patterns)]

def test_tinygrad_matchers_are_not_patched_and_foreign_rules_are():
  pms = _tinygrad_matchers()
  assert len(pms) > 10 and [pm.patched for pm in pms if pm.patched] == []
  assert sym.symbolic.patched is None
  own = PatternMatcher([(UPat(Ops.ADD, name="x"), lambda x: None)])
  assert own.patched is not None and "tests.replay.test_patched" in own.patched
  # a copy of tinygrad's own rule with other globals (fuzz/mutants.py with_globals) is not tinygrad's code either
  copy = with_globals(sym.fold_divmod, _ceildiv=sym._floordiv)
  assert copy.__module__ == "tinygrad.uop.symbolic"
  assert "fold_divmod from tinygrad.uop.symbolic" in str(PatternMatcher([(UPat(Ops.MOD), copy)]).patched)
  assert (sym.symbolic + own).patched is not None and (sym.symbolic + sym.symbolic).patched is None

def test_matcher_reinitialized_in_place_is_patched_until_its_rules_come_back():
  pm = sym.symbolic
  before = list(pm.patterns)
  (i, (pat, fn)), (_, (_, other)) = [(i, r) for i, r in enumerate(before) if getattr(r[1], "__module__", "")
                                     .startswith("tinygrad")][:2]
  # another of tinygrad's own functions in the rule's place: no foreign code, but not the rules it was built with
  pm.__init__([(p, other if j == i else f) for j, (p, f) in enumerate(before)])  # type: ignore[misc]
  try: assert pm.patched == "its rules were replaced in place after construction"
  finally: pm.__init__(before)  # type: ignore[misc]
  assert pm.patched is None

def _capture(db, run, body):
  with capturing(db, run): body()
  return DB(str(db), create=False)

def test_programs_and_schedules_made_under_a_mutant_are_skipped_and_the_rest_diff_clean(tmp_path):
  ren = CRenderer(2)
  # (x*2 + 3) < 9 style index math: the symbolic rule the mutant swaps runs in the scheduler and in codegen
  make = lambda: (Tensor.arange(20).float().reshape(4, 5)[:, 1:4].contiguous() * 2).sum(1)
  state = {}
  def body():
    for k in _kernels(make()): get_program(k, ren)  # recorded
    m = apply_mutant("boundary_off_by_one")
    try:
      state["mut"] = [get_program(k, ren) for k in _kernels(make() + 1)]
    finally: m.revert()
    for k in _kernels(make() - 1): get_program(k, ren)  # recorded again: the rule is back
  db = _capture(tmp_path / "m.db", "m", body)
  skips = db.capture_skips("m")
  assert state["mut"] and sum(v for k, v in skips.items() if k.startswith("schedule (patched rule: ")) == 1
  kernel_skips = {k: v for k, v in skips.items() if not k.startswith("schedule")}
  assert sum(kernel_skips.values()) == len(state["mut"])
  assert all("patched rule: " in k and "_off_by_one_cmp_sum from fuzz.mutants" in k for k in kernel_skips)
  assert db.count("m", "schedule") == 2 and db.count("m", "kernel") >= 2
  rep = diff(str(tmp_path / "m.db"), progress=None)
  assert rep.all_ok() and rep.counts("kernel")["unchanged"] == db.count("m", "kernel"), rep.summary()
  assert "patched rule" in rep.summary()

def test_program_compiled_with_a_patched_rule_is_skipped_even_where_the_rule_is_a_tinygrad_function(tmp_path):
  ren = CRenderer(2)
  (ast,) = _kernels(Tensor.arange(12).float() * 3 + 1)
  # swap_rule to a copy of tinygrad's own rule that behaves the same: still a patch, so still not recorded
  orig = sym.fold_divmod
  same = with_globals(orig)
  def body():
    assert swap_rule(orig, same) > 0
    try: get_program(ast, ren)
    finally: swap_rule(same, orig)
    get_program(ast, ren)
  db = _capture(tmp_path / "s.db", "s", body)
  (key,) = db.capture_skips("s")
  assert "fold_divmod from tinygrad.uop.symbolic" in key and db.count("s", "kernel") == 1

def test_a_tests_own_rewrite_outside_a_compile_does_not_skip_the_next_program(tmp_path):
  ren = CRenderer(2)
  asts = [a for prog in programs()[:3] for a in _kernels(prog())]
  mine = PatternMatcher([(UPat(Ops.CONST, dtypes.int, name="c"), lambda c: None)])
  def body():
    for a in asts:
      graph_rewrite(UOp.const(dtypes.int, 1) + 2, mine, name="a test's own rewrite")
      get_program(a, ren)
  db = _capture(tmp_path / "o.db", "o", body)
  assert db.capture_skips("o") == {} and db.count("o", "kernel") == len(set(asts))

def test_program_compiled_with_a_tests_matcher_in_the_renderer_is_skipped(tmp_path, monkeypatch):
  (ast,) = _kernels(Tensor.arange(6).float().maximum(2.0) + 1)
  def body():
    with monkeypatch.context() as m:
      m.setattr(CRenderer, "extra_matcher", PatternMatcher([(UPat(Ops.MAX, name="x"), lambda x: None)]))
      get_program(ast, CRenderer(2))
  db = _capture(tmp_path / "r.db", "r", body)
  (key,) = db.capture_skips("r")
  assert "extra_matcher" in key and "tests.replay.test_patched" in key and db.count("r", "kernel") == 0

def test_program_compiled_while_a_tinygrad_function_is_replaced_is_skipped(tmp_path, monkeypatch):
  import tinygrad.uop.ops as ops
  ren = CRenderer(2)
  asts = _kernels((Tensor.arange(16).float().reshape(4, 4)[1:3].contiguous() + 1).sum())
  orig = ops._min_max
  def body():
    with monkeypatch.context() as m:
      # a planted bug of tests/fuzz/planted.py's kind: a module function of tinygrad replaced by one of the test's
      m.setattr(ops, "_min_max", lambda u: orig(u))
      for a in asts: get_program(a, ren)
    # a front-end patch (the tensor graph is the schedule's recorded input) and a toolchain's are no reason to skip
    with monkeypatch.context() as m:
      m.setattr(Tensor, "relu", lambda self: self)
      for a in asts: get_program(a, ren)
  db = _capture(tmp_path / "f.db", "f", body)
  skips = db.capture_skips("f")
  assert sum(skips.values()) == len(asts) and all("patched code: tinygrad.uop.ops._min_max: " in k and
                                                  "tests.replay.test_patched" in k for k in skips), skips
  assert db.count("f", "kernel") == len(set(asts))
  assert diff(str(tmp_path / "f.db"), progress=None).all_ok()

def test_program_of_an_emulating_python_renderer_whose_shared_target_a_test_changed_is_skipped(tmp_path, monkeypatch):
  from tinygrad.runtime.ops_python import PythonRenderer, get_target
  (ast,) = _kernels(Tensor.arange(8).float() * 2)
  def body():
    with monkeypatch.context() as m:
      # a plain value set on the target's renderer, which every PythonRenderer("NV") of the process shares
      m.setattr(get_target("NV").base, "global_max", (7, 7, 7))
      get_program(ast, PythonRenderer("NV"))
    get_program(ast, PythonRenderer("NV"))
  db = _capture(tmp_path / "p.db", "p", body)
  (key,) = db.capture_skips("p")
  assert "arch=NV:sm_90" in key and "cannot be rebuilt from its identity" in key and db.count("p", "kernel") == 1
  assert diff(str(tmp_path / "p.db"), progress=None).all_ok()

if __name__ == "__main__": pytest.main([__file__])
