"""Evaluation metrics: correlations (STS), pair classification and ranking (answer selection).

All functions take array-likes, validate them and return plain Python numbers.

* Correlations: :func:`spearman`, :func:`pearson` (thin wrappers of ``scipy.stats``).
* Pair classification: :func:`best_accuracy_threshold`, :func:`best_f1_threshold`,
  :func:`apply_threshold`, :func:`pair_classification_metrics` (threshold chosen on dev,
  applied to test).
* Ranking: :func:`ranking_metrics` (MRR, MAP, P@1, nDCG@k, has_positive@k) and
  :func:`group_by_query`.

scipy and scikit-learn are imported by the functions that use them: importing the module
(every evaluator, a method's declaration, ``check_only``) imports neither.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

__all__ = [
    "apply_threshold",
    "best_accuracy_threshold",
    "best_f1_threshold",
    "group_by_query",
    "pair_classification_metrics",
    "pearson",
    "ranking_metrics",
    "spearman",
]


# --------------------------------------------------------------------------- validation


def _as_1d_float(values: npt.ArrayLike, name: str) -> FloatArray:
    """Return ``values`` as a finite 1-D float64 array, or raise ValueError."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _as_binary_labels(labels: npt.ArrayLike, name: str) -> IntArray:
    """Return ``labels`` as a 1-D int64 array of 0/1, or raise ValueError."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    valid = np.isin(arr, (0, 1))
    if not valid.all():
        bad = np.unique(arr[~valid])[:5].tolist()
        raise ValueError(f"{name} must be binary 0/1, found other values such as {bad}")
    return arr.astype(np.int64)


def _check_same_length(a: np.ndarray, b: np.ndarray, names: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"length mismatch between {names}: {len(a)} != {len(b)}")


def _scores_and_labels(
    scores: npt.ArrayLike, labels: npt.ArrayLike, prefix: str = ""
) -> tuple[FloatArray, IntArray]:
    """Validate a (scores, labels) pair: same non-zero length, finite scores, 0/1 labels."""
    s = _as_1d_float(scores, f"{prefix}scores")
    y = _as_binary_labels(labels, f"{prefix}labels")
    _check_same_length(s, y, f"{prefix}scores and {prefix}labels")
    if len(s) == 0:
        raise ValueError(f"{prefix}scores is empty")
    return s, y


# --------------------------------------------------------------------------- correlations


def _correlation_inputs(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Validate correlation inputs: same length, at least 2 items, neither constant."""
    xa, ya = _as_1d_float(x, "x"), _as_1d_float(y, "y")
    _check_same_length(xa, ya, "x and y")
    if len(xa) < 2:
        raise ValueError(f"a correlation needs at least 2 items, got {len(xa)}")
    for name, arr in (("x", xa), ("y", ya)):
        if np.ptp(arr) == 0:
            raise ValueError(f"{name} is constant: the correlation is undefined")
    return xa, ya


def spearman(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Spearman rank correlation: Pearson's r of the (average-tie) ranks of ``x`` and ``y``.

    Without ties this is ``rho = 1 - 6 * sum(d_i^2) / (n * (n^2 - 1))`` with ``d_i`` the rank
    difference of item ``i``. Computed by :func:`scipy.stats.spearmanr`.

    Raises:
        ValueError: on length mismatch, fewer than 2 items, non-finite or constant input.
    """
    from scipy import stats

    xa, ya = _correlation_inputs(x, y)
    return float(stats.spearmanr(xa, ya).statistic)


def pearson(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Pearson correlation ``r = sum((x-mx)(y-my)) / sqrt(sum((x-mx)^2) * sum((y-my)^2))``.

    Computed by :func:`scipy.stats.pearsonr`.

    Raises:
        ValueError: on length mismatch, fewer than 2 items, non-finite or constant input.
    """
    from scipy import stats

    xa, ya = _correlation_inputs(x, y)
    return float(stats.pearsonr(xa, ya).statistic)


# --------------------------------------------------------------------------- pair classification


def _candidate_thresholds(distinct: FloatArray) -> FloatArray:
    """Thresholds for sorted distinct scores ``u_1 < ... < u_m``.

    ``[u_1 - 1, (u_1 + u_2) / 2, ..., (u_{m-1} + u_m) / 2, u_m + 1]``: candidate ``k`` (0-based)
    separates ``u_1..u_k`` (below) from ``u_{k+1}..u_m`` (at or above). A midpoint that rounds
    onto its lower neighbour (scores one ulp apart) is replaced by the upper one, so the split
    under the ``score >= threshold`` rule is always exact.
    """
    low, high = distinct[0] - 1.0, distinct[-1] + 1.0
    low = low if low < distinct[0] else np.nextafter(distinct[0], -np.inf)
    high = high if high > distinct[-1] else np.nextafter(distinct[-1], np.inf)
    mid = distinct[:-1] + (distinct[1:] - distinct[:-1]) / 2
    mid = np.where(mid > distinct[:-1], mid, distinct[1:])
    return np.concatenate([[low], mid, [high]])


def _confusion_per_threshold(
    scores: FloatArray, labels: IntArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For every candidate threshold: (threshold, true positives, predicted positives).

    Items are grouped by distinct score, so tied items always fall on the same side.
    """
    distinct, inverse = np.unique(scores, return_inverse=True)
    pos_per_value = np.bincount(inverse, weights=labels, minlength=len(distinct))
    count_per_value = np.bincount(inverse, minlength=len(distinct)).astype(np.float64)
    # candidate k predicts positive exactly the distinct values with index >= k
    tp = np.append(np.cumsum(pos_per_value[::-1])[::-1], 0.0)
    predicted = np.append(np.cumsum(count_per_value[::-1])[::-1], 0.0)
    return _candidate_thresholds(distinct), tp, predicted


def _oriented(scores: FloatArray, greater_is_similar: bool) -> FloatArray:
    """Scores in similarity orientation (distances are negated)."""
    return scores if greater_is_similar else -scores


def _best_threshold(
    scores: npt.ArrayLike, labels: npt.ArrayLike, greater_is_similar: bool, metric: str
) -> tuple[float, float]:
    """Best threshold for ``metric`` ("accuracy" or "f1") and its value on these data."""
    s, y = _scores_and_labels(scores, labels)
    n, n_pos = len(y), int(y.sum())
    if metric == "f1" and n_pos == 0:
        raise ValueError("F1 is undefined without positive labels")
    thresholds, tp, predicted = _confusion_per_threshold(_oriented(s, greater_is_similar), y)
    if metric == "accuracy":
        values = (tp + (n - n_pos) - (predicted - tp)) / n  # (TP + TN) / n
    else:
        values = 2 * tp / (predicted + n_pos)  # 2TP / (2TP + FP + FN)
    best = int(np.argmax(values))  # first maximum = lowest similarity threshold
    threshold = thresholds[best] if greater_is_similar else -thresholds[best]
    return float(threshold), float(values[best])


def best_accuracy_threshold(
    scores: npt.ArrayLike, labels: npt.ArrayLike, *, greater_is_similar: bool = True
) -> tuple[float, float]:
    """Threshold maximising ``accuracy = (TP + TN) / n``; returns ``(threshold, accuracy)``.

    Rule: predict positive when ``score >= threshold`` (``greater_is_similar=True``) or
    ``score <= threshold`` (distances, ``greater_is_similar=False``). Candidates are the
    midpoints between consecutive sorted distinct scores plus one value below (all positive)
    and one above (all negative) every score (``min - 1`` / ``max + 1``), so items with equal
    scores are always on the same side. Among equally good thresholds the one predicting the
    most positives is returned.

    Raises:
        ValueError: for labels other than 0/1, length mismatch, empty or non-finite input.
    """
    return _best_threshold(scores, labels, greater_is_similar, "accuracy")


def best_f1_threshold(
    scores: npt.ArrayLike, labels: npt.ArrayLike, *, greater_is_similar: bool = True
) -> tuple[float, float]:
    """Threshold maximising ``F1 = 2TP / (2TP + FP + FN)``; returns ``(threshold, f1)``.

    Candidate thresholds, decision rule and tie-breaking as in :func:`best_accuracy_threshold`.

    Raises:
        ValueError: as :func:`best_accuracy_threshold`, and when there is no positive label.
    """
    return _best_threshold(scores, labels, greater_is_similar, "f1")


def apply_threshold(
    scores: npt.ArrayLike, threshold: float, *, greater_is_similar: bool = True
) -> IntArray:
    """0/1 predictions: ``score >= threshold`` (or ``score <= threshold`` for distances)."""
    s = _as_1d_float(scores, "scores")
    predicted = s >= threshold if greater_is_similar else s <= threshold
    return predicted.astype(np.int64)


def pair_classification_metrics(
    dev_scores: npt.ArrayLike,
    dev_labels: npt.ArrayLike,
    test_scores: npt.ArrayLike,
    test_labels: npt.ArrayLike,
    greater_is_similar: bool = True,
) -> dict[str, float]:
    """Pair classification with thresholds chosen on dev and applied to test.

    Returns (all test-set values except the thresholds, which come from dev):

    * ``accuracy``: ``(TP + TN) / n`` at ``accuracy_threshold`` (best dev accuracy);
    * ``f1``, ``precision = TP / (TP + FP)`` (0 when nothing is predicted positive),
      ``recall = TP / (TP + FN)``: at ``f1_threshold`` (best dev F1);
    * ``average_precision``: threshold-free ``AP = sum_n (R_n - R_{n-1}) P_n`` over the test
      scores (:func:`sklearn.metrics.average_precision_score`; tied scores form one step).

    See :func:`best_accuracy_threshold` for the candidate thresholds and the decision rule.

    Raises:
        ValueError: for labels other than 0/1, length mismatch, empty or non-finite input, or
            no positive label in dev or test.
    """
    from sklearn.metrics import (
        accuracy_score,
        average_precision_score,
        precision_recall_fscore_support,
    )

    test_s, test_y = _scores_and_labels(test_scores, test_labels, "test_")
    if test_y.sum() == 0:
        raise ValueError("test_labels has no positive: recall and average precision undefined")
    acc_t, _ = best_accuracy_threshold(
        dev_scores, dev_labels, greater_is_similar=greater_is_similar
    )
    f1_t, _ = best_f1_threshold(dev_scores, dev_labels, greater_is_similar=greater_is_similar)
    acc_pred = apply_threshold(test_s, acc_t, greater_is_similar=greater_is_similar)
    f1_pred = apply_threshold(test_s, f1_t, greater_is_similar=greater_is_similar)
    precision, recall, f1, _ = precision_recall_fscore_support(
        test_y, f1_pred, average="binary", zero_division=0
    )
    ap = average_precision_score(test_y, _oriented(test_s, greater_is_similar))
    return {
        "accuracy": float(accuracy_score(test_y, acc_pred)),
        "accuracy_threshold": acc_t,
        "f1": float(f1),
        "f1_threshold": f1_t,
        "precision": float(precision),
        "recall": float(recall),
        "average_precision": float(ap),
    }


# --------------------------------------------------------------------------- ranking


def group_by_query(
    query_ids: Sequence[Hashable], scores: npt.ArrayLike, labels: npt.ArrayLike
) -> tuple[list[FloatArray], list[IntArray]]:
    """Split flat per-candidate arrays into per-query lists for :func:`ranking_metrics`.

    Queries come in order of first appearance; candidates keep their input order inside a
    query (which matters for tie-breaking in :func:`ranking_metrics`).
    """
    s, y = _as_1d_float(scores, "scores"), _as_binary_labels(labels, "labels")
    _check_same_length(s, y, "scores and labels")
    if len(query_ids) != len(s):
        raise ValueError(
            f"length mismatch between query_ids and scores: {len(query_ids)} != {len(s)}"
        )
    groups: dict[Hashable, list[int]] = {}
    for index, query_id in enumerate(query_ids):
        groups.setdefault(query_id, []).append(index)
    return [s[idx] for idx in groups.values()], [y[idx] for idx in groups.values()]


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    if not ks or any(isinstance(k, bool) or int(k) != k or k < 1 for k in ks):
        raise ValueError(f"ks must be a non-empty sequence of positive integers, got {ks!r}")
    return tuple(sorted({int(k) for k in ks}))


def _ranked_relevance(scores: npt.ArrayLike, labels: npt.ArrayLike, query: int) -> IntArray:
    """Labels sorted by descending score; stable, so ties keep the input order."""
    s, y = _scores_and_labels(scores, labels, f"query {query} ")
    return y[np.argsort(-s, kind="stable")]


def _average_precision(rel: IntArray) -> float:
    """``AP = (1 / R) * sum_{i: rel_i = 1} precision@i`` on a ranked relevance vector."""
    precision_at = np.cumsum(rel) / np.arange(1, len(rel) + 1)
    return float(np.sum(precision_at * rel) / rel.sum())


def _ndcg(rel: IntArray, k: int) -> float:
    """``DCG@k / IDCG@k``, ``DCG@k = sum_{i<=k} rel_i / log2(i + 1)``, IDCG: all R first."""
    discounts = 1.0 / np.log2(np.arange(2, len(rel) + 2))
    dcg = float(np.sum(rel[:k] * discounts[:k]))
    return dcg / float(np.sum(discounts[: min(k, int(rel.sum()))]))


def _query_metrics(rel: IntArray, ks: tuple[int, ...]) -> dict[str, float]:
    """All ranking metrics of one query (ranked relevance with at least one positive)."""
    metrics = {
        "mrr": 1.0 / (int(np.argmax(rel)) + 1),
        "map": _average_precision(rel),
        "p@1": float(rel[0]),
    }
    metrics.update({f"ndcg@{k}": _ndcg(rel, k) for k in ks})
    metrics.update({f"has_positive@{k}": float(rel[:k].any()) for k in ks})
    return metrics


def ranking_metrics(
    scores_per_query: Sequence[npt.ArrayLike],
    labels_per_query: Sequence[npt.ArrayLike],
    ks: Sequence[int] = (1, 3, 5, 10),
) -> dict[str, float]:
    """Answer-selection ranking metrics (WikiQA style), averaged over queries.

    Each query's candidates are sorted by descending score with a *stable* sort: tied scores
    keep their input order. With ranked binary relevance ``rel_1..rel_n`` and ``R`` positives:

    * ``mrr``: mean of ``1 / rank`` of the first relevant candidate;
    * ``map``: mean of ``AP = (1 / R) * sum_{i: rel_i = 1} precision@i``;
    * ``p@1``: mean of ``rel_1``;
    * ``ndcg@k``: mean of ``DCG@k / IDCG@k``, ``DCG@k = sum_{i<=min(k,n)} rel_i / log2(i + 1)``
      (gain 1, log2 discount), ``IDCG@k = sum_{i<=min(k,R)} 1 / log2(i + 1)``. Hand-written:
      ``sklearn.metrics.ndcg_score`` averages gains over tied scores instead;
    * ``has_positive@k``: fraction of queries with a relevant candidate in the top ``k``.

    Queries without any relevant candidate are excluded from *all* these averages (WikiQA
    convention for MRR/MAP; nDCG is undefined for them and P@1 / has_positive@k would only
    measure the data). They are counted in ``num_queries_without_positive`` and logged as a
    warning. ``num_queries`` is the number of queries given, excluded ones included.

    Raises:
        ValueError: on mismatched lengths, an empty query, labels other than 0/1, invalid
            ``ks`` or when no query has a relevant candidate.
    """
    ks = _check_ks(ks)
    if len(scores_per_query) != len(labels_per_query):
        raise ValueError(
            f"length mismatch between scores_per_query and labels_per_query: "
            f"{len(scores_per_query)} != {len(labels_per_query)}"
        )
    ranked = [
        _ranked_relevance(s, y, q)
        for q, (s, y) in enumerate(zip(scores_per_query, labels_per_query, strict=True))
    ]
    kept = [rel for rel in ranked if rel.any()]
    excluded = len(ranked) - len(kept)
    if excluded:
        logger.warning(
            "ranking_metrics: excluded %d of %d queries without a relevant candidate",
            excluded,
            len(ranked),
        )
    if not kept:
        raise ValueError(f"none of the {len(ranked)} queries has a relevant candidate")
    per_query = [_query_metrics(rel, ks) for rel in kept]
    result = {key: float(np.mean([m[key] for m in per_query])) for key in per_query[0]}
    result["num_queries"] = len(ranked)
    result["num_queries_without_positive"] = excluded
    return result
