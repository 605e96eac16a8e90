"""sts_regression: Siamese regression with Translated ReLU and Smooth K2 (Zhang and Li, 2024)."""

from typing import TYPE_CHECKING, Any

from sts_regression.config import RegressionConfig
from sts_regression.loss import (
    L1RegressionLoss,
    MSERegressionLoss,
    SiameseRegressionLoss,
    SmoothK2Loss,
    TranslatedReLULoss,
    clamp_predictions,
    regression_loss,
    smooth_k2,
    translated_relu,
)
from sts_regression.method import METHOD

if TYPE_CHECKING:
    from sts_regression.trainer import RegressionTrainer

__all__ = [
    "METHOD",
    "L1RegressionLoss",
    "MSERegressionLoss",
    "RegressionConfig",
    "RegressionTrainer",
    "SiameseRegressionLoss",
    "SmoothK2Loss",
    "TranslatedReLULoss",
    "clamp_predictions",
    "regression_loss",
    "smooth_k2",
    "translated_relu",
]


def __getattr__(name: str) -> Any:
    """``RegressionTrainer`` loads on first use: importing the package (the method's entry
    point, ``check_only``, ``--help``) imports no ``transformers.Trainer``."""
    if name == "RegressionTrainer":
        from sts_regression.trainer import RegressionTrainer

        return RegressionTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
