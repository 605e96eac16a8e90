"""Matryoshka over CoSENT equals sentence-transformers' ``MatryoshkaLoss`` over its
``CoSENTLoss`` (scales 20 and 5) on the same model and inputs, to a relative 1e-6."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sts_core.losses.matryoshka import matryoshka_loss_class
from sts_cosent.loss import CoSENTRankingLoss

SENTENCES_1 = ["a man plays a guitar", "the cat sleeps", "rain falls on the city", "kids run"]
SENTENCES_2 = ["someone plays music", "a dog barks loudly", "it is raining", "children play"]
LABELS = torch.tensor([0.8, 0.1, 0.9, 0.6])


def test_matryoshka_cosent_equals_the_peers_matryoshka_loss(
    tiny_bert_nodropout_dir: Path,
) -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss, MatryoshkaLoss

    model = sentence_transformers.SentenceTransformer(str(tiny_bert_nodropout_dir), device="cpu")
    model.eval()
    features = [model.tokenize(SENTENCES_1), model.tokenize(SENTENCES_2)]
    with torch.no_grad():
        embeddings = {
            column: model(dict(feature))["sentence_embedding"]
            for column, feature in zip(("sentence1", "sentence2"), features, strict=True)
        }
    dims, weights = [32, 16, 8], [1.0, 0.5, 2.0]
    for scale in (20.0, 5.0):
        peer = MatryoshkaLoss(model, CoSENTLoss(model, scale=scale), dims, weights)
        with torch.no_grad():
            expected = float(peer([dict(f) for f in features], LABELS))
        ours = matryoshka_loss_class(CoSENTRankingLoss, dims, weights)
        value = float(ours(CoSENTRankingLoss(scale=scale))(embeddings, LABELS)["loss"])
        # float32 log-sum-exps of values near 6.6 agree to a relative 1e-6
        assert value == pytest.approx(expected, rel=1e-6), scale
    cut_less = matryoshka_loss_class(CoSENTRankingLoss, [32, 16], [1.0, 0.5])
    other = cut_less(CoSENTRankingLoss(scale=5.0))(embeddings, LABELS)["loss"]
    assert float(other) != pytest.approx(expected, rel=1e-6)  # other widths, another value
