"""BSC against sentence-transformers' in-batch losses, on the same embeddings: with every
pair positive, τ 0.1, L2 normalisation and both directions (the defaults), BSC is exactly
twice ``MultipleNegativesSymmetricRankingLoss(model, scale=10)``, which averages the two
directions where BSC (eq. 1) sums them, and its first direction alone is
``MultipleNegativesRankingLoss(model, scale=10)``. Labeled negatives break the relation:
they stay in BSC's denominators, while the peer row ``st:mnsrl`` drops them from its data.
Each check also changes one setting and sees the values differ."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from sts_bsc import BSCLoss

st_losses = pytest.importorskip("sentence_transformers.sentence_transformer.losses")

M, D = 12, 16
LABELS = torch.tensor([0.9, 0.2, 0.8, 0.7, 0.1, 1.0, 0.65, 0.3, 0.95, 0.0, 0.75, 0.85])


@pytest.fixture(scope="module")
def peer_model(tiny_bert_nodropout_dir: Path) -> Any:
    """A model for the peer's constructors (``compute_loss_from_embeddings`` never runs it)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    return sentence_transformers.SentenceTransformer(str(tiny_bert_nodropout_dir), device="cpu")


def symmetric_peer(model: Any, scale: float) -> Any:
    """``MultipleNegativesSymmetricRankingLoss`` (deprecated in 6.x, hence the filter)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return st_losses.MultipleNegativesSymmetricRankingLoss(model, scale=scale)


def embeddings(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    queries, answers = torch.randn(2, M, D, generator=generator).unbind(0)
    return queries, answers


def test_bsc_is_twice_the_peers_symmetric_ranking_loss(peer_model: Any) -> None:
    queries, answers = embeddings()
    pairs = {"sentence1": queries, "sentence2": answers}
    bsc = BSCLoss()  # τ 0.1, l2, symmetric, every pair positive
    assert (bsc.temperature, bsc.normalization, bsc.symmetric) == (0.1, "l2", True)
    per_direction = st_losses.MultipleNegativesRankingLoss(
        peer_model,
        scale=10.0,
        directions=("query_to_doc", "doc_to_query"),
        partition_mode="per_direction",
    )
    with torch.no_grad():
        ours = bsc(pairs, None)
        symmetric = float(
            symmetric_peer(peer_model, 10.0).compute_loss_from_embeddings([queries, answers], None)
        )
        recommended = float(per_direction.compute_loss_from_embeddings([queries, answers], None))
        one_way = st_losses.MultipleNegativesRankingLoss(peer_model, scale=10.0)
        first = float(one_way.compute_loss_from_embeddings([queries, answers], None))
    # measured (float32): BSC 8.82414 against 2 × 4.41207, |Δ| 9.5e-7; L0 4.43032 against
    # MNRL's, |Δ| 4.8e-7; the per-direction MNRL equals MNSRL exactly; τ 0.05: 15.76
    assert float(ours["loss"]) == pytest.approx(2 * symmetric, rel=1e-6, abs=1e-6)
    assert recommended == pytest.approx(symmetric, rel=1e-6, abs=1e-6)  # its replacement
    assert float(ours["bsc_l0"]) == pytest.approx(first, rel=1e-6, abs=1e-6)
    # not equal (a factor 2), and another τ gives another value: the comparison can fail
    assert float(ours["loss"]) != pytest.approx(symmetric, rel=1e-3)
    with torch.no_grad():
        other = float(BSCLoss(temperature=0.05)(pairs, None)["loss"])
    assert other != pytest.approx(2 * symmetric, rel=1e-3)


def test_labeled_negatives_break_the_relation(peer_model: Any) -> None:
    """With ``label_threshold`` the negatives (label ≤ 0.6) stay in BSC's denominators and
    the sum is divided by the whole batch; ``st:mnsrl`` trains on the positives alone."""
    queries, answers = embeddings(seed=1)
    positive = LABELS > 0.6
    with torch.no_grad():
        ours = float(
            BSCLoss(label_threshold=0.6)({"sentence1": queries, "sentence2": answers}, LABELS)[
                "loss"
            ]
        )
        only_positives = float(
            BSCLoss()({"sentence1": queries[positive], "sentence2": answers[positive]}, None)[
                "loss"
            ]
        )
        peer = float(
            symmetric_peer(peer_model, 10.0).compute_loss_from_embeddings(
                [queries[positive], answers[positive]], None
            )
        )
    # measured: 8 positives; BSC on them alone 7.94011 = 2 × the peer's (|Δ| 0), with the
    # 4 negatives in its denominators 5.84401
    assert only_positives == pytest.approx(2 * peer, rel=1e-6, abs=1e-6)
    assert ours != pytest.approx(2 * peer, rel=1e-3)
