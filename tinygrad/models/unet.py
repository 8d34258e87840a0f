"""A small UNet (Ronneberger et al. 2015) with GroupNorm and SiLU: `depth` stride-2 downsamplings by max-pooling, each
doubling the channels, then as many upsamplings by a stride-2 ConvTranspose2d that halves them, concatenated with the
skip of the same resolution. Module names: inc, down.{i}, up.{i}, up_blocks.{i} (each ConvBlock: conv1, norm1, conv2,
norm2), outc. The input's height and width must divide by 2**depth."""
from __future__ import annotations
from typing import cast
from tinygrad.tensor import Tensor, ArgumentError
from tinygrad import nn

class ConvBlock:
  def __init__(self, cin: int, cout: int, groups: int):
    self.conv1, self.norm1 = nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(groups, cout)
    self.conv2, self.norm2 = nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(groups, cout)
  def __call__(self, x: Tensor) -> Tensor: return self.norm2(self.conv2(self.norm1(self.conv1(x)).silu())).silu()

class UNet:
  def __init__(self, in_channels: int = 3, out_channels: int = 3, base: int = 32, depth: int = 2, groups: int = 8):
    if depth < 1: raise ArgumentError(f"UNet: depth must be at least 1, got {depth}")
    self.depth = depth
    self.inc = ConvBlock(in_channels, base, groups)
    self.down = [ConvBlock(base * 2 ** i, base * 2 ** (i + 1), groups) for i in range(depth)]
    self.up = [nn.ConvTranspose2d(base * 2 ** (i + 1), base * 2 ** i, 2, stride=2) for i in reversed(range(depth))]
    self.up_blocks = [ConvBlock(base * 2 ** (i + 1), base * 2 ** i, groups) for i in reversed(range(depth))]
    self.outc = nn.Conv2d(base, out_channels, 1)
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim != 4 or any(s % 2 ** self.depth for s in x.shape[2:]):
      raise ArgumentError(f"UNet: input {x.shape} must be (N, C, H, W) with H and W divisible by {2 ** self.depth}")
    skips = [x := self.inc(x)]
    for blk in self.down: skips.append(x := blk(cast(Tensor, x.max_pool2d(2))))
    skips.pop()
    for up, blk in zip(self.up, self.up_blocks): x = blk(up(x).cat(skips.pop(), dim=1))
    return self.outc(x)
