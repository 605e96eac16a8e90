r"""Siamese regression losses of Zhang and Li (EMNLP 2024): Translated ReLU and Smooth K2.

A linear head over the pair's features (``(u, v, |u − v|)`` by default, 3·d → 1) predicts
the similarity; the loss is a penalty of its distance to the label,
``x = |prediction − label|``:

- ``l1``: ``f(x) = x``;
- ``mse``: ``f(x) = x²``;
- ``translated_relu`` (eq. 1): ``f(x) = max(0, k·(x − x0))``, gradient ``k`` from ``x0`` on;
- ``smooth_k2`` (eq. 2): ``f(x) = k·(x² − 2·x0·x + x0²) = k·(x − x0)²`` for ``x ≥ x0``,
  else 0; gradient ``2k·(x − x0)`` from ``x0`` on.

Inside the band ``x < x0`` the two new losses are 0 with a zero gradient: a prediction
within ``x0`` of its label counts as right (``x0 ≤ d/2``, ``d`` the spacing of the label
grid, keeps it on the right class). Optionally (§3.3) a prediction beyond the label range
is first moved to the nearest end, so that e.g. 3.57 for the top label 3 costs nothing.

Every function here is the math alone, over tensors; :class:`SiameseRegressionLoss` and its
registered subclasses (``loss: smooth_k2`` …) apply it to the batch's embeddings through
the model's ``regression`` head. The head is trained with the encoder and not used for STS
evaluation (cosine of the embeddings), as in the paper.

Reference: Bowen Zhang and Chunping Li, "Advancing Semantic Textual Similarity Modeling: A
Regression Framework with Translated ReLU and Smooth K2 Loss", EMNLP 2024 (arXiv
2406.05326); code: github.com/ZBWpro/STS-Regression.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor, nn

from sts_core.heads import LinearHead
from sts_core.losses import HeadLoss, compute_dtype, config_settings, loss_class, register_loss

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig

__all__ = [
    "CLAMP_MODES",
    "CITATION",
    "REGRESSION_HEAD",
    "L1RegressionLoss",
    "MSERegressionLoss",
    "SiameseRegressionLoss",
    "SmoothK2Loss",
    "TranslatedReLULoss",
    "check_band",
    "clamp_predictions",
    "regression_loss",
    "smooth_k2",
    "translated_relu",
]

CITATION = """@inproceedings{zhang2024regression,
  title={Advancing Semantic Textual Similarity Modeling: A Regression Framework with
         Translated ReLU and Smooth K2 Loss},
  author={Zhang, Bowen and Li, Chunping},
  booktitle={Proceedings of the 2024 Conference on Empirical Methods in Natural Language
             Processing},
  year={2024}
}"""
REGRESSION_HEAD = "regression"
#: how predictions outside the label range are treated before the loss
CLAMP_MODES = ("none", "low", "both")
DEFAULT_PAIR_FEATURES = "u,v,|u-v|"  # the paper's (u, v, |u − v|), 3·d inputs


def check_band(k: float, x0: float, spacing: float = 1.0) -> None:
    """ValueError unless ``k > 0`` and ``0 ≤ x0 ≤ d/2`` (``d = spacing > 0``): a prediction
    within ``x0`` of its label must stay nearer to it than to the next label."""
    if not spacing > 0:
        raise ValueError(f"label_spacing (d) must be above 0, got {spacing}")
    if not k > 0:
        raise ValueError(f"k must be above 0, got {k}")
    if not 0 <= x0 <= spacing / 2:
        raise ValueError(
            f"x0 must lie in [0, d/2] = [0, {spacing / 2:g}] (d = label_spacing {spacing:g}), "
            f"got {x0}"
        )


def translated_relu(x: Tensor, k: float, x0: float) -> Tensor:
    r"""Translated ReLU, eq. 1: :math:`f(x) = \max(0, k\,(x - x_0))`, elementwise.

    Zero with a zero gradient for ``x < x0``; slope ``k`` from ``x0`` on (at ``x = x0`` the
    gradient is ``k``, the case ``x0 ≤ x`` of the equation). ``x = |prediction − label|``.
    """
    return k * (x - x0).clamp(min=0)


def smooth_k2(x: Tensor, k: float, x0: float) -> Tensor:
    r"""Smooth K2, eq. 2: :math:`f(x) = k\,(x^2 - 2x_0x + x_0^2) = k\,(x - x_0)^2` for
    ``x ≥ x0`` and 0 below, elementwise; its gradient :math:`2k(x - x_0)` outside the band,
    0 inside, continuous at ``x0``. ``x = |prediction − label|``.
    """
    return k * (x - x0).clamp(min=0).pow(2)


def check_clamp(mode: str, label_range: tuple[float, float] | None) -> tuple[float, float] | None:
    """ValueError unless ``mode`` is a clamp mode and, for one that clamps, the label range
    is given; the range it clamps to (None for ``none``)."""
    if mode not in CLAMP_MODES:
        raise ValueError(f"clamp mode {mode!r}: choose one of {', '.join(CLAMP_MODES)}")
    if mode == "none":
        return None
    if label_range is None:
        raise ValueError(f"clamping predictions ({mode}) needs the label range [low, high]")
    return label_range


def clamp_predictions(
    predictions: Tensor, mode: str = "none", label_range: tuple[float, float] | None = None
) -> Tensor:
    """Predictions outside the label range moved to its nearest end before the loss (§3.3).

    ``mode``: ``none`` (as they are), ``low`` (raised to the range's low end only: with
    labels from 0 this is the authors' code, ``prediction * (prediction >= 0)``), ``both``
    (either end). A moved prediction gets no gradient, as in the authors' code.
    """
    bounds = check_clamp(mode, label_range)
    if bounds is None:
        return predictions
    low, high = bounds
    # where(), not clamp(): a prediction exactly at an end keeps its gradient, as in the
    # authors' mask (prediction >= 0)
    moved = torch.where(predictions < low, torch.full_like(predictions, low), predictions)
    if mode == "both":
        moved = torch.where(moved > high, torch.full_like(moved, high), moved)
    return moved


def regression_loss(
    predictions: Tensor,
    labels: Tensor,
    penalty: str = "smooth_k2",
    k: float = 2.0,
    x0: float = 0.25,
    clamp: str = "none",
    label_range: tuple[float, float] | None = None,
) -> Tensor:
    r"""The mean over the batch of ``f(|prediction − label|)``.

    .. math::

        \mathcal{L} = \frac{1}{N}\sum_{i=1}^{N} f\big(|\hat y_i - y_i|\big)

    with ``f`` one of ``l1`` (:math:`x`), ``mse`` (:math:`x^2`), ``translated_relu``
    (eq. 1) or ``smooth_k2`` (eq. 2); ``k`` and ``x0`` apply to the last two. Predictions
    are first treated as ``clamp`` says (:func:`clamp_predictions`). Computed in at least
    float32.

    Args:
        predictions: ``(N,)`` or ``(N, 1)`` predicted similarities.
        labels: ``(N,)`` targets on the label grid (NLI 0/1/2, STS 0–5 …).
        penalty: the name of ``f``.
        k, x0: slope (scale) and band half-width of the two new losses.
        clamp, label_range: see :func:`clamp_predictions`.

    Returns:
        The scalar loss (float32, or float64 for float64 inputs).

    References:
        Zhang and Li, EMNLP 2024, §3.2 (eq. 1), §3.3 (eq. 2 and clamping), Table 1 (L1,
        MSE); the authors' ``loss.py``.
    """
    if predictions.numel() != labels.numel():
        raise ValueError(
            f"expected one prediction per label, got {tuple(predictions.shape)} and "
            f"{tuple(labels.shape)}"
        )
    dtype = compute_dtype(predictions)
    predicted = clamp_predictions(predictions.reshape(-1).to(dtype), clamp, label_range)
    x = (predicted - labels.reshape(-1).to(device=predicted.device, dtype=dtype)).abs()
    if penalty == "l1":
        values = x
    elif penalty == "mse":
        values = x.pow(2)
    elif penalty == "translated_relu":
        values = translated_relu(x, k, x0)
    elif penalty == "smooth_k2":
        values = smooth_k2(x, k, x0)
    else:
        raise ValueError(f"unknown penalty {penalty!r}")
    return values.mean()


class SiameseRegressionLoss(HeadLoss):
    """A linear head over the pair's features predicts the label; the loss penalises
    ``|prediction − label|`` (:func:`regression_loss`). Subclasses name the penalty.

    Config fields read: ``pair_features`` (the head's input: ``u,v,|u-v|``, ``u,v`` or
    ``|u-v|``; Table 6), ``k`` and ``x0`` (Translated ReLU and Smooth K2 only),
    ``clamp_predictions`` and ``label_range`` (:func:`clamp_predictions`). The head
    ``regression`` (3·d → 1 by default) is added to the model, saved beside it (resume,
    inspection) and reused when a second stage starts from a saved model.

    Across processes: every pair's loss is its own, so each process averages its local batch
    and DDP's gradient averaging gives the mean over the global batch (equal local
    batches); nothing is gathered.

    Inputs:
        +-----------------------------------------------+---------------------------------+
        | Inputs                                        | Labels                          |
        +===============================================+=================================+
        | ``(sentence1, sentence2)`` embedding pairs    | a number on the label grid      |
        +-----------------------------------------------+---------------------------------+

    Relations:
        - SBERT's classifier (``loss: softmax``) has K outputs and cross-entropy; this has
          one output and treats the classes as ordered (§3.1).
        - ``cosine_mse`` regresses the cosine itself; here a head regresses, and the cosine
          used at evaluation is trained only through the shared encoder.
    """

    penalty: ClassVar[str]
    head_name = REGRESSION_HEAD
    reads_pooled = True  # the head reads u, v before the encoder's L2 normalisation
    citation = CITATION

    def __init__(
        self,
        head: nn.Module,
        k: float = 2.0,
        x0: float = 0.25,
        clamp: str = "none",
        label_range: tuple[float, float] | None = None,
    ) -> None:
        super().__init__(head)
        check_clamp(clamp, label_range)
        self.k, self.x0, self.clamp = k, x0, clamp
        self.label_range = None
        if label_range is not None:
            low, high = label_range
            self.label_range = (float(low), float(high))

    @classmethod
    def build_head(cls, config: BaseConfig | None, dimension: int) -> nn.Module:
        features = getattr(config, "pair_features", None) or DEFAULT_PAIR_FEATURES
        return LinearHead.for_pairs(dimension, pair_features=features)  # one output

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> SiameseRegressionLoss:
        settings = config_settings(
            config, k="k", x0="x0", clamp="clamp_predictions", label_range="label_range"
        )
        return cls(cls.head_of(model), **settings)

    def config_dict(self) -> dict[str, Any]:
        settings: dict[str, Any] = {"penalty": self.penalty}
        if self.penalty in ("translated_relu", "smooth_k2"):
            settings.update(k=self.k, x0=self.x0)
        settings["features"] = getattr(self.head, "pair_features", None)
        if self.clamp != "none":
            settings.update(clamp=self.clamp, label_range=list(self.label_range or ()))
        return settings

    def predict(self, u: Tensor, v: Tensor) -> Tensor:
        """The head's ``(N,)`` predictions for the pairs ``(u_i, v_i)`` (before clamping)."""
        dtype = self.head.get_parameter("weight").dtype
        return self.head(u.to(dtype), v.to(dtype)).reshape(-1)

    def forward(self, embeddings: Mapping[str, Tensor], labels: Tensor | None) -> Tensor:
        if labels is None:
            raise ValueError(f"loss {self.display_name()} needs labels")
        predictions = self.predict(embeddings["sentence1"], embeddings["sentence2"])
        return regression_loss(
            predictions, labels, self.penalty, self.k, self.x0, self.clamp, self.label_range
        )


@register_loss("l1")
class L1RegressionLoss(SiameseRegressionLoss):
    """L1 on the regression head: ``mean |prediction − label|`` (Table 1's L1 Loss)."""

    title = "L1 on a regression head (baseline)"

    penalty = "l1"


@register_loss("mse")
class MSERegressionLoss(SiameseRegressionLoss):
    """MSE on the regression head: ``mean (prediction − label)²`` (Table 1's MSE Loss)."""

    title = "MSE on a regression head (baseline)"

    penalty = "mse"


@register_loss("translated_relu")
class TranslatedReLULoss(SiameseRegressionLoss):
    """Translated ReLU (eq. 1) on the regression head: ``mean max(0, k(x − x0))``."""

    title = "Translated ReLU on a regression head (eq. 1)"

    penalty = "translated_relu"


@register_loss("smooth_k2")
class SmoothK2Loss(SiameseRegressionLoss):
    """Smooth K2 (eq. 2) on the regression head: ``mean k·max(0, x − x0)²``."""

    title = "Smooth K2 on a regression head (eq. 2)"

    penalty = "smooth_k2"


def is_regression_loss(name: str) -> bool:
    """Whether the registered loss ``name`` regresses onto the labels with the head."""
    return issubclass(loss_class(name), SiameseRegressionLoss)
