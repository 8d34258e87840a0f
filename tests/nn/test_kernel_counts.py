"""Kernel counts of layer forwards (GlobalCounters.kernel_count after the parameters and inputs are realized): what a
layer costs is part of its contract. A lookup, a matmul with bias, a convolution (also transposed) and an eval-mode
BatchNorm are each one fused kernel; norms that need a mean and a variance are a kernel per reduction plus one."""
import numpy as np
import pytest
from tinygrad import Tensor, nn
from tinygrad.helpers import GlobalCounters
from tinygrad.nn.state import get_parameters

def _kernels(layer, *xs):
  for p in get_parameters(layer): p.realize()
  for x in xs: x.realize()
  out = layer(*xs)
  GlobalCounters.reset()
  out.realize()
  return GlobalCounters.kernel_count

X4 = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)

@pytest.mark.parametrize("name,layer,x,n", [
  ("embedding", nn.Embedding(10, 4), Tensor(np.array([[1, 2, 3], [0, 0, 9]], np.int32)), 1),
  ("embedding_large_vocab", nn.Embedding(3000, 4), Tensor(np.array([[1, 2999]], np.int32)), 1),
  ("linear", nn.Linear(8, 5), Tensor(np.ones((4, 8), np.float32)), 1),
  ("conv2d_same", nn.Conv2d(3, 4, 3, padding="same"), Tensor(X4), 1),
  # NOTE: by phases (Tensor._conv_transpose_by_phase): 4 stride-1 convs and the copy that interleaves them
  ("conv_transpose2d", nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), Tensor(X4), 5),
  ("batchnorm_eval", nn.BatchNorm2d(3), Tensor(X4), 1),
  ("rmsnorm", nn.RMSNorm(6), Tensor(X4), 2),
  ("layernorm", nn.LayerNorm(6), Tensor(X4), 3),
])
def test_layer_forward_kernel_count(name, layer, x, n):
  with Tensor.test():
    assert _kernels(layer, x) == n, f"{name}"
