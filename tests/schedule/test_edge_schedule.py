"""Kernel counts for the edge cases of the scheduler: the arange under argmax/eye/one_hot/gather is recomputed in closed
form instead of stored, and empty reductions and reshapes of empty tensors schedule without dividing by a zero size."""
import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.uop import Ops
from tinygrad.schedule.rangeify import reshape_index, fold_int_sum, _c
from tinygrad.uop.ops import UOp
from tinygrad.uop.symbolic import simplify
from tinygrad.uop import AxisType

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 5)).astype(np.float32)

def _reduces(items) -> int: return sum(1 for si in items for u in si.ast.toposort() if u.op is Ops.REDUCE)

def test_argmax_is_max_then_one_kernel():
  x = Tensor(X)
  out = x.argmax(1)
  items = out.schedule()
  assert len(items) == 2, "argmax: the max, then one kernel with the arange fused (no stored arange)"
  np.testing.assert_equal(Tensor(X).argmax(1).numpy(), X.argmax(1))
  np.testing.assert_equal(Tensor(X).argmax().numpy(), X.argmax())

def test_argmax_ties_pick_first():
  x = Tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
  np.testing.assert_equal(x.argmax(1).numpy(), [1, 0])
  np.testing.assert_equal(x.argmin(1).numpy(), [0, 0])

def test_eye_one_hot_gather_are_one_kernel():
  eye = Tensor.eye(5, 3)
  assert len(eye.schedule()) == 1 and _reduces(eye.schedule()) == 0
  np.testing.assert_equal(Tensor.eye(5, 3).numpy(), np.eye(5, 3, dtype=np.float32))
  oh = Tensor([0, 2, 1]).one_hot(4)
  items = oh.schedule()
  assert len(items) == 1 and _reduces(items) == 0, "one_hot: the compare against arange needs no loop"
  np.testing.assert_equal(Tensor([0, 2, 1]).one_hot(4).numpy(), np.eye(4, dtype=np.int32)[[0, 2, 1]])
  idx = np.array([[0], [4], [2], [1]])
  g = Tensor(X).gather(1, Tensor(idx))
  assert len(g.schedule()) == 1
  np.testing.assert_allclose(Tensor(X).gather(1, Tensor(idx)).numpy(), np.take_along_axis(X, idx, 1))

def test_large_arange_has_no_loop():
  for n in (1025, 3000, 100_003):
    t = Tensor.arange(n)
    items = t.schedule()
    assert len(items) == 1 and _reduces(items) == 0, f"arange({n}) must be a closed form, not an n*n cumsum"
    np.testing.assert_equal(Tensor.arange(n).numpy(), np.arange(n))

def test_embedding_fuses_arange():
  w = Tensor(X)
  out = Tensor([3, 0, 3]).embedding(w)
  assert len(out.schedule()) == 1
  np.testing.assert_allclose(Tensor([3, 0, 3]).embedding(Tensor(X)).numpy(), X[[3, 0, 3]], rtol=1e-6)

def test_fold_int_sum_keeps_float_and_data_sums():
  r = UOp.range(8, 0, AxisType.REDUCE)
  fsum = UOp(Ops.REDUCE, dtypes.float32, (UOp.const(dtypes.float32, 0.1), r), Ops.ADD)
  assert fold_int_sum(fsum) is None, "float sums round per add: folding them to n*v would change the result"
  isum = UOp(Ops.REDUCE, dtypes.int32, (UOp.const(dtypes.int32, 3), r), Ops.ADD)
  assert fold_int_sum(isum) is not None
  cmp = (_c(2) < r).where(UOp.const(dtypes.int32, 1), UOp.const(dtypes.int32, 0))
  folded = fold_int_sum(UOp(Ops.REDUCE, dtypes.int32, (cmp, r), Ops.ADD))
  assert folded is not None and r not in folded.toposort()
  assert simplify(folded).arg == 5, "r in 3..7 is 5 values"
  # a window with a stride (2*r) is not a contiguous run of r: left alone
  cmp2 = (_c(2) < r * _c(2)).where(UOp.const(dtypes.int32, 1), UOp.const(dtypes.int32, 0))
  assert fold_int_sum(UOp(Ops.REDUCE, dtypes.int32, (cmp2, r), Ops.ADD)) is None

def test_sum_of_window_counts_matches_numpy():
  # the closed form must agree with the loop at every boundary: a cumsum of int ones padded on both sides
  t = Tensor.ones(7, dtype=dtypes.int32).pad(((2, 3),)).cumsum()
  np.testing.assert_equal(t.numpy(), np.pad(np.ones(7, np.int32), (2, 3)).cumsum())

def test_reshape_index_of_empty_shape():
  r = UOp.range(0, 0, AxisType.LOOP)
  got = reshape_index((r, _c(0)), (0, 3), (3, 0))
  assert len(got) == 2, "a reshape between empty shapes must not divide by the zero size"

def test_reduce_over_empty_reshape_schedules():
  x = Tensor.ones(2, 0, 3).reshape(3, 0, 2)
  out = x.sum(1)
  items = out.schedule()
  assert len(items) == 1 and _reduces(items) == 0, "a reduce over an empty axis is its identity, with no loop"
  np.testing.assert_equal(Tensor.ones(2, 0, 3).reshape(3, 0, 2).sum(1).numpy(), np.zeros((3, 2), np.float32))
  np.testing.assert_equal(Tensor.ones(2, 0, 3).reshape(3, 0, 2).contiguous().max(1).numpy(), np.full((3, 2), -np.inf))
