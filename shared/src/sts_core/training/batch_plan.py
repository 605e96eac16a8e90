"""Which rows make each batch of an epoch, decided before the epoch starts: several
training sets (each batch from one of them) and batches without a repeated text.

A :class:`BatchPlan` is built from the training sets' sizes (and, for ``no_duplicates``,
their texts), the global batch size ``G`` (``per_device_train_batch_size`` × processes)
and the seed. :meth:`BatchPlan.batches` gives an epoch's global batches from the seed and
the epoch alone (no model), so their number is known before the epoch
(:attr:`BatchPlan.num_batches`, the same every epoch), every process builds the same ones
and a resumed run rebuilds them exactly. The Trainer feeds them through
:class:`~sts_core.training.sampler.EpochBatchSampler`, which splits each global batch
between the processes.

``multi_dataset_sampler`` (sentence-transformers' ``MultiDatasetBatchSamplers``):

- ``proportional``: every batch of every set, the sets in a random order: set ``k`` of
  ``N_k`` rows gives ``B_k = ⌈N_k / G⌉`` batches, an epoch is ``Σ_k B_k`` batches and
  uses every row once (a larger set is drawn from more often).
- ``round_robin``: one batch of each set in turn, in the recipe's order, until the set
  with the fewest batches runs out: ``K · min_k B_k`` batches. The rows of the other sets
  beyond that are not used in that epoch (each epoch draws others); how many is counted
  per epoch (:meth:`BatchPlan.report`).

``batch_sampler: no_duplicates``: within each set, no text (the value of any text column of
a row) appears twice in a global batch. The set's rows are taken in a random order; a row
whose text is already in the batch being filled is *deferred* and tried first for the next
batch (:func:`no_duplicate_batches`): sentence-transformers' ``NoDuplicatesBatchSampler``
scans the same way. The end differs: the peer yields short batches until every row is
placed (more than ``⌈N_k / G⌉`` in an epoch: 39 instead of 12 on STS-B train in batches of
512, where one sentence is in 39 rows), while the set keeps its ``B_k`` batches: a row that
still collides with every batch that has room at the end takes the place of a row of
another batch that moves to a batch with room, where neither then holds a text twice;
when no such swap exists (a text in more rows than there are batches) it goes into the
first batch with room and is counted as placed *with a duplicate*. Every row is used once
an epoch (under ``round_robin``, once at most).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sts_core.training.batches import Batches

PLAIN = "default"
NO_DUPLICATES = "no_duplicates"
#: the values of ``batch_sampler``
BATCH_SAMPLERS = (PLAIN, NO_DUPLICATES)
PROPORTIONAL = "proportional"
ROUND_ROBIN = "round_robin"
#: the values of ``multi_dataset_sampler``
MULTI_DATASET_SAMPLERS = (PROPORTIONAL, ROUND_ROBIN)
#: the values of each sampler option
SAMPLER_CHOICES = {"batch_sampler": BATCH_SAMPLERS, "multi_dataset_sampler": MULTI_DATASET_SAMPLERS}


def check_sampler(option: str, value: str) -> None:
    """ValueError unless ``value`` is one of the values of ``option`` (``batch_sampler`` or
    ``multi_dataset_sampler``: :data:`SAMPLER_CHOICES`). Called by the config as it is
    parsed, and by :class:`BatchPlan` for a plan built without one."""
    allowed = SAMPLER_CHOICES[option]
    if value not in allowed:
        raise ValueError(f"{option} must be one of {', '.join(allowed)}, got {value!r}")


@dataclass(frozen=True)
class NoDuplicatesReport:
    """What ``no_duplicates`` did to one set's rows in one epoch.

    ``deferred``: rows skipped at least once because a text of theirs was already in the
    batch being filled (they went into a later batch); ``kept``: the others, taken where
    the shuffled order put them; ``with_duplicate``: deferred rows that collided with
    every batch that had room, placed anyway (their batch holds one of their texts
    twice)."""

    rows: int
    deferred: int
    with_duplicate: int

    @property
    def kept(self) -> int:
        return self.rows - self.deferred

    def to_dict(self) -> dict[str, int]:
        return {
            "rows": self.rows,
            "kept": self.kept,
            "deferred": self.deferred,
            "with_duplicate": self.with_duplicate,
        }


class RowTexts:
    """Each row's texts as a set of ids (:func:`~sts_core.data.columns.text_ids`: equal
    ids, equal texts), kept as one ``(rows, columns)`` array: a row's set is made when it
    is asked for, not a Python object per row for the whole set."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, row: int) -> frozenset[int]:
        return frozenset(self.ids[row].tolist())


#: the texts of each row of a set: a set per row, of its texts or of their ids
TextSets = Sequence[frozenset[Any]] | RowTexts


def chunk(order: Sequence[int] | np.ndarray, size: int) -> list[list[int]]:
    """``order`` in consecutive batches of ``size`` (the last one shorter)."""
    return [[int(i) for i in order[start : start + size]] for start in range(0, len(order), size)]


def no_duplicate_batches(
    order: Sequence[int] | np.ndarray, texts: TextSets, size: int
) -> tuple[list[list[int]], NoDuplicatesReport]:
    """``⌈len(order) / size⌉`` batches of at most ``size`` rows, each row once, no text
    twice in a batch where the order allows it.

    Batches are filled one after the other: first from the rows deferred so far (in the
    order they were deferred), then from ``order``; a row with a text already in the
    batch is deferred. When the batches are made, the rows still deferred collide with
    every batch with room: each is swapped into another batch or, failing that, goes into
    the first batch with room (``with_duplicate``; :func:`_place_leftovers`).

    Against sentence-transformers' ``NoDuplicatesBatchSampler`` on the same order (tested
    on real rows, ``test_batch_plan_peer.py``): batch ``i`` holds the peer's batch ``i``
    in its order, but for the rows placed at the end — the peer puts them in batches past
    ``⌈len(order) / size⌉``; here each takes the place of at most one row of an earlier
    batch, which moves (SNLI dev in batches of 1,024: 50–68 rows moved in 3–4 of 10
    batches), or goes in with its duplicate. Where the peer's pass fills
    ``⌈len(order) / size⌉`` batches, the batches are equal.

    Args:
        order: the rows (indices into ``texts``) in the order to take them.
        texts: the texts of each row (the values of its text columns).
        size: the most rows a batch holds.
    """
    fresh = (int(row) for row in order)
    waiting: list[int] = []
    deferred: set[int] = set()
    batches: list[list[int]] = []
    for _ in range(math.ceil(len(order) / size)):
        batch: list[int] = []
        seen: set[Any] = set()
        still: list[int] = []
        for row in waiting:
            if len(batch) < size and seen.isdisjoint(texts[row]):
                batch.append(row)
                seen.update(texts[row])
            else:
                still.append(row)
        waiting = still
        while len(batch) < size and (new := next(fresh, None)) is not None:
            if seen.isdisjoint(texts[new]):
                batch.append(new)
                seen.update(texts[new])
            else:
                waiting.append(new)
                deferred.add(new)
        batches.append(batch)
    with_duplicate = _place_leftovers(batches, waiting, texts, size, budget=50 * len(order))
    report = NoDuplicatesReport(len(order), len(deferred), with_duplicate)
    return batches, report


def _place_leftovers(
    batches: list[list[int]],
    leftovers: list[int],
    texts: TextSets,
    size: int,
    budget: int,
) -> int:
    """Place the rows that collide with every batch with room: each takes the place of a
    row of another batch that moves to a batch with room, where neither then holds a
    text twice; failing that (or after ``budget`` rows tried for a swap) into the first
    batch with room, with the duplicate. Returns how many went in with a duplicate."""
    counts = [Counter(text for row in batch for text in texts[row]) for batch in batches]
    with_duplicate = 0
    for row in leftovers:
        tried = _swap_in(row, batches, counts, texts, size, budget)
        budget -= abs(tried)
        if tried > 0:
            continue
        target = next(b for b, batch in enumerate(batches) if len(batch) < size)
        batches[target].append(row)
        counts[target].update(texts[row])
        with_duplicate += 1
    return with_duplicate


def _swap_in(
    row: int,
    batches: list[list[int]],
    counts: list[Counter[Any]],
    texts: TextSets,
    size: int,
    budget: int,
) -> int:
    """Swap ``row`` into a batch in place of a row that fits a batch with room. Returns the
    rows tried, positive when the swap was made, negative when none was found."""
    mine = texts[row]
    with_room = [b for b, batch in enumerate(batches) if len(batch) < size]
    tried = 0
    for j, batch in enumerate(batches):
        clash = [text for text in mine if counts[j][text]]
        for position, other in enumerate(batch):
            tried += 1
            if tried > budget:
                return -tried
            if any(text not in texts[other] or counts[j][text] > 1 for text in clash):
                continue  # without ``other`` the batch still holds a text of ``row``
            fits = (b for b in with_room if b != j and not any(counts[b][t] for t in texts[other]))
            target = next(fits, None)
            if target is None:
                continue
            batch[position] = row
            counts[j].subtract(texts[other])
            counts[j].update(mine)
            batches[target].append(other)
            counts[target].update(texts[other])
            return tried
    return -max(tried, 1)


@dataclass
class BatchPlan:
    """The global batches of every epoch over one or more training sets, concatenated in
    ``sizes``' order (set ``k``'s rows are indices ``offset_k … offset_k + N_k − 1``).

    Args:
        names: the sets' names (for the report).
        sizes: the rows of each set.
        global_batch: ``G``, the rows of a global batch.
        seed: the run's data seed; an epoch's batches come from (seed, epoch) alone.
        sampler: ``proportional`` or ``round_robin`` (:data:`MULTI_DATASET_SAMPLERS`).
        texts: for ``no_duplicates``, the texts of each row of each set; None otherwise.
    """

    names: list[str]
    sizes: list[int]
    global_batch: int
    seed: int
    sampler: str = PROPORTIONAL
    texts: list[TextSets] | None = None
    reports: dict[int, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_sampler("multi_dataset_sampler", self.sampler)
        if not self.sizes or min(self.sizes) < 1 or self.global_batch < 1:
            raise ValueError(f"a batch plan needs non-empty sets, got sizes {self.sizes}")

    @property
    def batches_per_set(self) -> list[int]:
        """``B_k = ⌈N_k / G⌉`` for each set."""
        return [math.ceil(size / self.global_batch) for size in self.sizes]

    @property
    def num_batches(self) -> int:
        """The global batches of an epoch (every epoch)."""
        counts = self.batches_per_set
        if self.sampler == ROUND_ROBIN:
            return len(counts) * min(counts)
        return sum(counts)

    @property
    def offsets(self) -> list[int]:
        return [int(x) for x in np.cumsum([0, *self.sizes[:-1]])]

    def batches(self, epoch: int) -> Batches:
        """The global batches of ``epoch`` (indices into the concatenated sets); the
        epoch's report is kept in :attr:`reports`."""
        rng = np.random.default_rng([self.seed, epoch])
        per_set: list[Batches] = []
        duplicates: dict[str, dict[str, int]] = {}
        for k, (name, size, offset) in enumerate(
            zip(self.names, self.sizes, self.offsets, strict=True)
        ):
            order = rng.permutation(size)
            if self.texts is None:
                per_set.append(Batches.chunked(order + offset, self.global_batch))
                continue
            batches, report = no_duplicate_batches(order, self.texts[k], self.global_batch)
            duplicates[name] = report.to_dict()
            per_set.append(Batches.of([[offset + i for i in batch] for batch in batches]))
        counts = np.array([len(batches) for batches in per_set])
        if self.sampler == ROUND_ROBIN:
            rounds = int(counts.min())
            turns = np.tile(np.arange(len(per_set)), rounds)
        else:
            turns = rng.permutation(np.repeat(np.arange(len(per_set)), counts))
        plan = _interleaved(per_set, turns)
        self.reports[epoch] = self._report(epoch, plan, duplicates)
        return plan

    def set_of_row(self, index: int) -> int:
        """The set a concatenated index belongs to."""
        return int(np.searchsorted(np.cumsum(self.sizes), index, side="right"))

    def _report(
        self, epoch: int, plan: Batches, duplicates: dict[str, dict[str, int]]
    ) -> dict[str, Any]:
        """Batches and rows of each set in the epoch; unused rows (``round_robin``) and
        the ``no_duplicates`` counts."""
        sets = np.searchsorted(np.cumsum(self.sizes), plan.rows[plan.starts], side="right")
        counted = np.bincount(sets, minlength=len(self.names))
        used = np.bincount(sets, weights=plan.sizes, minlength=len(self.names))
        batches = {name: int(n) for name, n in zip(self.names, counted, strict=True)}
        rows = {name: int(n) for name, n in zip(self.names, used, strict=True)}
        report: dict[str, Any] = {"epoch": epoch, "batches": batches}
        unused = {
            name: size - rows[name] for name, size in zip(self.names, self.sizes, strict=True)
        }
        if any(unused.values()):
            report["unused_rows"] = unused
        if duplicates:
            report["no_duplicates"] = duplicates
        return report


def _interleaved(per_set: Sequence[Batches], turns: np.ndarray) -> Batches:
    """The batches of the sets taken in turn: at each turn ``k``, set ``k``'s next batch."""
    position = np.zeros(len(turns), dtype=np.int64)  # each turn's batch within its set
    for k in range(len(per_set)):
        mine = turns == k
        position[mine] = np.arange(int(mine.sum()))
    first_batch = np.cumsum([0, *(len(b) for b in per_set[:-1])])
    first_row = np.cumsum([0, *(len(b.rows) for b in per_set[:-1])])
    starts = np.concatenate([b.starts + first_row[k] for k, b in enumerate(per_set)])
    sizes = np.concatenate([b.sizes for b in per_set])
    chosen = first_batch[turns] + position
    lengths = sizes[chosen]
    ends = np.cumsum(lengths)
    rows = np.concatenate([b.rows for b in per_set])
    taken = np.repeat(starts[chosen] - (ends - lengths), lengths) + np.arange(int(ends[-1]))
    return Batches(rows[taken], ends)
