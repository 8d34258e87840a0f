"""Tensors built from constants with an empty axis stay on the device they were asked for (found by
fuzz/gen/tensor_programs.py: Tensor.eye(3, 0, device="PYTHON") came back on CPU)."""
import numpy as np
import pytest
from tinygrad import Tensor

@pytest.mark.parametrize("make", [lambda d: Tensor.eye(3, 0, device=d), lambda d: Tensor.eye(0, 2, device=d),
                                  lambda d: Tensor.linspace(1, 2, 0, device=d), lambda d: Tensor.arange(0, device=d)])
def test_empty_constant_tensor_keeps_its_device(make):
  t = make("PYTHON")
  assert t.device == "PYTHON"
  # and it combines with other tensors of that device
  assert (t == t).numpy().size == 0

def test_eye_with_an_empty_axis_in_a_program():
  x = Tensor(np.ones((3, 2), np.float32), device="PYTHON")
  np.testing.assert_equal(x.cat(Tensor.eye(0, 2, device="PYTHON")).numpy(), np.ones((3, 2), np.float32))
