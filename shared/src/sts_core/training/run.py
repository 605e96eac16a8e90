"""One training run: parse, check, build, train, save, evaluate, write metrics.

The only path from arguments to a trained, evaluated model: a method's ``train.py`` and
console script call :func:`cli_main` (``main = command(METHOD)``), the benchmarks
call :meth:`TrainingRun.run` with the same arguments as flags.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import set_seed
from transformers.trainer_utils import IntervalStrategy, SaveStrategy

from sts_core.command_files import (
    INTERRUPTED,
    NOTHING_HALF_WRITTEN,
    end_with_parent,
    written_by_project,
)
from sts_core.data import DataError
from sts_core.distributed import close_process_group, is_main_process, rank
from sts_core.encoder import check_model_location
from sts_core.encoder.model_shape import (
    ModelShapeError,
    check_max_length,
    config_width,
    read_model_shape,
)
from sts_core.losses.matryoshka import check_widths
from sts_core.saving import (
    SAVE_MARKER,
    checkpoints,
    read_save_marker,
    remove_path,
    write_json_atomic,
)
from sts_core.training.config import BaseConfig, DataArguments, ModelArguments, required_model
from sts_core.training.curves import CURVES_IMAGE, draw_learning_curves, learning_curve_series
from sts_core.training.divergence import TrainingDiverged
from sts_core.training.encoder_setup import build_encoder
from sts_core.training.method_registry import CORE_METHOD, installed_method, installed_method_names
from sts_core.training.multi_dataset import train_references
from sts_core.training.output import (
    METRICS_NAME,
    RESULT_FILES,
    check_resume_checkpoint,
    input_identities,
    prepare_output_dir,
    run_inputs,
)
from sts_core.training.parser import ConfigError, ConfigParser
from sts_core.training.resume_settings import (
    INPUTS_KEY,
    check_resume_settings,
    recipe_settings,
)

if TYPE_CHECKING:
    from sts_core.losses import EmbeddingLoss
    from sts_core.method import Method
    from sts_core.training.trainer import AnyModelTrainer

logger = logging.getLogger(__name__)
# what a run writes about its final model beside it: removed before a new model is published


@dataclass
class RunInputs:
    """Everything a run reads before it loads weights: checked, then used for training."""

    train_dataset: Any
    data_summary: dict[str, Any]
    evaluator: Any
    final_sts_evaluator: Any
    final_pair_sets: dict[str, int] = field(default_factory=dict)

    def describe(self, model_args: ModelArguments, data_args: DataArguments) -> list[str]:
        dev = "none" if self.evaluator is None else f"{self.evaluator.name}"
        lines = [
            f"model: {model_args.model_name_or_path}",
            training_data_line(self.data_summary),
            f"dev set: {dev} ({data_args.eval_dataset})",
        ]
        for name, info in self.data_summary.get("datasets", {}).items():
            prompts = f", prompts {info['prompts']}" if info.get("prompts") else ""
            lines.insert(
                -1,
                f"training set {name}: {info['rows']} rows, loss {info['loss']}, "
                f"weight {info['weight']:g}{prompts}",
            )
        if data_args.final_sts_tasks:
            lines.append(f"final STS tasks: {', '.join(data_args.final_sts_tasks)}")
        for reference, size in self.final_pair_sets.items():
            lines.append(f"final pair set: {reference} ({size} pairs)")
        return lines


def training_data_line(summary: dict[str, Any]) -> str:
    """What the run trains on, in one line of the check's report."""
    stream = summary.get("streaming")
    if stream is not None:
        first = stream["first_shard"]
        return (
            f"training data: a stream of {stream['shards']} shard(s) from "
            + ", ".join(summary["sources"])
            + f" (the first, {first['path']}, {first['rows']} pairs, checked; the others "
            f"are checked as they are read; shuffle buffer {stream['shuffle_buffer']} rows)"
        )
    return f"training data: {summary['train_pairs']} pairs from " + ", ".join(
        f"{k} ({v})" for k, v in summary["sources"].items()
    )


class TrainingRun:
    """One training run, in steps a method package may override.

    ``run()`` does, in order: :meth:`parse` the recipe and flags; :meth:`check` everything
    that can be checked without the weights (the model location, :meth:`prepare_data`: every
    data set and what the loss needs of it, the output folder) — a bad input stops here;
    then :meth:`build_model` (the method's), :meth:`build_trainer`, :meth:`train` and
    :meth:`finalise` (save, dev scores, final evaluation, ``metrics.json``). A run with a
    dev set scores the untrained model on it once when training begins (step 0 of the log
    history, ``dev_before_training`` in ``metrics.json``:
    :class:`~sts_core.training.evaluating.EvaluateBeforeTraining`).
    ``check_only`` stops after the checks. Two stages are two runs, the second starting
    from the first's output folder (:func:`run_stages`).

    ``method``: the :class:`~sts_core.method.Method` to train (default: the core's cosine
    MSE); its config class parses the arguments, and it builds the model, the evaluators
    and checks the data. After :meth:`parse`, ``trainer_class`` is the Trainer the method
    picks for the config; after :meth:`run`, ``trainer`` is the Trainer that trained.
    """

    def __init__(self, argv: Sequence[str] | None = None, method: Method | None = None) -> None:
        self.method = method if method is not None else CORE_METHOD
        self.argv = None if argv is None else list(argv)
        self.trainer: AnyModelTrainer | None = None
        self.given_train_dataset: Any = None
        self.given_eval_dataset: Any = None
        self.parsed = False
        self.model_args: ModelArguments
        self.data_args: DataArguments
        self.config: BaseConfig
        self.inputs: RunInputs  # set by check()
        self.settings: dict[str, Any]  # by check(): what each checkpoint records
        self.parser: ConfigParser | None = None  # after parse: where each value was set

    @classmethod
    def from_arguments(
        cls,
        method: Method,
        model_args: ModelArguments,
        data_args: DataArguments,
        config: BaseConfig,
        train_dataset: Any = None,
        eval_dataset: Any = None,
    ) -> TrainingRun:
        """A run of ``method`` from argument objects instead of a command line (what the
        benchmarks use); ``train_dataset``, a ``datasets.Dataset`` in memory with any column
        names (``columns``), replaces ``data_args.train_datasets`` and goes the files' way
        (the same reading, test-pair filter or overlap count, label mapping, rescaling,
        ``max_train_samples`` and the method's preparation and checks), and
        ``eval_dataset``, a ``datasets.Dataset`` or ``DatasetDict`` (its dev split) with
        any column names (``eval_columns``), replaces ``data_args.eval_dataset`` as the dev
        set. Every check and step is the command line's."""
        run = cls(method=method)
        run.model_args, run.data_args, run.config = model_args, data_args, config
        run.given_train_dataset, run.given_eval_dataset = train_dataset, eval_dataset
        run.parsed = True
        return run

    # ------------------------------------------------------------------ the steps
    def parse(self) -> None:
        self.parser = ConfigParser.for_method(self.method)
        self.model_args, self.data_args, self.config = self.parser.parse(self.argv)
        self.parsed = True
        logging.basicConfig(
            level=logging.INFO if self.config.should_log else logging.WARNING,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )

    @functools.cached_property
    def trainer_class(self) -> type[AnyModelTrainer]:
        """The method's Trainer for the config, imported when first read (no check reads it)."""
        from sts_core.training.trainer import trainer_class

        return trainer_class(self.method, self.config)

    def check(self) -> Any:
        """The checks before the work; returns the output-folder plan (locked)."""
        location = check_model_location(required_model(self.model_args))
        inputs = run_inputs(self.model_args, self.data_args, self.config)
        prepare_output_dir(self.config, dry_run=True, inputs=inputs)  # before the data work
        self.check_hardware()
        with named_settings(self.parser):
            check_model_shape(location, self.model_args, self.config)
        self.check_frozen_backbone()
        self.check_saved_heads(location)
        self.settings = checked_resume_settings(self.model_args, self.data_args, self.config)
        self.inputs = self.prepare_data()
        self.check_teacher()
        return prepare_output_dir(self.config, dry_run=self.config.check_only, inputs=inputs)

    def check_teacher(self) -> None:
        """``teacher_model`` against the loss and the loaded training set
        (:func:`~sts_core.training.distill.check_teacher`, the one check of it at run
        time), before any weights load."""
        from sts_core.training.distill import check_teacher

        loss = self.method.loss_class(self.config)
        label_column = self.method.label_column(self.config)
        try:
            check_teacher(self.config, loss, label_column, self.inputs.train_dataset)
        except ValueError as error:
            raise ConfigError(str(error)) from error

    def apply_teacher(self) -> None:
        """Relabel the training pairs with the teacher's similarities (:mod:`.distill`)."""

        from sts_core.training.distill import apply_teacher, is_cross_encoder, load_teacher

        if not self.config.teacher_model:
            return
        teacher = load_teacher(
            self.config.teacher_model,
            self.config.device,
            trust_remote_code=self.model_args.trust_remote_code,
        )
        proposer = None
        if is_cross_encoder(teacher) and self.config.teacher_neighbours:
            # a cross-encoder cannot search: the student as it starts proposes the neighbours
            proposer = build_encoder(self.model_args).to(self.config.device).eval()
        try:
            dataset, summary = apply_teacher(
                self.inputs.train_dataset,
                teacher,
                self.method.label_column(self.config),
                self.config.teacher_weight,
                self.config.per_device_eval_batch_size,
                self.config.teacher_neighbours,
                proposer,
            )
        except ValueError as error:
            raise ConfigError(str(error)) from error
        del teacher, proposer
        gc.collect()
        self.inputs.train_dataset = dataset
        self.inputs.data_summary["teacher"] = {"model": self.config.teacher_model, **summary}

    def check_hardware(self) -> None:
        """Options that need a GPU stop here, before any data or weights are read, on a
        machine without one (the recipe itself parses anywhere)."""
        import torch

        if self.model_args.load_in_4bit and not torch.cuda.is_available():
            raise ConfigError(
                "load_in_4bit (QLoRA) needs a CUDA GPU: bitsandbytes' 4-bit kernels do not "
                "run on this machine; train with use_lora: true (a float base) here"
            )

    @functools.cached_property
    def set_losses(self) -> dict[str, Any]:
        """Each training set's loss class by set name (``train_datasets`` as a mapping;
        empty for a list), resolved once for the run (:func:`.data.set_loss_classes`)."""
        from sts_core.training.data import set_loss_classes

        return set_loss_classes(self.method, self.config, self.data_args.train_specs or ())

    def run_losses(self) -> list[tuple[str, Any]]:
        """``(prefix, loss class)`` of each loss the run trains: the method's, or with
        ``train_datasets`` as a mapping each set's (prefix ``train_datasets: <name>: ``;
        an unknown loss is a ConfigError naming the set)."""
        if self.data_args.train_specs is None:
            return [("", self.method.loss_class(self.config))]
        return [(f"train_datasets: {name}: ", loss) for name, loss in self.set_losses.items()]

    def check_frozen_backbone(self) -> None:
        """``freeze_backbone`` needs losses that each train something of their own (a
        head)."""
        from sts_core.losses import HeadLoss, WeightedLossSum

        if not self.model_args.freeze_backbone:
            return
        for where, loss in self.run_losses():
            parts = loss.part_classes.values() if issubclass(loss, WeightedLossSum) else [loss]
            if not any(issubclass(p, HeadLoss) for p in parts):
                raise ConfigError(
                    f"{where}freeze_backbone: loss {loss.display_name()} trains no head of "
                    "its own, so nothing would train; use a loss with a head (e.g. the "
                    "regression package's smooth_k2, or softmax) or unfreeze the backbone"
                )

    def check_saved_heads(self, location: str) -> None:
        """A model folder that records heads (a first stage's output) must fit the loss:
        e.g. a regression head of other pair features is an error here, not after loading."""
        losses = self.run_losses()  # an unknown loss of a set: named even without heads
        heads, dimension = saved_heads(location)
        if not heads or dimension is None:
            return
        for where, loss in losses:
            try:
                loss.check_saved_heads(heads, self.config, dimension)
            except ValueError as error:
                raise ConfigError(f"{where}model folder {location}: {error}") from error

    def prepare_data(self) -> RunInputs:
        """Load and check every data set of the run (ConfigError / DataError)."""
        return prepare_inputs(
            self.method,
            self.data_args,
            self.config,
            self.given_train_dataset,
            self.given_eval_dataset,
            self.set_losses,
        )

    def build_model(self) -> Any:
        """The method's model (:meth:`~sts_core.method.Method.build_model`), else the core's:
        a ``SentenceEncoder`` as the model arguments describe it."""
        model = self.method.build_model(self.model_args, self.config)
        return build_encoder(self.model_args) if model is None else model

    def build_callbacks(self) -> list[Any]:
        """``TrainerCallback``s for the trainer (none by default; tests add probes)."""
        return []

    def build_trainer(self, model: Any) -> AnyModelTrainer:
        from sts_core.training.evaluating import EvaluateBeforeTraining

        trainer = self.trainer_class(
            model=model,
            args=self.config,
            train_dataset=self.inputs.train_dataset,
            evaluator=self.inputs.evaluator,
            method=self.method,
            callbacks=self.build_callbacks() or None,
        )
        if self.inputs.evaluator is not None:  # the dev curve starts at the untrained model
            trainer.add_callback(EvaluateBeforeTraining(trainer))
        trainer.final_sts_evaluator = self.inputs.final_sts_evaluator
        trainer.run_settings = self.settings
        trainer.model_card_data.update(
            base_model=self.model_args.model_name_or_path,
            train_data=", ".join(train_references(self.data_args.train_datasets)),
        )
        return trainer

    def train(self, trainer: AnyModelTrainer) -> Any:
        return trainer.train(resume_from_checkpoint=self.config.resume_from_checkpoint)

    def finalise(self, trainer: AnyModelTrainer, train_output: Any) -> dict[str, Any]:
        """Save the model, score it, write ``metrics.json``; return the metrics.

        A diverged run stops before the save; the previous model's result files are
        removed before the new model is published, and the new ones name its save."""
        from sts_core.training.evaluating import scores_before_training

        trainer.check_finite()
        output_dir = Path(self.config.output_dir)
        if trainer.is_world_process_zero():
            for name in RESULT_FILES:  # the earlier model's (the run checked they are ours)
                if written_by_project(output_dir / name):
                    remove_path(output_dir / name)
        curves = learning_curve_series(trainer.state.log_history)
        if trainer.is_world_process_zero() and draw_learning_curves(
            curves, output_dir / CURVES_IMAGE
        ):
            trainer.curves_image = CURVES_IMAGE  # the final model card shows it
        trainer.save_model(self.config.output_dir)
        metrics = {
            "model": saved_model_identity(output_dir),
            "inputs": self.settings[INPUTS_KEY],
            "launch": launch_summary(trainer),
            "train": {
                **train_output.metrics,
                "global_step": trainer.state.global_step,
                "batches": trainer.degenerate_batch_report(),
                **trainer.batch_plan_report(),
            },
            "data": self.inputs.data_summary,
            "dev": trainer.evaluate(),
            "dev_before_training": scores_before_training(trainer.state.log_history),
            "curves": curves,
        }
        metrics.update(trainer.final_evaluation(self.data_args))
        if trainer.is_world_process_zero():
            _write_metrics(Path(self.config.output_dir), metrics)
        return metrics

    # ------------------------------------------------------------------ the whole run
    def run(self) -> dict[str, Any]:
        """Train as the recipe and flags say; return (and write) the metrics."""
        if not self.parsed:
            self.parse()
        plan = self.check()
        try:
            if self.config.check_only:
                return report_check(self.inputs, self.model_args, self.data_args, plan)
            try:
                return self._work()
            except (ConfigError, DataError, OSError, TrainingDiverged) as error:
                error.sts_during_training = True  # type: ignore[union-attr]  # each process reports its own
                raise
        finally:
            if plan is not None:
                plan.release()

    def _work(self) -> dict[str, Any]:
        set_seed(self.config.seed)
        self.apply_teacher()
        with named_settings(self.parser):  # the loaded model's shape, where its files are silent
            self.trainer = self.build_trainer(self.build_model())
        return self.finalise(self.trainer, self.train(self.trainer))


def check_model_shape(location: str, model_args: ModelArguments, config: BaseConfig) -> None:
    """``max_seq_length`` against the model's positions and ``matryoshka_dims`` against its
    width, from its config files (:mod:`sts_core.encoder.model_shape`), before any weights
    load: the run checks them as ``check_only`` does (ModelShapeError)."""
    shape = read_model_shape(location)
    check_max_length(model_args.max_seq_length, shape, "max_seq_length")
    check_widths(config.matryoshka_dims, shape.width, shape.width_source)


@contextmanager
def named_settings(parser: ConfigParser | None) -> Iterator[None]:
    """A ModelShapeError inside as a one-line ConfigError naming where the options it names
    were set (the recipe's file and line, or the command line), when ``parser`` read them."""
    try:
        yield
    except ModelShapeError as error:
        message = " ".join(str(error).split())
        where = parser.where(message) if parser is not None else ""
        raise ConfigError(f"{where}: {message}" if where else message) from error


def checked_resume_settings(
    model_args: ModelArguments, data_args: DataArguments, config: BaseConfig
) -> dict[str, Any]:
    """The settings each checkpoint of the run will record (:mod:`.resume_settings`, with
    the content identities of its inputs), checked against ``resume_from_checkpoint``: a
    complete checkpoint whose pickled training state torch's safe loader reads, saved under
    these settings from the same inputs. (Its module imports the Trainer: only a resume
    imports it here.)"""
    settings = recipe_settings(config, model_args, data_args)
    settings[INPUTS_KEY] = input_identities(model_args, data_args, config)
    checkpoint = config.resume_from_checkpoint
    check_resume_checkpoint(checkpoint)
    if checkpoint:
        from sts_core.training.checkpoints import check_trusted_state_files

        check_trusted_state_files(checkpoint)
    try:
        check_resume_settings(config, settings, model_args, data_args)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    return settings


def saved_heads(location: str) -> tuple[dict[str, Any], int | None]:
    """The heads a local model folder records (``sts_heads.json``) and its hidden size (from
    ``config.json``); empty and None for a hub id or a folder without them (a LoRA adapter
    folder: its head is then checked when the model is built)."""

    from sts_core.heads import HEADS_CONFIG_NAME

    folder = Path(location)
    try:
        listing = json.loads((folder / HEADS_CONFIG_NAME).read_text(encoding="utf-8"))
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}, None
    heads = listing.get("heads") if isinstance(listing, dict) else None
    dimension = config_width(config) if isinstance(config, dict) else None
    return (heads if isinstance(heads, dict) else {}), dimension


def run_stages(stages: Sequence[TrainingRun]) -> list[dict[str, Any]]:
    """Run ``stages`` in order; each after the first starts from the previous stage's output
    folder (its ``model_name_or_path`` is set to it, after its own recipe and flags: a
    saved encoder, or a LoRA adapter folder). Returns every stage's metrics."""
    results: list[dict[str, Any]] = []
    previous: str | None = None
    for stage in stages:
        if previous is not None:
            own = sys.argv[1:] if stage.argv is None else stage.argv
            stage.argv = [*own, "--model_name_or_path", previous]
        results.append(stage.run())
        previous = str(stage.config.output_dir)
    return results


def prepare_inputs(
    method: Method,
    data_args: DataArguments,
    config: BaseConfig,
    train_dataset: Any = None,
    eval_dataset: Any = None,
    loss_classes: dict[str, type[EmbeddingLoss]] | None = None,
) -> RunInputs:
    """Load and check every data set of the run (ConfigError / DataError on a problem);
    ``train_dataset`` and ``eval_dataset`` (in memory) instead of
    ``data_args.train_datasets`` and ``data_args.eval_dataset``; ``loss_classes``: each
    training set's, as the run resolved them (:attr:`TrainingRun.set_losses`)."""
    from sts_core.evaluation.sts import STSEvaluator
    from sts_core.training.data import (
        build_dev_set,
        build_train_sets,
        final_evaluators,
        load_reference,
    )
    from sts_core.training.streaming import check_streaming, stream_train_dataset, streams

    check_trainer_for_datasets(method, config, data_args)  # before any set loads
    if streams(data_args):
        check_streaming(method, data_args, config, train_dataset)
        train_dataset, data_summary = stream_train_dataset(method, data_args, config)
        read_rows_by_rank(config)
    elif train_dataset is None and data_args.train_specs is not None:
        train_dataset, data_summary = build_train_sets(data_args, method, config, loss_classes)
    else:
        train_dataset, data_summary = prepare_train_list(method, data_args, config, train_dataset)
    dev = build_dev_set(data_args, eval_dataset)
    evaluator = None if dev is None else method.build_evaluator(dev[0], dev[1], config)
    dev_name = data_args.eval_dataset if eval_dataset is None else "in-memory dataset"
    align_with_dev_set(config, evaluator, dev_name)
    final_pair_sets = {
        reference: len(load_reference(reference, "test", data_args)[1])
        for reference in data_args.final_eval_datasets
    }
    if data_args.final_eval_task != "sts":  # labels and query ids checked before the work
        try:
            final_evaluators(method, data_args, config)
        except ValueError as error:
            raise ConfigError(str(error)) from error
    final_sts = None
    if data_args.final_sts_tasks:
        final_sts = STSEvaluator(
            data_dir=data_args.data_dir,
            tasks=data_args.final_sts_tasks,
            variant=data_args.data_variant,
            batch_size=config.per_device_eval_batch_size,
            show_progress_bar=not config.disable_tqdm and is_main_process(),  # a bar per task
            sentence_edit=data_args.final_sts_sentence_edit,
        )
    return RunInputs(train_dataset, data_summary, evaluator, final_sts, final_pair_sets)


def check_trainer_for_datasets(
    method: Method, config: BaseConfig, data_args: DataArguments
) -> None:
    """The settings a mapping of training sets and ``no_duplicates`` need of the run
    (ConfigError): the method's Trainer computes the loss of ``BaseTrainer`` (which picks
    each batch's loss) and, for several sets or ``no_duplicates``, builds no batches of
    its own. (``teacher_model`` with a mapping: :func:`.distill.check_teacher`.) A list
    with the default sampler has nothing to check, and imports no Trainer."""
    sampler = getattr(config, "batch_sampler", "default")
    specs = data_args.train_specs
    if specs is None and sampler == "default":
        return
    from sts_core.training.trainer import BaseTrainer, builds_own_batches, trainer_class

    trainer = trainer_class(method, config)
    own_batches = builds_own_batches(method, config)
    if sampler != "default" and own_batches:
        raise ConfigError(
            f"batch_sampler {sampler}: method {method.name} builds its own "
            f"batches ({trainer.__name__}.build_epoch_batches); drop batch_sampler"
        )
    if specs is None:
        return
    own_loss = not issubclass(trainer, BaseTrainer) or (
        trainer.compute_loss is not BaseTrainer.compute_loss
    )
    if own_loss or (own_batches and len(specs) > 1):
        what = "computes its own loss" if own_loss else "builds its own batches"
        raise ConfigError(
            f"train_datasets as a mapping of training sets: method {method.name} trains with "
            f"{trainer.__name__}, which {what}; give train_datasets as a list (one loss)"
        )


def prepare_train_list(
    method: Method, data_args: DataArguments, config: BaseConfig, train_dataset: Any = None
) -> tuple[Any, dict[str, Any]]:
    """The training set of the list form (or ``train_dataset``, in memory, read, filtered
    and checked by the same path as a file), prepared and checked by the method, and its
    summary (ConfigError / DataError on a problem)."""
    from sts_core.training.data import build_train_dataset, method_reads

    label_column, reads = method_reads(method, config)
    train_dataset, data_summary = build_train_dataset(
        data_args, config.seed, label_column, reads, given=train_dataset
    )
    try:
        train_dataset, prepared = method.prepare_train_dataset(train_dataset, config)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    if prepared:
        data_summary.update(prepared)
        data_summary["train_pairs"] = len(train_dataset)
    if len(train_dataset) == 0:
        raise ConfigError("the training set is empty (after filtering)")
    try:
        method.check_train_dataset(train_dataset, config)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    return train_dataset, data_summary


def read_rows_by_rank(config: BaseConfig) -> None:
    """On several processes, each reads its own part of a stream (accelerate splits it by
    shard, or by slices of each global batch): ``accelerator_config.dispatch_batches``
    false. True (the main process reads the stream and sends each process its part) is
    refused: it needs batches of one shape, and the collator's are as long as their
    texts."""
    accelerator_config: Any = config.accelerator_config  # an AcceleratorConfig by now
    if getattr(accelerator_config, "dispatch_batches", None):
        raise ConfigError(
            "streaming: accelerator_config dispatch_batches true sends the main process's "
            "batches to the others, which needs batches of one shape (these are as long as "
            "their texts): drop it (each process reads its own part of the stream)"
        )
    accelerator_config.dispatch_batches = False


def report_check(
    inputs: RunInputs, model_args: ModelArguments, data_args: DataArguments, plan: Any
) -> dict[str, Any]:
    """Print what the run would do (``check_only``) and return it."""
    lines = inputs.describe(model_args, data_args)
    if plan is not None:
        lines.append(f"output_dir: {plan.describe()}")
    if is_main_process():
        print("check_only: the inputs are usable; nothing was loaded or trained")
        print("\n".join(f"  {line}" for line in lines))
    return {"check_only": lines}


def cli_main(
    method: Method, argv: Sequence[str] | None = None, run_class: type[TrainingRun] = TrainingRun
) -> int:
    """``main()`` of a ``train.py``: a bad recipe, data file, model location or output
    folder (the message names the file, key or path) is one line on stderr and exit status
    2, before training. Under a launcher only the main process prints it. ``run_class``: a
    package's :class:`TrainingRun` subclass."""
    finished = False
    if launched():
        end_with_parent(
            "the launcher that started this training process",
            "its complete checkpoints are kept (resume from the newest)",
        )
    run = run_class(argv, method)
    try:
        run.run()
        finished = True
    except KeyboardInterrupt:
        if is_main_process():
            _write_line(f"error: interrupted (Ctrl-C): {interrupted_run(run)}")
        return INTERRUPTED
    except (ConfigError, DataError, OSError) as error:  # OSError: a model folder or id
        report_error(error)
        return 2
    except TrainingDiverged as error:  # the run failed: nothing of it was published
        report_error(error)
        return 1
    finally:
        close_process_group(wait_for_others=finished)
    return 0


#: set in a process a launcher started: torchrun's (also under ``accelerate launch`` and
#: ``sts-launch`` with several processes), and ``sts-launch``'s own for one process
LAUNCHER_VARIABLES = ("TORCHELASTIC_RUN_ID", "STS_LAUNCHED")


def launched() -> bool:
    """Whether a launcher started this process (it ends when the launcher is killed)."""
    return any(os.environ.get(name) for name in LAUNCHER_VARIABLES)


def interrupted_run(run: TrainingRun) -> str:
    """What a run stopped by Ctrl-C kept, and how to go on: its newest complete checkpoint
    and the resume, or that nothing was saved (its saves are atomic: nothing is left
    half-written that a loader would take)."""
    config = getattr(run, "config", None)
    if config is None or config.check_only:
        return NOTHING_HALF_WRITTEN
    output = Path(config.output_dir)
    complete = [folder for folder in checkpoints(output) if (folder / SAVE_MARKER).is_file()]
    if not complete:
        return (
            f"no checkpoint of this run was saved in {output}: run the same command again "
            "with --overwrite_output_dir true"
        )
    return (
        f"the newest complete checkpoint is {complete[-1]}; continue the run: the same "
        f"command with --resume_from_checkpoint {complete[-1]}"
    )


def command(method: Method) -> Callable[[Sequence[str] | None], int]:
    """The ``main(argv=None) -> int`` of ``method``'s training command (``train.py`` and the
    package's console script: ``main = command(METHOD)``): :func:`cli_main` for it."""

    def main(argv: Sequence[str] | None = None) -> int:
        return cli_main(method, argv)

    main.__doc__ = f"Train with method {method.name!r} as the recipe and flags say."
    return main


def report_error(error: BaseException) -> None:
    """``error: <message>`` on one line of stderr. A check before the work fails alike on
    every process, so only the main one prints it; an error during training is printed by
    the process that met it (with its rank when launched)."""
    message = " ".join(str(error).split())
    if getattr(error, "sts_during_training", False):
        number = rank()
        _write_line(f"error: {f'[rank {number}] ' if number else ''}{message}")
    elif is_main_process():
        _write_line(f"error: {message}")


def _write_line(line: str) -> None:
    """``line`` and its newline in one write: launched processes share the terminal, and
    ``print`` writes the two apart, so two processes' lines could run into one."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def align_with_dev_set(config: BaseConfig, evaluator: Any, eval_dataset: str | None) -> None:
    """Make the selection settings agree with the dev set, before any training.

    - No dev set (``eval_dataset: none``): evaluation is switched off (the default
      ``eval_strategy: epoch`` would otherwise make the Trainer refuse to start);
      ``load_best_model_at_end`` or ``save_strategy: best`` are then errors.
    - A dev set given by path is named ``dev`` (metrics ``dev_spearman``, …): the
      class's default ``metric_for_best_model`` (``stsb_dev_spearman``) follows the
      evaluator's primary metric; a metric set by hand that the dev set does not give is
      an error here rather than a KeyError after the first epoch.
    """
    if evaluator is None:
        if config.load_best_model_at_end or config.save_strategy == SaveStrategy.BEST:
            raise ConfigError(
                f"eval_dataset is {eval_dataset!r}: load_best_model_at_end and "
                "save_strategy: best need a dev set"
            )
        if config.eval_strategy != IntervalStrategy.NO:
            logger.info("No dev set: evaluation during training is off.")
            config.eval_strategy = IntervalStrategy.NO
            config.do_eval = False
        return
    metric = config.metric_for_best_model
    if metric is None:
        return
    primary = evaluator.primary_metric
    known = [primary, f"{evaluator.name}_pearson"]
    if metric.removeprefix("eval_") in known:
        return
    default = {f.name: f.default for f in fields(type(config))}.get("metric_for_best_model")
    if metric == default:
        logger.info("metric_for_best_model: %s (the dev set %s)", primary, eval_dataset)
        config.metric_for_best_model = primary
        return
    raise ConfigError(
        f"metric_for_best_model {metric!r} is not a metric of the dev set {eval_dataset!r}; "
        f"it gives {', '.join(known)}"
    )


def launch_summary(trainer: AnyModelTrainer) -> dict[str, Any]:
    """How the run was launched: processes, distributed type, the engine that trained
    (``DistributedDataParallel``, ``DeepSpeedEngine``, …) and the ZeRO stage."""
    summary: dict[str, Any] = {
        "world_size": trainer.args.world_size,
        "distributed_type": str(trainer.accelerator.distributed_type).rsplit(".", 1)[-1],
        "engine": type(trainer.model_wrapped).__name__,
    }
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    if plugin is not None:
        summary["zero_stage"] = plugin.zero_stage
    return summary


def saved_model_identity(folder: Path) -> dict[str, Any]:
    """Which save of ``folder`` the results describe: its marker's ``save_id`` and time
    (empty on a process that did not save)."""
    marker = read_save_marker(folder) if folder.is_dir() else None
    if not marker:
        return {}
    return {"folder": str(folder), "save_id": marker.get("save_id"), "saved": marker.get("time")}


def _write_metrics(output_dir: Path, metrics: dict[str, Any]) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(output_dir / METRICS_NAME, metrics, record=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``sts-train [--method NAME] --config <recipe>.yaml``: train with an installed method
    (entry-point group ``sts_core.methods``), or without ``--method`` with the core's cosine
    MSE. An unknown method, or one that two installed distributions declare, is one line
    and exit status 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        method, rest = method_from_arguments(args)
        if "-h" in rest or "--help" in rest:
            print_help(method, rest)
    except ConfigError as error:
        report_error(error)
        return 2
    return cli_main(method, rest)


def print_help(method: Method, argv: list[str]) -> None:
    """``sts-train --help``: the method's options in groups (:mod:`.help`), ``--method``
    first; the recipe's values as the defaults (``--config``). Exits (status 0)."""
    from sts_core.training.help import add_method_option

    parser = ConfigParser.for_method(method)
    parser.parser.prog = "sts-train"
    add_method_option(parser.parser, installed_method_names())
    parser.parse(argv)


def method_from_arguments(argv: list[str]) -> tuple[Method, list[str]]:
    """``--method NAME`` (or ``--method=NAME``) taken out of ``argv``: the installed method
    of that name and the other arguments; the core's method when there is none. A name
    that two installed distributions declare is a :class:`ConfigError` naming both."""

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--method")
    known, rest = pre.parse_known_args(argv)
    if known.method is None:
        return CORE_METHOD, rest
    method = installed_method(known.method)
    if method is None:
        names = ", ".join(installed_method_names())
        raise ConfigError(
            f"--method {known.method!r} is not an installed method (installed: {names})"
        )
    return method, rest


if __name__ == "__main__":  # ``python -m sts_core.training.run`` (sts-launch with a method name)
    sys.exit(main())
