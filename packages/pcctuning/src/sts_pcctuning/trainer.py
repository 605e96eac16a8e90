"""``PccTrainer``: Pcc-tuning's two stages (contrastive, then Pearson) on ``BaseTrainer``."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from sts_core.training import BaseTrainer
from sts_pcctuning.loss import CITATION

logger = logging.getLogger(__name__)

PAPER = {
    "name": "Pcc-tuning (contrastive stage, then a Pearson-correlation stage)",
    "citation": CITATION,
}
LOSS_NAMES = {
    "infonce": "Stage 1: in-batch InfoNCE with a hard negative per anchor (eq. 8)",
    "pearson": "Stage 2: 1 − Pearson correlation of the batch's cosines and scores (eq. 9)",
    "cosine_mse": "Cosine MSE (baseline for stage 2)",
}


class PccTrainer(BaseTrainer):
    """Pcc-tuning: ``loss: infonce`` on NLI triplets (stage 1), then ``loss: pearson`` on
    scored pairs from stage 1's output folder (stage 2), both from the ``sts_core.losses``
    registry (``pearson``: :mod:`sts_pcctuning.loss`). Everything else — prompts and
    last-token pooling for decoder LLMs, LoRA/QLoRA, gathering across processes, gradient
    caching — is the core's.
    """

    _paper: ClassVar[dict[str, str]] = PAPER
    default_loss = "pearson"

    def __init__(self, model: Any, args: Any, **kwargs: Any) -> None:
        super().__init__(model, args, **kwargs)
        self.model_card_data["loss"] = LOSS_NAMES[args.loss]

    @classmethod
    def check_train_dataset(cls, dataset: Any, config: Any) -> None:
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
            scores = set(dataset[cls.label_column_for(config)])
            if len(scores) < 2:
                raise ValueError(
                    f"loss pearson: every training score is {next(iter(scores), None)!r}; a "
                    "correlation needs at least two different scores"
                )
