"""``CoSENTTrainer`` (bi-encoder, eq. 10) and ``CoSENTCrossEncoderTrainer`` (eq. 11)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from transformers import Trainer

from sts_core.cross_encoder import PairCrossCollator, load_cross_encoder
from sts_core.evaluation import PairEvaluator, cross_encoder_scorer
from sts_core.saving import staged_contents
from sts_core.training import BaseTrainer
from sts_cosent.loss import (
    CITATION,
    SOFTMAX_HEAD,  # noqa: F401 - the softmax baseline's head name, re-exported
    cosent_loss,
    has_no_ordered_pair,
)

PAPER = {"name": "CoSENT ranking loss", "citation": CITATION}
LOSS_NAMES = {
    "cosent": "CoSENT (eq. 10)",
    "cosine_mse": "cosine-similarity MSE (baseline)",
    "contrastive": "contrastive loss with threshold ε (eq. 2, baseline)",
    "softmax": "SBERT softmax classifier over (u, v, |u − v|) (baseline)",
    "infonce": "in-batch InfoNCE (eq. 3, baseline)",
}


class CoSENTTrainer(BaseTrainer):
    """Siamese training with CoSENT (or one of the paper's baselines, ``args.loss``).

    The loss comes from the ``sts_core.losses`` registry by name (``cosent``,
    ``contrastive`` and ``softmax`` are registered in :mod:`sts_cosent.loss`, ``cosine_mse``
    and ``infonce`` in the core). CoSENT encodes the batch's pairs, takes each pair's cosine
    and compares every ordered pair of pairs. With ``gather_across_processes`` the scores and
    labels of all processes are all-gathered first (gradient through the local part, scaled
    by the world size so DDP's averaging gives exactly the gradient of one process over the
    whole batch; the loss value, and so the logged loss, is that of the whole batch, whatever
    the number of processes), and so are InfoNCE's embeddings; otherwise each process uses
    its own batch. The other baselines (cosine MSE, contrastive, softmax) use the local batch;
    the softmax baseline's classifier is the head ``softmax_classifier`` (added by the core's
    ``softmax`` loss, saved with the model).
    """

    _paper: ClassVar[dict[str, str]] = PAPER
    default_loss = "cosent"

    def __init__(self, model: Any, args: Any, **kwargs: Any) -> None:
        super().__init__(model, args, **kwargs)
        self.model_card_data["loss"] = LOSS_NAMES[args.loss]


class CoSENTCrossEncoderTrainer(BaseTrainer):
    """Interaction model (eq. 11): CoSENT on a cross-encoder's scores f(i, j).

    The model is ``AutoModelForSequenceClassification`` with one output over the
    concatenated pair; it saves and reloads like any sequence classifier. The dev evaluator
    reports the Spearman of its scores against gold.
    """

    _paper: ClassVar[dict[str, str]] = PAPER

    def __init__(self, model: Any, args: Any, evaluator: Any | None = None, **kwargs: Any) -> None:
        tokenizer, max_length = model.sts_tokenizer, model.sts_max_length
        kwargs.setdefault(
            "data_collator", PairCrossCollator(tokenizer, max_length, args.label_column)
        )
        kwargs.setdefault("processing_class", tokenizer)
        # the evaluator's cross-encoder scorer reads model.sts_tokenizer / sts_max_length
        super().__init__(model, args, evaluator=evaluator, **kwargs)

    @classmethod
    def build_model(cls, model_args: Any, config: Any) -> Any:
        model, tokenizer, max_length = load_cross_encoder(
            model_args.model_name_or_path,
            model_args.max_seq_length,
            trust_remote_code=model_args.trust_remote_code,
        )
        model.sts_tokenizer, model.sts_max_length = tokenizer, max_length
        return model

    @classmethod
    def build_evaluator(cls, name: str, dataset: Any, config: Any) -> Any:
        """Spearman/Pearson of the cross-encoder's scores; the scorer reads the tokenizer and
        max length from the model it scores (``sts_tokenizer``/``sts_max_length``, set by
        :meth:`build_model`), so the evaluator can be built before the model."""
        return PairEvaluator(
            dataset,
            name=name,
            scorer=cross_encoder_scorer(),
            batch_size=config.per_device_eval_batch_size,
        )

    def final_evaluation(self, data_args: Any) -> dict[str, Any]:
        """Scores on ``final_eval_datasets``; no STS table (a cross-encoder has no embeddings)."""
        return {"final": self._score_pair_sets(data_args)} if data_args.final_eval_datasets else {}

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, torch.Tensor],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
        **kwargs: Any,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        labels = inputs["labels"]
        features = {k: v for k, v in inputs.items() if k != "labels"}
        outputs = model(**features)
        self.record_degenerate_batch("no two distinct labels", has_no_ordered_pair(labels))
        loss = cosent_loss(outputs.logits.reshape(-1), labels, scale=self.args.cosent_scale)
        return (loss, outputs) if return_outputs else loss

    # A sequence classifier saves and loads the transformers way.
    # The save is atomic like the bi-encoder's (staged, then the marker written last).
    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        if not self.args.should_save:
            return
        with staged_contents(output_dir or self.args.output_dir) as folder:
            Trainer._save(self, str(folder), state_dict)
            (folder / "README.md").write_text(self.model_card_text(), encoding="utf-8")

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        Trainer._load_from_checkpoint(self, resume_from_checkpoint, model)

    def _load_best_model(self) -> None:
        Trainer._load_best_model(self)

    def model_card_text(self) -> str:
        return "\n".join(
            [
                "---",
                "pipeline_tag: text-classification",
                "tags: [cross-encoder, sts, CoSENTCrossEncoderTrainer]",
                "---",
                "",
                "# Cross-encoder trained with CoSENT (eq. 11)",
                "",
                f"From `{self.model_card_data.get('base_model', 'unknown')}` on "
                f"{self.model_card_data.get('train_data', 'unknown')}; one output: the "
                "similarity score of the concatenated pair.",
                "",
                "```bibtex",
                CITATION,
                "```",
                "",
            ]
        )
