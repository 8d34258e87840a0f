"""Edge cases a numpy/PyTorch user hits: empty and size-1 axes, in-place writes through views and setitem, gradients
through realized values, dtype of matmul, and error messages that name the op and the shapes."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, nn

rng = np.random.default_rng(0)

# ---- empty axes ----

def test_reduce_over_empty_reshape():
  # reshape between empty shapes used to divide by the zero size in the scheduler
  np.testing.assert_equal(Tensor.ones(2, 0, 3).reshape(3, 0, 2).sum(1).numpy(), np.zeros((3, 2), np.float32))
  np.testing.assert_equal(Tensor.ones(2, 0, 3).reshape(0, 6).prod(0).numpy(), np.ones(6, np.float32))

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32, dtypes.uint8, dtypes.int8])
def test_empty_reductions_are_identities(dt):
  x = Tensor.ones(2, 0, dtype=dt)
  lo = {dtypes.float32: -np.inf, dtypes.int32: -2**31, dtypes.uint8: 0, dtypes.int8: -128}[dt]
  np.testing.assert_equal(x.sum(1).numpy(), [0, 0])
  np.testing.assert_equal(x.prod(1).numpy(), [1, 1])
  np.testing.assert_equal(x.max(1).numpy(), [lo, lo])

def test_grad_of_empty_reduction_is_empty_zeros():
  a = Tensor.ones(2, 0, requires_grad=True)
  a.sum().backward()
  assert a.grad is not None and a.grad.shape == (2, 0)
  b = Tensor.ones(3, 0, requires_grad=True)
  (b.sum(1) * Tensor([1.0, 2.0, 3.0])).sum().backward()
  assert b.grad is not None and b.grad.numpy().shape == (3, 0)

def test_cumulative_ops_on_empty_and_0d():
  assert Tensor.ones(0).cumprod().numpy().shape == (0,)
  assert Tensor.ones(2, 0).cummax(1).numpy().shape == (2, 0)
  assert Tensor.ones(2, 0).cumsum(1).numpy().shape == (2, 0)
  assert Tensor(3.0).cumprod().item() == 3.0
  assert Tensor(3.0).cummax().item() == 3.0

# ---- setitem and assign through views ----

def test_setitem_repeated_index_last_write_wins():
  x = Tensor.zeros(4).contiguous()
  x[[0, 0, 2]] = Tensor([5.0, 7.0, 1.0])
  np.testing.assert_equal(x.numpy(), [7.0, 0.0, 1.0, 0.0])
  y = Tensor.zeros(3).contiguous()
  y[[1, 1]] = 5.0
  np.testing.assert_equal(y.numpy(), [0.0, 5.0, 0.0])

def test_setitem_empty_selection_changes_nothing():
  x = Tensor([1.0, 2.0, 3.0])
  x[2:2] = 9.0
  np.testing.assert_equal(x.numpy(), [1.0, 2.0, 3.0])

def test_setitem_on_view_writes_through():
  x = Tensor.zeros(6).contiguous().realize()
  y = x[::-2]
  y[0] = 5.0
  np.testing.assert_equal(x.numpy(), [0, 0, 0, 0, 0, 5])
  np.testing.assert_equal(y.numpy(), [5, 0, 0])

def test_assign_to_view_writes_through():
  x = Tensor.zeros(2, 3).contiguous().realize()
  x.T[1].assign(Tensor([1.0, 2.0])).realize()
  np.testing.assert_equal(x.numpy(), [[0, 1, 0], [0, 2, 0]])
  z = Tensor.zeros(6).contiguous().realize()
  z[::2].assign(Tensor([1.0, 2.0, 3.0])).realize()
  np.testing.assert_equal(z.numpy(), [1, 0, 2, 0, 3, 0])

def test_setitem_keeps_gradient():
  x = Tensor.ones(3, requires_grad=True)
  y = x * 2
  y[0] = 0.0
  y.sum().backward()
  np.testing.assert_equal(x.grad.numpy(), [0.0, 2.0, 2.0])

def test_setitem_after_realize_gives_no_stale_gradient():
  x = Tensor.ones(3, requires_grad=True)
  y = (x * 2).realize()
  y[0] = 0.0
  y.sum().backward()
  # the gradient through the overwritten buffer is not the one of the old contents (x * 2 -> [2, 2, 2])
  assert x.grad is None or x.grad.numpy().tolist() == [0.0, 2.0, 2.0]

# ---- gradients through realized values ----

def _forward_with_print(x: Tensor) -> Tensor:
  h = (x * 3).relu()
  h.numpy()  # realizes h in the middle of the forward pass; h is gone when backward runs
  return (h * h).sum()

def test_grad_through_realized_intermediate():
  x = Tensor([1.0, -1.0, 2.0], requires_grad=True)
  _forward_with_print(x).backward()
  np.testing.assert_allclose(x.grad.numpy(), [18.0, 0.0, 36.0])

def test_training_with_realized_hidden_layer_learns():
  Tensor.manual_seed(0)
  l1, l2 = nn.Linear(3, 8), nn.Linear(8, 1)
  opt = nn.optim.SGD([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.05)
  X = Tensor(rng.standard_normal((16, 3)).astype(np.float32))
  Y = X.sum(1, keepdim=True)
  w0 = l1.weight.numpy().copy()
  for _ in range(5):
    h = l1(X).relu().realize()
    loss = ((l2(h) - Y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    with Tensor.train(): opt.step()
  assert not np.allclose(l1.weight.numpy(), w0), "the first layer must get gradients through the realized h"

def test_explicit_gradient_of_realized_intermediate():
  x = Tensor([1.0, 2.0], requires_grad=True)
  y = (x * 2).realize()
  (gy, gx) = (y * y).sum().gradient(y, x)
  np.testing.assert_allclose(gy.numpy(), [4.0, 8.0])
  np.testing.assert_allclose(gx.numpy(), [8.0, 16.0])

def test_abs_at_zero_has_zero_gradient_and_keeps_signs():
  x = Tensor([0.0, -1.0, 2.0, -0.0], requires_grad=True)
  x.abs().sum().backward()
  np.testing.assert_equal(x.grad.numpy(), [0.0, -1.0, 1.0, 0.0])
  out = Tensor([-0.0, float("nan"), -3.0, float("-inf")]).abs().numpy()
  assert not np.signbit(out[0]) and np.isnan(out[1]) and out[2] == 3.0 and out[3] == np.inf
  np.testing.assert_equal(Tensor(np.array([-128, -3, 0, 5], np.int8)).abs().numpy(), [-128, 3, 0, 5])

# ---- dtypes ----

def test_int_matmul_keeps_dtype_and_wraps():
  a = np.full((2, 100), 3, np.int8)
  b = np.full((100, 2), 3, np.int8)
  out = (Tensor(a) @ Tensor(b)).numpy()
  assert out.dtype == np.int8
  np.testing.assert_equal(out, a @ b)
  assert (Tensor([[1, 2]]) @ Tensor([[3], [4]])).dtype is dtypes.int32

def test_int_pow_of_large_exponent_wraps_like_numpy():
  base = np.array([3, -3, 7], np.int32)
  np.testing.assert_equal((Tensor(base) ** 100).numpy(), base ** 100)
  np.testing.assert_equal((Tensor(np.array([3], np.uint8)) ** 77).numpy(), np.array([3], np.uint8) ** 77)

def test_signed_plus_uint64_is_float64_not_fp8():
  a, b = Tensor(np.array([2**40], np.int64)), Tensor(np.array([3], np.uint64))
  out = a + b
  assert out.dtype is dtypes.float64, "the lattice's meet of int64 and uint64 is an fp8, which keeps none of the value"
  np.testing.assert_equal(out.numpy(), [2.0**40 + 3])
  assert (Tensor([1], dtype=dtypes.int8) + Tensor([1], dtype=dtypes.uint64)).dtype is dtypes.float64
  assert (Tensor([1.0], dtype=dtypes.fp8e4m3) + Tensor([1.0], dtype=dtypes.fp8e4m3)).dtype is dtypes.fp8e4m3

# ---- errors ----

def test_bool_mask_index_selects_like_numpy():
  x = Tensor([1.0, 2.0, 3.0])
  assert x[Tensor([True, False, True])].tolist() == [1.0, 3.0]
  assert x[[True, False, True]].tolist() == [1.0, 3.0]
  with pytest.raises(IndexError, match="boolean mask"): x[Tensor([True, False])]

def test_cat_of_0d_is_a_clear_error():
  with pytest.raises(ValueError, match="cat: 0-d"): Tensor(1.0).cat(Tensor(2.0))

def test_matmul_batch_error_names_user_shapes():
  with pytest.raises(RuntimeError, match=r"matmul of \(2, 3, 4\) and \(3, 4, 5\)"):
    Tensor.ones(2, 3, 4) @ Tensor.ones(3, 4, 5)

def test_conv_and_pool_errors_name_the_op():
  with pytest.raises(ValueError, match="conv2d: kernel"): Tensor.ones(1, 1, 2, 2).conv2d(Tensor.ones(1, 1, 3, 3))
  with pytest.raises(ValueError, match="max_pool2d: kernel"): Tensor.ones(1, 1, 2, 2).max_pool2d(3)
  with pytest.raises(ValueError, match="avg_pool2d: kernel"): Tensor.ones(1, 1, 2, 2).avg_pool2d(3)

# ---- nn ----

@pytest.mark.single_device("counts the nodes of the running mean's one buffer; on N devices it is a MULTI of N")
def test_batchnorm_running_stats_follow_each_step():
  Tensor.manual_seed(0)
  conv, bn = nn.Conv2d(2, 3, 1), nn.BatchNorm(3)
  opt = nn.optim.SGD([conv.weight, conv.bias, bn.weight, bn.bias], lr=0.5)
  xs = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
  expect = np.zeros(3, np.float32)
  old, Tensor.training = Tensor.training, True
  try:
    for _ in range(3):
      w, b = conv.weight.numpy().reshape(3, 2), conv.bias.numpy()
      y = np.einsum("oc,nchw->nohw", w, xs) + b.reshape(1, 3, 1, 1)
      expect = expect * 0.9 + y.mean((0, 2, 3)) * 0.1
      loss = bn(conv(Tensor(xs))).square().mean()
      opt.zero_grad()
      loss.backward()
      with Tensor.train(): opt.step()
      assert len(bn.running_mean.uop.toposort()) < 10, "the running mean must be a buffer, not a chain of every step"
  finally: Tensor.training = old
  # with a lazy chain, every step's statistics were computed from the weights after the last step
  np.testing.assert_allclose(bn.running_mean.numpy(), expect, rtol=1e-4, atol=1e-5)

def test_half_mean_and_var_do_not_overflow():
  x = np.full(70000, 1.0, np.float16)
  m = Tensor(x).mean()
  assert m.dtype is dtypes.half and m.item() == 1.0, "the half sum of 70000 ones is inf; the mean must not be"
  np.testing.assert_allclose(Tensor(np.arange(70000) % 2 * 2.0, dtype=dtypes.half).var().item(), 1.0, rtol=1e-3)

# ---- devices ----

def test_copy_reports_its_target_device():
  t = Tensor([1.0, 2.0], device="CPU").to("PYTHON")
  assert t.device == "PYTHON"
  np.testing.assert_equal((t * 2).numpy(), [2.0, 4.0])

def test_mixed_device_operands_are_a_clear_error():
  a, b = Tensor([1.0], device="PYTHON"), Tensor([1.0], device="CPU")
  with pytest.raises(ValueError, match=r"add: operands are on different devices \(PYTHON and CPU\)"): a + b
  with pytest.raises(ValueError, match="where"): Tensor([True], device="CPU").where(a, 0.0)

# ---- more errors ----

def test_pool_and_conv_reject_nonpositive_sizes():
  with pytest.raises(ValueError, match="max_pool2d: kernel .* must be positive"): Tensor.ones(1, 1, 4, 4).max_pool2d(0)
  with pytest.raises(ValueError, match="conv2d: .* must be positive"):
    Tensor.ones(1, 1, 4, 4).conv2d(Tensor.ones(1, 1, 3, 3), stride=0)
  with pytest.raises(ValueError, match="conv2d: input .* same number of dims"):
    Tensor.ones(1, 1, 4, 4).conv2d(Tensor.ones(1, 1, 3))

def test_iterating_a_0d_tensor_is_an_error():
  with pytest.raises(TypeError, match="0-d"): list(Tensor(1.0))
  assert [x.item() for x in Tensor([1, 2])] == [1, 2]

def test_embedding_needs_int_indices():
  with pytest.raises(TypeError, match="embedding: indices must be an int tensor"):
    Tensor([0.5]).embedding(Tensor.ones(3, 2))

# ---- scans ----

def _max_reduce_len(t: Tensor) -> int:
  from tinygrad.uop import Ops
  return max((u.src[0].arg for si in t.schedule() for u in si.ast.toposort() if u.op is Ops.RANGE
              and u.arg[-1].name == "REDUCE"), default=0)

@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cummax"])
def test_long_scans_are_blocked_and_exact(op):
  n = 200_000
  x = (1 + rng.standard_normal(n) * 1e-6).astype(np.float32) if op == "cumprod" else rng.standard_normal(n).astype(np.float32)
  assert _max_reduce_len(getattr(Tensor(x), op)()) < 1000, f"{op} of {n} must not be a window of n*n work"
  ref = {"cumsum": np.cumsum, "cumprod": np.cumprod, "cummax": np.maximum.accumulate}[op](x.astype(np.float64))
  np.testing.assert_allclose(getattr(Tensor(x), op)().numpy(), ref, rtol=1e-4, atol=2e-3)

def test_long_int_cumsum_and_grad():
  xi = rng.integers(-5, 5, (3, 4100)).astype(np.int32)
  np.testing.assert_equal(Tensor(xi).cumsum(1).numpy(), xi.cumsum(1))
  t = Tensor(np.ones((2, 2100), np.float32), requires_grad=True)
  (t.cumsum(1) * Tensor(np.arange(2100, dtype=np.float32))).sum().backward()
  np.testing.assert_allclose(t.grad.numpy()[1], np.cumsum(np.arange(2100)[::-1])[::-1])

@pytest.mark.single_device("writes through a reshape whose rows cross devices once its data is split, which a tensor "
                            "on several devices refuses (docs/multi.md)")
def test_setitem_with_slices_is_a_view_write_not_a_one_hot():
  x = Tensor.zeros(300_000).contiguous().realize()
  x[1:] = 1.0  # a one-hot select would be 300000 x 300000
  assert x.sum().item() == 299_999.0
  y = Tensor(np.arange(6, dtype=np.float32)).reshape(2, 3)
  y[:, ::2] = Tensor([[7.0], [8.0]])
  np.testing.assert_equal(y.numpy(), [[7, 1, 7], [8, 4, 8]])
  z = Tensor(np.arange(5, dtype=np.float32))
  z[1:] = z[:-1]  # reads the positions it overwrites
  np.testing.assert_equal(z.numpy(), [0, 0, 1, 2, 3])

def test_clone_is_a_new_buffer():
  x = Tensor([1.0, 2.0])
  y = x.clone()
  y[0] = 5.0
  np.testing.assert_equal(x.numpy(), [1.0, 2.0])
  np.testing.assert_equal(y.numpy(), [5.0, 2.0])
  x2 = Tensor([1.0, 2.0], requires_grad=True)
  (x2.clone() * x2).sum().backward()
  np.testing.assert_equal(x2.grad.numpy(), [2.0, 4.0])

def test_cross_entropy_shape_error_names_both_shapes():
  with pytest.raises(ValueError, match=r"cross_entropy: logits \(3, 4\) need class indices of shape \(3,\)"):
    Tensor.ones(3, 4).cross_entropy(Tensor([1, 2]))
  assert Tensor.ones(3, 4).cross_entropy(Tensor([1, 2, 0])).shape == ()

def test_python_int_too_big_for_int32_widens_or_raises_never_wraps():
  import pytest as _pytest
  np.testing.assert_array_equal(Tensor([2**40, 1]).numpy(), np.array([2**40, 1], dtype=np.int64))
  assert Tensor(2**40).item() == 2**40
  assert Tensor([2**63 + 5]).dtype is dtypes.uint64
  with _pytest.raises(OverflowError, match="does not fit"): Tensor([1, 2]) + 2**40
  with _pytest.raises(OverflowError, match="does not fit any integer dtype"): Tensor(2**70)
