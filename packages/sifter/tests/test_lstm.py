"""SIFTER-LSTM (eq. 4): nn.LSTM when nothing is bypassed, the input gate exactly 1 for the
listed tokens, gradients everywhere."""

from __future__ import annotations

import torch
from torch import nn

from sts_sifter.lstm import SentimentLSTM, SifterLSTM


def test_without_bypass_it_is_nn_lstm_padding_included() -> None:
    torch.manual_seed(0)
    reference = nn.LSTM(6, 5, batch_first=True)
    layer = SifterLSTM.from_lstm(reference)
    x = torch.randn(3, 7, 6)
    lengths = torch.tensor([7, 4, 1])
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
    expected_out, (h_ref, c_ref) = reference(packed)
    expected, _ = nn.utils.rnn.pad_packed_sequence(expected_out, batch_first=True)
    out, (h, c) = layer(x, torch.zeros(3, 7, dtype=torch.bool), lengths)
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.allclose(h, h_ref, atol=1e-6) and torch.allclose(c, c_ref, atol=1e-6)
    full, _ = reference(x)
    assert torch.allclose(layer(x)[0], full, atol=1e-6)  # no lengths, no bypass


def gates(layer: SifterLSTM, x: torch.Tensor, h: torch.Tensor) -> list[torch.Tensor]:
    z = x @ layer.weight_ih.T + layer.bias_ih + h @ layer.weight_hh.T + layer.bias_hh
    i, f, g, o = z.chunk(4, dim=-1)
    return [torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)]


def test_a_listed_token_enters_the_cell_with_the_input_gate_at_one() -> None:
    """Step 2 of row 0 is bypassed: c_2 = f ⊙ c_1 + c̃ (eq. 4); row 1 keeps i ⊙ c̃."""
    torch.manual_seed(1)
    layer = SifterLSTM(4, 3)
    x = torch.randn(2, 3, 4)
    bypass = torch.tensor([[False, True, False], [False, False, False]])
    out, _ = layer(x, bypass)
    plain, _ = layer(x)
    with torch.no_grad():
        h0 = torch.zeros(2, 3)
        i, f, g, o = gates(layer, x[:, 0], h0)
        c1 = i * g
        h1 = o * torch.tanh(c1)
        i, f, g, o = gates(layer, x[:, 1], h1)
        bypassed = f[0] * c1[0] + g[0]
        kept = f[1] * c1[1] + i[1] * g[1]
    assert torch.allclose(out[0, 1], o[0] * torch.tanh(bypassed), atol=1e-6)
    assert torch.allclose(out[1, 1], o[1] * torch.tanh(kept), atol=1e-6)
    assert torch.allclose(out[:, 0], plain[:, 0]) and torch.allclose(out[1], plain[1])
    assert not torch.allclose(out[0, 1:], plain[0, 1:])


def test_gradients_reach_every_parameter_and_the_embeddings() -> None:
    torch.manual_seed(2)
    model = SentimentLSTM(torch.randn(20, 8), hidden_size=6)
    ids = torch.randint(0, 20, (4, 5))
    lengths = torch.tensor([5, 3, 2, 5])
    bypass = ids % 3 == 0
    loss = nn.functional.cross_entropy(model(ids, lengths, bypass), torch.tensor([0, 1, 1, 0]))
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_the_plain_baseline_ignores_the_word_set() -> None:
    torch.manual_seed(3)
    model = SentimentLSTM(torch.randn(20, 8), hidden_size=6, sifter=False).eval()
    ids = torch.randint(0, 20, (2, 4))
    lengths = torch.tensor([4, 2])
    flags = torch.ones(2, 4, dtype=torch.bool)
    assert torch.equal(model(ids, lengths, flags), model(ids, lengths, ~flags))
    model.sifter = True
    assert not torch.equal(model(ids, lengths, flags), model(ids, lengths, ~flags))
