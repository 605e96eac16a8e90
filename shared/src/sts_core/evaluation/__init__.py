"""Evaluation: the STS evaluator (SentEval and MTEB protocols), the pair evaluator (one
labelled pair set, any scorer) and the metrics behind them."""

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
from sts_core.evaluation.pairs import (
    CrossEncoderScorer,
    PairEvaluator,
    PairScorer,
    check_scored_pairs,
    cosine_scorer,
    cross_encoder_scorer,
    head_scorer,
)
from sts_core.evaluation.sts import (
    PROTOCOLS,
    STS_TASKS,
    STSEvaluator,
    STSReport,
    TaskResult,
    cosine_scores,
    score_subsets,
)

__all__ = [
    "PROTOCOLS",
    "STS_TASKS",
    "CrossEncoderScorer",
    "PairEvaluator",
    "PairScorer",
    "STSEvaluator",
    "STSReport",
    "TaskResult",
    "apply_threshold",
    "best_accuracy_threshold",
    "best_f1_threshold",
    "check_scored_pairs",
    "cosine_scorer",
    "cosine_scores",
    "cross_encoder_scorer",
    "group_by_query",
    "head_scorer",
    "pair_classification_metrics",
    "pearson",
    "ranking_metrics",
    "score_subsets",
    "spearman",
]
