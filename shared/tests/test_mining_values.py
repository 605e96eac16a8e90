"""Hard-negative mining on made-up embeddings whose cosines are exact binary fractions, so
each filter's boundary, each reason's count, the report, the score columns, random
sampling and the faiss path are checked against values written out here (found by the
mutation pass: ``benchmarks/results/mutation/``)."""

from __future__ import annotations

import importlib.util
import logging
from types import SimpleNamespace

import numpy as np
import pytest
from datasets import Dataset

from sts_core import mining
from sts_core.mining import (
    MiningReport,
    MiningSettings,
    Pairs,
    SearchSettings,
    choose_negatives,
    chunk_rows,
    mine_hard_negatives,
)
from sts_core.mining import mine as mine_pairs

# the anchor a = (1, 0): each text's cosine with it is its first coordinate
FIRST = {
    "a": 1.0,
    "p": 0.75,
    "n0625": 0.625,
    "n05": 0.5,
    "n0375": 0.375,
    "n025": 0.25,
    "n0125": 0.125,
}
EXTRA = ["n0625", "n05", "n0375", "n025", "n0125"]


class ExactEncoder:
    """``encode`` of made-up vectors (first coordinate as ``first`` says, second 0),
    recording the keyword arguments of each call."""

    def __init__(self, first: dict[str, float] = FIRST) -> None:
        self.first = first
        self.calls: list[dict] = []

    def encode(self, texts: list[str], **options: object) -> np.ndarray:
        self.calls.append(options)
        return np.array([[self.first[t], 0.0] for t in texts], dtype=np.float32)


def mine(settings: MiningSettings, **options: object):
    pairs = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["p"]})
    return mine_pairs(pairs, ExactEncoder(), settings, corpus=EXTRA, **options)


@pytest.mark.parametrize(
    ("filters", "kept", "removed"),
    [
        # score + 0.25 > 0.75 removes 0.625; 0.5 + 0.25 = 0.75 is not above it: kept
        ({"absolute_margin": 0.25}, ["n05", "n0375", "n025", "n0125"], {"absolute_margin": 1}),
        # score > 0.75 − 0.75·0.5 = 0.375 removes 0.625 and 0.5; 0.375 itself is kept
        ({"relative_margin": 0.5}, ["n0375", "n025", "n0125"], {"relative_margin": 2}),
        ({"max_score": 0.5}, ["n05", "n0375", "n025", "n0125"], {"max_score": 1}),
        ({"min_score": 0.25}, ["n0625", "n05", "n0375", "n025"], {"min_score": 1}),
    ],
)
def test_each_filter_keeps_its_boundary_and_counts_what_it_removed(
    filters: dict, kept: list[str], removed: dict
) -> None:
    triplets, report = mine(MiningSettings(num_negatives=5, range_max=6, **filters))
    assert triplets["negative"] == kept  # best first
    assert report.removed == {"positive": 1, **removed}


@pytest.mark.parametrize(
    ("positive", "negative", "filters"),
    [
        # float32: 0.05 + 0.2 rounds to 0.25, not above the positive's 0.25 (float64: above)
        (0.25, 0.05, {"absolute_margin": 0.2}),
        # float32: p − 0.1·p rounds to exactly the candidate's score (float64: below it)
        (0.30020007491111755, 0.2701800763607025, {"relative_margin": 0.1}),
    ],
)
def test_margins_are_applied_in_float32_as_the_peers_tensors_are(
    positive: float, negative: float, filters: dict
) -> None:
    pairs = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["p"]})
    encoder = ExactEncoder({"a": 1.0, "p": positive, "n": negative})
    settings = MiningSettings(num_negatives=1, range_max=2, **filters)
    triplets, _ = mine_pairs(pairs, encoder, settings, corpus=["n"])
    assert triplets["negative"] == ["n"]  # on the boundary: kept


def test_no_pairs_is_refused_in_words() -> None:
    empty = Dataset.from_dict({"sentence1": [], "sentence2": []})
    with pytest.raises(ValueError, match="^no pairs to mine hard negatives for$"):
        mine_hard_negatives(empty, ExactEncoder(), use_faiss=False)


def test_the_report_its_log_lines_the_score_columns_and_the_encoder_options(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter([10.0, 11.23456, 12.5, 14.00049])  # started, encoded, searched, selected
    monkeypatch.setattr(mining, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    encoder = ExactEncoder()
    pairs = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["p"]})
    with caplog.at_level(logging.INFO, logger="sts_core.mining"):
        triplets, report = mine_pairs(
            pairs,
            encoder,
            MiningSettings(num_negatives=2),
            corpus=EXTRA,
            search_settings=SearchSettings(batch_size=64),
            output_scores=True,
        )
    assert encoder.calls == [{"batch_size": 64, "show_progress_bar": False, "normalize": True}] * 2
    assert triplets.column_names == ["anchor", "positive", "negative", "scores"]
    assert triplets["negative"] == ["n0625", "n05"]
    assert triplets["scores"] == [[0.75, 0.625], [0.75, 0.5]]
    assert report.range_max == 0 + 2 + 1 and report.candidates_per_anchor == 4  # + positives
    assert report.search == "exact (numpy)"
    assert report.seconds == {"encode": 1.235, "search": 1.265, "select": 1.5}
    assert all(isinstance(value, float) for value in report.seconds.values())
    assert caplog.messages == [f"mining: {line}" for line in report.lines()]
    monkeypatch.undo()
    plain, _ = mine(MiningSettings(num_negatives=2))
    assert plain.column_names == ["anchor", "positive", "negative"]  # scores only when asked


def test_the_report_reads_as_written() -> None:
    report = MiningReport(
        pairs=4,
        duplicate_pairs=1,
        anchors=3,
        corpus=9,
        range_max=5,
        candidates_per_anchor=6,
        search="exact (numpy)",
        chunk_rows=111,
    )
    report.pairs_by_negatives = {2: 3, 0: 1}
    report.triplets = 6
    assert report.lines() == [
        "4 pairs (1 duplicate rows merged), 3 distinct anchors, corpus of 9 distinct texts",
        "search: exact (numpy), 6 candidates per anchor (range_max 5), 111 anchors per chunk",
        "candidates removed: none",
        "pairs by negatives found: 0: 1, 2: 3",
        "6 triplets",
    ]
    report.removed = {"positive": 2, "max_score": 1}
    assert report.lines()[2] == "candidates removed: positive 2, max_score 1"


def test_random_sampling_draws_distinct_candidates_and_fills_a_short_row_with_none() -> None:
    scores = np.array([[0.9, 0.8, 0.7, 0.6], [0.9, -np.inf, -np.inf, -np.inf]], dtype=np.float32)
    indices = np.array([[5, 6, 7, 8], [1, 2, 3, 4]])
    settings = MiningSettings(num_negatives=4, range_max=4, sampling_strategy="random", seed=3)
    best, positions = choose_negatives(scores.copy(), indices, settings, 4)
    assert sorted(positions[0].tolist()) == [5, 6, 7, 8]  # all four, none twice
    assert positions[0].tolist() == [5, 6, 7, 8]  # best first
    assert positions[1].tolist() == [1, -1, -1, -1]  # one candidate left: the rest empty
    assert np.isneginf(best[1, 1:]).all()
    one = MiningSettings(num_negatives=1, range_max=1, sampling_strategy="random")
    best, positions = choose_negatives(np.array([[-np.inf]]), np.array([[4]]), one, 1)
    assert positions.tolist() == [[-1]] and np.isneginf(best).all()  # nothing to draw


class PaddingIndex:
    """A stand-in for faiss' ``IndexFlatIP`` that, like faiss on a short corpus, pads its
    result with index −1 (and a score that would otherwise win)."""

    def __init__(self, width: int) -> None:
        self.vectors = None

    def add(self, vectors: np.ndarray) -> None:
        self.vectors = vectors

    searched = 0

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        PaddingIndex.searched += 1
        scores = queries @ self.vectors.T
        order = np.argsort(-scores, axis=1, kind="stable")[:, : k - 1]
        found = np.take_along_axis(scores, order, axis=1)
        pad = np.full((len(queries), 1), 0.99, dtype=np.float32)
        return np.hstack([pad, found]), np.hstack([np.full((len(queries), 1), -1), order])


def test_the_faiss_path_is_taken_when_asked_and_its_padding_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert mining.faiss_installed() == (importlib.util.find_spec("faiss") is not None)
    PaddingIndex.searched = 0  # a process may run this test more than once
    monkeypatch.setattr(mining, "faiss_installed", lambda: True)
    monkeypatch.setattr(mining, "faiss_module", lambda: SimpleNamespace(IndexFlatIP=PaddingIndex))
    pairs = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["p"]})
    _, plain = mine_pairs(pairs, ExactEncoder(), MiningSettings(num_negatives=2), corpus=EXTRA)
    assert plain.search == "exact (numpy)" and PaddingIndex.searched == 0  # the peer's default
    triplets, report = mine_pairs(
        pairs,
        ExactEncoder(),
        MiningSettings(num_negatives=2),
        corpus=EXTRA,
        search_settings=SearchSettings(use_faiss=True),
    )
    assert report.search == "faiss IndexFlatIP" and PaddingIndex.searched == 1
    assert triplets["negative"] == ["n0625", "n05"]  # not the padded −1 with its 0.99


def test_faiss_missing_names_the_feature(monkeypatch: pytest.MonkeyPatch) -> None:
    import sts_core.extras

    monkeypatch.setattr(sts_core.extras.importlib, "import_module", _no_module)
    with pytest.raises(ImportError, match="^hard-negative mining with faiss needs the optional"):
        mining.faiss_module()


def _no_module(name: str, *args: object) -> None:
    raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def test_setting_bounds_are_accepted_and_unequal_columns_refused() -> None:
    MiningSettings(num_negatives=2, range_min=1, range_max=3)  # exactly num_negatives left
    MiningSettings(relative_margin=0.0)
    MiningSettings(min_score=0.5, max_score=0.5)
    assert chunk_rows(0, 1) == 2**20 // 24  # an empty corpus counts as one text
    with pytest.raises(ValueError):
        Pairs.build(["a", "b"], ["p"], [])
