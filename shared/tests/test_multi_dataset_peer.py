"""``multi_dataset_sampler`` (:class:`~sts_core.training.batch_plan.BatchPlan`) against
sentence-transformers' ``RoundRobinBatchSampler`` and ``ProportionalBatchSampler``, built
as the peer's trainer builds them (``BaseTrainer.get_batch_sampler`` for each set: its
default ``BatchSampler`` over a ``RandomSampler``, not dropping the last batch; then
``get_multi_dataset_batch_sampler`` over the ``ConcatDataset``, one seeded
``torch.Generator``) on the same sets, batch size and seed.

What is equal to the peer, tested here for sets of different sizes and several epochs:

- the number of batches an epoch and the number from each set (``⌈N/G⌉`` each under
  ``proportional``, ``min ⌈N/G⌉`` each under ``round_robin``), so also the rows each set
  leaves unused under ``round_robin``;
- under ``round_robin``, the set of every batch in turn (one of each set, in the recipe's
  order); each set's batch sizes in turn (``G`` … ``G``, the last one shorter).

What is not: the random draws. The peer draws with torch (``randperm`` from the
generator seeded ``seed + epoch``), we with numpy (``default_rng([seed, epoch])``), so

- under ``proportional``, the order of the sets' batches is another arrangement of the
  same batches (both uniform over the arrangements: tested on their frequencies);
- the rows each batch holds differ (each set cut into the same batch sizes, of other rows;
  under ``round_robin`` other rows left unused).
"""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from sts_core.training.batch_plan import PROPORTIONAL, ROUND_ROBIN, BatchPlan

pytest.importorskip("sentence_transformers", reason="the peer to compare with")

#: the sets (name → rows) and the batch size of each case: sizes of different batch
#: counts, divisible by G and not, the smallest set first, last or in the middle
CASES = [
    ({"a": 10, "b": 7, "c": 9}, 4),
    ({"big": 33, "small": 5, "mid": 16}, 4),
    ({"small": 3, "big": 40}, 8),
    ({"x": 64, "y": 17, "z": 1, "w": 30}, 8),
]
SEED = 42
EPOCHS = (0, 1, 2)


def peer_sampler(sets: dict[str, int], batch: int, sampler: str, seed: int = SEED) -> Any:
    """The peer's multi-dataset batch sampler over sets of ``sets``' sizes, built through
    its trainer's own methods (called with a stand-in for the trainer's ``args``)."""
    from datasets import Dataset
    from sentence_transformers.base.sampler import BatchSamplers, MultiDatasetBatchSamplers
    from sentence_transformers.base.trainer import BaseTrainer
    from torch.utils.data import ConcatDataset

    trainer: Any = SimpleNamespace(  # only its args are read
        args=SimpleNamespace(
            batch_sampler=BatchSamplers.BATCH_SAMPLER,
            multi_dataset_batch_sampler=MultiDatasetBatchSamplers(sampler),
        )
    )
    generator = torch.Generator()
    generator.manual_seed(seed)
    datasets = [Dataset.from_dict({"row": list(range(n))}) for n in sets.values()]
    samplers = [
        BaseTrainer.get_batch_sampler(
            trainer,
            dataset,
            batch_size=batch,
            drop_last=False,
            valid_label_columns=None,
            generator=generator,
            seed=seed,
        )
        for dataset in datasets
    ]
    return BaseTrainer.get_multi_dataset_batch_sampler(
        trainer,
        dataset=ConcatDataset(datasets),
        batch_samplers=samplers,
        generator=generator,
        seed=seed,
    )


def peer_epoch(sampler: Any, epoch: int) -> list[list[int]]:
    sampler.set_epoch(epoch)  # as the peer's trainer does before each epoch
    return [list(batch) for batch in sampler]


def our_epoch(plan: BatchPlan, epoch: int) -> list[list[int]]:
    return [list(batch) for batch in plan.batches(epoch)]


def set_names(sets: dict[str, int], batches: list[list[int]]) -> list[str]:
    """The set of each batch (asserting all its rows are of that set)."""
    names = list(sets)
    ends = [sum(list(sets.values())[: k + 1]) for k in range(len(sets))]
    found = []
    for batch in batches:
        (k,) = {next(k for k, end in enumerate(ends) if row < end) for row in batch}
        found.append(names[k])
    return found


def rows_by_set(sets: dict[str, int], batches: list[list[int]]) -> dict[str, list[list[int]]]:
    """Each set's batches in turn, as row numbers within the set."""
    offsets = dict(zip(sets, [sum(list(sets.values())[:k]) for k in range(len(sets))], strict=True))
    found: dict[str, list[list[int]]] = {name: [] for name in sets}
    for name, batch in zip(set_names(sets, batches), batches, strict=True):
        found[name].append([row - offsets[name] for row in batch])
    return found


@pytest.mark.parametrize(("sets", "batch"), CASES)
@pytest.mark.parametrize("sampler", [PROPORTIONAL, ROUND_ROBIN])
def test_the_batches_of_each_set_are_the_peers(
    sets: dict[str, int], batch: int, sampler: str
) -> None:
    """The number of batches, from each set, and each set's batch sizes in turn."""
    plan = BatchPlan(list(sets), list(sets.values()), batch, seed=SEED, sampler=sampler)
    peer = peer_sampler(sets, batch, sampler)
    assert plan.num_batches == len(peer)
    per_set = [math.ceil(n / batch) for n in sets.values()]
    expected = per_set if sampler == PROPORTIONAL else [min(per_set)] * len(sets)
    for epoch in EPOCHS:
        ours, theirs = our_epoch(plan, epoch), peer_epoch(peer, epoch)
        assert len(ours) == len(theirs) == plan.num_batches
        counts = Counter(set_names(sets, ours))
        assert counts == Counter(set_names(sets, theirs))
        assert [counts[name] for name in sets] == expected
        assert plan.reports[epoch]["batches"] == dict(counts)
        our_rows, peer_rows = rows_by_set(sets, ours), rows_by_set(sets, theirs)
        for name in sets:
            assert [len(b) for b in our_rows[name]] == [len(b) for b in peer_rows[name]]
            used = sum(len(b) for b in our_rows[name])
            assert used == sum(len(b) for b in peer_rows[name])
            assert plan.reports[epoch].get("unused_rows", {}).get(name, 0) == sets[name] - used


@pytest.mark.parametrize(("sets", "batch"), CASES)
def test_round_robin_visits_the_sets_in_the_peers_order(sets: dict[str, int], batch: int) -> None:
    plan = BatchPlan(list(sets), list(sets.values()), batch, seed=SEED, sampler=ROUND_ROBIN)
    peer = peer_sampler(sets, batch, ROUND_ROBIN)
    rounds = min(math.ceil(n / batch) for n in sets.values())
    for epoch in EPOCHS:
        order = set_names(sets, our_epoch(plan, epoch))
        assert order == set_names(sets, peer_epoch(peer, epoch)) == list(sets) * rounds


@pytest.mark.parametrize(("sets", "batch"), CASES)
def test_proportional_orders_the_sets_by_other_draws_than_the_peer(
    sets: dict[str, int], batch: int
) -> None:
    """Not claimed equal: under the same seed, the order of the sets' batches differs from
    the peer's (another random arrangement of the same batches) in some epoch."""
    plan = BatchPlan(list(sets), list(sets.values()), batch, seed=SEED, sampler=PROPORTIONAL)
    peer = peer_sampler(sets, batch, PROPORTIONAL)
    ours = [set_names(sets, our_epoch(plan, epoch)) for epoch in EPOCHS]
    theirs = [set_names(sets, peer_epoch(peer, epoch)) for epoch in EPOCHS]
    assert ours != theirs
    assert all(Counter(o) == Counter(t) for o, t in zip(ours, theirs, strict=True))


def test_proportional_orders_are_drawn_alike() -> None:
    """Both sides draw the order of the sets' batches uniformly over its arrangements: two
    batches of ``a`` and one of ``b`` (``aab``, ``aba``, ``baa``), over 300 seeds each, each
    arrangement about a third of the time (its count's standard deviation is 8; 60 is 7
    of them)."""
    sets, batch, draws = {"a": 8, "b": 3}, 4, 300
    ours: Counter[str] = Counter()
    theirs: Counter[str] = Counter()
    for seed in range(draws):
        plan = BatchPlan(list(sets), list(sets.values()), batch, seed=seed, sampler=PROPORTIONAL)
        ours["".join(set_names(sets, our_epoch(plan, 0)))] += 1
        peer = peer_sampler(sets, batch, PROPORTIONAL, seed=seed)
        theirs["".join(set_names(sets, peer_epoch(peer, 0)))] += 1
    for counts in (ours, theirs):
        assert set(counts) == {"aab", "aba", "baa"}
        assert all(abs(n - draws / 3) < 60 for n in counts.values()), counts


@pytest.mark.parametrize(("sets", "batch"), CASES)
@pytest.mark.parametrize("sampler", [PROPORTIONAL, ROUND_ROBIN])
def test_the_rows_of_each_batch_are_other_draws_than_the_peers(
    sets: dict[str, int], batch: int, sampler: str
) -> None:
    """Not claimed equal: under the same seed, the rows each set's batches hold differ from
    the peer's (numpy's shuffle, not torch's), though cut into the same sizes."""
    plan = BatchPlan(list(sets), list(sets.values()), batch, seed=SEED, sampler=sampler)
    peer = peer_sampler(sets, batch, sampler)
    for epoch in EPOCHS:
        ours = rows_by_set(sets, our_epoch(plan, epoch))
        theirs = rows_by_set(sets, peer_epoch(peer, epoch))
        several = [name for name, n in sets.items() if n > 1]
        assert any(ours[name] != theirs[name] for name in several)
