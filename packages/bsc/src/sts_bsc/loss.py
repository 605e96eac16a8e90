r"""The batch-softmax contrastive (BSC) loss, with labeled negatives, repeated anchors, hard
negatives and the combo with MSE.

Chernyavskiy, Ilvovsky, Kalinin and Nakov, "Batch-Softmax Contrastive Loss for Pairwise
Sentence Scoring Tasks", NAACL 2022 (code: github.com/aschern/BSC-loss).

For a batch of ``m`` pairs with embeddings :math:`Q = (q_i)` (first elements) and
:math:`A = (a_i)` (second elements), normalised (§3.5, below), the score matrix is
:math:`S = Q A^\top / \tau` and (eq. 1–2, 5)

.. math::

    \mathcal{L}_0 = \frac{1}{m}\sum_{i=1}^{m} \mathbb{1}[y_i > t]
        \Big(\log\sum_{j=1}^{m} e^{S_{ij}} - \bar S^{(0)}_{i}\Big), \qquad
    \mathcal{L}_1 = \frac{1}{m}\sum_{i=1}^{m} \mathbb{1}[y_i > t]
        \Big(\log\sum_{j=1}^{m} e^{S_{ji}} - \bar S^{(1)}_{i}\Big)

and :math:`\mathcal{L}_{BSC} = \mathcal{L}_0 + \mathcal{L}_1` (symmetric; :math:`\mathcal{L}_0`
alone otherwise). Only rows whose pair is positive (label above the threshold ``t``; every
row when no threshold is set) contribute; negative pairs stay in every denominator (eq. 5).

The numerators :math:`\bar S` are :math:`S_{ii}` unless the batch repeats an anchor (the
same first-element text in rows :math:`P_q`, eq. 3–4, after SupCon): then every
:math:`(q_i, a_j)`, :math:`i, j \in P_q`, is a positive pair and the numerator is the mean
of their scores, :math:`\bar S^{(0)}_i = \frac{1}{|P^+_i|}\sum_{j\in P^+_i} S_{ij}` over
the positive rows :math:`P^+_i` of :math:`i`'s anchor, and
:math:`\bar S^{(1)}_i = \frac{1}{|P_i|}\sum_{j \in P_i} S_{ji}` over all of its rows.

An extra column of hard negatives :math:`h_j` adds :math:`e^{q_i^\top h_j/\tau}` for every
``j`` to the denominators of :math:`\mathcal{L}_0`.

Normalisation (§3.5): ``l2`` (each embedding to unit length: :math:`S\tau` is the cosine),
``coordinates_l2`` (each coordinate over the batch: :math:`x_{ik} / \lVert x_{\cdot k}
\rVert_2`), ``coordinates_minmax`` (:math:`(x_{ik} - \min_j x_{jk}) / (\max_j x_{jk} -
\min_j x_{jk})`), ``coordinates_range`` (:math:`x_{ik} / (\max_j x_{jk} - \min_j x_{jk})`:
what the authors' code does for "normalising by the zero dimension"), or ``none``; ``Q``,
``A`` (and the hard negatives) each over their own batch.

The authors' code (``lib/BSCLoss.py``) halves the symmetric sum; here it is eq. 1's sum
(the same gradient direction, twice the size). Its learnable ``alpha = 1/τ`` has its own
learning rate (1e-3 by default) and no weight decay, as here.

Combo (eq. 6): :math:`\mu\,\mathcal{L}_{BSC} + (1-\mu)\,\frac{1}{m}\sum_i (\hat q_i^\top
\hat a_i - y_i)^2` on the normalised embeddings, over every row (labels as targets, e.g.
STS scores scaled to [0, 1]).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sts_core.distributed import all_gather_with_grad, scale_local_gradient
from sts_core.losses import EmbeddingLoss, compute_dtype, config_settings, register_loss

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig

__all__ = [
    "CITATION",
    "NORMALIZATIONS",
    "BSCLoss",
    "bsc_loss",
    "normalize_embeddings",
]

CITATION = """@inproceedings{chernyavskiy2022batch,
  title={Batch-Softmax Contrastive Loss for Pairwise Sentence Scoring Tasks},
  author={Chernyavskiy, Anton and Ilvovsky, Dmitry and Kalinin, Pavel and Nakov, Preslav},
  booktitle={Proceedings of the 2022 Conference of the North American Chapter of the
             Association for Computational Linguistics: Human Language Technologies},
  pages={116--126},
  year={2022}
}"""
NORMALIZATIONS = ("l2", "coordinates_l2", "coordinates_minmax", "coordinates_range", "none")
#: keeps a constant coordinate (max = min) from dividing by zero
MINMAX_EPS = 1e-8


def normalize_embeddings(x: Tensor, mode: str) -> Tensor:
    """§3.5: ``l2`` per embedding; ``coordinates_l2``, ``coordinates_minmax`` and
    ``coordinates_range`` per coordinate over the batch (dimension 0); or ``none``."""
    if mode == "l2":
        return F.normalize(x, p=2, dim=1)
    if mode == "coordinates_l2":
        return F.normalize(x, p=2, dim=0)
    if mode in ("coordinates_minmax", "coordinates_range"):
        low = x.min(dim=0, keepdim=True).values
        spread = (x.max(dim=0, keepdim=True).values - low).clamp(min=MINMAX_EPS)
        return (x - low) / spread if mode == "coordinates_minmax" else x / spread
    if mode == "none":
        return x
    raise ValueError(f"normalization {mode!r} is not one of {', '.join(NORMALIZATIONS)}")


def _numerators(scores: Tensor, same_anchor: Tensor, positive: Tensor) -> tuple[Tensor, Tensor]:
    """``S̄⁽⁰⁾`` (mean of ``S_ij`` over the positive rows ``j`` of ``i``'s anchor) and
    ``S̄⁽¹⁾`` (mean of ``S_ji`` over every row ``j`` of ``i``'s anchor)."""
    forward = same_anchor & positive[None, :]
    forward = forward | torch.eye(len(positive), dtype=torch.bool, device=scores.device)
    zero = scores.new_zeros(())
    first = torch.where(forward, scores, zero).sum(1) / forward.sum(1)
    second = torch.where(same_anchor, scores.T, zero).sum(1) / same_anchor.sum(1)
    return first, second


def bsc_loss(
    queries: Tensor,
    answers: Tensor,
    temperature: float | Tensor = 0.1,
    positive: Tensor | None = None,
    anchor_ids: Tensor | None = None,
    hard_negatives: Tensor | None = None,
    normalization: str = "l2",
    symmetric: bool = True,
) -> dict[str, Tensor]:
    """``{"bsc", "l0", "l1"}`` of the module docstring for one batch (``l1`` is 0 when not
    symmetric). ``positive``: ``(m,)`` bool, the rows that are positive pairs (all when
    None); ``anchor_ids``: ``(m,)`` ids, equal for equal first-element texts (no repeats
    when None); ``hard_negatives``: ``(m, d)``. Computed in at least float32.
    A batch without a positive row gives 0 (on the graph)."""
    if queries.dim() != 2 or queries.shape != answers.shape:
        raise ValueError(
            f"expected two (m, d) embedding tensors of the same shape, got "
            f"{tuple(queries.shape)} and {tuple(answers.shape)}"
        )
    m = queries.shape[0]
    dtype = compute_dtype(queries)
    q = normalize_embeddings(queries.to(dtype), normalization)
    a = normalize_embeddings(answers.to(dtype), normalization)
    scores = q @ a.T / temperature
    positive = _row_mask(positive, m, queries.device)
    same = (
        torch.eye(m, dtype=torch.bool, device=queries.device)
        if anchor_ids is None
        else anchor_ids[:, None] == anchor_ids[None, :]
    )
    first, second = _numerators(scores, same, positive)
    rows = scores
    if hard_negatives is not None:
        h = normalize_embeddings(hard_negatives.to(dtype), normalization)
        rows = torch.cat([scores, q @ h.T / temperature], dim=1)
    weight = positive.to(dtype) / m
    l0 = (weight * (torch.logsumexp(rows, dim=1) - first)).sum()
    l1 = (weight * (torch.logsumexp(scores.T, dim=1) - second)).sum() if symmetric else 0 * l0
    return {"bsc": l0 + l1, "l0": l0, "l1": l1}


def _row_mask(positive: Tensor | None, m: int, device: torch.device) -> Tensor:
    if positive is None:
        return torch.ones(m, dtype=torch.bool, device=device)
    if positive.shape != (m,):
        raise ValueError(f"positive must be ({m},), got {tuple(positive.shape)}")
    return positive.to(torch.bool)


def pair_mse(queries: Tensor, answers: Tensor, labels: Tensor, normalization: str) -> Tensor:
    """``(1/m) Σ (q̂_iᵀ â_i − y_i)²`` on the normalised embeddings (eq. 6's MSE)."""
    dtype = compute_dtype(queries)
    q = normalize_embeddings(queries.to(dtype), normalization)
    a = normalize_embeddings(answers.to(dtype), normalization)
    return F.mse_loss((q * a).sum(1), labels.to(dtype))


class _Batch(TypedDict):
    """One forward's tensors (:meth:`BSCLoss._batch`)."""

    queries: Tensor
    answers: Tensor
    hard_negatives: Tensor | None
    labels: Tensor | None
    anchor_ids: Tensor | None


def _gathered(tensor: Tensor | None, scale: bool = False) -> Tensor | None:
    """``tensor`` from every process (None stays None); ``scale``: the gradient through the
    local rows scaled so DDP's average is the whole batch's gradient."""
    if tensor is None:
        return None
    return all_gather_with_grad(scale_local_gradient(tensor) if scale else tensor)


@register_loss("bsc")
class BSCLoss(EmbeddingLoss):
    """:func:`bsc_loss` on (``sentence1``, ``sentence2``) with the ``hard_negative`` column
    when the data has one, and the combo with MSE (eq. 6) when ``mu < 1``.

    Config fields read (``BscConfig``): ``bsc_temperature`` (τ), ``trainable_temperature``
    (learn α = 1/τ, a parameter ``sts_loss.inverse_temperature`` with its own learning rate
    ``temperature_learning_rate``, no weight decay), ``bsc_normalization``,
    ``bsc_symmetric``, ``label_threshold`` (positives: label > t; none: every pair),
    ``repeated_anchors`` (eq. 3–4), ``mu``, ``gather_across_processes``.
    Returns ``{"loss", "bsc", "bsc_l0", "bsc_l1"}`` (and ``"mse"`` for the combo); a batch
    without a positive pair is counted as degenerate (its BSC part is 0).
    """

    title = "batch-softmax contrastive loss (eq. 1–5), combined with MSE when mu < 1 (eq. 6)"

    label_kind = "score"
    citation = CITATION
    text_id_columns = ("sentence1",)

    def __init__(
        self,
        temperature: float = 0.1,
        trainable_temperature: bool = False,
        normalization: str = "l2",
        symmetric: bool = True,
        label_threshold: float | None = None,
        repeated_anchors: bool = True,
        mu: float = 1.0,
        gather: bool = False,
    ) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(
                f"normalization {normalization!r} is not one of {', '.join(NORMALIZATIONS)}"
            )
        if not 0 <= mu <= 1:
            raise ValueError(f"mu must be in [0, 1], got {mu}")
        self.temperature = temperature
        self.trainable_temperature = trainable_temperature
        if trainable_temperature:
            self.inverse_temperature = nn.Parameter(torch.tensor(1.0 / temperature))
        self.normalization = normalization
        self.symmetric = symmetric
        self.label_threshold = label_threshold
        self.repeated_anchors = repeated_anchors
        self.mu = mu
        self.gather = gather

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> BSCLoss:
        return cls(**cls.settings(config))

    @staticmethod
    def settings(config: BaseConfig | None) -> dict[str, Any]:
        """The arguments ``BscConfig`` names (the signature's defaults for those it lacks)."""
        return config_settings(
            config,
            temperature="bsc_temperature",
            trainable_temperature="trainable_temperature",
            normalization="bsc_normalization",
            symmetric="bsc_symmetric",
            label_threshold="label_threshold",
            repeated_anchors="repeated_anchors",
            mu="mu",
            gather="gather_across_processes",
        )

    @classmethod
    def required_label_kind(cls, config: BaseConfig | None) -> str | None:
        """Labels are needed to select positives and for the combo's MSE."""
        loss = cls.from_config(config)
        return "score" if loss.label_threshold is not None or loss.mu < 1 else None

    def config_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "trainable_temperature": self.trainable_temperature,
            "normalization": self.normalization,
            "symmetric": self.symmetric,
            "label_threshold": self.label_threshold,
            "repeated_anchors": self.repeated_anchors,
            "mu": self.mu,
            "gather": self.gather,
        }

    def current_temperature(self) -> Tensor | float:
        """τ, or 1/α for a trainable temperature."""
        return 1.0 / self.inverse_temperature if self.trainable_temperature else self.temperature

    def forward(
        self,
        embeddings: Mapping[str, Tensor],
        labels: Tensor | None,
        text_ids: Mapping[str, Tensor] | None = None,
    ) -> dict[str, Tensor]:
        batch = self._batch(embeddings, labels, text_ids or {})
        queries, answers, labels = batch["queries"], batch["answers"], batch["labels"]
        positive = None
        if self.label_threshold is not None:
            positive = self._labels(labels) > self.label_threshold
        if positive is not None:  # a boolean tensor: no GPU sync
            self.note_degenerate("no positive pair", ~positive.any())
        temperature = self.current_temperature()
        parts = bsc_loss(
            queries,
            answers,
            temperature,
            positive=positive,
            anchor_ids=batch["anchor_ids"] if self.repeated_anchors else None,
            hard_negatives=batch["hard_negatives"],
            normalization=self.normalization,
            symmetric=self.symmetric,
        )
        output = {"bsc": parts["bsc"], "bsc_l0": parts["l0"], "bsc_l1": parts["l1"]}
        total = parts["bsc"]
        if self.mu < 1:
            output["mse"] = pair_mse(queries, answers, self._labels(labels), self.normalization)
            total = self.mu * parts["bsc"] + (1 - self.mu) * output["mse"]
        output["loss"] = total
        if isinstance(temperature, Tensor):  # trainable (1/α): logged
            output["temperature"] = temperature.detach()
        return output

    def _batch(
        self,
        embeddings: Mapping[str, Tensor],
        labels: Tensor | None,
        text_ids: Mapping[str, Tensor],
    ) -> _Batch:
        """The batch's tensors; gathered from every process (gradient through the local
        embeddings, scaled so DDP's average is the whole batch's gradient) with
        ``gather``."""
        if not self.gather:
            return {
                "queries": embeddings["sentence1"],
                "answers": embeddings["sentence2"],
                "hard_negatives": embeddings.get("hard_negative"),
                "labels": labels,
                "anchor_ids": text_ids.get("sentence1"),
            }
        return {
            "queries": all_gather_with_grad(scale_local_gradient(embeddings["sentence1"])),
            "answers": all_gather_with_grad(scale_local_gradient(embeddings["sentence2"])),
            "hard_negatives": _gathered(embeddings.get("hard_negative"), scale=True),
            "labels": _gathered(labels),
            "anchor_ids": _gathered(text_ids.get("sentence1")),
        }

    def _labels(self, labels: Tensor | None) -> Tensor:
        if labels is None:
            raise ValueError(
                "loss bsc with label_threshold or mu < 1 needs labels; the batch has none"
            )
        return labels
