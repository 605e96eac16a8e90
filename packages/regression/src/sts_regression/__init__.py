"""sts_regression: Siamese regression with Translated ReLU and Smooth K2 (Zhang and Li, 2024)."""

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
