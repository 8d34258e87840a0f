"""Where random numbers are computed: a draw read through a broadcast (a matmul of `Tensor.randn`) is stored by its
own kernel instead of being recomputed per broadcast element; an elementwise use (dropout) stays fused."""
import numpy as np
from tinygrad import Tensor
from tinygrad.uop import Ops

def threefry_per_kernel(*ts: Tensor) -> list[tuple[bool, int]]:
  """(has a reduce, number of THREEFRY nodes) for every kernel the schedule of `ts` runs."""
  items = ts[0].schedule(*ts[1:])
  out = []
  for si in items:
    if si.ast.op is not Ops.SINK: continue
    topo = si.ast.toposort()
    out.append((any(u.op is Ops.REDUCE_AXIS or u.op is Ops.REDUCE for u in topo), sum(u.op is Ops.THREEFRY for u in topo)))
  return out

def test_matmul_of_random_inputs_draws_each_element_once():
  Tensor.manual_seed(3)
  a, b = Tensor.randn(8, 16), Tensor.randn(16, 4)
  kernels = threefry_per_kernel(a @ b)
  assert [n for red, n in kernels if red] == [0], kernels   # the matmul kernel draws nothing itself
  assert sum(n > 0 for red, n in kernels if not red) == 2, kernels  # one drawing kernel per input

def test_matmul_of_random_inputs_values_match_the_realized_draws():
  Tensor.manual_seed(5)
  a, b = Tensor.randn(8, 16), Tensor.randn(16, 4)
  out = (a @ b).numpy()
  Tensor.manual_seed(5)
  an, bn = Tensor.randn(8, 16).numpy(), Tensor.randn(16, 4).numpy()
  np.testing.assert_allclose(out, an @ bn, rtol=1e-5, atol=1e-5)

def test_dropout_mask_stays_fused_into_its_elementwise_kernel():
  Tensor.manual_seed(0)
  x = Tensor(np.ones((4, 8), np.float32))
  with Tensor.train(): y = x.dropout(0.5)
  kernels = threefry_per_kernel(y)
  assert len(kernels) == 1 and kernels[0][1] > 0, kernels
