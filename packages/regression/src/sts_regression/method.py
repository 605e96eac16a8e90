"""The Siamese regression method, declared once (entry point ``sts_core.methods``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from sts_core.losses import SoftmaxClassifierLoss
from sts_core.method import Method, QualityRow
from sts_core.training import command
from sts_regression.config import RegressionConfig
from sts_regression.loss import (
    L1RegressionLoss,
    MSERegressionLoss,
    SmoothK2Loss,
    TranslatedReLULoss,
    is_regression_loss,
)

if TYPE_CHECKING:
    from datasets import Dataset


class RegressionMethod(Method[RegressionConfig]):
    def check_train_dataset(self, dataset: Dataset, config: RegressionConfig) -> None:
        """Also, for the regression losses: the labels are numbers on the scale the loss
        expects (not raw class ids) and inside ``label_range`` when it is set."""
        super().check_train_dataset(dataset, config)
        if not is_regression_loss(config.loss):
            return
        column = self.label_column(config)
        feature = getattr(dataset.features.get(column), "dtype", "float64")
        if not str(feature).startswith("float"):
            raise ValueError(
                f"loss {config.loss} would regress onto the class ids of column {column!r} "
                f"({feature}); the NLI readers number entailment 0, neutral 1, contradiction "
                "2, the reverse of their similarity: map them first, e.g. label_mapping: "
                "{contradiction: 0, neutral: 1, entailment: 2}, or train on the score column"
            )
        labels = np.asarray(dataset[column], dtype=np.float64)
        check_label_range(labels, column, getattr(config, "label_range", None))


def check_label_range(labels: np.ndarray, column: str, label_range: list[float] | None) -> None:
    """ValueError naming the labels outside ``label_range`` (when it is set)."""
    if label_range is None:
        return
    low, high = label_range
    outside = (labels < low) | (labels > high)
    if outside.any():
        values = sorted(set(labels[outside].tolist()))
        raise ValueError(
            f"{int(outside.sum())} training label(s) in column {column!r} lie outside "
            f"label_range [{low:g}, {high:g}]: {', '.join(f'{v:g}' for v in values[:5])}"
        )


# The rows of benchmarks/quality.py: a fresh regression head on the benchmark's 0–5 STS
# scores (the paper's second stage, without the first), one row per loss. The paper's
# second-stage settings for contrastive models (Smooth K2, x0 0.2, k 3-3.5); Translated ReLU
# with the same band. Labels: STS scores 0–5 as they are; negative predictions set to 0
# (the authors' code) for every loss: cpu_minilm_sts.yaml's settings.
_BAND = {"x0": 0.2}
_CLAMP = {"clamp_predictions": "low", "label_range": [0.0, 5.0]}
_ROWS = {
    "smooth_k2": ("smooth_k2", {"k": 3.0, **_BAND}),
    "translated_relu": ("translated_relu", {"k": 1.0, **_BAND}),
    "regression_mse": ("mse", {}),
    "regression_l1": ("l1", {}),
}


def _quality_row(name: str, loss: str, settings: dict[str, Any]) -> QualityRow:
    described = ", ".join(f"{key} {value:g}" for key, value in settings.items())
    label = f"ours: sts-regression ({loss}{', ' + described if described else ''})"
    return QualityRow(name, label, {"loss": loss, **settings, **_CLAMP})


METHOD = RegressionMethod(
    name="regression",
    title="Siamese regression with Translated ReLU and Smooth K2 loss",
    config=RegressionConfig,
    losses=(
        SmoothK2Loss,
        TranslatedReLULoss,
        MSERegressionLoss,
        L1RegressionLoss,
        SoftmaxClassifierLoss,
    ),
    trainer="sts_regression.trainer:RegressionTrainer",
    description=(
        "Train sentence embeddings through a Siamese regression head with Translated ReLU or "
        "Smooth K2 (or L1, MSE, SBERT's softmax classifier). --config <recipe>.yaml gives "
        "defaults; flags override them."
    ),
    readme="packages/regression/README.md",
    quality_rows=tuple(_quality_row(name, *row) for name, row in _ROWS.items()),
)
main = command(METHOD)
