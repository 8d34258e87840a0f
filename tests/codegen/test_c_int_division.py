"""The C renderer's spelling of the cases C leaves undefined (docs/ir.md, Semantics): INT_MIN / -1 must wrap, not trap
(found by fuzz/gen/tensor_programs.py: the whole process died of SIGFPE on `x // y` with x = INT_MIN, y = -1), x/0 = 0,
x%0 = x, shift amounts modulo the width, saturating float -> int casts; and no guard where bounds rule the case out."""
import subprocess, sys
import numpy as np
from tinygrad.codegen import get_program
from tinygrad.dtype import dtypes
from tinygrad.renderer.cstyle import CRenderer
from tinygrad.uop import Ops, AxisType
from tinygrad.uop.ops import UOp

PROG = """
import numpy as np
from tinygrad import Tensor
x = Tensor(np.array([-2**31, 7, -7, -2**31], np.int32), device="CPU")
y = Tensor(np.array([-1, -1, 2, 3], np.int32), device="CPU")
print(x.idiv(y).tolist(), (x % y).tolist(), (x // y).tolist())
"""

def test_int_min_divided_by_minus_one_wraps_on_cpu():
  # a subprocess: a regression kills it with SIGFPE instead of the test worker
  res = subprocess.run([sys.executable, "-c", PROG], capture_output=True, text=True, timeout=120)
  assert res.returncode == 0, f"exit {res.returncode}: {res.stderr[-2000:]}"
  want = ([-2**31, -7, -3, -715827882], [0, 0, 1, 1], [-2**31, -7, -4, -715827883])
  assert res.stdout.strip() == " ".join(str(w) for w in want)

def _div_kernel(op: Ops, divisor: UOp | None):
  r = UOp.range(4, 0, AxisType.LOOP)
  a = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(4), arg=1).index(r).load()
  b = divisor if divisor is not None else UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(4), arg=2).index(r).load()
  out = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(4), arg=0).index(r).store(a.alu(op, b))
  return UOp.sink(out.end(r))

def test_division_by_a_constant_has_no_guard(run_kernel):
  # the guard is for divisors that may be -1; index math and x // 7 stay a plain C division
  prg = get_program(_div_kernel(Ops.IDIV, UOp.const(dtypes.int32, 7)), CRenderer())
  assert "==-1" not in prg.src
  out, a = np.zeros(4, np.int32), np.array([-2**31, 7, -7, 100], np.int32)
  run_kernel(_div_kernel(Ops.IDIV, UOp.const(dtypes.int32, 7)), [out, a])
  np.testing.assert_array_equal(out, [-306783378, 1, -1, 14])

def test_division_by_a_loaded_divisor_is_guarded(run_kernel):
  # NOTE: no INT_MIN / -1 here: in-process, a regression would kill the test worker (the subprocess test covers it)
  for op, want in ((Ops.IDIV, [9, -7, -3, 33]), (Ops.MOD, [0, 0, -1, 1])):
    out, a, b = np.zeros(4, np.int32), np.array([-9, 7, -7, 100], np.int32), np.array([-1, -1, 2, 3], np.int32)
    prg = run_kernel(_div_kernel(op, None), [out, a, b])
    assert "==-1" in prg.src
    np.testing.assert_array_equal(out, want)

# ---- the decided meanings (docs/ir.md, Semantics): guards only where bounds allow the case ----

def _prg(ast): return get_program(ast, CRenderer(), opts=[])

def test_division_by_a_loaded_divisor_that_may_be_zero_gives_zero(run_kernel):
  for op, want in ((Ops.IDIV, [0, -3, 0, 33]), (Ops.MOD, [-9, 1, 5, 1])):
    out, a, b = np.zeros(4, np.int32), np.array([-9, 7, 5, 100], np.int32), np.array([0, -2, 0, 3], np.int32)
    prg = run_kernel(_div_kernel(op, None), [out, a, b])
    assert "==0?" in prg.src
    np.testing.assert_array_equal(out, want)

def test_index_math_and_constant_divisors_render_no_guard():
  # a kernel whose index math divides and shifts by constants: no zero test, no -1 test, no mask
  r = UOp.range(64, 0)
  src = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(64), arg=1).index((r // 8) * 8 + r % 8).load()
  ast = UOp.sink(UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(64), arg=0).index(r).store((src >> UOp.const(dtypes.int32, 3)) // UOp.const(dtypes.int32, 5)).end(r))
  s = _prg(ast).src
  assert "==0?" not in s and "==-1?" not in s and "&31" not in s

def test_shift_amount_is_masked_only_when_it_may_leave_the_width(run_kernel):
  r = UOp.range(4, 0, AxisType.LOOP)
  a = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(4), arg=1).index(r).load()
  b = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(4), arg=2).index(r).load()
  ast = UOp.sink(UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(4), arg=0).index(r).store(a << b).end(r))
  out = np.zeros(4, np.int32)
  prg = run_kernel(ast, [out, np.array([1, 1, -3, 5], np.int32), np.array([33, -1, 2, 32], np.int32)])
  assert "&31" in prg.src
  np.testing.assert_array_equal(out, [2, -2**31, -12, 5])

def test_float_to_int_cast_saturates_unless_bounds_prove_it_fits(run_kernel):
  r = UOp.range(5, 0, AxisType.LOOP)
  x = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(5), arg=1).index(r).load()
  ast = UOp.sink(UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(5), arg=0).index(r).store(x.cast(dtypes.int32)).end(r))
  out = np.zeros(5, np.int32)
  run_kernel(ast, [out, np.array([np.nan, 3e9, -3e9, -2.7, np.inf], np.float32)])
  np.testing.assert_array_equal(out, [0, 2**31 - 1, -2**31, -2, 2**31 - 1])
  # the range's value as a float cannot be NaN or out of range: a plain C cast
  fits = UOp.sink(UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(5), arg=0).index(r).store((r.cast(dtypes.float32) * 2.5).cast(dtypes.int32)).end(r))
  assert "!=" not in _prg(fits).src
