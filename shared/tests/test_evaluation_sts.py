"""The STS evaluator against scipy, on in-memory data, fixture files and the real benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset
from scipy.stats import pearsonr, spearmanr

from sts_core.evaluation import PairEvaluator
from sts_core.evaluation.sts import (
    STSEvaluator,
    cosine_scores,
    score_subsets,
)
from sts_core.testing import write_stsb_file

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


RAW = FIXTURES / "raw"
SICK_FILES = ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")


def raw_sick_pairs(*names: str) -> list[tuple[str, str, float]]:
    """(sentence A, sentence B, relatedness) of the raw SICK files, read here."""
    rows = []
    for name in names:
        lines = (RAW / "SICK" / name).read_text(encoding="utf-8").splitlines()[1:]
        rows += [(f[1], f[2], float(f[3])) for f in (line.split("\t") for line in lines)]
    return rows


def raw_stsb_pairs(split: str) -> list[tuple[str, str, float]]:
    lines = (RAW / "stsbenchmark" / f"sts-{split}.csv").read_text(encoding="utf-8").splitlines()
    return [(f[5], f[6], float(f[4])) for f in (line.split("\t") for line in lines)]


def raw_sts_year_pairs(folder: str) -> list[tuple[str, str, float]]:
    """Every subset of an official STS12-16 test folder pooled; unscored pairs dropped."""
    rows = []
    for gold_path in sorted((RAW / "sts12-16" / folder).glob("STS.gs.*.txt")):
        inputs = gold_path.with_name(gold_path.name.replace(".gs.", ".input."))
        if not inputs.is_file():
            continue
        gold = gold_path.read_text(encoding="utf-8").splitlines()
        pairs = inputs.read_text(encoding="utf-8").splitlines()
        rows += [
            (*pair.split("\t")[:2], float(score))
            for pair, score in zip(pairs, gold, strict=True)
            if score.strip()
        ]
    return rows


def scipy_correlations(rows: list[tuple[str, str, float]]) -> tuple[float, float]:
    """(Spearman, Pearson) × 100 of the toy embedding's cosines, with scipy; cosines rounded
    to 12 digits so pairs with the same two sentences swapped tie as they do exactly in the
    evaluator."""
    left = hashed_bag_of_words([r[0] for r in rows])
    right = hashed_bag_of_words([r[1] for r in rows])
    cosines = [
        a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) for a, b in zip(left, right, strict=True)
    ]
    predicted, gold = np.round(cosines, 12), [r[2] for r in rows]
    return 100 * spearmanr(predicted, gold)[0], 100 * pearsonr(predicted, gold)[0]


def test_mteb_protocol_reports_one_number_per_task_and_whole_sick(monkeypatch):
    monkeypatch.setenv("STS_DATA_DIR", str(FIXTURES))
    senteval = STSEvaluator(tasks=["sickr"], protocol="senteval")
    tasks = ["sts13", "sts15", "stsb", "sickr"]
    mteb = STSEvaluator(tasks=tasks, protocol="mteb")
    assert mteb.variant == "raw" and senteval.variant == "senteval"
    # MTEB's SICK-R is train + trial + test; STS12-16 all subsets of a year in one set
    expected_rows = {
        "sts13": raw_sts_year_pairs("STS2013-en-test-gs"),
        "sts15": raw_sts_year_pairs("STS2015-en-test-gs"),
        "stsb": raw_stsb_pairs("test"),
        "sickr": raw_sick_pairs(*SICK_FILES),
    }
    assert len(mteb.data["sickr"]) == len(expected_rows["sickr"]) > len(senteval.data["sickr"])
    report = mteb.evaluate(hashed_bag_of_words)
    saved = report.to_dict()
    assert list(report.results) == tasks
    assert set(saved["average"]) == {"spearman_all", "pearson_all"}
    expected = {task: scipy_correlations(rows) for task, rows in expected_rows.items()}
    for task, (spearman_, pearson_) in expected.items():
        result = report.results[task]
        assert result.protocol == "mteb" and result.variant == "raw"
        assert result.size == len(expected_rows[task]), task
        assert result.spearman["all"] == pytest.approx(spearman_, abs=1e-9), task
        assert result.pearson["all"] == pytest.approx(pearson_, abs=1e-9), task
        assert saved["tasks"][task]["spearman"]["all"] == pytest.approx(spearman_, abs=1e-9)
    # the whole of SICK gives another number than its test split alone would
    test_only, _ = scipy_correlations(raw_sick_pairs("SICK_test_annotated.txt"))
    assert abs(expected["sickr"][0] - test_only) > 1
    # the average is the plain mean over tasks
    means = {m: np.mean([e[i] for e in expected.values()]) for i, m in enumerate(["s", "p"])}
    assert saved["average"]["spearman_all"] == pytest.approx(means["s"], abs=1e-9)
    assert saved["average"]["pearson_all"] == pytest.approx(means["p"], abs=1e-9)


def test_pair_similarity_evaluator_contract():
    dev = toy_pairs(30, 3)
    evaluator = PairEvaluator(dev, name="stsb_dev")
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

    path = write_stsb_file(tmp_path / STSB_TEST, scores)
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
        PairEvaluator(dev, name="my_dev", source="dev.tsv")
    assert str(info.value).startswith("my_dev (dev.tsv): ")
    assert problem in str(info.value)
    with pytest.raises(DataError, match="^my_dev: "):
        PairEvaluator(dev, name="my_dev")


# --------------------------------------------------------------------------- where pairs come from
def raw_only_data_dir(tmp_path: Path) -> Path:
    """A data folder with the raw layout only (SICK, STS-B): a reader that falls back to
    the senteval layout, or to $STS_DATA_DIR, finds nothing there."""
    import shutil

    root = tmp_path / "data"
    shutil.copytree(RAW / "SICK", root / "raw" / "SICK")
    shutil.copytree(RAW / "stsbenchmark", root / "raw" / "stsbenchmark")
    return root


def test_task_pairs_and_sources_follow_the_folder_protocol_and_variant(tmp_path, monkeypatch):
    from sts_core.evaluation.sts import load_task_pairs, task_source

    root = raw_only_data_dir(tmp_path)
    monkeypatch.setenv("STS_DATA_DIR", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    whole_sick = load_task_pairs("sickr", "mteb", "raw", root)
    rows = raw_sick_pairs(*SICK_FILES)
    assert list(zip(whole_sick["sentence1"], whole_sick["sentence2"], strict=True)) == [
        r[:2] for r in rows
    ]
    stsb = load_task_pairs("stsb", "senteval", "raw", root)
    assert list(stsb["score"]) == pytest.approx([r[2] for r in raw_stsb_pairs("test")])
    sick = root / "raw" / "SICK"
    assert task_source("sickr", "mteb", "raw", root) == " + ".join(
        str(sick / name) for name in SICK_FILES
    )
    assert task_source("sickr", "senteval", "raw", root) == str(sick / "SICK_test_annotated.txt")
    assert task_source("stsb", "mteb", "raw", root) == str(
        root / "raw" / "stsbenchmark" / "sts-test.csv"
    )
    assert task_source("sickr", "mteb", "no-such-variant", root) is None


def test_the_evaluator_checks_each_task_against_its_source(tmp_path, monkeypatch):
    import sts_core.evaluation.sts as sts

    root = raw_only_data_dir(tmp_path)
    checked = {}
    monkeypatch.setattr(
        sts, "check_scored_pairs", lambda data, task, source: checked.update({task: source})
    )
    sts.STSEvaluator(data_dir=root, tasks=["sickr"], protocol="mteb")
    assert checked == {"sickr": sts.task_source("sickr", "mteb", "raw", root)}
    assert " + " in checked["sickr"]


def test_the_pair_similarity_evaluators_defaults():
    evaluator = PairEvaluator(toy_pairs(6, 1))
    assert (evaluator.name, evaluator.batch_size) == ("stsb_dev", 64)
    assert PairEvaluator(toy_pairs(6, 1), batch_size=5).batch_size == 5


def test_spread_sample_keeps_every_kth_row_from_the_first() -> None:
    """At most ``limit`` rows, k = ceil(n / limit): n 10 → limit 4: k 3 (0 3 6 9); limit 3:
    k 4 (0 4 8); limit 9: k 2; a limit not below n, None or 0: the table itself."""
    from datasets import Dataset

    from sts_core.evaluation.sts import spread_sample

    table = Dataset.from_dict({"i": list(range(10))})
    assert spread_sample(table, 4)["i"] == [0, 3, 6, 9]
    assert spread_sample(table, 3)["i"] == [0, 4, 8]
    assert spread_sample(table, 9)["i"] == [0, 2, 4, 6, 8]
    assert spread_sample(table, 1)["i"] == [0]
    for limit in (10, 11, None, 0):
        assert spread_sample(table, limit) is table
