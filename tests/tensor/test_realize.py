"""Laziness and realize: nothing runs before realize, realized tensors read their buffer, assign writes in place, and the
numpy reference (fuzz.oracles.tensor_ref) agrees with the compiler on the graphs the front end builds."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop import Ops
from fuzz.oracles.tensor_ref import eval_tensor_graph
from tinygrad.tensor import base_buffer

@pytest.mark.single_device("counts the kernels of one device's schedule")
def test_lazy_until_realize_then_buffer():
  a = Tensor([1.0, 2.0, 3.0])
  b = (a + 1) * 2
  assert b.uop.op is Ops.MUL, "ops must stay lazy"
  sched = b.schedule()
  assert len(sched) == 1
  assert base_buffer(b.uop) is None, "schedule() does not run anything, so the tensor stays lazy"
  np.testing.assert_allclose(b.numpy(), [4.0, 6.0, 8.0])
  assert base_buffer(b.uop) is not None, "after realize the tensor reads its output buffer"

@pytest.mark.single_device("counts the kernels of one device's schedule")
def test_schedule_then_numpy_computes_the_values():
  x = Tensor([[1.0, 2.0], [3.0, 4.0]])
  y = (x @ x).relu()
  assert len(y.schedule()) == 1
  np.testing.assert_allclose(y.numpy(), [[7.0, 10.0], [15.0, 22.0]])

def test_realized_tensor_feeds_later_ops():
  a = Tensor([1.0, 2.0]).realize()
  b = (a * 3).realize()
  np.testing.assert_allclose((b + a).numpy(), [4.0, 8.0])

def test_assign_updates_in_place_and_lazily():
  a = Tensor([1.0, 2.0, 3.0]).realize()
  a.assign(a * 2)
  assert a.uop.op is Ops.ASSIGN
  np.testing.assert_allclose(a.numpy(), [2.0, 4.0, 6.0])
  a += 1
  np.testing.assert_allclose(a.numpy(), [3.0, 5.0, 7.0])
  c = Tensor.zeros(2)
  c.assign(Tensor([5.0, 6.0]))
  np.testing.assert_allclose(c.numpy(), [5.0, 6.0])

def test_realize_many_at_once_and_contiguous_detach():
  x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
  t, s = x.T.contiguous(), x.sum()
  Tensor.realize(t, s)
  np.testing.assert_allclose(t.numpy(), np.arange(6).reshape(2, 3).T)
  assert s.item() == 15.0
  assert x.detach().uop.op is Ops.DETACH

def test_bfloat16_and_bool_storage():
  b = Tensor([1.5, -2.25, 3.0], dtype=dtypes.bfloat16)
  np.testing.assert_array_equal(b.numpy(), [1.5, -2.25, 3.0])
  np.testing.assert_array_equal((b * 2).numpy(), [3.0, -4.5, 6.0])
  np.testing.assert_array_equal(Tensor([True, False]).numpy(), [True, False])

def test_reference_evaluator_agrees_with_compiler():
  rng = np.random.default_rng(5)
  x = Tensor(rng.uniform(-2, 2, size=(3, 4)).astype(np.float32))
  i = Tensor(rng.integers(-9, 9, size=(3, 4)).astype(np.int32))
  graphs = [x.softmax(1), (x @ x.T).relu(), x[::-1, 1:3].pad(((1, 1), (0, 2))), i // 4 + i % 3, (i << 2) ^ (i >> 1),
            x.cumsum(1), x.reshape(1, 1, 3, 4).max_pool2d((1, 2)), (x > 0).where(x.exp(), x.sin()),
            x.cast(dtypes.half).sqrt(), x.argmax(1), i.cast(dtypes.float32).mean(0)]
  for g in graphs:
    ref = eval_tensor_graph(g.uop)
    out = g.numpy()
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=1e-3, atol=1e-3, equal_nan=True)

@pytest.mark.single_device("counts the kernels of one device's schedule")
def test_a_reshape_of_a_contiguous_realizes_as_its_buffer_reshaped():
  # a reduce stored in its own shape and asked for in another (a weight gradient kept as a (Cout, Cin x 9) matmul,
  # read as the filters' (Cout, Cin, 3, 3)): one kernel, the tensor a reshape of that kernel's buffer, where the
  # reshape used to be copied into a buffer of its own (a second kernel, 9.4 MB a step for ResNet's 512-channel filters)
  a, b = np.random.default_rng(0).standard_normal((2, 8, 18)).astype(np.float32)
  t = (Tensor(a).reshape(8, 1, 18) * Tensor(b[:, :4]).reshape(8, 4, 1)).sum(0).contiguous().reshape(4, 2, 3, 3)
  assert len(t.schedule()) == 1
  ref = (a.reshape(8, 1, 18) * b[:, :4].reshape(8, 4, 1)).sum(0).reshape(4, 2, 3, 3)
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5)
  assert t.uop.op is Ops.RESHAPE and base_buffer(t.uop) is not None
  # it stays a tensor of its own: an assign to it writes its values, and a later graph reads them
  t.assign(t * 0 + 1).realize()
  np.testing.assert_allclose((t + 1).numpy(), np.full((4, 2, 3, 3), 2.0, np.float32))
  # through a shrink (not only reshapes) it is its own buffer, with the shrink's values
  u = (Tensor(a) * 2).contiguous()[:, :9]
  np.testing.assert_allclose(u.numpy(), (a * 2)[:, :9], rtol=1e-6)
  assert base_buffer(u.uop) is not None and u.uop.op is not Ops.SHRINK
