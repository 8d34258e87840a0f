"""Layers with torch's names, parameter names, shapes and default initialisations, so a torch state dict loads into them
and they compute what torch's layer of the same name computes:

  Linear, Embedding, Conv1d/2d/3d, ConvTranspose1d/2d/3d, BatchNorm (any rank; BatchNorm1d/2d/3d check it),
  LayerNorm, LayerNorm2d, GroupNorm, InstanceNorm (any rank; InstanceNorm1d/2d/3d), RMSNorm, LSTMCell, LSTM,
  MultiheadAttention, Sequential, Dropout, Identity, Flatten, and the activations as modules (ReLU, GELU, SiLU, Tanh,
  Sigmoid, ...).

Parameters are plain Tensors held as attributes (`requires_grad=True`), so `nn.state.get_parameters(model)` finds
them. Normalisations compute their statistics in float32 and give back the input's dtype. BatchNorm and dropout follow
`Tensor.training` (see Tensor.train() / Tensor.test())."""
from __future__ import annotations
import math
from typing import Any, Callable, Iterator, Sequence, Union
from tinygrad.tensor import Tensor, ArgumentError, ShapeMismatchError
from tinygrad.dtype import DType, dtypes
from tinygrad.uop import Ops
from tinygrad.helpers import prod, make_tuple
from tinygrad.nn import optim, state, lr_scheduler  # noqa: F401

IntOrSeq = Union[int, Sequence[int]]

def _uniform(*shape: int, bound: float) -> Tensor:
  return Tensor.uniform(*shape, low=-bound, high=bound, requires_grad=True)

def _buffer(t: Tensor) -> Tensor:
  """A realized tensor that is state, not a parameter (requires_grad False: optimizers skip it)."""
  ret = t.contiguous().realize()
  ret.requires_grad = False
  return ret

def _stat_dtype(x: Tensor) -> DType:
  # NOTE: statistics of half/bfloat16 inputs in float32, as torch does on the CPU (its "opmath" type)
  return dtypes.float64 if x.dtype is dtypes.float64 else dtypes.float32

def _channel_shape(ndim: int, axis: int = 1) -> tuple[int, ...]:
  return tuple(-1 if k == axis else 1 for k in range(ndim))

# ---- Linear, Embedding ----

class Linear:
  """y = x @ weight.T + bias; weight (out_features, in_features). torch's initialisation: weight and bias uniform in
  +-1/sqrt(in_features) (kaiming_uniform with a=sqrt(5))."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    self.in_features, self.out_features = in_features, out_features
    bound = 1 / math.sqrt(in_features) if in_features else 0.0
    self.weight = _uniform(out_features, in_features, bound=bound)
    self.bias = _uniform(out_features, bound=bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    if not x.shape or x.shape[-1] != self.in_features:
      raise ArgumentError(f"Linear({self.in_features}, {self.out_features}): the last axis of the input {x.shape} "
                          "must be "
                          f"{self.in_features}")
    return x.linear(self.weight.T, self.bias)

class Embedding:
  """Rows of a (vocab_size, embed_size) table picked by integer indices (one kernel, which loads each index's row:
  Tensor.embedding). torch's initialisation: N(0, 1). With padding_idx that row starts at zero and gets no gradient.
  An index outside [0, vocab_size) gives a row of zeros (it cannot be checked without reading the indices on the
  host)."""
  def __init__(self, vocab_size: int, embed_size: int, padding_idx: int | None = None):
    self.vocab_sz, self.embed_sz = vocab_size, embed_size
    if padding_idx is not None:
      if not -vocab_size <= padding_idx < vocab_size:
        raise ArgumentError(f"Embedding({vocab_size}, {embed_size}): padding_idx {padding_idx} is out of range")
      padding_idx %= vocab_size
    self.padding_idx = padding_idx
    w = Tensor.randn(vocab_size, embed_size)
    if padding_idx is not None: w = (Tensor.arange(vocab_size).reshape(-1, 1) == padding_idx).where(0.0, w)
    self.weight = Tensor(w.uop, requires_grad=True)
  def __call__(self, idx: Tensor) -> Tensor:
    w = self.weight
    if self.padding_idx is not None:
      # NOTE: the same values, but the padding row reads a detached copy, so no gradient reaches it (as torch)
      w = (Tensor.arange(self.vocab_sz, device=w.device).reshape(-1, 1) == self.padding_idx).where(w.detach(), w)
    return idx.embedding(w)

# ---- convolutions ----

def _conv_pads(padding: int | Sequence[int] | str, kernel: tuple[int, ...], stride: tuple[int, ...],
               dilation: tuple[int, ...], name: str) -> list[tuple[int, int]]:
  """(before, after) per spatial axis for an int, a tuple of ints, 'valid' or 'same' (torch's rule: the odd element
  of a 'same' padding goes after)."""
  n = len(kernel)
  if isinstance(padding, str):
    if padding == "valid": return [(0, 0)] * n
    if padding != "same": raise ArgumentError(f"{name}: invalid padding string {padding!r}, should be 'valid' or "
                                              "'same'")
    if any(s != 1 for s in stride):
      raise ArgumentError(f"{name}: padding='same' is not supported for strided convolutions (stride {stride}); "
                          "give the "
                          "padding as numbers")
    return [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation)]
  pads = make_tuple(padding, n)
  if len(pads) != n: raise ArgumentError(f"{name}: padding {padding} needs {n} values, one per spatial axis")
  return [(p, p) for p in pads]

# torch's padding_mode -> Tensor.pad's mode
_PAD_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}

class _ConvNd:
  nsp = 2
  def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrSeq, stride: IntOrSeq = 1,
               padding: IntOrSeq | str = 0, dilation: IntOrSeq = 1, groups: int = 1,
               bias: bool = True, padding_mode: str = "zeros"):
    self._setup(in_channels, out_channels, kernel_size, stride, dilation, groups, padding_mode)
    self.padding = padding
    self._pads = _conv_pads(padding, self.kernel_size, self.stride, self.dilation, type(self).__name__)
    bound = 1 / math.sqrt(in_channels // groups * prod(self.kernel_size))
    self.weight = _uniform(out_channels, in_channels // groups, *self.kernel_size, bound=bound)
    self.bias = _uniform(out_channels, bound=bound) if bias else None
  def _setup(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int], stride: int | Sequence[int],
             dilation: int | Sequence[int], groups: int, padding_mode: str) -> None:
    name = type(self).__name__
    if groups <= 0 or in_channels % groups or out_channels % groups:
      raise ArgumentError(f"{name}: in_channels {in_channels} and out_channels {out_channels} must divide by groups "
                          f"{groups}")
    if padding_mode not in _PAD_MODES:
      raise ArgumentError(f"{name}: padding_mode must be one of {sorted(_PAD_MODES)}, got {padding_mode!r}")
    self.padding_mode = padding_mode
    self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
    self.kernel_size = self._tuple(kernel_size, "kernel_size")
    self.stride, self.dilation = self._tuple(stride, "stride"), self._tuple(dilation, "dilation")
  def _tuple(self, v: int | Sequence[int], what: str) -> tuple[int, ...]:
    t = make_tuple(v, self.nsp)
    if len(t) != self.nsp or any(x <= 0 for x in t):
      raise ArgumentError(f"{type(self).__name__}: {what} {v} must be a positive int or {self.nsp} positive ints")
    return t
  def _batched(self, x: Tensor) -> tuple[Tensor, bool]:
    # NOTE: torch also takes an unbatched input (C, *spatial)
    if x.ndim == self.nsp + 1: return x.unsqueeze(0), True
    if x.ndim != self.nsp + 2:
      raise ArgumentError(f"{type(self).__name__}: expected a {self.nsp + 2}-d (N, C, *spatial) or {self.nsp + 1}-d "
                          f"input, got shape {x.shape}")
    return x, False
  def __call__(self, x: Tensor) -> Tensor:
    x, unbatched = self._batched(x)
    # NOTE: zeros go to conv2d as its padding (torch's flat order, last axis first): Winograd's F(4, 3) (WINO) then
    # stores the unpadded input channels-last and pads its tiles, and its input gradient is of the unpadded input
    flat = [v for b, a in reversed(self._pads) for v in (b, a)]
    if self.padding_mode != "zeros":
      x, flat = x.pad([(0, 0), (0, 0), *self._pads], mode=_PAD_MODES[self.padding_mode]), [0] * (2 * self.nsp)
    out = x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=flat)
    return out.squeeze(0) if unbatched else out

class Conv1d(_ConvNd):
  """1-d convolution over (N, C, L); weight (out_channels, in_channels/groups, k). padding: int, 'valid' or 'same'."""
  nsp = 1
class Conv2d(_ConvNd):
  """2-d convolution over (N, C, H, W); weight (out_channels, in_channels/groups, kh, kw)."""
  nsp = 2
class Conv3d(_ConvNd):
  """3-d convolution over (N, C, D, H, W); weight (out_channels, in_channels/groups, kd, kh, kw)."""
  nsp = 3

class _ConvTransposeNd(_ConvNd):
  def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrSeq, stride: IntOrSeq = 1,
               padding: IntOrSeq = 0, output_padding: IntOrSeq = 0, groups: int = 1, bias: bool = True,
               dilation: IntOrSeq = 1, padding_mode: str = "zeros"):
    name = type(self).__name__
    if isinstance(padding, str): raise ArgumentError(f"{name}: padding must be numbers, got {padding!r}")
    if padding_mode != "zeros": raise ArgumentError(f"{name}: only padding_mode 'zeros' is supported (as torch)")
    self._setup(in_channels, out_channels, kernel_size, stride, dilation, groups, padding_mode)
    self.padding = padding
    self.padding_t = make_tuple(padding, self.nsp)
    if len(self.padding_t) != self.nsp or any(p < 0 for p in self.padding_t):
      raise ArgumentError(f"{name}: padding {padding} must be a non-negative int or {self.nsp} of them")
    self.output_padding = make_tuple(output_padding, self.nsp)
    if len(self.output_padding) != self.nsp or any(not 0 <= o < max(s, d) for o, s, d in
                                                  zip(self.output_padding, self.stride, self.dilation)):
      raise ArgumentError(f"{name}: output_padding {output_padding} must be >= 0 and smaller than stride "
                          f"{self.stride} or "
                          f"dilation {self.dilation}")
    # NOTE: weight (in_channels, out_channels/groups, *k); torch takes the fan-in from its second axis
    bound = 1 / math.sqrt(out_channels // groups * prod(self.kernel_size))
    self.weight = _uniform(in_channels, out_channels // groups, *self.kernel_size, bound=bound)
    self.bias = _uniform(out_channels, bound=bound) if bias else None
  def _output_padding(self, x: Tensor, output_size: Sequence[int] | None) -> tuple[int, ...]:
    if output_size is None: return self.output_padding
    size = tuple(output_size)[-self.nsp:]
    ins = x.int_shape(type(self).__name__)[-self.nsp:]
    base = [(i - 1) * s - 2 * p + d * (k - 1) + 1 for i, s, p, d, k in
            zip(ins, self.stride, self.padding_t, self.dilation, self.kernel_size)]
    ops = tuple(o - b for o, b in zip(size, base))
    if len(size) != self.nsp or any(not 0 <= o < max(s, d) for o, s, d in zip(ops, self.stride, self.dilation)):
      raise ArgumentError(f"{type(self).__name__}: output_size {tuple(output_size)} is not reachable from input "
                          f"{x.shape}: each spatial size must be base + output_padding with base {tuple(base)} and "
                          f"output_padding below stride {self.stride} or dilation {self.dilation}")
    return ops
  def __call__(self, x: Tensor, output_size: Sequence[int] | None = None) -> Tensor:  # type: ignore[override]
    x, unbatched = self._batched(x)
    if x.shape[1] != self.in_channels:
      raise ArgumentError(f"{type(self).__name__}: input {x.shape} has {x.shape[1]} channels, the layer takes "
                          f"{self.in_channels}")
    out = x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                             padding=self.padding_t, output_padding=self._output_padding(x, output_size))
    return out.squeeze(0) if unbatched else out

class ConvTranspose1d(_ConvTransposeNd):
  """Transposed 1-d convolution; weight (in_channels, out_channels/groups, k)."""
  nsp = 1
class ConvTranspose2d(_ConvTransposeNd):
  """Transposed 2-d convolution; weight (in_channels, out_channels/groups, kh, kw)."""
  nsp = 2
class ConvTranspose3d(_ConvTransposeNd):
  """Transposed 3-d convolution; weight (in_channels, out_channels/groups, kd, kh, kw)."""
  nsp = 3

# ---- normalisations ----

class _RunningStats:
  """running_mean, running_var and num_batches_tracked as buffers (so a training step's update is an ASSIGN, realized
  with the optimizer step or by TinyJit, not a lazy graph that grows by one step per batch)."""
  def _init_stats(self, num_features: int, momentum: float | None, track_running_stats: bool) -> None:
    self.momentum, self.track_running_stats = momentum, track_running_stats
    self.running_mean: Tensor | None = None
    self.running_var: Tensor | None = None
    self.num_batches_tracked: Tensor | None = None
    if track_running_stats:
      # NOTE: requires_grad=False: not parameters, so an optimizer given get_parameters(model) leaves them alone
      self.running_mean = _buffer(Tensor.zeros(num_features))
      self.running_var = _buffer(Tensor.ones(num_features))
      self.num_batches_tracked = _buffer(Tensor.zeros((), dtype=dtypes.int64))
  def _update_stats(self, mean: Tensor, var_unbiased: Tensor) -> None:
    """running = (1 - f) * running + f * batch, f = momentum, or 1/num_batches_tracked when momentum is None (a
    cumulative average, as torch)."""
    assert self.running_mean is not None and self.running_var is not None and self.num_batches_tracked is not None
    stats = (self.running_mean, self.running_var, self.num_batches_tracked)
    # NOTE: an update still queued from an earlier forward (no optimizer step between) lands first: chained assigns
    # would grow the graph by one batch per call, and the statistics read num_batches_tracked as it stands after each
    # update
    if any(t.uop.op is Ops.ASSIGN for t in stats): Tensor.realize(*stats)
    nbt = self.num_batches_tracked + 1
    f = nbt.cast(dtypes.float32).reciprocal() if self.momentum is None else self.momentum
    rm, rv = self.running_mean, self.running_var
    rm.assign(rm * (1 - f) + mean.detach().cast(rm.dtype) * f)
    rv.assign(rv * (1 - f) + var_unbiased.detach().cast(rv.dtype) * f)
    self.num_batches_tracked.assign(nbt)

class BatchNorm(_RunningStats):
  """Batch normalisation over axis 1 of (N, C, *any): in training (or without running statistics) the batch's mean
  and biased variance over every axis but 1; in eval the running ones. Training with running statistics also updates
  them (unbiased variance) and counts num_batches_tracked."""
  ranks: tuple[int, ...] = ()
  def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
               track_running_stats: bool = True):
    self.num_features, self.eps = num_features, eps
    self.weight = Tensor.ones(num_features, requires_grad=True) if affine else None
    self.bias = Tensor.zeros(num_features, requires_grad=True) if affine else None
    self._init_stats(num_features, momentum, track_running_stats)
  def __call__(self, x: Tensor) -> Tensor:
    name = type(self).__name__
    if self.ranks and x.ndim not in self.ranks:
      raise ArgumentError(f"{name}: expected a {' or '.join(f'{r}-d' for r in self.ranks)} input, got shape {x.shape}")
    if x.ndim < 2 or x.shape[1] != self.num_features:
      raise ArgumentError(f"{name}({self.num_features}): input {x.shape} must be (N, {self.num_features}, ...)")
    axes = tuple(k for k in range(x.ndim) if k != 1)
    n = prod(x.shape[k] for k in axes)
    xf = x.cast(_stat_dtype(x))
    if Tensor.training or self.running_mean is None or self.running_var is None:
      if Tensor.training and n <= 1:
        raise ArgumentError(f"{name}: expected more than 1 value per channel when training, got input {x.shape}")
      mean = xf.mean(axes)
      var = (xf - mean.reshape(_channel_shape(x.ndim))).square().mean(axes)
      if Tensor.training and self.running_mean is not None: self._update_stats(mean, var * (n / max(n - 1, 1)))
    else: mean, var = self.running_mean, self.running_var
    out = xf.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())
    return out.cast(x.dtype)

class UnsyncedBatchNorm(BatchNorm):
  """BatchNorm for a batch split over num_devices devices (axis 0, as `x.shard(devices, 0)` splits it) where each
  device normalises its part with the statistics of its part alone: nothing crosses devices (BatchNorm itself, on a
  split batch, is synchronised: its batch mean over the split axis is an allreduce). The batch must divide evenly.
  running_mean and running_var are (num_devices, C), row i the statistics of device i's part (shard them on axis 0 so
  each device keeps its own row); weight and bias are shared (shard them replicated)."""
  def __init__(self, num_features: int, num_devices: int, eps: float = 1e-5, momentum: float | None = 0.1,
               affine: bool = True, track_running_stats: bool = True):
    if not isinstance(num_devices, int) or num_devices < 1:
      raise ArgumentError(f"UnsyncedBatchNorm: num_devices must be an int >= 1, got {num_devices!r}")
    super().__init__(num_features, eps, momentum, affine, track_running_stats)
    self.num_devices = num_devices
    if track_running_stats:
      self.running_mean = _buffer(Tensor.zeros(num_devices, num_features))
      self.running_var = _buffer(Tensor.ones(num_devices, num_features))
  def __call__(self, x: Tensor) -> Tensor:
    nd, name = self.num_devices, type(self).__name__
    if x.ndim < 2 or x.shape[1] != self.num_features:
      raise ArgumentError(f"{name}({self.num_features}): input {x.shape} must be (N, {self.num_features}, ...)")
    if x.shape[0] % nd: raise ArgumentError(f"{name}: a batch of {x.shape[0]} does not split evenly over {nd} devices")
    # NOTE: (devices, batch per device, C, ...): on a batch split over the devices, row i is device i's own part
    xg = x.cast(_stat_dtype(x)).reshape(nd, x.shape[0] // nd, *x.shape[1:])
    axes = tuple(k for k in range(xg.ndim) if k not in (0, 2))
    n = prod(xg.shape[k] for k in axes)
    stat_shape = (nd, 1, self.num_features) + (1,) * (x.ndim - 2)
    if Tensor.training or self.running_mean is None or self.running_var is None:
      if Tensor.training and n <= 1:
        raise ArgumentError(f"{name}: expected more than 1 value per channel and device when training, got {x.shape}")
      mean = xg.mean(axes)
      var = (xg - mean.reshape(stat_shape)).square().mean(axes)
      if Tensor.training and self.running_mean is not None: self._update_stats(mean, var * (n / max(n - 1, 1)))
    else: mean, var = self.running_mean, self.running_var
    out = (xg - mean.reshape(stat_shape)) * (var + self.eps).rsqrt().reshape(stat_shape)
    if self.weight is not None: out = out * self.weight.reshape(_channel_shape(xg.ndim, 2))
    if self.bias is not None: out = out + self.bias.reshape(_channel_shape(xg.ndim, 2))
    return out.reshape(x.shape).cast(x.dtype)

class BatchNorm1d(BatchNorm):
  """BatchNorm over (N, C) or (N, C, L)."""
  ranks = (2, 3)
class BatchNorm2d(BatchNorm):
  """BatchNorm over (N, C, H, W)."""
  ranks = (4,)
class BatchNorm3d(BatchNorm):
  """BatchNorm over (N, C, D, H, W)."""
  ranks = (5,)

class InstanceNorm(_RunningStats):
  """Each (sample, channel) normalised over its spatial axes (axes 2...), any number of them. The 1d/2d/3d classes
  have torch's defaults (no affine parameters, no running statistics) and take unbatched inputs too; this generic one
  has affine parameters by default. With track_running_stats the running ones (the batch mean of the per-instance
  statistics) serve in eval."""
  nsp = 0
  affine_default = True
  def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool | None = None,
               track_running_stats: bool = False):
    self.num_features, self.eps = num_features, eps
    affine = self.affine_default if affine is None else affine
    self.weight = Tensor.ones(num_features, requires_grad=True) if affine else None
    self.bias = Tensor.zeros(num_features, requires_grad=True) if affine else None
    self._init_stats(num_features, momentum, track_running_stats)
  def __call__(self, x: Tensor) -> Tensor:
    name = type(self).__name__
    unbatched = self.nsp > 0 and x.ndim == self.nsp + 1
    if unbatched: x = x.unsqueeze(0)
    if (self.nsp and x.ndim != self.nsp + 2) or x.ndim < 3 or x.shape[1] != self.num_features:
      raise ArgumentError(f"{name}({self.num_features}): input {x.shape} must be (N, {self.num_features}, *spatial)"
                          + (f" with {self.nsp} spatial axes (or unbatched)" if self.nsp else ""))
    axes = tuple(range(2, x.ndim))
    n = prod(x.shape[2:])
    xf = x.cast(_stat_dtype(x))
    if Tensor.training or self.running_mean is None or self.running_var is None:
      mean = xf.mean(axes, keepdim=True)
      var = (xf - mean).square().mean(axes, keepdim=True)
      if Tensor.training and self.running_mean is not None:
        self._update_stats(mean.mean((0, *axes)), (var * (n / max(n - 1, 1))).mean((0, *axes)))
    else:
      mean = self.running_mean.reshape(_channel_shape(x.ndim))
      var = self.running_var.reshape(_channel_shape(x.ndim))
    out = (xf - mean) * (var + self.eps).rsqrt()
    if self.weight is not None: out = out * self.weight.reshape(_channel_shape(x.ndim))
    if self.bias is not None: out = out + self.bias.reshape(_channel_shape(x.ndim))
    out = out.cast(x.dtype)
    return out.squeeze(0) if unbatched else out

class InstanceNorm1d(InstanceNorm):
  """InstanceNorm over (N, C, L) or unbatched (C, L)."""
  nsp, affine_default = 1, False
class InstanceNorm2d(InstanceNorm):
  """InstanceNorm over (N, C, H, W) or unbatched (C, H, W)."""
  nsp, affine_default = 2, False
class InstanceNorm3d(InstanceNorm):
  """InstanceNorm over (N, C, D, H, W) or unbatched (C, D, H, W)."""
  nsp, affine_default = 3, False

class LayerNorm:
  """Normalise over the last len(normalized_shape) axes, then scale and shift (elementwise_affine; bias=False drops the
  shift)."""
  def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
               bias: bool = True):
    self.normalized_shape, self.eps = make_tuple(normalized_shape, 1), eps
    self.weight = Tensor.ones(*self.normalized_shape, requires_grad=True) if elementwise_affine else None
    self.bias = Tensor.zeros(*self.normalized_shape, requires_grad=True) if elementwise_affine and bias else None
  def __call__(self, x: Tensor) -> Tensor:
    nd = len(self.normalized_shape)
    if x.shape[x.ndim - nd:] != self.normalized_shape or x.ndim < nd:
      raise ArgumentError(f"LayerNorm({self.normalized_shape}): the last axes of the input {x.shape} must be "
                          f"{self.normalized_shape}")
    out = x.cast(_stat_dtype(x)).layernorm(axis=tuple(range(-nd, 0)), eps=self.eps)
    if self.weight is not None: out = out * self.weight
    if self.bias is not None: out = out + self.bias
    return out.cast(x.dtype)

class LayerNorm2d(LayerNorm):
  """LayerNorm over the channels (axis 1) of (N, C, H, W) at each position: torch's LayerNorm(C) applied to the
  input permuted to (N, H, W, C) and back."""
  def __init__(self, channels: int, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True):
    super().__init__(channels, eps, elementwise_affine, bias)
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.normalized_shape[0]:
      raise ArgumentError(f"LayerNorm2d({self.normalized_shape[0]}): input {x.shape} must be (N, "
                          f"{self.normalized_shape[0]}, ...)")
    out = x.cast(_stat_dtype(x)).layernorm(axis=1, eps=self.eps)
    if self.weight is not None: out = out * self.weight.reshape(_channel_shape(x.ndim))
    if self.bias is not None: out = out + self.bias.reshape(_channel_shape(x.ndim))
    return out.cast(x.dtype)

class GroupNorm:
  """The channels (axis 1) split into num_groups groups, each normalised with the spatial axes of its sample; then a
  per-channel scale and shift (affine)."""
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    if num_groups <= 0 or num_channels % num_groups:
      raise ArgumentError(f"GroupNorm: num_channels {num_channels} must divide by num_groups {num_groups}")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight = Tensor.ones(num_channels, requires_grad=True) if affine else None
    self.bias = Tensor.zeros(num_channels, requires_grad=True) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_channels:
      raise ArgumentError(f"GroupNorm({self.num_groups}, {self.num_channels}): input {x.shape} must be (N, "
                          f"{self.num_channels}, ...)")
    xf = x.cast(_stat_dtype(x))
    # NOTE: the group size spelled out, not -1: a batch of 0 leaves -1 undetermined
    grouped = xf.reshape(x.shape[0], self.num_groups, prod(x.shape[1:]) // self.num_groups)
    out = grouped.layernorm(axis=-1, eps=self.eps).reshape(x.shape)
    if self.weight is not None: out = out * self.weight.reshape(_channel_shape(x.ndim))
    if self.bias is not None: out = out + self.bias.reshape(_channel_shape(x.ndim))
    return out.cast(x.dtype)

class RMSNorm:
  """x / sqrt(mean(x**2) + eps) over the last len(normalized_shape) axes, times weight (elementwise_affine). eps None
  is the machine epsilon of the input's dtype, as torch."""
  def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None, elementwise_affine: bool = True):
    self.normalized_shape, self.eps = make_tuple(normalized_shape, 1), eps
    self.weight = Tensor.ones(*self.normalized_shape, requires_grad=True) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    nd = len(self.normalized_shape)
    if x.shape[x.ndim - nd:] != self.normalized_shape or x.ndim < nd:
      raise ArgumentError(f"RMSNorm({self.normalized_shape}): the last axes of the input {x.shape} must be "
                          f"{self.normalized_shape}")
    eps = self.eps if self.eps is not None else 2.0 ** -dtypes.finfo(x.dtype)[1]
    xf = x.cast(_stat_dtype(x))
    out = xf * (xf.square().mean(tuple(range(-nd, 0)), keepdim=True) + eps).rsqrt()
    if self.weight is not None: out = out * self.weight
    return out.cast(x.dtype)

# ---- recurrent ----

class LSTMCell:
  """One LSTM step: (h, c) = cell(x, (h, c)), gates in torch's order (input, forget, cell, output). weight_ih
  (4*hidden, input), weight_hh (4*hidden, hidden), biases (4*hidden,), all uniform in +-1/sqrt(hidden) as torch. No
  state means zeros; an unbatched (input,) x gives unbatched (hidden,) states."""
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    self.input_size, self.hidden_size = input_size, hidden_size
    bound = 1 / math.sqrt(hidden_size)
    self.weight_ih = _uniform(4 * hidden_size, input_size, bound=bound)
    self.weight_hh = _uniform(4 * hidden_size, hidden_size, bound=bound)
    self.bias_ih = _uniform(4 * hidden_size, bound=bound) if bias else None
    self.bias_hh = _uniform(4 * hidden_size, bound=bound) if bias else None
  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
      raise ArgumentError(f"LSTMCell({self.input_size}, {self.hidden_size}): input {x.shape} must be (N, "
                          f"{self.input_size}) or ({self.input_size},)")
    unbatched = x.ndim == 1
    if unbatched: x = x.unsqueeze(0)
    if hc is None: h = c = Tensor.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
    else: h, c = (t.unsqueeze(0) if unbatched else t for t in hc)
    if h.shape != (x.shape[0], self.hidden_size) or c.shape != h.shape:
      raise ArgumentError(f"LSTMCell: states {h.shape} and {c.shape} must be ({x.shape[0]}, {self.hidden_size})")
    gates = x.linear(self.weight_ih.T, self.bias_ih) + h.linear(self.weight_hh.T, self.bias_hh)
    i, f, g, o = gates.chunk(4, dim=1)
    c_new = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h_new = o.sigmoid() * c_new.tanh()
    return (h_new.squeeze(0), c_new.squeeze(0)) if unbatched else (h_new, c_new)

class LSTM:
  """torch.nn.LSTM: `output, (h_n, c_n) = lstm(x, (h_0, c_0))`, num_layers stacked, optionally bidirectional, gates in
  torch's order (input, forget, cell, output). Parameters weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}
  (suffix `_reverse` for the backward direction), uniform in +-1/sqrt(hidden) as torch. x is (L, N, input), (N, L,
  input) with batch_first, or unbatched (L, input); states are (num_layers * directions, N, hidden) (batch_first does
  not change them, as torch), zeros when not given. dropout (in training) applies to every layer's output but the
  last. The input projection of a whole sequence is one matmul; the recurrence is unrolled over the L steps."""
  def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
               batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0):
    if num_layers < 1 or hidden_size < 1: raise ArgumentError(f"LSTM: num_layers {num_layers} and hidden_size "
                                                              f"{hidden_size} must be positive")
    if proj_size: raise ArgumentError("LSTM: proj_size is not supported (give proj_size=0)")
    if not 0 <= dropout <= 1: raise ArgumentError(f"LSTM: dropout must be between 0 and 1, got {dropout}")
    self.input_size, self.hidden_size, self.num_layers, self.bias = input_size, hidden_size, num_layers, bias
    self.batch_first, self.dropout, self.bidirectional = batch_first, dropout, bidirectional
    bound, dirs = 1 / math.sqrt(hidden_size), 2 if bidirectional else 1
    for layer in range(num_layers):
      for sfx in ("", "_reverse")[:dirs]:
        n_in = input_size if layer == 0 else hidden_size * dirs
        setattr(self, f"weight_ih_l{layer}{sfx}", _uniform(4 * hidden_size, n_in, bound=bound))
        setattr(self, f"weight_hh_l{layer}{sfx}", _uniform(4 * hidden_size, hidden_size, bound=bound))
        if bias:
          setattr(self, f"bias_ih_l{layer}{sfx}", _uniform(4 * hidden_size, bound=bound))
          setattr(self, f"bias_hh_l{layer}{sfx}", _uniform(4 * hidden_size, bound=bound))
  def _direction(self, x: Tensor, h: Tensor, c: Tensor, name: str, reverse: bool) -> tuple[Tensor, Tensor, Tensor]:
    """One layer, one direction over x (L, N, in): the outputs (L, N, hidden) and the last (h, c)."""
    w_ih, w_hh = getattr(self, f"weight_ih_{name}"), getattr(self, f"weight_hh_{name}")
    b_ih, b_hh = getattr(self, f"bias_ih_{name}", None), getattr(self, f"bias_hh_{name}", None)
    xw = x.linear(w_ih.T, b_ih)
    if b_hh is not None: xw = xw + b_hh
    outs: list[Tensor] = []
    # NOTE: the recurrence is unrolled over the steps, so their number must be concrete
    steps = x.int_shape("LSTM (its recurrence is unrolled over the sequence)")[0]
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
      i, f, g, o = (xw[t] + h.matmul(w_hh.T)).chunk(4, dim=1)
      # NOTE: each step's state is stored: fused, every later step (and its gradient) would recompute all before it
      c = (f.sigmoid() * c + i.sigmoid() * g.tanh()).contiguous()
      h = (o.sigmoid() * c.tanh()).contiguous()
      outs.append(h)
    if reverse: outs.reverse()
    return Tensor.stack(*outs), h, c
  def __call__(self, x: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
      raise ArgumentError(f"LSTM({self.input_size}, {self.hidden_size}): input {x.shape} must be (L, N, "
                          f"{self.input_size}), (N, L, {self.input_size}) with batch_first, or (L, {self.input_size})")
    unbatched = x.ndim == 2
    x = x.unsqueeze(1) if unbatched else x.transpose(0, 1) if self.batch_first else x
    dirs = 2 if self.bidirectional else 1
    want = (self.num_layers * dirs, x.shape[1], self.hidden_size)
    if hx is None: h0 = c0 = Tensor.zeros(*want, dtype=x.dtype, device=x.device)
    else: h0, c0 = (t.unsqueeze(1) if unbatched else t for t in hx)
    if h0.shape != want or c0.shape != want:
      raise ArgumentError(f"LSTM: states {h0.shape} and {c0.shape} must be {want[1:] if unbatched else want}")
    hs: list[Tensor] = []
    cs: list[Tensor] = []
    for layer in range(self.num_layers):
      outs = []
      for d, sfx in enumerate(("", "_reverse")[:dirs]):
        k = layer * dirs + d
        out, h, c = self._direction(x, h0[k], c0[k], f"l{layer}{sfx}", reverse=d == 1)
        outs.append(out)
        hs.append(h)
        cs.append(c)
      x = outs[0] if dirs == 1 else outs[0].cat(outs[1], dim=-1)
      if layer < self.num_layers - 1 and self.dropout: x = x.dropout(self.dropout)
    h_n, c_n = Tensor.stack(*hs), Tensor.stack(*cs)
    if unbatched: return x.squeeze(1), (h_n.squeeze(1), c_n.squeeze(1))
    return (x.transpose(0, 1) if self.batch_first else x), (h_n, c_n)

# ---- containers, dropout and activations as modules ----

class Sequential:
  """Layers applied in order: `Sequential(a, b, c)` (named "0", "1", "2" in the state dict, as torch) or
  `Sequential({"conv": a, "act": b})` (named by the keys). Any callable is a layer (a Tensor method too:
  `Sequential(nn.Linear(4, 8), Tensor.relu)`). Indexing gives a layer (a slice a new Sequential), len() counts them."""
  def __init__(self, *layers: Any):
    items = list(layers[0].items()) if len(layers) == 1 and isinstance(layers[0], dict) else list(enumerate(layers))
    for name, layer in items:
      if not callable(layer): raise TypeError(f"Sequential: layer {name!r} is a {type(layer).__name__}, not callable")
      setattr(self, str(name), layer)
  def _layers(self) -> list[Any]: return list(vars(self).values())
  def __call__(self, x: Tensor) -> Tensor: return x.sequential(self._layers())
  def __len__(self) -> int: return len(vars(self))
  def __iter__(self) -> Iterator[Any]: return iter(self._layers())
  def __getitem__(self, i: int | slice) -> Any:
    if isinstance(i, slice): return Sequential(dict(list(vars(self).items())[i]))
    return self._layers()[i]
  def append(self, layer: Any) -> Sequential:
    setattr(self, str(len(self)), layer)
    return self

class Identity:
  """Returns its input (torch.nn.Identity)."""
  def __init__(self, *args: Any, **kwargs: Any): pass
  def __call__(self, x: Tensor) -> Tensor: return x

class Dropout:
  """x.dropout(p) as a module: in training each element zeroed with probability p and the rest scaled by 1/(1-p),
  outside training (Tensor.training False) the input as it is."""
  def __init__(self, p: float = 0.5):
    if not 0 <= p <= 1: raise ArgumentError(f"Dropout: probability p must be between 0 and 1, got {p}")
    self.p = p
  def __call__(self, x: Tensor) -> Tensor: return x.dropout(self.p)

class Flatten:
  """x.flatten(start_dim, end_dim) as a module (from axis 1 by default, as torch)."""
  def __init__(self, start_dim: int = 1, end_dim: int = -1): self.start_dim, self.end_dim = start_dim, end_dim
  def __call__(self, x: Tensor) -> Tensor: return x.flatten(self.start_dim, self.end_dim)

class _Activation:
  """An elementwise function as a module (torch.nn's activation classes): no parameters."""
  fn: Callable[..., Tensor]
  def __call__(self, x: Tensor) -> Tensor: return type(self).fn(x)

class ReLU(_Activation):
  fn = Tensor.relu
class ReLU6(_Activation):
  fn = Tensor.relu6
class SiLU(_Activation):
  fn = Tensor.silu
class Sigmoid(_Activation):
  fn = Tensor.sigmoid
class Tanh(_Activation):
  fn = Tensor.tanh
class Mish(_Activation):
  fn = Tensor.mish
class Hardswish(_Activation):
  fn = Tensor.hardswish
class Hardsigmoid(_Activation):
  fn = Tensor.hardsigmoid
class Softsign(_Activation):
  fn = Tensor.softsign
class LogSigmoid(_Activation):
  fn = Tensor.logsigmoid
class SELU(_Activation):
  fn = Tensor.selu

class GELU:
  """GELU as torch.nn.GELU: approximate 'none' (the erf form, torch's default) or 'tanh'."""
  def __init__(self, approximate: str = "none"):
    if approximate not in ("none", "tanh"):
      raise ArgumentError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
    self.approximate = approximate
  def __call__(self, x: Tensor) -> Tensor: return x.gelu(self.approximate)

class LeakyReLU:
  def __init__(self, negative_slope: float = 0.01): self.negative_slope = negative_slope
  def __call__(self, x: Tensor) -> Tensor: return x.leaky_relu(self.negative_slope)

class ELU:
  def __init__(self, alpha: float = 1.0): self.alpha = alpha
  def __call__(self, x: Tensor) -> Tensor: return x.elu(self.alpha)

class CELU:
  def __init__(self, alpha: float = 1.0): self.alpha = alpha
  def __call__(self, x: Tensor) -> Tensor: return x.celu(self.alpha)

class Hardtanh:
  def __init__(self, min_val: float = -1.0, max_val: float = 1.0): self.min_val, self.max_val = min_val, max_val
  def __call__(self, x: Tensor) -> Tensor: return x.hardtanh(self.min_val, self.max_val)

class Softplus:
  def __init__(self, beta: float = 1.0, threshold: float = 20.0): self.beta, self.threshold = beta, threshold
  def __call__(self, x: Tensor) -> Tensor: return x.softplus(self.beta, self.threshold)

class Softmax:
  """x.softmax(dim) as a module; dim is required (torch's implicit choice is deprecated)."""
  def __init__(self, dim: int): self.dim = dim
  def __call__(self, x: Tensor) -> Tensor: return x.softmax(self.dim)

class LogSoftmax:
  def __init__(self, dim: int): self.dim = dim
  def __call__(self, x: Tensor) -> Tensor: return x.log_softmax(self.dim)

class PReLU:
  """max(0, x) + weight * min(0, x) with a learned weight: one value, or one per channel (axis 1); init 0.25."""
  def __init__(self, num_parameters: int = 1, init: float = 0.25):
    self.weight = Tensor.full((num_parameters,), init, requires_grad=True)
  def __call__(self, x: Tensor) -> Tensor:
    n = self.weight.shape[0]
    if n != 1 and (x.ndim < 2 or x.shape[1] != n):
      raise ShapeMismatchError(f"PReLU({n}): input {x.shape} needs {n} channels on axis 1")
    w = self.weight.reshape(_channel_shape(x.ndim)) if n != 1 and x.ndim > 1 else self.weight.reshape(())
    return (x >= 0).where(x, x * w)

# ---- attention ----

class AttentionHeadsError(ArgumentError, AssertionError):
  """embed_dim that does not divide by num_heads: an ArgumentError, and the AssertionError torch raises."""

class MultiheadAttention:
  """torch.nn.MultiheadAttention: in_proj_weight (3E, E) and in_proj_bias (3E,) (q/k/v_proj_weight when kdim or vdim
  differ from embed_dim), out_proj a Linear(E, E); bias_k/bias_v with add_bias_kv, a zero key/value with add_zero_attn.
  `mha(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None, average_attn_weights=True,
  is_causal=False)` returns (output, weights): inputs (L, N, E) or with batch_first (N, L, E), or unbatched (L, E).
  Masks as torch: a bool mask is True where attention is not allowed, a float mask is added to the scores;
  attn_mask (L, S) or (N * num_heads, L, S), key_padding_mask (N, S). Weights (N, L, S) averaged over the heads, or
  (N, num_heads, L, S); dropout (in training) applies to the weights, as torch's."""
  def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True, add_bias_kv: bool = False,
               add_zero_attn: bool = False, kdim: int | None = None, vdim: int | None = None,
               batch_first: bool = False):
    if num_heads <= 0 or embed_dim % num_heads:
      raise AttentionHeadsError(f"MultiheadAttention: embed_dim {embed_dim} must divide by num_heads {num_heads}")
    self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
    self.kdim, self.vdim, self.add_zero_attn = kdim or embed_dim, vdim or embed_dim, add_zero_attn
    e = embed_dim
    self.in_proj_weight: Tensor | None = None
    if self.kdim == e and self.vdim == e: self.in_proj_weight = Tensor.xavier_uniform(3 * e, e, requires_grad=True)
    else:
      self.q_proj_weight = Tensor.xavier_uniform(e, e, requires_grad=True)
      self.k_proj_weight = Tensor.xavier_uniform(e, self.kdim, requires_grad=True)
      self.v_proj_weight = Tensor.xavier_uniform(e, self.vdim, requires_grad=True)
    self.in_proj_bias = Tensor.zeros(3 * e, requires_grad=True) if bias else None
    self.out_proj = Linear(e, e, bias=bias)
    if self.out_proj.bias is not None: self.out_proj.bias = Tensor.zeros(e, requires_grad=True)
    self.bias_k = Tensor.xavier_normal(1, 1, e, requires_grad=True) if add_bias_kv else None
    self.bias_v = Tensor.xavier_normal(1, 1, e, requires_grad=True) if add_bias_kv else None
  def _project(self, q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    e = self.embed_dim
    ws = self.in_proj_weight.chunk(3) if self.in_proj_weight is not None else \
      (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
    bs = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None, None, None)
    for x, w, want in ((q, ws[0], e), (k, ws[1], self.kdim), (v, ws[2], self.vdim)):
      if x.shape[-1] != want: raise ShapeMismatchError(f"MultiheadAttention: input {x.shape} must end in {want}")
    return q.linear(ws[0].T, bs[0]), k.linear(ws[1].T, bs[1]), v.linear(ws[2].T, bs[2])
  @staticmethod
  def _additive(mask: Tensor | None, dtype: Any) -> Tensor | None:
    if mask is None: return None
    return mask.where(-math.inf, 0.0).cast(dtype) if mask.dtype is dtypes.bool else mask.cast(dtype)
  def __call__(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
               need_weights: bool = True, attn_mask: Tensor | None = None, average_attn_weights: bool = True,
               is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    if is_causal and attn_mask is None:
      raise ArgumentError("MultiheadAttention: is_causal is a hint that attn_mask is the causal mask; give attn_mask")
    unbatched = query.ndim == 2
    if unbatched: query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    elif not self.batch_first: query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    if query.ndim != 3 or key.ndim != 3 or value.ndim != 3 or key.shape[:2] != value.shape[:2]:
      raise ShapeMismatchError(f"MultiheadAttention: query, key and value must be 3-d (or all 2-d) with matching key "
                               f"and value, got {query.shape}, {key.shape}, {value.shape}")
    n, tgt, h, e = query.shape[0], query.shape[1], self.num_heads, self.embed_dim
    q, k, v = self._project(query, key, value)
    kpm = self._additive(key_padding_mask, q.dtype)
    am = self._additive(attn_mask, q.dtype)
    if self.bias_k is not None and self.bias_v is not None:
      k, v = k.cat(self.bias_k.expand(n, 1, e), dim=1), v.cat(self.bias_v.expand(n, 1, e), dim=1)
      kpm = kpm.pad(((0, 0), (0, 1))) if kpm is not None else None
      am = am.pad([(0, 0)] * (am.ndim - 1) + [(0, 1)]) if am is not None else None
    if self.add_zero_attn:
      k, v = k.pad(((0, 0), (0, 1), (0, 0))), v.pad(((0, 0), (0, 1), (0, 0)))
      kpm = kpm.pad(((0, 0), (0, 1))) if kpm is not None else None
      am = am.pad([(0, 0)] * (am.ndim - 1) + [(0, 1)]) if am is not None else None
    src = k.shape[1]
    q, k, v = (t.reshape(n, t.shape[1], h, e // h).transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(e // h))
    if am is not None:
      if am.shape not in ((tgt, src), (n * h, tgt, src)):
        raise ShapeMismatchError(f"MultiheadAttention: attn_mask of shape {am.shape} must be ({tgt}, {key.shape[1]}) "
                                 f"or ({n * h}, {tgt}, {key.shape[1]})")
      scores = scores + am.reshape(-1, h, tgt, src) if am.ndim == 3 else scores + am
    if kpm is not None:
      if kpm.shape != (n, src):
        raise ShapeMismatchError(f"MultiheadAttention: key_padding_mask of shape {kpm.shape} must be ({n}, "
                                 f"{key.shape[1]})")
      scores = scores + kpm.reshape(n, 1, 1, src)
    w = scores.softmax(-1).dropout(self.dropout)
    out = (w @ v).transpose(1, 2).reshape(n, tgt, e)
    out = self.out_proj(out)
    if unbatched: out = out.squeeze(0)
    elif not self.batch_first: out = out.transpose(0, 1)
    if not need_weights: return out, None
    wts = w.mean(1) if average_attn_weights else w
    return out, wts.squeeze(0) if unbatched else wts

__all__ = ["Linear", "Embedding", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "BatchNorm", "UnsyncedBatchNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "InstanceNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LayerNorm", "LayerNorm2d",
           "GroupNorm", "RMSNorm", "LSTMCell", "LSTM", "MultiheadAttention", "Sequential", "Identity", "Dropout",
           "Flatten", "ReLU", "ReLU6", "SiLU", "Sigmoid", "Tanh", "Mish", "Hardswish", "Hardsigmoid", "Softsign",
           "LogSigmoid", "SELU", "GELU", "LeakyReLU", "ELU", "CELU", "Hardtanh", "Softplus", "Softmax", "LogSoftmax",
           "PReLU", "optim", "state", "lr_scheduler"]
