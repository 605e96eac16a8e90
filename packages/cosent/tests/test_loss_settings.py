"""The CoSENT package's losses: settings, edges and messages, each against a value computed
here — every config field ``from_config`` reads (and the losses' defaults equal to
``CoSENTConfig``'s and the paper's), the gathered batch (a stand-in gather, one process),
degenerate batches, bf16 and device placement (the meta device stands in for a GPU), the
contrastive baseline (eq. 2) against its formula, and the whole message of each refusal.
Found by the mutation pass (``tools/mutation.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sts_cosent import CoSENTConfig
from sts_cosent import loss as cosent_module
from sts_cosent.loss import (
    ContrastiveThresholdLoss,
    CoSENTLoss,
    CoSENTRankingLoss,
    contrastive_threshold_loss,
    cosent_loss,
    has_no_ordered_pair,
    pairwise_cosine,
)


def pairs(n: int = 6, d: int = 4, seed: int = 0, dtype=torch.float64) -> tuple:
    generator = torch.Generator().manual_seed(seed)
    u, v = (torch.randn(n, d, generator=generator, dtype=dtype) for _ in "uv")
    return u, v


def test_from_config_reads_every_field() -> None:
    config = SimpleNamespace(cosent_scale=7.0, gather_across_processes=True, contrastive_margin=0.2)
    assert CoSENTRankingLoss.from_config(config).config_dict() == {"scale": 7.0, "gather": True}
    assert ContrastiveThresholdLoss.from_config(config).config_dict() == {"margin": 0.2}


def test_the_losses_defaults_are_the_configs_and_the_papers() -> None:
    """λ 20 (§IV), ε 0.5, no gathering: the same from CoSENTConfig, from a config without
    the fields (a part of another method's loss_weights) and from the signatures."""
    config = CoSENTConfig(output_dir="unused", report_to="none")
    for source in (config, SimpleNamespace(), None):
        assert CoSENTRankingLoss.from_config(source).config_dict() == {
            "scale": 20.0,
            "gather": False,
        }
        assert ContrastiveThresholdLoss.from_config(source).config_dict() == {"margin": 0.5}
    assert CoSENTLoss().scale == 20.0
    scores, labels = torch.tensor([0.3, 0.9, 0.1]), torch.tensor([2.0, 1.0, 0.0])
    torch.testing.assert_close(cosent_loss(scores, labels), cosent_loss(scores, labels, 20.0))
    u, v = pairs()
    y = torch.tensor([1, 0, 1, 0, 0, 1])
    torch.testing.assert_close(
        contrastive_threshold_loss(u, v, y), contrastive_threshold_loss(u, v, y, 0.5)
    )


def contrastive_by_hand(u, v, labels, margin) -> float:
    """Eq. 2: (1/N) Σ ½ y (1 − cos)² + ½ (1 − y) max(ε, cos)²."""
    u, v, y = u.numpy(), v.numpy(), labels.numpy().astype(float)
    cos = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    terms = 0.5 * y * (1 - cos) ** 2 + 0.5 * (1 - y) * np.maximum(margin, cos) ** 2
    return float(terms.mean())


def test_the_contrastive_baseline_is_eq_2_and_its_module_reads_the_margin() -> None:
    u, v = pairs(seed=1)
    labels = torch.tensor([1, 0, 1, 0, 0, 1])
    loss = ContrastiveThresholdLoss(margin=0.1)
    got = loss({"sentence1": u, "sentence2": v}, labels)
    assert float(got) == pytest.approx(contrastive_by_hand(u, v, labels, 0.1), rel=1e-12)
    assert float(got) != pytest.approx(contrastive_by_hand(u, v, labels, 0.5), rel=1e-3)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [([], True), ([3.0], True), ([1.0, 1.0], True), ([1.0, 2.0], False), ([2.0, 1.0, 1.0], False)],
)
def test_a_batch_has_an_ordered_pair_when_two_labels_differ(labels, expected) -> None:
    assert bool(has_no_ordered_pair(torch.tensor(labels))) is expected


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda u, v: pairwise_cosine(u[None], v[None]),
            "expected two (N, d) embedding tensors of the same shape, got (1, 6, 4) and (1, 6, 4)",
        ),
        (
            lambda u, v: contrastive_threshold_loss(u, v, torch.ones(4)),
            "expected 6 labels (one per pair), got 4 with shape (4,)",
        ),
        (
            lambda u, v: contrastive_threshold_loss(u, v, torch.full((6,), 0.5)),
            "contrastive_threshold_loss needs binary labels (0 or 1)",
        ),
        (
            lambda u, v: cosent_loss(torch.ones(6), torch.ones(4)),
            "expected one score per label, got scores (6,) and labels (4,)",
        ),
    ],
)
def test_bad_inputs_are_refused_with_their_whole_message(call, message: str) -> None:
    u, v = pairs()
    with pytest.raises(ValueError) as error:
        call(u, v)
    assert str(error.value) == message


def test_bf16_embeddings_give_float32_cosines() -> None:
    u, v = (x.to(torch.bfloat16) for x in pairs(seed=2, dtype=torch.float32))
    cos = pairwise_cosine(u, v)
    assert cos.dtype == torch.float32
    torch.testing.assert_close(cos, pairwise_cosine(u.float(), v.float()), rtol=0, atol=0)


def test_labels_follow_the_scores_to_their_device() -> None:
    """Scores on the meta device (a stand-in for a GPU), labels on the CPU: cosent_loss
    moves the labels, or comparing them with the scores' matrix fails."""
    scores = torch.empty(5, device="meta")
    out = cosent_loss(scores, torch.tensor([1.0, 0.0, 2.0, 1.0, 0.0]))
    assert out.device.type == "meta"


def test_the_ranking_loss_reads_its_scale_and_notes_degenerate_batches() -> None:
    u, v = pairs(seed=3)
    labels = torch.tensor([0.5, 4.0, 2.0, 3.0, 1.0, 2.5], dtype=torch.float64)
    loss = CoSENTRankingLoss(scale=5.0)
    got = loss({"sentence1": u, "sentence2": v}, labels)
    torch.testing.assert_close(got, cosent_loss(pairwise_cosine(u, v), labels, 5.0))
    ((reason, happened),) = loss.pop_degenerate()
    assert reason == "no two distinct labels" and not bool(happened)
    loss({"sentence1": u, "sentence2": v}, torch.full((6,), 2.0, dtype=torch.float64))
    ((reason, happened),) = loss.pop_degenerate()
    assert reason == "no two distinct labels" and bool(happened)


def test_gather_ranks_every_processs_pairs(monkeypatch) -> None:
    """With gather: CoSENT over the gathered scores and labels (a stand-in gather that
    appends a second process's rows, labels passed in the scores' dtype), through
    scale_gathered_gradient; a batch whose local labels are all equal is not degenerate
    when the gathered ones differ."""
    seen: list[torch.dtype] = []

    def fake_gather(tensor: torch.Tensor) -> torch.Tensor:
        seen.append(tensor.dtype)
        return torch.cat([tensor, tensor.flip(0) + 1])

    scaled: list[torch.Tensor] = []

    def fake_scale(tensor: torch.Tensor) -> torch.Tensor:
        scaled.append(tensor)
        return tensor * 1.0

    monkeypatch.setattr(cosent_module, "all_gather_with_grad", fake_gather)
    monkeypatch.setattr(cosent_module, "scale_gathered_gradient", fake_scale)
    u, v = pairs(seed=4, dtype=torch.float32)
    labels = torch.full((6,), 2, dtype=torch.long)
    loss = CoSENTRankingLoss(scale=5.0, gather=True)
    got = loss({"sentence1": u, "sentence2": v}, labels)
    assert seen == [torch.float32, torch.float32] and len(scaled) == 1
    scores = pairwise_cosine(u, v)
    want = cosent_loss(fake_gather(scores), fake_gather(labels.float()), 5.0)
    torch.testing.assert_close(got, want)
    ((reason, happened),) = loss.pop_degenerate()
    assert reason == "no two distinct labels" and torch.is_tensor(happened) and not happened
    local = CoSENTRankingLoss(scale=5.0)
    local({"sentence1": u, "sentence2": v}, labels)
    assert bool(local.pop_degenerate()[0][1])


def test_the_contrastive_loss_refuses_other_shapes_naming_both() -> None:
    """Found by the mutation pass of 2026-11-27: the whole message of each shape refusal."""
    import torch

    from sts_cosent.loss import contrastive_threshold_loss

    message = "expected two (N, d) embedding tensors of the same shape, got {} and {}"
    labels = torch.tensor([1.0, 0.0])
    with pytest.raises(ValueError) as three_d:
        contrastive_threshold_loss(torch.ones(2, 3, 4), torch.ones(2, 3, 4), labels)
    assert str(three_d.value) == message.format((2, 3, 4), (2, 3, 4))
    with pytest.raises(ValueError) as mismatched:
        contrastive_threshold_loss(torch.ones(2, 3), torch.ones(2, 4), labels)
    assert str(mismatched.value) == message.format((2, 3), (2, 4))


def test_embeddings_of_three_dimensions_are_refused_even_of_the_same_shape() -> None:
    from sts_cosent.loss import _check_pairs

    u = torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match=r"expected two \(N, d\) embedding tensors"):
        _check_pairs(u, u.clone())
