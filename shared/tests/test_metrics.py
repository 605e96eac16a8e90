"""Tests for sts_core.evaluation.metrics against hand-computed examples."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import average_precision_score, ndcg_score

from sts_core.evaluation.metrics import (
    apply_threshold,
    best_accuracy_threshold,
    best_f1_threshold,
    group_by_query,
    pair_classification_metrics,
    pearson,
    ranking_metrics,
    spearman,
)

LOG2_3 = math.log2(3)

# --------------------------------------------------------------------------- correlations


def test_spearman_hand_example() -> None:
    # ranks x = 1 2 3 4, ranks y = 1 3 2 4 -> d = 0 1 1 0, sum d^2 = 2
    # rho = 1 - 6 * 2 / (4 * (16 - 1)) = 1 - 12 / 60 = 0.8
    assert spearman([1, 2, 3, 4], [10, 30, 20, 40]) == pytest.approx(0.8)


def test_pearson_hand_example() -> None:
    # x - mean = -1 0 1 ; y = 2 4 7, mean 13/3, y - mean = -7/3 -1/3 8/3
    # cov sum = 7/3 + 0 + 8/3 = 5 ; sum dx^2 = 2 ; sum dy^2 = (49 + 1 + 64) / 9 = 114/9
    # r = 5 / sqrt(2 * 114 / 9) = 15 / sqrt(228) = 0.993399...
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(15 / math.sqrt(228))
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(0.9933993)


def test_correlations_match_scipy_on_random_arrays() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=50)
    y = x + rng.normal(size=50)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)


def test_correlations_return_plain_floats() -> None:
    assert type(spearman([1, 2, 3], [1, 3, 2])) is float
    assert type(pearson([1, 2, 3], [1, 3, 2])) is float


def test_spearman_with_ties_uses_average_ranks() -> None:
    # x ranks with ties: 1, 2.5, 2.5, 4 ; y ranks 1 2 3 4
    # pearson of (1, 2.5, 2.5, 4) and (1, 2, 3, 4): dx = -1.5 0 0 1.5, dy = -1.5 -.5 .5 1.5
    # cov = 2.25 + 2.25 = 4.5 ; sum dx^2 = 4.5 ; sum dy^2 = 5 -> 4.5 / sqrt(22.5) = 0.948683
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(22.5))


@pytest.mark.parametrize("func", [spearman, pearson])
@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        ([1, 2, 3], [1, 2], "length mismatch"),
        ([1], [2], "at least 2"),
        ([1, 1, 1], [1, 2, 3], "constant"),
        ([1, 2, 3], [5, 5, 5], "constant"),
        ([1, float("nan"), 3], [1, 2, 3], "NaN"),
    ],
)
def test_correlation_errors(func, x, y, message) -> None:
    with pytest.raises(ValueError, match=message):
        func(x, y)


# --------------------------------------------------------------------------- pair classification

# dev: scores 1..7, labels 0 1 1 0 0 0 1 (P = 3, N = 4, n = 7)
# threshold  predicted positive  TP FP TN FN  accuracy  F1 = 2TP / (2TP + FP + FN)
#   0.0      1..7                 3  4  0  0    3/7     6/10
#   1.5      2..7                 3  3  1  0    4/7     6/9  = 0.667  <- best F1
#   2.5      3..7                 2  3  1  1    3/7     4/8
#   3.5      4..7                 1  3  1  2    2/7     2/7
#   4.5      5..7                 1  2  2  2    3/7     2/6
#   5.5      6, 7                 1  1  3  2    4/7     2/5
#   6.5      7                    1  0  4  2    5/7     2/4  <- best accuracy
#   8.0      none                 0  0  4  3    4/7     0
DEV_SCORES = [1, 2, 3, 4, 5, 6, 7]
DEV_LABELS = [0, 1, 1, 0, 0, 0, 1]
TEST_SCORES = [1, 2, 5, 7, 8]
TEST_LABELS = [0, 1, 1, 0, 1]


def test_best_accuracy_threshold_hand_example() -> None:
    threshold, accuracy = best_accuracy_threshold(DEV_SCORES, DEV_LABELS)
    assert threshold == pytest.approx(6.5)
    assert accuracy == pytest.approx(5 / 7)


def test_best_f1_threshold_hand_example() -> None:
    threshold, f1 = best_f1_threshold(DEV_SCORES, DEV_LABELS)
    assert threshold == pytest.approx(1.5)
    assert f1 == pytest.approx(2 / 3)


def test_pair_classification_dev_threshold_applied_to_test() -> None:
    # accuracy threshold 6.5 on test 1 2 5 7 8 -> predictions 0 0 0 1 1 vs labels 0 1 1 0 1:
    #   correct at items 1 and 5 -> accuracy 2/5
    # F1 threshold 1.5 -> predictions 0 1 1 1 1: TP = 3, FP = 1, FN = 0
    #   precision 3/4, recall 1, F1 = 2 * 3 / (2 * 3 + 1 + 0) = 6/7
    # AP: ranked 8(1) 7(0) 5(1) 2(1) 1(0): precision at hits 1/1, 2/3, 3/4
    #   AP = (1 + 2/3 + 3/4) / 3 = 29/36
    result = pair_classification_metrics(DEV_SCORES, DEV_LABELS, TEST_SCORES, TEST_LABELS)
    assert result == pytest.approx(
        {
            "accuracy": 2 / 5,
            "accuracy_threshold": 6.5,
            "f1": 6 / 7,
            "f1_threshold": 1.5,
            "precision": 3 / 4,
            "recall": 1.0,
            "average_precision": 29 / 36,
        }
    )


def test_pair_classification_distances() -> None:
    # distances d = 10 - s: same example, thresholds 10 - 6.5 = 3.5 and 10 - 1.5 = 8.5,
    # rule "positive when d <= threshold"; every metric unchanged.
    to_distance = lambda values: [10 - v for v in values]  # noqa: E731
    result = pair_classification_metrics(
        to_distance(DEV_SCORES),
        DEV_LABELS,
        to_distance(TEST_SCORES),
        TEST_LABELS,
        greater_is_similar=False,
    )
    assert result["accuracy_threshold"] == pytest.approx(3.5)
    assert result["f1_threshold"] == pytest.approx(8.5)
    assert result["accuracy"] == pytest.approx(2 / 5)
    assert result["f1"] == pytest.approx(6 / 7)
    assert result["average_precision"] == pytest.approx(29 / 36)


def test_apply_threshold_is_inclusive() -> None:
    assert apply_threshold([0.2, 0.5, 0.7], 0.5).tolist() == [0, 1, 1]
    assert apply_threshold([0.2, 0.5, 0.7], 0.5, greater_is_similar=False).tolist() == [1, 1, 0]


def test_tied_scores_stay_on_the_same_side() -> None:
    # scores .8(1) .5(1) .5(0) .2(0): splitting the tied .5 pair would give accuracy 1.0.
    # distinct .2 .5 .8 -> candidates -0.8, 0.35, 0.65, 1.8
    #   0.35: positive .8 .5 .5 -> TP 2 FP 1 TN 1 -> 3/4 ; F1 = 4 / 5
    #   0.65: positive .8       -> TP 1 TN 2 FN 1 -> 3/4 ; F1 = 2 / 3
    # equal accuracy: the lowest threshold (most positives) wins -> 0.35
    threshold, accuracy = best_accuracy_threshold([0.8, 0.5, 0.5, 0.2], [1, 1, 0, 0])
    assert accuracy == pytest.approx(0.75)
    assert threshold == pytest.approx(0.35)
    threshold, f1 = best_f1_threshold([0.8, 0.5, 0.5, 0.2], [1, 1, 0, 0])
    assert (threshold, f1) == pytest.approx((0.35, 0.8))


def test_thresholds_below_and_above_all_scores() -> None:
    # all positive -> best is "everything positive": threshold below the minimum (0.3 - 1)
    assert best_accuracy_threshold([0.3, 0.9], [1, 1]) == pytest.approx((-0.7, 1.0))
    # all negative -> threshold above the maximum (0.9 + 1)
    assert best_accuracy_threshold([0.3, 0.9], [0, 0]) == pytest.approx((1.9, 1.0))


def test_threshold_separates_scores_one_ulp_apart() -> None:
    low = 0.5
    high = float(np.nextafter(low, 1.0))
    threshold, accuracy = best_accuracy_threshold([low, high], [0, 1])
    assert accuracy == 1.0
    assert apply_threshold([low, high], threshold).tolist() == [0, 1]


@pytest.mark.parametrize(
    ("scores", "labels", "message"),
    [
        ([0.1, 0.2], [0, 2], "binary"),
        ([0.1, 0.2], [0, -1], "binary"),
        ([0.1, 0.2, 0.3], [0, 1], "length mismatch"),
        ([], [], "empty"),
        ([0.1, float("inf")], [0, 1], "infinite"),
    ],
)
def test_threshold_errors(scores, labels, message) -> None:
    with pytest.raises(ValueError, match=message):
        best_accuracy_threshold(scores, labels)


def test_f1_without_positives_raises() -> None:
    with pytest.raises(ValueError, match="F1 is undefined"):
        best_f1_threshold([0.1, 0.2], [0, 0])


def test_pair_classification_errors() -> None:
    with pytest.raises(ValueError, match="test_labels must be binary"):
        pair_classification_metrics(DEV_SCORES, DEV_LABELS, [0.1, 0.2], [1, 3])
    with pytest.raises(ValueError, match="no positive"):
        pair_classification_metrics(DEV_SCORES, DEV_LABELS, [0.1, 0.2], [0, 0])
    with pytest.raises(ValueError, match="binary"):
        pair_classification_metrics([0.1, 0.2], [0.5, 1], TEST_SCORES, TEST_LABELS)


# --------------------------------------------------------------------------- ranking

# q1: scores .9 .1 .5, labels 1 0 0   -> ranked rel 1 0 0   : RR 1,   AP 1
# q2: scores .2 .8 .6, labels 1 0 1   -> ranked rel 0 1 1   : RR 1/2, AP (1/2 + 2/3) / 2 = 7/12
# q3: scores .3 .9 .7 .1, labels 1 0 0 0 -> ranked 0 0 1 0  : RR 1/3, AP 1/3
# q4: labels 0 0                      -> excluded (no relevant candidate)
SCORES = [[0.9, 0.1, 0.5], [0.2, 0.8, 0.6], [0.3, 0.9, 0.7, 0.1], [0.5, 0.4]]
LABELS = [[1, 0, 0], [1, 0, 1], [1, 0, 0, 0], [0, 0]]


def test_ranking_metrics_hand_example() -> None:
    # MRR = (1 + 1/2 + 1/3) / 3 = 11/18 = 0.6111 ; MAP = (1 + 7/12 + 1/3) / 3 = 23/36
    # P@1 = (1 + 0 + 0) / 3
    # nDCG@1: q1 1, q2 0, q3 0 -> 1/3
    # nDCG@3: q1 1 ; q2 (1/log2 3 + 1/log2 4) / (1 + 1/log2 3) ; q3 (1/log2 4) / 1 = 0.5
    # has_positive@1 = 1/3 ; has_positive@3 = 3/3 (q3's positive is at rank 3)
    ndcg3_q2 = (1 / LOG2_3 + 0.5) / (1 + 1 / LOG2_3)  # = 0.693426
    result = ranking_metrics(SCORES, LABELS, ks=(1, 3))
    assert result == pytest.approx(
        {
            "mrr": 11 / 18,
            "map": 23 / 36,
            "p@1": 1 / 3,
            "ndcg@1": 1 / 3,
            "ndcg@3": (1 + ndcg3_q2 + 0.5) / 3,
            "has_positive@1": 1 / 3,
            "has_positive@3": 1.0,
            "num_queries": 4,
            "num_queries_without_positive": 1,
        }
    )
    assert result["mrr"] == pytest.approx(0.6111, abs=1e-4)


def test_ranking_default_ks_keys() -> None:
    result = ranking_metrics(SCORES, LABELS)
    for k in (1, 3, 5, 10):
        assert f"ndcg@{k}" in result
        assert f"has_positive@{k}" in result
    # k beyond the list length: q2 ranked 0 1 1, R = 2 -> same as nDCG@3
    assert result["ndcg@10"] == pytest.approx(result["ndcg@3"])


def test_ranking_logs_excluded_queries(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sts_core.evaluation.metrics"):
        ranking_metrics(SCORES, LABELS)
    assert "excluded 1 of 4 queries" in caplog.text


def test_ranking_no_log_without_exclusion(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sts_core.evaluation.metrics"):
        result = ranking_metrics(SCORES[:3], LABELS[:3])
    assert caplog.text == ""
    assert result["num_queries_without_positive"] == 0


def test_ranking_ties_keep_input_order() -> None:
    # all scores tied: stable sort keeps input order
    # labels 0 1 0 -> RR 1/2 ; nDCG@3 = (1/log2 3) / 1 = 0.6309 (sklearn would average ties:
    #   (1 + 1/log2 3 + 1/2) / 3 = 0.7103)
    tied = ranking_metrics([[0.5, 0.5, 0.5]], [[0, 1, 0]], ks=(3,))
    assert tied["mrr"] == pytest.approx(0.5)
    assert tied["ndcg@3"] == pytest.approx(1 / LOG2_3)
    # labels 0 0 1 -> RR 1/3, has_positive@1 = 0
    later = ranking_metrics([[0.5, 0.5, 0.5]], [[0, 0, 1]], ks=(1,))
    assert later["mrr"] == pytest.approx(1 / 3)
    assert later["has_positive@1"] == 0.0


def test_ranking_matches_sklearn_without_ties() -> None:
    rng = np.random.default_rng(1)
    scores = [rng.random(n) for n in (4, 7, 10)]
    labels = [np.array([1, 0, 0, 1]), np.array([0, 0, 1, 0, 1, 1, 0]), np.eye(10)[3].astype(int)]
    result = ranking_metrics(scores, labels, ks=(3, 5))
    expected_map = np.mean(
        [average_precision_score(y, s) for s, y in zip(scores, labels, strict=True)]
    )
    assert result["map"] == pytest.approx(expected_map)
    for k in (3, 5):
        expected = np.mean([ndcg_score([y], [s], k=k) for s, y in zip(scores, labels, strict=True)])
        assert result[f"ndcg@{k}"] == pytest.approx(expected)


def test_group_by_query() -> None:
    scores, labels = group_by_query(
        ["a", "b", "a", "c", "b"], [0.1, 0.2, 0.3, 0.4, 0.5], [1, 0, 0, 1, 1]
    )
    assert [s.tolist() for s in scores] == [[0.1, 0.3], [0.2, 0.5], [0.4]]
    assert [y.tolist() for y in labels] == [[1, 0], [0, 1], [1]]


def test_group_by_query_errors() -> None:
    with pytest.raises(ValueError, match="query_ids"):
        group_by_query(["a"], [0.1, 0.2], [0, 1])
    with pytest.raises(ValueError, match="binary"):
        group_by_query(["a", "a"], [0.1, 0.2], [0, 5])


@pytest.mark.parametrize(
    ("scores", "labels", "ks", "message"),
    [
        ([[0.1, 0.2]], [[0, 1], [1]], (1,), "length mismatch"),
        ([[0.1, 0.2]], [[0, 1, 1]], (1,), "query 0 scores and query 0 labels"),
        ([[0.1, 0.2]], [[0, 2]], (1,), "binary"),
        ([[]], [[]], (1,), "empty"),
        ([[0.1, 0.2]], [[0, 1]], (0,), "ks"),
        ([[0.1, 0.2]], [[0, 1]], (), "ks"),
        ([[0.1, 0.2]], [[0, 0]], (1,), "none of the 1 queries"),
    ],
)
def test_ranking_errors(scores, labels, ks, message) -> None:
    with pytest.raises(ValueError, match=message):
        ranking_metrics(scores, labels, ks=ks)
