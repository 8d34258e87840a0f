"""WINO: convolutions with 3-wide kernels (stride 1, no dilation) by Winograd's F(4, 3), against torch forward and
backward (on the C and LLVM paths and the PYTHON interpreter under SPEC=2), the kernels it takes, and where WINO=2 (the
default) takes it."""
import numpy as np
import pytest
import torch
from tinygrad import Tensor, Context, Device, GlobalCounters, dtypes
from tinygrad.codegen.opt import axis_size, reduce_axes
from tinygrad.codegen.program import prepare_kernel

rng = np.random.default_rng(7)
F = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}

@pytest.mark.parametrize("xs,ws,groups,padding", [
  ((2, 3, 9, 11), (4, 3, 3, 3), 1, 1), ((1, 4, 6, 5), (6, 2, 3, 3), 2, 0), ((2, 2, 7), (3, 2, 3), 1, 2),
  ((1, 2, 5, 6, 4), (2, 2, 3, 3, 3), 1, 1), ((1, 1, 3, 3), (1, 1, 3, 3), 1, 0), ((2, 3, 8, 8), (5, 3, 3, 3), 1, (1, 2)),
  ((1, 2, 5, 4), (3, 2, 3, 3), 1, 3), ((2, 6, 9, 10), (4, 3, 3, 3), 2, (2, 0)),
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
    # the input in channels-last order, the input transform, the filters taps-first (output channels contiguous), the
    # filter transform, the products (one matmul per tile position), the output transform, and the outputs back in
    # (N, C, H, W) order
    assert GlobalCounters.kernel_count == 7
    for kw in ({"stride": 2}, {"dilation": 2}):
      GlobalCounters.reset()
      x.conv2d(w, padding=2, **kw).realize()
      assert GlobalCounters.kernel_count == 1, kw
    GlobalCounters.reset()
    x.conv2d(Tensor.ones(3, 2, 5, 5)).realize()
    assert GlobalCounters.kernel_count == 1

def test_winograd_gradients_are_winograd_too():
  # the input gradient is a Winograd convolution of the upstream gradient (7 kernels), the weight gradient the input
  # and upstream transforms, one matmul per position and the filter transform's transpose: no kernel folds the
  # overlapping 6-wide tiles back onto the input (autograd through the tiles did, at 0.4 GFLOPS on 32x64x32x32)
  with Context(WINO=1):
    x = Tensor(rng.standard_normal((2, 4, 12, 12)).astype(np.float32), requires_grad=True)
    w = Tensor(rng.standard_normal((5, 4, 3, 3)).astype(np.float32), requires_grad=True)
    out = x.conv2d(w, padding=1).realize()
    (out * Tensor(rng.standard_normal(out.shape).astype(np.float32)).realize()).sum().backward()
    assert x.grad is not None and w.grad is not None
    dx, dw = Tensor.schedule(x.grad), Tensor.schedule(w.grad)
  assert len(dx) == 7 and len(dw) <= 8, (len(dx), len(dw))
  # the input gradient's reduces: the transforms' (36 and 9 positions) and the products' (5 output channels)
  sizes = {int(np.prod([axis_size(r) or 0 for r in reduce_axes(k)])) for k in (prepare_kernel(si.ast) for si in dx)}
  assert sizes - {0, 1} <= {36, 9, 5}, sizes

def test_a_winograd_training_step_transforms_its_input_once():
  # the weight gradient's input transform of x is the forward's (its constants one buffer, so one graph): a step that
  # schedules the output and both gradients together runs the input transform twice (x's and the upstream gradient's),
  # not three times
  with Context(WINO=1):
    x = Tensor(rng.standard_normal((2, 4, 12, 12)).astype(np.float32), requires_grad=True)
    w = Tensor(rng.standard_normal((5, 4, 3, 3)).astype(np.float32), requires_grad=True)
    out = x.conv2d(w, padding=1)
    (out * Tensor(rng.standard_normal((2, 5, 12, 12)).astype(np.float32))).sum().backward()
    assert x.grad is not None and w.grad is not None
    sched = Tensor.schedule(out, x.grad, w.grad)
  # (36 positions, 2 x 3 x 3 tiles, 4 channels of x or 5 of the upstream gradient), a reduce over a 6x6 window
  transforms = [si for si in sched if (k := prepare_kernel(si.ast)) is not None and
                int(np.prod([axis_size(r) or 0 for r in reduce_axes(k)])) == 36 and si.bufs[0].size in (36 * 18 * 4, 36 * 18 * 5)]
  assert len(transforms) == 2, [si.bufs[0].size for si in transforms]

def _kernels(x: Tensor, w: Tensor, **kw) -> int: return len(Tensor.schedule(x.conv2d(w, **kw)))

def test_wino2_takes_winograd_where_it_was_measured_faster():
  with Context(WINO=2):
    # 2^27 multiply-adds of the direct sum and more, on the CPU: Winograd's 7 kernels
    assert _kernels(Tensor.empty(16, 64, 16, 16), Tensor.empty(64, 64, 3, 3), padding=1) == 7
    assert _kernels(Tensor.empty(8, 256, 8, 8), Tensor.empty(256, 256, 3, 3), padding=1) == 7
    # under it (ResNet-18's convs at batch 8 over 64x64 images), 128 output pixels over the batch (the filter transform
    # outweighs the saving), 2x2 outputs (a quarter of each 4x4 tile), 8 channels a group, another device: the direct sum
    # (on the CPU's LLVM path, its padded input stored first: Tensor._padding_stored)
    direct = 2 if Device.DEFAULT.split(":")[0] == "CPU" and Device[Device.DEFAULT].llvm else 1
    assert _kernels(Tensor.empty(8, 64, 16, 16), Tensor.empty(64, 64, 3, 3), padding=1) == direct
    assert _kernels(Tensor.empty(8, 512, 4, 4), Tensor.empty(512, 512, 3, 3), padding=1) == direct
    assert _kernels(Tensor.empty(64, 512, 2, 2), Tensor.empty(512, 512, 3, 3), padding=1) == direct
    assert _kernels(Tensor.empty(32, 64, 32, 32), Tensor.empty(64, 8, 3, 3), padding=1, groups=8) == direct
    # 1-d and 3-d convolutions (not measured)
    assert _kernels(Tensor.empty(64, 256, 1024), Tensor.empty(256, 256, 3), padding=1) == direct
    assert _kernels(Tensor.empty(4, 64, 16, 16, 16), Tensor.empty(64, 64, 3, 3, 3), padding=1) == direct
    assert _kernels(Tensor.empty(16, 64, 16, 16, device="PYTHON"), Tensor.empty(64, 64, 3, 3, device="PYTHON"),
                    padding=1) == 1
  with Context(WINO=0):
    assert _kernels(Tensor.empty(16, 64, 16, 16), Tensor.empty(64, 64, 3, 3), padding=1) == direct

@pytest.mark.parametrize("dev", ["C", "LLVM", "PYTHON"])
def test_winograd_on_every_cpu_path_under_spec2(dev):
  """Forward and both gradients of a grouped, padded 2-D Winograd convolution against torch, under SPEC=2 on the C
  and LLVM paths and interpreted on PYTHON."""
  from tests.llvm_device import llvm_cpu_device, c_cpu_device
  device = {"C": c_cpu_device, "LLVM": llvm_cpu_device}.get(dev, lambda: "PYTHON")()
  x, w = rng.standard_normal((2, 4, 7, 9)).astype(np.float32), rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
  tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
  ref = torch.nn.functional.conv2d(tx, tw, padding=1, groups=2)
  up = rng.standard_normal(ref.shape).astype(np.float32)
  ref.backward(torch.tensor(up))
  with Context(WINO=1, SPEC=2):
    X, W = Tensor(x, device=device, requires_grad=True), Tensor(w, device=device, requires_grad=True)
    out = X.conv2d(W, padding=1, groups=2)
    (out * Tensor(up, device=device)).sum().backward()
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), atol=2e-4, rtol=1e-4)
    for ours, theirs in ((X, tx), (W, tw)):
      assert ours.grad is not None and theirs.grad is not None
      np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), atol=5e-4, rtol=1e-4)

def test_winograd_half_input_keeps_its_dtype():
  x, w = rng.standard_normal((1, 2, 6, 6)).astype(np.float16), rng.standard_normal((2, 2, 3, 3)).astype(np.float16)
  ref = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float32), torch.tensor(w, dtype=torch.float32)).numpy()
  with Context(WINO=1): out = Tensor(x).conv2d(Tensor(w))
  assert out.dtype is dtypes.float16
  np.testing.assert_allclose(out.numpy().astype(np.float32), ref, atol=1e-2, rtol=1e-2)

def test_nn_conv2d_zero_padding_reaches_winograd_unpadded():
  # nn.Conv2d passes its zero padding to conv2d (its other padding modes pad first): Winograd stores the input
  # channels-last unpadded and pads its tiles, and the input gradient (a Winograd conv of dy) is of the unpadded input.
  # Padded first, both were over 34x34 pixels for a 32x32 input (9 x 9 tiles, not 8 x 8)
  from tinygrad import nn
  conv = nn.Conv2d(4, 5, 3, padding=1, bias=False)
  x = Tensor.empty(2, 4, 32, 32, requires_grad=True)
  with Context(WINO=1):
    out = conv(x)
    out.sum().backward()
    assert x.grad is not None
    sizes = {b.size for si in Tensor.schedule(out, x.grad) for b in si.bufs}
  assert 2 * 4 * 32 * 32 in sizes and 2 * 4 * 34 * 34 not in sizes and 16 * 2 * 9 * 9 * 5 not in sizes, sorted(sizes)
  ref = torch.nn.Conv2d(4, 5, 3, padding=1, bias=False, padding_mode="reflect")
  ours = nn.Conv2d(4, 5, 3, padding=1, bias=False, padding_mode="reflect")
  ours.weight = Tensor(ref.weight.detach().numpy())
  xv = rng.standard_normal((1, 4, 7, 7)).astype(np.float32)
  with Context(WINO=1):
    np.testing.assert_allclose(ours(Tensor(xv)).numpy(), ref(torch.tensor(xv)).detach().numpy(), atol=2e-4, rtol=1e-4)
