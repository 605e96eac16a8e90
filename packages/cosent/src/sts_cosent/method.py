"""CoSENT, declared once (entry point ``sts_core.methods``): the bi-encoder (eq. 10) on the
core's Trainer, or with ``architecture: cross-encoder`` the interaction model (eq. 11)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sts_core.cross_encoder import load_cross_encoder
from sts_core.evaluation import PairEvaluator, cross_encoder_scorer
from sts_core.losses import CosineMSELoss, InfoNCELoss, SoftmaxClassifierLoss
from sts_core.method import Method, QualityRow
from sts_core.training import command
from sts_core.training.config import required_model
from sts_cosent.config import CoSENTConfig
from sts_cosent.loss import ContrastiveThresholdLoss, CoSENTRankingLoss

if TYPE_CHECKING:
    from datasets import Dataset
    from torch import nn

    from sts_core.training import AnyModelTrainer
    from sts_core.training.config import ModelArguments


def _is_cross_encoder(config: CoSENTConfig) -> bool:
    return getattr(config, "architecture", "bi-encoder") == "cross-encoder"


class CoSENTMethod(Method[CoSENTConfig]):
    def trainer_for(self, config: CoSENTConfig) -> type[AnyModelTrainer] | None:
        """The trainer the recipe's ``architecture`` asks for (imported here: the checks
        before the run builds its Trainer import none)."""
        if not _is_cross_encoder(config):
            return super().trainer_for(config)
        from sts_cosent.trainer import CoSENTCrossEncoderTrainer

        return CoSENTCrossEncoderTrainer

    def build_model(self, model_args: ModelArguments, config: CoSENTConfig) -> nn.Module | None:
        """The cross-encoder: ``AutoModelForSequenceClassification`` with one output, its
        tokenizer and max length on the model (``sts_tokenizer``, ``sts_max_length``)."""
        if not _is_cross_encoder(config):
            return super().build_model(model_args, config)
        model, tokenizer, max_length = load_cross_encoder(
            required_model(model_args),
            model_args.max_seq_length,
            trust_remote_code=model_args.trust_remote_code,
        )
        model.sts_tokenizer, model.sts_max_length = tokenizer, max_length
        return model

    def build_evaluator(self, name: str, dataset: Dataset, config: CoSENTConfig) -> Any:
        """The cross-encoder's: Spearman/Pearson of its scores; the scorer reads the tokenizer
        and max length from the model it scores, so it can be built before the model."""
        if not _is_cross_encoder(config):
            return super().build_evaluator(name, dataset, config)
        return PairEvaluator(
            dataset,
            name=name,
            scorer=cross_encoder_scorer(),
            batch_size=config.per_device_eval_batch_size,
        )


METHOD = CoSENTMethod(
    name="cosent",
    title="CoSENT ranking loss",
    config=CoSENTConfig,
    losses=(
        CoSENTRankingLoss,
        CosineMSELoss,
        ContrastiveThresholdLoss,
        SoftmaxClassifierLoss,
        InfoNCELoss,
    ),
    description=(
        "Train sentence embeddings (or a cross-encoder) with the CoSENT ranking loss. "
        "--config <recipe>.yaml gives defaults; flags override them."
    ),
    readme="packages/cosent/README.md",
    quality_rows=(
        QualityRow("cosent", "ours: sts-cosent (cosent)", {"loss": "cosent"}),
        QualityRow(
            "cosine_mse",
            "ours: sts-cosent (cosine_mse)",
            {"loss": "cosine_mse"},
            unit_labels=True,
        ),
    ),
)
main = command(METHOD)
