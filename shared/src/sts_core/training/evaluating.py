"""Evaluation of a ``BaseTrainer``: the dev evaluator during training (and, in a run, once
before it: :class:`EvaluateBeforeTraining`), the final pair sets and the STS table after
it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import Trainer, TrainerCallback

from sts_core.saving import read_save_marker
from sts_core.training.data import final_evaluators

if TYPE_CHECKING:
    from torch import nn
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from sts_core.method import Method
    from sts_core.training.config import BaseConfig


class Evaluating(Trainer):
    """Dev and final evaluation for :class:`~sts_core.training.trainer.BaseTrainer` (a
    ``Trainer`` mix-in: it expects the trainer's ``evaluator`` and ``method``)."""

    # set by AnyModelTrainer
    args: BaseConfig
    evaluator: Callable[[nn.Module], Mapping[str, float]] | None
    method: Method

    def evaluate(
        self,
        eval_dataset: Any = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        """Run the dev evaluator on the model; keys are ``<prefix>_<metric>``."""
        if self.evaluator is None:
            return {}
        start = time.perf_counter()
        encoder = self.accelerator.unwrap_model(self.model)
        raw = self.evaluator(encoder)
        metrics = {f"{metric_key_prefix}_{key}": float(value) for key, value in raw.items()}
        metrics[f"{metric_key_prefix}_runtime"] = round(time.perf_counter() - start, 4)
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(
            self.args, self.state, self.control, metrics
        )
        return metrics

    def evaluate_before_training(self) -> dict[str, float]:
        """The dev scores of the model before its first training step, logged at step 0
        (:class:`EvaluateBeforeTraining` calls it when training begins); nothing without a
        dev evaluator, on a resumed run (its log history has them from its first start)
        or under ``eval_on_start`` (the Trainer's own evaluation at the start)."""
        evaluator = getattr(self, "evaluator", None)
        if evaluator is None or self.state.global_step > 0 or self.args.eval_on_start:
            return {}
        return self.evaluate()

    def final_evaluation(self, data_args: Any) -> dict[str, Any]:
        """After training: the STS table on ``final_sts_tasks`` and the scores on
        ``final_eval_datasets`` (each with this trainer's dev evaluator)."""
        results: dict[str, Any] = {}
        if data_args.final_eval_datasets:
            results["final"] = self._score_pair_sets(data_args)
        if data_args.final_sts_tasks:
            results["sts"] = self._sts_table(data_args)
        return results

    def _score_pair_sets(self, data_args: Any) -> dict[str, dict[str, float]]:
        """Each of ``final_eval_datasets`` scored as ``final_eval_task`` says
        (:func:`~sts_core.training.data.final_evaluators`)."""
        model = self.accelerator.unwrap_model(self.model)
        evaluators = final_evaluators(self.method, data_args, self.args)
        scores = {reference: evaluator(model) for reference, evaluator in evaluators.items()}
        if self.is_world_process_zero():
            for reference, values in scores.items():
                print(reference, ", ".join(f"{k} {v:.2f}" for k, v in values.items()))
        return scores

    def _sts_table(self, data_args: Any) -> dict[str, Any]:
        from sts_core.evaluation.sts import STSEvaluator

        evaluator = getattr(self, "final_sts_evaluator", None) or STSEvaluator(
            data_dir=data_args.data_dir,
            tasks=data_args.final_sts_tasks,
            variant=data_args.data_variant,
            batch_size=self.args.per_device_eval_batch_size,
            show_progress_bar=False,
            sentence_edit=data_args.final_sts_sentence_edit,
        )
        encoder = self.accelerator.unwrap_model(self.model)
        report = evaluator.evaluate(encoder, model_name=str(self.args.output_dir))
        marker = read_save_marker(Path(self.args.output_dir))
        report.model_save_id = (marker or {}).get("save_id")  # the model saved beside it
        report.inputs = (getattr(self, "run_settings", None) or {}).get("inputs")
        if self.is_world_process_zero():
            print(report.to_text())
            report.save(os.path.join(self.args.output_dir, "sts_results"))
        return report.to_dict()


class EvaluateBeforeTraining(TrainerCallback):
    """Scores the untrained model on the dev set once, when training begins, so that the
    dev curve (and the model card's dev scores) start at step 0: one more dev evaluation
    per run. :class:`~sts_core.training.run.TrainingRun` adds it to a run with a dev set;
    a Trainer built by hand evaluates as its ``eval_strategy`` says."""

    def __init__(self, trainer: Evaluating) -> None:
        self.trainer = trainer

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: Any,
    ) -> None:
        self.trainer.evaluate_before_training()


def scores_before_training(log_history: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The dev scores a log history holds of the untrained model: its step-0 evaluation's
    ``eval_*`` values (empty when the run evaluated none)."""
    for entry in log_history:
        if entry.get("step") == 0:
            scores = {k: float(v) for k, v in entry.items() if k.startswith("eval_")}
            if scores:
                return scores
    return {}
