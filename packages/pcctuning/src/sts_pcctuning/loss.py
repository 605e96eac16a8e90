r"""Pcc-tuning's second-stage loss: one minus the Pearson correlation of the batch.

Stage 2 of Pcc-tuning (Zhang, Li and others, 2024; eq. 9) trains on fine-grained STS
scores with

.. math::

    \mathcal{L} = 1 - r, \qquad
    r = \frac{\sum_i (x_i - \bar x)(y_i - \bar y)}
             {\sqrt{\sum_i (x_i - \bar x)^2}\,\sqrt{\sum_i (y_i - \bar y)^2}}

where :math:`x_i = \cos(h_i, h_i')` is the cosine similarity of the i-th pair's embeddings
and :math:`y_i` its gold score, over the batch (gathered across processes with
``gather_across_processes``). This is the exact sample Pearson correlation: the same
normalisation in the numerator and the denominator (the authors' ``tune.py`` divides a
mean by standard deviations with Bessel's correction, i.e. :math:`r\,(n-1)/n`).

A batch without a correlation — fewer than two pairs, all gold scores equal, or all
cosines equal — gives a zero loss and a zero gradient (never NaN), and is counted as
degenerate (the run reports how often).

Stage 1 is the core's ``infonce`` loss with the hard-negative column (eq. 8).

Reference: Bowen Zhang and Chunping Li, "Pcc-tuning: Breaking the Contrastive Learning
Ceiling in Semantic Textual Similarity", EMNLP 2024 (arXiv 2406.09790); code:
github.com/ZBWpro/Pcc-tuning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from sts_core.distributed import all_gather_with_grad, scale_gathered_gradient
from sts_core.losses import (
    EmbeddingLoss,
    compute_dtype,
    config_settings,
    pairwise_cosine,
    register_loss,
)

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig

__all__ = [
    "CITATION",
    "DEGENERATE_REASONS",
    "PearsonLoss",
    "degenerate_batch",
    "pearson_correlation",
    "pearson_loss",
]

CITATION = """@inproceedings{zhang2024pcctuning,
  title={Pcc-tuning: Breaking the Contrastive Learning Ceiling in Semantic Textual
         Similarity},
  author={Zhang, Bowen and Li, Chunping},
  booktitle={Proceedings of the 2024 Conference on Empirical Methods in Natural Language
             Processing},
  year={2024}
}"""
#: why a batch has no Pearson correlation
DEGENERATE_REASONS = ("fewer than two pairs", "gold scores all equal", "cosines all equal")


def _centred_sums(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``Σ(x − x̄)²``, ``Σ(y − ȳ)²``, ``Σ(x − x̄)(y − ȳ)``."""
    xc, yc = x - x.mean(), y - y.mean()
    return (xc * xc).sum(), (yc * yc).sum(), (xc * yc).sum()


def _spread(centred_squares: Tensor, values: Tensor) -> Tensor:
    """Whether ``Σ(v − v̄)²`` is more than rounding noise: above ``n·(64·ε·max(1, |v|))²``
    (``ε`` of the dtype), so e.g. cosines that are all 1 up to rounding count as equal."""
    eps = torch.finfo(values.dtype).eps
    scale = values.detach().abs().max().clamp(min=1.0)
    return centred_squares > values.numel() * (64 * eps * scale) ** 2


def degenerate_batch(x: Tensor, y: Tensor) -> dict[str, Tensor]:
    """Boolean 0-d tensors by reason (:data:`DEGENERATE_REASONS`): which makes ``r``
    undefined for predictions ``x`` and gold scores ``y`` (no GPU sync)."""
    short = torch.tensor(x.numel() < 2, device=x.device)
    if x.numel() < 2:
        false = torch.zeros((), dtype=torch.bool, device=x.device)
        return dict(zip(DEGENERATE_REASONS, (short, false, false), strict=True))
    x, y = x.detach(), y.detach().to(x.dtype)
    sxx, syy, _ = _centred_sums(x, y)
    gold_flat = ~_spread(syy, y)
    return {
        DEGENERATE_REASONS[0]: short,
        DEGENERATE_REASONS[1]: gold_flat,
        DEGENERATE_REASONS[2]: ~_spread(sxx, x) & ~gold_flat,
    }


def pearson_correlation(x: Tensor, y: Tensor) -> Tensor:
    r"""The sample Pearson correlation of two ``(n,)`` vectors (0 where it is undefined:
    ``n < 2`` or a zero variance; the gradient is then 0, not NaN). Computed in at least
    float32.

    .. math::

        r = \frac{\sum_i (x_i - \bar x)(y_i - \bar y)}
                 {\sqrt{\sum_i (x_i - \bar x)^2 \sum_i (y_i - \bar y)^2}}
    """
    if x.shape != y.shape or x.dim() != 1:
        raise ValueError(
            f"expected two (n,) vectors of the same length, got {tuple(x.shape)} and "
            f"{tuple(y.shape)}"
        )
    return _correlation(x, y)[0]


def _correlation(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """``r`` (0 where undefined) and whether it is defined (a boolean 0-d tensor)."""
    dtype = compute_dtype(x)
    x, y = x.to(dtype), y.to(device=x.device, dtype=dtype)
    if x.numel() < 2:
        return x.sum() * 0.0, torch.zeros((), dtype=torch.bool, device=x.device)
    sxx, syy, sxy = _centred_sums(x, y)
    defined = _spread(sxx, x) & _spread(syy, y)
    # where() on both sides: the undefined branch never divides by zero (no NaN gradient)
    denominator = torch.where(defined, sxx * syy, torch.ones_like(sxx)).sqrt()
    return torch.where(defined, sxy / denominator, sxy * 0.0), defined


def pearson_loss(left: Tensor, right: Tensor, labels: Tensor) -> Tensor:
    r"""Eq. 9 of Pcc-tuning: :math:`1 - r(\cos(u_i, v_i), y_i)` over the batch; 0 (with a
    zero gradient) for a batch without a correlation.

    Args:
        left, right: ``(N, d)`` embeddings of the pairs' two sentences.
        labels: ``(N,)`` gold scores (any scale: Pearson is invariant to it).
    """
    if left.shape != right.shape or left.shape[0] != labels.reshape(-1).shape[0]:
        raise ValueError(
            f"shapes do not match: {tuple(left.shape)}, {tuple(right.shape)}, {tuple(labels.shape)}"
        )
    return _one_minus_r(pairwise_cosine(left, right), labels.reshape(-1))


def _one_minus_r(cosine: Tensor, labels: Tensor) -> Tensor:
    """``1 − r``, or 0 with no gradient where ``r`` is undefined."""
    r, defined = _correlation(cosine, labels)
    return torch.where(defined, 1.0 - r, r)


@register_loss("pearson")
class PearsonLoss(EmbeddingLoss):
    """Pcc-tuning stage 2 (eq. 9): ``1 − Pearson(cos(u_i, v_i), y_i)`` over the batch.

    Config fields read: ``gather_across_processes`` (the cosines and labels of every
    process's batch: one correlation over the global batch, as in the authors' code, with
    the gradient through the local part scaled so the step equals one process over the
    whole batch). Without gathering, each process correlates its own batch and DDP averages
    the gradients (a mean of per-process correlations, not the global one).

    Degenerate batches (:data:`DEGENERATE_REASONS`) give 0 with no gradient and are counted
    by the trainer (``degenerate_batches`` in ``metrics.json``; a warning when they are
    ≥ 10 % of the batches).

    Inputs:
        +-------------------------------------------+--------------------------------------+
        | Inputs                                    | Labels                               |
        +===========================================+======================================+
        | ``(sentence1, sentence2)`` embedding pairs | a similarity score (any scale)      |
        +-------------------------------------------+--------------------------------------+

    Relations:
        - ``cosine_mse`` fits the cosine's values; this fits only their linear relation to
          the scores (invariant to scale and shift of either).
        - CoSENT ranks the pairs; Pearson weighs how far each cosine is from the line.
    """

    title = "1 − Pearson correlation of the batch's cosines and scores (eq. 9)"

    citation = CITATION

    def __init__(self, gather: bool = False) -> None:
        super().__init__()
        self.gather = gather

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> PearsonLoss:
        return cls(**config_settings(config, gather="gather_across_processes"))

    def config_dict(self) -> dict[str, Any]:
        return {"gather": self.gather}

    def forward(self, embeddings: Mapping[str, Tensor], labels: Tensor | None) -> Tensor:
        if labels is None:
            raise ValueError("loss pearson needs gold scores (the label column)")
        cosine = pairwise_cosine(embeddings["sentence1"], embeddings["sentence2"])
        labels = labels.reshape(-1).to(device=cosine.device, dtype=cosine.dtype)
        if self.gather:
            cosine, labels = all_gather_with_grad(cosine), all_gather_with_grad(labels)
        for reason, happened in degenerate_batch(cosine, labels).items():
            self.note_degenerate(reason, happened)
        loss = _one_minus_r(cosine, labels)
        return scale_gathered_gradient(loss) if self.gather else loss
