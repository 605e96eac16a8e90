"""Pcc-tuning, declared once (entry point ``sts_core.methods``): stage 1 (``loss: infonce``
on NLI triplets) and stage 2 (``loss: pearson`` on scored pairs, from stage 1's output
folder), both on the core's Trainer. Prompts and last-token pooling for decoder LLMs,
LoRA/QLoRA, gathering across processes and gradient caching are the core's."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sts_core.losses import CosineMSELoss, InfoNCELoss
from sts_core.method import Method, QualityRow
from sts_core.training import command
from sts_pcctuning.config import PccConfig
from sts_pcctuning.loss import PearsonLoss

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)


class PccMethod(Method[PccConfig]):
    def check_train_dataset(self, dataset: Dataset, config: PccConfig) -> None:
        """Also: stage 1 without a ``hard_negative`` column is said (eq. 8 then has only
        the in-batch negatives), and the scores of stage 2 are not all equal."""
        super().check_train_dataset(dataset, config)
        if config.loss == "infonce" and "hard_negative" not in dataset.column_names:
            logger.warning(
                "loss infonce on a training set without a hard_negative column: only the "
                "other rows' positives are negatives (Pcc-tuning's stage 1 trains on NLI "
                "triplets: train_datasets: [nli-triplets])"
            )
        if config.loss == "pearson":
            scores = set(dataset[self.label_column(config)])
            if len(scores) < 2:
                raise ValueError(
                    f"loss pearson: every training score is {next(iter(scores), None)!r}; a "
                    "correlation needs at least two different scores"
                )


METHOD = PccMethod(
    name="pcctuning",
    title="Pcc-tuning (contrastive stage, then a Pearson-correlation stage)",
    config=PccConfig,
    losses=(InfoNCELoss, PearsonLoss, CosineMSELoss),
    description=(
        "Pcc-tuning: stage 1 trains with in-batch InfoNCE on NLI triplets (loss: infonce), "
        "stage 2 with 1 − Pearson correlation on scored pairs (loss: pearson). --config "
        "<recipe>.yaml gives defaults; flags override them."
    ),
    readme="packages/pcctuning/README.md",
    quality_rows=(
        # the Pearson stage on the benchmark's STS pairs from the base model (stage 2 alone:
        # the base model, all-MiniLM-L6-v2, is already contrastive)
        QualityRow(
            "pcc_pearson",
            "ours: sts-pcctuning (1 − Pearson over the batch, eq. 9)",
            {"loss": "pearson"},
        ),
    ),
)
main = command(METHOD)
