"""Two clones (or a clone and a contiguous()) of one value would be the same hash-consed UOp, realizing into one buffer
so that a write through one shows in the other (found by fuzz/gen/tensor_programs.py); each clone now carries a unique tag,
so it gets a buffer of its own."""
import numpy as np
from tinygrad import Tensor

def test_two_clones_do_not_alias():
  a = Tensor(np.arange(4, dtype=np.float32)) * 2
  b, c = a.clone(), a.clone()
  b[0] = 100.0
  np.testing.assert_equal(c.numpy(), [0, 2, 4, 6])

def test_write_to_a_clone_does_not_change_a_contiguous_copy():
  v1 = Tensor(np.arange(6, dtype=np.float32)).reshape(2, 3).mean(0)
  v2 = v1.contiguous()
  t = v1.clone()
  t[0] = 0.0
  np.testing.assert_equal(v2.numpy(), [1.5, 2.5, 3.5])

def test_two_clones_of_a_realized_buffer_do_not_alias():
  a = Tensor(np.arange(4, dtype=np.float32)).realize()
  b, c = a.clone(), a.clone()
  b[1] = -1.0
  np.testing.assert_equal(c.numpy(), [0, 1, 2, 3])
  np.testing.assert_equal(a.numpy(), [0, 1, 2, 3])
