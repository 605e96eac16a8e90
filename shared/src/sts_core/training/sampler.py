"""An epoch-aware batch sampler: the batches of each epoch are rebuilt, from the current
model if the method wants (BSC's example-based shuffling embeds the data with it).

A trainer overrides :meth:`BaseTrainer.build_epoch_batches` to return the epoch's *global*
batches (lists of dataset indices, at most ``per_device_train_batch_size × processes``
each, ``ceil(N / that)`` of them). :class:`EpochBatchSampler` calls it at the start of
every epoch on every process (so a model sharded by DeepSpeed ZeRO-3 can still encode),
takes the main process's answer (broadcast) and yields each global batch as one chunk per
process, in rank order; accelerate's ``BatchSamplerShard`` then hands chunk ``r`` to rank
``r``: every rank gets its share of the same batch order.

The number of batches of an epoch must be known before it starts (the Trainer takes the
length of the data loader first): ``ceil(N / that)`` for a hook's batches, or the count a
:class:`~sts_core.training.batch_plan.BatchPlan` gives (``num_batches``; several training
sets under ``round_robin`` use some rows in an epoch, not all: ``every_row`` false).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from sts_core.distributed import rank, world_size
from sts_core.training.batches import Batches


def expected_batches(dataset_size: int, per_device: int, processes: int) -> int:
    return math.ceil(dataset_size / (per_device * processes))


def shard_global_batch(batch: list[int], per_device: int, processes: int) -> list[list[int]]:
    """One global batch as ``processes`` per-device chunks (consecutive slices of
    ``per_device``; a short last batch is split evenly, rows repeated if fewer than the
    processes so no chunk is empty)."""
    if len(batch) == per_device * processes:
        return [batch[r * per_device : (r + 1) * per_device] for r in range(processes)]
    rows = list(batch)
    while len(rows) < processes:
        rows += batch[: processes - len(rows)]
    return [list(map(int, part)) for part in np.array_split(rows, processes)]


class EpochBatchSampler:
    """Batch sampler over per-device chunks of the global batches ``build(epoch)`` returns.

    Args:
        build: the global batches of an epoch.
        dataset_size: the rows of the dataset.
        per_device: ``per_device_train_batch_size``.
        processes: the processes (default: the launch's).
        num_batches: the global batches every epoch has (default ``ceil(N / (per_device ×
            processes))``).
        every_row: each epoch uses every row exactly once (else: at most once).
    """

    def __init__(
        self,
        build: Callable[[int], Sequence[Any]],
        dataset_size: int,
        per_device: int,
        processes: int | None = None,
        num_batches: int | None = None,
        every_row: bool = True,
    ) -> None:
        self.build = build
        self.dataset_size = dataset_size
        self.per_device = per_device
        self.processes = processes or world_size()
        self.num_batches = (
            expected_batches(dataset_size, per_device, self.processes)
            if num_batches is None
            else num_batches
        )
        self.every_row = every_row
        self.epoch = 0
        self.sampler = self  # accelerate calls batch_sampler.batch_sampler.sampler.set_epoch
        self.drop_last = False
        # None, not per_device: accelerate's BatchSamplerShard then hands every chunk on,
        # short ones included (with a batch size it holds back a short chunk and drops rows)
        self.batch_size = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.num_batches * self.processes

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._checked(_from_main_process(self.build(self.epoch)))
        self.epoch += 1
        for batch in batches:
            yield from shard_global_batch(batch, self.per_device, self.processes)

    def _checked(self, given: Sequence[Any]) -> Batches:
        """The epoch's batches as :class:`~sts_core.training.batches.Batches`, checked:
        their number, their sizes, and the rows they use (every row once, or at most
        once)."""
        batches = Batches.of(given)
        expected = self.num_batches
        largest = self.per_device * self.processes
        sizes = batches.sizes
        if len(batches) != expected or (sizes < 1).any() or (sizes > largest).any():
            raise ValueError(
                f"build_epoch_batches returned {len(batches)} batches (sizes "
                f"{sorted(set(sizes.tolist()))}); expected {expected} non-empty batches "
                f"of at most {largest} indices for {self.dataset_size} rows"
            )
        rows = np.sort(batches.rows)
        if self.every_row and not np.array_equal(rows, np.arange(self.dataset_size)):
            raise ValueError(
                "build_epoch_batches must use every row of the dataset exactly once "
                f"({len(rows)} indices given for {self.dataset_size} rows)"
            )
        # every batch has rows (checked above): so has the epoch
        out_of_range = rows[0] < 0 or rows[-1] >= self.dataset_size
        distinct = int(np.count_nonzero(np.diff(rows))) + 1
        if out_of_range or distinct != len(rows):
            raise ValueError(
                f"the epoch's batches must use each of the {self.dataset_size} rows at most "
                f"once ({len(rows)} indices given, {distinct} distinct)"
            )
        return batches


def _from_main_process(batches: Sequence[Any]) -> Sequence[Any]:
    """Rank 0's batches on every process (each computed its own; they must agree)."""
    if world_size() == 1:
        return batches
    import torch.distributed as dist

    payload: list[Sequence[Any] | None] = [batches if rank() == 0 else None]
    dist.broadcast_object_list(payload, src=0)
    assert payload[0] is not None  # rank 0's batches
    return payload[0]


#: the rows :class:`RandomRows` hands out at a time
ROWS_AT_A_TIME = 65_536


class RandomRows:
    """The rows of a training set in a random order per epoch, the order accelerate's
    ``SeedableRandomSampler`` (what the Trainer's ``RandomSampler`` becomes) draws for the
    same seed: ``torch.randperm(N)`` from a generator seeded with ``initial_seed + epoch``.
    The permutation stays a tensor (8 bytes a row), handed out :data:`ROWS_AT_A_TIME` rows
    at a time, where the library's sampler makes it a Python list of the whole epoch (about
    40 bytes a row: 400 MB for ten million rows).

    Args:
        size: the rows.
        data_seed: the seed (the Trainer's ``data_seed``); None: torch's initial seed now,
            as accelerate takes it.
    """

    def __init__(self, size: int, data_seed: int | None = None) -> None:
        self.size = size
        self.initial_seed = data_seed if data_seed is not None else torch.random.initial_seed()
        self.epoch = 0

    def __len__(self) -> int:
        return self.size

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator()
        generator.manual_seed(self.initial_seed + self.epoch)
        order = torch.randperm(self.size, generator=generator)
        for start in range(0, self.size, ROWS_AT_A_TIME):
            yield from order[start : start + ROWS_AT_A_TIME].tolist()
        self.set_epoch(self.epoch + 1)
