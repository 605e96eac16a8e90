"""Batches a method builds for each epoch (BSC's shuffling), kept across a resume."""

from __future__ import annotations

import logging
import math
from typing import Any

from transformers import Trainer

logger = logging.getLogger(__name__)


class EpochBatches(Trainer):
    """The :meth:`build_epoch_batches` hook of
    :class:`~sts_core.training.trainer.BaseTrainer` (a ``Trainer`` mix-in)."""

    def build_epoch_batches(self, dataset: Any, epoch: int) -> list[list[int]] | None:
        """Hook: the global batches of ``epoch`` (lists of indices into ``dataset``, at most
        ``per_device_train_batch_size × processes`` each), built at the start of the epoch —
        from the current model if wanted (``self.accelerator.unwrap_model(self.model)``
        can ``encode``). ``None`` (the default): the Trainer's own random batches. Called on
        every process; the main process's batches are used (see
        :mod:`sts_core.training.sampler`)."""
        return None

    def get_train_dataloader(self) -> Any:
        if type(self).build_epoch_batches is EpochBatches.build_epoch_batches:
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

    def _current_epoch(self, counted: int) -> int:
        """The epoch being started, from the trainer state (right after a resume too, where
        accelerate's batch skipping does not pass ``set_epoch`` on to the sampler)."""
        if self.state is not None and self.state.epoch is not None:
            return int(math.floor(self.state.epoch + 1e-9))
        return counted
