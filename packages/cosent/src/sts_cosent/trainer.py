"""``CoSENTTrainer`` (bi-encoder, eq. 10) and ``CoSENTCrossEncoderTrainer`` (eq. 11)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn
from transformers import Trainer

from sts_core.cross_encoder import CrossEncoderEvaluator, PairCrossCollator, load_cross_encoder
from sts_core.saving import staged_contents
from sts_core.training import BaseTrainer, all_gather_with_grad, scale_gathered_gradient
from sts_cosent.loss import (
    contrastive_threshold_loss,
    cosent_loss,
    cosine_mse_loss,
    in_batch_infonce_loss,
    pairwise_cosine,
    softmax_classifier_loss,
)

CITATION = """@article{huang2024cosent,
  title={CoSENT: Consistent Sentence Embedding via Similarity Ranking},
  author={Huang, Xiang and Peng, Hao and Zou, Dongcheng and Liu, Zhiwei and Li, Jianxin and
          Liu, Kay and Wu, Jia and Su, Jianlin and Yu, Philip S.},
  journal={IEEE/ACM Transactions on Audio, Speech, and Language Processing},
  volume={32},
  pages={2800--2813},
  year={2024}
}"""
PAPER = {"name": "CoSENT ranking loss", "citation": CITATION}
SOFTMAX_HEAD = "softmax_classifier"
LOSS_NAMES = {
    "cosent": "CoSENT (eq. 10)",
    "cosine_mse": "cosine-similarity MSE (baseline)",
    "contrastive": "contrastive loss with threshold ε (eq. 2, baseline)",
    "softmax": "SBERT softmax classifier over (u, v, |u − v|) (baseline)",
    "infonce": "in-batch InfoNCE (eq. 3, baseline)",
}


def count_unrankable(trainer: Any, labels: torch.Tensor) -> None:
    """Record a batch whose labels are all equal: CoSENT has no ordered pair to rank."""
    flat = labels.reshape(-1)
    happened = True if flat.numel() < 2 else (flat == flat[0]).all()
    trainer.record_degenerate_batch("no two distinct labels", happened)


class CoSENTTrainer(BaseTrainer):
    """Siamese training with CoSENT (or one of the paper's baselines, ``args.loss``).

    The batch's pairs are encoded, each pair's cosine similarity is computed and the
    ranking loss compares every ordered pair of pairs. With
    ``gather_across_processes`` the scores and labels of all processes are all-gathered
    first (gradient through the local part, scaled by the world size so DDP's averaging
    gives exactly the gradient of one process over the whole batch; the loss value, and so
    the logged loss, is that of the whole batch, whatever the number of processes); otherwise
    each process ranks its own batch. The baselines (cosine MSE, contrastive, softmax,
    InfoNCE) use the local batch.
    """

    _paper: ClassVar[dict[str, str]] = PAPER

    def __init__(self, model: Any, args: Any, **kwargs: Any) -> None:
        if args.loss == "softmax" and not hasattr(model, SOFTMAX_HEAD):
            # SBERT's classifier over (u, v, |u − v|); saved with the model as an extra module.
            model.add_module(SOFTMAX_HEAD, nn.Linear(3 * model.dimension, args.num_labels))
        if args.loss == "softmax" and args.label_column == "score":
            args.label_column = "label"
        super().__init__(model, args, **kwargs)
        self.model_card_data["loss"] = LOSS_NAMES[args.loss]

    @classmethod
    def label_column_for(cls, config: Any) -> str:
        """The softmax baseline reads the class labels (``label``) unless told otherwise."""
        if config.loss == "softmax" and config.label_column == "score":
            return "label"
        return config.label_column

    @classmethod
    def check_train_dataset(cls, dataset: Any, config: Any) -> None:
        """The softmax baseline needs integer classes 0 … num_labels − 1, the contrastive
        baseline labels 0/1 (ValueError otherwise, before the model is loaded)."""
        super().check_train_dataset(dataset, config)
        labels = dataset[cls.label_column_for(config)]
        if config.loss == "softmax":
            allowed = set(range(config.num_labels))
            wrong = sorted({v for v in labels if v not in allowed or v != int(v)})
            if wrong:
                raise ValueError(
                    f"loss softmax needs class labels 0 … {config.num_labels - 1} in column "
                    f"{cls.label_column_for(config)!r}, found {wrong[:5]}: train it on NLI "
                    "(label 0/1/2) or set num_labels"
                )
        if config.loss == "contrastive":
            wrong = sorted({v for v in labels if v not in (0, 1)})
            if wrong:
                raise ValueError(
                    f"loss contrastive needs binary labels 0/1 in column {config.label_column!r}"
                    f", found {wrong[:5]}"
                )

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, torch.Tensor],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
        **kwargs: Any,
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        embeddings = self.embed(model, inputs)
        u, v, labels = embeddings["sentence1"], embeddings["sentence2"], inputs["labels"]
        loss = self._loss(model, u, v, labels)
        return (loss, embeddings) if return_outputs else loss

    def _loss(
        self, model: Any, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        name = self.args.loss
        if name == "cosent":
            return self.ranking_loss(pairwise_cosine(u, v), labels)
        if name == "cosine_mse":
            return cosine_mse_loss(u, v, labels)
        if name == "contrastive":
            return contrastive_threshold_loss(u, v, labels, margin=self.args.contrastive_margin)
        if name == "softmax":
            head = getattr(self.accelerator.unwrap_model(model), SOFTMAX_HEAD)
            return softmax_classifier_loss(u, v, labels.long(), head)
        keep = (
            labels >= self.args.positive_threshold
            if self.args.positive_threshold is not None
            else None
        )
        if keep is not None:
            if not bool(keep.any()):
                # no positive pair in this batch: nothing to contrast. A zero loss that stays
                # on the graph (DDP expects every parameter to get a gradient), not the NaN
                # of a mean over no rows.
                self.record_degenerate_batch("no positive pair")
                return u.sum() * 0.0
            u, v = u[keep], v[keep]
        return in_batch_infonce_loss(u, v, temperature=self.args.infonce_temperature)

    def ranking_loss(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """CoSENT over the local batch, or over the batch of all processes. A batch with no
        two distinct labels has no ordered pair to rank: it is counted (the run reports how
        many) and contributes a zero loss."""
        if not self.args.gather_across_processes:
            self.count_unrankable(labels)
            return cosent_loss(scores, labels, scale=self.args.cosent_scale)
        gathered_scores = all_gather_with_grad(scores)
        gathered_labels = all_gather_with_grad(labels.to(scores.dtype))
        self.count_unrankable(gathered_labels)
        loss = cosent_loss(gathered_scores, gathered_labels, scale=self.args.cosent_scale)
        return scale_gathered_gradient(loss)  # same value, gradient × world size

    def count_unrankable(self, labels: torch.Tensor) -> None:
        count_unrankable(self, labels)


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
        if evaluator is not None:
            evaluator.tokenizer, evaluator.max_length = tokenizer, max_length
        super().__init__(model, args, evaluator=evaluator, **kwargs)

    @classmethod
    def build_model(cls, model_args: Any, config: Any) -> Any:
        model, tokenizer, max_length = load_cross_encoder(
            model_args.model_name_or_path, model_args.max_seq_length
        )
        model.sts_tokenizer, model.sts_max_length = tokenizer, max_length
        return model

    @classmethod
    def build_evaluator(cls, name: str, dataset: Any, config: Any) -> Any:
        return CrossEncoderEvaluator(
            dataset, name=name, batch_size=config.per_device_eval_batch_size
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
        count_unrankable(self, labels)
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
