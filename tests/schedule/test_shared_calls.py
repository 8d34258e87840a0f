"""An elementwise expression that calls a transcendental and is computed by several kernels is stored once
(rangeify._store_shared_calls), where it has RECOMPUTE_CALLS_MIN elements or more: a GroupNorm's backward through a
SiLU read the SiLU's derivative (an exp2 of the recomputed normalised input) in its group sums, the scale's and shift's
sums and the input gradient, and each of those kernels called exp2 for every element again. The gradients are torch's."""
import numpy as np
import torch
from tinygrad import Tensor, nn
from tinygrad.uop import Ops
from tinygrad.schedule.rangeify import RECOMPUTE_CALLS_MIN

def groupnorm_silu_backward(shape: tuple[int, ...]) -> tuple[list, tuple[Tensor, ...], tuple[np.ndarray, ...]]:
  """The schedule of the input's, the scale's and the shift's gradients of sum(silu(group_norm(x)) * g), the three
  gradients realized, and torch's."""
  rng = np.random.default_rng(0)
  xn, gn_ = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
  wn, bn = (rng.standard_normal(shape[1]).astype(np.float32) for _ in range(2))
  x = Tensor(xn, requires_grad=True)
  gn = nn.GroupNorm(4, shape[1])
  gn.weight, gn.bias = Tensor(wn, requires_grad=True), Tensor(bn, requires_grad=True)
  (gn(x).silu() * Tensor(gn_)).sum().backward()
  assert x.grad is not None and gn.weight.grad is not None and gn.bias.grad is not None
  grads = (x.grad, gn.weight.grad, gn.bias.grad)
  sched = grads[0].schedule(*grads[1:])
  tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (xn, wn, bn))
  (torch.nn.functional.silu(torch.nn.functional.group_norm(tx, 4, tw, tb)) * torch.tensor(gn_)).sum().backward()
  return sched, grads, tuple(t.grad.numpy() for t in (tx, tw, tb))

def exp2_kernels(sched: list) -> int:
  return sum(1 for si in sched if si.ast.op is Ops.SINK and any(u.op is Ops.EXP2 for u in si.ast.toposort()))

def test_a_silu_derivative_under_a_groupnorm_backward_is_computed_once():
  shape = (8, 32, 16, 16)
  assert int(np.prod(shape)) >= RECOMPUTE_CALLS_MIN
  sched, grads, ref = groupnorm_silu_backward(shape)
  # NOTE: fused, 5 of the backward's kernels called exp2 (the sums and the input gradient); stored, the one computing it
  assert exp2_kernels(sched) == 1, exp2_kernels(sched)
  for ours, theirs in zip(grads, ref): np.testing.assert_allclose(ours.numpy(), theirs, rtol=1e-4, atol=1e-4)

def test_a_small_expression_stays_fused():
  # NOTE: under RECOMPUTE_CALLS_MIN elements a launch of its own costs more than the calls (an LSTM's gates)
  shape = (2, 8, 8, 8)
  assert int(np.prod(shape)) < RECOMPUTE_CALLS_MIN
  sched, grads, ref = groupnorm_silu_backward(shape)
  assert exp2_kernels(sched) > 1
  for ours, theirs in zip(grads, ref): np.testing.assert_allclose(ours.numpy(), theirs, rtol=1e-4, atol=1e-4)
