"""Small torch models exported with torch.onnx.export (torch 2.13's default exporter, through onnxscript) for the
tests and the bench: a ResNet, a transformer encoder with attention masks, an LSTM, a UNet-like conv net and a CNN that
onnxruntime's quantizer turns into a QDQ graph. Weights are seeded; nothing is downloaded."""
from __future__ import annotations
import io, warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

class Block(nn.Module):
  def __init__(self, c: int, stride: int = 1):
    super().__init__()
    self.c1, self.b1 = nn.Conv2d(c // stride, c, 3, stride, 1, bias=False), nn.BatchNorm2d(c)
    self.c2, self.b2 = nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c)
    self.down = nn.Conv2d(c // stride, c, 1, stride, bias=False) if stride > 1 else None
  def forward(self, x):
    y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
    return F.relu(y + (self.down(x) if self.down is not None else x))

class ResNet(nn.Module):
  def __init__(self):
    super().__init__()
    self.stem, self.bn = nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8)
    self.layers = nn.Sequential(Block(8), Block(16, 2), Block(16))
    self.fc = nn.Linear(16, 10)
  def forward(self, x):
    x = F.max_pool2d(F.relu(self.bn(self.stem(x))), 2)
    return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.layers(x), 1), 1))

class EncoderLayer(nn.Module):
  def __init__(self, d: int, heads: int):
    super().__init__()
    self.h, self.qkv, self.o = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)
    self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
    self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
  def forward(self, x, bias):
    b, s, d = x.shape
    q, k, v = self.qkv(x).reshape(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
    att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.h) ** 0.5 + bias, dim=-1)
    x = self.n1(x + self.o((att @ v).transpose(1, 2).reshape(b, s, d)))
    return self.n2(x + self.ff(x))

class Encoder(nn.Module):
  """Two post-norm encoder layers with a causal mask and a key-padding mask (True = padding), both as an additive bias."""
  def __init__(self, d: int = 32, heads: int = 4, vocab: int = 50):
    super().__init__()
    self.emb = nn.Embedding(vocab, d)
    self.pos = nn.Parameter(torch.randn(1, 16, d) * 0.1)
    self.layers = nn.ModuleList([EncoderLayer(d, heads) for _ in range(2)])
    self.head = nn.Linear(d, vocab)
  def forward(self, tokens, pad_mask):
    s = tokens.shape[1]
    x = self.emb(tokens) + self.pos[:, :s]
    causal = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    keep = ~(causal[None, None] | pad_mask[:, None, None, :])
    bias = torch.where(keep, 0.0, -1e9)
    for layer in self.layers: x = layer(x, bias)
    return self.head(x)

class LSTMNet(nn.Module):
  def __init__(self):
    super().__init__()
    self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
    self.fc = nn.Linear(16, 4)
  def forward(self, x):
    y, (h, c) = self.lstm(x)
    return self.fc(y), h, c

class UNet(nn.Module):
  def __init__(self):
    super().__init__()
    self.e1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.ReLU())
    self.e2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
    self.mid = nn.Sequential(nn.Conv2d(16, 16, 3, padding=2, dilation=2), nn.ReLU())
    self.up1 = nn.ConvTranspose2d(16, 8, 2, stride=2)
    self.d1 = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU())
    self.out = nn.Conv2d(8, 2, 1)
  def forward(self, x):
    a = self.e1(x)
    b = self.e2(F.max_pool2d(a, 2))
    m = self.mid(b) + F.interpolate(F.avg_pool2d(b, 2), scale_factor=2.0, mode="nearest")
    u = self.up1(m)
    return torch.sigmoid(self.out(self.d1(torch.cat([u, a], 1))))

class SmallCNN(nn.Module):
  def __init__(self):
    super().__init__()
    self.c1, self.c2 = nn.Conv2d(1, 8, 3, padding=1), nn.Conv2d(8, 16, 3, stride=2, padding=1)
    self.fc = nn.Linear(16 * 4 * 4, 10)
  def forward(self, x):
    x = F.relu(self.c2(F.relu(self.c1(x))))
    return self.fc(torch.flatten(F.max_pool2d(x, 2), 1))

def _inputs(name: str, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(seed + batch)
  if name == "resnet": return {"x": rng.standard_normal((batch, 3, 16, 16), dtype=np.float32)}
  if name == "encoder":
    tokens = rng.integers(0, 50, (batch, 12)).astype(np.int64)
    pad = np.zeros((batch, 12), dtype=bool)
    for b in range(batch): pad[b, 12 - (b % 4) * 2:] = True  # the last positions of some rows are padding
    return {"tokens": tokens, "pad_mask": pad}
  if name == "lstm": return {"x": rng.standard_normal((batch, 10, 8), dtype=np.float32)}
  if name == "unet": return {"x": rng.standard_normal((batch, 3, 16, 16), dtype=np.float32)}
  if name == "cnn": return {"x": rng.standard_normal((batch, 1, 16, 16), dtype=np.float32)}
  raise KeyError(name)

MODELS = {"resnet": ResNet, "encoder": Encoder, "lstm": LSTMNet, "unet": UNet, "cnn": SmallCNN}

def inputs(name: str, batch: int = 2, seed: int = 0) -> dict[str, np.ndarray]: return _inputs(name, batch, seed)

def export(name: str) -> bytes:
  """The model's ONNX bytes from torch.onnx.export (dynamo exporter), with a named batch dim."""
  torch.manual_seed(0)
  m = MODELS[name]().eval()
  for mod in m.modules():
    if isinstance(mod, nn.BatchNorm2d):  # non-trivial running statistics
      mod.running_mean.uniform_(-0.5, 0.5); mod.running_var.uniform_(0.5, 1.5)
  ins = inputs(name)
  args = tuple(torch.from_numpy(v) for v in ins.values())
  batch = torch.export.Dim("batch", min=1, max=64)
  dyn = {k: {0: batch} for k in ins}
  f = io.BytesIO()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    prog = torch.onnx.export(m, args, dynamic_shapes=dyn, input_names=list(ins), dynamo=True, verbose=False)
  assert prog is not None
  prog.save(f) if hasattr(prog, "save") else None
  return f.getvalue()

def quantize_qdq(model: bytes) -> bytes:
  """onnxruntime's static quantizer in QDQ format (uint8 activations, 7-bit int8 per-channel weights: reduce_range, as
  onnxruntime advises on x86, whose u8s8 kernels saturate pairs of full-range products in int16), calibrated on random
  inputs."""
  import os, tempfile
  from onnxruntime.quantization import quantize_static, QuantFormat, QuantType, CalibrationDataReader
  class Reader(CalibrationDataReader):
    def __init__(self): self.it = iter([inputs("cnn", 4, s) for s in range(4)])
    def get_next(self): return next(self.it, None)
  with tempfile.TemporaryDirectory() as d:
    src, dst = os.path.join(d, "f.onnx"), os.path.join(d, "q.onnx")
    with open(src, "wb") as fh: fh.write(model)
    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
    with open(dst, "rb") as fh: return fh.read()
