"""The model zoo, built from tinygrad.nn only, each with torch's module layout so a torch state dict loads unchanged
(docs/models.md): ResNet-18 (resnet.py), a BERT encoder layer (bert.py), a GPT-2 block (gpt2.py), a small UNet
(unet.py), an LSTM language model (lstm.py). ZOO builds each at a given size with example inputs and a loss, for the
harness: `python -m tinygrad.models` runs a training step of each (what `make replay-models` captures)."""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any, Callable
import numpy as np
from tinygrad.tensor import Tensor, ArgumentError
from tinygrad.models.resnet import ResNet, BasicBlock, resnet18
from tinygrad.models.bert import BertEncoderLayer, BertEncoder
from tinygrad.models.gpt2 import GPT2Block, GPT2Attention, GPT2MLP
from tinygrad.models.unet import UNet, ConvBlock
from tinygrad.models.lstm import LSTMLanguageModel

SIZES = ("small", "tiny")

@dataclass(frozen=True)
class ZooModel:
  """A zoo model at one size: `make()` builds it (random weights), `inputs(seed)` the example inputs, `forward(model,
  *inputs)` its output tensor, `loss(out)` a scalar to train on."""
  name: str
  make: Callable[[], Any]
  inputs: Callable[[int], list[Tensor]]
  forward: Callable[..., Tensor]
  loss: Callable[[Tensor], Tensor]

# NOTE: inputs from numpy, so every device (and every emulated GPU) gets the same values
def _randn(seed: int, *shape: int) -> Tensor:
  return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))

def _tokens(seed: int, vocab: int, *shape: int) -> Tensor:
  return Tensor(np.random.default_rng(seed).integers(0, vocab, shape).astype(np.int32))

def _padding_mask(n: int, t: int) -> Tensor:
  # NOTE: the last sample's last quarter of keys is padding (True: not attended to), so the mask is exercised
  return (Tensor.arange(t).reshape(1, t) >= t - t // 4) * (Tensor.arange(n).reshape(n, 1) == n - 1)

def _mse(out: Tensor) -> Tensor: return out.square().mean()

def _lm_loss(vocab: int) -> Callable[[Tensor], Tensor]:
  def loss(logits: Tensor) -> Tensor:
    n, t = logits.shape[0], logits.shape[1]
    return logits.reshape(n * t, vocab).sparse_categorical_crossentropy(Tensor.arange(n * t) % vocab)
  return loss

def zoo(size: str = "small") -> dict[str, ZooModel]:
  """Every zoo model at `size`: "small" (the tests' and replay's sizes) or "tiny" (for the emulated GPUs, whose
  interpreter runs a few thousand lines a millisecond)."""
  if size not in SIZES: raise ArgumentError(f"zoo: size must be one of {SIZES}, got {size!r}")
  s = size == "small"
  img, w, e, t, v = (32, 8, 32, 8, 64) if s else (16, 4, 16, 4, 16)
  return {
    "resnet18": ZooModel("resnet18", lambda: resnet18(num_classes=10, width=w),
                         lambda seed: [_randn(seed, 2, 3, img, img)], lambda m, x: m(x), _mse),
    "bert": ZooModel("bert", lambda: BertEncoderLayer(e, 4, 2 * e, dropout=0.0),
                     lambda seed: [_randn(seed, 2, t, e), _padding_mask(2, t)],
                     lambda m, x, mask: m(x, src_key_padding_mask=mask), _mse),
    "gpt2": ZooModel("gpt2", lambda: GPT2Block(e, 4), lambda seed: [_randn(seed, 2, t, e)], lambda m, x: m(x), _mse),
    "unet": ZooModel("unet", lambda: UNet(3, 3, base=w, depth=2, groups=2),
                     lambda seed: [_randn(seed, 1, 3, img // 2, img // 2)], lambda m, x: m(x), _mse),
    "lstm": ZooModel("lstm", lambda: LSTMLanguageModel(v, e, e, nlayers=2), lambda seed: [_tokens(seed, v, 2, t)],
                     lambda m, tok: m(tok)[0], _lm_loss(v)),
  }

__all__ = ["ResNet", "BasicBlock", "resnet18", "BertEncoderLayer", "BertEncoder", "GPT2Block", "GPT2Attention",
           "GPT2MLP", "UNet", "ConvBlock", "LSTMLanguageModel", "ZooModel", "SIZES", "zoo"]
