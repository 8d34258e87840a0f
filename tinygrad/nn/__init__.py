"""Layers: Linear, Conv2d, Embedding, LayerNorm, BatchNorm (running statistics in eval, batch statistics in training).
Parameters are plain Tensors held as attributes, so `nn.state.get_parameters(model)` finds them."""
from __future__ import annotations
import math
from tinygrad.tensor import Tensor
from tinygrad.helpers import prod, make_tuple
from tinygrad.nn import optim, state  # noqa: F401

class Linear:
  """y = x @ weight.T + bias; weight (out_features, in_features) and bias start uniform in +-1/sqrt(in_features)."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    bound = 1 / math.sqrt(in_features)
    self.weight = Tensor.uniform(out_features, in_features, low=-bound, high=bound, requires_grad=True)
    self.bias = Tensor.uniform(out_features, low=-bound, high=bound, requires_grad=True) if bias else None
  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.weight.T, self.bias)

class Conv2d:
  """2-d convolution over (N, C, H, W); weight (out_channels, in_channels/groups, kh, kw)."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: int = 1,
               padding: int | tuple[int, ...] = 0, dilation: int = 1, groups: int = 1, bias: bool = True):
    self.kernel_size = make_tuple(kernel_size, 2)
    self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
    bound = 1 / math.sqrt(in_channels // groups * prod(self.kernel_size))
    wshape = (out_channels, in_channels // groups, *self.kernel_size)
    self.weight = Tensor.uniform(*wshape, low=-bound, high=bound, requires_grad=True)
    self.bias = Tensor.uniform(out_channels, low=-bound, high=bound, requires_grad=True) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                    padding=self.padding)

class Embedding:
  """Rows of a (vocab_size, embed_size) table picked by integer indices."""
  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_sz, self.embed_sz = vocab_size, embed_size
    bound = math.sqrt(6 / (vocab_size + embed_size))
    self.weight = Tensor.uniform(vocab_size, embed_size, low=-bound, high=bound, requires_grad=True)
  def __call__(self, idx: Tensor) -> Tensor: return idx.embedding(self.weight)

class LayerNorm:
  """Normalise over the last len(normalized_shape) axes, then scale and shift (if elementwise_affine)."""
  def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True):
    self.normalized_shape = make_tuple(normalized_shape, 1)
    self.axis, self.eps = tuple(-1 - i for i in range(len(self.normalized_shape))), eps
    self.weight = Tensor.ones(*self.normalized_shape, requires_grad=True) if elementwise_affine else None
    self.bias = Tensor.zeros(*self.normalized_shape, requires_grad=True) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.shape[-len(self.normalized_shape):] != self.normalized_shape:
      raise ValueError(f"LayerNorm: last axes of input {x.shape} must be {self.normalized_shape}")
    x = x.layernorm(axis=self.axis, eps=self.eps)
    return x if self.weight is None or self.bias is None else x * self.weight + self.bias

class BatchNorm:
  """Batch normalisation over axis 1. In eval (Tensor.training False) it uses the running statistics; in training it
  uses the batch statistics and updates the running ones."""
  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True,
               momentum: float = 0.1):
    self.eps, self.momentum, self.track_running_stats = eps, momentum, track_running_stats
    self.weight = Tensor.ones(sz, requires_grad=True) if affine else None
    self.bias = Tensor.zeros(sz, requires_grad=True) if affine else None
    # NOTE: buffers from the start, so a training step's update is an ASSIGN (run by the optimizer's step) rather than
    # a lazy graph that grows by one step per batch
    self.running_mean = Tensor.zeros(sz, requires_grad=False).contiguous().realize()
    self.running_var = Tensor.ones(sz, requires_grad=False).contiguous().realize()
    self.num_batches_tracked = Tensor.zeros(1, requires_grad=False)
  def __call__(self, x: Tensor) -> Tensor:
    axes = tuple(i for i in range(x.ndim) if i != 1)
    if Tensor.training:
      mean = x.mean(axes)
      var = (x - mean.reshape(1, -1, *([1] * (x.ndim - 2)))).square().mean(axes)
      if self.track_running_stats:
        n = prod(x.shape[i] for i in axes)
        self.running_mean.assign(self.running_mean * (1 - self.momentum) + mean.detach() * self.momentum)
        unbiased = var.detach() * (n / max(n - 1, 1))
        self.running_var.assign(self.running_var * (1 - self.momentum) + unbiased * self.momentum)
      return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())
    return x.batchnorm(self.weight, self.bias, self.running_mean, (self.running_var + self.eps).rsqrt())

BatchNorm2d = BatchNorm

__all__ = ["Linear", "Conv2d", "Embedding", "LayerNorm", "BatchNorm", "BatchNorm2d", "optim", "state"]
