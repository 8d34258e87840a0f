"""Long lazy chains (10,000 ops) go through the front end, autograd, the scheduler and its spec checks under Python's
default recursion limit, and nothing raises the limit. Values are checked with the reference executor of kernel ASTs
(fuzz/oracles/kernel_ref.py) so the default suite stays fast; a chain deeper than the limit also runs through codegen and the C
compiler, and the whole 10,000-op run through codegen is a slow test."""
import sys
import numpy as np
import pytest
from tinygrad import Tensor
from fuzz.oracles.kernel_ref import eval_schedule

DEFAULT_LIMIT = 1000  # CPython's default
N = 10_000

@pytest.fixture(autouse=True)
def default_recursion_limit():
  # NOTE: pinned to the default for the test (something else in the process may have raised it) and checked after
  old = sys.getrecursionlimit()
  sys.setrecursionlimit(DEFAULT_LIMIT)
  try:
    yield
    assert sys.getrecursionlimit() == DEFAULT_LIMIT, "something raised the recursion limit"
  finally: sys.setrecursionlimit(old)

def scheduled_values(t: Tensor, kernels: int = 1) -> np.ndarray:
  """t's value from its schedule, evaluated by the reference executor (the schedule must have `kernels` kernels)."""
  items = t.schedule()
  assert len(items) == kernels, f"{len(items)} kernels, want {kernels}"
  return eval_schedule(items)[items[-1].bufs[0]].reshape(t.shape)

def test_add_chain_of_10000_schedules_under_default_limit():
  x = Tensor(np.arange(4, dtype=np.float32))
  for _ in range(N): x = x + 1
  np.testing.assert_equal(scheduled_values(x), np.arange(4, dtype=np.float32) + N)

def _movement_chain(x, n, steps: int):
  """Movement ops of every kind and an add per step; every 3 steps the view returns to the start, so the index math of
  the one load stays small (a chain whose views compose to an ever new permutation has index math as deep as the chain)."""
  for i in range(steps):
    if i % 3 == 0: x, n = x.reshape(4, 3).permute(1, 0), n.reshape(4, 3).T
    elif i % 3 == 1: x, n = x.permute(1, 0).reshape(3, 4).flip(1), np.flip(n.T.reshape(3, 4), 1)
    else: x, n = x.pad(((1, 1), (0, 0))).shrink(((1, 4), (0, 4))).flip(1), np.flip(n, 1)
    x, n = x + 1, n + 1
  return x, n

def test_movement_chain_and_reduce_of_10000_ops_schedule_under_default_limit():
  start = np.arange(12, dtype=np.float32).reshape(3, 4)
  # 4 ops per step on average (movement ops and an add): 10,000 ops in all, then a reduce
  x, ref = _movement_chain(Tensor(start), start, N // 4)
  np.testing.assert_allclose(scheduled_values(x.sum(1)), ref.sum(1), rtol=1e-6)

def test_gradient_of_10000_op_chain_under_default_limit():
  w = Tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
  x = w
  for _ in range(N): x = x * 1.0001
  x.sum().backward()
  assert w.grad is not None
  np.testing.assert_allclose(scheduled_values(w.grad), np.full(3, 1.0001 ** N, np.float32), rtol=1e-3)

def test_chain_deeper_than_the_limit_runs_through_codegen():
  x = Tensor(np.arange(4, dtype=np.float32))
  for _ in range(3 * DEFAULT_LIMIT // 2): x = x + 1
  np.testing.assert_equal(x.numpy(), np.arange(4, dtype=np.float32) + 3 * DEFAULT_LIMIT // 2)

@pytest.mark.slow
def test_add_chain_of_10000_runs_through_codegen():
  x = Tensor(np.arange(4, dtype=np.float32))
  for _ in range(N): x = x + 1
  np.testing.assert_equal(x.numpy(), np.arange(4, dtype=np.float32) + N)

def test_nested_cats_of_slices_lower_in_linear_time():
  # a stencil written as a cat of sums of slices, applied d times, reads 8**d elements per output element when fused:
  # at d=5 the index pushing passed its step limit on a 4-element tensor (RewriteNotConverging). An elementwise node
  # whose fused expression would read more than MAX_FUSED_READS distinct elements is stored instead
  import functools
  import numpy as np
  from tinygrad import Tensor, GlobalCounters
  m = ((1, 1, 0, 0), (0, 1, 1, 0), (0, 0, 1, 1), (1, 0, 0, 1))
  def stencil(t):
    cols = [t.shrink(((j, j + 1),)) for j in range(4)]
    return Tensor.cat(*[functools.reduce(lambda a, b: a + b, [cols[j] * c for j, c in enumerate(row) if c]) for row in m])
  x = np.array([1.0, -2.0, 0.5, 3.0])
  t, want = Tensor(x.astype(np.float32)), x
  for _ in range(8): t, want = stencil(t), np.array(m, dtype=np.float64) @ want
  GlobalCounters.reset()
  np.testing.assert_array_equal(t.numpy(), want)
  # NOTE: 8 levels of 8 reads each: the expression is cut (stored) every 3 levels, so 3 kernels, not 1 (8**8 reads)
  assert GlobalCounters.kernel_count == 3

def test_trilinear_interpolate_gradient_schedules():
  # the backward of a 3-d linear interpolation reads its input through nested views per axis: it passed the rewrite
  # step limit (RewriteNotConverging) before fused reads were bounded; now it lowers and equals torch's
  import numpy as np
  import torch
  from tinygrad import Tensor
  a = np.random.default_rng(0).standard_normal((1, 1, 4, 4, 4)).astype(np.float32)
  x = Tensor(a, requires_grad=True)
  r = x.interpolate((8, 8, 8), mode="trilinear")
  (g,) = (r * r.detach()).sum().gradient(x)
  tx = torch.tensor(a, requires_grad=True)
  tr = torch.nn.functional.interpolate(tx, (8, 8, 8), mode="trilinear")
  (tr * tr.detach()).sum().backward()
  np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), atol=1e-4, rtol=1e-4)
