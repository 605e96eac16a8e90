"""CoSENT loss (Huang et al., 2024) and the baselines its paper compares against.

Every loss here is a function of tensors (embeddings, scores, labels) that returns a scalar; none
touches a model or a tokenizer. All of them compute in at least float32, so half-precision
(fp16/bf16) inputs are upcast before any exponential, and they return a float32 scalar (float64
for float64 inputs).

- :func:`cosent_loss`: CoSENT, eq. 10 (sentence embeddings) and eq. 11 (cross-encoder scores).
- :func:`contrastive_threshold_loss`: the cosine contrastive loss, eq. 2.
- :func:`in_batch_infonce_loss`: InfoNCE with in-batch negatives, eq. 3,
  :func:`cosine_mse_loss`: cosine MSE, eq. 4, and :func:`softmax_classifier_loss`: SBERT's
  classification objective, eq. 5, are the core's (``sts_core.losses``, registered there as
  ``infonce``, ``cosine_mse`` and ``softmax``), re-exported here.

The registered modules (``loss: <name>`` in a recipe, see ``sts_core.losses``):
``cosent`` (:class:`CoSENTRankingLoss`) and ``contrastive`` (:class:`ContrastiveThresholdLoss`)
here; ``softmax`` (:class:`SoftmaxClassifierLoss`) is the core's.

Reference: X. Huang, H. Peng, D. Zou, Z. Liu, J. Li, K. Liu, J. Wu, J. Su and P. S. Yu,
"CoSENT: Consistent Sentence Embedding via Similarity Ranking", IEEE/ACM Transactions on
Audio, Speech, and Language Processing, 2024, doi:10.1109/TASLP.2024.3402087.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from sts_core.distributed import all_gather_with_grad, scale_gathered_gradient
from sts_core.losses import (
    EmbeddingLoss,
    compute_dtype,
    config_settings,
    cosine_mse_loss,
    in_batch_infonce_loss,
    pairwise_cosine,
    register_loss,
    softmax_classifier_loss,
)

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig

__all__ = [
    "CoSENTLoss",
    "CoSENTRankingLoss",
    "ContrastiveThresholdLoss",
    "contrastive_threshold_loss",
    "cosent_loss",
    "cosine_mse_loss",
    "in_batch_infonce_loss",
    "pairwise_cosine",
    "softmax_classifier_loss",
]


def _check_pairs(u: Tensor, v: Tensor, labels: Tensor | None = None) -> None:
    if u.dim() != 2 or u.shape != v.shape:
        raise ValueError(
            f"expected two (N, d) embedding tensors of the same shape, got {tuple(u.shape)} "
            f"and {tuple(v.shape)}"
        )
    if labels is not None and labels.numel() != u.shape[0]:
        raise ValueError(
            f"expected {u.shape[0]} labels (one per pair), got {labels.numel()} "
            f"with shape {tuple(labels.shape)}"
        )


def cosent_loss(scores: Tensor, labels: Tensor, scale: float = 20.0) -> Tensor:
    r"""CoSENT: a ranking loss over every ordered pair of sentence pairs in the batch.

    .. math::

        \mathcal{L} = \log\Big(1 + \sum_{\mathrm{sim}(i,j) > \mathrm{sim}(k,l)}
                      e^{\lambda\,(s_{kl} - s_{ij})}\Big)

    where ``s`` are the predicted similarities of the pairs (``cos(u_i, u_j)`` of the two
    sentence embeddings, eq. 10, e.g. from :func:`pairwise_cosine`; or a cross-encoder's score
    ``f(i, j)``, eq. 11), ``sim`` the gold labels and ``λ = scale``. The sum runs over all
    ordered pairs of pairs of the batch whose gold labels are *strictly* ordered, so the loss
    asks that a pair labelled more similar gets a higher predicted similarity, and nothing
    else: the absolute values of the scores are left to the model. With binary labels this is
    eq. 8 (every positive against every negative pair).

    Computation: ``logsumexp([0] + [λ(s_kl − s_ij) for each ordered pair])`` in float32 (also
    for fp16/bf16 scores), with unordered entries of the ``N × N`` matrix set to ``−inf``
    (exact, so they add ``e^{−inf} = 0`` and no gradient) rather than a large finite constant,
    which overflows in half precision. Stable for any ``λ·Δ`` (e.g. 2000). Memory is
    ``O(N²)`` floats, negligible for training batch sizes.

    Edge cases: tied labels contribute nothing (no term either way). A batch without any
    ordered pair (a single pair, or all labels equal) gives exactly ``0.0``, still connected to
    ``scores``' graph, so ``backward()`` works and gives a zero gradient.

    Across processes: the ranking is over the pairs passed in. Under DDP each process sees only
    its own batch unless the trainer gathers ``scores`` and ``labels`` of all processes first
    (``sts_core.training.all_gather_with_grad``, gradient scaled by ``scale_gathered_gradient``);
    this function does no communication itself.

    Args:
        scores: ``(N,)`` (or ``(N, 1)``) predicted similarity of each pair: cosines, or raw
            cross-encoder scores (logits).
        labels: ``(N,)`` gold labels; only their order matters. Scores (0–5 STS), binary
            (0/1 or bool) or ordered classes (the NLI readers' entailment 2 > neutral 1 >
            contradiction 0) all work.
        scale: ``λ``, the inverse temperature applied to score differences; the paper uses 20.

    Returns:
        The scalar loss (float32, or float64 for float64 scores).

    References:
        Huang et al., "CoSENT: Consistent Sentence Embedding via Similarity Ranking",
        IEEE/ACM TASLP 2024, §III-B, eqs. 8, 10 and 11. doi:10.1109/TASLP.2024.3402087.

    Requirements:
        Labels whose order reflects similarity; at least two distinct labels in the batch for a
        non-zero loss.

    Inputs:
        +----------------------------------------------+----------------------------------+
        | Inputs                                       | Labels                           |
        +==============================================+==================================+
        | ``(N,)`` scores: cosine of each pair's       | ``(N,)`` float score, binary, or |
        | embeddings, or a cross-encoder's output      | ordered class id                 |
        +----------------------------------------------+----------------------------------+

    Relations:
        - Same loss as sentence-transformers' ``CoSENTLoss`` (which uses an ``O(N log N)``
          sort-based evaluation of the same sum): on the same cosines, tied labels included,
          the two agree to float32 rounding at scales 20 and 5 (20 is both defaults;
          ``shared/tests/test_losses_peer.py``).
        - Eq. 11 has no counterpart there: sentence-transformers 6.2 has no CoSENT loss for
          cross-encoders (its ``CoSENTLoss`` takes a bi-encoder's embeddings; the
          cross-encoder losses' closest, ``RankNetLoss``, ranks each query's documents, not
          a batch's pairs). Here eq. 11 is this function on a cross-encoder's scores
          (:class:`~sts_cosent.trainer.CoSENTCrossEncoderTrainer`).
        - :func:`cosine_mse_loss` regresses the cosine onto the label's value; CoSENT only
          uses the labels' order.
        - Eq. 9: with one "target" pair this is softmax cross-entropy; CoSENT generalises it to
          all ordered pairs of pairs.

    Example:
        >>> import torch
        >>> scores = torch.tensor([0.9, 0.2])  # pair 0 labelled more similar, ranked higher
        >>> round(cosent_loss(scores, torch.tensor([1.0, 0.0]), scale=1.0).item(), 4)
        0.4032
        >>> # log(1 + e^(0.2 - 0.9)) = 0.4032; with the order of the labels reversed:
        >>> round(cosent_loss(scores, torch.tensor([0.0, 1.0]), scale=1.0).item(), 4)
        1.1032
        >>> cosent_loss(scores, torch.tensor([1.0, 1.0])).item()  # no ordered pair
        0.0
    """
    if scores.numel() != labels.numel():
        raise ValueError(
            f"expected one score per label, got scores {tuple(scores.shape)} and labels "
            f"{tuple(labels.shape)}"
        )
    dtype = compute_dtype(scores)
    s = scores.reshape(-1).to(dtype) * scale
    y = labels.reshape(-1).to(scores.device)  # bool labels compare as 0 < 1
    # diff[a, b] = λ(s_b − s_a): the term for "a ranked above b" when label_a > label_b.
    diff = s.unsqueeze(0) - s.unsqueeze(1)
    ordered = y.unsqueeze(1) > y.unsqueeze(0)
    terms = diff.masked_fill(~ordered, float("-inf")).reshape(-1)
    return torch.logsumexp(torch.cat([terms.new_zeros(1), terms]), dim=0)


class CoSENTLoss(nn.Module):
    """Module form of :func:`cosent_loss` holding ``scale``: ``loss(scores, labels)``."""

    def __init__(self, scale: float = 20.0) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, scores: Tensor, labels: Tensor) -> Tensor:
        return cosent_loss(scores, labels, scale=self.scale)

    def extra_repr(self) -> str:
        return f"scale={self.scale}"


def contrastive_threshold_loss(u: Tensor, v: Tensor, labels: Tensor, margin: float = 0.5) -> Tensor:
    r"""Cosine contrastive loss with a threshold, eq. 2 of the CoSENT paper, as written there.

    .. math::

        \mathcal{L} = \frac{1}{N}\sum_i \tfrac12\, y_i\,(1 - \cos(u_i, v_i))^2
                      + \tfrac12\,(1 - y_i)\,\max(\epsilon, \cos(u_i, v_i))^2

    with ``ε = margin``. Positive pairs (``y = 1``) are pulled to cosine 1; negative pairs
    (``y = 0``) are pushed down until their cosine reaches ``ε``. The ``max(ε, ·)`` term is
    *not* a hinge: below the threshold it is the constant ``ε²/2`` (not 0), and its gradient
    is exactly zero once ``cos ≤ ε``, so negatives already under the threshold no longer train.
    Above it the gradient is ``(1 − y)·cos``, pushing the cosine down. With ``ε < 0`` the
    squared term would push negatives with ``ε < cos < 0`` *up* towards 0 (its minimum), so
    use ``margin ≥ 0``. Table I of the paper studies how the result depends on ``ε``.

    Args:
        u, v: ``(N, d)`` embeddings of the two sentences of each pair.
        labels: ``(N,)`` binary labels, 1 similar and 0 dissimilar (bool, int or float);
            any other value raises ``ValueError``.
        margin: ``ε``, the cosine below which negative pairs stop being pushed.

    Returns:
        The mean over the batch (scalar, float32 or float64).

    References:
        Huang et al., CoSENT (TASLP 2024), §III-A, eq. 2, adapting Hadsell, Chopra and LeCun,
        "Dimensionality reduction by learning an invariant mapping", CVPR 2006 (eq. 1).

    Inputs:
        +----------------------------------+------------------------+
        | Inputs                           | Labels                 |
        +==================================+========================+
        | ``(u_i, v_i)`` embedding pairs   | 1 (similar) or 0       |
        +----------------------------------+------------------------+

    Relations:
        - sentence-transformers' ``ContrastiveLoss`` is Hadsell's eq. 1 with a hinge
          ``relu(margin − d)²`` on the cosine *distance*; eq. 2 here is the paper's variant.
        - :func:`cosent_loss` with binary labels (eq. 8) needs no threshold.
    """
    _check_pairs(u, v, labels)
    y = labels.reshape(-1).to(u.device)
    if not bool(((y == 0) | (y == 1)).all()):
        raise ValueError("contrastive_threshold_loss needs binary labels (0 or 1)")
    cos = pairwise_cosine(u, v)
    y = y.to(cos.dtype)
    positive = 0.5 * y * (1.0 - cos).pow(2)
    negative = 0.5 * (1.0 - y) * torch.clamp(cos, min=margin).pow(2)
    return (positive + negative).mean()


CITATION = """@article{huang2024cosent,
  title={CoSENT: Consistent Sentence Embedding via Similarity Ranking},
  author={Huang, Xiang and Peng, Hao and Zou, Dongcheng and Liu, Zhiwei and Li, Jianxin and
          Liu, Kay and Wu, Jia and Su, Jianlin and Yu, Philip S.},
  journal={IEEE/ACM Transactions on Audio, Speech, and Language Processing},
  volume={32},
  pages={2800--2813},
  year={2024}
}"""


def has_no_ordered_pair(labels: Tensor) -> Tensor | bool:
    """Whether no two labels differ (CoSENT then has nothing to rank), as a tensor (no sync)."""
    flat = labels.reshape(-1)
    return True if flat.numel() < 2 else (flat == flat[0]).all()


@register_loss("cosent")
class CoSENTRankingLoss(EmbeddingLoss):
    """CoSENT (eq. 10) on the cosine of each pair's embeddings (:func:`cosent_loss`).

    Config fields read: ``cosent_scale`` (λ), ``gather_across_processes`` (rank the pairs
    of every process's batch: scores and labels all-gathered, gradient through the local
    part, scaled by the world size so DDP's averaging gives the gradient of one process over
    the whole batch; the logged value is the whole batch's loss). A batch with no two
    distinct labels gives 0 and is counted as degenerate.
    """

    title = "CoSENT (eq. 10)"

    citation = CITATION

    def __init__(self, scale: float = 20.0, gather: bool = False) -> None:
        super().__init__()
        self.scale = scale
        self.gather = gather

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> CoSENTRankingLoss:
        return cls(
            **config_settings(config, scale="cosent_scale", gather="gather_across_processes")
        )

    def config_dict(self) -> dict:
        return {"scale": self.scale, "gather": self.gather}

    def forward(self, embeddings: Mapping[str, Tensor], labels: Tensor) -> Tensor:  # type: ignore[override]  # labels needed
        return self.rank(pairwise_cosine(embeddings["sentence1"], embeddings["sentence2"]), labels)

    def rank(self, scores: Tensor, labels: Tensor) -> Tensor:
        """CoSENT over the local batch's scores, or over every process's."""
        if not self.gather:
            self.note_degenerate("no two distinct labels", has_no_ordered_pair(labels))
            return cosent_loss(scores, labels, scale=self.scale)
        gathered_scores = all_gather_with_grad(scores)
        gathered_labels = all_gather_with_grad(labels.to(scores.dtype))
        self.note_degenerate("no two distinct labels", has_no_ordered_pair(gathered_labels))
        loss = cosent_loss(gathered_scores, gathered_labels, scale=self.scale)
        return scale_gathered_gradient(loss)  # same value, gradient × world size


@register_loss("contrastive")
class ContrastiveThresholdLoss(EmbeddingLoss):
    """:func:`contrastive_threshold_loss` (eq. 2) on binary labels; reads
    ``contrastive_margin`` (ε)."""

    title = "contrastive loss with threshold ε (eq. 2, baseline)"

    label_kind = "binary"
    citation = CITATION

    def __init__(self, margin: float = 0.5) -> None:
        super().__init__()
        self.margin = margin

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> ContrastiveThresholdLoss:
        return cls(**config_settings(config, margin="contrastive_margin"))

    def config_dict(self) -> dict:
        return {"margin": self.margin}

    def forward(self, embeddings: Mapping[str, Tensor], labels: Tensor) -> Tensor:  # type: ignore[override]  # labels needed
        u, v = embeddings["sentence1"], embeddings["sentence2"]
        return contrastive_threshold_loss(u, v, labels, margin=self.margin)
