"""Tensor's Python operators come from MathTrait, the mixin UOp and UPat use; Tensor overrides only where numpy's
meaning differs from the IR's. Floor division and modulo on every int dtype against numpy, negative operands and zero
divisors included; the IR's operators keep C's truncation."""
import operator
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, UOp, Ops
from tinygrad.uop.mathtraits import MathTrait
from tests.ops.helpers import check_op

OPERATORS = ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
             "__mod__", "__rmod__", "__pow__", "__rpow__", "__neg__", "__and__", "__rand__", "__or__", "__ror__", "__xor__",
             "__rxor__", "__lshift__", "__rlshift__", "__rshift__", "__rrshift__", "__lt__", "__gt__", "__le__", "__ge__"]
# where numpy's meaning differs from the IR's: // floors (IDIV truncates); == and != build comparisons (a UOp compares
# by identity, since UOps are dict keys)
TENSOR_OVERRIDES = {"__floordiv__", "__rfloordiv__", "__eq__", "__ne__"}

def test_tensor_operators_are_mathtraits():
  for name in OPERATORS:
    assert getattr(Tensor, name) is getattr(MathTrait, name), f"Tensor redeclares {name}"
    assert name not in Tensor.__dict__
  for name in TENSOR_OVERRIDES: assert name in Tensor.__dict__
  # the named methods the operators call are Tensor's own where its semantics differ
  # NOTE: le and ge too: MathTrait's x <= y is not (x > y), True for a NaN, where a float tensor's is False (torch's)
  for name in ("add", "mul", "sub", "div", "mod", "pow", "neg", "lshift", "rshift", "alu", "ufix", "const_like", "le", "ge"):
    assert name in Tensor.__dict__, name
  for name in ("lt", "gt", "eq", "ne", "bitwise_and", "bitwise_or", "bitwise_xor", "maximum", "exp2", "sin"):
    assert getattr(Tensor, name) is getattr(MathTrait, name), name

def test_uop_operators_keep_ir_semantics():
  a, b = UOp.variable("a", -10, 10), UOp.variable("b", 1, 5)
  assert (a // b).op is Ops.IDIV and (a % b).op is Ops.MOD and (7 // b).op is Ops.IDIV
  assert (a - b).op is Ops.ADD and (a < b).op is Ops.CMPLT and (a << 2).op is Ops.SHL and (3 >> b).op is Ops.SHR
  assert (a == a) is True and (a != b) is True  # identity, not a node

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]

def _operands(dt):
  info = np.iinfo(dt)
  a = [-7, -6, -1, 0, 1, 5, 6, 7, 100, -100, int(info.max), int(info.min) + 1, 13, -13]
  b = [2, -2, 3, -3, 4, -4, 0, 1, -1, 7, -7, 5, 0, -5]
  if info.min == 0: a, b = [abs(v) for v in a], [abs(v) for v in b]
  return np.array(a, dtype=dt), np.array(b, dtype=dt)

@pytest.mark.parametrize("dt", INT_DTYPES, ids=[d.__name__ for d in INT_DTYPES])
def test_floordiv_mod_match_numpy(dt):
  a, b = _operands(dt)
  with np.errstate(divide="ignore"):
    want_q, want_r = a // b, a % b
  ta, tb = Tensor(a), Tensor(b)
  for got, want in [((ta // tb), want_q), ((ta % tb), want_r), (ta.floordiv(tb), want_q), (ta.mod(tb), want_r)]:
    assert got.dtype is ta.dtype
    np.testing.assert_array_equal(got.numpy(), want)
  # divmod identity where the divisor is nonzero
  nz = b != 0
  np.testing.assert_array_equal(((ta // tb) * tb + ta % tb).numpy()[nz], a[nz])

@pytest.mark.parametrize("dt", INT_DTYPES, ids=[d.__name__ for d in INT_DTYPES])
def test_floordiv_mod_with_python_scalars_match_numpy(dt):
  a, _ = _operands(dt)
  signed = np.iinfo(dt).min < 0
  for s in ([3, -3, 7, 1, -1] if signed else [3, 7, 1]):
    np.testing.assert_array_equal((Tensor(a) // s).numpy(), a // dt(s))
    np.testing.assert_array_equal((Tensor(a) % s).numpy(), a % dt(s))
  b = np.where(a == 0, 1, a).astype(dt)
  for s in ([9, -9, 0] if signed else [9, 0]):
    with np.errstate(divide="ignore"):
      np.testing.assert_array_equal((s // Tensor(b)).numpy(), dt(s) // b)
      np.testing.assert_array_equal((s % Tensor(b)).numpy(), dt(s) % b)

def test_idiv_truncates_as_c():
  a, b = np.array([-7, 7, -7, 7, 0], np.int32), np.array([2, 2, -2, -2, 3], np.int32)
  np.testing.assert_array_equal(Tensor(a).idiv(Tensor(b)).numpy(), np.trunc(a / b).astype(np.int32))
  np.testing.assert_array_equal(Tensor(a).div(Tensor(b), rounding_mode="trunc").numpy(), [-3, 3, 3, -3, 0])
  np.testing.assert_array_equal(Tensor(a).div(Tensor(b), rounding_mode="floor").numpy(), [-4, 3, 3, -4, 0])

@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_float_floordiv_mod_match_torch(dtype):
  vals = [[-7.5, 7.5, -7.5, 7.5, 0.5, -0.5, 5.0, -1e-3], [2.0, 2.0, -2.0, -2.0, 0.25, 3.0, -5.0, 1.0]]
  check_op(None, operator.floordiv, vals=vals, dtype=dtype, grad=False)
  check_op(None, operator.mod, vals=vals, dtype=dtype, atol=1e-3 if dtype == "float16" else 1e-6, grad=False)
  check_op(None, lambda x: 7.0 % x, vals=[vals[1]], dtype=dtype, grad=False)

def test_reverse_operators_with_gradients():
  check_op([(3, 4)], lambda x: 2.0 - x, low=-2, high=2)
  check_op([(3, 4)], lambda x: 3.0 / x, low=0.5, high=2)
  check_op([(3, 4)], lambda x: 1.5 ** x, low=-2, high=2)
  check_op([(3, 4)], lambda x: -(x * 2 + 1) / 3, low=-2, high=2)
  check_op([(3, 4), (4,)], lambda x, y: (x < y) * x + (x >= y) * y, low=-2, high=2)

def test_shifts_and_reverse_shifts():
  a = np.array([1, 2, 3, 7], np.int32)
  np.testing.assert_array_equal((Tensor(a) << 2).numpy(), a << 2)
  np.testing.assert_array_equal((Tensor(a) >> 1).numpy(), a >> 1)
  np.testing.assert_array_equal((1 << Tensor(a)).numpy(), 1 << a)
  np.testing.assert_array_equal((64 >> Tensor(a)).numpy(), 64 >> a)
  assert (Tensor(a.astype(np.uint8)) << 1).dtype is dtypes.uint8

def test_comparisons_build_tensors():
  t = Tensor([1, 2, 3])
  for op, ref in [(operator.eq, [False, True, False]), (operator.ne, [True, False, True]), (operator.lt, [True, False, False]),
                  (operator.le, [True, True, False]), (operator.gt, [False, False, True]), (operator.ge, [False, True, True])]:
    out = op(t, 2)
    assert isinstance(out, Tensor) and out.dtype is dtypes.bool
    np.testing.assert_array_equal(out.numpy(), ref)
  np.testing.assert_array_equal((2 == t).numpy(), [False, True, False])
  np.testing.assert_array_equal((2.5 > t).numpy(), [True, True, False])
