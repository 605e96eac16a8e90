"""sts_cosent: CoSENT (Huang et al., 2024), the consistent sentence-embedding ranking loss."""

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
