"""sts_bsc: the batch-softmax contrastive loss (Chernyavskiy et al., 2022) and its batch
shuffling."""

from typing import TYPE_CHECKING, Any

from sts_bsc.config import BscConfig
from sts_bsc.loss import BSCLoss, bsc_loss, normalize_embeddings
from sts_bsc.method import METHOD
from sts_bsc.shuffling import (
    example_based_order,
    group_by_shingles,
    shuffle_order,
)

if TYPE_CHECKING:
    from sts_bsc.trainer import BscTrainer

__all__ = [
    "METHOD",
    "BSCLoss",
    "BscConfig",
    "BscTrainer",
    "bsc_loss",
    "example_based_order",
    "group_by_shingles",
    "normalize_embeddings",
    "shuffle_order",
]


def __getattr__(name: str) -> Any:
    """``BscTrainer`` loads on first use: importing the package (the method's entry
    point, ``check_only``, ``--help``) imports no ``transformers.Trainer``."""
    if name == "BscTrainer":
        from sts_bsc.trainer import BscTrainer

        return BscTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
