"""A changed CPU or CPU_LLVM kernel: its old outputs come from interpreting the recorded linear program on PYTHON, its new
ones from compiling the new source for the host (in a forked child); both on random and boundary inputs."""
import re
import pytest
from tinygrad import Tensor
from tinygrad.codegen import get_program
from tinygrad.helpers import Context
from tinygrad.uop.ops import UOp
from replay import compare
from tinygrad.runtime import targets as registry
from tests.replay.helpers import kernels

def _program(target, t):
  (ast,) = kernels(t)
  with Context(CPU_LLVM=int(target == "CPU_LLVM")):
    p = get_program(ast, registry.renderer(target))
  return ast, (p.name, p.src, list(p.uops))

@pytest.mark.parametrize("target", ["CPU", "CPU_LLVM"])
def test_native_run_agrees_on_the_same_program_and_shows_a_different_one(target):
  ast, p = _program(target, (Tensor.arange(24).float().reshape(4, 6) * 2).sum(1))
  _, q = _program(target, (Tensor.arange(24).float().reshape(4, 6) * 3).sum(1))
  same = compare.run_both(ast, p, p, target, "")
  assert same.outputs == "agree" and f"new: natively on {target}" in same.detail and "4 input set(s)" in same.detail, same
  other = compare.run_both(ast, p, q, target, "")
  assert other.differs and "buffer data0[" in other.detail, other

def test_source_that_does_not_compile_falls_back_to_the_interpreter_with_the_reason():
  ast, p = _program("CPU", Tensor.arange(6).float() + 1)
  r = compare.run_both(ast, p, (p[0], "not C", p[2]), "CPU", "")
  assert r.outputs == "agree" and "could not compile it for CPU" in r.detail and "new: on PYTHON" in r.detail, r

def test_a_program_holding_a_string_that_is_no_identifier_is_not_compiled():
  # a variable's name is written into the C source as it is: one that is not an identifier would be code
  ast, p = _program("CPU", Tensor.arange(6).float() + 1)
  assert compare.unsafe_string(p[0], p[2]) is None
  evil = [*p[2][:-1], UOp.variable("n){}int y(", 1, 4), p[2][-1]]
  assert compare.unsafe_string(p[0], evil) == "n){}int y("
  assert compare.unsafe_string("E_6; x", p[2]) == "E_6; x"
  assert compare.run_native("CPU", (p[0], p[1] + "\n#error never compiled", evil), compare.input_sets(p[2]), [0]) is None
  assert "not compiled: the program holds the string 'n){}int y('" in compare.native_skip

def test_a_record_naming_a_huge_buffer_is_not_run_and_allocates_nothing(monkeypatch):
  # a record names its buffers' sizes: one of 2^32 floats had numpy asked for 32 GiB of inputs (the whole-suite diff
  # from 67373d3); a hostile one can name any size
  from tinygrad.uop import Ops
  from tinygrad.dtype import dtypes
  ast, p = _program("CPU", Tensor.arange(6).float() + 1)
  huge = [u.replace(dtype=dtypes.float32.ptr(1 << 40)) if u.op is Ops.DEFINE_GLOBAL else u for u in p[2]]
  monkeypatch.setattr(compare, "input_sets", lambda *a: pytest.fail("inputs made for a program too big to run"))
  r = compare.run_both(ast, (p[0], p[1], huge), (p[0], p[1], huge), "CPU", "")
  assert r.outputs == "not run" and "its buffers hold 1.10e+12 elements in all (over 3e+07)" in r.detail, r

def _matmul(plus: float = 0.0):
  a = Tensor.arange(96 * 64).float().reshape(96, 64) / 1000
  b = Tensor.arange(64 * 80).float().reshape(64, 80) / 1000
  return a @ b + plus

def test_an_opts_change_too_big_to_interpret_runs_the_old_program_rebuilt_natively():
  # the heuristics' work on big kernels (issue 32) changed opts the diff could only call "not run": the recorded
  # program takes millions of interpreted steps. Where the captured opts give the recorded program again, this code
  # builds the old side itself and both run natively
  (ast,) = kernels(_matmul())
  (ast1,) = kernels(_matmul(1.0))
  ren = registry.renderer("CPU_LLVM")
  with Context(CPU_LLVM=1):
    old, new, wrong = (get_program(ast, ren, []), get_program(ast, ren), get_program(ast1, ren))
  old, new, wrong = ((p.name, p.src, list(p.uops)) for p in (old, new, wrong))
  assert old[1] != new[1] and compare.steps(old[2], 1) > compare.MAX_STEPS
  plain = compare.run_both(ast, old, new, "CPU_LLVM", "")
  assert plain.outputs == "not run" and "interpreted steps" in plain.detail, plain
  ok = compare.run_both(ast, old, new, "CPU_LLVM", "", rebuilt=old)
  assert ok.outputs == "agree" and "old: rebuilt from the record's AST and captured opts" in ok.detail, ok
  assert "natively on CPU_LLVM" in ok.detail and "4 input set(s)" in ok.detail, ok
  bad = compare.run_both(ast, old, wrong, "CPU_LLVM", "", rebuilt=old)
  assert bad.differs and "buffer data0[" in bad.detail and "rebuilt" in bad.detail, bad
  # only the host's targets run natively: elsewhere it stays "not run"
  assert compare.run_both(ast, old, new, "PYTHON", "", rebuilt=old).outputs == "not run"

def test_the_diff_runs_a_big_kernel_whose_heuristics_changed_with_the_old_program_rebuilt(tmp_path, monkeypatch):
  import tinygrad.codegen as codegen
  from replay.diff import diff
  from tests.replay.helpers import capturing
  db = tmp_path / "big.db"
  (ast,) = kernels(_matmul())
  ren = registry.renderer("CPU_LLVM")
  with Context(CPU_LLVM=1), capturing(db, "base"): p = get_program(ast, ren)
  assert p.applied_opts
  # the heuristics now choose no opts for it: an opts change on a kernel too big to interpret
  monkeypatch.setattr(codegen, "hand_coded_optimizations", lambda k, r: [])
  rep = diff(str(db), progress=None)
  (o,) = [o for o in rep.outcomes if o.kind == "kernel"]
  assert o.cls == "unchanged" and o.opts == "changed" and o.opts_outputs == "agree", (o.cls, o.opts, o.opts_detail)
  assert "old: rebuilt from the record's AST and captured opts" in o.opts_detail, o.opts_detail

def test_budget_elements_sets_how_big_a_kernel_the_ulp_budget_evaluates(tmp_path, monkeypatch, capsys):
  import tinygrad.codegen as codegen
  from replay.__main__ import main
  from tests.replay.helpers import capturing
  db = tmp_path / "big.db"
  (ast,) = kernels(_matmul())
  with Context(CPU_LLVM=1), capturing(db, "base"): get_program(ast, registry.renderer("CPU_LLVM"))
  monkeypatch.setattr(codegen, "hand_coded_optimizations", lambda k, r: [])
  monkeypatch.setattr(compare, "REF_MAX_ELEMENTS", compare.REF_MAX_ELEMENTS)  # the flag sets it; restored after
  main(["diff", "--db", str(db)])
  out = capsys.readouterr().out
  assert "other opts now: 1 kernel(s)" in out and "no ULP budget" not in out, out
  default = compare.REF_MAX_ELEMENTS
  main(["diff", "--db", str(db), "--budget-elements", "1000"])
  out = capsys.readouterr().out
  assert compare.REF_MAX_ELEMENTS == default  # for that diff only
  # compared exactly, the reassociated sums differ in their last bits: the budget is what tells them apart from a bug
  assert re.search(r"no ULP budget \(the reference would evaluate [0-9.e+]+ elements \(over 1e\+03\)\)", out), out
  with pytest.raises(SystemExit): main(["diff", "--db", str(db), "--budget-elements", "0"])
  assert "must be at least 1, not 0" in capsys.readouterr().err

def test_a_rebuilt_program_from_a_hostile_record_is_bounded_and_never_runs_its_strings(monkeypatch):
  # the rebuilt old program is this code's output, but from the record's AST: its buffer sizes and variable names are
  # the record's. A huge buffer makes no inputs; a name that is no identifier is never compiled
  from tinygrad.dtype import dtypes
  from tinygrad.uop import Ops
  (ast,) = kernels(_matmul())
  with Context(CPU_LLVM=1): p = get_program(ast, registry.renderer("CPU_LLVM"))
  prog = (p.name, p.src, list(p.uops))
  huge = [u.replace(dtype=dtypes.float32.ptr(1 << 40)) if u.op is Ops.DEFINE_GLOBAL else u for u in prog[2]]
  with monkeypatch.context() as m:
    m.setattr(compare, "input_sets", lambda *a: pytest.fail("inputs made for a program too big to run"))
    r = compare.run_rebuilt(ast, (p.name, p.src, huge), (p.name, p.src, huge), "CPU_LLVM", "too big to interpret")
  assert r.outputs == "not run" and "over 3e+07" in r.detail, r
  evil = [*prog[2][:-1], UOp.variable("n){}int y(", 1, 4), prog[2][-1]]
  monkeypatch.setattr(compare, "_load_native", lambda *a: pytest.fail("a program holding a hostile string compiled"))
  r = compare.run_rebuilt(ast, (p.name, p.src, evil), prog, "CPU_LLVM", "too big to interpret")
  assert r.outputs == "not run" and "not compiled: the program holds the string 'n){}int y('" in r.detail, r
