"""WINO=1: convolutions with 3-wide kernels (stride 1, no dilation) by Winograd's F(4, 3), against torch forward and
backward, and the kernels it takes."""
import numpy as np
import pytest
import torch
from tinygrad import Tensor, Context, GlobalCounters, dtypes

rng = np.random.default_rng(7)
F = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}

@pytest.mark.parametrize("xs,ws,groups,padding", [
  ((2, 3, 9, 11), (4, 3, 3, 3), 1, 1), ((1, 4, 6, 5), (6, 2, 3, 3), 2, 0), ((2, 2, 7), (3, 2, 3), 1, 2),
  ((1, 2, 5, 6, 4), (2, 2, 3, 3, 3), 1, 1), ((1, 1, 3, 3), (1, 1, 3, 3), 1, 0), ((2, 3, 8, 8), (5, 3, 3, 3), 1, (1, 2)),
])
def test_winograd_conv_matches_torch_forward_and_backward(xs, ws, groups, padding):
  x, w, b = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32), rng.standard_normal(ws[0]).astype(np.float32)
  tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
  ref = F[len(ws) - 2](tx, tw, tb, padding=padding, groups=groups)
  up = rng.standard_normal(ref.shape).astype(np.float32)
  ref.backward(torch.tensor(up))
  with Context(WINO=1):
    X, W, B = (Tensor(v, requires_grad=True) for v in (x, w, b))
    out = X.conv2d(W, B, groups=groups, padding=padding)
    (out * Tensor(up)).sum().backward()
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), atol=2e-4, rtol=1e-4)
    for ours, theirs in ((X, tx), (W, tw), (B, tb)): np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), atol=5e-4, rtol=1e-4)

def test_winograd_is_used_only_where_it_applies_and_takes_few_kernels():
  x, w = Tensor(rng.standard_normal((1, 2, 8, 8)).astype(np.float32)), Tensor(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
  with Context(WINO=1):
    GlobalCounters.reset()
    x.conv2d(w, padding=1).realize()
    # input transform, filter transform, the per-tile products summed over channels, output transform
    assert GlobalCounters.kernel_count == 4
    for kw in ({"stride": 2}, {"dilation": 2}):
      GlobalCounters.reset()
      x.conv2d(w, padding=2, **kw).realize()
      assert GlobalCounters.kernel_count == 1, kw
    GlobalCounters.reset()
    x.conv2d(Tensor.ones(3, 2, 5, 5)).realize()
    assert GlobalCounters.kernel_count == 1

def test_winograd_half_input_keeps_its_dtype():
  x, w = rng.standard_normal((1, 2, 6, 6)).astype(np.float16), rng.standard_normal((2, 2, 3, 3)).astype(np.float16)
  ref = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float32), torch.tensor(w, dtype=torch.float32)).numpy()
  with Context(WINO=1): out = Tensor(x).conv2d(Tensor(w))
  assert out.dtype is dtypes.float16
  np.testing.assert_allclose(out.numpy().astype(np.float32), ref, atol=1e-2, rtol=1e-2)
