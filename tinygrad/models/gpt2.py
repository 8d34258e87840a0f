"""A GPT-2 block (Radford et al. 2019): pre-norm causal self-attention and a tanh-GELU MLP, each added back to the
residual stream. Module names follow Hugging Face's GPT2Block (ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
mlp.c_proj), with torch.nn.Linear weights (out, in): Hugging Face's Conv1D stores them transposed, so a checkpoint of
theirs needs `.T` on those four weights."""
from __future__ import annotations
from tinygrad.tensor import Tensor, ArgumentError
from tinygrad import nn

class GPT2Attention:
  def __init__(self, n_embd: int, n_head: int, dropout: float = 0.0):
    if n_embd % n_head: raise ArgumentError(f"GPT2Attention: n_embd {n_embd} must divide by n_head {n_head}")
    self.n_embd, self.n_head, self.dropout = n_embd, n_head, dropout
    self.c_attn, self.c_proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
  def __call__(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """x (N, T, n_embd); attention_mask (N, T) bool, True for the tokens that may be attended to (padding False)."""
    n, t, e = x.shape
    q, k, v = (z.reshape(n, t, self.n_head, e // self.n_head).transpose(1, 2) for z in self.c_attn(x).chunk(3, dim=2))
    if attention_mask is None: y = q.scaled_dot_product_attention(k, v, is_causal=True)
    else:
      keep = Tensor.ones(t, t, dtype=attention_mask.dtype, device=x.device).tril() * attention_mask.reshape(n, 1, 1, t)
      y = q.scaled_dot_product_attention(k, v, attn_mask=keep)
    return self.c_proj(y.transpose(1, 2).reshape(n, t, e)).dropout(self.dropout)

class GPT2MLP:
  def __init__(self, n_embd: int, dropout: float = 0.0):
    self.c_fc, self.c_proj, self.dropout = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd), dropout
  def __call__(self, x: Tensor) -> Tensor:
    return self.c_proj(self.c_fc(x).gelu(approximate="tanh")).dropout(self.dropout)

class GPT2Block:
  def __init__(self, n_embd: int, n_head: int, layer_norm_epsilon: float = 1e-5, dropout: float = 0.0):
    self.ln_1, self.attn = nn.LayerNorm(n_embd, eps=layer_norm_epsilon), GPT2Attention(n_embd, n_head, dropout)
    self.ln_2, self.mlp = nn.LayerNorm(n_embd, eps=layer_norm_epsilon), GPT2MLP(n_embd, dropout)
  def __call__(self, x: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    x = x + self.attn(self.ln_1(x), attention_mask)
    return x + self.mlp(self.ln_2(x))
