"""An LSTM language model (as PyTorch's word_language_model example): an Embedding `encoder`, a stacked LSTM `rnn`
(batch_first) and a Linear `decoder` to the vocabulary; tie_weights shares the decoder's weight with the embedding
(needs ninp == nhid)."""
from __future__ import annotations
from tinygrad.tensor import Tensor, ArgumentError
from tinygrad import nn

class LSTMLanguageModel:
  def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int = 2, dropout: float = 0.0,
               tie_weights: bool = False):
    if tie_weights and ninp != nhid:
      raise ArgumentError(f"LSTMLanguageModel: tie_weights needs ninp == nhid, got {ninp} and {nhid}")
    self.encoder = nn.Embedding(ntoken, ninp)
    self.rnn = nn.LSTM(ninp, nhid, nlayers, batch_first=True, dropout=dropout)
    self.decoder = nn.Linear(nhid, ntoken)
    if tie_weights: self.decoder.weight = self.encoder.weight
    self.dropout = dropout
  def __call__(self, tokens: Tensor,
               hidden: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """tokens (N, T) int: logits (N, T, ntoken) and the last (h, c), each (nlayers, N, nhid)."""
    out, hidden = self.rnn(self.encoder(tokens).dropout(self.dropout), hidden)
    return self.decoder(out.dropout(self.dropout)), hidden
