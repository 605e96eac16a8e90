"""The STS report's outputs written out by hand for a two-task report (JSON, Markdown, the
terminal table and the saved files), the scorer's words, and the subset scores. Found by
the mutation pass (``tools/mutation.py``)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from sts_core.evaluation.metrics import pearson as pearson_of
from sts_core.evaluation.metrics import spearman as spearman_of
from sts_core.evaluation.sts import (
    STSReport,
    SubsetScore,
    TaskResult,
    describe_scorer,
    score_subsets,
)


def result(task: str, base: float) -> TaskResult:
    return TaskResult(
        task=task,
        protocol="mteb",
        variant="raw",
        size=10,
        spearman={"all": base},
        pearson={"all": base - 1},
        subsets=[SubsetScore("all", 10, base, base - 1)],
    )


def report(**more) -> STSReport:
    settings = {
        "protocol": "mteb",
        "variant": "raw",
        "model": "runs/m",
        "results": {"sts12": result("sts12", 70.0), "sickr": result("sickr", 80.5)},
        "seconds": 12.345,
    }
    return STSReport(**{**settings, **more})


def test_the_report_as_a_dict_with_and_without_the_optional_fields() -> None:
    plain = report().to_dict()
    assert plain == {
        "protocol": "mteb",
        "variant": "raw",
        "model": "runs/m",
        "seconds": 12.35,
        "scorer": "cosine",
        "average": {"spearman_all": 75.25, "pearson_all": 74.25},
        "tasks": {
            "sts12": {
                "task": "sts12",
                "protocol": "mteb",
                "variant": "raw",
                "size": 10,
                "spearman": {"all": 70.0},
                "pearson": {"all": 69.0},
                "subsets": [{"name": "all", "size": 10, "spearman": 70.0, "pearson": 69.0}],
            },
            "sickr": {
                "task": "sickr",
                "protocol": "mteb",
                "variant": "raw",
                "size": 10,
                "spearman": {"all": 80.5},
                "pearson": {"all": 79.5},
                "subsets": [{"name": "all", "size": 10, "spearman": 80.5, "pearson": 79.5}],
            },
        },
    }
    full = report(
        model_save_id="abc", unused_pair_scorer="regression", sentence_edit="pcc-tuning"
    ).to_dict()
    assert [k for k in full if k not in plain] == [
        "model_save_id",
        "unused_pair_scorer",
        "sentence_edit",
    ]
    assert (full["model_save_id"], full["unused_pair_scorer"], full["sentence_edit"]) == (
        "abc",
        "regression",
        "pcc-tuning",
    )
    assert list(full) == [
        "protocol",
        "variant",
        "model",
        "model_save_id",
        "seconds",
        "scorer",
        "unused_pair_scorer",
        "sentence_edit",
        "average",
        "tasks",
    ]


def test_the_report_as_markdown_and_as_text() -> None:
    edited = report(sentence_edit="pcc-tuning", unused_pair_scorer="regression")
    assert edited.to_markdown() == (
        "Model `runs/m`, protocol `mteb`, data variant `raw`, test sentences edited as "
        "`pcc-tuning` (correlation with gold × 100)\n"
        "\n"
        "Scored by: cosine similarity of the embeddings (the model's pair_scorer head "
        "'regression' is not used).\n"
        "\n"
        "|  | STS12 | SICK-R | Avg. |\n"
        "|---|---|---|---|\n"
        "| spearman all | 70.00 | 80.50 | 75.25 |\n"
        "| pearson all | 69.00 | 79.50 | 74.25 |\n"
    )
    assert edited.to_text() == (
        "runs/m — protocol mteb, data raw, sentences edited: pcc-tuning\n"
        "scored by: cosine similarity of the embeddings (the model's pair_scorer head "
        "'regression' is not used)\n"
        "              STS12  SICK-R   Avg.\n"
        "spearman all  70.00   80.50  75.25\n"
        " pearson all  69.00   79.50  74.25\n"
    )
    assert report().to_text().splitlines()[0] == "runs/m — protocol mteb, data raw"
    assert report().to_markdown().splitlines()[0] == (
        "Model `runs/m`, protocol `mteb`, data variant `raw` (correlation with gold × 100)"
    )


def test_the_scored_by_line_and_the_default_average() -> None:
    assert report().scored_by() == "cosine similarity of the embeddings"
    assert report().average() == report().average("all", "spearman") == 75.25


@pytest.mark.parametrize("name", ["out/report", "out/report.json", "out/report.md"])
def test_the_report_is_saved_as_json_and_markdown(tmp_path: Path, name: str) -> None:
    the_report = report()
    json_path, md_path = the_report.save(tmp_path / name)
    assert (json_path, md_path) == (tmp_path / "out/report.json", tmp_path / "out/report.md")
    assert json_path.read_text(encoding="utf-8") == json.dumps(the_report.to_dict(), indent=2)
    assert md_path.read_text(encoding="utf-8") == the_report.to_markdown()
    dotted = the_report.save(tmp_path / "out" / "run.v2")
    assert dotted[0] == tmp_path / "out" / "run.json"  # a suffix that is not ours is replaced
    nested = the_report.save(tmp_path / "a" / "b" / "report")
    assert [p.is_file() for p in nested] == [True, True]


def test_the_scorers_words() -> None:
    assert describe_scorer("cosine") == "cosine similarity of the embeddings"
    assert describe_scorer("head:regression") == "the head 'regression' (the model's pair_scorer)"
    assert describe_scorer("something else") == "something else"


def test_subset_scores_and_an_undefined_subset(caplog) -> None:
    gold = np.array([1.0, 2.0, 3.0, 4.0, 2.0, 2.0])
    predicted = np.array([0.1, 0.3, 0.2, 0.9, 0.5, 0.4])
    subsets = ["a", "a", "a", "a", "b", "b"]
    with caplog.at_level(logging.WARNING, logger="sts_core.evaluation.sts"):
        spearman, pearson, parts = score_subsets(gold, predicted, subsets)
    assert [(p.name, p.size) for p in parts] == [("a", 4), ("b", 2)]
    assert parts[0].spearman == pytest.approx(80.0)
    assert math.isnan(parts[1].spearman) and math.isnan(parts[1].pearson)
    with pytest.raises(ValueError) as why_spearman:
        spearman_of(predicted[4:], gold[4:])
    with pytest.raises(ValueError) as why_pearson:
        pearson_of(predicted[4:], gold[4:])
    assert caplog.messages == [
        f"subset b: correlation undefined ({why.value}); its mean/wmean are NaN"
        for why in (why_spearman, why_pearson)
    ]
    whole, _, parts = score_subsets(gold, predicted, None)
    assert [(p.name, p.size) for p in parts] == [("all", 6)]
    assert whole["mean"] == whole["wmean"] == whole["all"]


# ------------------------------------------------------------------------------ evaluator
class Encoder:
    """Vectors from a table; records how ``encode`` was called; names a pair_scorer."""

    pair_scorer = "regression"

    def __init__(self) -> None:
        self.calls = []

    def encode(self, sentences, batch_size, show_progress_bar):
        self.calls.append((len(sentences), batch_size, show_progress_bar))
        return np.asarray([[1.0, len(s)] for s in sentences])


def sts_pairs():
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "sentence1": ["a", "bb", "ccc", "dddd"],
            "sentence2": ["a", "b", "cc", "ddddddd"],
            "score": [5.0, 3.0, 4.0, 1.0],
        }
    )


def test_the_evaluator_encodes_each_distinct_sentence_once_and_scores_every_pair() -> None:
    """A sentence repeated across and within the two sides is encoded once, in first-seen
    order; every pair is scored as if each side were encoded whole; an encoder returning
    another number of embeddings is refused by task."""
    from datasets import Dataset

    from sts_core.evaluation.sts import STSEvaluator

    left, right = ["a", "bb", "a", "ccc", "dd e"], ["bb", "x y z", "a", "dd e", "ccc"]
    pairs = Dataset.from_dict({"sentence1": left, "sentence2": right, "score": [1, 2, 5, 3, 4]})
    seen: list[list[str]] = []

    def vectors(sentences: list[str]) -> np.ndarray:
        seen.append(list(sentences))
        return np.asarray([[len(s), s.count(" ") + 1.0, ord(s[0])] for s in sentences])

    evaluator = STSEvaluator(tasks=["mine"], datasets={"mine": pairs}, protocol="mteb")
    result = evaluator.evaluate(vectors).results["mine"]
    assert seen == [["a", "bb", "ccc", "dd e", "x y z"]]
    a, b = vectors(left), vectors(right)
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert result.spearman["all"] == pytest.approx(100 * spearmanr(cosine, [1, 2, 5, 3, 4])[0])
    with pytest.raises(ValueError, match="mine: the encoder returned 4 embeddings for 5"):
        evaluator.evaluate(lambda sentences: vectors(sentences)[:-1])


def test_the_evaluator_encodes_with_its_settings_and_names_the_unused_head() -> None:
    from sts_core.evaluation.sts import STSEvaluator

    evaluator = STSEvaluator(tasks=["mine"], datasets={"mine": sts_pairs()}, protocol="mteb")
    assert (evaluator.batch_size, evaluator.show_progress_bar) == (64, True)
    encoder = Encoder()
    the_report = evaluator.evaluate(encoder)
    assert encoder.calls == [(7, 64, True)]  # 'a' twice: each distinct sentence once
    assert (the_report.model, the_report.variant, the_report.unused_pair_scorer) == (
        "model",
        "raw",
        "regression",
    )
    assert the_report.results["mine"].task == "mine" and 0 <= the_report.seconds < 60
    quiet = STSEvaluator(
        tasks=["mine"], datasets={"mine": sts_pairs()}, batch_size=3, show_progress_bar=False
    )
    quiet.evaluate(encoder, "named")
    assert encoder.calls[-1] == (7, 3, False)
    lengths = lambda s: np.asarray([[1.0, len(x)] for x in s])  # noqa: E731
    assert quiet.evaluate(lengths).unused_pair_scorer is None
    with pytest.raises(TypeError) as error:
        quiet.evaluate(object())
    assert str(error.value) == "evaluate() needs an object with encode(sentences) or a callable"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"protocol": "nope"}, "unknown protocol 'nope'; choose one of senteval, mteb"),
        (
            {"tasks": ["sts99"]},
            "unknown STS task(s) ['sts99']; choose from sts12, sts13, sts14, sts15, sts16, "
            "stsb, sickr",
        ),
        (
            {"tasks": []},
            "no task given; choose from sts12, sts13, sts14, sts15, sts16, stsb, sickr",
        ),
        (
            {"tasks": ["sts12"], "datasets": {"mine": None}},
            "no dataset given for task(s) ['sts12']",
        ),
    ],
)
def test_the_evaluators_settings_are_checked_with_whole_messages(settings, message) -> None:
    from sts_core.evaluation.sts import STSEvaluator

    with pytest.raises(ValueError) as error:
        STSEvaluator(**settings)
    assert str(error.value) == message


@pytest.mark.parametrize("edit", [None, "", "none"])
def test_no_sentence_edit_is_recorded_as_none(edit) -> None:
    from sts_core.evaluation.sts import STSEvaluator

    evaluator = STSEvaluator(tasks=["mine"], datasets={"mine": sts_pairs()}, sentence_edit=edit)
    assert evaluator.sentence_edit is None


def test_only_a_named_pair_scorer_counts() -> None:
    from types import SimpleNamespace

    from sts_core.evaluation.sts import pair_scorer_of

    assert pair_scorer_of(SimpleNamespace(pair_scorer="regression")) == "regression"
    assert pair_scorer_of(SimpleNamespace(pair_scorer=5)) is None
    assert pair_scorer_of(object()) is None
