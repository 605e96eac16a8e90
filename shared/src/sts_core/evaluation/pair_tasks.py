"""Pair classification and ranking evaluators: the pairwise scoring tasks beside STS (the BSC
paper's MRPC and Quora; WikiQA answer selection).

Both score pairs with a scorer (cosine of a bi-encoder's embeddings by default, as
:class:`~sts_core.evaluation.pairs.PairEvaluator`) and follow the same contract
(``primary_metric``, ``greater_is_better``, ``__call__(model) -> {metric: value}``, values
×100 except the thresholds):

* :class:`PairClassificationEvaluator`: binary labels; the accuracy and F1 thresholds are
  chosen on ``threshold_pairs`` (a dev set) and applied to the evaluated pairs
  (:func:`~sts_core.evaluation.metrics.pair_classification_metrics`); without
  ``threshold_pairs`` they are chosen on the evaluated pairs themselves (an optimistic
  upper bound, said in the metric names: ``…_oracle``).
* :class:`RankingEvaluator`: candidates grouped by ``query_id``; MRR, MAP, P@1, nDCG@k and
  HasPositive@k (:func:`~sts_core.evaluation.metrics.ranking_metrics`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from sts_core.data.columns import column_list
from sts_core.evaluation.metrics import group_by_query, pair_classification_metrics, ranking_metrics
from sts_core.evaluation.pairs import PairScorer, cosine_scorer

#: metrics that are not percentages
THRESHOLD_KEYS = ("accuracy_threshold", "f1_threshold")


def _binary_labels(dataset: Any, name: str, source: str | os.PathLike | None) -> np.ndarray:
    """The 0/1 labels of ``dataset`` (its ``label`` column, else ``score``); a
    DataContentError naming the set when they are not binary or have no positive."""
    from sts_core.data.errors import DataContentError

    columns = list(dataset.column_names)
    missing = [c for c in ("sentence1", "sentence2") if c not in columns]
    column = "label" if "label" in columns else "score"
    if missing or column not in columns:
        found = f"found {columns}"
        raise DataContentError(name, f"needs sentence1, sentence2 and label; {found}", source)
    labels = np.asarray(dataset[column], dtype=np.float64)
    if len(labels) == 0 or not np.isin(labels, (0.0, 1.0)).all():
        wrong = sorted(set(labels.tolist()) - {0.0, 1.0})[:5]
        raise DataContentError(name, f"{column} must be 0/1 labels, found {wrong}", source)
    if labels.sum() == 0:
        raise DataContentError(name, f"no positive pair among {len(labels)}", source)
    return labels.astype(np.int64)


def _percent(metrics: dict[str, float], prefix: str) -> dict[str, float]:
    return {
        f"{prefix}_{key}": value if key in THRESHOLD_KEYS else 100 * value
        for key, value in metrics.items()
    }


class PairClassificationEvaluator:
    """F1, accuracy, precision, recall and average precision (×100) of pair scores on a
    binary-labelled set, the thresholds chosen on ``threshold_pairs``.

    Args:
        dataset: the evaluated pairs (``sentence1``, ``sentence2``, ``label`` or 0/1
            ``score``).
        threshold_pairs: the pairs the thresholds are chosen on (a dev set); None: the
            evaluated pairs themselves (keys then end in ``_oracle``).
        name: the prefix of the metric keys; the primary metric is ``<name>_f1``.
        scorer, batch_size: as :class:`~sts_core.evaluation.pairs.PairEvaluator`.
    """

    greater_is_better = True

    def __init__(
        self,
        dataset: Any,
        threshold_pairs: Any | None = None,
        name: str = "pairs",
        scorer: PairScorer = cosine_scorer,
        batch_size: int = 64,
        source: str | os.PathLike | None = None,
    ) -> None:
        self.labels = _binary_labels(dataset, name, source)
        self.pairs = (column_list(dataset, "sentence1"), column_list(dataset, "sentence2"))
        self.threshold_labels = None
        self.threshold_sentences: tuple[list[str], list[str]] | None = None
        if threshold_pairs is not None:
            self.threshold_labels = _binary_labels(threshold_pairs, f"{name} thresholds", None)
            self.threshold_sentences = (
                column_list(threshold_pairs, "sentence1"),
                column_list(threshold_pairs, "sentence2"),
            )
        self.name = name if threshold_pairs is not None else f"{name}_oracle"
        self.scorer = scorer
        self.batch_size = batch_size

    @property
    def primary_metric(self) -> str:
        return f"{self.name}_f1"

    def _scores(self, model: Any, sentences: tuple[list[str], list[str]]) -> np.ndarray:
        scores = self.scorer(model, sentences[0], sentences[1], self.batch_size)
        return np.asarray(scores, dtype=np.float64).reshape(-1)

    def __call__(self, model: Any) -> dict[str, float]:
        scores = self._scores(model, self.pairs)
        if self.threshold_sentences is None:
            dev_scores, dev_labels = scores, self.labels
        else:
            dev_scores = self._scores(model, self.threshold_sentences)
            dev_labels = self.threshold_labels  # type: ignore[assignment]  # set with the sentences
        metrics = pair_classification_metrics(dev_scores, dev_labels, scores, self.labels)
        return _percent(metrics, self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, pairs={len(self.labels)})"


class RankingEvaluator:
    """MRR, MAP, P@1, nDCG@k and HasPositive@k (×100) of pair scores, candidates grouped by
    the ``query_id`` column (WikiQA); queries without a relevant candidate are left out and
    counted (``<name>_queries_without_positive``).

    Args:
        dataset: ``sentence1`` (query), ``sentence2`` (candidate), ``label`` (0/1) and
            ``query_id``.
        ks: the cut-offs of nDCG@k and HasPositive@k.
        name: the prefix of the metric keys; the primary metric is ``<name>_map``.
    """

    greater_is_better = True

    def __init__(
        self,
        dataset: Any,
        name: str = "ranking",
        ks: Sequence[int] = (1, 3, 5, 10),
        scorer: PairScorer = cosine_scorer,
        batch_size: int = 64,
        source: str | os.PathLike | None = None,
    ) -> None:
        from sts_core.data.errors import DataContentError

        self.labels = _binary_labels(dataset, name, source)
        if "query_id" not in dataset.column_names:
            raise DataContentError(name, "a ranking set needs a query_id column", source)
        self.query_ids = column_list(dataset, "query_id")
        self.pairs = (column_list(dataset, "sentence1"), column_list(dataset, "sentence2"))
        self.name, self.ks, self.scorer, self.batch_size = name, tuple(ks), scorer, batch_size

    @property
    def primary_metric(self) -> str:
        return f"{self.name}_map"

    def __call__(self, model: Any) -> dict[str, float]:
        scores = self.scorer(model, self.pairs[0], self.pairs[1], self.batch_size)
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)  # (N,) or a head's (N, 1)
        grouped = group_by_query(self.query_ids, scores, self.labels)
        metrics = ranking_metrics(*grouped, ks=self.ks)
        counts = {k: metrics.pop(k) for k in list(metrics) if k.startswith("num_")}
        result = _percent(metrics, self.name)
        result.update({f"{self.name}_{key[4:]}": float(value) for key, value in counts.items()})
        return result

    def __repr__(self) -> str:
        queries = len(set(self.query_ids))
        return f"{type(self).__name__}(name={self.name!r}, queries={queries})"
