"""Our losses against sentence-transformers' own, on the same inputs: CoSENT against
``CoSENTLoss(model, scale=λ)``, in-batch InfoNCE against
``MultipleNegativesRankingLoss(model, scale=1/τ)`` (with and without a hard-negative column)
and the softmax classifier against ``SoftmaxLoss`` with its classifier's weights copied
into ours, for every pair-feature option we offer. Each test also changes one setting and
checks that the values then differ, so the comparison can fail.

The ranking and in-batch losses are compared through the peer's
``compute_loss_from_embeddings`` on random float32 embeddings; ``SoftmaxLoss`` has no such
method, so it runs its own forward on the tiny BERT's features, ours on that model's
embeddings of them. Nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
import torch

from sts_core.heads import LinearHead
from sts_core.losses import in_batch_infonce_loss, loss_class
from sts_core.losses.classification import (
    DEFAULT_NUM_LABELS,
    DEFAULT_PAIR_FEATURES,
    SoftmaxClassifierLoss,
)
from sts_core.training.config import InfoNCEOptions

st_losses = pytest.importorskip("sentence_transformers.sentence_transformer.losses")

N, D = 12, 16
#: tied labels on purpose (0.8 ×3, 0.1 ×2, 0.3 ×2): ties give no CoSENT term either way
COSENT_LABELS = torch.tensor([0.8, 0.1, 0.9, 0.6, 0.1, 0.8, 0.3, 0.3, 0.5, 0.8, 0.0, 1.0])
SENTENCES_1 = ["a man plays a guitar", "the cat sleeps", "rain falls on the city", "kids run"]
SENTENCES_2 = ["someone plays music", "a dog barks loudly", "it is raining", "children play"]
CLASS_LABELS = torch.tensor([2, 0, 1, 2])
#: our pair features → SoftmaxLoss's (concatenation_sent_rep, _difference, _multiplication);
#: both concatenate in the order u, v, |u − v|, u * v
PEER_FLAGS: dict[str, tuple[bool, bool, bool]] = {
    "u,v,|u-v|": (True, True, False),
    "u,v": (True, False, False),
    "|u-v|": (False, True, False),
    "u,v,|u-v|,u*v": (True, True, True),
}


def field_default(config: type, name: str) -> Any:
    """The default of dataclass field ``name`` of ``config``."""
    return next(field.default for field in dataclasses.fields(config) if field.name == name)


def random_embeddings(columns: int, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return list(torch.randn(columns, N, D, generator=generator).unbind(0))


@pytest.fixture(scope="module")
def peer_model(tiny_bert_nodropout_dir: Path) -> Any:
    """The tiny BERT (dropout 0) as a ``SentenceTransformer``: the peer's losses take a
    model; only ``SoftmaxLoss`` runs it here."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model = sentence_transformers.SentenceTransformer(str(tiny_bert_nodropout_dir), device="cpu")
    return model.eval()


def test_cosent_equals_the_peers_cosent_loss(peer_model: Any) -> None:
    pytest.importorskip("sts_cosent")  # the registered ``cosent`` is the cosent package's
    from sts_cosent.config import CoSENTConfig

    u, v = random_embeddings(2)
    ours = loss_class("cosent")
    peer_default = inspect.signature(st_losses.CoSENTLoss).parameters["scale"].default
    assert ours.from_config(None).scale == peer_default == 20.0  # type: ignore[attr-defined]
    assert field_default(CoSENTConfig, "cosent_scale") == peer_default  # the recipes' default
    for scale in (20.0, 5.0):
        peer = st_losses.CoSENTLoss(peer_model, scale=scale)
        with torch.no_grad():
            expected = peer.compute_loss_from_embeddings([u, v], COSENT_LABELS)
            value = ours(scale=scale)({"sentence1": u, "sentence2": v}, COSENT_LABELS)
        # measured: |Δ| 9.5e-7 at scale 20 (10.4392, about one float32 step), 0 at scale 5
        assert float(value) == pytest.approx(float(expected), rel=1e-6, abs=1e-6), scale
    # another scale gives another value: the comparison can fail
    with torch.no_grad():
        other = ours(scale=5.0)({"sentence1": u, "sentence2": v}, COSENT_LABELS)
        peer_20 = st_losses.CoSENTLoss(peer_model).compute_loss_from_embeddings(
            [u, v], COSENT_LABELS
        )
    assert float(other) != pytest.approx(float(peer_20), rel=1e-3)


@pytest.mark.parametrize("temperature", [0.05, 0.1])
@pytest.mark.parametrize("hard_negatives", [False, True])
def test_infonce_equals_the_peers_multiple_negatives_ranking_loss(
    peer_model: Any, temperature: float, hard_negatives: bool
) -> None:
    anchors, positives, all_negatives = random_embeddings(3, seed=1)
    negatives = all_negatives if hard_negatives else None
    columns = [anchors, positives] + ([all_negatives] if hard_negatives else [])
    embeddings = dict(zip(("sentence1", "sentence2", "hard_negative"), columns, strict=False))
    peer = st_losses.MultipleNegativesRankingLoss(peer_model, scale=1.0 / temperature)
    with torch.no_grad():
        expected = float(peer.compute_loss_from_embeddings(columns, None))
        registered = float(loss_class("infonce")(temperature=temperature)(embeddings, None))
        function = float(in_batch_infonce_loss(anchors, positives, temperature, negatives))
    # measured: max |Δ| 9.5e-7 over the four cases (values 4.72 to 9.61)
    assert registered == pytest.approx(expected, rel=1e-6, abs=1e-6)
    assert function == pytest.approx(expected, rel=1e-6, abs=1e-6)
    # a changed τ, or the hard negatives left out, gives another value
    with torch.no_grad():
        other_tau = float(in_batch_infonce_loss(anchors, positives, 2 * temperature, negatives))
    assert other_tau != pytest.approx(expected, rel=1e-3)
    if hard_negatives:
        with torch.no_grad():
            without = float(in_batch_infonce_loss(anchors, positives, temperature))
        assert without != pytest.approx(expected, rel=1e-3)


def test_infonce_default_temperature_is_the_peers_default_scale() -> None:
    peer_scale = inspect.signature(st_losses.MultipleNegativesRankingLoss).parameters["scale"]
    temperature = loss_class("infonce").from_config(None).temperature  # type: ignore[attr-defined]
    assert 1.0 / temperature == pytest.approx(peer_scale.default) == 20.0
    assert field_default(InfoNCEOptions, "infonce_temperature") == temperature


@pytest.mark.parametrize("features", list(PEER_FLAGS))
def test_softmax_classifier_equals_the_peers_softmax_loss(peer_model: Any, features: str) -> None:
    rep, difference, multiplication = PEER_FLAGS[features]
    dimension = peer_model.get_embedding_dimension()
    torch.manual_seed(0)
    peer = st_losses.SoftmaxLoss(
        peer_model,
        dimension,
        3,
        concatenation_sent_rep=rep,
        concatenation_sent_difference=difference,
        concatenation_sent_multiplication=multiplication,
    )
    head = LinearHead.for_pairs(dimension, 3, features)
    with torch.no_grad():
        head.weight.copy_(peer.classifier.weight)
        head.bias.copy_(peer.classifier.bias)
    ours = SoftmaxClassifierLoss(head)
    tokenized = [peer_model.preprocess(SENTENCES_1), peer_model.preprocess(SENTENCES_2)]
    with torch.no_grad():
        expected = float(peer([dict(t) for t in tokenized], CLASS_LABELS))
        u, v = (peer_model(dict(t))["sentence_embedding"] for t in tokenized)
        value = float(ours({"sentence1": u, "sentence2": v}, CLASS_LABELS))
        # the features in another order, [v; u; …]: another value
        swapped = float(ours({"sentence1": v, "sentence2": u}, CLASS_LABELS))
    # measured: |Δ| 0 for every option (values 1.004 to 1.174); swapped: 0.027 to 0.038 off
    assert value == pytest.approx(expected, rel=1e-6, abs=1e-6)
    if rep:  # |u − v| and u * v are symmetric in u and v: only [u; v] has an order
        assert swapped != pytest.approx(expected, rel=1e-4)


def test_softmax_defaults_are_the_peers() -> None:
    """Our default head reads SoftmaxLoss's default concatenation, u, v, |u − v|."""
    parameters = inspect.signature(st_losses.SoftmaxLoss).parameters
    flags = tuple(
        parameters[f"concatenation_sent_{name}"].default
        for name in ("rep", "difference", "multiplication")
    )
    assert PEER_FLAGS[DEFAULT_PAIR_FEATURES] == flags
    head = SoftmaxClassifierLoss.build_head(None, D)
    assert isinstance(head, LinearHead) and head.pair_features == DEFAULT_PAIR_FEATURES
    assert (head.in_features, head.out_features) == (3 * D, DEFAULT_NUM_LABELS)
