"""Hard-negative mining: (anchor, positive) pairs become (anchor, positive, negative) triplets.

The same selection as sentence-transformers' ``util.mine_hard_negatives`` (``output_format
"triplet"``), with the project's encoder and a memory bound:

1. The distinct anchors are the queries; the corpus is the extra ``corpus`` texts followed by
   the positives, each distinct text once. Both are embedded once, L2-normalised
   (:meth:`SentenceEncoder.encode`: each distinct sentence once, sorted by length).
2. Each query's ``range_max + max_positives`` nearest corpus texts by cosine, searched in
   chunks of queries whose score block stays under ``memory_mb`` (faiss ``IndexFlatIP``
   when installed, else an exact matrix product); ties are broken by the lower corpus
   position (faiss breaks them its own way).
3. Removed from the candidates: the query's positives and its own text; with
   ``absolute_margin`` m, those with ``score + m > p``; with ``relative_margin`` r, those
   with ``score > p − |p|·r``, where p is the query's lowest positive score; those above
   ``max_score`` or below ``min_score``.
4. Of the ``range_max`` best left, the first ``range_min`` are skipped; then the best
   ``num_negatives`` (``sampling: top``) or as many drawn at random among those left
   (``random``, seeded), best first.
5. Each pair gets one row per negative its anchor found; a pair whose anchor found fewer
   gets fewer, and the report counts the pairs by how many they got.

Pairs with a ``score`` column (a scored or labelled table) are positives only when scored
at or above ``positive_threshold`` — by default the highest score of the table (the 1s of
0/1 labels, entailment of NLI classes) —; the others are left out, their count reported.

Defaults as the peer's: ``range_max`` is ``range_min + num_negatives + max_positives``, or
``range_min + 10·num_negatives + max_positives`` when a margin or ``max_score`` filters.
The output's columns ``anchor``, ``positive``, ``negative`` are read by ``train_datasets``
as ``sentence1``, ``sentence2``, ``hard_negative``.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sts_core.data.columns import column_array
from sts_core.extras import require

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

SAMPLING = ("top", "random")
OUTPUT_COLUMNS = ("anchor", "positive", "negative")
SCORE_COLUMNS = ("positive_score", "negative_score")
PAIR_COLUMNS = ("sentence1", "sentence2")


@dataclass(frozen=True)
class MiningSettings:
    """What to mine (the peer's parameter names; validated here, the one place)."""

    num_negatives: int = 3
    range_min: int = 0
    range_max: int | None = None
    max_score: float | None = None
    min_score: float | None = None
    absolute_margin: float | None = None
    relative_margin: float | None = None
    sampling: str = "top"
    seed: int = 0
    positive_threshold: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.num_negatives, bool) or self.num_negatives < 1:
            raise ValueError(f"num_negatives must be at least 1, got {self.num_negatives}")
        if self.range_min < 0:
            raise ValueError(f"range_min must be 0 or more, got {self.range_min}")
        if self.range_max is not None and self.range_max - self.range_min < self.num_negatives:
            raise ValueError(
                f"range_max {self.range_max} leaves {self.range_max - self.range_min} "
                f"candidates after range_min {self.range_min}, fewer than num_negatives "
                f"{self.num_negatives}"
            )
        if self.sampling not in SAMPLING:
            raise ValueError(
                f"sampling must be one of {', '.join(SAMPLING)}, got {self.sampling!r}"
            )
        bounded = ("max_score", "min_score", "absolute_margin", "relative_margin")
        for name in (*bounded, "positive_threshold"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value}")
        if self.relative_margin is not None and self.relative_margin < 0:
            raise ValueError(f"relative_margin must be 0 or more, got {self.relative_margin}")
        low, high = self.min_score, self.max_score
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_score {self.min_score} is above max_score {self.max_score}")

    @property
    def filters(self) -> bool:
        """Whether a margin or a score bound removes candidates (a wider default window)."""
        bounds = (self.absolute_margin, self.relative_margin, self.max_score)
        return any(value is not None for value in bounds)

    def window(self, max_positives: int) -> int:
        """``range_max``: as given, else the peer's default for these settings."""
        if self.range_max is not None:
            return self.range_max
        per_negative = 10 if self.filters else 1
        return self.range_min + per_negative * self.num_negatives + max_positives


@dataclass
class MiningReport:
    """What the mining did: sizes, what each filter removed, pairs by negatives found."""

    pairs: int
    duplicate_pairs: int
    anchors: int
    corpus: int
    range_max: int
    candidates_per_anchor: int
    search: str
    chunk_rows: int
    removed: dict[str, int] = field(default_factory=dict)
    pairs_by_negatives: dict[int, int] = field(default_factory=dict)
    triplets: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    positives: Positives | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """The report as a person reads it."""
        got = ", ".join(f"{n}: {count}" for n, count in sorted(self.pairs_by_negatives.items()))
        removed = ", ".join(f"{reason} {count}" for reason, count in self.removed.items())
        lines = [
            f"{self.pairs} pairs ({self.duplicate_pairs} duplicate rows merged), "
            f"{self.anchors} distinct anchors, corpus of {self.corpus} distinct texts",
            f"search: {self.search}, {self.candidates_per_anchor} candidates per anchor "
            f"(range_max {self.range_max}), {self.chunk_rows} anchors per chunk",
            f"candidates removed: {removed or 'none'}",
            f"pairs by negatives found: {got}",
            f"{self.triplets} triplets",
        ]
        if self.positives is not None:
            lines.insert(0, self.positives.line())
        return lines


@dataclass
class Positives:
    """Which rows of a scored table were the positives: those scored at or above
    ``threshold`` (``default``: the highest score, no threshold given); ``left_out`` rows
    were scored below it, of ``rows``."""

    threshold: float
    default: bool
    rows: int
    left_out: int

    def line(self) -> str:
        which = " (the highest score of the table, the default)" if self.default else ""
        return (
            f"positives: the pairs scored at or above {self.threshold:g}{which}; "
            f"{self.left_out} of {self.rows} rows scored below it are left out"
        )


def positive_rows(pairs: Dataset, threshold: float | None) -> tuple[np.ndarray, Positives | None]:
    """The rows of ``pairs`` that are positives, and what was chosen: with a ``score``
    column, those scored at or above ``threshold`` (None: the highest score); without one,
    every row (ValueError for a threshold, which has nothing to apply to; or when no row
    reaches it)."""
    if "score" not in pairs.column_names or not len(pairs):
        if threshold is not None and len(pairs):
            raise ValueError(
                "positive_threshold: the pairs have no score or label column to compare with "
                "it (every pair is a positive): leave it out, or name the score column"
            )
        return np.arange(len(pairs)), None
    scores = column_array(pairs, "score")
    chosen = float(scores.max()) if threshold is None else threshold
    kept = np.flatnonzero(scores >= chosen)
    if not len(kept):
        raise ValueError(
            f"positive_threshold {chosen:g}: no pair is scored at or above it (the highest "
            f"score is {scores.max():g})"
        )
    return kept, Positives(chosen, threshold is None, len(scores), len(scores) - len(kept))


def _rows_of(values: list[str], rows: np.ndarray) -> list[str]:
    return [values[row] for row in rows]


# ----------------------------------------------------------------------------- search
#: bytes per score cell while a chunk is searched: the float32 score, its partitioned copy,
#: two masks and a running count (int64)
BYTES_PER_CELL = 24


def chunk_rows(corpus_size: int, memory_mb: float) -> int:
    """Queries per search chunk: their score block against the corpus, and the work of
    picking its best, stays under ``memory_mb``."""
    return max(1, int(memory_mb * 2**20) // (BYTES_PER_CELL * max(corpus_size, 1)))


def top_candidates(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ``k`` largest scores and their columns, largest first; ties, also at
    the k-th place, go to the lower column. Linear in the row's length but for the sort
    of the ``k`` chosen."""
    n = scores.shape[1]
    k = min(k, n)
    if k < n:
        kth = np.partition(scores, n - k, axis=1)[:, n - k : n - k + 1]  # the k-th largest
        above = scores > kth
        tied = scores == kth
        room = k - above.sum(axis=1, keepdims=True)
        chosen = above | (tied & (np.cumsum(tied, axis=1) <= room))
        columns = np.nonzero(chosen)[1].reshape(len(scores), k)
    else:
        columns = np.broadcast_to(np.arange(n), scores.shape)
    values = np.take_along_axis(scores, columns, axis=1)
    order = np.lexsort((columns, -values), axis=1)
    return np.take_along_axis(values, order, axis=1), np.take_along_axis(columns, order, axis=1)


def search(
    queries: np.ndarray, corpus: np.ndarray, k: int, rows: int, use_faiss: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best corpus rows of each query by inner product, ``rows`` queries at a
    time: scores and indices ``(n_queries, k)``."""
    k = min(k, len(corpus))
    index = None
    if use_faiss:
        index = faiss_module().IndexFlatIP(corpus.shape[1])
        index.add(np.ascontiguousarray(corpus, dtype=np.float32))
    scores, indices = [], []
    for start in range(0, len(queries), rows):
        chunk = np.ascontiguousarray(queries[start : start + rows], dtype=np.float32)
        if index is not None:
            found_scores, found = index.search(chunk, k)
        else:
            found_scores, found = top_candidates(chunk @ corpus.T, k)
        scores.append(found_scores.astype(np.float32))
        indices.append(found.astype(np.int64))
    return np.concatenate(scores), np.concatenate(indices)


def faiss_installed() -> bool:
    return importlib.util.find_spec("faiss") is not None


def faiss_module() -> Any:
    """faiss, or ImportError naming sts-core's ``faiss`` extra."""
    return require("faiss", feature="hard-negative mining with faiss")


def check_search_settings(memory_mb: float, use_faiss: bool | None) -> None:
    """Before anything loads: ValueError for ``memory_mb`` ≤ 0, ImportError (naming the
    extra) for ``use_faiss`` without faiss."""
    if not memory_mb > 0:
        raise ValueError(f"memory_mb must be above 0, got {memory_mb}")
    if use_faiss:
        faiss_module()


# ----------------------------------------------------------------------------- selection
@dataclass
class Pairs:
    """The distinct pairs of a dataset, as anchors (queries) and corpus positions."""

    anchors: list[str]
    positives_of: list[list[int]]  # per anchor: corpus positions of its positives
    corpus: list[str]
    pairs: list[tuple[int, int]]  # (anchor, corpus position) per distinct pair, in order
    duplicates: int
    own: list[int]  # per anchor: the corpus position of its own text, -2 when not there

    @classmethod
    def build(cls, first: Sequence[str], second: Sequence[str], extra: Sequence[str]) -> Pairs:
        corpus = list(dict.fromkeys([*extra, *second]))
        position = {text: i for i, text in enumerate(corpus)}
        anchors = list(dict.fromkeys(first))
        anchor_index = {text: i for i, text in enumerate(anchors)}
        distinct = list(dict.fromkeys(zip(first, second, strict=True)))
        pairs = [(anchor_index[a], position[p]) for a, p in distinct]
        positives_of: list[list[int]] = [[] for _ in anchors]
        for anchor, positive in pairs:
            positives_of[anchor].append(positive)
        own = [position.get(anchor, -2) for anchor in anchors]
        return cls(anchors, positives_of, corpus, pairs, len(first) - len(distinct), own)


def remove_candidates(
    scores: np.ndarray,
    indices: np.ndarray,
    pairs: Pairs,
    lowest_positive: np.ndarray,
    settings: MiningSettings,
) -> dict[str, int]:
    """Set to −inf (in place) every candidate step 3 of the module removes; per reason,
    how many it removed (a candidate counted under the first reason that removes it)."""
    removed: dict[str, int] = {}

    def drop(reason: str, mask: np.ndarray) -> None:
        mask &= np.isfinite(scores)
        removed[reason] = int(mask.sum())
        scores[mask] = -np.inf

    scores[indices < 0] = -np.inf  # faiss pads a short result with -1
    own = np.array(pairs.own, dtype=np.int64)[:, None]
    positive = np.zeros(scores.shape, dtype=bool)
    for row, positives in enumerate(pairs.positives_of):
        positive[row] = np.isin(indices[row], positives)
    drop("positive", positive)
    drop("anchor itself", indices == own)
    threshold = lowest_positive[:, None]
    if settings.absolute_margin is not None:
        drop("absolute_margin", scores + settings.absolute_margin > threshold)
    if settings.relative_margin is not None:
        relative = threshold - np.abs(threshold) * settings.relative_margin
        drop("relative_margin", scores > relative)
    if settings.max_score is not None:
        drop("max_score", scores > settings.max_score)
    if settings.min_score is not None:
        drop("min_score", scores < settings.min_score)
    return {reason: count for reason, count in removed.items() if count}


def choose_negatives(
    scores: np.ndarray, indices: np.ndarray, settings: MiningSettings, range_max: int
) -> tuple[np.ndarray, np.ndarray]:
    """Step 4: per anchor, its negatives' scores and corpus positions ``(n, num_negatives)``,
    best first, −inf / −1 where fewer were found."""
    best, columns = top_candidates(scores, range_max)
    best, columns = best[:, settings.range_min :], columns[:, settings.range_min :]
    positions = np.take_along_axis(indices, columns, axis=1)
    count = settings.num_negatives
    if settings.sampling == "random":
        rng = np.random.default_rng(settings.seed)
        picked = np.full((len(best), count), -1, dtype=np.int64)
        for row in range(len(best)):
            valid = np.flatnonzero(np.isfinite(best[row]))
            drawn = np.sort(rng.choice(valid, size=min(count, len(valid)), replace=False))
            picked[row, : len(drawn)] = drawn
        taken = np.where(picked >= 0, picked, 0)
        best = np.where(picked >= 0, np.take_along_axis(best, taken, axis=1), -np.inf)
        positions = np.take_along_axis(positions, taken, axis=1)
    best, positions = best[:, :count], positions[:, :count]
    return best, np.where(np.isfinite(best), positions, -1)


# ----------------------------------------------------------------------------- the whole
def pairs_reading(option: str) -> Any:
    """How a table of pairs to mine is read, its columns mapped by ``option``: a score only
    from a named (or mapped) column; a column of numbers not named is refused."""
    from sts_core.data import TableReading
    from sts_core.data.tables import NLI_BY_NAMES

    return TableReading(option, "named", nli_hint=NLI_BY_NAMES)


def mine_hard_negatives(
    pairs: Dataset,
    encoder: Any,
    settings: MiningSettings | None = None,
    *,
    corpus: Sequence[str] | None = None,
    batch_size: int = 64,
    memory_mb: float = 256,
    use_faiss: bool | None = None,
    scores: bool = False,
    columns: Mapping[str, str] | None = None,
) -> tuple[Any, MiningReport]:
    """(anchor, positive, negative) triplets from ``pairs`` (a ``datasets.Dataset`` read as
    ``sts-mine`` reads its ``--pairs`` table: two text columns, ``columns`` mapping the
    project's names onto its own; a score only from a column named ``score`` or ``label``
    or mapped, and then only the pairs at or above ``settings.positive_threshold`` are
    positives, :func:`positive_rows`; a column of numbers not named is refused) and an
    encoder; see the module docstring. ``use_faiss``: None, faiss when installed.
    ``scores``: add the cosines (``positive_score``, ``negative_score``)."""
    from datasets import Dataset

    from sts_core.data import from_dataset

    settings = settings or MiningSettings()
    check_search_settings(memory_mb, use_faiss)
    if len(pairs) == 0:
        raise ValueError("no pairs to mine hard negatives for")
    pairs = from_dataset(pairs, columns, name="pairs", reading=pairs_reading("columns"))
    started = time.perf_counter()
    rows, positives = positive_rows(pairs, settings.positive_threshold)
    first, second = (_rows_of(list(pairs[name]), rows) for name in PAIR_COLUMNS)
    table = Pairs.build(first, second, list(corpus or []))
    if not table.pairs:
        raise ValueError("no pairs to mine hard negatives for")
    use_faiss = faiss_installed() if use_faiss is None else use_faiss
    encode = {"batch_size": batch_size, "show_progress_bar": False, "normalize": True}
    anchor_vectors = np.asarray(encoder.encode(table.anchors, **encode), dtype=np.float32)
    corpus_vectors = np.asarray(encoder.encode(table.corpus, **encode), dtype=np.float32)
    encoded = time.perf_counter()
    max_positives = max(len(p) for p in table.positives_of)
    range_max = settings.window(max_positives)
    chunk = chunk_rows(len(table.corpus), memory_mb)
    found, indices = search(
        anchor_vectors, corpus_vectors, range_max + max_positives, chunk, use_faiss
    )
    searched = time.perf_counter()
    positive_scores = np.array(
        [float(anchor_vectors[a] @ corpus_vectors[p]) for a, p in table.pairs], dtype=np.float32
    )
    lowest = np.full(len(table.anchors), np.inf, dtype=np.float32)
    np.minimum.at(lowest, [a for a, _ in table.pairs], positive_scores)
    report = MiningReport(
        pairs=len(table.pairs),
        duplicate_pairs=table.duplicates,
        anchors=len(table.anchors),
        corpus=len(table.corpus),
        range_max=range_max,
        candidates_per_anchor=int(found.shape[1]),
        search="faiss IndexFlatIP" if use_faiss else "exact (numpy)",
        chunk_rows=chunk,
        positives=positives,
    )
    report.removed = remove_candidates(found, indices, table, lowest, settings)
    negative_scores, negatives = choose_negatives(found, indices, settings, range_max)
    output, counts = _triplet_columns(table, positive_scores, negatives, negative_scores)
    if not scores:
        for name in SCORE_COLUMNS:
            del output[name]
    report.pairs_by_negatives = dict(sorted(counts.items()))
    report.triplets = len(output["anchor"])
    report.seconds = {
        "encode": round(encoded - started, 3),
        "search": round(searched - encoded, 3),
        "select": round(time.perf_counter() - searched, 3),
    }
    for line in report.lines():
        logger.info("mining: %s", line)
    return Dataset.from_dict(output), report


def _triplet_columns(
    table: Pairs,
    positive_scores: np.ndarray,
    negatives: np.ndarray,
    negative_scores: np.ndarray,
) -> tuple[dict[str, list[str | float]], dict[int, int]]:
    """The output columns (:data:`OUTPUT_COLUMNS` and :data:`SCORE_COLUMNS`), one row per
    kept negative of each pair, and the pairs counted by their number of negatives."""
    columns: dict[str, list[str | float]] = {name: [] for name in OUTPUT_COLUMNS + SCORE_COLUMNS}
    counts: dict[int, int] = {}
    for (anchor, positive), positive_score in zip(table.pairs, positive_scores, strict=True):
        row = zip(negatives[anchor], negative_scores[anchor], strict=True)
        kept = [(int(n), float(score)) for n, score in row if n >= 0]
        counts[len(kept)] = counts.get(len(kept), 0) + 1
        for negative, negative_score in kept:
            columns["anchor"].append(table.anchors[anchor])
            columns["positive"].append(table.corpus[positive])
            columns["negative"].append(table.corpus[negative])
            columns["positive_score"].append(float(positive_score))
            columns["negative_score"].append(negative_score)
    return columns, counts
