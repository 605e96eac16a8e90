"""The metrics at their edges, each against a value written here: whole messages naming
the argument at fault, thresholds for scores too large for ``± 1`` and one ulp apart,
counts per distinct score, precision when nothing is predicted positive, ties in ranking,
P@1, and the warning for queries without a relevant candidate. Found by the mutation pass
(``tools/mutation.py``)."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

from sts_core.evaluation.metrics import (
    _as_1d_float,
    apply_threshold,
    best_accuracy_threshold,
    best_f1_threshold,
    group_by_query,
    pair_classification_metrics,
    pearson,
    ranking_metrics,
    spearman,
)


def whole_message(call) -> str:
    with pytest.raises(ValueError) as error:
        call()
    return str(error.value)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: spearman([[1, 2]], [1, 2]), "x must be 1-D, got shape (1, 2)"),
        (lambda: pearson([1, 2], [[1, 2]]), "y must be 1-D, got shape (1, 2)"),
        (lambda: spearman([1, 2], [1, 2, 3]), "length mismatch between x and y: 2 != 3"),
        (lambda: pearson([1, 1], [1, 2]), "x is constant: the correlation is undefined"),
        (lambda: pearson([1, 2], [3, 3]), "y is constant: the correlation is undefined"),
        (lambda: best_accuracy_threshold([[0.5]], [1]), "scores must be 1-D, got shape (1, 1)"),
        (
            lambda: best_accuracy_threshold([0.1, 0.2], [1]),
            "length mismatch between scores and labels: 2 != 1",
        ),
        (
            lambda: best_accuracy_threshold([0.1] * 7, [2, 3, 4, 5, 6, 7, 0]),
            "labels must be binary 0/1, found other values such as [2, 3, 4, 5, 6]",
        ),
        (lambda: best_accuracy_threshold([0.1], [[1]]), "labels must be 1-D, got shape (1, 1)"),
        (lambda: best_f1_threshold([0.1, 0.2], [0, 0]), "F1 is undefined without positive labels"),
        (
            lambda: pair_classification_metrics([0.1, 0.9], [0, 1], [0.1, 0.9], [0, 2]),
            "test_labels must be binary 0/1, found other values such as [2]",
        ),
        (
            lambda: pair_classification_metrics([0.1, 0.9], [0, 1], [0.1, 0.9], [0, 0]),
            "test_labels has no positive: recall and average precision undefined",
        ),
        (lambda: apply_threshold([[0.5]], 0.1), "scores must be 1-D, got shape (1, 1)"),
        (lambda: group_by_query(["q"], [[0.5]], [1]), "scores must be 1-D, got shape (1, 1)"),
        (
            lambda: group_by_query(["q"], [0.5], [2]),
            "labels must be binary 0/1, found other values such as [2]",
        ),
        (
            lambda: group_by_query(["q", "q"], [0.5, 0.4], [1]),
            "length mismatch between scores and labels: 2 != 1",
        ),
        (
            lambda: ranking_metrics([[0.5]], [[1]], ks=[True]),
            "ks must be a non-empty sequence of positive integers, got [True]",
        ),
    ],
)
def test_bad_inputs_are_refused_naming_the_argument(call, message: str) -> None:
    assert whole_message(call) == message


def test_numbers_become_float64_and_labels_int64() -> None:
    assert _as_1d_float([1, 2], "x").dtype == np.float64
    predicted = apply_threshold([0.2, 0.7], 0.5)
    assert predicted.tolist() == [0, 1] and predicted.dtype == np.int64
    _, labels = group_by_query(["q", "q"], [0.2, 0.7], [True, False])
    assert labels[0].dtype == np.int64


def test_thresholds_lie_outside_scores_too_large_for_plus_or_minus_one() -> None:
    big = [1e17, 3e17]
    low, accuracy = best_accuracy_threshold(big, [1, 1])
    assert low < 1e17 and accuracy == 1.0
    high, accuracy = best_accuracy_threshold(big, [0, 0])
    assert high > 3e17 and accuracy == 1.0
    assert apply_threshold(big, high).tolist() == [0, 0]
    three = [1e17, 2e17, 3e17]  # the last of several distinct scores, not the second
    high, accuracy = best_accuracy_threshold(three, [0, 0, 0])
    assert high > 3e17 and accuracy == 1.0
    one_value, accuracy = best_accuracy_threshold([5.0, 5.0], [1, 0])
    assert (one_value, accuracy) == (4.0, 0.5)


def test_a_midpoint_that_rounds_down_is_replaced_by_the_upper_score() -> None:
    """Four scores one ulp apart; the midpoint of the last two rounds onto the third
    (round half to even), so the split must use the fourth to keep the rule exact."""
    scores = [1.0]
    for _ in range(3):
        scores.append(float(np.nextafter(scores[-1], 2.0)))
    threshold, accuracy = best_accuracy_threshold(scores, [0, 0, 0, 1])
    assert accuracy == 1.0 and threshold == scores[3]


def test_counts_per_distinct_score_decide_the_best_split() -> None:
    threshold, accuracy = best_accuracy_threshold([0.1, 0.1, 0.1, 0.9], [0, 0, 0, 1])
    assert accuracy == 1.0 and threshold == pytest.approx(0.5)


def test_precision_is_0_without_a_predicted_positive_and_says_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = pair_classification_metrics([0.9, 0.1], [1, 0], [0.2, 0.3], [1, 0])
    assert metrics["precision"] == 0.0 and metrics["recall"] == 0.0


def test_ties_keep_the_input_order_and_p_at_1_reads_the_top(caplog) -> None:
    tied = np.random.default_rng(1).integers(0, 3, 40).astype(float).tolist()  # many ties
    tied[20] = 2.0
    relevant = [0] * 40
    relevant[20] = 1  # ranked after the other 2.0s before it, before those after it
    with caplog.at_level(logging.WARNING, logger="sts_core.evaluation.metrics"):
        result = ranking_metrics([tied, [0.9, 0.1], [0.3, 0.2]], [relevant, [1, 0], [0, 0]])
    rank = 1 + sum(score == 2.0 for score in tied[:20])
    assert result["mrr"] == pytest.approx((1 / rank + 1) / 2)
    assert result["p@1"] == 0.5
    assert (result["num_queries"], result["num_queries_without_positive"]) == (3, 1)
    assert caplog.messages == [
        "ranking_metrics: excluded 1 of 3 queries without a relevant candidate"
    ]
