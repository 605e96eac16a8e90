"""``CoSENTCrossEncoderTrainer``: CoSENT on a cross-encoder's scores (eq. 11). The
bi-encoder (eq. 10) is the core's Trainer with the registered ``cosent`` loss."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch

from sts_core.command_files import write_text
from sts_core.cross_encoder import PairCrossCollator
from sts_core.saving import staged_contents
from sts_core.training import AnyModelTrainer
from sts_cosent.loss import CITATION, cosent_loss, has_no_ordered_pair

if TYPE_CHECKING:
    from torch import nn

    from sts_cosent.config import CoSENTConfig


class CoSENTCrossEncoderTrainer(AnyModelTrainer):
    """Interaction model (eq. 11): CoSENT on a cross-encoder's scores f(i, j).

    The model is ``AutoModelForSequenceClassification`` with one output over the
    concatenated pair; it saves and reloads like any sequence classifier (the method's
    ``build_model`` loads it). The dev evaluator reports the Spearman of its scores against
    gold.
    """

    args: CoSENTConfig  # the Trainer's arguments are the method's config

    def __init__(
        self, model: nn.Module, args: CoSENTConfig, evaluator: Any | None = None, **kwargs: Any
    ) -> None:
        # set by CoSENTMethod.build_model (nn.Module types such attributes Tensor | Module)
        tokenizer, max_length = model.sts_tokenizer, cast(int, model.sts_max_length)
        kwargs.setdefault(
            "data_collator", PairCrossCollator(tokenizer, max_length, args.label_column)
        )
        kwargs.setdefault("processing_class", tokenizer)
        # the evaluator's cross-encoder scorer reads model.sts_tokenizer / sts_max_length
        super().__init__(model, args, evaluator=evaluator, **kwargs)

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

    # A sequence classifier saves and loads the transformers way (the Trainer's own
    # loading); the save is atomic like the bi-encoder's (staged, the marker written last).
    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        if not self.args.should_save:
            return
        with staged_contents(output_dir or self.args.output_dir) as folder:
            super()._save(str(folder), state_dict)
            write_text(folder / "README.md", self.model_card_text(), record=False)  # of the save

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
