"""``batch_sampler: no_duplicates`` against sentence-transformers' ``NoDuplicatesBatchSampler``
on real rows (STS-B train, SNLI dev, the NLI triplets), batch by batch, on the order the
peer draws: the rule in :func:`~sts_core.training.batch_plan.no_duplicate_batches` stated
exactly. Needs STS_DATA_DIR."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from sts_core.testing import assert_peer_batches_but_for_the_end
from sts_core.training.batch_plan import no_duplicate_batches

pytestmark = [pytest.mark.real_data]
sampler = pytest.importorskip("sentence_transformers.base.sampler", reason="the peer")


def stsb(data: Path) -> Dataset:
    lines = (data / "senteval/STS/STSBenchmark/sts-train.csv").read_text(encoding="utf-8")
    fields = [line.split("\t") for line in lines.splitlines()]
    return Dataset.from_dict({"sentence1": [f[5] for f in fields], "sentence2": [f[6] for f in fields]})  # noqa: E501  # fmt: skip


def snli(data: Path) -> Dataset:
    with (data / "nli/snli-devtest-raw/snli_1.0_dev.csv").open(encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    columns = {"premise": "sentence1", "hypothesis": "sentence2"}
    return Dataset.from_dict({name: [r[key] for r in rows] for name, key in columns.items()})


def triplets(data: Path) -> Dataset:
    with (data / "nli/triplets/nli_triplets.csv").open(encoding="utf-8") as file:
        rows = list(csv.DictReader(file))[:6000]
    names = ("sent0", "sent1", "hard_neg")
    return Dataset.from_dict({name: [r[name] for r in rows] for name in names})


#: (rows, global batch): the peer's pass runs out of rows that fit in some of these
CASES = {"stsb-32": (stsb, 32), "stsb-512": (stsb, 512), "snli-64": (snli, 64),
         "snli-1024": (snli, 1024), "nli-triplets-256": (triplets, 256)}  # fmt: skip


def peer_pass(dataset: Dataset, size: int, seed: int) -> tuple[list[int], list[list[int]]]:
    """The order the peer's sampler draws for ``seed`` (epoch 0) and the batches it yields
    (``drop_last=False``: its first pass whole)."""
    peer = sampler.NoDuplicatesBatchSampler(
        dataset, batch_size=size, drop_last=False, generator=torch.Generator(), seed=seed
    )
    batches = list(peer)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return torch.randperm(len(dataset), generator=generator).tolist(), batches


@pytest.mark.parametrize("case", list(CASES))
def test_the_batches_are_the_peers_but_for_the_rows_placed_at_the_end(
    sts_data_dir: Path, case: str
) -> None:
    """On the peer's order: the same scan (a row whose text is in the batch being filled
    waits for the next batch), so batch i holds the peer's batch i in the same order, but
    for the end: the peer yields short batches until every row is placed (more than
    ⌈N/G⌉), we keep ⌈N/G⌉ and place its extra batches' rows (``leftovers``) into ours,
    each in place of a row that moves to a batch with room (``displaced``: at most one
    per leftover) or, where no such swap exists, into a batch with room with its
    duplicate (``with_duplicate``; the peer then makes another batch). Where the peer's
    pass fills ⌈N/G⌉ batches, they are equal."""
    read, size = CASES[case]
    dataset = read(sts_data_dir)
    texts = [frozenset(row.values()) for row in dataset]
    count = math.ceil(len(dataset) / size)
    ended_short = 0
    for seed in range(3):
        order, theirs = peer_pass(dataset, size, seed)
        ours, report = no_duplicate_batches(order, texts, size)
        assert len(ours) == count <= len(theirs)
        leftovers, _ = assert_peer_batches_but_for_the_end(ours, theirs, report.with_duplicate)
        assert bool(leftovers) == (len(theirs) > count)
        ended_short += len(theirs) > count
    if case in ("stsb-512", "snli-1024"):
        assert ended_short  # the end-of-epoch rule is exercised
