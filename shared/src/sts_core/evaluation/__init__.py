"""Evaluation: the STS evaluator (SentEval and MTEB protocols) and the metrics behind it."""

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
from sts_core.evaluation.sts import (
    PROTOCOLS,
    STS_TASKS,
    PairSimilarityEvaluator,
    STSEvaluator,
    STSReport,
    TaskResult,
    cosine_scores,
    score_subsets,
)

__all__ = [
    "PROTOCOLS",
    "STS_TASKS",
    "PairSimilarityEvaluator",
    "STSEvaluator",
    "STSReport",
    "TaskResult",
    "apply_threshold",
    "best_accuracy_threshold",
    "best_f1_threshold",
    "cosine_scores",
    "group_by_query",
    "pair_classification_metrics",
    "pearson",
    "ranking_metrics",
    "score_subsets",
    "spearman",
]
