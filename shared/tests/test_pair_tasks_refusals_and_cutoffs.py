"""Pair classification and ranking evaluators at their edges, each against a value written
here: the whole message of each refused set (naming the set and its file), the default
names and batch size handed to the scorer, 2-D scores, the cut-offs, a set of one pair, and
the representations. Found by the mutation pass (``tools/mutation.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from datasets import Dataset

from sts_core.data.errors import DataContentError
from sts_core.evaluation.pair_tasks import PairClassificationEvaluator, RankingEvaluator


class Scorer:
    """Scores pair i as scores[i] (a column, as some heads return), recording the batch size."""

    def __init__(self, scores) -> None:
        self.scores, self.batch_sizes = scores, []

    def __call__(self, model, first, second, batch_size):
        self.batch_sizes.append(batch_size)
        return np.asarray(self.scores[: len(first)], dtype=np.float32).reshape(-1, 1)


def pairs(labels, column: str = "label", **more) -> Dataset:
    n = len(labels)
    return Dataset.from_dict(
        {
            "sentence1": [f"q{i}" for i in range(n)],
            "sentence2": [f"a{i}" for i in range(n)],
            column: labels,
            **more,
        }
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            Dataset.from_dict({"sentence1": ["a"], "label": [1]}),
            "pairs (p.tsv): needs sentence1, sentence2 and label; found ['sentence1', 'label']",
        ),
        (
            Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"]}),
            "pairs (p.tsv): needs sentence1, sentence2 and label; found ['sentence1', 'sentence2']",
        ),
        (
            pairs([0, 2, 0.5, 3, 4, 5, 6]),
            "pairs (p.tsv): label must be 0/1 labels, found [0.5, 2.0, 3.0, 4.0, 5.0]",
        ),
        (pairs([]), "pairs (p.tsv): label must be 0/1 labels, found []"),
        (pairs([0, 0]), "pairs (p.tsv): no positive pair among 2"),
        (pairs([0, 2], column="score"), "pairs (p.tsv): score must be 0/1 labels, found [2.0]"),
    ],
)
def test_a_set_that_cannot_be_scored_is_refused_naming_it(data, message) -> None:
    with pytest.raises(DataContentError) as error:
        PairClassificationEvaluator(data, source="p.tsv")
    assert str(error.value) == message


def test_a_ranking_set_that_cannot_be_scored_is_refused_naming_it() -> None:
    with pytest.raises(DataContentError) as error:
        RankingEvaluator(pairs([0, 0], query_id=["q", "q"]), name="wikiqa", source="w.tsv")
    assert str(error.value) == "wikiqa (w.tsv): no positive pair among 2"


def test_threshold_pairs_are_named_as_such() -> None:
    with pytest.raises(DataContentError) as error:
        PairClassificationEvaluator(pairs([1, 0]), threshold_pairs=pairs([0, 0]))
    assert str(error.value) == "pairs thresholds: no positive pair among 2"


def test_the_classifier_scores_with_its_batch_size_and_names_its_keys() -> None:
    scorer = Scorer([0.9, 0.2, 0.8, 0.1])
    evaluator = PairClassificationEvaluator(pairs([1, 0, 1, 0]), scorer=scorer)
    assert repr(evaluator) == "PairClassificationEvaluator(name='pairs_oracle', pairs=4)"
    metrics = evaluator(None)
    assert scorer.batch_sizes == [64]
    assert metrics["pairs_oracle_f1"] == 100.0 and metrics["pairs_oracle_accuracy"] == 100.0
    with_dev = PairClassificationEvaluator(
        pairs([1, 0, 1, 0]), threshold_pairs=pairs([1, 0]), scorer=scorer, batch_size=3
    )
    with_dev(None)
    assert scorer.batch_sizes[1:] == [3, 3] and with_dev.primary_metric == "pairs_f1"
    single = PairClassificationEvaluator(pairs([1]), scorer=Scorer([0.5]))
    assert single.labels.tolist() == [1] and single.labels.dtype == np.int64


def test_the_ranking_evaluator_passes_its_cut_offs_and_batch_size() -> None:
    data = pairs([1, 0, 0, 1], query_id=["a", "a", "b", "b"])
    scorer = Scorer([0.9, 0.1, 0.8, 0.3])
    evaluator = RankingEvaluator(data, ks=(2,), scorer=scorer, batch_size=5)
    assert repr(evaluator) == "RankingEvaluator(name='ranking', queries=2)"
    metrics = evaluator(None)
    assert scorer.batch_sizes == [5]
    assert metrics["ranking_mrr"] == 75.0 and "ranking_ndcg@2" in metrics
    assert "ranking_ndcg@10" not in metrics and metrics["ranking_queries"] == 2.0
    default = RankingEvaluator(data, scorer=scorer)
    default(None)
    assert scorer.batch_sizes[-1] == 64 and default.primary_metric == "ranking_map"


def test_a_ranking_set_needs_query_ids() -> None:
    with pytest.raises(DataContentError) as error:
        RankingEvaluator(pairs([1, 0]), source="w.tsv")
    assert str(error.value) == "ranking (w.tsv): a ranking set needs a query_id column"
