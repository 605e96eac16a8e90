"""The BSC method, declared once (entry point ``sts_core.methods``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sts_bsc.config import BscConfig
from sts_bsc.loss import BSCLoss
from sts_bsc.shuffling import check_shuffle_dependencies
from sts_core.losses import CosineMSELoss
from sts_core.method import Method, QualityRow
from sts_core.training import command

if TYPE_CHECKING:
    from datasets import Dataset


class BscMethod(Method[BscConfig]):
    def check_train_dataset(self, dataset: Dataset, config: BscConfig) -> None:
        """The core's checks, then that ``shuffle`` can run here (faiss for the k-NN and
        k-means shuffles), before any weights load."""
        super().check_train_dataset(dataset, config)
        check_shuffle_dependencies(config.shuffle)


METHOD = BscMethod(
    name="bsc",
    title="Batch-softmax contrastive loss (BSC)",
    config=BscConfig,
    losses=(BSCLoss, CosineMSELoss),
    trainer="sts_bsc.trainer:BscTrainer",
    description=(
        "Train with the batch-softmax contrastive loss (BSC): in-batch softmax over both sides "
        "of the pairs, labeled negatives, the combo with MSE, and batches rebuilt every epoch "
        "by example-based or fast shuffling. --config <recipe>.yaml gives defaults; flags "
        "override them."
    ),
    readme="packages/bsc/README.md",
    quality_rows=(
        # the combo of eq. 6 (μ 0.1, positives = scores above 0.6 on the [0, 1] scale, τ 0.1,
        # L2) with example-based shuffling, on the benchmark's STS pairs
        QualityRow(
            "bsc_combo",
            "ours: sts-bsc (0.1·BSC + 0.9·MSE, eq. 6; example-based batches)",
            {
                "loss": "bsc",
                "mu": 0.1,
                "label_threshold": 0.6,
                "bsc_temperature": 0.1,
                "shuffle": "example",
            },
            unit_labels=True,
        ),
    ),
)
main = command(METHOD)
