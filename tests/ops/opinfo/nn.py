"""OpInfo adapters for torch.nn.functional (convolutions, pooling, resizing, attention, embedding, normalisations,
losses, dropout): see driver.py. Where our API is a layer (the normalisations), the adapter builds tinygrad.nn's layer
and sets its parameters and running statistics to the sample's tensors."""
from __future__ import annotations
from typing import Any
import torch
from tinygrad import Tensor, nn
from tinygrad.helpers import flatten, make_tuple
from tests.ops.opinfo.driver import Adapter

FLOATS = (torch.float32, torch.float16)

def _kw(s: Any, *names: str) -> list[str]:
  return [n for n in names if s.kwargs.get(n) is not None and s.kwargs.get(n) is not False]

def _torch_only(*names: str) -> Any:
  """skip: a sample giving one of torch's keywords that our API does not have."""
  def skip(s: Any) -> str | None:
    return f"torch-only keyword {used[0]}" if (used := _kw(s, *names)) else None
  return skip

# ---- convolutions ----

def _conv_padding(padding: Any, weight: Tensor, stride: Any, dilation: Any, name: str) -> Any:
  """torch's padding (an int, one per axis, 'valid' or 'same') as Tensor.conv2d's: 'same' and 'valid' become the 2n
  flat form (last axis first, as torch's F.pad), from the rule tinygrad.nn's Conv layers use."""
  if not isinstance(padding, str): return padding
  k_ = weight.shape[2:]
  n = len(k_)
  pairs = nn._conv_pads(padding, k_, tuple(make_tuple(stride, n)), tuple(make_tuple(dilation, n)), name)
  return flatten(pairs[::-1])

def _conv(nsp: int) -> Any:
  name = f"conv{nsp}d"
  def conv(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Tensor:
    # NOTE: torch takes an unbatched (C, *spatial) input; Tensor.conv2d wants the batch axis
    unbatched = x.ndim == nsp + 1
    xb = x.unsqueeze(0) if unbatched else x
    out = xb.conv2d(weight, bias, groups=groups, stride=stride, dilation=dilation,
                    padding=_conv_padding(padding, weight, stride, dilation, name))
    return out.squeeze(0) if unbatched else out
  conv.__name__ = name
  return conv

def _conv_transpose(nsp: int) -> Any:
  def conv_transpose(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    unbatched = x.ndim == nsp + 1
    xb = x.unsqueeze(0) if unbatched else x
    out = xb.conv_transpose2d(weight, bias, groups=groups, stride=stride, dilation=dilation, padding=padding,
                              output_padding=output_padding)
    return out.squeeze(0) if unbatched else out
  conv_transpose.__name__ = f"conv_transpose{nsp}d"
  return conv_transpose

def _half_in_float32(fn: Any) -> Any:
  """torch's op on float16 tensors computed in float32 and rounded once: the reference for an op whose CPU float16
  kernel rounds partial sums (torch's conv_transpose is off by up to 0.03 from the float64 result where a bias
  cancels the sum; ours stays within 0.002)."""
  def ref(*args: Any, **kw: Any) -> Any:
    half = any(isinstance(a, torch.Tensor) and a.dtype == torch.float16 for a in (*args, *kw.values()))
    up = lambda a: a.float() if isinstance(a, torch.Tensor) and a.dtype == torch.float16 else a  # noqa: E731
    out = fn(*[up(a) for a in args], **{k: up(v) for k, v in kw.items()})
    return out.half() if half else out
  return ref

# ---- pooling ----

def _ktuple(kernel_size: Any, nsp: int) -> tuple[int, ...]:
  return (kernel_size,) * nsp if isinstance(kernel_size, int) else tuple(kernel_size)

def _avg_pool(nsp: int) -> Any:
  def avg_pool(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    return x.avg_pool2d(_ktuple(kernel_size, nsp), stride, padding, ceil_mode, count_include_pad, divisor_override)
  return avg_pool

def _max_pool(nsp: int) -> Any:
  def max_pool(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    return x.max_pool2d(_ktuple(kernel_size, nsp), stride=stride, dilation=dilation, padding=padding,
                        ceil_mode=ceil_mode, return_indices=return_indices)
  return max_pool

def _max_unpool(nsp: int) -> Any:
  def max_unpool(x: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    return x.max_unpool2d(indices, _ktuple(kernel_size, nsp), stride, padding, output_size)
  return max_unpool

# ---- attention, embedding, dropout ----

def _sdpa_skip(s: Any) -> str | None:
  return "dropout_p > 0 is random" if s.kwargs.get("dropout_p", 0.0) > 0 else None

def embedding(weight: Tensor, idx: Tensor, padding_idx: int | None = None, **kw: Any) -> Tensor:
  """torch's OpInfo calls embedding(weight, idx); a padding_idx is tinygrad.nn.Embedding's."""
  if padding_idx is None: return idx.embedding(weight)
  layer = nn.Embedding(*weight.shape, padding_idx=padding_idx)
  layer.weight = weight
  return layer(idx)

def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
  with Tensor.train(training): return x.dropout(p)

def _dropout_skip(s: Any) -> str | None:
  p, training = s.kwargs.get("p", 0.5), s.kwargs.get("training", True)
  return "dropout with 0 < p < 1 in training is random" if training and 0 < p < 1 else None

# ---- normalisations (tinygrad.nn layers) ----

def layer_norm(x: Tensor, normalized_shape: Any, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
  layer = nn.LayerNorm(normalized_shape, eps=eps)
  layer.weight, layer.bias = weight, bias
  return layer(x)

def rms_norm(x: Tensor, normalized_shape: Any, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
  layer = nn.RMSNorm(normalized_shape, eps=eps)
  layer.weight = weight
  return layer(x)

def group_norm(x: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
  layer = nn.GroupNorm(num_groups, x.shape[1], eps=eps)
  layer.weight, layer.bias = weight, bias
  return layer(x)

def _batch_norm_skip(s: Any) -> str | None:
  return "1-d input: torch counts it as 0 channels (only an empty one works); BatchNorm takes (N, C, ...)" \
    if s.input.ndim < 2 else None

def batch_norm(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
  layer = nn.BatchNorm(x.shape[1] if x.ndim > 1 else 0, eps=eps, momentum=momentum,
                       track_running_stats=running_mean is not None)
  layer.weight, layer.bias = weight, bias
  if running_mean is not None: layer.running_mean, layer.running_var = running_mean, running_var
  with Tensor.train(training): return layer(x)

def instance_norm(x: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
  layer = nn.InstanceNorm(x.shape[1], eps=eps, momentum=momentum, track_running_stats=running_mean is not None)
  layer.weight, layer.bias = weight, bias
  if running_mean is not None: layer.running_mean, layer.running_var = running_mean, running_var
  # NOTE: use_input_stats is the layer's training mode (torch's functional updates the running stats only then too)
  with Tensor.train(use_input_stats): return layer(x)

# ---- losses ----

def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
  """torch's weight is (out, in); ours is (in, out), as tinygrad.nn.Linear passes it."""
  return x.linear(weight.T, bias)

def cross_entropy(x: Tensor, y: Tensor, weight: Tensor | None = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
  return x.cross_entropy(y, reduction=reduction, label_smoothing=label_smoothing, ignore_index=ignore_index,
                         weight=weight)

def nll_loss(x: Tensor, y: Tensor, weight: Tensor | None = None, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
  return x.nll_loss(y, weight=weight, ignore_index=ignore_index, reduction=reduction)

def binary_cross_entropy(x: Tensor, y: Tensor, reduction: str = "mean") -> Tensor:
  return x.binary_crossentropy(y, reduction=reduction)

def binary_cross_entropy_with_logits(x: Tensor, y: Tensor, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
  return x.binary_crossentropy_logits(y, reduction=reduction, pos_weight=pos_weight)

def _interp(mode: str) -> Any:
  def interpolate(x: Tensor, size: Any = None, scale_factor: Any = None, mode: str = mode, align_corners: Any = None,
                  recompute_scale_factor: Any = None) -> Tensor:
    return x.interpolate(size, scale_factor, mode, align_corners, recompute_scale_factor)
  return interpolate

ADAPTERS: dict[str, Adapter] = {
  "nn.functional.conv1d": Adapter(_conv(1), dtypes=FLOATS),
  "nn.functional.conv2d": Adapter(_conv(2), dtypes=FLOATS, samples=15),
  "nn.functional.conv3d": Adapter(_conv(3), dtypes=FLOATS),
  "nn.functional.conv_transpose1d": Adapter(_conv_transpose(1), dtypes=FLOATS,
                                            torch_fn=_half_in_float32(torch.nn.functional.conv_transpose1d)),
  "nn.functional.conv_transpose2d": Adapter(_conv_transpose(2), dtypes=FLOATS,
                                            torch_fn=_half_in_float32(torch.nn.functional.conv_transpose2d)),
  "nn.functional.conv_transpose3d": Adapter(_conv_transpose(3), dtypes=FLOATS,
                                            torch_fn=_half_in_float32(torch.nn.functional.conv_transpose3d)),
  "nn.functional.avg_pool1d": Adapter(_avg_pool(1)),
  "nn.functional.avg_pool2d": Adapter(_avg_pool(2)),
  "nn.functional.avg_pool3d": Adapter(_avg_pool(3)),
  "nn.functional.max_pool1d": Adapter(_max_pool(1), samples=16),
  "nn.functional.max_pool2d": Adapter(_max_pool(2), samples=20),
  "nn.functional.max_pool3d": Adapter(_max_pool(3), samples=12),
  "nn.functional.max_unpool1d": Adapter(_max_unpool(1), samples=10),
  "nn.functional.max_unpool2d": Adapter(_max_unpool(2), samples=12),
  "nn.functional.max_unpool3d": Adapter(_max_unpool(3), samples=8),
  "nn.functional.max_unpool1d.grad": Adapter(_max_unpool(1)),
  "nn.functional.max_unpool2d.grad": Adapter(_max_unpool(2), samples=12),
  "nn.functional.max_unpool3d.grad": Adapter(_max_unpool(3), samples=8),
  "nn.functional.interpolate.nearest": Adapter(_interp("nearest"), samples=12),
  "nn.functional.interpolate.nearest-exact": Adapter(_interp("nearest-exact"), samples=12),
  "nn.functional.interpolate.linear": Adapter(_interp("linear"), samples=12),
  "nn.functional.interpolate.bilinear": Adapter(_interp("bilinear"), samples=12),
  "nn.functional.interpolate.trilinear": Adapter(_interp("trilinear"), samples=8),
  # NOTE: torch's deprecated aliases of interpolate (upsample_bilinear always aligns corners)
  "nn.functional.upsample_nearest": Adapter(lambda x, size=None, scale_factor=None: x.interpolate(size, scale_factor),
                                            samples=12),
  "nn.functional.upsample_bilinear": Adapter(
    lambda x, size=None, scale_factor=None: x.interpolate(size, scale_factor, "bilinear", align_corners=True),
    samples=12),
  "nn.functional.scaled_dot_product_attention": Adapter(Tensor.scaled_dot_product_attention, skip=_sdpa_skip),
  "nn.functional.embedding": Adapter(embedding, skip=_torch_only("max_norm", "scale_grad_by_freq", "sparse")),
  "nn.functional.one_hot": Adapter(lambda x, num_classes=-1: x.one_hot(num_classes),
                                   dtypes=(torch.int64, torch.int32)),
  "nn.functional.layer_norm": Adapter(layer_norm),
  "nn.functional.rms_norm": Adapter(rms_norm),
  "nn.functional.group_norm": Adapter(group_norm),
  "nn.functional.batch_norm": Adapter(batch_norm, skip=_batch_norm_skip),
  "nn.functional.instance_norm": Adapter(instance_norm),
  "nn.functional.linear": Adapter(linear),
  "nn.functional.dropout": Adapter(dropout, skip=_dropout_skip),
  "nn.functional.cross_entropy": Adapter(cross_entropy, skip=_torch_only("size_average", "reduce")),
  "nn.functional.nll_loss": Adapter(nll_loss, skip=_torch_only("size_average", "reduce"), samples=24),
  "nn.functional.binary_cross_entropy": Adapter(binary_cross_entropy, skip=_torch_only("weight")),
  "nn.functional.binary_cross_entropy_with_logits": Adapter(binary_cross_entropy_with_logits,
                                                            skip=_torch_only("weight")),
}
