"""Process replay at the same commit: whatever patches the compiler pauses the capture while its patch is in (a planted
mutant, a planted bug, a test's monkeypatch of tinygrad), so programs and schedules made then are not recorded and a
same-code diff of the run is clean. The rest of the run is recorded as usual."""
import os, subprocess, sys, warnings
import pytest
from tinygrad import Tensor
from tinygrad.uop import Ops, hooks
from tinygrad.uop.ops import UPat, PatternMatcher, live_matchers
from tinygrad.uop import symbolic as sym
from tinygrad.codegen import get_program
from tinygrad.renderer.cstyle import CRenderer
from fuzz.mutants import MUTANTS, apply_mutant, swap_rule, with_globals
from replay import capture
from replay.db import DB
from replay.diff import diff
from tests.replay.helpers import kernels as _kernels, capturing

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _capture(db, run, body):
  with capturing(db, run): body()
  return DB(str(db), create=False)

# ---- planted mutants (fuzz/mutants.py) ----

def test_programs_and_schedules_made_under_a_mutant_are_not_recorded_and_the_rest_diff_clean(tmp_path):
  ren = CRenderer(2)
  # (x*2 + 3) < 9 style index math: the symbolic rule the mutant swaps runs in the scheduler and in codegen
  make = lambda: (Tensor.arange(20).float().reshape(4, 5)[:, 1:4].contiguous() * 2).sum(1)
  state = {}
  def body():
    state["before"] = [get_program(k, ren) for k in _kernels(make())]  # recorded
    m = apply_mutant("boundary_off_by_one")
    try:
      assert not capture.active()
      state["mut"] = [get_program(k, ren) for k in _kernels(make() + 1)]
    finally: m.revert()
    assert capture.active()
    state["after"] = [get_program(k, ren) for k in _kernels(make() - 1)]  # recorded again: the rule is back
  db = _capture(tmp_path / "m.db", "m", body)
  assert state["mut"] and db.capture_skips("m") == {}
  recorded = {(p.name, p.src) for p in state["before"] + state["after"]}
  assert db.count("m", "schedule") == 2 and db.count("m", "kernel") == len(recorded)
  rep = diff(str(tmp_path / "m.db"), progress=None)
  assert rep.all_ok() and rep.counts("kernel")["unchanged"] == len(recorded), rep.summary()

def test_a_mutant_swaps_its_rule_in_every_live_matcher_and_out_again():
  m = MUTANTS["boundary_off_by_one"]
  # a sum made before the swap (as codegen makes `symbolic + pm_expand`) is a live matcher too, and is rebuilt
  extra = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="x"), lambda x: None)])
  total = sym.symbolic + extra
  assert total in live_matchers() and any(f is m.rule for _, f in total.patterns)
  m.apply()
  applied = m.applied
  try:
    assert applied is not None and not any(f is m.rule for pm in live_matchers() for _, f in pm.patterns)
    assert any(f is applied for _, f in total.patterns) and any(f is applied for _, f in (sym.symbolic + extra).patterns)
  finally: m.revert()
  assert not any(f is applied for pm in live_matchers() for _, f in pm.patterns) and m.applied is None
  assert any(f is m.rule for _, f in (sym.symbolic + extra).patterns)

def test_finding_the_rule_tables_touches_no_other_library_object():
  # NOTE: a scan of every object alive (gc.get_objects) read torch's deprecated torch.distributed.reduce_op, which warns
  import torch  # noqa: F401
  from fuzz.scheduler import rule_ops, rule_key
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    ops = rule_ops(rule_key)
    swap_rule(sym.fold_divmod, sym.fold_divmod)
  assert any(k.startswith("fold_divmod ") for k in ops)

def test_swap_rule_alone_leaves_the_capture_to_its_caller(tmp_path):
  # swap_rule is the primitive (a Mutant pauses): a caller that swaps by hand pauses itself
  ren = CRenderer(2)
  (ast,) = _kernels(Tensor.arange(12).float() * 3 + 1)
  orig = sym.fold_divmod
  same = with_globals(orig)
  def body():
    with capture.paused():
      assert swap_rule(orig, same) > 0
      try: get_program(ast, ren)
      finally: swap_rule(same, orig)
    get_program(ast, ren)
  db = _capture(tmp_path / "s.db", "s", body)
  assert db.capture_skips("s") == {} and db.count("s", "kernel") == 1

# ---- a test's monkeypatch (tests/conftest.py) ----

def test_monkeypatch_of_tinygrad_pauses_until_undone_and_of_the_front_end_or_elsewhere_does_not(tmp_path, monkeypatch):
  import tinygrad.uop.ops as ops
  from tinygrad.uop import pyrender as pyrender_mod
  from tinygrad.runtime.ops_python import get_target
  with capturing(tmp_path / "p.db", "p"):
    # not tinygrad's compiler: the tensor front end, the standard library, the harness
    with monkeypatch.context() as m:
      m.setattr(Tensor, "relu", lambda self: self)
      m.setattr(os, "getpid", os.getpid)
      m.setattr(capture, "COMPILE_ONLY", capture.COMPILE_ONLY)
      m.setitem(os.environ, "SOME_VARIABLE", "1")
      assert capture.active()
    # a module function, a class attribute, a dict of a class, a dict of a module, a dotted name, an instance
    orig = ops._min_max
    for patch in [lambda m: m.setattr(ops, "_min_max", lambda u: orig(u)),
                  lambda m: m.setattr(CRenderer, "extra_matcher", PatternMatcher([(UPat(Ops.MAX, name="x"), lambda x: None)])),
                  lambda m: m.setitem(CRenderer.code_for_op, Ops.MAX, lambda a, b, dt: f"max({a},{b})"),
                  lambda m: m.setitem(pyrender_mod.SUGAR, Ops.ADD, pyrender_mod.SUGAR[Ops.ADD]),
                  lambda m: m.setattr("tinygrad.codegen.lowerer.plan_specials", lambda *a: None),
                  lambda m: m.setattr(get_target("NV").base, "global_max", (7, 7, 7)),
                  lambda m: m.delattr(CRenderer, "math_fns")]:
      with monkeypatch.context() as m:
        patch(m)
        assert not capture.active()
        m.setattr(ops, "_min_max", lambda u: orig(u))  # a second patch while paused pauses no further
      assert capture.active()
    # the fixture itself: paused from its first patch of tinygrad until its undo
    monkeypatch.setattr(ops, "_min_max", lambda u: orig(u))
    assert not capture.active()
    monkeypatch.undo()
    assert capture.active() and ops._min_max is orig

def test_program_compiled_while_a_test_patches_tinygrad_is_not_recorded(tmp_path, monkeypatch):
  import tinygrad.uop.ops as ops
  ren = CRenderer(2)
  asts = _kernels((Tensor.arange(16).float().reshape(4, 4)[1:3].contiguous() + 1).sum())
  orig = ops._min_max
  def body():
    with monkeypatch.context() as m:
      # a planted bug of tests/fuzz/planted.py's kind: a module function of tinygrad replaced by one of the test's
      m.setattr(ops, "_min_max", lambda u: orig(u))
      for a in asts: get_program(a, ren)
    for a in asts: get_program(a, ren)
  db = _capture(tmp_path / "f.db", "f", body)
  assert db.capture_skips("f") == {} and db.count("f", "kernel") == len(set(asts))
  assert diff(str(tmp_path / "f.db"), progress=None).all_ok()

# ---- sessions and pauses ----

def test_a_session_started_while_paused_records_and_the_paused_one_stays_paused(tmp_path):
  ren = CRenderer(2)
  (ast,) = _kernels(Tensor.arange(10).float() * 5)
  outer = capture.start(str(tmp_path / "o.db"), "o", targets=[])
  try:
    paused = capture.pause()
    assert not capture.active()
    with capturing(tmp_path / "i.db", "i"):
      assert capture.active()
      get_program(ast, ren)
      inner = capture.pause()  # a pause of the inner session, ended after the inner session stopped
    assert not capture.active()
    capture.resume(inner)
    get_program(ast, ren)
    assert not capture.active()
    capture.resume(paused)
    assert capture.active()
    with pytest.raises(RuntimeError, match="without a pause"): capture.resume()
    get_program(ast, ren)
  finally: capture.stop()
  assert outer == "o"
  assert DB(str(tmp_path / "o.db"), create=False).count("o", "kernel") == 1
  assert DB(str(tmp_path / "i.db"), create=False).count("i", "kernel") == 1

# ---- planted bugs (tests/fuzz/planted.py): a process with one in records nothing from then on ----

PLANTED = """
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.renderer.cstyle import CRenderer
from replay import capture
from tests.replay.helpers import kernels
from tests.fuzz import planted
capture.start({db!r}, "planted", targets=[])
ren = CRenderer(2)
(ast,) = kernels((Tensor.arange(8).float() < 3).where(1.0, 2.0))
before = get_program(ast, ren).src
planted.c_lt_as_le()
after = get_program(ast, ren, opts=[]).src
capture.stop()
print("<=" in after and "<=" not in before)
"""

def test_a_planted_bug_pauses_the_capture_of_its_process_for_good(tmp_path):
  db = tmp_path / "planted.db"
  res = subprocess.run([sys.executable, "-c", PLANTED.format(db=str(db))], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": REPO})
  assert res.returncode == 0 and res.stdout.strip().splitlines()[-1] == "True", res.stdout + res.stderr
  assert DB(str(db), create=False).count("planted", "kernel") == 1

def test_checkpoints_are_the_module_lists():
  assert hooks.CHECKPOINTS and all(getattr(hooks, k) is v for k, v in hooks.CHECKPOINTS.items())
  assert {"uop_created", "compiled", "rewrite_done"} <= set(hooks.CHECKPOINTS)
  with pytest.raises(KeyError, match="unknown checkpoint 'nope'"): hooks.register("nope", print)

if __name__ == "__main__": pytest.main([__file__])
