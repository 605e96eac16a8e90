"""Batches a method builds for each epoch (BSC's shuffling), or the run's batch plan
(several training sets, ``batch_sampler: no_duplicates``), kept across a resume."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torch.utils.data import RandomSampler
from transformers import Trainer

from sts_core.data.columns import text_ids
from sts_core.training.batch_plan import NO_DUPLICATES, PROPORTIONAL, BatchPlan, RowTexts
from sts_core.training.collator import TEXT_COLUMNS
from sts_core.training.multi_dataset import TrainDatasets
from sts_core.training.sampler import RandomRows

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig

logger = logging.getLogger(__name__)


class EpochBatches(Trainer):
    """The :meth:`build_epoch_batches` hook of
    :class:`~sts_core.training.trainer.BaseTrainer` (a ``Trainer`` mix-in), and the batch
    plan of a run with several training sets or ``no_duplicates``
    (:mod:`sts_core.training.batch_plan`)."""

    args: BaseConfig  # set by AnyModelTrainer, with the two below
    _epoch_batches: tuple[int, Sequence[Any]] | None
    _resumed_epoch_batches: dict[int, list[list[int]]]
    _batch_plan: BatchPlan | None  # built once, by batch_plan()

    def build_epoch_batches(self, dataset: Any, epoch: int) -> list[list[int]] | None:
        """Hook: the global batches of ``epoch`` (lists of indices into ``dataset``, at most
        ``per_device_train_batch_size × processes`` each), built at the start of the epoch —
        from the current model if wanted (``self.accelerator.unwrap_model(self.model)``
        can ``encode``). ``None`` (the default): the Trainer's own random batches, or the
        run's :meth:`batch_plan`. Called on every process; the main process's batches are
        used (see :mod:`sts_core.training.sampler`)."""
        return None

    def builds_own_batches(self) -> bool:
        """Whether this Trainer's class overrides :meth:`build_epoch_batches`."""
        return type(self).build_epoch_batches is not EpochBatches.build_epoch_batches

    def batch_plan(self) -> BatchPlan | None:
        """The plan of the run's batches (built once): for several training sets (each
        batch from one, ordered by ``multi_dataset_sampler``) or ``batch_sampler:
        no_duplicates``; None when the Trainer's own random batches serve (one set)."""
        if getattr(self, "_batch_plan", None) is not None:
            return self._batch_plan
        dataset = self.train_dataset
        sets = dataset.sets if isinstance(dataset, TrainDatasets) else None
        no_duplicates = getattr(self.args, "batch_sampler", "default") == NO_DUPLICATES
        if not no_duplicates and (sets is None or len(sets) == 1):
            return None
        parts: list[Any] = [s.dataset for s in sets] if sets else [dataset]
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        self._batch_plan = BatchPlan(
            names=[s.name for s in sets] if sets else ["train"],
            sizes=[len(part) for part in parts],
            global_batch=self.args.per_device_train_batch_size * self.args.world_size,
            seed=seed,
            sampler=getattr(self.args, "multi_dataset_sampler", PROPORTIONAL),
            texts=[self._row_texts(part) for part in parts] if no_duplicates else None,
        )
        return self._batch_plan

    def _row_texts(self, dataset: Any) -> RowTexts:
        """The texts of each row, as ids: the values of its text columns (not its labels)."""
        text_columns = getattr(self, "text_columns", TEXT_COLUMNS)
        names = [c for c in text_columns if c in dataset.column_names]
        return RowTexts(text_ids(dataset, names))

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        """The Trainer's sampler, except that its default (a ``RandomSampler`` that
        accelerate makes seedable) is :class:`~sts_core.training.sampler.RandomRows`:
        the same rows in the same order, without a Python list of the epoch's rows."""
        sampler = super()._get_train_sampler(train_dataset)
        loading = self.accelerator.dataloader_config  # what accelerate's prepare reads
        if type(sampler) is RandomSampler and loading.use_seedable_sampler:
            return RandomRows(len(sampler), loading.data_seed)
        return sampler

    def get_train_dataloader(self) -> Any:
        plan = None if self.builds_own_batches() else self.batch_plan()
        if plan is None and not self.builds_own_batches():
            return super().get_train_dataloader()
        from torch.utils.data import DataLoader

        from sts_core.training.sampler import EpochBatchSampler

        dataset: Any = self.train_dataset  # a datasets.Dataset or TrainDatasets
        sampler = EpochBatchSampler(
            lambda epoch: self._batches_of_epoch(dataset, self._current_epoch(epoch)),
            len(dataset),
            self.args.per_device_train_batch_size,
            self.args.world_size,
            num_batches=None if plan is None else plan.num_batches,
            every_row=plan is None or plan.sampler == PROPORTIONAL,
        )
        loader = DataLoader(
            dataset,
            batch_sampler=sampler,
            collate_fn=self.data_collator,
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
        )
        return self.accelerator.prepare(loader)

    def _batches_of_epoch(self, dataset: Any, epoch: int) -> Sequence[Any]:
        """:meth:`build_epoch_batches` (or the plan's), except for the epoch a resumed
        checkpoint was saved in: its batches come from the checkpoint
        (``epoch_batches.json``), so a run resumed mid-epoch sees the batches the
        interrupted run would have seen — built from the model as it was at the start of
        that epoch, not as it is at the checkpoint."""
        plan = None if self.builds_own_batches() else self.batch_plan()
        batches: Sequence[Any] | None = self._resumed_epoch_batches.pop(epoch, None)
        if batches is None:
            batches = self.build_epoch_batches(dataset, epoch) if plan is None else None
            if batches is None:
                assert plan is not None  # the sampler is installed for a plan or own batches
                batches = plan.batches(epoch)
        else:
            logger.info("epoch %d: the batches saved with the checkpoint", epoch)
            if plan is not None:
                plan.batches(epoch)  # the epoch's report (the same batches, from the seed)
        if plan is not None:
            log_plan_report(plan.reports[epoch])
        assert batches is not None  # the hook's, the plan's or the checkpoint's
        self._epoch_batches = (epoch, batches)
        return batches

    def _current_epoch(self, counted: int) -> int:
        """The epoch being started, from the trainer state (right after a resume too, where
        accelerate's batch skipping does not pass ``set_epoch`` on to the sampler)."""
        if self.state is not None and self.state.epoch is not None:
            return int(math.floor(self.state.epoch + 1e-9))
        return counted


def log_plan_report(report: dict[str, Any]) -> None:
    """An epoch's batches by training set, the rows ``round_robin`` leaves out and what
    ``no_duplicates`` did (a warning for rows placed with a duplicate)."""
    epoch = report["epoch"]
    batches = ", ".join(f"{name} {count}" for name, count in report["batches"].items())
    logger.info("epoch %d: batches by training set: %s", epoch, batches)
    for name, unused in report.get("unused_rows", {}).items():
        if unused:
            logger.info(
                "epoch %d: round_robin leaves %d rows of %s unused this epoch", epoch, unused, name
            )
    for name, counts in report.get("no_duplicates", {}).items():
        logger.info(
            "epoch %d: no_duplicates on %s: %d rows kept in place, %d deferred to a later batch",
            epoch,
            name,
            counts["kept"],
            counts["deferred"],
        )
        if counts["with_duplicate"]:
            logger.warning(
                "epoch %d: no_duplicates on %s: %d rows share a text with every batch that "
                "has room (a text in more rows than the set has batches); they were placed "
                "in a batch that holds that text twice",
                epoch,
                name,
                counts["with_duplicate"],
            )
