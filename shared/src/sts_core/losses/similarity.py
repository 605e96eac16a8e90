"""Losses every method can use: cosine MSE and in-batch InfoNCE (with hard negatives)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor

from sts_core.distributed import all_gather_with_grad, scale_gathered_gradient
from sts_core.losses.registry import (
    EmbeddingLoss,
    compute_dtype,
    config_settings,
    register_loss,
    zero_loss,
)

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig

SBERT_CITATION = """@inproceedings{reimers-2019-sentence-bert,
  title={Sentence-BERT: Sentence Embeddings using Siamese BERT-Networks},
  author={Reimers, Nils and Gurevych, Iryna},
  booktitle={EMNLP-IJCNLP},
  year={2019}
}"""
SIMCSE_CITATION = """@inproceedings{gao2021simcse,
  title={SimCSE: Simple Contrastive Learning of Sentence Embeddings},
  author={Gao, Tianyu and Yao, Xingcheng and Chen, Danqi},
  booktitle={EMNLP},
  year={2021}
}"""


def cosine_mse_loss(left: Tensor, right: Tensor, labels: Tensor) -> Tensor:
    """Mean squared error between cosine similarity and the gold score.

    L = (1/N) Σ_i (cos(u_i, v_i) − y_i)²,  with y_i the gold similarity rescaled to [0, 1]
    (set ``score_range`` in the recipe). This is sentence-transformers' CosineSimilarityLoss
    (Reimers & Gurevych, 2019, "Sentence-BERT", §3) and the cosine MSE baseline of CoSENT.

    Args:
        left, right: ``(N, d)`` embeddings of the two sentences of each pair.
        labels: ``(N,)`` gold scores.
    """
    if left.shape != right.shape or left.shape[0] != labels.shape[0]:
        raise ValueError(
            f"shapes do not match: {tuple(left.shape)}, {tuple(right.shape)}, {tuple(labels.shape)}"
        )
    cosine = pairwise_cosine(left, right)
    return F.mse_loss(cosine, labels.to(cosine.dtype))


def pairwise_cosine(u: Tensor, v: Tensor) -> Tensor:
    """Row-wise cosine similarity ``cos(u_i, v_i)``, computed in (at least) float32.

    Args:
        u, v: ``(N, d)`` embeddings of the first and second sentence of each pair.

    Returns:
        ``(N,)`` cosines in ``[-1, 1]``; float32 for half inputs, float64 for float64 inputs.
        A zero vector gives cosine 0 (norms are clamped at 1e-8, as in
        :func:`torch.nn.functional.cosine_similarity`).
    """
    if u.dim() != 2 or u.shape != v.shape:
        raise ValueError(
            f"expected two (N, d) embedding tensors of the same shape, got {tuple(u.shape)} "
            f"and {tuple(v.shape)}"
        )
    dtype = compute_dtype(u)
    return F.cosine_similarity(u.to(dtype), v.to(dtype), dim=-1)


def in_batch_infonce_loss(
    anchors: Tensor,
    positives: Tensor,
    temperature: float = 0.05,
    hard_negatives: Tensor | None = None,
) -> Tensor:
    r"""InfoNCE with in-batch negatives (SimCSE's supervised form), optionally with one hard
    negative per anchor in every denominator (Pcc-tuning stage 1, eq. 8).

    .. math::

        \mathcal{L} = -\frac{1}{N}\sum_{i=1}^{N}
            \log \frac{e^{\cos(h_i, h_i^+)/\tau}}
                      {\sum_{j=1}^{N} \left(e^{\cos(h_i, h_j^+)/\tau}
                       + e^{\cos(h_i, h_j^-)/\tau}\right)}

    (the ``h_j^-`` terms only with ``hard_negatives``). ``positives[i]`` is the positive of
    ``anchors[i]``; every other row's positive (and every hard negative) is a negative for
    it. Cross-entropy over the ``N × N`` (or ``N × 2N``) cosine matrix with the diagonal as
    targets. Computed in at least float32.

    Args:
        anchors, positives: ``(N, d)``, row-aligned.
        temperature: ``τ > 0``.
        hard_negatives: optional ``(N, d)``.

    Relations: sentence-transformers' ``MultipleNegativesRankingLoss`` with
    ``scale = 1/τ`` (its default 20 is τ 0.05, ours), the hard negatives as its third
    column: the two agree to float32 rounding at τ 0.05 and 0.1, with and without them
    (``shared/tests/test_losses_peer.py``).
    """
    if anchors.dim() != 2 or anchors.shape != positives.shape:
        raise ValueError(
            f"expected two (N, d) embedding tensors of the same shape, got "
            f"{tuple(anchors.shape)} and {tuple(positives.shape)}"
        )
    if hard_negatives is not None and hard_negatives.shape != anchors.shape:
        raise ValueError(f"hard_negatives must be {tuple(anchors.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    dtype = compute_dtype(anchors)
    a = F.normalize(anchors.to(dtype), dim=-1)
    b = F.normalize(positives.to(dtype), dim=-1)
    logits = a @ b.T / temperature
    if hard_negatives is not None:
        c = F.normalize(hard_negatives.to(dtype), dim=-1)
        logits = torch.cat([logits, a @ c.T / temperature], dim=1)
    targets = torch.arange(anchors.shape[0], device=anchors.device)
    return F.cross_entropy(logits, targets)


@register_loss("cosine_mse")
class CosineMSELoss(EmbeddingLoss):
    """:func:`cosine_mse_loss` on (sentence1, sentence2, score); scores in [0, 1]."""

    title = "cosine-similarity MSE (SBERT's CosineSimilarityLoss)"

    citation = SBERT_CITATION

    def forward(self, embeddings: Mapping[str, Tensor], labels: Tensor) -> Tensor:  # type: ignore[override]  # labels needed
        return cosine_mse_loss(embeddings["sentence1"], embeddings["sentence2"], labels)


@register_loss("infonce")
class InfoNCELoss(EmbeddingLoss):
    """:func:`in_batch_infonce_loss` over (anchor ``sentence1``, positive ``sentence2``),
    with the ``hard_negative`` column when the data has one.

    Config fields read: ``infonce_temperature`` (τ, default 0.05), ``positive_threshold``
    (only pairs with label ≥ it are positives; none: every pair), ``gather_across_processes``
    (negatives from every process's batch, gradient through the local part, scaled so the
    step equals one process over the whole batch). A batch without a positive pair gives a
    zero loss and is counted as degenerate.
    """

    title = "in-batch InfoNCE, with the hard_negative column in every denominator when present"

    label_kind = None
    citation = SIMCSE_CITATION

    def __init__(
        self,
        temperature: float = 0.05,
        positive_threshold: float | None = None,
        gather: bool = False,
    ) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = temperature
        self.positive_threshold = positive_threshold
        self.gather = gather

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> InfoNCELoss:
        settings = config_settings(
            config,
            temperature="infonce_temperature",
            positive_threshold="positive_threshold",
            gather="gather_across_processes",
        )
        return cls(**settings)

    def config_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "positive_threshold": self.positive_threshold,
            "gather": self.gather,
        }

    @classmethod
    def required_label_kind(cls, config: BaseConfig | None) -> str | None:
        """Labels are needed only to select positives (``positive_threshold``)."""
        return "score" if cls.from_config(config).positive_threshold is not None else None

    def forward(self, embeddings: Mapping[str, Tensor], labels: Tensor | None) -> Tensor:
        anchors, positives = embeddings["sentence1"], embeddings["sentence2"]
        negatives = embeddings.get("hard_negative")
        reference = anchors
        if self.positive_threshold is not None:
            if labels is None:
                raise ValueError("positive_threshold is set but the batch has no labels")
            keep = labels >= self.positive_threshold
            anchors, positives = anchors[keep], positives[keep]
            negatives = None if negatives is None else negatives[keep]
        if self.gather:  # every process gathers, even with no positive of its own
            anchors, positives = all_gather_with_grad(anchors), all_gather_with_grad(positives)
            negatives = None if negatives is None else all_gather_with_grad(negatives)
        if anchors.shape[0] == 0:
            self.note_degenerate("no positive pair")
            return zero_loss(reference)
        loss = in_batch_infonce_loss(anchors, positives, self.temperature, negatives)
        return scale_gathered_gradient(loss) if self.gather else loss
