"""``BaseTrainer(Trainer)``: what every method's trainer shares.

The loss, the model and the data checks come from the run's method
(:class:`sts_core.method.Method`, found from the config: ``type(args).method``); a Trainer
subclass changes only the training loop (e.g. :meth:`BaseTrainer.build_epoch_batches`, or
:meth:`BaseTrainer.compute_loss` for another kind of model).
Evaluation runs the dev evaluator (Spearman on STS-B dev by default) so
``metric_for_best_model`` and ``load_best_model_at_end`` work unchanged; saving goes
through ``SentenceEncoder.save_pretrained`` so every checkpoint loads with ``AutoModel``,
``SentenceEncoder`` and ``SentenceTransformer``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from sts_core.losses import (
    EmbeddingLoss,
    pooled_embeddings,
)
from sts_core.saving import (
    STAGING_DIR,
    add_training_files,
    publish_folder,
    read_save_marker,
    remove_path,
)
from sts_core.training.averaging import WeightAverager, write_averaging_settings
from sts_core.training.collator import (
    SentenceCollator,
    batch_text_ids,
    split_features,
    text_columns_with,
)
from sts_core.training.divergence import DivergenceGuard
from sts_core.training.model_card import render_model_card
from sts_core.training.optimization import regroup_parameters

logger = logging.getLogger(__name__)

TRAINING_ARGS_NAME = "training_args.bin"
TRAINER_STATE_NAME = "trainer_state.json"
# the batches of the epoch a checkpoint was saved in (build_epoch_batches), for a resume
EPOCH_BATCHES_NAME = "epoch_batches.json"
# the sum of the training losses up to a checkpoint, so a resumed run's train_loss is the
# whole run's mean (the Trainer's own counts only the steps since the resume)
LOSS_TOTAL_NAME = "sts_loss_total.json"
# A warning after training when at least this share of the batches gave no usable pairs.
DEGENERATE_WARNING_SHARE = 0.1


LOSS_MODULE_NAME = "sts_loss"


def attach_loss_parameters(model: Any, loss_module: Any) -> None:
    """A loss with trainable parameters of its own (a temperature) becomes the submodule
    ``sts_loss`` of the model, so the optimizer, DDP's gradient averaging and checkpoints
    (resume) include it; its learning rate comes from ``learning_rate_mapping``
    (``{"sts_loss\\.": rate}``)."""
    shared = {id(p) for p in model.parameters()}
    if any(id(p) not in shared for p in loss_module.parameters()):
        model.add_module(LOSS_MODULE_NAME, loss_module)


def require_trainable_parameters(model: Any, loss_name: str) -> None:
    """ValueError when no parameter of the model would train (a frozen backbone and a loss
    without a head or parameters of its own)."""
    if not any(parameter.requires_grad for parameter in model.parameters()):
        raise ValueError(
            f"nothing to train: no parameter of the model needs a gradient (freeze_backbone "
            f"with loss {loss_name}, which has no head or parameters of its own)"
        )


def check_gradient_cache(args: Any, loss_module: Any, loss_name: str) -> None:
    """ValueError for ``gradient_cache_batch_size`` with a loss that has parameters (a head,
    a trainable temperature): gradient caching computes the loss outside the model's
    forward, where DDP would not reduce their gradients."""
    if getattr(args, "gradient_cache_batch_size", None) is None:
        return
    if any(True for _ in loss_module.parameters()):
        raise ValueError(
            f"gradient_cache_batch_size with loss {loss_name}, which has a head or parameters "
            "of its own: gradient caching supports losses over the embeddings alone; drop "
            "gradient_cache_batch_size (or use gradient_accumulation_steps)"
        )


class BaseTrainer(Trainer):
    """Trainer for a ``SentenceEncoder``; the built-in loss is cosine MSE on pairs.

    Args:
        model: the SentenceEncoder to train.
        args: a ``BaseConfig`` (or a method's subclass).
        evaluator: a callable ``encoder -> {metric: value}`` with ``primary_metric``
            (e.g. ``PairSimilarityEvaluator`` on STS-B dev); ``None`` disables evaluation.
        Other arguments go to ``transformers.Trainer``.
    """

    loss_is_scaled_for_ga = False  # our losses are per-batch means

    def __init__(self, model: Any, args: Any, evaluator: Any | None = None, **kwargs: Any) -> None:
        from sts_core.method import method_of

        self.method = method_of(args)
        args.label_column = self.method.label_column(args)
        loss_type = self.method.loss_class(args)
        self.text_columns = text_columns_with(loss_type.columns)
        if kwargs.get("data_collator") is None:
            kwargs["data_collator"] = SentenceCollator(
                model,
                label_column=args.label_column,
                text_id_columns=loss_type.text_id_columns,
                text_columns=self.text_columns,
            )
        if kwargs.get("processing_class") is None:
            kwargs["processing_class"] = model.tokenizer
        if evaluator is not None and kwargs.get("eval_dataset") is None:
            kwargs["eval_dataset"] = ["dev set scored by the evaluator"]  # Trainer checks it is set
        loss_type.prepare_model(model, args)  # a loss's head
        loss_module = loss_type.from_config(args, model)
        attach_loss_parameters(model, loss_module)
        require_trainable_parameters(model, self.method.loss_name(args))
        check_gradient_cache(args, loss_module, self.method.loss_name(args))
        super().__init__(model=model, args=args, **kwargs)
        self.weight_averager = self._add_weight_averager(args)
        self.divergence_guard = DivergenceGuard()
        self.divergence_guard.trainer = self
        self.add_callback(self.divergence_guard)
        self._loss_sum_before_resume: float | None = None  # from a checkpoint
        self.evaluator = evaluator
        self.model_card_data: dict[str, Any] = {"loss": loss_type.describe()}
        self._loss_parts: dict[str, list[float]] = defaultdict(list)
        self._batches_seen = 0
        self._degenerate_batches: dict[str, Any] = defaultdict(int)
        self._epoch_batches: tuple[int, list[list[int]]] | None = None  # the current epoch's
        self._resumed_epoch_batches: dict[int, list[list[int]]] = {}
        self.loss_module: EmbeddingLoss = loss_module
        settings = ", ".join(f"{k} {v}" for k, v in loss_module.config_dict().items())
        self.model_card_data["loss_module"] = (
            f"`{loss_type.display_name()}` ({type(loss_module).__name__}"
            + (f": {settings})" if settings else ")")
        )

    def _add_weight_averager(self, args: Any) -> WeightAverager | None:
        """``weight_averaging``'s callback (:mod:`sts_core.training.averaging`), if asked."""
        averager = WeightAverager.from_config(args)
        if averager is None:
            return None
        plugin = getattr(self.accelerator.state, "deepspeed_plugin", None)
        if self.is_deepspeed_enabled and plugin is not None and plugin.zero_stage == 3:
            raise ValueError(
                "weight_averaging under DeepSpeed ZeRO-3: each process holds a shard of the "
                "weights; launch with ZeRO-2 or DDP, or set weight_averaging: none"
            )
        self.add_callback(averager)
        return averager

    # ------------------------------------------------------------------ batches of an epoch
    def build_epoch_batches(self, dataset: Any, epoch: int) -> list[list[int]] | None:
        """Hook: the global batches of ``epoch`` (lists of indices into ``dataset``, at most
        ``per_device_train_batch_size × processes`` each), built at the start of the epoch —
        from the current model if wanted (``self.accelerator.unwrap_model(self.model)``
        can ``encode``). ``None`` (the default): the Trainer's own random batches. Called on
        every process; the main process's batches are used (see
        :mod:`sts_core.training.sampler`)."""
        return None

    def get_train_dataloader(self) -> Any:
        if type(self).build_epoch_batches is BaseTrainer.build_epoch_batches:
            return super().get_train_dataloader()
        from torch.utils.data import DataLoader

        from sts_core.training.sampler import EpochBatchSampler

        dataset = self.train_dataset
        sampler = EpochBatchSampler(
            lambda epoch: self._batches_of_epoch(dataset, self._current_epoch(epoch)),
            len(dataset),
            self.args.per_device_train_batch_size,
            self.args.world_size,
        )
        loader = DataLoader(
            dataset,
            batch_sampler=sampler,
            collate_fn=self.data_collator,
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
        )
        return self.accelerator.prepare(loader)

    def _batches_of_epoch(self, dataset: Any, epoch: int) -> list[list[int]]:
        """:meth:`build_epoch_batches`, except for the epoch a resumed checkpoint was saved
        in: its batches come from the checkpoint (``epoch_batches.json``), so a run resumed
        mid-epoch sees the batches the interrupted run would have seen — built from the
        model as it was at the start of that epoch, not as it is at the checkpoint."""
        batches = self._resumed_epoch_batches.pop(epoch, None)
        if batches is None:
            batches = self.build_epoch_batches(dataset, epoch)
        else:
            logger.info("epoch %d: the batches saved with the checkpoint", epoch)
        self._epoch_batches = (epoch, batches)
        return batches

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any) -> Any:
        """``Trainer.train``; a resumed run first reads the checkpoint's epoch batches, weight
        average and loss total, and its ``train_loss`` is the whole run's mean loss."""
        self._loss_sum_before_resume = None
        if resume_from_checkpoint:
            self._read_resume_state(resume_from_checkpoint)
        output = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        return self._with_whole_run_loss(output)

    def _run_epoch(self, *args: Any, **kwargs: Any) -> Any:
        """A run resumed from the checkpoint of its last step has nothing left to train (the
        Trainer would take one more step when that step ends mid-epoch)."""
        if 0 < self.state.max_steps <= self.state.global_step:
            logger.info(
                "the checkpoint is at step %d of %d: nothing left to train",
                self.state.global_step,
                self.state.max_steps,
            )
            self.control.should_training_stop = True
            return None
        return super()._run_epoch(*args, **kwargs)

    def _loss_sum_so_far(self) -> float:
        """Σ of the training losses of every step so far (the Trainer's logged total plus
        what it has not logged yet, plus the total before a resume)."""
        pending = getattr(self, "_tr_loss", None)
        pending = float(pending.item()) if isinstance(pending, torch.Tensor) else 0.0
        before = self._loss_sum_before_resume or 0.0
        return before + getattr(self, "_total_loss_scalar", 0.0) + pending

    def _with_whole_run_loss(self, output: Any) -> Any:
        """``output`` with ``train_loss`` the mean over all steps of the run (after a resume
        the Trainer's covers only the steps of this call)."""
        if self._loss_sum_before_resume is None:
            return output
        steps = max(self.state.global_step, 1)
        loss = (self._loss_sum_before_resume + self._total_loss_scalar) / steps
        for entry in reversed(self.state.log_history):
            if "train_loss" in entry:
                entry["train_loss"] = loss
                break
        return output._replace(training_loss=loss, metrics={**output.metrics, "train_loss": loss})

    def _read_resume_state(self, checkpoint: str | bool) -> None:
        from transformers.trainer_utils import get_last_checkpoint

        folder = get_last_checkpoint(self.args.output_dir) if checkpoint is True else checkpoint
        if not folder:
            return
        path = Path(folder) / EPOCH_BATCHES_NAME
        if path.is_file():
            saved = json.loads(path.read_text(encoding="utf-8"))
            self._resumed_epoch_batches = {int(saved["epoch"]): saved["batches"]}
        if self.weight_averager is not None:
            self.weight_averager.load(Path(folder), self.model)
        total = Path(folder) / LOSS_TOTAL_NAME
        if total.is_file():
            saved = json.loads(total.read_text(encoding="utf-8"))
            self._loss_sum_before_resume = float(saved["loss_sum"])

    def _current_epoch(self, counted: int) -> int:
        """The epoch being started, from the trainer state (right after a resume too, where
        accelerate's batch skipping does not pass ``set_epoch`` on to the sampler)."""
        if self.state is not None and self.state.epoch is not None:
            return int(math.floor(self.state.epoch + 1e-9))
        return counted

    def create_optimizer(self, model: Any = None) -> torch.optim.Optimizer:
        """The Trainer's AdamW groups, then ``learning_rate_mapping``, ``layer_lr_decay`` and
        no weight decay on scalar parameters
        (:func:`sts_core.training.optimization.regroup_parameters`)."""
        optimizer = super().create_optimizer(model)
        inner = getattr(optimizer, "optimizer", optimizer)  # accelerate's wrapper
        if getattr(inner, "sts_regrouped", False):  # DeepSpeed asks for it twice
            return self.optimizer
        target = self.model if model is None else model
        mapping = getattr(self.args, "learning_rate_mapping", None)
        decay = getattr(self.args, "layer_lr_decay", None)
        regroup_parameters(inner, target.named_parameters(), mapping, decay)
        inner.sts_regrouped = True
        return self.optimizer

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
        (:meth:`build_final_evaluators`)."""
        model = self.accelerator.unwrap_model(self.model)
        evaluators = self.method.build_final_evaluators(data_args, self.args)
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
        if self.is_world_process_zero():
            print(report.to_text())
            report.save(os.path.join(self.args.output_dir, "sts_results"))
        return report.to_dict()

    # ------------------------------------------------------------------ loss
    def embed(
        self,
        model: Any,
        inputs: dict[str, torch.Tensor],
        then: Callable[[dict[str, torch.Tensor]], Any] | None = None,
    ) -> Any:
        """Embeddings of each text column of a collated batch: ``{"sentence1": (N, d), …}``.

        One call of ``model`` (the wrapped model in training) with every column
        (``SentenceEncoder.forward(columns=…)``): a padding-free encoder packs them into one
        forward, others embed each column apart, as sentence-transformers does. ``then``, a
        function of the embeddings by column, runs inside that call and its result is
        returned instead: what it uses of the model (a loss's head, loss parameters) is
        then part of the forward DDP tracks.
        """
        groups = split_features(inputs, self.text_columns)
        return model(columns=groups, then=then)

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, torch.Tensor],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
        **kwargs: Any,
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The registered loss (``loss_module``) on the batch's embeddings and labels, computed
        inside the model's forward (:meth:`embed` with ``then``); a loss with parts logs each
        of them. A loss that ``reads_pooled`` gets the embeddings before the encoder's L2
        normalisation (:func:`~sts_core.losses.pooled_embeddings`). Methods with another
        kind of model override this."""
        if getattr(self.loss_module, "reads_pooled", False):
            with pooled_embeddings(self.accelerator.unwrap_model(model)):
                return self._compute_loss(model, inputs, return_outputs)
        return self._compute_loss(model, inputs, return_outputs)

    def _compute_loss(
        self, model: Any, inputs: dict[str, torch.Tensor], return_outputs: bool
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`compute_loss` with the encoder as it is."""
        embeddings: dict[str, torch.Tensor] = {}

        def loss_of(by_column: dict[str, torch.Tensor]) -> torch.Tensor:
            embeddings.update(by_column)
            return self.apply_loss(by_column, inputs.get("labels"), batch_text_ids(inputs))

        cache = getattr(self.args, "gradient_cache_batch_size", None)
        if cache is not None and model.training and torch.is_grad_enabled():
            from sts_core.training.grad_cache import cached_loss

            loss, embeddings = cached_loss(
                model, split_features(inputs, self.text_columns), loss_of, cache
            )
        else:
            loss = self.embed(model, inputs, then=loss_of)
        return (loss, embeddings) if return_outputs else loss

    def apply_loss(
        self,
        embeddings: dict[str, torch.Tensor],
        labels: Any,
        text_ids: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Call ``loss_module`` (with ``text_ids`` when it asks for them:
        ``text_id_columns``); log its parts, count its degenerate batches."""
        if self.loss_module.text_id_columns:
            output = self.loss_module(embeddings, labels, text_ids=text_ids or {})
        else:
            output = self.loss_module(embeddings, labels)
        for reason, happened in self.loss_module.pop_degenerate():
            self.record_degenerate_batch(reason, happened)
        if isinstance(output, dict):
            self.log_loss_parts({k: v for k, v in output.items() if k != "loss"})
            return output["loss"]
        return output

    def log_loss_parts(self, parts: dict[str, torch.Tensor]) -> None:
        """Record named parts of a loss; they are averaged into the next log line."""
        for name, value in parts.items():
            self._loss_parts[name].append(float(value.detach().float().item()))

    def record_degenerate_batch(self, reason: str, happened: torch.Tensor | bool = True) -> None:
        """Count a training batch that gave the loss nothing to learn from (``reason``: e.g.
        "no two distinct labels"); :meth:`degenerate_batch_report` sums them up.
        ``happened`` may be a boolean tensor: it is added on its device (no GPU sync)."""
        if isinstance(happened, torch.Tensor):
            happened = happened.detach().to(torch.int64)
        self._degenerate_batches[reason] = self._degenerate_batches[reason] + happened

    def training_step(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._batches_seen += 1
        loss = super().training_step(*args, **kwargs)
        self.divergence_guard.observe(loss, self.state.global_step + 1)
        return loss

    def check_finite(self) -> None:
        """:class:`~sts_core.training.divergence.TrainingDiverged` if a step's loss or a
        trainable weight is not finite (before the final save: a diverged run publishes
        no model)."""
        self.divergence_guard.check(self.accelerator.unwrap_model(self.model))

    def degenerate_batch_report(self) -> dict[str, Any]:
        """Batches seen in training and those without usable pairs, by reason; a warning
        when they are at least ``DEGENERATE_WARNING_SHARE`` of the batches."""
        reasons = {reason: int(count) for reason, count in self._degenerate_batches.items()}
        reasons = {reason: count for reason, count in reasons.items() if count}
        useless = sum(reasons.values())
        report = {
            "batches": self._batches_seen,
            "without_usable_pairs": useless,
            "reasons": reasons,
        }
        if useless and useless >= DEGENERATE_WARNING_SHARE * max(self._batches_seen, 1):
            logger.warning(
                "%d of %d training batches gave the loss nothing to learn from (%s): check "
                "the batch size and the labels",
                useless,
                self._batches_seen,
                ", ".join(f"{k}: {v}" for k, v in reasons.items()),
            )
        return report

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._loss_parts:
            logs.update({name: sum(v) / len(v) for name, v in self._loss_parts.items()})
            self._loss_parts.clear()
        super().log(logs, start_time)

    # ------------------------------------------------------------------ evaluation
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

    # ------------------------------------------------------------------ saving / loading
    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        output_dir = output_dir or self.args.output_dir
        if not self.args.should_save:
            return
        encoder = self.accelerator.unwrap_model(self.model, keep_torch_compile=False)
        checkpoint = STAGING_DIR in Path(output_dir).parts  # the adapter only, never merged
        encoder.save_pretrained(
            output_dir,
            state_dict=state_dict,
            model_card=self.model_card_text(),
            write_extra=lambda folder: torch.save(self.args, folder / TRAINING_ARGS_NAME),
            **({"merge_lora": False} if checkpoint else {}),
        )

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        """Write the checkpoint (model, optimizer, scheduler, RNG, trainer state) into
        ``<output_dir>/.sts-staging/checkpoint-N``, mark it complete, then rename it into
        place: a run killed while saving never leaves a half-written ``checkpoint-N``."""
        self.divergence_guard.check(self.accelerator.unwrap_model(model))
        run_dir = Path(self._get_output_dir(trial=trial))
        staging_root = run_dir / STAGING_DIR
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staged, final = staging_root / name, run_dir / name
        if self.args.should_save:
            remove_path(staged)  # left by a run killed while saving
        self.accelerator.wait_for_everyone()
        self._get_output_dir = lambda trial=None: str(staging_root)  # super() writes there
        self._push_after_publishing = False
        try:
            super()._save_checkpoint(model, trial)
        finally:
            del self._get_output_dir
        self.accelerator.wait_for_everyone()
        if self.state.best_model_checkpoint == str(staged):
            self.state.best_model_checkpoint = str(final)
        loss_sum = self._loss_sum_so_far()
        if self.args.should_save:
            self.state.save_to_json(str(staged / TRAINER_STATE_NAME))
            (staged / LOSS_TOTAL_NAME).write_text(
                json.dumps({"global_step": self.state.global_step, "loss_sum": loss_sum}),
                encoding="utf-8",
            )
            write_averaging_settings(staged, self.args)
            if self._epoch_batches is not None:
                epoch, batches = self._epoch_batches
                (staged / EPOCH_BATCHES_NAME).write_text(
                    json.dumps({"epoch": epoch, "batches": batches}), encoding="utf-8"
                )
            if self.weight_averager is not None and self.weight_averager.count:
                self.weight_averager.save(staged)
            add_training_files(staged, step=self.state.global_step)
            publish_folder(staged, final)
            remove_path(staging_root)
            rotate_checkpoints(
                output_dir=str(run_dir),
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
            )
        if self._push_after_publishing:
            super()._push_from_checkpoint(str(final))
        self.accelerator.wait_for_everyone()

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """``push_to_hub``: upload the checkpoint once it is in place, not its staging copy."""
        if STAGING_DIR in Path(checkpoint_folder).parts:
            self._push_after_publishing = True
            return
        super()._push_from_checkpoint(checkpoint_folder)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        if self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return super()._load_from_checkpoint(resume_from_checkpoint, model)
        target = model if model is not None else self.model
        self.accelerator.unwrap_model(target).load_weights(resume_from_checkpoint)

    def _load_best_model(self) -> None:
        if self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return super()._load_best_model()
        logger.info(
            "Loading best model from %s (score: %s).",
            self.state.best_model_checkpoint,
            self.state.best_metric,
        )
        self.accelerator.unwrap_model(self.model).load_weights(self.state.best_model_checkpoint)

    def model_card_text(self) -> str:
        """A README for the saved folder: method, citation, base model, data and scores."""
        return render_model_card(
            method=self.method.name,
            trainer_name=type(self).__name__,
            paper=self.method.paper(),
            encoder=self.accelerator.unwrap_model(self.model),
            card_data=self.model_card_data,
            state=self.state,
        )
