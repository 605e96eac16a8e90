"""``teacher_model``: pair labels replaced by α · the teacher's cosine + (1 − α) · gold,
computed here from the teacher's own embeddings; ``teacher_neighbours``' new pairs, checked
against a brute-force nearest-neighbour search; the checks before any weights load; a run
that trains on the teacher's scores and records them in metrics.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset
from scipy.stats import spearmanr

from sts_core.encoder import SentenceEncoder
from sts_core.testing import make_tiny_bert, write_fixture_recipe
from sts_core.training.distill import (
    SentenceVectors,
    apply_teacher,
    check_teacher_data,
    top_columns,
)
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
TRAIN = FIXTURES / "sts-train.csv"
DEV = FIXTURES / "sts-dev.csv"
PAIRS = {
    "sentence1": ["a man plays", "the dog runs", "a cat eats", "a man plays"],
    "sentence2": ["a man plays a guitar", "a dog runs", "a cat", "the girl sits"],
    "score": [0.9, 0.8, 0.5, 0.2],
}


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("teacher"), seed=7)


def cosines_of(teacher: SentenceEncoder, first: list[str], second: list[str]) -> np.ndarray:
    u = teacher.encode(first, show_progress_bar=False).astype(np.float64)
    v = teacher.encode(second, show_progress_bar=False).astype(np.float64)
    return (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))


@pytest.mark.parametrize("weight", [1.0, 0.25])
def test_labels_become_the_weighted_teacher_cosine(teacher_dir: Path, weight: float) -> None:
    teacher = SentenceEncoder.from_pretrained(teacher_dir).eval()
    data, summary = apply_teacher(Dataset.from_dict(PAIRS), teacher, "score", weight, 2)
    cosine = cosines_of(teacher, PAIRS["sentence1"], PAIRS["sentence2"])
    expected = weight * cosine + (1 - weight) * np.asarray(PAIRS["score"])
    np.testing.assert_allclose(data["score"], expected, rtol=1e-5, atol=1e-6)
    assert data["sentence1"] == PAIRS["sentence1"]  # the rows keep their order
    assert summary["pairs"] == 4 and summary["teacher_weight"] == weight
    agreement = 100 * spearmanr(cosine, PAIRS["score"]).statistic  # with the gold labels
    assert abs(agreement) > 1  # so a sign error shows
    assert summary["teacher_spearman_with_labels"] == pytest.approx(agreement, abs=0.006)


def test_unlabelled_pairs_take_the_teacher_alone(teacher_dir: Path) -> None:
    teacher = SentenceEncoder.from_pretrained(teacher_dir).eval()
    unlabelled = Dataset.from_dict({k: PAIRS[k] for k in ("sentence1", "sentence2")})
    data, summary = apply_teacher(unlabelled, teacher, "score", 1.0, 8)
    np.testing.assert_allclose(
        data["score"], cosines_of(teacher, PAIRS["sentence1"], PAIRS["sentence2"]), rtol=1e-5
    )
    assert "teacher_spearman_with_labels" not in summary


def brute_force_neighbours(teacher: SentenceEncoder, k: int) -> set[frozenset]:
    """Every sentence's k nearest other sentences by the teacher, skipping training pairs
    and pairs already chosen (in the order the sentences first appear)."""
    sentences = list(dict.fromkeys(PAIRS["sentence1"] + PAIRS["sentence2"]))
    vectors = teacher.encode(sentences, show_progress_bar=False, normalize=True)
    taken = {frozenset(p) for p in zip(PAIRS["sentence1"], PAIRS["sentence2"], strict=True)}
    chosen = set()
    for i, sentence in enumerate(sentences):
        order = [j for j in np.argsort(-(vectors @ vectors[i]), kind="stable") if j != i]
        found = 0
        for j in order:
            pair = frozenset((sentence, sentences[j]))
            if found < k and pair not in taken:
                taken.add(pair)
                chosen.add(pair)
                found += 1
    return chosen


@pytest.mark.parametrize("neighbours", [1, 2])
def test_neighbour_pairs_are_each_sentences_nearest_labelled_by_the_teacher(
    teacher_dir: Path, neighbours: int
) -> None:
    teacher = SentenceEncoder.from_pretrained(teacher_dir).eval()
    data, summary = apply_teacher(
        Dataset.from_dict(PAIRS), teacher, "score", 0.5, 3, neighbours=neighbours
    )
    assert data["sentence1"][:4] == PAIRS["sentence1"]  # the training pairs first, relabelled
    first, second = data["sentence1"][4:], data["sentence2"][4:]
    added = {frozenset(p) for p in zip(first, second, strict=True)}
    assert len(added) == len(first) == summary["neighbour_pairs"] > 0  # no repeats
    assert added == brute_force_neighbours(teacher, neighbours)
    assert not added & {
        frozenset(p) for p in zip(PAIRS["sentence1"], PAIRS["sentence2"], strict=True)
    }
    np.testing.assert_allclose(data["score"][4:], cosines_of(teacher, first, second), rtol=1e-4)


@pytest.mark.parametrize("block_cells", [1, 15])
def test_the_neighbour_search_in_small_blocks_finds_the_same_pairs(
    teacher_dir: Path, block_cells: int
) -> None:
    teacher = SentenceEncoder.from_pretrained(teacher_dir).eval()
    vectors = SentenceVectors(teacher, Dataset.from_dict(PAIRS), 3)
    first, second, cosines = vectors.neighbour_pairs(2)
    blocked = vectors.neighbour_pairs(2, block_cells=block_cells)
    assert first and (blocked[0], blocked[1]) == (first, second)
    np.testing.assert_allclose(blocked[2], cosines, rtol=1e-5)  # BLAS sums blocks apart


@pytest.mark.parametrize("pick", [0, 1, 3, 39, 40])
def test_the_partial_top_selection_agrees_with_a_full_sort(pick: int) -> None:
    block = np.random.default_rng(0).standard_normal((5, 40)).astype(np.float32)
    expected = np.argsort(-block, axis=1, kind="stable")[:, :pick]
    np.testing.assert_array_equal(top_columns(block, pick), expected)


def test_neighbour_pairs_leave_other_columns_empty(teacher_dir: Path) -> None:
    teacher = SentenceEncoder.from_pretrained(teacher_dir).eval()
    tagged = Dataset.from_dict({**PAIRS, "genre": ["a", "b", "c", "d"]})
    data, summary = apply_teacher(tagged, teacher, "score", 1.0, 4, neighbours=1)
    assert data["genre"] == ["a", "b", "c", "d"] + [None] * summary["neighbour_pairs"]


def test_data_the_teacher_cannot_mix_with_is_refused() -> None:
    raw = Dataset.from_dict({**PAIRS, "score": [4.5, 4.0, 2.5, 1.0]})  # 0–5, not rescaled
    with pytest.raises(ValueError, match="3 of 4 labels in 'score' lie outside"):
        check_teacher_data(raw, "score", 0.5)
    check_teacher_data(raw, "score", 1.0)  # the teacher alone: the gold scale is unused
    with pytest.raises(ValueError, match="no label column 'score'"):
        check_teacher_data(raw.remove_columns("score"), "score", 0.5)
    with pytest.raises(ValueError, match="no column sentence2"):
        check_teacher_data(raw.remove_columns("sentence2"), "score", 1.0)


def recipe(tmp_path: Path, student: Path, **settings: str) -> Path:
    settings = {"score_range": "[0, 5]", "max_steps": "2", "save_strategy": "no", **settings}
    return write_fixture_recipe(
        tmp_path / "r.yaml", "distillation", student, TRAIN, DEV, tmp_path / "out", **settings
    )


def test_a_run_trains_on_the_teacher_and_records_it(
    tiny_bert_nodropout_dir: Path, teacher_dir: Path, tmp_path: Path
) -> None:
    path = recipe(tmp_path, tiny_bert_nodropout_dir, teacher_model=str(teacher_dir))
    assert main(["--config", str(path), "--teacher_weight", "0.5"]) == 0
    written = json.loads((tmp_path / "out" / "metrics.json").read_text())
    teacher = written["data"]["teacher"]
    assert teacher["model"] == str(teacher_dir) and teacher["teacher_weight"] == 0.5
    assert teacher["pairs"] == written["data"]["train_pairs"] == 16
    rows = [line.split("\t") for line in TRAIN.read_text(encoding="utf-8").splitlines()]
    cosine = cosines_of(
        SentenceEncoder.from_pretrained(teacher_dir).eval(),
        [r[5].strip() for r in rows],
        [r[6].strip() for r in rows],
    )
    agreement = 100 * spearmanr(cosine, [float(r[4]) for r in rows]).statistic
    assert abs(agreement) > 1
    assert teacher["teacher_spearman_with_labels"] == pytest.approx(agreement, abs=0.006)


def test_a_run_adds_the_teachers_neighbour_pairs(
    tiny_bert_nodropout_dir: Path, teacher_dir: Path, tmp_path: Path
) -> None:
    path = recipe(tmp_path, tiny_bert_nodropout_dir, teacher_model=str(teacher_dir))
    assert main(["--config", str(path), "--teacher_neighbours", "1"]) == 0
    teacher = json.loads((tmp_path / "out" / "metrics.json").read_text())["data"]["teacher"]
    assert teacher["pairs"] == 16 and teacher["neighbour_pairs"] > 0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"teacher_weight": "0"}, "teacher_weight must be in (0, 1]"),
        ({"teacher_weight": "0.5", "score_range": "null"}, "lie outside"),
        ({"teacher_model": "/no/such/teacher"}, "/no/such/teacher"),
        ({"teacher_neighbours": "-1"}, "teacher_neighbours must be 0 or more"),
        ({"teacher_model": "null", "teacher_neighbours": "2"}, "needs teacher_model"),
    ],
)
def test_bad_teacher_settings_stop_before_training(
    tiny_bert_nodropout_dir: Path,
    teacher_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    settings: dict[str, str],
    message: str,
) -> None:
    path = recipe(
        tmp_path, tiny_bert_nodropout_dir, **{"teacher_model": str(teacher_dir), **settings}
    )
    assert main(["--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "out").exists()
