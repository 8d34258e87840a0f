"""Activations against torch, forward and backward: float32, float16, empty and size-1 dims, the exact gradient
conventions at the kinks (hardtanh, hardswish, hardsigmoid, relu6 at their ends), and extreme inputs (|x| up to 1e4)
where every value and gradient must be finite and right."""
import math
import pytest
import torch
import torch.nn.functional as F
from tinygrad import Tensor
from tests.ops.helpers import check_op

ACTS = [
  ("selu", F.selu, Tensor.selu), ("celu", F.celu, Tensor.celu),
  ("celu_alpha", lambda x: F.celu(x, alpha=0.5), lambda x: x.celu(0.5)), ("softsign", F.softsign, Tensor.softsign),
  ("logsigmoid", F.logsigmoid, Tensor.logsigmoid), ("hardtanh", F.hardtanh, Tensor.hardtanh),
  ("hardtanh_range", lambda x: F.hardtanh(x, -0.5, 1.5), lambda x: x.hardtanh(-0.5, 1.5)),
  ("hardswish", F.hardswish, Tensor.hardswish), ("hardsigmoid", F.hardsigmoid, Tensor.hardsigmoid),
  ("elu", F.elu, Tensor.elu), ("elu_alpha", lambda x: F.elu(x, 0.3), lambda x: x.elu(0.3)), ("relu6", F.relu6, Tensor.relu6),
  ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), Tensor.gelu),
  ("gelu_erf", F.gelu, lambda x: x.gelu(approximate="none")),
  ("quick_gelu", lambda x: x * torch.sigmoid(1.702 * x), Tensor.quick_gelu), ("silu", F.silu, Tensor.silu),
  ("mish", F.mish, Tensor.mish), ("softplus", F.softplus, Tensor.softplus),
  ("softplus_beta", lambda x: F.softplus(x, beta=2.0), lambda x: x.softplus(2.0)),
  ("sigmoid", torch.sigmoid, Tensor.sigmoid), ("tanh", torch.tanh, Tensor.tanh), ("leaky_relu", F.leaky_relu, Tensor.leaky_relu),
]
IDS = [a[0] for a in ACTS]

@pytest.mark.parametrize("name,tfn,fn", ACTS, ids=IDS)
@pytest.mark.parametrize("shapes", [[(4, 6)], [(0, 3)], [(1,)]], ids=["4x6", "empty", "size1"])
def test_activation_float32_matches_torch(name, tfn, fn, shapes):
  check_op(shapes, tfn, fn, low=-6, high=6)

@pytest.mark.parametrize("name,tfn,fn", ACTS, ids=IDS)
def test_activation_float16_matches_torch(name, tfn, fn):
  check_op([(4, 6)], tfn, fn, dtype="float16", low=-6, high=6, atol=2e-2, rtol=2e-2, grad_atol=3e-2, grad_rtol=3e-2)

EXTREME = [-1e4, -1000.0, -88.0, -20.0, -3.0, -1e-5, 0.0, 1e-5, 3.0, 20.0, 88.0, 1000.0, 1e4]

@pytest.mark.parametrize("name,tfn,fn", ACTS, ids=IDS)
def test_activation_extreme_inputs_finite_and_right(name, tfn, fn):
  out = check_op(None, tfn, fn, vals=[EXTREME], atol=1e-6, rtol=1e-5, grad_atol=1e-6, grad_rtol=1e-5)
  assert all(math.isfinite(v) for v in out[0].tolist())

def test_activation_gradient_conventions_at_kinks():
  # torch's choices at the ends of the linear pieces (strict or not), which these must reproduce exactly
  check_op(None, F.hardtanh, Tensor.hardtanh, vals=[[-1.0, 1.0, -1.5, 0.0, 1.5]])
  check_op(None, F.hardsigmoid, Tensor.hardsigmoid, vals=[[-3.0, 3.0, -4.0, 0.0, 4.0]])
  check_op(None, F.hardswish, Tensor.hardswish, vals=[[-3.0, 3.0, -4.0, 0.0, 4.0]])
  check_op(None, F.relu6, Tensor.relu6, vals=[[0.0, 6.0, -1.0, 3.0, 7.0]])
  check_op(None, F.elu, Tensor.elu, vals=[[0.0, -0.0]])
  check_op(None, F.softplus, Tensor.softplus, vals=[[0.0]])
  check_op(None, F.logsigmoid, Tensor.logsigmoid, vals=[[0.0]])

def test_activation_int_input_promotes():
  for tfn, fn in [(F.hardsigmoid, Tensor.hardsigmoid), (F.softsign, Tensor.softsign), (F.logsigmoid, Tensor.logsigmoid),
                  (torch.sigmoid, Tensor.sigmoid)]:
    # NOTE: torch refuses some of these on ints; ours promote to float32 like its elementwise math does
    x = Tensor([-4, -1, 0, 2, 5])
    out = fn(x)
    ref = tfn(torch.tensor([-4.0, -1.0, 0.0, 2.0, 5.0]))
    assert out.dtype.name == "float"
    assert torch.allclose(torch.tensor(out.numpy()), ref, atol=1e-6)

def test_gelu_rejects_unknown_approximation():
  with pytest.raises(ValueError, match="approximate must be 'tanh' or 'none'"): Tensor([1.0]).gelu("erf")
