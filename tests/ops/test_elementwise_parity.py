"""Regressions from torch's OpInfo samples of the elementwise ops (tests/ops/opinfo/elementwise.py): each test pins one
semantic that differed from torch (integer pow, tan near its poles, shifts past the width, int hardtanh, bool square,
round with decimals, softplus with a threshold, the sign of nan)."""
import math
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes, Context
from tests.ops.helpers import check_op

# ---- integer pow: exact (by squaring, wrapping as C's multiply), negative exponents 0 / 1 / -1 ----

@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8"])
def test_int_pow_tensor_exponent_is_exact_and_wraps(dtype):
  signed = dtype != "uint8"
  base = [5, 3, 7, -7, 2, 0, 1, -1, 3, 6] if signed else [5, 3, 7, 9, 2, 0, 1, 255, 3, 6]
  expo = [9, 19, 11, 9, 31, 0, 40, 7, 40, 0]
  check_op(None, torch.pow, Tensor.pow, vals=[base, expo], dtype=dtype)

def test_int_pow_negative_exponent_gives_0_and_unit_bases():
  base = [0, 1, -1, -1, 2, -2, 3, 5, 1, 7]
  expo = [-1, -3, -3, -4, -2, -1, -5, -40, -2147483648, 0]
  check_op(None, torch.pow, Tensor.pow, vals=[base, expo], dtype="int32")
  check_op(None, lambda x, y: y.__rpow__(x), vals=[base, expo], dtype="int32")

@pytest.mark.parametrize("e", [-1, -2, -3, -70])
def test_int_pow_negative_scalar_exponent(e):
  # NOTE: torch refuses a negative Python exponent on an int tensor; ours gives what its tensor exponent gives
  x = Tensor([0, 1, -1, 2, -2, 9], dtype=dtypes.int32)
  want = torch.tensor([0, 1, -1, 2, -2, 9], dtype=torch.int32) ** torch.tensor(e, dtype=torch.int32)
  out = x ** e
  assert out.dtype is dtypes.int32 and out.tolist() == want.tolist()

# ---- tan: relative accuracy near the poles, where sin(x)/cos(x) keeps only cos's absolute accuracy ----

def _near_poles() -> np.ndarray:
  x = (np.arange(-4000, 4000, 7) * (np.pi / 2)).astype(np.float32)
  return np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))])

def test_tan_near_poles_keeps_relative_accuracy():
  # NOTE: the float32 inputs are exact, so torch's float32 tan of them is the accurate answer; at |tan x| ~ 1e5 sin/cos
  # from x alone is off by 2e-4 relative and more
  x = _near_poles()
  check_op(None, torch.tan, Tensor.tan, vals=[x], atol=0, rtol=2e-6, grad_atol=0, grad_rtol=5e-6)

def test_tan_near_poles_polynomial_path():
  # NOTE: TRANSCENDENTAL=2's SIN is accurate to ~7e-5 relative close to its zeros (|sin| ~ 1e-8, its reduction's pi):
  # that, not tan's composition, bounds tan near a pole there
  with Context(TRANSCENDENTAL=2):
    check_op(None, torch.tan, Tensor.tan, vals=[_near_poles()], atol=0, rtol=2e-4, grad=False)

def test_tan_specials_and_float16():
  check_op(None, torch.tan, Tensor.tan, vals=[[0.0, -0.0, 1e-30, 0.49, 0.5, -0.51, 3e38, -3.4e38, 1e10]], atol=0, rtol=1e-6)
  check_op(None, torch.tan, Tensor.tan, vals=[[math.inf, -math.inf, math.nan]], grad=False)
  check_op(None, torch.tan, Tensor.tan, vals=[[1.5703125, 1.571, -1.5703125, 4.7109375, 100.0, 0.25]], dtype="float16")

# ---- shifts: an amount out of [0, width) shifts every bit out ----

@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_shift_amount_out_of_range(dtype):
  width = np.dtype(dtype).itemsize * 8
  signed = dtype != "uint8"
  x = [-100, 100, 5, -1, 7, 3, -3] if signed else [200, 100, 5, 1, 7, 3, 128]
  amount = [width + 1, -1 if signed else 255, 3, width, 0, width - 1, 64 if signed else 2]
  check_op(None, torch.bitwise_left_shift, Tensor.lshift, vals=[x, amount], dtype=dtype)
  check_op(None, torch.bitwise_right_shift, Tensor.rshift, vals=[x, amount], dtype=dtype)
  for a in (width, width + 5, -1, 3):
    check_op(None, lambda t, a=a: t << a, vals=[x], dtype=dtype)
    check_op(None, lambda t, a=a: t >> a, vals=[x], dtype=dtype)

# ---- activations and rounding ----

def test_hardtanh_int_keeps_dtype_and_truncates_bounds():
  x = [-3, -1, 0, 1, 2, 3, 7]
  for lo, hi in ((-0.5, 0.5), (-1.7, 2.2), (0.0, 6.0), (-1.0, 1.0)):
    check_op(None, lambda t, lo=lo, hi=hi: torch.nn.functional.hardtanh(t, lo, hi), lambda t, lo=lo, hi=hi: t.hardtanh(lo, hi),
             vals=[x], dtype="int32")
  check_op(None, torch.nn.functional.relu6, Tensor.relu6, vals=[[-3, 2, 9]], dtype="int32")

def test_square_of_bool_is_int():
  out = Tensor([True, False]).square()
  assert dtypes.is_int(out.dtype) and out.tolist() == [1, 0]

@pytest.mark.parametrize("decimals", [0, 1, 3, -1, -3])
def test_round_decimals(decimals):
  vals = [[1.2345, -2.5, 2.5, 0.0015, -0.0015, 1234.5, 2500.0, -3499.9, 1e30, 0.0]]
  check_op(None, lambda t: torch.round(t, decimals=decimals), lambda t: t.round(decimals), vals=vals, atol=0, rtol=1e-6)
  check_op(None, lambda t: torch.round(t, decimals=decimals), lambda t: t.round(decimals), vals=[[60000.0, 1.2344, -0.5]],
           dtype="float16", grad=False)

def test_softplus_threshold():
  vals = [[-30.0, -1.0, 0.0, 0.05, 0.07, 0.5, 30.0]]
  check_op(None, lambda t: torch.nn.functional.softplus(t, beta=3, threshold=0.2), lambda t: t.softplus(3, 0.2), vals=vals)
  check_op(None, lambda t: torch.nn.functional.softplus(t, threshold=20), lambda t: t.softplus(threshold=20), vals=vals)

def test_sign_of_nan_is_zero():
  check_op(None, torch.sign, Tensor.sign, vals=[[math.nan, -math.inf, math.inf, -0.0, 0.0, -2.0, 3.0]])

# ---- division: the IEEE quotient, and % and // from an exact fmod ----

def test_div_is_the_rounded_quotient():
  # NOTE: x * (1/y) is an ulp off for these, and trunc/floor of the quotient then falls to the integer below
  x = np.array([0.3, 7.0, 1.0, 49.0, -0.7, 1e-3], np.float32)
  y = np.array([0.1, 7.0, 0.1, 7.0, 0.1, 1e-4], np.float32)
  check_op(None, torch.div, Tensor.div, vals=[x, y], atol=0, rtol=0)
  for mode in ("trunc", "floor"):
    check_op(None, lambda a, b: torch.div(a, b, rounding_mode=mode), lambda a, b: a.div(b, rounding_mode=mode), vals=[x, y],
             atol=0, rtol=0)

def test_remainder_and_floor_divide_large_quotients_are_exact():
  # NOTE: x - floor(x / y) * y loses everything once x / y passes 2**24; fmod is exact and so are torch's results here
  x = np.array([-40.730602, 1e7, -3.3e6, 64.81915, -64.81915, 1.0, 5.5, -7.25, 0.0], np.float32)
  y = np.array([7.1849594e-05, 0.37, -1e-3, -0.65796006, 0.65796006, 0.1, -2.0, 3.0, 3.0], np.float32)
  check_op(None, torch.remainder, lambda a, b: a % b, vals=[x, y], atol=0, rtol=0, grad_atol=0, grad_rtol=0)
  check_op(None, torch.floor_divide, lambda a, b: a // b, vals=[x, y], atol=0, rtol=0, grad=False)
  check_op(None, torch.remainder, lambda a, b: a % b, vals=[[1.0, -1.0, math.inf, 2.0, math.nan], [math.inf, math.inf, 2.0, 0.0, 1.0]],
           grad=False)

def test_remainder_float16_computes_in_float32():
  rng = np.random.default_rng(0)
  x, y = rng.uniform(-100, 100, 64).astype(np.float16), rng.uniform(-10, 10, 64).astype(np.float16)
  check_op(None, torch.remainder, lambda a, b: a % b, vals=[x, y], dtype="float16", atol=0, rtol=0, grad=False)

def test_pow_negative_zero_base():
  check_op(None, torch.pow, Tensor.pow, vals=[[-0.0, -0.0, -0.0, -0.0, 0.0, -0.0], [-1.0, 3.0, 2.0, 0.5, -1.0, -2.0]])

# ---- NaN through comparisons and activations (torch's answers) ----

def test_le_ge_with_nan_are_false():
  vals = [[math.nan, 1.0, 2.0, -math.inf, math.inf, 0.5], [1.0, math.nan, 2.0, 1.0, math.inf, 0.5]]
  for fn in (lambda a, b: a <= b, lambda a, b: a >= b, lambda a, b: a < b, lambda a, b: a > b):
    check_op(None, fn, vals=vals, grad=False)
  check_op(None, lambda a: a <= 1.0, vals=vals[:1], grad=False)
  check_op(None, lambda a: a >= 1, vals=[[-3, 1, 4]], dtype="int32", grad=False)

@pytest.mark.parametrize("name", ["relu", "relu6", "hardtanh", "hardsigmoid", "elu", "celu", "selu", "leaky_relu"])
def test_activation_passes_nan(name):
  fn = getattr(torch.nn.functional, name)
  vals = [[math.nan, -2.0, -0.5, 0.5, 7.0]]
  check_op(None, fn, getattr(Tensor, name), vals=vals, grad=name not in ("hardsigmoid",))

@pytest.mark.parametrize("name,edge", [("asin", [-1.0, 1.0, 0.5]), ("acos", [-1.0, 1.0, 0.5]), ("atanh", [-1.0, 1.0, 0.5, math.inf]),
                                       ("acosh", [1.0, -1.0, 2.0, -1e4])])
def test_inverse_function_gradients_at_domain_edges(name, edge):
  check_op(None, getattr(torch, name), getattr(Tensor, name), vals=[edge])
