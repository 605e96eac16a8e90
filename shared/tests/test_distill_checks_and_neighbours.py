"""The teacher step at its edges, each against a value computed here: the settings and data
checks with their whole messages and bounds, how the teacher is asked to encode, the
neighbour pairs against a brute-force reference of the documented rule (the 2k + 2 nearest
candidates, gold pairs and repeats skipped), the partial top-k selection, the summary and
its log line, the features of the added rows, and loading the teacher. Found by the
mutation pass (``tools/mutation.py``)."""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import numpy as np
import pytest
from datasets import Dataset, Features, Value

from sts_core.training.distill import (
    SentenceVectors,
    add_neighbour_pairs,
    apply_teacher,
    check_teacher_data,
    check_teacher_settings,
    load_teacher,
    teacher_similarities,
    top_columns,
)


class FakeTeacher:
    """Encodes each sentence as a fixed random unit vector (float64), recording how it was
    asked."""

    def __init__(self, dimension: int = 5, seed: int = 0) -> None:
        self.rng, self.dimension, self.table, self.calls = (
            np.random.default_rng(seed),
            dimension,
            {},
            [],
        )

    def vector(self, sentence: str) -> np.ndarray:
        if sentence not in self.table:
            v = self.rng.normal(size=self.dimension)
            self.table[sentence] = v / np.linalg.norm(v)
        return self.table[sentence]

    def encode(self, sentences, **kwargs):
        self.calls.append(kwargs)
        return np.stack([self.vector(s) for s in sentences])


def whole_message(call) -> str:
    with pytest.raises(ValueError) as error:
        call()
    return str(error.value)


def teacher_config(**values) -> SimpleNamespace:
    return SimpleNamespace(
        **{"teacher_model": "t", "teacher_weight": 1.0, "teacher_neighbours": 0, **values}
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"teacher_neighbours": -1}, "teacher_neighbours must be 0 or more, got -1"),
        (
            {"teacher_neighbours": 2, "teacher_model": None},
            "teacher_neighbours needs teacher_model (the teacher makes the pairs)",
        ),
        ({"teacher_weight": 0.0}, "teacher_weight must be in (0, 1], got 0.0"),
        ({"teacher_weight": 1.5}, "teacher_weight must be in (0, 1], got 1.5"),
        ({"teacher_weight": math.nan}, "teacher_weight must be in (0, 1], got nan"),
    ],
)
def test_teacher_settings_are_refused_with_their_whole_message(values, message) -> None:
    assert whole_message(lambda: check_teacher_settings(teacher_config(**values))) == message


def test_the_bounds_of_the_teacher_settings_are_accepted() -> None:
    check_teacher_settings(teacher_config(teacher_weight=1.0))
    check_teacher_settings(teacher_config(teacher_weight=1e-6, teacher_neighbours=3))
    check_teacher_settings(teacher_config(teacher_model=None, teacher_weight=7.0))


def test_teacher_data_checks_and_their_bounds() -> None:
    no_pairs = Dataset.from_dict({"text": ["a"], "score": [0.5]})
    assert whole_message(lambda: check_teacher_data(no_pairs, "score", 1.0)) == (
        "teacher_model scores sentence pairs, but the training set has no column "
        "sentence1, sentence2"
    )
    edges = Dataset.from_dict({"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [-1, 1]})
    check_teacher_data(edges, "score", 0.5)
    wide = Dataset.from_dict(
        {"sentence1": ["a", "b", "e"], "sentence2": ["c", "d", "f"], "score": [-1.5, 0.0, 2.0]}
    )
    assert whole_message(lambda: check_teacher_data(wide, "score", 0.5)) == (
        "teacher_weight 0.5 < 1 mixes the teacher's cosine (−1 … 1) with the labels, but 2 of "
        "3 labels in 'score' lie outside it (range -1.5 … 2): rescale them (score_range)"
    )


def pairs_dataset(n_pairs: int = 8, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    words = [f"s{i}" for i in range(10)]
    first = [words[i] for i in rng.integers(0, 10, n_pairs)]
    second = [words[i] for i in rng.integers(0, 10, n_pairs)]
    return Dataset.from_dict(
        {"sentence1": first, "sentence2": second, "score": rng.uniform(0, 1, n_pairs).tolist()}
    )


def test_the_teacher_encodes_each_sentence_once_as_unit_vectors() -> None:
    teacher = FakeTeacher()
    data = pairs_dataset()
    vectors = SentenceVectors(teacher, data, batch_size=3)
    assert teacher.calls == [{"batch_size": 3, "show_progress_bar": False, "normalize": True}]
    assert vectors.vectors.dtype == np.float32
    asked = FakeTeacher()
    similarities = teacher_similarities(asked, data, 3)
    assert asked.calls == teacher.calls
    expected = [
        float(np.float32(teacher.vector(a)) @ np.float32(teacher.vector(b)))
        for a, b in zip(data["sentence1"], data["sentence2"], strict=True)
    ]
    assert similarities.dtype == np.float64
    np.testing.assert_allclose(similarities, expected, rtol=1e-6)


def reference_neighbours(vectors: SentenceVectors, k: int) -> list[tuple[str, str]]:
    """Each sentence in turn: of its min(n − 1, 2k + 2) most similar other sentences (ties
    by position), the first k whose unordered pair is neither a training pair nor added."""
    names, matrix = vectors.sentences, vectors.vectors @ vectors.vectors.T
    taken = {frozenset(p) for p in zip(vectors.first, vectors.second, strict=True)}
    pick = min(len(names) - 1, 2 * k + 2)
    added = []
    for i, name in enumerate(names):
        scores = [(-float(matrix[i, j]), j) for j in range(len(names)) if j != i]
        found = 0
        for _, j in sorted(scores)[:pick]:
            pair = frozenset((name, names[j]))
            if found == k or len(pair) < 2 or pair in taken:
                continue
            taken.add(pair)
            added.append((name, names[j]))
            found += 1
    return added


@pytest.mark.parametrize(("k", "seed"), [(1, 0), (2, 1), (3, 2), (1, 3)])
def test_neighbour_pairs_follow_the_documented_rule(k: int, seed: int) -> None:
    vectors = SentenceVectors(FakeTeacher(seed=seed), pairs_dataset(14, seed), batch_size=4)
    firsts, seconds, cosines = vectors.neighbour_pairs(k)
    assert list(zip(firsts, seconds, strict=True)) == reference_neighbours(vectors, k)
    for a, b, cosine in zip(firsts, seconds, cosines, strict=True):
        want = vectors.vectors[vectors.index[a]] @ vectors.vectors[vectors.index[b]]
        assert cosine == pytest.approx(float(want), abs=1e-6)
    blocked = vectors.neighbour_pairs(k, block_cells=7)  # a few rows at a time: the same
    assert blocked[:2] == (firsts, seconds)
    np.testing.assert_allclose(blocked[2], cosines, atol=1e-6)


def test_top_columns_are_the_largest_first_ties_by_column() -> None:
    rng = np.random.default_rng(4)
    block = rng.integers(0, 4, size=(6, 40)).astype(np.float32)  # many ties
    for pick in (1, 5, 39, 40, 50):
        expected = np.array(
            [sorted(range(40), key=lambda c, row=row: (-row[c], c))[:pick] for row in block]
        )
        got = top_columns(block, pick)
        if pick < 40:  # a partial selection keeps the largest values, in order
            assert (
                np.take_along_axis(block, got, 1) == np.take_along_axis(block, expected, 1)
            ).all()
        else:
            assert got.tolist() == expected.tolist()
    distinct = rng.normal(size=(5, 30))
    expected = np.argsort(-distinct, axis=1)[:, :7]
    assert top_columns(distinct, 7).tolist() == expected.tolist()
    empty = top_columns(distinct, 0)
    assert empty.shape == (5, 0) and empty.dtype == np.int64


def test_two_pairs_are_enough_for_the_teachers_spearman() -> None:
    data = Dataset.from_dict(
        {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [0.1, 0.9]}
    )
    teacher = FakeTeacher(seed=2)
    _, summary = apply_teacher(data, teacher, "score", 0.5, batch_size=4)
    cosines = [teacher.vector("a") @ teacher.vector("c"), teacher.vector("b") @ teacher.vector("d")]
    assert summary["teacher_spearman_with_labels"] == (100.0 if cosines[1] > cosines[0] else -100.0)


def test_the_summary_and_the_log_line(caplog) -> None:
    data = pairs_dataset(9, seed=5)
    teacher = FakeTeacher(seed=5)
    with caplog.at_level(logging.INFO, logger="sts_core.training.distill"):
        relabelled, summary = apply_teacher(data, teacher, "score", 0.5, batch_size=4)
    similarities = SentenceVectors(FakeTeacher(seed=5), data, 4).pair_similarities()
    from scipy.stats import spearmanr

    gold = np.asarray(data["score"])
    assert summary == {
        "teacher_kind": "bi-encoder",
        "teacher_weight": 0.5,
        "pairs": 9,
        "teacher_mean": round(float(similarities.mean()), 4),
        "teacher_spearman_with_labels": round(
            float(spearmanr(similarities, gold).statistic) * 100, 2
        ),
    }
    assert len(str(summary["teacher_mean"]).split(".")[1]) == 4  # four decimals kept
    np.testing.assert_allclose(relabelled["score"], 0.5 * similarities + 0.5 * gold)
    assert caplog.messages == [
        f"teacher: 9 pairs rescored (α 0.50, mean teacher score {summary['teacher_mean']:.3f})"
    ]


def test_added_rows_keep_the_datasets_features() -> None:
    features = Features(
        {
            "sentence1": Value("string"),
            "sentence2": Value("string"),
            "score": Value("float32"),
            "source": Value("string"),
        }
    )
    data = Dataset.from_dict(
        {
            "sentence1": ["a", "b", "c"],
            "sentence2": ["b", "c", "d"],
            "score": [0.5, 0.2, 0.9],
            "source": ["x", "y", "z"],
        },
        features=features,
    )
    vectors = SentenceVectors(FakeTeacher(seed=6), data, 2)
    grown, added = add_neighbour_pairs(data, vectors, "score", 1)
    assert added > 0 and grown.features == features
    assert grown["source"][3:] == [None] * added


def test_the_teacher_loads_with_its_length_on_its_device(tiny_bert_dir) -> None:
    teacher = load_teacher(str(tiny_bert_dir), "meta", max_length=7)
    assert teacher.max_length == 7 and not teacher.training
    assert {p.device.type for p in teacher.parameters()} == {"meta"}
