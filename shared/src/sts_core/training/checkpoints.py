"""Checkpoints of a ``BaseTrainer``: atomic saves, resume with the run's own state, the
best model reloaded through ``SentenceEncoder.load_weights``.

A checkpoint is written into ``<output_dir>/.sts-staging/checkpoint-N``, marked complete,
then renamed into place; besides the Trainer's files it holds the epoch's batches, the
weight average and the sum of the losses so far, so a resumed run sees the batches, the
average and the ``train_loss`` the uninterrupted run would have, and the settings it was
trained under (:mod:`.resume_settings`).

A resume reads the pickled training state (RNG, optimizer, scheduler, scaler, weight
average) only through torch's safe loader; a file it refuses (code or objects other than
tensors and plain values: an untrusted or altered file) stops the resume before anything
of the checkpoint is loaded, naming the file (:func:`check_trusted_state_files`).
"""

from __future__ import annotations

import json
import logging
import pickle
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from sts_core.saving import (
    STAGING_DIR,
    add_training_files,
    named_save_failure,
    publish_folder,
    remove_path,
)
from sts_core.training.averaging import WEIGHT_AVERAGE_NAME
from sts_core.training.batches import Batches
from sts_core.training.parser import ConfigError
from sts_core.training.resume_settings import recipe_settings, write_run_settings

if TYPE_CHECKING:
    from sts_core.training.averaging import WeightAverager
    from sts_core.training.config import BaseConfig
    from sts_core.training.divergence import DivergenceGuard

logger = logging.getLogger(__name__)

TRAINING_ARGS_NAME = "training_args.bin"
TRAINER_STATE_NAME = "trainer_state.json"
# the batches of the epoch a checkpoint was saved in (build_epoch_batches), for a resume
EPOCH_BATCHES_NAME = "epoch_batches.json"
# the sum of the training losses up to a checkpoint, so a resumed run's train_loss is the
# whole run's mean (the Trainer's own counts only the steps since the resume)
LOSS_TOTAL_NAME = "sts_loss_total.json"
# the files of a checkpoint that torch unpickles on a resume (transformers' names; the RNG
# file of each process under a launch)
PICKLED_STATE_PATTERNS = (
    "rng_state.pth",
    "rng_state_*.pth",
    "optimizer.pt",
    "scheduler.pt",
    "scaler.pt",
    WEIGHT_AVERAGE_NAME,
)


def check_trusted_state_files(folder: str | Path) -> None:
    """ConfigError naming the first pickled training-state file of the checkpoint
    ``folder`` that torch's safe loader (``weights_only``) refuses or cannot read. Large
    files are memory-mapped: their tensors are not read."""
    folder = Path(folder)
    for pattern in PICKLED_STATE_PATTERNS:
        for path in sorted(folder.glob(pattern)):
            _check_trusted(path)


def _check_trusted(path: Path) -> None:
    """Load ``path`` as the Trainer does (the safe loader with its numpy allowlist for the
    RNG state); ConfigError when that fails."""
    from transformers.trainer_pt_utils import safe_globals

    try:
        with safe_globals():
            torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except pickle.UnpicklingError as error:
        raise ConfigError(
            f"resume_from_checkpoint: {path} is untrusted: torch's safe loader refuses it (it "
            "holds code or objects other than tensors and plain values, which this library "
            "never writes); nothing of it was run or loaded: resume from a checkpoint you "
            "trust, or start a new run"
        ) from error
    except (RuntimeError, EOFError, ValueError, OSError) as error:
        raise ConfigError(
            f"resume_from_checkpoint: {path} cannot be loaded by torch's safe loader "
            f"({type(error).__name__}: not a torch state file, or damaged): resume from "
            "another checkpoint, or start a new run"
        ) from error


class Checkpoints(Trainer):
    """Checkpoints and resume for :class:`~sts_core.training.trainer.AnyModelTrainer` (a
    ``Trainer`` mix-in: it expects the trainer's ``weight_averager``, ``divergence_guard``,
    ``_epoch_batches`` and ``_dataset_batches``)."""

    # set by AnyModelTrainer
    args: BaseConfig
    weight_averager: WeightAverager | None
    divergence_guard: DivergenceGuard
    _epoch_batches: tuple[int, Sequence[Any]] | None
    _resumed_epoch_batches: dict[int, list[list[int]]]
    _dataset_batches: dict[str, int]
    _loss_sum_before_resume: float | None
    builds_own_batches: Callable[[], bool]  # EpochBatches
    run_settings: dict[str, Any] | None  # the run's record (TrainingRun sets it)

    def train(  # type: ignore[override]  # Trainer's other arguments go through kwargs
        self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any
    ) -> Any:
        """``Trainer.train``; a resumed run first reads the checkpoint's epoch batches, weight
        average and loss total, and its ``train_loss`` is the whole run's mean loss."""
        self._loss_sum_before_resume = None
        if resume_from_checkpoint:
            self._read_resume_state(resume_from_checkpoint)
        output = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        return self._with_whole_run_loss(output)

    def _run_epoch(self, *args: Any, **kwargs: Any) -> Any:  # Any: passed through to Trainer
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
        check_trusted_state_files(folder)
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
            self._dataset_batches = dict(saved.get("dataset_batches", {}))

    def _settings_record(self) -> dict[str, Any]:
        """What each checkpoint records of the settings (:mod:`.resume_settings`): the
        run's, set by :class:`~sts_core.training.run.TrainingRun` when it checked them
        (``run_settings``), else this Trainer's arguments'."""
        settings = getattr(self, "run_settings", None)
        if settings is None:
            settings = self.run_settings = recipe_settings(self.args)
        return settings

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        """:meth:`_save_staged_checkpoint`; a write that fails (a full disk, a file-size
        limit) is one :class:`~sts_core.saving.SaveError` naming the checkpoint and the
        cause, its staging folder removed and nothing published."""
        run_dir = Path(self._get_output_dir(trial=trial))
        final = run_dir / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging = run_dir / STAGING_DIR if self.args.should_save else None
        kept = "nothing of it was published; the earlier checkpoints are unchanged"
        with named_save_failure(final, kept, staging):
            self._save_staged_checkpoint(model, trial)

    def _save_staged_checkpoint(self, model: Any, trial: Any) -> None:
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
        self._get_output_dir = lambda trial=None: str(staging_root)  # type: ignore[method-assign,misc]  # super() writes there
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
            totals: dict[str, Any] = {"global_step": self.state.global_step, "loss_sum": loss_sum}
            if self._dataset_batches:  # batches trained by training set, so far
                totals["dataset_batches"] = self._dataset_batches
            (staged / LOSS_TOTAL_NAME).write_text(json.dumps(totals), encoding="utf-8")
            write_run_settings(staged, self._settings_record())
            # a method's own batches (built from the model); a batch plan's come from the
            # seed and the epoch alone, and a resume rebuilds them
            if self._epoch_batches is not None and self.builds_own_batches():
                epoch, batches = self._epoch_batches
                (staged / EPOCH_BATCHES_NAME).write_text(
                    json.dumps({"epoch": epoch, "batches": Batches.of(batches).to_lists()}),
                    encoding="utf-8",
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
