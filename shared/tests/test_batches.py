"""An epoch's batches as arrays (``sts_core.training.batches.Batches``): read as the lists
of lists they stand for, and a batch plan's batches equal to those of the plan's rule
computed list by list."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sts_core.training.batch_plan import ROUND_ROBIN, BatchPlan, chunk
from sts_core.training.batches import Batches

LISTS = [[4, 1], [0, 3, 2], [5]]


def test_batches_read_as_the_lists_they_hold() -> None:
    batches = Batches.of(LISTS)
    assert len(batches) == 3 and list(batches) == LISTS and batches.to_lists() == LISTS
    assert [batches[i] for i in (0, 1, 2, -1, -3)] == [*LISTS, LISTS[-1], LISTS[0]]
    assert batches[1:] == LISTS[1:] and batches[::-1] == LISTS[::-1]
    assert batches.sizes.tolist() == [2, 3, 1] and batches.starts.tolist() == [0, 2, 5]
    assert batches == LISTS and batches == Batches.of(LISTS) and batches != [[4, 1]]
    assert Batches.of(batches) is batches
    with pytest.raises(IndexError):
        batches[3]
    assert Batches.of([]) == [] and len(Batches.of([])) == 0 and len(Batches.of([]).rows) == 0
    assert Batches([1, 2, 3], [1, 3]) != Batches([1, 2, 3], [2, 3])
    assert Batches([1, 2, 3], [1, 3]) != Batches([1, 2, 4], [1, 3])


def test_batches_hold_int64_indices_whatever_they_were_given_as() -> None:
    given = Batches(np.array([2, 0, 1], dtype=np.int32), np.array([2, 3], dtype=np.int32))
    assert given.rows.dtype == given.ends.dtype == np.int64
    from_lists = Batches.of([[np.int32(2), 0.0], [1]])
    assert from_lists.rows.dtype == from_lists.ends.dtype == np.int64
    assert from_lists.to_lists() == [[2, 0], [1]]
    assert all(type(row) is int for batch in from_lists for row in batch)


@pytest.mark.parametrize("rows, size", [(10, 3), (9, 3), (1, 4), (7, 7)])
def test_chunked_batches_are_consecutive_runs_of_the_size(rows: int, size: int) -> None:
    order = np.random.default_rng(rows).permutation(rows)
    assert Batches.chunked(order, size) == chunk(order, size)


def plan_by_lists(plan: BatchPlan, epoch: int) -> list[list[int]]:
    """The plan's rule, list by list: each set's rows in the seed's random order cut into
    batches of G, then the sets' batches taken in turn (``round_robin``: one of each set in
    order until the shortest runs out; ``proportional``: every batch, the sets in a random
    order of turns)."""
    rng = np.random.default_rng([plan.seed, epoch])
    per_set = []
    for size, offset in zip(plan.sizes, plan.offsets, strict=True):
        order = rng.permutation(size)
        per_set.append([[offset + int(i) for i in b] for b in chunk(order, plan.global_batch)])
    if plan.sampler == ROUND_ROBIN:
        rounds = min(len(b) for b in per_set)
        return [per_set[k][r] for r in range(rounds) for k in range(len(per_set))]
    turns = np.repeat(np.arange(len(per_set)), [len(b) for b in per_set])
    taken = [0] * len(per_set)
    out = []
    for k in rng.permutation(turns):
        out.append(per_set[k][taken[k]])
        taken[k] += 1
    return out


@pytest.mark.parametrize("sampler", ["proportional", ROUND_ROBIN])
@pytest.mark.parametrize("sizes", [[23], [23, 5, 11], [4, 40]])
def test_a_plans_batches_are_the_rule_computed_list_by_list(sampler: str, sizes) -> None:
    plan = BatchPlan([f"s{k}" for k in range(len(sizes))], sizes, 4, seed=9, sampler=sampler)
    for epoch in (0, 3):
        batches = plan.batches(epoch)
        assert isinstance(batches, Batches)
        expected = plan_by_lists(plan, epoch)
        assert batches == expected
        counts = [math.ceil(n / 4) for n in sizes]
        by_set = plan.reports[epoch]["batches"]
        if sampler == ROUND_ROBIN:
            assert list(by_set.values()) == [min(counts)] * len(sizes)
        else:
            assert list(by_set.values()) == counts
