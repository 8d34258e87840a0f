"""The smaller names a tinygrad or torch user reaches for: cummin, xor, nan_to_num, trace and outer against torch
(forward and backward; float32, float16 and int32; empty and size-1 dims), and multinomial, checked statistically with
a fixed seed (never against torch's random stream) and for shape, dtype and validity."""
import math
import numpy as np
import pytest
import torch
from tinygrad import Tensor, dtypes
from tests.ops.helpers import check, check_op, check_raises

# ---- cummin ----

@pytest.mark.parametrize("shape,axis", [((3, 5), 0), ((3, 5), 1), ((2, 3, 4), -1), ((0, 4), 1), ((1,), 0), ((), 0)])
def test_cummin_matches_torch(shape, axis):
  check_op([shape], lambda x: torch.cummin(x, axis).values, lambda x: x.cummin(axis))

@pytest.mark.parametrize("dtype", ["float16", "int32", "uint8", "int8"])
def test_cummin_dtypes_match_torch(dtype):
  lo, hi = (0, 200) if dtype == "uint8" else (-9, 9)
  check_op([(4, 6)], lambda x: torch.cummin(x, 1).values, lambda x: x.cummin(1), dtype=dtype, low=lo, high=hi)

def test_cummin_long_axis_and_infinities():
  # NOTE: above 2048 elements the scan runs in blocks; -inf and +inf must survive the order-reversing map
  check_op([(2, 2100)], lambda x: torch.cummin(x, 1).values, lambda x: x.cummin(1), grad=False)
  check_op(None, lambda x: torch.cummin(x, 0).values, lambda x: x.cummin(0),
           vals=[[math.inf, 3.0, -math.inf, 5.0]], grad=False)

def test_cummin_axis_out_of_range_is_an_index_error():
  check_raises(IndexError, lambda: torch.cummin(torch.zeros(3), 1), lambda: Tensor.zeros(3).cummin(1))

# ---- xor ----

@pytest.mark.parametrize("dtype", ["int32", "uint8", "int8", "bool"])
def test_xor_matches_torch_bitwise_xor(dtype):
  check_op([(3, 4), (3, 4)], torch.bitwise_xor, Tensor.xor, dtype=dtype, low=-100, high=100)
  check_op([(3, 1), (4,)], torch.bitwise_xor, Tensor.xor, dtype=dtype, low=0, high=100)

def test_xor_with_python_scalars_and_reverse():
  x = Tensor([1, 6, -3], dtype=dtypes.int32)
  np.testing.assert_array_equal(x.xor(5).numpy(), np.array([1, 6, -3]) ^ 5)
  np.testing.assert_array_equal(x.xor(5, reverse=True).numpy(), 5 ^ np.array([1, 6, -3]))
  assert x.xor(5).dtype is dtypes.int32

def test_xor_on_floats_is_a_type_error():
  # NOTE: torch refuses too (a NotImplementedError from its kernel); ours is the TypeError bitwise_xor raises
  for x, y in [(Tensor.ones(2), Tensor.ones(2)), (Tensor.ones(2, dtype=dtypes.int32), Tensor.ones(2)),
               (Tensor.ones(2, dtype=dtypes.float16), 1)]:
    with pytest.raises(TypeError, match="bitwise ops need int or bool"): x.xor(y)

# ---- nan_to_num ----

SPECIAL = [[1.5, math.nan, -2.0, math.inf, -math.inf, 0.0], [math.nan, math.nan, 3.0, -math.inf, 7.0, math.inf]]

@pytest.mark.parametrize("kw", [{}, {"nan": 2.5}, {"nan": -1.0, "posinf": 100.0, "neginf": -50.0}, {"posinf": 9.0}],
                         ids=["defaults", "nan", "all", "posinf"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_nan_to_num_matches_torch(kw, dtype):
  # NOTE: the gradient passes through finite elements and is 0 at replaced ones, as torch's
  check_op(None, lambda x: torch.nan_to_num(x, **kw), lambda x: x.nan_to_num(**kw), vals=[SPECIAL], dtype=dtype, rtol=0)

def test_nan_to_num_random_values_and_empty():
  check_op([(3, 4)], torch.nan_to_num, Tensor.nan_to_num)
  check_op([(0, 3)], torch.nan_to_num, Tensor.nan_to_num)

@pytest.mark.parametrize("dtype", ["int32", "bool", "uint8"])
def test_nan_to_num_ints_unchanged(dtype):
  check_op([(2, 3)], torch.nan_to_num, Tensor.nan_to_num, dtype=dtype, low=0, high=9)

# ---- trace and outer ----

@pytest.mark.parametrize("shape", [(3, 4), (5, 2), (4, 4), (1, 1), (0, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_trace_matches_torch(shape, dtype):
  check([shape], torch.trace, Tensor.trace, dtype=dtype, low=-9, high=9, atol=2e-2 if dtype == "float16" else None)

def test_trace_needs_a_matrix():
  for shape in [(3,), (2, 2, 2)]:
    check_raises(RuntimeError, lambda: torch.trace(torch.zeros(shape)), lambda: Tensor.zeros(shape).trace(),
                 match="trace: needs a 2-d tensor")

@pytest.mark.parametrize("n,m", [(3, 4), (1, 5), (0, 3), (4, 0)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_outer_matches_torch(n, m, dtype):
  check([(n,), (m,)], torch.outer, Tensor.outer, dtype=dtype, low=-9, high=9)

def test_outer_promotes_like_torch():
  a, b = np.array([1, -2, 3], dtype=np.int32), np.array([0.5, 2.0], dtype=np.float32)
  out = Tensor(a).outer(Tensor(b))
  ref = torch.outer(torch.tensor(a), torch.tensor(b))
  assert out.dtype is dtypes.float32 and ref.dtype is torch.float32
  np.testing.assert_array_equal(out.numpy(), ref.numpy())

def test_outer_needs_vectors():
  check_raises(RuntimeError, lambda: torch.outer(torch.zeros(2, 2), torch.zeros(3)),
               lambda: Tensor.zeros(2, 2).outer(Tensor.zeros(3)), match="outer: needs two 1-d tensors")

# ---- multinomial: statistics with a fixed seed, never torch's random stream ----

def _within(freq, p, n, sigmas=5.0):
  """Each observed frequency within `sigmas` binomial standard deviations of its probability."""
  p = np.asarray(p, dtype=np.float64)
  sd = np.sqrt(p * (1 - p) / n)
  assert np.all(np.abs(freq - p) <= sigmas * sd + 1e-12), f"frequencies {freq} vs probabilities {p} (n={n})"

def test_multinomial_with_replacement_frequencies():
  Tensor.manual_seed(0)
  w = np.array([[0.1, 0.0, 0.6, 0.3], [2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 5.0, 0.0]], dtype=np.float32)
  n = 6000
  s = Tensor(w).multinomial(n, replacement=True)
  assert s.shape == (3, n) and s.dtype is dtypes.int32
  out = s.numpy()
  for row, wr in zip(out, w):
    counts = np.bincount(row, minlength=4)
    assert counts.sum() == n and row.min() >= 0 and row.max() < 4
    assert np.all(counts[wr == 0] == 0), f"a zero-weight category was drawn: {counts}"
    _within(counts / n, wr / wr.sum(), n)

def test_multinomial_one_category_and_edges():
  Tensor.manual_seed(3)
  for w, k in [([0.0, 1.0, 0.0], 1), ([1.0, 0.0, 0.0], 0), ([0.0, 0.0, 3.0], 2)]:
    np.testing.assert_array_equal(Tensor(w).multinomial(50, replacement=True).numpy(), np.full(50, k))
    assert Tensor(w).multinomial(1).numpy().tolist() == [k]

def test_multinomial_without_replacement_follows_sequential_law():
  # P(first=i, second=j) = p_i * p_j / (1 - p_i): the law of drawing one at a time from the weight left
  Tensor.manual_seed(1)
  p = np.array([0.5, 0.3, 0.2, 0.0])
  rows = 4000
  out = Tensor(np.tile(p.astype(np.float32), (rows, 1))).multinomial(2).numpy()
  assert out.shape == (rows, 2) and np.all(out[:, 0] != out[:, 1]) and np.all(out < 3)
  pairs = np.zeros((4, 4))
  np.add.at(pairs, (out[:, 0], out[:, 1]), 1)
  law = np.array([[0 if i == j else p[i] * p[j] / (1 - p[i]) for j in range(4)] for i in range(4)])
  _within(pairs.ravel() / rows, law.ravel(), rows)

def test_multinomial_without_replacement_all_categories_is_a_permutation():
  Tensor.manual_seed(2)
  out = Tensor.rand(6, 5).add(0.01).multinomial(5).numpy()
  for row in out: assert sorted(row.tolist()) == list(range(5))
  # zero-weight categories come only after every positive one
  z = Tensor([0.0, 2.0, 0.0, 1.0]).multinomial(4).numpy()
  assert set(z[:2].tolist()) == {1, 3} and set(z[2:].tolist()) == {0, 2}

def test_multinomial_shapes_seed_and_laziness():
  Tensor.manual_seed(7)
  a = Tensor([0.2, 0.8]).multinomial(3, replacement=True)
  assert a.shape == (3,) and a.dtype is dtypes.int32 and not a.requires_grad
  Tensor.manual_seed(7)
  np.testing.assert_array_equal(Tensor([0.2, 0.8]).multinomial(3, replacement=True).numpy(), a.numpy())
  assert Tensor.zeros(0, 3).multinomial(2).shape == (0, 2)
  assert Tensor([1.0, 1.0], dtype=dtypes.float16).multinomial(2).numpy().dtype == np.int32

def test_multinomial_bad_arguments_are_clear_errors():
  with pytest.raises(ValueError, match="cannot draw 4 samples without replacement from 3 categories"):
    Tensor([0.2, 0.3, 0.5]).multinomial(4)
  with pytest.raises(RuntimeError, match="cannot draw 4 samples without replacement"):
    Tensor([0.2, 0.3, 0.5]).multinomial(4)
  assert Tensor([0.2, 0.3, 0.5]).multinomial(4, replacement=True).shape == (4,)
  with pytest.raises(ValueError, match="1-d or 2-d tensor of weights, got shape"): Tensor.ones(2, 2, 2).multinomial(1)
  with pytest.raises(ValueError, match="num_samples must be at least 1"): Tensor.ones(3).multinomial(0)
  with pytest.raises(TypeError, match="weights must be floats"): Tensor([1, 2]).multinomial(1)
  with pytest.raises(ValueError, match="no categories"): Tensor.ones(2, 0).multinomial(1, replacement=True)
