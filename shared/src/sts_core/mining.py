"""Hard-negative mining: (anchor, positive) pairs become (anchor, positive, negative) triplets.

:func:`mine_hard_negatives` is sentence-transformers' ``util.mine_hard_negatives``: the same
parameters (names, order, defaults), the same output (``output_format`` ``"triplet"`` or
``"n-tuple"``, ``output_scores``) in the same order, and for ``sampling_strategy="random"``
the same draws (Python's ``random``: ``seed=None`` draws from its global state as the peer
does, an int from ``random.Random(seed)``, the draws the peer makes after
``random.seed(seed)``). Tested against the peer on real pairs (``test_mining_peer.py``).
It runs with the project's encoder or a ``SentenceTransformer`` and bounds memory:

1. The distinct anchors are the queries; the corpus is the extra ``corpus`` texts followed by
   the positives, each distinct text once. Both are embedded once, L2-normalised,
   :data:`ENCODE_BLOCK` texts per ``encode`` call, into memory-mapped files of the
   process's scratch folder, removed after the search (:func:`embed_to_file`).
2. Each query's ``range_max + max_positives`` nearest corpus texts by cosine
   (``max_positives``: the most rows of one anchor, repeated rows counted, as the peer),
   searched in chunks of at most ``faiss_batch_size`` queries whose score block stays under
   ``memory_mb`` (faiss ``IndexFlatIP`` with ``use_faiss``, else an exact matrix product);
   ties are broken by the lower corpus position (faiss breaks them its own way).
3. Removed from the candidates: the query's positives and **its own text** (the one
   difference from the peer, which proposes an anchor's own text as its negative when it is
   another pair's positive); with ``absolute_margin`` m, those with ``score + m > p``; with
   ``relative_margin`` r, those with ``score > p − |p|·r``, where p is the query's lowest
   positive score; those above ``max_score`` or below ``min_score``.
4. Of the ``range_max`` best left, the first ``range_min`` are skipped; then the best
   ``num_negatives`` (``top``) or, per anchor in order, ``rng.sample(range(max(found,
   num_negatives)), num_negatives)`` positions among those left (``random``), best first.
5. The output is grouped by anchor in order of first appearance: each of its distinct
   positives (repeated rows merged) with each negative found (``triplet``; a pair whose
   anchor found fewer gets fewer rows), or one row per positive with all ``num_negatives``
   (``n-tuple``; a pair whose anchor found fewer is left out). The report counts the pairs
   by how many negatives they got.

Pairs with a ``score`` column (a scored or labelled table; the peer reads only the two text
columns) are positives only when scored at or above ``positive_threshold`` — by default the
highest score of the table (the 1s of 0/1 labels, entailment of NLI classes) —; the others
are left out, their count reported.

Defaults as the peer's: ``range_max`` is ``range_min + num_negatives + max_positives``, or
``range_min + 10·num_negatives + max_positives`` when a margin or ``max_score`` filters.
``sts-mine`` writes the columns ``anchor``, ``positive``, ``negative`` (``--output-scores``:
``positive_score``, ``negative_score``), read by ``train_datasets`` as ``sentence1``,
``sentence2``, ``hard_negative``.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import math
import random
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sts_core.data.columns import column_array
from sts_core.data.scratch import scratch_subfolder
from sts_core.extras import require

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

SAMPLING = ("top", "random")
OUTPUT_FORMATS = ("triplet", "n-tuple")
OUTPUT_COLUMNS = ("anchor", "positive", "negative")
SCORE_COLUMNS = ("positive_score", "negative_score")
PAIR_COLUMNS = ("sentence1", "sentence2")


@dataclass(frozen=True)
class MiningSettings:
    """What to mine (the peer's parameter names; validated here, the one place).
    ``seed``: None draws from the ``random`` module's global state (as the peer)."""

    num_negatives: int = 3
    range_min: int = 0
    range_max: int | None = None
    max_score: float | None = None
    min_score: float | None = None
    absolute_margin: float | None = None
    relative_margin: float | None = None
    sampling_strategy: str = "top"
    seed: int | None = None
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
        if self.sampling_strategy not in SAMPLING:
            raise ValueError(
                f"sampling_strategy must be one of {', '.join(SAMPLING)}, "
                f"got {self.sampling_strategy!r}"
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
    max_rows: int  # the most rows of one anchor, repeated rows counted (the peer's max_positives)

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
        rows = np.bincount([anchor_index[a] for a in first], minlength=len(anchors))
        duplicates = len(first) - len(distinct)
        max_rows = int(rows.max()) if len(rows) else 0
        return cls(anchors, positives_of, corpus, pairs, duplicates, own, max_rows)

    def in_output_order(self) -> list[tuple[int, int]]:
        """The distinct pairs grouped by anchor in order of first appearance, each anchor's
        positives in order of first appearance (the peer's order)."""
        return [(a, p) for a, positives in enumerate(self.positives_of) for p in positives]


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
    missing = max(range_max - settings.range_min, count) - best.shape[1]
    if missing > 0:  # a corpus smaller than the window: −inf padding, as the peer's
        best = np.pad(best, ((0, 0), (0, missing)), constant_values=-np.inf)
        positions = np.pad(positions, ((0, 0), (0, missing)), constant_values=-1)
    if settings.sampling_strategy == "random":
        picked = random_positions(best, count, settings.seed)
        best = np.take_along_axis(best, picked, axis=1)
        positions = np.take_along_axis(positions, picked, axis=1)
    best, positions = best[:, :count], positions[:, :count]
    return best, np.where(np.isfinite(best), positions, -1)


def random_positions(best: np.ndarray, count: int, seed: int | None) -> np.ndarray:
    """The peer's draw, row by row: ``rng.sample(range(max(found, count)), count)`` where
    ``found`` is the row's finite scores (best first, so a drawn position at or past them is
    a −inf, dropped later), sorted best first (ascending positions); ``rng`` is
    ``random.Random(seed)``, or the ``random`` module itself for None."""
    rng: Any = random if seed is None else random.Random(seed)
    found = np.isfinite(best).sum(axis=1)
    picked = np.zeros((len(best), count), dtype=np.int64)
    for row, options in enumerate(found):
        drawn = sorted(rng.sample(range(max(int(options), count)), k=count))
        picked[row] = drawn
    return picked


# ----------------------------------------------------------------------------- the whole
def pairs_reading(option: str) -> Any:
    """How a table of pairs to mine is read, its columns mapped by ``option``: a score only
    from a named (or mapped) column; a column of numbers not named is refused."""
    from sts_core.data import TableReading
    from sts_core.data.tables import NLI_BY_NAMES

    return TableReading(option, "named", nli_hint=NLI_BY_NAMES)


@dataclass(frozen=True)
class SearchSettings:
    """How the nearest candidates are found: ``batch_size`` texts per encoding batch; at
    most ``faiss_batch_size`` queries per search chunk, fewer when their score block would
    pass ``memory_mb``; faiss's ``IndexFlatIP`` with ``use_faiss`` (else numpy)."""

    batch_size: int = 32
    faiss_batch_size: int = 16384
    memory_mb: float = 256
    use_faiss: bool = False

    def __post_init__(self) -> None:
        for name in ("batch_size", "faiss_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value}")
        check_search_settings(self.memory_mb, self.use_faiss)


#: texts per ``encode`` call when mining: each block's embeddings go to the memory-mapped
#: file before the next block is encoded
ENCODE_BLOCK = 16_384


def embed_to_file(model: Any, texts: list[str], batch_size: int, path: Path) -> np.ndarray:
    """:func:`embed` of ``texts``, :data:`ENCODE_BLOCK` texts at a time, into a float32
    ``.npy`` file at ``path``, returned memory-mapped: the process holds one block's
    embeddings; the whole array is the file's pages (the system's cache, which it
    reclaims), not the process's own memory. The caller removes the file."""
    block = ENCODE_BLOCK
    first = embed(model, texts[:block], batch_size)
    vectors = np.lib.format.open_memmap(
        path, mode="w+", dtype=np.float32, shape=(len(texts), first.shape[1])
    )
    vectors[: len(first)] = first
    for start in range(block, len(texts), block):
        vectors[start : start + block] = embed(model, texts[start : start + block], batch_size)
    vectors.flush()
    return vectors


def pair_scores(
    anchors: np.ndarray, corpus: np.ndarray, pairs: Sequence[tuple[int, int]]
) -> np.ndarray:
    """The inner product of each (anchor row, corpus row) of ``pairs``, float32,
    :data:`ENCODE_BLOCK` pairs at a time."""
    index = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    scores = np.empty(len(index), dtype=np.float32)
    for start in range(0, len(index), ENCODE_BLOCK):
        rows = index[start : start + ENCODE_BLOCK]
        scores[start : start + len(rows)] = np.einsum(
            "ij,ij->i", anchors[rows[:, 0]], corpus[rows[:, 1]]
        )
    return scores


def embed(model: Any, texts: list[str], batch_size: int) -> np.ndarray:
    """L2-normalised float32 embeddings of ``texts`` by the project's encoder
    (``encode(..., normalize=True)``) or a sentence-transformers model
    (``normalize_embeddings=True``)."""
    options: dict[str, Any] = {"batch_size": batch_size, "show_progress_bar": False}
    if "normalize_embeddings" in inspect.signature(model.encode).parameters:
        options |= {"normalize_embeddings": True, "convert_to_numpy": True}
    else:
        options["normalize"] = True
    return np.asarray(model.encode(texts, **options), dtype=np.float32)


def mine(
    pairs: Dataset,
    model: Any,
    settings: MiningSettings | None = None,
    *,
    corpus: Sequence[str] | None = None,
    search_settings: SearchSettings | None = None,
    output_format: str = "triplet",
    output_scores: bool = False,
    names: tuple[str, str] = ("anchor", "positive"),
    columns: Mapping[str, str] | None = None,
    log_level: int = logging.INFO,
) -> tuple[Any, MiningReport]:
    """:func:`mine_hard_negatives`'s selection and output with its report: ``pairs`` read
    as every table is (two text columns, ``columns`` mapping the project's names onto its
    own; a score only from a column named ``score`` or ``label`` or mapped, and then only
    the pairs at or above ``settings.positive_threshold`` are positives,
    :func:`positive_rows`; a column of numbers not named is refused); ``names``: the
    output's anchor and positive column names."""
    from sts_core.data import from_dataset

    settings = settings or MiningSettings()
    search_settings = search_settings or SearchSettings()
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(
            f"output_format must be one of {', '.join(OUTPUT_FORMATS)}, got {output_format!r} "
            "(sentence-transformers' labeled-pair and labeled-list are not built here)"
        )
    if len(pairs) == 0:
        raise ValueError("no pairs to mine hard negatives for")
    pairs = from_dataset(pairs, columns, name="pairs", reading=pairs_reading("columns"))
    rows, positives = positive_rows(pairs, settings.positive_threshold)
    first, second = (_rows_of(list(pairs[name]), rows) for name in PAIR_COLUMNS)
    table = Pairs.build(first, second, list(corpus or []))  # not empty: positive_rows
    folder = scratch_subfolder("sts-mine-")  # the embeddings' files, removed after the search
    try:
        report, mined, searched = _search(table, model, settings, search_settings, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report.positives = positives
    output, report.pairs_by_negatives = mined.columns(output_format, output_scores, names)
    report.triplets = len(output[names[0]])
    report.seconds["select"] = round(time.perf_counter() - searched, 3)
    for line in report.lines():
        logger.log(log_level, "mining: %s", line)
    return _dataset(output), report


def _search(
    table: Pairs,
    model: Any,
    settings: MiningSettings,
    search_settings: SearchSettings,
    folder: Path,
) -> tuple[MiningReport, Mined, float]:
    """Embed ``table``'s anchors and corpus into memory-mapped files in ``folder``, search
    each anchor's candidates, filter and choose its negatives; the report, the choice, and
    when the search ended (``time.perf_counter``)."""
    started = time.perf_counter()
    batch_size = search_settings.batch_size
    anchor_vectors = embed_to_file(model, table.anchors, batch_size, folder / "anchors.npy")
    corpus_vectors = embed_to_file(model, table.corpus, batch_size, folder / "corpus.npy")
    encoded = time.perf_counter()
    range_max = settings.window(table.max_rows)
    chunk = min(chunk_rows(len(table.corpus), search_settings.memory_mb),
                search_settings.faiss_batch_size)  # fmt: skip
    k = range_max + table.max_rows
    found, indices = search(anchor_vectors, corpus_vectors, k, chunk, search_settings.use_faiss)
    searched = time.perf_counter()
    ordered = table.in_output_order()
    positive_scores = pair_scores(anchor_vectors, corpus_vectors, ordered)
    lowest = np.full(len(table.anchors), np.inf, dtype=np.float32)
    np.minimum.at(lowest, [a for a, _ in ordered], positive_scores)
    report = MiningReport(
        pairs=len(table.pairs),
        duplicate_pairs=table.duplicates,
        anchors=len(table.anchors),
        corpus=len(table.corpus),
        range_max=range_max,
        candidates_per_anchor=int(found.shape[1]),
        search="faiss IndexFlatIP" if search_settings.use_faiss else "exact (numpy)",
        chunk_rows=chunk,
    )
    report.removed = remove_candidates(found, indices, table, lowest, settings)
    negative_scores, negatives = choose_negatives(found, indices, settings, range_max)
    report.seconds = {
        "encode": round(encoded - started, 3),
        "search": round(searched - encoded, 3),
    }
    return report, Mined(table, ordered, positive_scores, negatives, negative_scores), searched


def _dataset(columns: dict[str, list[Any]]) -> Any:
    from datasets import Dataset

    return Dataset.from_dict(columns)


@dataclass
class Mined:
    """The chosen negatives of each anchor, and the pairs in output order with their
    scores; :meth:`columns` lays them out."""

    table: Pairs
    ordered: list[tuple[int, int]]
    positive_scores: np.ndarray
    negatives: np.ndarray
    negative_scores: np.ndarray

    def found(self, anchor: int) -> list[tuple[int, float]]:
        row = zip(self.negatives[anchor], self.negative_scores[anchor], strict=True)
        return [(int(n), float(score)) for n, score in row if n >= 0]

    def columns(
        self, output_format: str, output_scores: bool, names: tuple[str, str]
    ) -> tuple[dict[str, list[Any]], dict[int, int]]:
        """The peer's columns for ``output_format`` (``triplet``: one row per negative;
        ``n-tuple``: one row per pair that got all ``num_negatives``, columns
        ``negative_1`` …), with ``scores`` ([positive, negatives…]) when asked; and the
        pairs counted by their number of negatives."""
        width = self.negatives.shape[1]
        negative_names = ["negative"] if output_format == "triplet" else [
            f"negative_{i}" for i in range(1, width + 1)
        ]  # fmt: skip
        out: dict[str, list[Any]] = {name: [] for name in (*names, *negative_names)}
        if output_scores:
            out["scores"] = []
        counts: dict[int, int] = {}
        corpus, anchors = self.table.corpus, self.table.anchors
        for (anchor, positive), positive_score in zip(
            self.ordered, self.positive_scores.tolist(), strict=True
        ):
            kept = self.found(anchor)
            counts[len(kept)] = counts.get(len(kept), 0) + 1
            if output_format == "triplet":
                groups = [[negative] for negative in kept]
            else:
                groups = [kept] if len(kept) == width else []
            for group in groups:
                out[names[0]].append(anchors[anchor])
                out[names[1]].append(corpus[positive])
                for name, (negative, _) in zip(negative_names, group, strict=True):
                    out[name].append(corpus[negative])
                if output_scores:
                    out["scores"].append([positive_score, *(score for _, score in group)])
        return out, dict(sorted(counts.items()))


#: sentence-transformers' parameters that are not built here, and the value that means "off"
NOT_BUILT = {
    "cross_encoder": None,
    "query_prompt_name": None,
    "query_prompt": None,
    "corpus_prompt_name": None,
    "corpus_prompt": None,
    "include_positives": False,
    "use_multi_process": False,
    "cache_folder": None,
}


def mine_hard_negatives(
    dataset: Dataset,
    model: Any,
    anchor_column_name: str | None = None,
    positive_column_name: str | None = None,
    corpus: list[str] | None = None,
    cross_encoder: Any = None,
    range_min: int = 0,
    range_max: int | None = None,
    max_score: float | None = None,
    min_score: float | None = None,
    absolute_margin: float | None = None,
    relative_margin: float | None = None,
    num_negatives: int = 3,
    sampling_strategy: str = "top",
    query_prompt_name: str | None = None,
    query_prompt: str | None = None,
    corpus_prompt_name: str | None = None,
    corpus_prompt: str | None = None,
    include_positives: bool = False,
    output_format: str = "triplet",
    output_scores: bool = False,
    batch_size: int = 32,
    faiss_batch_size: int = 16384,
    use_faiss: bool = False,
    use_multi_process: bool | list[str] = False,
    verbose: bool = True,
    cache_folder: str | None = None,
    *,
    seed: int | None = None,
    positive_threshold: float | None = None,
    memory_mb: float = 256,
    columns: Mapping[str, str] | None = None,
) -> Any:
    """sentence-transformers' ``util.mine_hard_negatives`` (6.2), the same parameters and
    output, with the project's encoder or a ``SentenceTransformer`` as ``model``; see the
    module docstring for the selection and the one difference (an anchor's own text is
    never its negative). The anchor and positive columns are ``anchor_column_name`` and
    ``positive_column_name``, else the first two columns, and name the output's columns.
    Beyond the peer: ``seed`` for ``random`` sampling, ``positive_threshold`` for a scored
    table, ``memory_mb`` bounding the search's score blocks, ``columns`` mapping the
    project's column names onto the dataset's (``{"score": "sim"}``). Not built
    (ValueError when set): ``cross_encoder``, the prompts, ``include_positives``,
    ``use_multi_process``, ``cache_folder``; output formats other than ``triplet`` and
    ``n-tuple``. ``verbose``: log the report at INFO (else DEBUG)."""
    given = locals()
    for name, off in NOT_BUILT.items():
        if given[name] != off:
            raise ValueError(
                f"mine_hard_negatives: {name} is not built in sts_core (sentence-transformers' "
                f"util.mine_hard_negatives has it); leave it at {off!r}"
            )
    settings = MiningSettings(
        num_negatives=num_negatives,
        range_min=range_min,
        range_max=range_max,
        max_score=max_score,
        min_score=min_score,
        absolute_margin=absolute_margin,
        relative_margin=relative_margin,
        sampling_strategy=sampling_strategy,
        seed=seed,
        positive_threshold=positive_threshold,
    )
    search_settings = SearchSettings(batch_size, faiss_batch_size, memory_mb, use_faiss)
    names, mapping = pair_names(dataset, anchor_column_name, positive_column_name, columns)
    mined, _ = mine(
        dataset,
        model,
        settings,
        corpus=corpus,
        search_settings=search_settings,
        output_format=output_format,
        output_scores=output_scores,
        names=names,
        columns=mapping,
        log_level=logging.INFO if verbose else logging.DEBUG,
    )
    return mined


def pair_names(
    dataset: Dataset,
    anchor: str | None,
    positive: str | None,
    columns: Mapping[str, str] | None,
) -> tuple[tuple[str, str], dict[str, str]]:
    """The anchor and positive column names, as the peer picks them (``columns``'
    ``sentence1``/``sentence2``, else the names given and present, else the first and second
    column), and the column mapping that reads them as the pair (``columns``' other names
    kept: ``{"score": "sim"}``)."""
    mapping = dict(columns or {})
    names = dataset.column_names
    anchor = mapping.get("sentence1", anchor)
    positive = mapping.get("sentence2", positive)
    if len(names) < 2:
        raise ValueError(
            f"mine_hard_negatives: the dataset needs two columns (anchor, positive), it has {names}"
        )
    if not anchor or anchor not in names:
        anchor = names[0]
    if not positive or positive not in names:
        positive = names[1]
    return (anchor, positive), {**mapping, "sentence1": anchor, "sentence2": positive}
