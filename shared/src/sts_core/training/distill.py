"""Distillation from a larger local model's similarities (``teacher_model`` in any recipe).

Before training, the teacher (any model ``SentenceEncoder.from_pretrained`` loads, e.g.
all-mpnet-base-v2 for an all-MiniLM-L6-v2 student) embeds the distinct sentences of the
training pairs once, and each pair's label becomes

    y' = α · cos(t(s₁), t(s₂)) + (1 − α) · y,        α = ``teacher_weight`` ∈ (0, 1],

a soft target on the cosine's scale (Hinton et al., 2015's soft targets; Reimers &
Gurevych, 2020 distil a teacher's embeddings, here its pair similarities). With
``teacher_neighbours`` k > 0 the teacher also makes new pairs from the same sentences, as
Augmented SBERT's semantic-search sampling (Thakur et al., 2021): each distinct training
sentence s is paired with its k nearest other training sentences by the teacher's cosine
(pairs already in the set, and repeats, skipped), and each new pair's label is
cos(t(s), t(s')) alone. Any loss over
scores then trains on them (cosine MSE regresses on them, CoSENT ranks by them). With
α < 1 the gold labels must already be on the cosine's scale (−1 … 1: ``score_range``
rescales 0–5 scores to 0–1); a training set without labels needs α = 1. The run's
``metrics.json`` records the teacher, α and how the teacher's similarities agree with the
gold labels (Spearman). Encoding runs on the training device, on every process (the same
numbers: the teacher is deterministic in evaluation mode).

The teacher may also be a cross-encoder (:mod:`sts_core.cross_encoder`: a
sentence-transformers ``CrossEncoder`` folder, whose saved activation — sigmoid by default —
is applied as ``CrossEncoder.predict`` does, or ``sts-cosent``'s, whose raw logit is used):
it scores each training pair jointly, t(s₁, s₂) in place of the cosine, as Augmented SBERT
labels its silver pairs with a cross-encoder. A cross-encoder has no embeddings to search,
so with ``teacher_neighbours`` the student as it starts (the run's encoder before training)
proposes each sentence's k nearest sentences by the same rule, and the cross-encoder scores
them. With α < 1 its scores must lie in −1 … 1 (checked once they are computed).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from sts_core.data.columns import column_array

if TYPE_CHECKING:
    from sts_core.losses import EmbeddingLoss
    from sts_core.training.config import BaseConfig

logger = logging.getLogger(__name__)

PAIR_COLUMNS = ("sentence1", "sentence2")


def check_teacher_settings(config: BaseConfig) -> None:
    """ValueError for ``teacher_weight`` out of range, or ``teacher_neighbours`` below 0 or
    without a teacher (the folder is checked by the run)."""
    if config.teacher_neighbours < 0:
        raise ValueError(f"teacher_neighbours must be 0 or more, got {config.teacher_neighbours}")
    if config.teacher_neighbours and not config.teacher_model:
        raise ValueError("teacher_neighbours needs teacher_model (the teacher makes the pairs)")
    if not config.teacher_model:
        return
    weight = config.teacher_weight
    if not (math.isfinite(weight) and 0 < weight <= 1):
        raise ValueError(f"teacher_weight must be in (0, 1], got {weight}")


def check_teacher(
    config: BaseConfig, loss_class: type[EmbeddingLoss], label_column: str, train_dataset: Any
) -> None:
    """The run's one check of ``teacher_model`` against what it will teach, before any
    weights load (its settings are :func:`check_teacher_settings`', in the config): a
    complete model folder, one training set (not a mapping: distillation relabels one), a
    loss over scores, and a training set that can take the teacher's scores
    (:func:`check_teacher_data`). ValueError naming what is wrong."""
    from sts_core.encoder import check_model_location
    from sts_core.training.multi_dataset import TrainDatasets

    if not config.teacher_model:
        return
    try:
        check_model_location(config.teacher_model)
    except OSError as error:
        raise ValueError(f"teacher_model: the teacher's {error}") from error
    try:
        teacher_kind(config.teacher_model)  # a cross-encoder's outputs and activation
    except ValueError as error:
        raise ValueError(f"teacher_model: {error}") from error
    if isinstance(train_dataset, TrainDatasets):
        raise ValueError(
            "teacher_model with train_datasets as a mapping: distillation relabels one "
            "training set; give train_datasets as a list"
        )
    kind = loss_class.required_label_kind(config)
    if kind != "score":
        raise ValueError(
            f"teacher_model gives each pair a similarity score, but loss "
            f"{loss_class.display_name()} reads {kind or 'no'} labels: use a loss over scores "
            "(cosine_mse, cosent, pearson, …)"
        )
    check_teacher_data(train_dataset, label_column, config.teacher_weight)


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
    labels = column_array(dataset, label_column)
    outside, found = off_cosine_scale(labels)
    if outside:
        raise ValueError(
            f"teacher_weight {weight} < 1 mixes the teacher's cosine (−1 … 1) with the "
            f"labels, but {outside} of {len(labels)} labels in {label_column!r} lie outside "
            f"it ({found}): rescale them (score_range)"
        )


def off_cosine_scale(values: np.ndarray) -> tuple[int, str]:
    """How many ``values`` lie outside −1 … 1, and their range in words."""
    outside = int(((values < -1) | (values > 1)).sum())
    return outside, f"range {values.min():g} … {values.max():g}"


def teacher_kind(location: str) -> str:
    """``cross-encoder`` for a sequence classifier with one output, else ``bi-encoder``
    (ValueError naming the file for a classifier a teacher cannot be)."""
    from sts_core.cross_encoder import cross_encoder_activation

    activation = cross_encoder_activation(location)
    return "bi-encoder" if activation is None else "cross-encoder"


def check_cross_encoder_scores(scores: np.ndarray, weight: float) -> None:
    """With α < 1 a cross-encoder's scores are mixed with labels on the cosine's scale, so
    they must lie in −1 … 1 (a raw logit may not): ValueError saying how many do not."""
    if weight == 1 or len(scores) == 0:
        return
    outside, found = off_cosine_scale(scores)
    if outside:
        raise ValueError(
            f"teacher_weight {weight} < 1 mixes the cross-encoder's scores with the labels "
            f"(−1 … 1), but {outside} of {len(scores)} scores lie outside it ({found}): use "
            "teacher_weight 1, or a cross-encoder whose activation bounds its scores (a "
            "sentence-transformers CrossEncoder's sigmoid)"
        )


def is_cross_encoder(teacher: Any) -> bool:
    """A loaded teacher that scores pairs jointly (a
    :class:`~sts_core.cross_encoder.CrossEncoderScorer`) rather than encoding sentences."""
    from sts_core.cross_encoder import CrossEncoderScorer

    return isinstance(teacher, CrossEncoderScorer)


class SentenceVectors:
    """The teacher's unit vectors of a training set's distinct sentences (each encoded once)."""

    def __init__(self, teacher: Any, dataset: Any, batch_size: int) -> None:
        self.first, self.second = (list(dataset[column]) for column in PAIR_COLUMNS)
        self.sentences = list(dict.fromkeys(self.first + self.second))
        self.index = {sentence: i for i, sentence in enumerate(self.sentences)}
        self.vectors = np.asarray(
            teacher.encode(
                self.sentences, batch_size=batch_size, show_progress_bar=False, normalize=True
            ),
            dtype=np.float32,
        )

    def pair_similarities(self) -> np.ndarray:
        """cos(t(s₁), t(s₂)) of every pair, in order."""
        left = self.vectors[[self.index[s] for s in self.first]]
        right = self.vectors[[self.index[s] for s in self.second]]
        return (left * right).sum(axis=1).astype(np.float64)

    def neighbour_pairs(
        self, neighbours: int, block_cells: int = 1 << 24
    ) -> tuple[list, list, list]:
        """Each sentence with its ``neighbours`` nearest other sentences by the teacher, as
        new pairs (sentence1, sentence2, teacher cosine): unordered, each once, none that is
        already a training pair. Rows are scored in blocks of at most ``block_cells``
        similarities (64 MiB of float32), so memory stays flat on NLI-sized sets."""
        taken = {
            frozenset((self.index[a], self.index[b]))
            for a, b in zip(self.first, self.second, strict=True)
        }
        count = len(self.sentences)
        pick = min(count - 1, 2 * neighbours + 2)  # room for gold pairs and repeats
        chunk = max(1, min(count, block_cells // max(count, 1)))
        firsts, seconds, cosines = [], [], []
        for start in range(0, count, chunk):
            block = self.vectors[start : start + chunk] @ self.vectors.T
            rows = np.arange(block.shape[0])
            block[rows, rows + start] = -np.inf  # not itself
            nearest = top_columns(block, pick)
            for row, candidates in zip(rows, nearest, strict=True):
                found = 0
                for other in candidates:
                    if found == neighbours:
                        break
                    key = frozenset((row + start, int(other)))
                    if len(key) < 2 or key in taken:
                        continue
                    taken.add(key)
                    firsts.append(self.sentences[row + start])
                    seconds.append(self.sentences[int(other)])
                    cosines.append(float(block[row, other]))
                    found += 1
        return firsts, seconds, cosines


def top_columns(block: np.ndarray, pick: int) -> np.ndarray:
    """Per row, the columns of its ``pick`` largest values, largest first: a partial
    selection (``argpartition``, linear per row) and then a sort of those ``pick`` only."""
    if pick <= 0:
        return np.empty((block.shape[0], 0), dtype=np.int64)
    if pick >= block.shape[1]:
        return np.argsort(-block, axis=1, kind="stable")[:, :pick]
    top = np.argpartition(-block, pick - 1, axis=1)[:, :pick]
    order = np.argsort(-np.take_along_axis(block, top, axis=1), axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1)


def teacher_similarities(teacher: Any, dataset: Any, batch_size: int) -> np.ndarray:
    """cos(t(s₁), t(s₂)) for every pair of ``dataset`` (each distinct sentence once)."""
    return SentenceVectors(teacher, dataset, batch_size).pair_similarities()


def add_neighbour_pairs(
    dataset: Any,
    vectors: SentenceVectors,
    label_column: str,
    neighbours: int,
    scorer: Any = None,
    batch_size: int = 64,
) -> tuple[Any, int]:
    """``dataset`` followed by the neighbour pairs ``vectors`` proposes (Augmented SBERT's
    semantic-search sampling, Thakur et al., 2021), labelled by their cosine or, given a
    cross-encoder ``scorer``, by its scores; the other columns empty (None) on them; how
    many were added."""
    from datasets import Dataset, concatenate_datasets

    firsts, seconds, cosines = vectors.neighbour_pairs(neighbours)
    if scorer is not None:
        cosines = scorer.score_pairs(firsts, seconds, batch_size).tolist()
    columns = {name: [None] * len(cosines) for name in dataset.column_names}
    columns.update({PAIR_COLUMNS[0]: firsts, PAIR_COLUMNS[1]: seconds, label_column: cosines})
    extra = Dataset.from_dict(columns, features=dataset.features)
    return concatenate_datasets([dataset, extra]), len(extra)


def apply_teacher(
    dataset: Any,
    teacher: Any,
    label_column: str,
    weight: float,
    batch_size: int,
    neighbours: int = 0,
    proposer: Any = None,
) -> tuple[Any, dict[str, Any]]:
    """The training set with labels α·teacher + (1 − α)·gold (and, with ``neighbours`` k,
    each sentence's k nearest other sentences as new pairs labelled by the teacher alone),
    and a summary of it. ``teacher``: a bi-encoder (``encode``) or a cross-encoder
    (:class:`~sts_core.cross_encoder.CrossEncoderScorer`), which needs a
    bi-encoder ``proposer`` for the neighbours. The run has checked ``dataset``
    (:func:`check_teacher`); a caller of its own checks it with :func:`check_teacher_data`
    first. ValueError for a cross-encoder's scores that α < 1 cannot mix."""
    from scipy.stats import spearmanr

    cross = is_cross_encoder(teacher)
    if cross and neighbours and proposer is None:
        raise ValueError("teacher_neighbours with a cross-encoder teacher needs a proposer")
    if cross:
        similarities = teacher.score_pairs(*(list(dataset[c]) for c in PAIR_COLUMNS), batch_size)
        check_cross_encoder_scores(similarities, weight)
        vectors = SentenceVectors(proposer, dataset, batch_size) if neighbours else None
    else:
        vectors = SentenceVectors(teacher, dataset, batch_size)
        similarities = vectors.pair_similarities()
    summary: dict[str, Any] = {
        "teacher_kind": "cross-encoder" if cross else "bi-encoder",
        "teacher_weight": weight,
        "pairs": len(similarities),
        "teacher_mean": round(float(similarities.mean()), 4),
    }
    if label_column in dataset.column_names:
        gold = column_array(dataset, label_column)
        agreement = spearmanr(similarities, gold).statistic if len(gold) > 1 else math.nan
        summary["teacher_spearman_with_labels"] = round(float(agreement) * 100, 2)
        targets = weight * similarities + (1 - weight) * gold
        dataset = dataset.remove_columns(label_column)
    else:
        targets = similarities
    dataset = dataset.add_column(label_column, targets.tolist())
    if neighbours:
        assert vectors is not None  # the teacher's, or the proposer's with neighbours
        dataset, summary["neighbour_pairs"] = add_neighbour_pairs(
            dataset, vectors, label_column, neighbours, teacher if cross else None, batch_size
        )
    logger.info(
        "teacher: %d pairs rescored (α %.2f, mean teacher score %.3f)",
        summary["pairs"],
        weight,
        summary["teacher_mean"],
    )
    return dataset, summary


def load_teacher(
    location: str, device: Any, max_length: int | None = None, trust_remote_code: bool = False
) -> Any:
    """The teacher in evaluation mode on ``device``: a
    :class:`~sts_core.cross_encoder.CrossEncoderScorer` for a cross-encoder folder
    (:func:`teacher_kind`), else a ``SentenceEncoder``."""
    from sts_core.cross_encoder import CrossEncoderScorer
    from sts_core.encoder import SentenceEncoder

    if teacher_kind(location) == "cross-encoder":
        return CrossEncoderScorer.load(location, device, max_length, trust_remote_code)
    teacher = SentenceEncoder.from_pretrained(location, max_length=max_length)
    return teacher.to(device).eval()
