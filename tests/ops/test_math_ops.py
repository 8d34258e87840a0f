"""Elementwise math against torch, forward and backward: the transcendental family, copysign, logaddexp,
logcumsumexp, isclose/isfinite/isinf, bitwise ops; float32, float16 and int32 inputs, empty and size-1 dims, and the
extreme inputs where a naive composition overflows (values and gradients must stay finite and right)."""
import math
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes, Context
from tests.ops.helpers import check_op, check_raises

SHAPES = [[(3, 4)], [(0, 4)], [(1,)], [()]]

# name, torch, tinygrad, input range
UNARY = [
  ("erf", torch.erf, Tensor.erf, -3.5, 3.5), ("erfc", torch.erfc, Tensor.erfc, -3, 3),
  ("sinh", torch.sinh, Tensor.sinh, -5, 5), ("cosh", torch.cosh, Tensor.cosh, -5, 5),
  ("asin", torch.asin, Tensor.asin, -0.99, 0.99), ("acos", torch.acos, Tensor.acos, -0.99, 0.99), ("atan", torch.atan, Tensor.atan, -10, 10),
  ("asinh", torch.asinh, Tensor.asinh, -50, 50), ("acosh", torch.acosh, Tensor.acosh, 1.01, 50), ("atanh", torch.atanh, Tensor.atanh, -0.99, 0.99),
  ("expm1", torch.expm1, Tensor.expm1, -3, 3), ("log1p", torch.log1p, Tensor.log1p, -0.9, 5),
  ("sigmoid", torch.sigmoid, Tensor.sigmoid, -8, 8), ("tanh", torch.tanh, Tensor.tanh, -5, 5),
  ("sin", torch.sin, Tensor.sin, -20, 20), ("cos", torch.cos, Tensor.cos, -20, 20), ("tan", torch.tan, Tensor.tan, -1.4, 1.4),
]
IDS = [u[0] for u in UNARY]

@pytest.mark.parametrize("name,tfn,fn,lo,hi", UNARY, ids=IDS)
@pytest.mark.parametrize("shapes", SHAPES, ids=["3x4", "empty", "size1", "scalar"])
def test_unary_float32_matches_torch(name, tfn, fn, lo, hi, shapes):
  check_op(shapes, tfn, fn, low=lo, high=hi)

@pytest.mark.parametrize("name,tfn,fn,lo,hi", UNARY, ids=IDS)
def test_unary_float16_matches_torch(name, tfn, fn, lo, hi):
  check_op([(4, 5)], tfn, fn, dtype="float16", low=lo, high=hi, atol=2e-2, rtol=2e-2, grad_atol=5e-2, grad_rtol=5e-2)

@pytest.mark.parametrize("name", ["erf", "tanh", "atan", "asinh", "log1p", "sinh"])
def test_unary_bfloat16_computes_in_float32(name):
  check_op([(3, 4)], getattr(torch, name), getattr(Tensor, name), dtype="bfloat16", low=-0.9, high=0.9, atol=2e-2, rtol=2e-2,
           grad_atol=5e-2, grad_rtol=5e-2)

@pytest.mark.parametrize("name,tfn,fn,lo,hi", [u for u in UNARY if u[3] < -1 or u[0] in ("acosh", "log1p")],
                         ids=[u[0] for u in UNARY if u[3] < -1 or u[0] in ("acosh", "log1p")])
def test_unary_int32_promotes_to_float(name, tfn, fn, lo, hi):
  check_op([(3, 4)], tfn, fn, dtype="int32", low=max(lo, 1 if name == "acosh" else -3), high=min(hi, 3))

def test_unary_near_zero_keeps_relative_precision():
  # the cancellation-prone region: each of these is ~x there, and torch gets it to an ulp
  x = [1e-7, -3e-6, 2e-4, -0.01]
  for name in ("sinh", "tanh", "expm1", "log1p", "asinh", "atanh", "atan", "asin", "erf"):
    check_op(None, getattr(torch, name), getattr(Tensor, name), vals=[x], atol=0, rtol=2e-6)

def test_erf_tail_and_nan():
  check_op(None, torch.erf, Tensor.erf, vals=[[-1e4, -7.0, -4.0, 0.9999, 1.0, 2.5, 5.9, 6.1, 1e30, math.inf, -math.inf, math.nan]])

def test_inverse_trig_domain_edges():
  check_op(None, torch.asin, Tensor.asin, vals=[[-1.0, 1.0, -1.5, 2.0]], grad=False)
  check_op(None, torch.acos, Tensor.acos, vals=[[-1.0, 1.0, -1.5, 2.0]], grad=False)
  check_op(None, torch.atanh, Tensor.atanh, vals=[[-1.0, 1.0, -1.5, 2.0]], grad=False)
  check_op(None, torch.acosh, Tensor.acosh, vals=[[1.0, 0.5, 1e30, math.inf]], grad=False)
  check_op(None, torch.atan, Tensor.atan, vals=[[math.inf, -math.inf, 1e30, -1e-30, math.nan]])
  check_op(None, torch.asinh, Tensor.asinh, vals=[[1e30, -1e30, 4096.5, -4095.5, math.inf]])

def test_hyperbolic_large_arguments():
  # e**89 overflows float32 but sinh(89) and cosh(89) do not
  check_op(None, torch.sinh, Tensor.sinh, vals=[[-89.0, -50.0, 50.0, 89.0]], rtol=1e-5)
  check_op(None, torch.cosh, Tensor.cosh, vals=[[-89.0, -50.0, 0.0, 50.0, 89.0]], rtol=1e-5)
  check_op(None, torch.tanh, Tensor.tanh, vals=[[-1e4, -100.0, 0.0, 100.0, 1e4]])

@pytest.mark.parametrize("transcendental", [1, 2], ids=["native", "polynomial"])
def test_trig_large_arguments_forward_and_backward(transcendental):
  rng = np.random.default_rng(3)
  x = np.concatenate([rng.uniform(-1e4, 1e4, 16), rng.uniform(-1e9, 1e9, 16), [1e5, 3.0e38, -3.0e38, 8192.5, 8191.5]])
  x = x.astype(np.float32)
  with Context(TRANSCENDENTAL=transcendental):
    for name in ("sin", "cos"):
      # NOTE: the argument is exact in float32, so torch's result is the float32-accurate answer to compare with
      check_op(None, getattr(torch, name), getattr(Tensor, name), vals=[x], atol=3e-7, rtol=0, grad_atol=6e-7, grad_rtol=0)
    check_op(None, torch.tan, Tensor.tan, vals=[x[:16]], atol=0, rtol=2e-5, grad=False)

@pytest.mark.parametrize("transcendental", [1, 2], ids=["native", "polynomial"])
def test_transcendental_float64_and_specials(transcendental):
  with Context(TRANSCENDENTAL=transcendental):
    x = np.array([-1e6, -30.5, -1.0, -1e-300, 0.0, 1e-3, 0.7, 2.0, 700.0], dtype=np.float64)
    check_op(None, torch.sin, Tensor.sin, vals=[x], dtype="float64", atol=1e-14, rtol=1e-12)
    check_op(None, torch.exp, Tensor.exp, vals=[x[1:-1]], dtype="float64", atol=0, rtol=1e-13)
    check_op(None, torch.log, Tensor.log, vals=[np.abs(x[1:]) + 1e-300], dtype="float64", atol=0, rtol=1e-13)
    check_op(None, torch.sin, Tensor.sin, vals=[[math.inf, -math.inf, math.nan, -0.0]], grad=False)
    check_op(None, torch.exp2, Tensor.exp2, vals=[[math.inf, -math.inf, math.nan, -150.0, 128.5, 127.9]], grad=False)
    check_op(None, torch.log2, Tensor.log2, vals=[[math.inf, 0.0, -1.0, math.nan, 1e-45, 3e38]], grad=False)

# ---- pow: zero bases, negative bases, integer and float exponents, with torch's gradients ----

def test_pow_tensor_exponent_zero_and_negative_bases():
  base = [0.0, 0.0, 0.0, 0.0, -2.0, -2.0, -2.0, 2.0, 1e4, -1e4, 3.0]
  expo = [0.3, 0.0, 2.0, -1.0, 3.0, 2.0, 0.5, -0.5, 2.0, 3.0, 0.0]
  check_op(None, torch.pow, Tensor.pow, vals=[base, expo])

@pytest.mark.parametrize("e", [0, 1, 2, 3, -1, -2, 0.5, 2.5, -0.5, 100])
def test_pow_scalar_exponent(e):
  vals = [[0.0, 1.5, -2.0, 3.0, -0.5]] if float(e).is_integer() else [[0.0, 1.5, 2.0, 3.0, 0.25]]
  check_op(None, lambda x: x ** e, vals=vals, rtol=2e-6)

def test_pow_reverse_and_int():
  check_op([(3, 4)], lambda x: 2.0 ** x, low=-3, high=3)
  check_op([(3, 4)], lambda x: x ** 3, dtype="int32", low=-5, high=5)
  check_op([(3, 4), (3, 4)], lambda x, y: x ** y, dtype="int32", low=0, high=4)
  # NOTE: bool ** int is an int: torch's default int is int64, ours int32
  out = check_op(None, lambda x: x ** 3, vals=[[True, False]], dtype="bool", check_dtype=False)
  assert out[0].dtype is dtypes.int32

# ---- binary math ----

def test_copysign_matches_torch():
  check_op([(3, 4), (4,)], torch.copysign, Tensor.copysign)
  # -0.0 and nan keep their sign bit; the gradient at 0 is 0
  check_op(None, torch.copysign, Tensor.copysign, vals=[[1.0, 2.0, 0.0, -3.0, 5.0], [-0.0, 0.0, -1.0, math.nan, -math.inf]])
  check_op([(3,), (3,)], torch.copysign, Tensor.copysign, dtype="int32", low=-3, high=3)
  check_op([(5,), (5,)], torch.copysign, Tensor.copysign, dtype="float16")
  check_op([(3,)], lambda x: torch.copysign(x, -2.0), lambda x: x.copysign(-2.0))

def test_logaddexp_matches_torch():
  check_op([(3, 4), (3, 1)], torch.logaddexp, Tensor.logaddexp, low=-10, high=10)
  check_op([(0, 4), (4,)], torch.logaddexp, Tensor.logaddexp)
  check_op([(4,), (4,)], torch.logaddexp, Tensor.logaddexp, dtype="float16", grad_atol=2e-2)
  inf = math.inf
  check_op(None, torch.logaddexp, Tensor.logaddexp, vals=[[-inf, inf, 1e4, -1e4, 3.0, 0.0], [2.0, 1.0, 1e4, 1e4, 3.0, -1000.0]])
  # equal infinities: the value is that infinity (torch's gradient there is nan, ours 1/2 to each side)
  out = Tensor([-inf, inf]).logaddexp(Tensor([-inf, inf])).numpy()
  np.testing.assert_array_equal(out, [-inf, inf])

@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((0,), 0), ((1, 4), 0), ((), 0)])
def test_logcumsumexp_matches_torch(shape, axis):
  check_op([shape], lambda x: torch.logcumsumexp(x, axis), lambda x: x.logcumsumexp(axis), low=-5, high=5)

def test_logcumsumexp_no_underflow_and_long_axis():
  # a prefix far below the running maximum still gets its own value (exp(x - global max) would underflow to log 0)
  check_op(None, lambda x: torch.logcumsumexp(x, 0), lambda x: x.logcumsumexp(0),
           vals=[[-1000.0, -999.0, 0.0, -math.inf, 50.0]])
  # above 2048 the scan goes by blocks
  check_op([(2, 2100)], lambda x: torch.logcumsumexp(x, 1), lambda x: x.logcumsumexp(1), low=-30, high=30, rtol=1e-5,
           grad_atol=1e-4)

# ---- predicates ----

SPECIAL = [1.0, -2.5, 0.0, -0.0, math.inf, -math.inf, math.nan, 1e38]

@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
def test_isinf_isfinite_isnan(dtype):
  vals = [SPECIAL if dtype == "float32" else SPECIAL[:-1] + [6e4]] if dtype.startswith("float") else [[1, 0, 1, 0]]
  check_op(None, torch.isinf, Tensor.isinf, vals=vals, dtype=dtype, grad=False)
  check_op(None, torch.isfinite, Tensor.isfinite, vals=vals, dtype=dtype, grad=False)
  check_op(None, torch.isnan, Tensor.isnan, vals=vals, dtype=dtype, grad=False)
  for pos, neg in [(True, False), (False, True), (False, False)]:
    out = Tensor(np.array(vals[0]).astype(np.float32 if dtype.startswith("float") else dtype)).isinf(pos, neg).numpy()
    ref = np.isposinf(vals[0]) * pos | np.isneginf(vals[0]) * neg
    np.testing.assert_array_equal(out, ref)

def test_isclose_matches_torch():
  a = [1.0, 1.0, math.inf, math.inf, math.nan, 1e-9, 0.0, 100.0, -math.inf]
  b = [1.0 + 1e-6, 1.1, math.inf, -math.inf, math.nan, 0.0, 1e-7, 100.001, -math.inf]
  for kw in [{}, {"equal_nan": True}, {"rtol": 0.0, "atol": 1e-8}, {"rtol": 1e-3, "atol": 0.0}]:
    check_op(None, lambda x, y: torch.isclose(x, y, **kw), lambda x, y: x.isclose(y, **kw), vals=[a, b], grad=False)
  check_op([(3, 4), (4,)], torch.isclose, Tensor.isclose, dtype="int32", low=0, high=2, grad=False)
  check_op([(3,), (3,)], torch.isclose, Tensor.isclose, dtype="bool", grad=False)
  check_op([(3, 4)], lambda x: torch.isclose(x, torch.tensor(1.5, dtype=x.dtype)), lambda x: x.isclose(1.5), grad=False)

# ---- bitwise ----

INT_DTYPES = ["int8", "uint8", "int16", "int32", "int64"]

@pytest.mark.parametrize("dtype", INT_DTYPES + ["bool"])
def test_bitwise_ops_match_torch(dtype):
  lo, hi = (0, 200) if dtype == "uint8" else (-100, 100)
  for tfn in (torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor):
    name = tfn.__name__
    check_op([(3, 4), (4,)], tfn, lambda a, b, name=name: getattr(a, name)(b), dtype=dtype, low=lo, high=hi)
  check_op([(3, 4)], torch.bitwise_not, Tensor.bitwise_not, dtype=dtype, low=lo, high=hi)
  check_op([(3, 4), (3, 4)], lambda a, b: (a & b) | (~a ^ b), dtype=dtype, low=lo, high=hi)
  check_op([(0, 4)], torch.bitwise_not, Tensor.bitwise_not, dtype=dtype)

def test_bitwise_with_python_scalars():
  check_op([(3, 4)], lambda a: (a & 6) | (3 ^ a), dtype="int32", low=-50, high=50)
  check_op([(3, 4)], lambda a: (a & True) | (False ^ a), dtype="bool")

def test_bitwise_on_floats_is_a_type_error():
  for fn in (lambda t: t & t, lambda t: t | 1, lambda t: t.bitwise_xor(t)):
    with pytest.raises(TypeError, match="bitwise ops need int or bool tensors, got dtypes.float32"): fn(Tensor([1.0]))
  check_raises(TypeError, lambda: ~torch.tensor([1.0]), lambda: ~Tensor([1.0]), match="int or bool")
  with pytest.raises(TypeError, match="bitwise ops need int or bool"): Tensor([True]) & 1.5

def test_new_ops_fuse_to_one_kernel():
  from tests.ops.helpers import kernel_count
  x = Tensor.rand(8, 8)
  for fn in (Tensor.erf, Tensor.atan, Tensor.asinh, Tensor.acosh, Tensor.sinh, Tensor.tanh, Tensor.sigmoid, Tensor.log1p):
    assert kernel_count(fn(x)) == 1, fn.__name__
  assert kernel_count(x.logaddexp(x * 2)) == 1 and kernel_count(x.copysign(x - 0.5)) == 1
  assert kernel_count(x.isclose(x + 1e-3)) == 1
  assert x.dtype is dtypes.float32

def test_custom_gradient_survives_realizing_an_intermediate():
  # pow's gradient at a zero base is a rule on its output node; realizing the base in the middle rebuilds that node
  for realize_after in (False, True):
    x = Tensor([0.0, 4.0, 0.0], requires_grad=True)
    y = x * 1.0
    if not realize_after: y.realize()
    z = y ** Tensor([0.5, 0.5, 2.0])
    if realize_after: y.realize()
    z.sum().backward()
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), [math.inf, 0.25, 0.0])
