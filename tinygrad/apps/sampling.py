"""What the LLM app's front ends share: its error class, the sampling parameters and the sampler (host-side, numpy)."""
from __future__ import annotations
from dataclasses import dataclass, field
import numpy as np

class LLMError(ValueError):
  """A model file the app cannot run (architecture, tensor set, shapes, quantization) or a request it cannot serve
  (a prompt over the context); the message names the key, tensor or limit."""

@dataclass
class SamplingParams:
  temperature: float = 0.0
  top_k: int = 0
  top_p: float = 1.0
  min_p: float = 0.0
  repetition_penalty: float = 1.0
  seed: int | None = None
  max_tokens: int = 128
  stop: list[str] = field(default_factory=list)
  ignore_eos: bool = False
  def check(self) -> None:
    for name, ok in (("temperature", self.temperature >= 0), ("top_k", self.top_k >= 0), ("top_p", 0 < self.top_p <= 1),
                     ("min_p", 0 <= self.min_p <= 1), ("repetition_penalty", self.repetition_penalty > 0),
                     ("max_tokens", self.max_tokens >= 0)):
      if not ok: raise LLMError(f"llm: {name}={getattr(self, name)!r} is out of range")

def sample(logits: np.ndarray, p: SamplingParams, seen: list[int], rng: np.random.Generator) -> int:
  """The next token: repetition penalty over `seen` (positive logits divided, negative multiplied), then greedy at
  temperature 0, else top-k, top-p (the smallest set whose mass reaches p), min-p (relative to the top probability)."""
  lg = logits.astype(np.float64)
  if p.repetition_penalty != 1.0 and seen:
    idx = np.unique(np.array(seen))
    lg[idx] = np.where(lg[idx] > 0, lg[idx] / p.repetition_penalty, lg[idx] * p.repetition_penalty)
  if p.temperature == 0: return int(np.argmax(lg))
  lg = lg / p.temperature
  order = np.argsort(-lg, kind="stable")
  if p.top_k: order = order[:p.top_k]
  probs = np.exp(lg[order] - lg[order[0]])
  probs /= probs.sum()
  if p.top_p < 1.0:
    keep = int(np.searchsorted(np.cumsum(probs), p.top_p) + 1)
    order, probs = order[:keep], probs[:keep]
  if p.min_p > 0: order, probs = order[probs >= p.min_p * probs[0]], probs[probs >= p.min_p * probs[0]]
  return int(order[rng.choice(len(order), p=probs / probs.sum())])
