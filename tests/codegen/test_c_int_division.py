"""Signed integer division in the C renderer: INT_MIN / -1 must wrap, not trap (found by fuzz/tensor_programs.py: the
whole process died of SIGFPE on `x // y` with x = INT_MIN, y = -1)."""
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
