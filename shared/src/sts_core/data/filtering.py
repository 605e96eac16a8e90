"""Test-overlap filtering, label rescaling and mapping, and merging of training sets.

The filter follows Appendix A of the regression paper (translated ReLU / smooth
K2): a training pair is dropped when ``(s1, s2)`` or ``(s2, s1)`` equals a pair of
a test set (STS12-16, STS-B, SICK-R), whatever the scores. Sentences are compared
exactly, as the readers return them (stripped of surrounding whitespace).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, Features, Value, concatenate_datasets

from sts_core.names import STS_TASKS

from ._io import PathLike, score_range_problem
from .columns import column_array, column_list
from .errors import DataConfigError, DataFormatError
from .named_sets import DEFAULT_VARIANT, load_named
from .scratch import record_batches

__all__ = [
    "FilterReport",
    "check_score_range",
    "filter_test_overlap",
    "load_filtered_stsb_sick",
    "load_test_sets",
    "map_labels",
    "merge_datasets",
    "rescale_scores",
    "resolve_label_mapping",
    "sick_to_sts",
]

logger = logging.getLogger("sts_core.data")

Pair = tuple[str, str]


@dataclass
class FilterReport:
    """Outcome of :func:`filter_test_overlap`.

    Attributes:
        kept: training rows kept.
        removed: training rows removed (each counted once).
        removed_by_source: test set name -> removed rows matching it (a row matching
            several test sets counts under each).
    """

    kept: int
    removed: int
    removed_by_source: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Rows before filtering."""
        return self.kept + self.removed

    def to_dict(self) -> dict:
        """Plain dict (JSON-serialisable), with ``total`` added."""
        return {**asdict(self), "total": self.total}

    def __str__(self) -> str:
        by_source = ", ".join(f"{name}: {n}" for name, n in self.removed_by_source.items())
        return (
            f"kept {self.kept} of {self.total} training pairs, removed {self.removed} "
            f"found in test sets ({by_source or 'none'})"
        )


def _test_pair_index(test_sets: Mapping[str, Dataset]) -> dict[Pair, set[str]]:
    """Map every test pair, in both orders, to the names of the test sets holding it."""
    index: dict[Pair, set[str]] = {}
    for name, ds in test_sets.items():
        for s1, s2 in zip(column_list(ds, "sentence1"), column_list(ds, "sentence2"), strict=True):
            index.setdefault((s1, s2), set()).add(name)
            index.setdefault((s2, s1), set()).add(name)
    return index


def filter_test_overlap(
    train: Dataset, test_sets: Mapping[str, Dataset], log: bool = True
) -> tuple[Dataset, FilterReport]:
    """Drop training pairs that occur, in either order, in any of ``test_sets``.

    Returns:
        the kept rows (order preserved; ``train`` itself when none is dropped) and a
        :class:`FilterReport` (logged with ``log``).
    """
    index = _test_pair_index(test_sets)
    found = _rows_found(train, index)
    by_source = dict.fromkeys(test_sets, 0)
    if len(found):
        matched = train.select(found)
        firsts, seconds = column_list(matched, "sentence1"), column_list(matched, "sentence2")
        pairs = zip(firsts, seconds, strict=True)
        for pair in pairs:
            for name in index[pair]:
                by_source[name] += 1
    report = FilterReport(len(train) - len(found), len(found), by_source)
    if log:
        logger.info("test-overlap filter: %s", report)
    if not len(found):
        return train, report
    return train.select(np.setdiff1d(np.arange(len(train)), found)), report


#: what joins a pair's two texts into one key (a text holding it is matched in Python)
_KEY_JOIN = "\x00"


def _rows_found(train: Dataset, index: Mapping[Pair, Any]) -> np.ndarray:
    """The rows of ``train`` whose ``(sentence1, sentence2)`` is a key of ``index``, in
    order: matched by Arrow over keys that join a pair's texts (a million rows in a
    second), batch by batch (:func:`~sts_core.data.scratch.record_batches`), or, where a
    text holds the joining character, pair by pair in Python."""
    known = pa.array([_KEY_JOIN.join(pair) for pair in index], type=pa.string())
    by_python = any(_KEY_JOIN in text for pair in index for text in pair)
    found, start = [], 0
    for batch in record_batches(train, ["sentence1", "sentence2"]):
        first, second = batch.column("sentence1"), batch.column("sentence2")
        if by_python or any(
            pc.any(pc.match_substring(texts, _KEY_JOIN)).as_py() for texts in (first, second)
        ):
            pairs = zip(first.to_pylist(), second.to_pylist(), strict=True)
            rows = np.array([row for row, pair in enumerate(pairs) if pair in index], np.int64)
        else:
            keys = pc.binary_join_element_wise(first, second, _KEY_JOIN)
            rows = np.flatnonzero(pc.is_in(keys, value_set=known).to_numpy(zero_copy_only=False))
        found.append(rows + start)
        start += batch.num_rows
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def load_test_sets(
    data_dir: PathLike | None = None, variant: str = DEFAULT_VARIANT
) -> dict[str, Dataset]:
    """The seven STS test sets (STS12-16, STS-B test, SICK-R test) by registry name."""
    return {name: load_named(name, "test", data_dir, variant) for name in STS_TASKS}


def rescale_scores(
    ds: Dataset,
    source_range: tuple[float, float],
    target_range: tuple[float, float] = (0.0, 1.0),
) -> Dataset:
    """Map ``score`` linearly from ``source_range`` onto ``target_range``.

    Raises:
        ValueError: an empty source range, or a score outside ``source_range``.
    """
    (lo, hi), (new_lo, new_hi) = source_range, target_range
    if hi <= lo:
        raise ValueError(f"source range {source_range} is empty")
    scores = column_array(ds, "score")
    outside = (scores < lo) | (scores > hi)
    if outside.any():
        first = int(np.argmax(outside))
        raise ValueError(
            f"row {first}: score {scores[first]:g} outside source range {source_range}"
        )
    rescaled = new_lo + (scores - lo) * ((new_hi - new_lo) / (hi - lo))
    columns = ds.column_names
    return ds.remove_columns("score").add_column("score", rescaled).select_columns(columns)


def check_score_range(ds: Dataset, score_range: tuple[float, float], source: str) -> None:
    """Every ``score`` of ``ds`` within ``score_range`` (inclusive), or DataFormatError
    naming ``source`` (the file or dataset the rows were read from), the first row outside
    (1-based, in the order read: the Nth pair of the file) and the column. DataConfigError
    when ``ds`` has no ``score`` column."""
    if "score" not in ds.column_names:
        raise DataConfigError(
            f"score_range: {source} has no score column to rescale (it has "
            f"{', '.join(ds.column_names)})"
        )
    problem = score_range_problem(column_array(ds, "score"), score_range, "score")
    if problem:
        raise DataFormatError(source, problem)


def resolve_label_mapping(mapping: Mapping[Any, Any], column: str) -> dict[float, float]:
    """``mapping`` as {value in ``column``: new value}. A key is a number (the column's value)
    or an NLI class name, which stands for the value the NLI readers give that class in
    ``column``: ``label`` (entailment 0, neutral 1, contradiction 2) or ``score``
    (entailment 2, neutral 1, contradiction 0). DataConfigError on anything else."""
    from .nli import NLI_LABELS, NLI_SCORES

    resolved: dict[float, float] = {}
    for key, value in mapping.items():
        name = str(key).strip().lower()
        if name in NLI_LABELS:
            if column not in ("label", "score"):
                raise DataConfigError(
                    f"label_mapping: the class name {key!r} stands for a value of the NLI "
                    f"readers' label or score column, not of {column!r}"
                )
            number = NLI_LABELS[name] if column == "label" else NLI_SCORES[NLI_LABELS[name]]
        else:
            problem = f"label_mapping: key {key!r} is neither a number nor an NLI class"
            number = _number(key, problem)
        target = _number(value, f"label_mapping: {key!r}: the value {value!r} is not a number")
        if float(number) in resolved:
            raise DataConfigError(f"label_mapping: {key!r} names the value {number:g} twice")
        resolved[float(number)] = target
    if not resolved:
        raise DataConfigError("label_mapping is empty")
    return resolved


def _number(value: Any, problem: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataConfigError(problem) from None
    if not np.isfinite(number) or isinstance(value, bool):
        raise DataConfigError(problem)
    return number


def map_labels(
    ds: Dataset, column: str, mapping: Mapping[Any, Any]
) -> tuple[Dataset, dict[str, int]]:
    """Replace each value of ``column`` by ``mapping[value]`` (keys as
    :func:`resolve_label_mapping` reads them; the column becomes float64). Every value in the
    data must have a mapping: otherwise DataConfigError naming the unmapped values and
    their counts (no row is dropped). Returns the dataset and the rows per new value."""
    if column not in ds.column_names:
        raise DataConfigError(
            f"label_mapping: the training set has no column {column!r} "
            f"(it has {', '.join(ds.column_names)})"
        )
    resolved = resolve_label_mapping(mapping, column)
    values = column_array(ds, column)
    unmapped = sorted(set(values.tolist()) - set(resolved))
    if unmapped:
        counts = ", ".join(f"{v:g} ({int((values == v).sum())} rows)" for v in unmapped[:5])
        raise DataConfigError(
            f"label_mapping has no entry for the value(s) {counts} of column {column!r}; "
            f"it maps {', '.join(f'{k:g}' for k in sorted(resolved))}"
        )
    mapped = np.array([resolved[v] for v in values.tolist()], dtype=np.float64)
    mapped_counts = {f"{k:g}": int((mapped == k).sum()) for k in sorted(set(mapped.tolist()))}
    columns = ds.column_names
    ds = ds.remove_columns(column).add_column(column, mapped).select_columns(columns)
    return ds, mapped_counts


def sick_to_sts(ds: Dataset) -> Dataset:
    """SICK relatedness 1-5 onto the STS scale 0-5: ``5 * (x - 1) / 4``."""
    return rescale_scores(ds, (1.0, 5.0), (0.0, 5.0))


def merge_datasets(
    *datasets: Dataset,
    names: Sequence[str] | None = None,
    columns: Sequence[str] = ("sentence1", "sentence2", "score"),
) -> Dataset:
    """Concatenate datasets on their common ``columns`` plus a ``source`` column.

    ``source`` is ``names[i]`` for the i-th dataset (default ``"0"``, ``"1"``, ...),
    or the dataset's own ``source`` values when it already has that column.
    """
    names = list(names) if names is not None else [str(i) for i in range(len(datasets))]
    if len(names) != len(datasets):
        raise ValueError(f"{len(datasets)} datasets but {len(names)} names")
    features = Features({c: _merged_type(c, datasets) for c in (*columns, "source")})
    parts = []
    for name, ds in zip(names, datasets, strict=True):
        missing = [c for c in columns if c not in ds.column_names]
        if missing:
            raise ValueError(f"dataset {name!r} lacks column(s) {missing}")
        if "source" not in ds.column_names:
            ds = ds.add_column("source", [name] * len(ds))
        ds = ds.select_columns([*columns, "source"])
        parts.append(ds if ds.features == features else ds.cast(features))
    return concatenate_datasets(parts)


def _merged_type(column: str, datasets: Sequence[Dataset]) -> Value:
    """A column's type in the merge: float64 for ``score``; the type every dataset gives it
    when they agree (an NLI ``label`` stays an integer); else string."""
    if column == "score":
        return Value("float64")
    types = {str(ds.features[column]) for ds in datasets if column in ds.column_names}
    owners = [ds for ds in datasets if column in ds.column_names]
    if len(types) == 1 and len(owners) == len(datasets):
        feature = owners[0].features[column]
        if isinstance(feature, Value):
            return feature
    return Value("string")


def load_filtered_stsb_sick(
    data_dir: PathLike | None = None, variant: str = DEFAULT_VARIANT
) -> tuple[Dataset, FilterReport]:
    """STS-B train + SICK-R train (rescaled to 0-5), minus pairs of the seven test sets.

    Returns:
        the merged, filtered training set (``source`` is ``"stsb"`` or ``"sickr"``) and
        the :class:`FilterReport`.
    """
    stsb = load_named("stsb", "train", data_dir, variant)
    sick = sick_to_sts(load_named("sickr", "train", data_dir, variant))
    train = merge_datasets(stsb, sick, names=("stsb", "sickr"))
    return filter_test_overlap(train, load_test_sets(data_dir, variant))
