"""The STS evaluator against scipy, on in-memory data, fixture files and the real benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset
from scipy.stats import pearsonr, spearmanr

from sts_core.evaluation.sts import (
    PairSimilarityEvaluator,
    STSEvaluator,
    cosine_scores,
    score_subsets,
)

FIXTURES = Path(__file__).parent / "fixtures" / "data"


def hashed_bag_of_words(sentences: list[str], dim: int = 64) -> np.ndarray:
    """A deterministic toy embedding: the sum of a fixed random vector per word.

    Continuous values, so no two pairs tie in cosine (ties would make the ranks depend on
    floating-point noise).
    """
    vectors = np.zeros((len(sentences), dim))
    for row, sentence in enumerate(sentences):
        for word in sentence.lower().split():
            seed = sum(ord(c) * 31**i for i, c in enumerate(word)) % 2**32
            vectors[row] += np.random.default_rng(seed).normal(size=dim)
    return vectors


def toy_pairs(n: int, seed: int, subsets: list[str] | None = None) -> Dataset:
    rng = np.random.default_rng(seed)
    words = "a man dog cat plays runs eats guitar food ball park red big small the".split()
    left = [" ".join(rng.choice(words, size=5)) for _ in range(n)]
    right = [" ".join(rng.choice(words, size=5)) for _ in range(n)]
    columns = {"sentence1": left, "sentence2": right, "score": rng.uniform(0, 5, n).tolist()}
    if subsets is not None:
        columns["subset"] = [subsets[i % len(subsets)] for i in range(n)]
    return Dataset.from_dict(columns)


def scipy_cosine_scores(data: Dataset) -> np.ndarray:
    left = hashed_bag_of_words(list(data["sentence1"]))
    right = hashed_bag_of_words(list(data["sentence2"]))
    pairs = zip(left, right, strict=True)
    return np.array([a @ b / np.linalg.norm(a) / np.linalg.norm(b) for a, b in pairs])


def test_cosine_scores_match_a_loop():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    expected = [x @ y / np.linalg.norm(x) / np.linalg.norm(y) for x, y in zip(a, b, strict=False)]
    np.testing.assert_allclose(cosine_scores(a, b), expected, rtol=1e-12)


def test_all_mean_wmean_equal_scipy():
    rng = np.random.default_rng(1)
    gold, predicted = rng.uniform(0, 5, 30), rng.normal(size=30)
    subsets = ["a"] * 5 + ["b"] * 10 + ["c"] * 15
    spearman_, pearson_, parts = score_subsets(gold, predicted, subsets)
    assert spearman_["all"] == pytest.approx(100 * spearmanr(predicted, gold)[0], abs=1e-10)
    assert pearson_["all"] == pytest.approx(100 * pearsonr(predicted, gold)[0], abs=1e-10)
    by_subset = {
        name: 100 * spearmanr(predicted[s : s + n], gold[s : s + n])[0]
        for name, s, n in (("a", 0, 5), ("b", 5, 10), ("c", 15, 15))
    }
    assert [p.name for p in parts] == ["a", "b", "c"]
    assert spearman_["mean"] == pytest.approx(np.mean(list(by_subset.values())), abs=1e-10)
    weighted = (5 * by_subset["a"] + 10 * by_subset["b"] + 15 * by_subset["c"]) / 30
    assert spearman_["wmean"] == pytest.approx(weighted, abs=1e-10)


def test_undefined_subset_correlation_is_nan_not_a_crash():
    gold = np.array([1.0, 2.0, 3.0, 4.0, 2.0])
    predicted = np.array([0.1, 0.3, 0.2, 0.9, 0.5])
    spearman_, _, parts = score_subsets(gold, predicted, ["x", "x", "x", "x", "lonely"])
    assert np.isnan(parts[1].spearman)
    assert np.isnan(spearman_["mean"])
    assert spearman_["all"] == pytest.approx(100 * spearmanr(predicted, gold)[0])


def test_evaluator_senteval_protocol_on_memory_data(tmp_path):
    data = {
        "sts12": toy_pairs(40, 0, subsets=["MSRpar", "MSRvid"]),
        "stsb": toy_pairs(25, 1),
    }
    evaluator = STSEvaluator(tasks=["sts12", "stsb"], datasets=data)
    report = evaluator.evaluate(hashed_bag_of_words, model_name="toy")
    for task, dataset in data.items():
        expected = 100 * spearmanr(scipy_cosine_scores(dataset), dataset["score"])[0]
        assert report.results[task].spearman["all"] == pytest.approx(expected, abs=1e-9)
        assert report.results[task].protocol == "senteval"
        assert report.results[task].variant == "senteval"
    assert len(report.results["sts12"].subsets) == 2
    expected_avg = np.mean([report.results[t].spearman["all"] for t in data])
    assert report.average("all") == pytest.approx(expected_avg)
    json_path, md_path = report.save(tmp_path / "out.json")
    saved = json.loads(json_path.read_text())
    assert saved["protocol"] == "senteval"
    assert saved["average"]["spearman_all"] == pytest.approx(expected_avg)
    markdown = md_path.read_text()
    assert "| spearman wmean |" in markdown and "STS-B" in markdown
    assert "Avg." in report.to_text()


def test_mteb_protocol_reports_one_number_per_task_and_whole_sick(monkeypatch):
    monkeypatch.setenv("STS_DATA_DIR", str(FIXTURES))
    senteval = STSEvaluator(tasks=["sickr"], protocol="senteval")
    mteb = STSEvaluator(tasks=["sickr"], protocol="mteb")
    sick_rows = sum(
        len((FIXTURES / "raw/SICK" / f).read_text().splitlines()) - 1
        for f in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")
    )
    assert len(mteb.data["sickr"]) == sick_rows > len(senteval.data["sickr"])
    assert mteb.variant == "raw" and senteval.variant == "senteval"
    report = mteb.evaluate(hashed_bag_of_words)
    assert set(report.to_dict()["average"]) == {"spearman_all", "pearson_all"}


def test_pair_similarity_evaluator_contract():
    dev = toy_pairs(30, 3)
    evaluator = PairSimilarityEvaluator(dev, name="stsb_dev")
    scores = evaluator(hashed_bag_of_words)
    assert evaluator.primary_metric == "stsb_dev_spearman"
    assert evaluator.greater_is_better is True
    expected = 100 * spearmanr(scipy_cosine_scores(dev), dev["score"])[0]
    assert scores["stsb_dev_spearman"] == pytest.approx(expected, abs=1e-9)
    assert set(scores) == {"stsb_dev_spearman", "stsb_dev_pearson"}


def test_unknown_task_and_protocol_are_errors():
    with pytest.raises(ValueError, match="unknown STS task"):
        STSEvaluator(tasks=["sts99"], datasets={})
    with pytest.raises(ValueError, match="unknown protocol"):
        STSEvaluator(protocol="glue", datasets={})


# --------------------------------------------------------------------------- unusable task data

STSB_TEST = "senteval/STS/STSBenchmark/sts-test.csv"
SICK_TEST = "senteval/SICK/SICK_test_annotated.txt"
SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"


def write_stsb(root: Path, scores: list[float]) -> Path:
    """A SentEval-layout STS-B test file with one pair per score."""
    path = root / STSB_TEST
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        f"main-news\theadlines\t2016\t{i:04d}\t{score:.3f}\ta man plays {i} .\ta dog runs {i} ."
        for i, score in enumerate(scores)
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "scores,problem",
    [
        ([3.0, 3.0, 3.0], "all 3 gold scores are equal (3)"),
        ([2.5], "1 scored pair(s); a correlation needs at least 2"),
    ],
    ids=["all-equal gold", "one row"],
)
def test_unusable_task_data_is_an_error_when_loaded(tmp_path, scores, problem):
    from sts_core.data import DataError

    path = write_stsb(tmp_path, scores)
    with pytest.raises(DataError) as info:
        STSEvaluator(data_dir=tmp_path, tasks=["stsb"])
    message = str(info.value)
    assert message.startswith(f"stsb ({path}): ")
    assert problem in message


def test_header_only_sick_file_is_an_error_naming_task_and_file(tmp_path):
    from sts_core.data import DataError

    path = tmp_path / SICK_TEST
    path.parent.mkdir(parents=True)
    path.write_text(SICK_HEADER, encoding="utf-8")
    with pytest.raises(DataError, match=r"0 scored pair\(s\)") as info:
        STSEvaluator(data_dir=tmp_path, tasks=["sickr"])
    assert str(info.value).startswith(f"sickr ({path}): ")


def test_unusable_in_memory_task_is_an_error_naming_the_task():
    from sts_core.data import DataContentError

    constant = Dataset.from_dict(
        {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [1, 1]}
    )
    with pytest.raises(DataContentError, match=r"^stsb: all 2 gold scores are equal"):
        STSEvaluator(tasks=["sts12", "stsb"], datasets={"sts12": toy_pairs(5, 0), "stsb": constant})
    with pytest.raises(ValueError, match="no task given"):
        STSEvaluator(tasks=[], datasets={})


@pytest.mark.parametrize(
    "scores,problem",
    [([2.0, 2.0, 2.0], "all 3 gold scores are equal"), ([4.0], "1 scored pair(s)")],
    ids=["constant", "one row"],
)
def test_pair_similarity_evaluator_rejects_unusable_dev_set(scores, problem):
    from sts_core.data import DataError

    n = len(scores)
    dev = Dataset.from_dict({"sentence1": ["a b"] * n, "sentence2": ["c d"] * n, "score": scores})
    with pytest.raises(DataError) as info:
        PairSimilarityEvaluator(dev, name="my_dev", source="dev.tsv")
    assert str(info.value).startswith("my_dev (dev.tsv): ")
    assert problem in str(info.value)
    with pytest.raises(DataError, match="^my_dev: "):
        PairSimilarityEvaluator(dev, name="my_dev")
