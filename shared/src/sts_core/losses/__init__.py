"""Losses shared by the method packages, and the registry every trainer picks its loss from.

Only torch is imported here (the losses are the math alone). See :mod:`.registry` for the
contract of a registered loss.
"""

from sts_core.losses.classification import (
    SOFTMAX_HEAD,
    SoftmaxClassifierLoss,
    softmax_classifier_loss,
)
from sts_core.losses.combined import WeightedLossSum, parse_loss_weights, weighted_loss_class
from sts_core.losses.registry import (
    LOSSES,
    EmbeddingLoss,
    HeadLoss,
    build_loss,
    check_labels,
    compute_dtype,
    config_settings,
    loss_class,
    pooled_embeddings,
    register_loss,
    zero_loss,
)
from sts_core.losses.similarity import (
    CosineMSELoss,
    InfoNCELoss,
    cosine_mse_loss,
    in_batch_infonce_loss,
    pairwise_cosine,
)

__all__ = [
    "LOSSES",
    "SOFTMAX_HEAD",
    "CosineMSELoss",
    "EmbeddingLoss",
    "HeadLoss",
    "InfoNCELoss",
    "SoftmaxClassifierLoss",
    "WeightedLossSum",
    "build_loss",
    "check_labels",
    "compute_dtype",
    "config_settings",
    "cosine_mse_loss",
    "in_batch_infonce_loss",
    "loss_class",
    "pooled_embeddings",
    "register_loss",
    "pairwise_cosine",
    "parse_loss_weights",
    "softmax_classifier_loss",
    "weighted_loss_class",
    "zero_loss",
]
