"""ResNet-18 (He et al. 2015, "Deep Residual Learning for Image Recognition") with torchvision's module layout, so
torchvision's `resnet18().state_dict()` keys load unchanged: conv1, bn1, layer1..layer4 of BasicBlocks (conv1, bn1,
conv2, bn2, downsample.0/.1), fc. `width` scales every stage (64 is torchvision's); the tests use small widths."""
from __future__ import annotations
from typing import cast
from tinygrad.tensor import Tensor
from tinygrad import nn

class BasicBlock:
  expansion = 1
  def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Sequential | None = None):
    self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
    self.bn1 = nn.BatchNorm2d(planes)
    self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
    self.bn2 = nn.BatchNorm2d(planes)
    self.downsample = downsample
  def __call__(self, x: Tensor) -> Tensor:
    out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
    return (out + (self.downsample(x) if self.downsample is not None else x)).relu()

class ResNet:
  def __init__(self, layers: tuple[int, ...] = (2, 2, 2, 2), num_classes: int = 1000, width: int = 64,
               in_channels: int = 3):
    self.inplanes = width
    self.conv1 = nn.Conv2d(in_channels, width, 7, stride=2, padding=3, bias=False)
    self.bn1 = nn.BatchNorm2d(width)
    self.layer1 = self._make_layer(width, layers[0], 1)
    self.layer2 = self._make_layer(width * 2, layers[1], 2)
    self.layer3 = self._make_layer(width * 4, layers[2], 2)
    self.layer4 = self._make_layer(width * 8, layers[3], 2)
    self.fc = nn.Linear(width * 8, num_classes)
  def _make_layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
    down = None
    if stride != 1 or self.inplanes != planes:
      down = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))
    out = nn.Sequential(BasicBlock(self.inplanes, planes, stride, down))
    self.inplanes = planes
    for _ in range(1, blocks): out.append(BasicBlock(planes, planes))
    return out
  def __call__(self, x: Tensor) -> Tensor:
    x = cast(Tensor, self.bn1(self.conv1(x)).relu().max_pool2d(3, 2, padding=1))
    x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
    # NOTE: adaptive average pooling to 1x1 is the mean over the spatial axes
    return self.fc(x.mean((2, 3)))

def resnet18(num_classes: int = 1000, width: int = 64, in_channels: int = 3) -> ResNet:
  return ResNet((2, 2, 2, 2), num_classes, width, in_channels)
