"""A representative slice of tests/ops (the per-op torch comparisons of the math, activation and loss half) that the
per-target sweeps re-run: one or two cases of each kind of new op, forward and backward."""
import math
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

# NOTE: torch is the reference here; `make test-gpu` runs tests/tensor with a GPU host's python3, which may lack it
torch = pytest.importorskip("torch", reason="torch (the reference of these checks) is not importable by this python")
import torch.nn.functional as F  # noqa: E402
from tests.ops.helpers import check_op  # noqa: E402

def test_special_functions_forward_backward():
  check_op([(3, 5)], torch.erf, Tensor.erf, low=-3, high=3)
  check_op([(3, 5)], torch.atan, Tensor.atan, low=-10, high=10)
  check_op([(3, 5)], torch.asinh, Tensor.asinh, low=-20, high=20)
  check_op([(3, 5)], torch.atanh, Tensor.atanh, dtype="float16", low=-0.9, high=0.9, atol=2e-2, grad_atol=5e-2)

def test_activations_at_extreme_inputs():
  vals = [[-1e4, -30.0, -1e-5, 0.0, 3.0, 1e4]]
  for tfn, fn in [(torch.sigmoid, Tensor.sigmoid), (torch.tanh, Tensor.tanh), (F.selu, Tensor.selu),
                  (F.logsigmoid, Tensor.logsigmoid), (F.hardswish, Tensor.hardswish)]:
    out = check_op(None, tfn, fn, vals=vals, atol=1e-6, rtol=1e-5)
    assert all(math.isfinite(v) for v in out[0].tolist())

def test_sin_cos_large_arguments():
  x = np.array([1e4, -8192.5, 1e9, -3e38, 0.5], dtype=np.float32)
  check_op(None, torch.sin, Tensor.sin, vals=[x], atol=3e-7, rtol=0, grad_atol=6e-7, grad_rtol=0)
  check_op(None, torch.cos, Tensor.cos, vals=[x], atol=3e-7, rtol=0, grad_atol=6e-7, grad_rtol=0)

def test_logaddexp_logcumsumexp_pow():
  check_op([(3, 4), (4,)], torch.logaddexp, Tensor.logaddexp, low=-10, high=10)
  check_op(None, lambda x: torch.logcumsumexp(x, 0), lambda x: x.logcumsumexp(0), vals=[[-1000.0, -999.0, 0.0, 50.0]])
  check_op(None, torch.pow, Tensor.pow, vals=[[0.0, 0.0, -2.0, 2.0], [0.5, 2.0, 3.0, -0.5]])

def test_losses_with_ignore_index_and_smoothing():
  y = np.array([0, 3, -100, 1, 2])
  check_op([(5, 4)], lambda x: F.cross_entropy(x, torch.tensor(y), label_smoothing=0.1),
           lambda x: x.cross_entropy(Tensor(y.astype(np.int32)), label_smoothing=0.1))
  check_op([(3, 4), (3, 4)], lambda x, t: F.binary_cross_entropy_with_logits(x, t.sigmoid(), pos_weight=torch.full((4,), 2.0)),
           lambda x, t: x.binary_crossentropy_logits(t.sigmoid(), pos_weight=Tensor.full((4,), 2.0)))

def test_floor_division_and_modulo_of_negative_ints():
  a, b = np.array([-7, 7, -7, 7, -1, 0], np.int32), np.array([2, -2, -2, 3, 5, -3], np.int32)
  np.testing.assert_array_equal((Tensor(a) // Tensor(b)).numpy(), a // b)
  np.testing.assert_array_equal((Tensor(a) % Tensor(b)).numpy(), a % b)
  np.testing.assert_array_equal((Tensor(a.astype(np.int8)) % -3).numpy(), a.astype(np.int8) % np.int8(-3))

def test_predicates_bitwise_and_dtype_names():
  check_op(None, torch.isclose, Tensor.isclose, vals=[[1.0, math.inf, math.nan, 1e-9], [1.0 + 1e-7, math.inf, math.nan, 0.0]], grad=False)
  check_op([(3, 4), (4,)], lambda a, b: (a & b) ^ ~a, dtype="int16", low=-50, high=50)
  t = Tensor([1.7, -2.2]).cast("int32") + Tensor.linspace(5, 10, 2, dtype="int32")
  assert t.dtype is dtypes.int32 and t.tolist() == [6, 8]

def test_cummin_nan_to_num_trace_outer_xor():
  check_op([(3, 5)], lambda x: torch.cummin(x, 1).values, lambda x: x.cummin(1))
  check_op(None, torch.nan_to_num, Tensor.nan_to_num, vals=[[1.0, math.nan, math.inf, -math.inf]], dtype="float16")
  check_op([(3, 4)], torch.trace, Tensor.trace)
  check_op([(3,), (2,)], torch.outer, Tensor.outer)
  check_op([(3, 4), (4,)], torch.bitwise_xor, Tensor.xor, dtype="int32", low=-50, high=50)

def test_multinomial_draws_only_positive_weights():
  Tensor.manual_seed(0)
  w = Tensor([[0.0, 1.0, 0.0, 2.0], [3.0, 0.0, 1.0, 0.0]])
  a, b = w.multinomial(64, replacement=True).numpy(), w.multinomial(2).numpy()
  assert set(a[0].tolist()) == {1, 3} and set(a[1].tolist()) == {0, 2}
  assert sorted(b[0].tolist()) == [1, 3] and sorted(b[1].tolist()) == [0, 2]
