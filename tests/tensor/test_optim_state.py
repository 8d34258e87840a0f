"""Optimizer state a captured step reads: the learning rate is a one-element Tensor written in place (setter or
assign), Adam's step count is a buffer; each change shows in the next step's update."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.nn.optim import SGD, Adam
from tinygrad.tensor import base_buffer

def _sgd_step(opt: SGD, w: Tensor) -> None:
  opt.zero_grad()
  (w * w).sum().backward()
  with Tensor.train(): opt.step()

def test_lr_is_a_buffer_written_in_place():
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = SGD([w], lr=0.1)
  assert isinstance(opt.lr, Tensor) and opt.lr.shape == (1,) and opt.lr.dtype is dtypes.float32
  buf = base_buffer(opt.lr.uop)
  opt.lr = 0.25
  assert base_buffer(opt.lr.uop) is buf, "the setter writes the same buffer"
  np.testing.assert_allclose(opt.lr.numpy(), [0.25])
  _sgd_step(opt, w)
  np.testing.assert_allclose(w.numpy(), [0.5, 1.0], rtol=1e-6)
  opt.lr = Tensor([0.5])
  assert base_buffer(opt.lr.uop) is buf
  _sgd_step(opt, w)
  np.testing.assert_allclose(w.numpy(), [0.0, 0.0], atol=1e-7)

def test_lazy_assign_to_lr_is_used_by_the_next_step():
  w = Tensor([1.0], requires_grad=True)
  opt = SGD([w], lr=0.1)
  opt.lr.assign(Tensor([0.0]))
  _sgd_step(opt, w)
  np.testing.assert_array_equal(w.numpy(), [1.0])

def test_lr_tensor_given_by_the_caller_is_the_one_read():
  lr = Tensor([0.5])
  w = Tensor([2.0], requires_grad=True)
  opt = SGD([w], lr=lr)
  lr.assign(Tensor([0.25])).realize()
  _sgd_step(opt, w)
  np.testing.assert_allclose(w.numpy(), [1.0])

def test_bad_lr_is_a_clear_error():
  w = Tensor([1.0], requires_grad=True)
  with pytest.raises(ValueError, match="lr must have one element"): SGD([w], lr=Tensor([0.1, 0.2]))
  with pytest.raises(TypeError, match="lr must be a float tensor"): SGD([w], lr=Tensor([1]))
  opt = SGD([w], lr=0.1)
  with pytest.raises(ValueError, match="lr must have one element"): opt.lr = Tensor([0.1, 0.2])

def test_adam_step_count_is_a_buffer_and_drives_the_bias_correction():
  w = Tensor([1.0, -1.0], requires_grad=True)
  opt = Adam([w], lr=0.1)
  for t in range(1, 4):
    opt.zero_grad()
    (w * 3).sum().backward()
    with Tensor.train(): opt.step()
    np.testing.assert_array_equal(opt.t.numpy(), [float(t)])
  # NOTE: a constant gradient: m_hat = g and v_hat = g*g exactly, so every step moves each weight by lr
  np.testing.assert_allclose(w.numpy(), [0.7, -1.3], rtol=1e-5)
