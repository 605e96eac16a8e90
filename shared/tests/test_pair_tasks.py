"""Pair classification (thresholds from a dev set) and ranking evaluators, against the
metric functions on hand-made cosines; the trainer's final evaluation picks them by
``final_eval_task`` and checks the sets before training."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from datasets import Dataset

from sts_core.data.errors import DataContentError
from sts_core.evaluation.metrics import (
    group_by_query,
    pair_classification_metrics,
    ranking_metrics,
)
from sts_core.evaluation.pair_tasks import PairClassificationEvaluator, RankingEvaluator
from sts_core.training import BaseConfig
from sts_core.training.data import final_evaluators
from sts_core.training.method_registry import CORE_METHOD

RNG = np.random.default_rng(0)
WORDS = [f"s{i}" for i in range(40)]
VECTORS = {word: RNG.normal(size=6) for word in WORDS}


def fake_model(sentences: list[str]) -> np.ndarray:
    """A 'model': each sentence is a fixed random vector (a callable is a bi-encoder)."""
    return np.stack([VECTORS[s] for s in sentences])


def cosines(first: list[str], second: list[str]) -> np.ndarray:
    a, b = fake_model(first), fake_model(second)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def pairs(start: int, n: int, labels: list[int], **extra) -> Dataset:
    first = [WORDS[(start + i) % 40] for i in range(n)]
    second = [WORDS[(start + 7 * i + 3) % 40] for i in range(n)]
    return Dataset.from_dict({"sentence1": first, "sentence2": second, "label": labels, **extra})


def test_classification_chooses_thresholds_on_the_dev_pairs() -> None:
    dev = pairs(0, 12, [1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1])
    test = pairs(5, 10, [0, 1, 1, 0, 1, 0, 0, 1, 0, 1])
    got = PairClassificationEvaluator(test, dev, name="mrpc_test")(fake_model)
    expected = pair_classification_metrics(
        cosines(dev["sentence1"], dev["sentence2"]),
        dev["label"],
        cosines(test["sentence1"], test["sentence2"]),
        test["label"],
    )
    assert got["mrpc_test_f1"] == pytest.approx(100 * expected["f1"])
    assert got["mrpc_test_accuracy"] == pytest.approx(100 * expected["accuracy"])
    assert got["mrpc_test_f1_threshold"] == pytest.approx(expected["f1_threshold"])
    assert set(got) == {f"mrpc_test_{k}" for k in expected}


def test_classification_without_dev_pairs_says_its_thresholds_are_oracle() -> None:
    test = pairs(5, 10, [0, 1, 1, 0, 1, 0, 0, 1, 0, 1])
    evaluator = PairClassificationEvaluator(test, name="quora_test")
    assert evaluator.primary_metric == "quora_test_oracle_f1"
    assert "quora_test_oracle_accuracy" in evaluator(fake_model)


def test_ranking_groups_candidates_by_query() -> None:
    data = pairs(0, 9, [0, 1, 0, 0, 0, 1, 1, 0, 0], query_id=[0, 0, 0, 1, 1, 1, 2, 2, 3])
    got = RankingEvaluator(data, name="wikiqa_test", ks=(1, 3))(fake_model)
    scores = cosines(data["sentence1"], data["sentence2"])
    expected = ranking_metrics(*group_by_query(data["query_id"], scores, data["label"]), ks=(1, 3))
    assert got["wikiqa_test_mrr"] == pytest.approx(100 * expected["mrr"])
    assert got["wikiqa_test_map"] == pytest.approx(100 * expected["map"])
    assert got["wikiqa_test_has_positive@3"] == pytest.approx(100 * expected["has_positive@3"])
    assert got["wikiqa_test_queries_without_positive"] == 1  # query 3
    assert got["wikiqa_test_queries"] == 4


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: PairClassificationEvaluator(pairs(0, 3, [0, 2, 1]), name="x"), "0/1 labels"),
        (lambda: PairClassificationEvaluator(pairs(0, 3, [0, 0, 0]), name="x"), "no positive"),
        (lambda: RankingEvaluator(pairs(0, 3, [0, 1, 1]), name="x"), "query_id"),
    ],
)
def test_unusable_sets_are_refused_naming_the_set(make, message) -> None:
    with pytest.raises(DataContentError, match=message):
        make()


def write_wikiqa(folder: Path) -> Path:
    path = folder / "wikiqa" / "test.txt"
    path.parent.mkdir(parents=True)
    rows = ["where is paris ?\tParis is in France .\t1", "where is paris ?\tIt is big .\t0"]
    rows += ["who wrote it ?\tA man wrote it .\t0", "who wrote it ?\tShe wrote it .\t1"]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def data_args(**fields) -> SimpleNamespace:
    base = {
        "data_dir": None,
        "data_variant": "senteval",
        "train_format": None,
        "columns": None,
        "eval_columns": None,
        "label_mapping": None,
        "score_range": None,
        "sick_to_sts_scale": False,
        "threshold_dataset": None,
        "final_eval_task": "sts",
        "final_eval_datasets": [],
    }
    return SimpleNamespace(**{**base, **fields})


def test_final_evaluators_follow_final_eval_task(tmp_path: Path) -> None:
    wikiqa = str(write_wikiqa(tmp_path))
    config = BaseConfig(output_dir=str(tmp_path / "out"))
    ranking = final_evaluators(
        CORE_METHOD, data_args(final_eval_task="ranking", final_eval_datasets=[wikiqa]), config
    )
    assert isinstance(ranking[wikiqa], RankingEvaluator)
    classification = final_evaluators(
        CORE_METHOD,
        data_args(
            final_eval_task="classification",
            final_eval_datasets=[wikiqa],
            threshold_dataset=wikiqa,
        ),
        config,
    )
    assert classification[wikiqa].primary_metric.endswith("_f1")
    assert not classification[wikiqa].primary_metric.endswith("_oracle_f1")


def test_final_pair_sets_are_named_by_their_stem_or_registry_name(tmp_path: Path) -> None:
    """Metric keys of the final pair sets start with a readable name: a file's stem, not
    its mangled path (``_tmp_…_pairs_test.jsonl_test``); a second file of the same stem
    gets ``_2``; a registry set keeps its name and split; a hub id its last part."""
    from sts_core.training.data import pair_set_labels

    files = []
    for i, folder in enumerate(("a", "b")):
        path = tmp_path / folder / "pairs_test.csv"
        path.parent.mkdir()
        rows = [f"s{i + k},s{i + 2 * k + 1},{k % 5}" for k in range(6)]
        path.write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n", "utf-8")
        files.append(str(path))
    config = BaseConfig(output_dir=str(tmp_path / "out"))
    evaluators = final_evaluators(CORE_METHOD, data_args(final_eval_datasets=files), config)
    assert [evaluators[f].name for f in files] == ["pairs_test", "pairs_test_2"]
    scores = evaluators[files[1]](fake_model)
    assert set(scores) == {"pairs_test_2_spearman", "pairs_test_2_pearson"}
    assert pair_set_labels(["stsb:test", "stsb-zh:test", "owner/my-set:dev", "x y.jsonl"]) == {
        "stsb:test": "stsb_test",
        "stsb-zh:test": "stsb_zh_test",
        "owner/my-set:dev": "my_set_dev",
        "x y.jsonl": "x_y",
    }


def test_final_eval_task_is_checked_with_the_data_options() -> None:
    from sts_core.training.config import DataArguments

    with pytest.raises(ValueError, match="final_eval_task 'retrieval' is not one of"):
        DataArguments(train_datasets=["stsb"], final_eval_task="retrieval")
    with pytest.raises(ValueError, match="threshold_dataset is used only with"):
        DataArguments(train_datasets=["stsb"], threshold_dataset="quora:dev")
