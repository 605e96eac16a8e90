"""Pooling modes against explicit loops over hand-made tensors, under both padding sides."""

from __future__ import annotations

import pytest
import torch

from sts_core.pooling import (
    POOLING_MODES,
    check_pooling_mode,
    first_token_index,
    last_token_index,
    needs_hidden_states,
    pool,
)

DIM = 3
# Three sequences of real lengths 4, 2 and 1, padded to 5 tokens.
LENGTHS = (4, 2, 1)
SEQ = 5
PAD_VALUE = 1000.0  # large, so a pad token leaking into any mode changes its result


def _sequences(seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(n, DIM, generator=generator) for n in LENGTHS]


def _pad(seqs: list[torch.Tensor], side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad each (n, dim) sequence to SEQ with PAD_VALUE on ``side``; return states and mask."""
    states = torch.full((len(seqs), SEQ, DIM), PAD_VALUE)
    mask = torch.zeros(len(seqs), SEQ, dtype=torch.long)
    for row, seq in enumerate(seqs):
        n = seq.shape[0]
        span = slice(0, n) if side == "right" else slice(SEQ - n, SEQ)
        states[row, span] = seq
        mask[row, span] = 1
    return states, mask


def _loop_mean(seq: torch.Tensor) -> list[float]:
    return [sum(float(seq[t, d]) for t in range(seq.shape[0])) / seq.shape[0] for d in range(DIM)]


def _loop_max(seq: torch.Tensor) -> list[float]:
    return [max(float(seq[t, d]) for t in range(seq.shape[0])) for d in range(DIM)]


def _expected(mode: str, seq: torch.Tensor, first: torch.Tensor | None = None) -> torch.Tensor:
    if mode == "mean":
        values = _loop_mean(seq)
    elif mode == "max":
        values = _loop_max(seq)
    elif mode == "cls":
        values = [float(x) for x in seq[0]]
    elif mode == "last_token":
        values = [float(x) for x in seq[-1]]
    else:  # first_last_avg: mean over tokens of (first layer + last layer) / 2
        assert first is not None
        values = [(a + b) / 2 for a, b in zip(_loop_mean(first), _loop_mean(seq), strict=True)]
    return torch.tensor(values, dtype=torch.float32)


def _hidden_states(
    first_layer: list[torch.Tensor], last_layer: list[torch.Tensor], side: str
) -> tuple[torch.Tensor, ...]:
    """(embeddings, layer 1, middle layer, last layer): only layers 1 and -1 must matter."""
    first, _ = _pad(first_layer, side)
    last, _ = _pad(last_layer, side)
    junk = torch.full_like(first, -7.0)
    return (junk, first, junk * 3, last)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("mode", POOLING_MODES)
def test_pool_matches_explicit_loops(mode: str, side: str) -> None:
    last_layer = _sequences(0)
    first_layer = _sequences(1)
    states, mask = _pad(last_layer, side)
    hidden = _hidden_states(first_layer, last_layer, side) if needs_hidden_states(mode) else None

    pooled = pool(mode, states, mask, hidden)

    assert pooled.shape == (len(LENGTHS), DIM)
    assert pooled.dtype == torch.float32
    for row, seq in enumerate(last_layer):
        expected = _expected(mode, seq, first_layer[row])
        torch.testing.assert_close(pooled[row], expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_left_and_right_padding_agree(mode: str) -> None:
    last_layer = _sequences(2)
    first_layer = _sequences(3)
    results = []
    for side in ("left", "right"):
        states, mask = _pad(last_layer, side)
        hidden = _hidden_states(first_layer, last_layer, side)
        results.append(pool(mode, states, mask, hidden))
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=1e-6)


def test_hand_computed_values() -> None:
    # One sequence [[1, 2], [3, -4], pad] right-padded, one [pad, [5, 6], [-1, 0]] left-padded.
    states = torch.tensor(
        [
            [[1.0, 2.0], [3.0, -4.0], [99.0, 99.0]],
            [[99.0, 99.0], [5.0, 6.0], [-1.0, 0.0]],
        ]
    )
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    torch.testing.assert_close(pool("mean", states, mask), torch.tensor([[2.0, -1.0], [2.0, 3.0]]))
    torch.testing.assert_close(pool("max", states, mask), torch.tensor([[3.0, 2.0], [5.0, 6.0]]))
    torch.testing.assert_close(pool("cls", states, mask), torch.tensor([[1.0, 2.0], [5.0, 6.0]]))
    torch.testing.assert_close(
        pool("last_token", states, mask), torch.tensor([[3.0, -4.0], [-1.0, 0.0]])
    )
    first = torch.tensor(
        [
            [[3.0, 0.0], [1.0, 0.0], [99.0, 99.0]],
            [[99.0, 99.0], [0.0, 2.0], [0.0, 4.0]],
        ]
    )
    # mean of first layer: [2, 0] and [0, 3]; of last: [2, -1] and [2, 3]
    torch.testing.assert_close(
        pool("first_last_avg", states, mask, (states, first, states)),
        torch.tensor([[2.0, -0.5], [1.0, 3.0]]),
    )


def test_token_indices() -> None:
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    assert first_token_index(mask).tolist() == [0, 2, 0, 4]
    assert last_token_index(mask).tolist() == [2, 4, 4, 4]
    # boolean masks work too
    assert last_token_index(mask.bool()).tolist() == [2, 4, 4, 4]


def test_max_with_all_negative_values_ignores_padding() -> None:
    # Padding zeros must not win the max over negative real values.
    states = torch.tensor([[[-3.0, -1.0], [-2.0, -5.0], [0.0, 0.0]]])
    mask = torch.tensor([[1, 1, 0]])
    torch.testing.assert_close(pool("max", states, mask), torch.tensor([[-2.0, -1.0]]))


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_bfloat16_input(mode: str) -> None:
    last_layer = [s * 50 for s in _sequences(4)]
    first_layer = [s * 50 for s in _sequences(5)]
    for side in ("left", "right"):
        states, mask = _pad(last_layer, side)
        hidden = _hidden_states(first_layer, last_layer, side)
        hidden_bf16 = tuple(h.bfloat16() for h in hidden)
        pooled = pool(mode, states.bfloat16(), mask, hidden_bf16)
        assert pooled.dtype == torch.float32
        assert torch.isfinite(pooled).all()
        for row, seq in enumerate(last_layer):
            # the exact float32 result on the bf16-rounded inputs: sums are taken in float32
            rounded_first = first_layer[row].bfloat16().float()
            expected = _expected(mode, seq.bfloat16().float(), rounded_first)
            torch.testing.assert_close(pooled[row], expected, rtol=1e-6, atol=1e-5)


def test_bfloat16_mean_is_summed_in_float32() -> None:
    # (256 + 1 + 1 + 1) / 4 = 64.75 exactly in float32; a bf16 sum rounds 259 to 260 (→ 65).
    states = torch.tensor([[[256.0], [1.0], [1.0], [1.0], [0.0]]], dtype=torch.bfloat16)
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    pooled = pool("mean", states, mask)
    assert pooled.dtype == torch.float32
    assert pooled.item() == 64.75
    first_last = pool("first_last_avg", states, mask, (states, states, states))
    assert first_last.item() == 64.75


def test_mask_on_other_dtype_and_int_mask() -> None:
    states, mask = _pad(_sequences(6), "left")
    for variant in (mask, mask.bool(), mask.float(), mask.int()):
        torch.testing.assert_close(pool("mean", states, variant), pool("mean", states, mask))
        torch.testing.assert_close(pool("max", states, variant), pool("max", states, mask))


def test_unknown_mode() -> None:
    states, mask = _pad(_sequences(0), "right")
    with pytest.raises(ValueError, match="unknown pooling mode 'sum'") as info:
        pool("sum", states, mask)
    for mode in POOLING_MODES:
        assert mode in str(info.value)
    with pytest.raises(ValueError, match="unknown pooling mode"):
        check_pooling_mode("MEAN")
    assert check_pooling_mode("cls") == "cls"


def test_first_last_avg_needs_hidden_states() -> None:
    states, mask = _pad(_sequences(0), "right")
    assert needs_hidden_states("first_last_avg")
    assert not any(needs_hidden_states(m) for m in POOLING_MODES if m != "first_last_avg")
    with pytest.raises(ValueError, match="hidden_states"):
        pool("first_last_avg", states, mask)
    with pytest.raises(ValueError, match="hidden_states"):
        pool("first_last_avg", states, mask, (states,))
