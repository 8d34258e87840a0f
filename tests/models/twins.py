"""The zoo's twins, written with torch.nn only (never with our code), with the module layout ours follows: torchvision's
ResNet, nn.TransformerEncoderLayer, Hugging Face's GPT-2 block names (with nn.Linear), the UNet of tinygrad/models/unet.py,
and PyTorch's word_language_model LSTM."""
import math
import torch
import torch.nn as tnn
import torch.nn.functional as F

class BasicBlock(tnn.Module):
  def __init__(self, inplanes, planes, stride=1, downsample=None):
    super().__init__()
    self.conv1 = tnn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
    self.bn1 = tnn.BatchNorm2d(planes)
    self.relu = tnn.ReLU()
    self.conv2 = tnn.Conv2d(planes, planes, 3, padding=1, bias=False)
    self.bn2 = tnn.BatchNorm2d(planes)
    self.downsample = downsample
  def forward(self, x):
    out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
    return self.relu(out + (x if self.downsample is None else self.downsample(x)))

class ResNet18(tnn.Module):
  def __init__(self, num_classes=10, width=64):
    super().__init__()
    self.inplanes = width
    self.conv1 = tnn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
    self.bn1 = tnn.BatchNorm2d(width)
    self.relu = tnn.ReLU()
    self.maxpool = tnn.MaxPool2d(3, 2, 1)
    self.layer1, self.layer2 = self._layer(width, 1), self._layer(width * 2, 2)
    self.layer3, self.layer4 = self._layer(width * 4, 2), self._layer(width * 8, 2)
    self.avgpool = tnn.AdaptiveAvgPool2d(1)
    self.fc = tnn.Linear(width * 8, num_classes)
  def _layer(self, planes, stride):
    down = None
    if stride != 1 or self.inplanes != planes:
      down = tnn.Sequential(tnn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False), tnn.BatchNorm2d(planes))
    blocks = [BasicBlock(self.inplanes, planes, stride, down), BasicBlock(planes, planes)]
    self.inplanes = planes
    return tnn.Sequential(*blocks)
  def forward(self, x):
    x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
    x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
    return self.fc(torch.flatten(self.avgpool(x), 1))

def bert_layer(d, nhead, ff):
  return tnn.TransformerEncoderLayer(d, nhead, ff, dropout=0.0, activation="gelu", layer_norm_eps=1e-12, batch_first=True)

class GPT2Attention(tnn.Module):
  def __init__(self, e, h):
    super().__init__()
    self.n_head, self.c_attn, self.c_proj = h, tnn.Linear(e, 3 * e), tnn.Linear(e, e)
  def forward(self, x):
    n, t, e = x.shape
    q, k, v = (z.view(n, t, self.n_head, e // self.n_head).transpose(1, 2) for z in self.c_attn(x).split(e, dim=2))
    att = (q @ k.transpose(-1, -2)) / math.sqrt(e // self.n_head)
    att = att.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    return self.c_proj((att @ v).transpose(1, 2).reshape(n, t, e))

class GPT2MLP(tnn.Module):
  def __init__(self, e):
    super().__init__()
    self.c_fc, self.c_proj = tnn.Linear(e, 4 * e), tnn.Linear(4 * e, e)
  def forward(self, x): return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

class GPT2Block(tnn.Module):
  def __init__(self, e, h):
    super().__init__()
    self.ln_1, self.attn, self.ln_2, self.mlp = tnn.LayerNorm(e), GPT2Attention(e, h), tnn.LayerNorm(e), GPT2MLP(e)
  def forward(self, x):
    x = x + self.attn(self.ln_1(x))
    return x + self.mlp(self.ln_2(x))

class ConvBlock(tnn.Module):
  def __init__(self, cin, cout, groups):
    super().__init__()
    self.conv1, self.norm1 = tnn.Conv2d(cin, cout, 3, padding=1), tnn.GroupNorm(groups, cout)
    self.conv2, self.norm2 = tnn.Conv2d(cout, cout, 3, padding=1), tnn.GroupNorm(groups, cout)
  def forward(self, x): return F.silu(self.norm2(self.conv2(F.silu(self.norm1(self.conv1(x))))))

class UNet(tnn.Module):
  def __init__(self, cin, cout, base, depth, groups):
    super().__init__()
    self.inc = ConvBlock(cin, base, groups)
    self.down = tnn.ModuleList(ConvBlock(base * 2 ** i, base * 2 ** (i + 1), groups) for i in range(depth))
    self.up = tnn.ModuleList(tnn.ConvTranspose2d(base * 2 ** (i + 1), base * 2 ** i, 2, stride=2)
                             for i in reversed(range(depth)))
    self.up_blocks = tnn.ModuleList(ConvBlock(base * 2 ** (i + 1), base * 2 ** i, groups) for i in reversed(range(depth)))
    self.outc = tnn.Conv2d(base, cout, 1)
  def forward(self, x):
    skips = [x := self.inc(x)]
    for blk in self.down: skips.append(x := blk(F.max_pool2d(x, 2)))
    skips.pop()
    for up, blk in zip(self.up, self.up_blocks): x = blk(torch.cat([up(x), skips.pop()], dim=1))
    return self.outc(x)

class LSTMLanguageModel(tnn.Module):
  def __init__(self, ntoken, ninp, nhid, nlayers):
    super().__init__()
    self.encoder, self.rnn = tnn.Embedding(ntoken, ninp), tnn.LSTM(ninp, nhid, nlayers, batch_first=True)
    self.decoder = tnn.Linear(nhid, ntoken)
  def forward(self, tokens):
    out, hidden = self.rnn(self.encoder(tokens))
    return self.decoder(out), hidden
