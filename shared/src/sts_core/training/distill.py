"""Distillation from a larger local model's similarities (``teacher_model`` in any recipe).

Before training, the teacher (any model ``SentenceEncoder.from_pretrained`` loads, e.g.
all-mpnet-base-v2 for an all-MiniLM-L6-v2 student) embeds the distinct sentences of the
training pairs once, and each pair's label becomes

    y' = α · cos(t(s₁), t(s₂)) + (1 − α) · y,        α = ``teacher_weight`` ∈ (0, 1],

a soft target on the cosine's scale (Hinton et al., 2015's soft targets; Reimers &
Gurevych, 2020 distil a teacher's embeddings, here its pair similarities). Any loss over
scores then trains on them (cosine MSE regresses on them, CoSENT ranks by them). With
α < 1 the gold labels must already be on the cosine's scale (−1 … 1: ``score_range``
rescales 0–5 scores to 0–1); a training set without labels needs α = 1. The run's
``metrics.json`` records the teacher, α and how the teacher's similarities agree with the
gold labels (Spearman). Encoding runs on the training device, on every process (the same
numbers: the teacher is deterministic in evaluation mode).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

PAIR_COLUMNS = ("sentence1", "sentence2")


def check_teacher_settings(config: Any) -> None:
    """ValueError for ``teacher_weight`` out of range (the folder is checked by the run)."""
    weight = config.teacher_weight
    if not (math.isfinite(weight) and 0 < weight <= 1):
        raise ValueError(f"teacher_weight must be in (0, 1], got {weight}")


def check_teacher_data(dataset: Any, label_column: str, weight: float) -> None:
    """The training set can take the teacher's scores: sentence pairs, and with α < 1 gold
    labels on the cosine's scale (ValueError naming what is wrong)."""
    missing = [c for c in PAIR_COLUMNS if c not in dataset.column_names]
    if missing:
        raise ValueError(
            f"teacher_model scores sentence pairs, but the training set has no column "
            f"{', '.join(missing)}"
        )
    if weight == 1:
        return
    if label_column not in dataset.column_names:
        raise ValueError(
            f"teacher_weight {weight} < 1 mixes the teacher's scores with the labels, but the "
            f"training set has no label column {label_column!r}: use teacher_weight 1"
        )
    labels = np.asarray(dataset[label_column], dtype=float)
    outside = int(((labels < -1) | (labels > 1)).sum())
    if outside:
        raise ValueError(
            f"teacher_weight {weight} < 1 mixes the teacher's cosine (−1 … 1) with the "
            f"labels, but {outside} of {len(labels)} labels in {label_column!r} lie outside "
            f"it (range {labels.min():g} … {labels.max():g}): rescale them (score_range)"
        )


def teacher_similarities(teacher: Any, dataset: Any, batch_size: int) -> np.ndarray:
    """cos(t(s₁), t(s₂)) for every pair of ``dataset`` (each distinct sentence once)."""
    first, second = (list(dataset[column]) for column in PAIR_COLUMNS)
    vectors = teacher.encode(
        first + second, batch_size=batch_size, show_progress_bar=False, normalize=True
    )
    return (vectors[: len(first)] * vectors[len(first) :]).sum(axis=1).astype(np.float64)


def apply_teacher(
    dataset: Any, teacher: Any, label_column: str, weight: float, batch_size: int
) -> tuple[Any, dict[str, Any]]:
    """The training set with labels α·teacher + (1 − α)·gold, and a summary of it."""
    from scipy.stats import spearmanr

    check_teacher_data(dataset, label_column, weight)
    similarities = teacher_similarities(teacher, dataset, batch_size)
    summary: dict[str, Any] = {
        "teacher_weight": weight,
        "pairs": len(similarities),
        "teacher_mean": round(float(similarities.mean()), 4),
    }
    if label_column in dataset.column_names:
        gold = np.asarray(dataset[label_column], dtype=np.float64)
        agreement = spearmanr(similarities, gold).statistic if len(gold) > 1 else math.nan
        summary["teacher_spearman_with_labels"] = round(float(agreement) * 100, 2)
        targets = weight * similarities + (1 - weight) * gold
        dataset = dataset.remove_columns(label_column)
    else:
        targets = similarities
    dataset = dataset.add_column(label_column, targets.tolist())
    logger.info(
        "teacher: %d pairs rescored (α %.2f, mean teacher cosine %.3f)",
        summary["pairs"],
        weight,
        summary["teacher_mean"],
    )
    return dataset, summary


def load_teacher(location: str, device: Any, max_length: int | None = None) -> Any:
    """The teacher in evaluation mode on ``device``."""
    from sts_core.encoder import SentenceEncoder

    teacher = SentenceEncoder.from_pretrained(location, max_length=max_length)
    return teacher.to(device).eval()
