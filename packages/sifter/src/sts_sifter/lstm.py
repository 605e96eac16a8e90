r"""SIFTER-LSTM (§4.2, eq. 4): an LSTM whose input gate is replaced by ones for the tokens of
a word set (sentiment words), so their candidate state enters the memory cell in full:

.. math::

    c_t = f_t \odot c_{t-1} + \mathbb{I}(x_t \notin \mathbb{X})\, i_t \odot \tilde c_t
          + \mathbb{I}(x_t \in \mathbb{X})\, \tilde c_t,
    \qquad h_t = o_t \odot \tanh(c_t)

with f, i, o, c̃ as in the standard LSTM (eq. 3). The parameters and their layout are
``torch.nn.LSTM``'s (``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``; gates in the
order i, f, g, o), so with an empty word set the layer equals ``nn.LSTM`` (tested). One
layer, unidirectional, batch first; the steps run in a Python loop (no cuDNN kernel has the
bypass).

:class:`SentimentLSTM` is the paper's classifier (§4.3, §5.4): WordPiece embeddings
initialised from a BERT model's input embeddings, dropout, the (SIFTER-)LSTM, dropout and a
linear layer with softmax on the last hidden state h_T.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class SifterLSTM(nn.Module):
    """One LSTM layer with the input gate bypassed where ``bypass`` is true.

    Args:
        input_size: width of x_t.
        hidden_size: width of h_t and c_t.

    ``forward(x, bypass=None, lengths=None)``: ``x`` ``(B, T, input_size)``; ``bypass``
    ``(B, T)`` booleans (the token is in the word set; None: none is); ``lengths`` ``(B,)``
    real lengths of right-padded rows (None: all T). Returns the outputs ``(B, T, H)``
    (zeros after a row's length) and ``(h_n, c_n)``, each ``(1, B, H)``, taken at each row's
    last real step, as ``nn.LSTM`` on a packed sequence.
    """

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(4 * hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(4 * hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``nn.LSTM``'s initialisation: U(−1/√H, 1/√H) for every parameter."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -bound, bound)

    @classmethod
    def from_lstm(cls, lstm: nn.LSTM) -> SifterLSTM:
        """A copy of a one-layer, unidirectional, batch-first ``nn.LSTM``'s weights."""
        if lstm.num_layers != 1 or lstm.bidirectional or lstm.proj_size or not lstm.bias:
            raise ValueError("from_lstm needs a one-layer unidirectional LSTM with biases")
        layer = cls(lstm.input_size, lstm.hidden_size)
        with torch.no_grad():
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(layer, name).copy_(getattr(lstm, f"{name}_l0"))
        return layer

    def forward(
        self, x: Tensor, bypass: Tensor | None = None, lengths: Tensor | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        batch, steps, _ = x.shape
        h = x.new_zeros(batch, self.hidden_size)
        c = x.new_zeros(batch, self.hidden_size)
        projected = torch.nn.functional.linear(x, self.weight_ih, self.bias_ih + self.bias_hh)
        outputs = []
        for t in range(steps):
            gates = projected[:, t] + h @ self.weight_hh.T
            i, f, g, o = gates.chunk(4, dim=-1)
            i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
            if bypass is not None:
                i = torch.where(bypass[:, t, None], torch.ones_like(i), i)
            c_next = f * c + i * g
            h_next = o * torch.tanh(c_next)
            if lengths is not None:
                alive = (t < lengths)[:, None]
                c = torch.where(alive, c_next, c)
                h = torch.where(alive, h_next, h)
                outputs.append(torch.where(alive, h_next, torch.zeros_like(h_next)))
            else:
                c, h = c_next, h_next
                outputs.append(h)
        return torch.stack(outputs, dim=1), (h[None], c[None])


class SentimentLSTM(nn.Module):
    """The sentence classifier of §4.3: embeddings → dropout → (SIFTER-)LSTM → h_T →
    dropout → linear (softmax in the loss).

    Args:
        embeddings: ``(vocab, dim)`` initial word-piece vectors (a BERT model's input
            embeddings); trained with the rest.
        hidden_size: the LSTM's width (the paper: 384).
        num_labels: classes (SST-2: 2).
        dropout: on the embeddings and on h_T (the paper: 0.2).
        sifter: bypass the input gate for flagged tokens (False: the plain LSTM baseline,
            the same parameters and computation otherwise).
    """

    def __init__(
        self,
        embeddings: Tensor,
        hidden_size: int = 384,
        num_labels: int = 2,
        dropout: float = 0.2,
        sifter: bool = True,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding.from_pretrained(embeddings.clone(), freeze=False)
        self.dropout = nn.Dropout(dropout)
        self.lstm = SifterLSTM(embeddings.shape[1], hidden_size)
        self.classifier = nn.Linear(hidden_size, num_labels)
        self.sifter = sifter

    def forward(self, input_ids: Tensor, lengths: Tensor, bypass: Tensor) -> Tensor:
        """Logits ``(B, num_labels)`` of right-padded ``input_ids`` ``(B, T)``."""
        x = self.dropout(self.embedding(input_ids))
        _, (h, _) = self.lstm(x, bypass if self.sifter else None, lengths)
        return self.classifier(self.dropout(h[0]))
