"""sts_cosent: CoSENT (Huang et al., 2024), the consistent sentence-embedding ranking loss."""

from typing import TYPE_CHECKING, Any

from sts_cosent.config import CoSENTConfig
from sts_cosent.loss import (
    contrastive_threshold_loss,
    cosent_loss,
    cosine_mse_loss,
    in_batch_infonce_loss,
    pairwise_cosine,
    softmax_classifier_loss,
)
from sts_cosent.method import METHOD

if TYPE_CHECKING:
    from sts_cosent.trainer import CoSENTCrossEncoderTrainer

__all__ = [
    "METHOD",
    "CoSENTConfig",
    "CoSENTCrossEncoderTrainer",
    "contrastive_threshold_loss",
    "cosent_loss",
    "cosine_mse_loss",
    "in_batch_infonce_loss",
    "pairwise_cosine",
    "softmax_classifier_loss",
]


def __getattr__(name: str) -> Any:
    """``CoSENTCrossEncoderTrainer`` loads on first use: importing the package (the method's entry
    point, ``check_only``, ``--help``) imports no ``transformers.Trainer``."""
    if name == "CoSENTCrossEncoderTrainer":
        from sts_cosent.trainer import CoSENTCrossEncoderTrainer

        return CoSENTCrossEncoderTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
