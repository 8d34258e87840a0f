"""A BERT encoder layer (Devlin et al. 2018): post-norm self-attention and a GELU feed-forward, with torch's
`nn.TransformerEncoderLayer(batch_first=True)` module layout, so its state-dict keys load unchanged: self_attn
(in_proj_weight, in_proj_bias, out_proj), linear1, linear2, norm1, norm2. BERT's settings are the defaults here:
activation "gelu" (the erf form) and layer_norm_eps 1e-12. `BertEncoder` stacks them as `layers.{i}`, as
`nn.TransformerEncoder` does."""
from __future__ import annotations
from tinygrad.tensor import Tensor, ArgumentError
from tinygrad import nn

class BertEncoderLayer:
  def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 3072, dropout: float = 0.1,
               activation: str = "gelu", layer_norm_eps: float = 1e-12):
    if activation not in ("gelu", "relu"):
      raise ArgumentError(f"BertEncoderLayer: activation must be 'gelu' or 'relu', got {activation!r}")
    self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
    self.linear1, self.linear2 = nn.Linear(d_model, dim_feedforward), nn.Linear(dim_feedforward, d_model)
    self.norm1, self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps), nn.LayerNorm(d_model, eps=layer_norm_eps)
    self.dropout, self.activation = dropout, activation
  def __call__(self, src: Tensor, src_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None) -> Tensor:
    """src (N, L, d_model). Masks as torch's: src_mask (L, L) or (N * nhead, L, L), src_key_padding_mask (N, L); a
    bool mask is True where attention is not allowed (padding), a float mask is added to the scores."""
    attn, _ = self.self_attn(src, src, src, key_padding_mask=src_key_padding_mask, attn_mask=src_mask,
                             need_weights=False)
    x = self.norm1(src + attn.dropout(self.dropout))
    h = self.linear1(x)
    h = h.gelu(approximate="none") if self.activation == "gelu" else h.relu()
    return self.norm2(x + self.linear2(h.dropout(self.dropout)).dropout(self.dropout))

class BertEncoder:
  def __init__(self, num_layers: int, d_model: int, nhead: int, dim_feedforward: int = 3072, dropout: float = 0.1,
               layer_norm_eps: float = 1e-12):
    self.layers = [BertEncoderLayer(d_model, nhead, dim_feedforward, dropout, "gelu", layer_norm_eps)
                   for _ in range(num_layers)]
  def __call__(self, src: Tensor, mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None) -> Tensor:
    for layer in self.layers: src = layer(src, mask, src_key_padding_mask)
    return src
