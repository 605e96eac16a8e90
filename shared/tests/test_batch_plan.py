"""The batch plan of several training sets and of ``batch_sampler: no_duplicates``
(:mod:`sts_core.training.batch_plan`), against counts worked out by hand and against
sentence-transformers' own samplers (``ProportionalBatchSampler``,
``RoundRobinBatchSampler``, ``NoDuplicatesBatchSampler``) on the same sizes and orders.
What of the multi-dataset plan is equal to the peer's (the batches from each set, the
``round_robin`` order) and what is not (the random draws): test_multi_dataset_peer.py."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
from datasets import Dataset
from torch.utils.data import BatchSampler, ConcatDataset, SequentialSampler

from sts_core.testing import assert_peer_batches_but_for_the_end
from sts_core.training.batch_plan import BatchPlan, chunk, no_duplicate_batches
from sts_core.training.sampler import EpochBatchSampler

SIZES = [10, 7, 9]  # with G = 4: 3, 2 and 3 batches (the last of each shorter)
G = 4


def set_of(plan: BatchPlan, batch: list[int]) -> int:
    """The one set a batch's rows come from (asserting they all do)."""
    (k,) = {plan.set_of_row(i) for i in batch}
    return k


def st_set_order(sampler_class: type, sizes: list[int], batch: int) -> list[int]:
    """The sets of the batches a sentence-transformers multi-dataset sampler yields over
    ``sizes`` (each set's batches in order, as its BatchSampler gives them)."""
    concatenated = ConcatDataset([list(range(n)) for n in sizes])
    samplers = [BatchSampler(SequentialSampler(range(n)), batch, False) for n in sizes]
    sampler = sampler_class(concatenated, samplers, generator=torch.Generator(), seed=0)
    ends = [sum(sizes[: k + 1]) for k in range(len(sizes))]
    order = [next(k for k, end in enumerate(ends) if b[0] < end) for b in sampler]
    assert len(order) == len(sampler)
    return order


def test_proportional_takes_every_batch_of_every_set_once_in_a_seeded_order() -> None:
    from sentence_transformers.base.sampler import ProportionalBatchSampler

    plan = BatchPlan(["a", "b", "c"], SIZES, G, seed=3)
    assert plan.batches_per_set == [3, 2, 3]  # ⌈10/4⌉, ⌈7/4⌉, ⌈9/4⌉
    assert plan.num_batches == 8
    st_counts = Counter(st_set_order(ProportionalBatchSampler, SIZES, G))
    for epoch in (0, 1):
        batches = plan.batches(epoch)
        assert len(batches) == plan.num_batches
        assert Counter(set_of(plan, b) for b in batches) == st_counts == {0: 3, 1: 2, 2: 3}
        assert sorted(i for b in batches for i in b) == list(range(sum(SIZES)))
        assert all(len(b) <= G for b in batches)
        assert plan.reports[epoch]["batches"] == {"a": 3, "b": 2, "c": 3}
        assert "unused_rows" not in plan.reports[epoch]
    assert plan.batches(0) == BatchPlan(["a", "b", "c"], SIZES, G, seed=3).batches(0)
    assert plan.batches(0) != plan.batches(1)  # another shuffle each epoch


def test_a_plan_built_without_a_config_refuses_an_unknown_sampler() -> None:
    """The check the config makes as it is parsed (``check_sampler``), for a plan a
    Trainer builds from arguments that are not a ``BaseConfig``."""
    with pytest.raises(ValueError, match="multi_dataset_sampler must be one of proportional, "):
        BatchPlan(["a", "b"], [4, 4], G, seed=0, sampler="random")


def test_round_robin_takes_one_batch_of_each_set_in_turn_until_one_runs_out() -> None:
    from sentence_transformers.base.sampler import RoundRobinBatchSampler

    plan = BatchPlan(["a", "b", "c"], SIZES, G, seed=3, sampler="round_robin")
    assert plan.num_batches == 3 * 2  # the set of fewest batches (b) has 2
    batches = plan.batches(0)
    order = [set_of(plan, b) for b in batches]
    assert order == [0, 1, 2, 0, 1, 2] == st_set_order(RoundRobinBatchSampler, SIZES, G)
    used = [i for b in batches for i in b]
    assert len(used) == len(set(used)) == 8 + 7 + 8
    # rows left out this epoch: a 10 − 2·4, b none, c 9 − 2·4
    assert plan.reports[0]["unused_rows"] == {"a": 2, "b": 0, "c": 1}
    assert plan.reports[0]["batches"] == {"a": 2, "b": 2, "c": 2}


def test_one_set_is_the_seeded_shuffle_in_batches() -> None:
    plan = BatchPlan(["train"], [10], G, seed=0)
    import numpy as np

    order = np.random.default_rng([0, 5]).permutation(10)
    assert plan.batches(5) == chunk(order, G)
    assert plan.num_batches == 3


def test_no_duplicates_defers_a_colliding_row_to_the_next_batch() -> None:
    """Worked by hand, batch 2: row 1 shares ``a`` with row 0, so row 2 takes its place and
    row 1 opens the next batch."""
    texts = [frozenset(t) for t in (["a", "b"], ["a", "c"], ["d"], ["e"], ["f"], ["g"])]
    batches, report = no_duplicate_batches(range(6), texts, 2)
    assert batches == [[0, 2], [1, 3], [4, 5]]
    assert (report.kept, report.deferred, report.with_duplicate) == (5, 1, 0)


def test_a_text_in_more_rows_than_batches_is_placed_with_a_duplicate_and_counted() -> None:
    """Four rows share ``a`` and there are two batches of 2: rows 1–3 are deferred from
    batch 0, row 1 opens batch 1, rows 2 and 3 fit nowhere without ``a`` and go into the
    batches with room, in order."""
    texts = [frozenset({"a", f"x{i}"}) for i in range(4)]
    batches, report = no_duplicate_batches(range(4), texts, 2)
    assert batches == [[0, 2], [1, 3]]
    assert report.to_dict() == {"rows": 4, "kept": 1, "deferred": 3, "with_duplicate": 2}


def colliding_dataset(rows: int = 40, anchors: int = 20) -> Dataset:
    """Each anchor text in ``rows / anchors`` rows; the positives are distinct, and one
    positive repeats an anchor (a collision across columns)."""
    positives = [f"positive {i}" for i in range(rows)]
    positives[7] = "anchor 3"
    return Dataset.from_dict(
        {"sentence1": [f"anchor {i % anchors}" for i in range(rows)], "sentence2": positives}
    )


def row_texts(dataset: Dataset) -> list[frozenset[str]]:
    return [
        frozenset(pair) for pair in zip(dataset["sentence1"], dataset["sentence2"], strict=True)
    ]


def deferred_by_scan(order: list[int], batches: list[list[int]]) -> int:
    """Rows deferred, counted from the batches alone: a row is deferred when a batch before
    its own had scanned past it (that batch's last row comes later in ``order``)."""
    position = {row: p for p, row in enumerate(order)}
    batch_of = {row: b for b, batch in enumerate(batches) for row in batch}
    reach = [max(position[row] for row in batch) for batch in batches]
    return sum(1 for row in order if any(reach[b] > position[row] for b in range(batch_of[row])))


def sentence_transformers_pass(dataset: Dataset, seed: int) -> tuple[list[int], list[list[int]]]:
    """The order sentence-transformers' ``NoDuplicatesBatchSampler`` draws for ``seed`` and
    the batches it yields."""
    from sentence_transformers.base.sampler import NoDuplicatesBatchSampler

    sampler = NoDuplicatesBatchSampler(
        dataset, batch_size=G, drop_last=False, generator=torch.Generator(), seed=seed
    )
    batches = list(sampler)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return torch.randperm(len(dataset), generator=generator).tolist(), batches


def assert_no_text_twice(batches: list[list[int]], texts: list[frozenset[str]]) -> None:
    for batch in batches:
        in_batch = [text for row in batch for text in texts[row]]
        assert len(in_batch) == len(set(in_batch)), batch


def test_no_duplicates_gives_sentence_transformers_batches_and_counts() -> None:
    """On the order sentence-transformers' sampler draws, where its pass fills every batch,
    the batches are its batches (no text twice, every row once, ⌈N/G⌉ of them), and the
    deferred rows are those a batch scanned past (counted from the batches alone)."""
    dataset, texts = colliding_dataset(), row_texts(colliding_dataset())
    count = math.ceil(len(dataset) / G)
    compared, deferred = 0, 0
    for seed in range(40):
        order, theirs = sentence_transformers_pass(dataset, seed)
        if len(theirs) != count or any(len(b) != G for b in theirs):
            continue  # its pass ended in short batches: see the next test
        ours, report = no_duplicate_batches(order, texts, G)
        assert ours == theirs
        assert_no_text_twice(ours, texts)
        assert sorted(i for b in ours for i in b) == list(range(len(dataset)))
        assert report.deferred == deferred_by_scan(order, ours)
        assert report.kept == len(dataset) - report.deferred and report.with_duplicate == 0
        compared += 1
        deferred += report.deferred
    assert compared >= 3 and deferred > 0


def test_rows_left_at_the_end_are_swapped_in_instead_of_making_more_batches() -> None:
    """Where sentence-transformers' pass runs out of rows that fit and yields short extra
    batches, the plan keeps ⌈N/G⌉ batches without a text twice, every row used once; its
    batches are the peer's but for the rows placed at the end (the rule of
    ``test_batch_plan_peer.py``, on real rows)."""
    dataset, texts = colliding_dataset(), row_texts(colliding_dataset())
    count = math.ceil(len(dataset) / G)
    stuck = 0
    for seed in range(40):
        order, theirs = sentence_transformers_pass(dataset, seed)
        if len(theirs) == count:
            continue
        ours, report = no_duplicate_batches(order, texts, G)
        assert len(ours) == count and all(len(b) == G for b in ours)
        assert_no_text_twice(ours, texts)
        assert sorted(i for b in ours for i in b) == list(range(len(dataset)))
        assert report.with_duplicate == 0
        assert_peer_batches_but_for_the_end(ours, theirs, report.with_duplicate)
        stuck += 1
    assert stuck >= 3


def test_no_duplicates_in_a_plan_of_two_sets_works_within_each_set() -> None:
    first, second = colliding_dataset(), colliding_dataset(12, anchors=4)
    plan = BatchPlan(["a", "b"], [40, 12], G, seed=0, texts=[row_texts(first), row_texts(second)])
    batches = plan.batches(0)
    assert len(batches) == plan.num_batches == 10 + 3
    assert sorted(i for b in batches for i in b) == list(range(52))
    for batch in batches:
        k = set_of(plan, batch)
        texts = row_texts([first, second][k])
        rows = [i - plan.offsets[k] for i in batch]
        in_batch = [text for row in rows for text in texts[row]]
        assert len(in_batch) == len(set(in_batch))
    counts = plan.reports[0]["no_duplicates"]
    assert set(counts) == {"a", "b"}
    assert counts["b"]["rows"] == 12 and counts["b"]["kept"] + counts["b"]["deferred"] == 12


def test_a_plan_without_collisions_is_the_plain_plan() -> None:
    distinct = [frozenset({f"t{i}"}) for i in range(26)]
    texts = [distinct[:10], distinct[10:17], distinct[17:]]
    plain = BatchPlan(["a", "b", "c"], SIZES, G, seed=4)
    checked = BatchPlan(["a", "b", "c"], SIZES, G, seed=4, texts=texts)
    assert checked.batches(2) == plain.batches(2)
    assert checked.reports[2]["no_duplicates"]["a"] == {
        "rows": 10, "kept": 10, "deferred": 0, "with_duplicate": 0
    }  # fmt: skip


def test_the_epoch_sampler_takes_the_plans_count_and_rows_at_most_once() -> None:
    plan = BatchPlan(["a", "b", "c"], SIZES, G, seed=3, sampler="round_robin")
    sampler = EpochBatchSampler(
        plan.batches, sum(SIZES), per_device=2, processes=2, num_batches=plan.num_batches,
        every_row=False,
    )  # fmt: skip
    assert len(sampler) == 6 * 2
    chunks = list(sampler)
    assert len(chunks) == 12
    twice = EpochBatchSampler(
        lambda epoch: [[0, 1], [1, 2]], 4, per_device=2, processes=1, num_batches=2,
        every_row=False,
    )  # fmt: skip
    with pytest.raises(ValueError, match="at most once"):
        list(twice)
    outside = EpochBatchSampler(
        lambda epoch: [[0, 9]], 4, per_device=2, processes=1, num_batches=1, every_row=False
    )
    with pytest.raises(ValueError, match="at most once"):
        list(outside)


def test_each_process_takes_its_part_of_the_same_sets_batch() -> None:
    """Under two processes (accelerate's sharding of the sampler), the i-th batch of every
    rank comes from the same training set: the plan's i-th global batch, split."""
    from accelerate.data_loader import BatchSamplerShard

    plan = BatchPlan(["a", "b", "c"], SIZES, G, seed=1)
    per_rank = []
    for rank in (0, 1):
        sampler = EpochBatchSampler(
            plan.batches, sum(SIZES), per_device=2, processes=2, num_batches=plan.num_batches
        )
        per_rank.append(list(BatchSamplerShard(sampler, num_processes=2, process_index=rank)))
    assert len(per_rank[0]) == len(per_rank[1]) == plan.num_batches
    for first, second in zip(*per_rank, strict=True):
        assert set_of(plan, first) == set_of(plan, second)
    seen = {i for rank in per_rank for batch in rank for i in batch}
    assert seen == set(range(sum(SIZES)))  # (a one-row batch goes to both processes)


@pytest.mark.usefixtures("torch_one_thread")
def test_a_run_with_no_duplicates_trains_on_batches_without_a_text_twice(
    tiny_bert_nodropout_dir, tmp_path
) -> None:
    """``batch_sampler: no_duplicates`` on one training set built to collide (each anchor
    in 3 of 12 rows, batches of 4): every batch the loss sees holds each text once, every
    row is trained on once an epoch, and the counts in the report are those of the seeded
    order (deferred: the rows a batch scanned past)."""
    import numpy as np

    from sts_core.encoder import SentenceEncoder
    from sts_core.testing import quick_training_args
    from sts_core.training import BaseConfig, BaseTrainer

    dataset = colliding_dataset(12, anchors=4).add_column("score", [0.5] * 12)
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = quick_training_args(
        BaseConfig,
        tmp_path,
        per_device_train_batch_size=4,
        num_train_epochs=2,
        max_steps=-1,
        batch_sampler="no_duplicates",
    )
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=dataset)
    seen: list[list[tuple[str, str]]] = []
    collate = trainer.data_collator

    def spy(rows):
        seen.append([(row["sentence1"], row["sentence2"]) for row in rows])
        return collate(rows)

    trainer.data_collator = spy
    trainer.train()
    assert len(seen) == 2 * 3
    for batch in seen:  # (a row may hold one text in both columns: it is one row's)
        texts = [text for pair in batch for text in set(pair)]
        assert len(texts) == len(set(texts)), batch
    pairs = list(zip(dataset["sentence1"], dataset["sentence2"], strict=True))
    for epoch in (0, 1):
        assert sorted(p for batch in seen[3 * epoch : 3 * epoch + 3] for p in batch) == sorted(
            pairs
        )
    report = trainer.batch_plan_report()["batch_plan"]
    for epoch, entry in enumerate(report["epochs"]):
        order = np.random.default_rng([0, epoch]).permutation(12).tolist()
        batches = trainer.batch_plan().batches(epoch)
        counts = entry["no_duplicates"]["train"]
        assert counts["deferred"] == deferred_by_scan(order, batches)
        assert counts["kept"] == 12 - counts["deferred"] and counts["with_duplicate"] == 0
    assert sum(e["no_duplicates"]["train"]["deferred"] for e in report["epochs"]) > 0


# ------------------------------------------------------------------ the texts as ids
def test_text_ids_are_equal_exactly_where_the_texts_are() -> None:
    """Across columns, in the rows a selection keeps, and a large_string column beside a
    string one: equal ids exactly where the texts are equal."""
    import pyarrow as pa

    from sts_core.data.columns import text_ids

    rows = {"sentence1": ["a", "b", "c", "a"], "sentence2": ["b", "b", "d", "e"]}
    table = Dataset.from_dict(rows)
    wide = Dataset(
        pa.table(
            {
                "sentence1": pa.array(rows["sentence1"], pa.large_string()),
                "sentence2": pa.array(rows["sentence2"]),
            }
        )
    )
    every = [0, 1, 2, 3]
    cases = [(table, every), (table.select([3, 1]), [3, 1]), (wide, every)]
    for dataset, kept in cases:
        ids = text_ids(dataset, ["sentence1", "sentence2"])
        assert ids.shape == (len(kept), 2) and ids.dtype.name == "int32"
        cells = [
            (rows[name][r], int(ids[position, column]))
            for position, r in enumerate(kept)
            for column, name in enumerate(["sentence1", "sentence2"])
        ]
        for text, i in cells:
            assert {j for t, j in cells if t == text} == {i}
            assert {t for t, j in cells if j == i} == {text}
    empty = text_ids(table.select([]), ["sentence1"])
    assert empty.shape == (0, 1) and empty.dtype.name == "int32"


def test_no_duplicates_on_text_ids_gives_the_batches_of_the_texts() -> None:
    """The plan over :class:`RowTexts` (a row's ids, a text it holds twice once) is the plan
    over each row's set of texts, on sets with many repeated texts (seed 15: one where
    counting a row's repeated text twice would change the rows swapped in at the end)."""
    import random

    from sts_core.data.columns import text_ids
    from sts_core.training.batch_plan import RowTexts

    for seed, size, batch in ((0, 120, 8), (15, 40, 4)):
        rng = random.Random(seed)
        words = [f"w{i}" for i in range(15 if seed == 0 else 6)]
        rows = {n: [rng.choice(words) for _ in range(size)] for n in ("sentence1", "sentence2")}
        pairs = zip(rows["sentence1"], rows["sentence2"], strict=True)
        by_text = [frozenset(pair) for pair in pairs]
        by_id = RowTexts(text_ids(Dataset.from_dict(rows), ["sentence1", "sentence2"]))
        assert any(len(texts) == 1 for texts in by_text)  # a row whose two texts are one
        order = list(range(size))
        rng.shuffle(order)
        plan = no_duplicate_batches(order, by_id, batch)
        assert plan == no_duplicate_batches(order, by_text, batch)
