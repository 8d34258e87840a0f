"""Empty tensors as operands of non-empty results (found by fuzz/gen/tensor_programs.py)."""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.dtype import dtypes
from tinygrad.uop import Ops

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float16, dtypes.bool, dtypes.int32])
def test_cat_with_an_empty_tensor(dt):
  # the empty operand's pad is never valid: its load became INDEX(buf, Invalid), which kernel_spec rejects
  a, b = Tensor(np.zeros((0,), np.float32)).cast(dt), Tensor(np.arange(1, 9, dtype=np.float32)).cast(dt)
  want = np.arange(1, 9, dtype=np.float32).astype(np.bool_ if dt is dtypes.bool else np.float32)
  np.testing.assert_equal(a.cat(b).numpy().astype(want.dtype), want)
  np.testing.assert_equal(b.cat(a, a).numpy().astype(want.dtype), want)

def test_never_valid_load_folds_to_zero_in_the_kernel():
  a, b = Tensor(np.zeros((0, 3), np.float32)), Tensor(np.ones((2, 3), np.float32))
  (si,) = a.cat(b).schedule()
  # the empty buffer is not a kernel buffer at all: its load folded to 0, and no bare Invalid index is left
  assert len([u for u in si.ast.toposort() if u.op is Ops.DEFINE_GLOBAL]) == 2
  assert not [u for u in si.ast.toposort() if u.op is Ops.INDEX and u.src[1].op is Ops.CONST]

def test_pad_of_an_empty_tensor_is_the_pad_value():
  x = Tensor(np.zeros((0, 2), np.float32)).pad(((1, 2), (0, 0)), value=1.5)
  np.testing.assert_equal(x.numpy(), np.full((3, 2), 1.5, np.float32))
