"""The table checks of :func:`~sts_core.data.tables.normalise_table`, vectorised by Arrow.

A table of millions of rows is checked and mapped onto the project's columns here without
a Python object per cell: the texts stripped and refused when missing or blank, the scores
read as the one rule for numbers reads them (:func:`~sts_core.data._io.parse_number`) or
taken from a numeric column, refused when not finite or outside the score range, the
labels beside them checked to be integers. The result is an Arrow-backed
``datasets.Dataset`` with the project's types.

Only what passes is done here: when any check fails, or the table is of a kind these
checks do not cover (NLI classes, a ranking set's query ids, a text column that is not
text, a dataset with an indices mapping), :func:`vectorised_table` returns None and
``normalise_table`` reads the table row by row, which names the first offending row,
column and value with the messages the project has always given.

The table is read batch by batch (:func:`~sts_core.data.scratch.record_batches`): a table
read from a file is checked as it is read from its Arrow file and written, checked, to a
second Arrow file that the result memory-maps, so that neither the table nor its checked
copy is held in memory; a table in memory gives a table in memory.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, Features, Value

from ._io import COLUMN_TYPES, PathLike, ScoreRange, score_range_problem
from .errors import DataFormatError
from .scratch import has_own_files, record_batches, scratch_subfolder

__all__ = ["STRING_TYPES", "column_dtype", "vectorised_table"]

#: the ``datasets`` types of text columns
STRING_TYPES = ("string", "large_string")
#: the characters Python's ``str.strip()`` removes (Unicode's White_Space and the
#: separators \x1c-\x1f), so that Arrow strips exactly what the row reading strips
PYTHON_WHITESPACE = "".join(chr(code) for code in range(0x3001) if chr(code).isspace())
#: what the caller does with the labels found: ``note(labels)`` warns about NLI-like ones
LabelNote = Callable[[Mapping[str, Any]], None]
#: the project's text columns, in the order the row reading gives them
_TEXTS = ("sentence1", "sentence2", "hard_negative", "sentence")
#: distinct labels kept for the note: more than the NLI-like ones, so a set this full is
#: not NLI-like
_LABELS_KEPT = 8


def vectorised_table(
    table: Dataset,
    found: Mapping[str, str],
    source: str | PathLike,
    score_range: ScoreRange | None,
    note: LabelNote,
    name_row: Callable[[int], None] = lambda row: None,
) -> Dataset | None:
    """``table`` as the project's columns (``found``: project column → the table's), or
    None when a check fails or the table needs the row-by-row reading. A score outside
    ``score_range`` is a DataFormatError here already (its message names the first row
    outside, as the row reading's does). ``note`` receives ``{"label": distinct labels}``
    when a label column was read as scores (the NLI-like warning). When a check fails,
    ``name_row`` is called with the first row (1-based) that fails one, to raise that
    row's error (found by halving the failing batch, so a bad row of a large table is
    named without reading the table row by row); if it returns, so does this, with None."""
    if table._indices is not None or "query_id" in found:
        return None
    names = list(dict.fromkeys(found.values()))
    kinds = {name: column_dtype(table, name) for name in names}
    folder = scratch_subfolder("checked-") if has_own_files(table) else None
    checked = _Checked(found, kinds, folder)
    failed = checked.read(record_batches(table, names))
    if failed is not None:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        name_row(failed)
        return None
    dataset = checked.dataset()
    if "score" in dataset.column_names and score_range is not None:
        name = found["score"] if "score" in found else found["label"]
        scores = dataset.data.column("score").to_numpy()
        problem = score_range_problem(scores, score_range, name)
        if problem:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            raise DataFormatError(source, problem)
    if "label" in dataset.column_names:  # the note says nothing where a score column was found
        note({"label": checked.distinct_labels()})
    return dataset


class _Checked:
    """The checked batches of one table, written to ``folder`` (or kept in memory)."""

    def __init__(
        self, found: Mapping[str, str], kinds: Mapping[str, str | None], folder: Path | None
    ) -> None:
        self.found, self.kinds, self.folder = found, kinds, folder
        self.batches: list[pa.RecordBatch] = []
        self.writer: pa.ipc.RecordBatchStreamWriter | None = None
        self.schema: pa.Schema | None = None
        # a label column alone gives the scores, and the classes when every value is an
        # integer: known after the last batch; its distinct values (a few) for the note
        self.label_only = "label" in found and "score" not in found
        self.integral = True
        self.labels: set[int | float] = set()

    def read(self, batches: Iterable[pa.RecordBatch]) -> int | None:
        """Check and keep every batch; None when all pass, else the first row (1-based)
        that fails a check."""
        start = 0
        try:
            for batch in batches:
                columns = _checked_columns(batch, self.found, self.kinds)
                if columns is None:
                    return start + _first_failing_row(batch, self.found, self.kinds)
                self._keep(columns)
                start += batch.num_rows
            return None
        finally:
            if self.writer is not None:
                self.writer.close()

    def _keep(self, columns: dict[str, pa.Array]) -> None:
        if self.label_only:
            self.integral = self.integral and _integral(columns["score"])
            if len(self.labels) <= _LABELS_KEPT:
                self.labels.update(pc.unique(columns["score"]).to_pylist()[: _LABELS_KEPT + 1])
        if self.schema is None:
            features = Features({n: Value(COLUMN_TYPES.get(n, "string")) for n in columns})
            self.schema = features.arrow_schema
        batch = pa.record_batch(list(columns.values()), names=list(columns)).cast(self.schema)
        if self.folder is None:
            self.batches.append(batch)
            return
        if self.writer is None:
            self.writer = pa.ipc.new_stream(str(self.folder / "table.arrow"), self.schema)
        self.writer.write_batch(batch)

    def dataset(self) -> Dataset:
        """The checked table: memory-mapped from its file, or in memory; a label column
        alone of integers also as ``label``."""
        if self.folder is not None:
            dataset = Dataset.from_file(str(self.folder / "table.arrow"))
        else:
            dataset = Dataset(pa.Table.from_batches(self.batches))
        if not (self.label_only and self.integral):
            return dataset
        labels = dataset.data.column("score").to_numpy()
        return dataset.add_column("label", labels, feature=Value("int64"))

    def distinct_labels(self) -> list[int]:
        """The distinct classes of a label column alone (the first few)."""
        return sorted(int(label) for label in self.labels)


def _checked_columns(
    batch: pa.RecordBatch, found: Mapping[str, str], kinds: Mapping[str, str | None]
) -> dict[str, pa.Array] | None:
    """:func:`_columns`, None also where Arrow refuses a value (an integer beyond 2**53)."""
    try:
        return _columns(batch, found, kinds)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _first_failing_row(
    batch: pa.RecordBatch, found: Mapping[str, str], kinds: Mapping[str, str | None]
) -> int:
    """The first row (1-based) of ``batch``, which fails a check, that does: the shortest
    failing prefix found by halving (every check is of single rows)."""
    low, high = 1, batch.num_rows
    while low < high:
        middle = (low + high) // 2
        if _checked_columns(batch.slice(0, middle), found, kinds) is None:
            high = middle
        else:
            low = middle + 1
    return low


def _columns(
    batch: pa.RecordBatch, found: Mapping[str, str], kinds: Mapping[str, str | None]
) -> dict[str, pa.Array] | None:
    """The texts, ``score`` and ``label`` of one batch, checked; None when a value fails
    its check."""
    columns: dict[str, pa.Array] = {}
    for project in _TEXTS:
        if project in found:
            name = found[project]
            texts = _texts(batch.column(name), kinds[name])
            if texts is None:
                return None
            columns[project] = texts
    labels = _labels(batch, found, kinds)
    return None if labels is None else {**columns, **labels}


def _texts(values: pa.Array, kind: str | None) -> pa.Array | None:
    """A text column stripped of surrounding spaces; None when a value is missing, blank or
    not a text."""
    if kind not in STRING_TYPES or values.null_count:
        return None
    stripped = _stripped(values)
    if len(stripped) and pc.min(pc.utf8_length(stripped)).as_py() == 0:
        return None
    return stripped.cast(pa.string())


def _labels(
    batch: pa.RecordBatch, found: Mapping[str, str], kinds: Mapping[str, str | None]
) -> dict[str, pa.Array] | None:
    """``score`` and ``label`` as :func:`~sts_core.data.tables.normalise_table` reads them
    (against sentence-transformers: docs/data.md); None when a value fails its check. A
    label column alone gives ``score`` here; whether it is also the class is known after
    every batch."""
    if "score" in found:
        scores = _numbers(batch.column(found["score"]), kinds[found["score"]])
        if scores is None:
            return None
        if "label" not in found:
            return {"score": scores}
        labels = _numbers(batch.column(found["label"]), kinds[found["label"]])
        if labels is None:
            return None
        # a label that is no integer: the safe cast refuses it (ArrowInvalid → the row reading)
        return {"score": scores, "label": labels.cast(pa.int64())}
    if "label" in found:
        scores = _numbers(batch.column(found["label"]), kinds[found["label"]])
        return None if scores is None else {"score": scores}
    return {}


def _numbers(values: pa.Array, kind: str | None) -> pa.Array | None:
    """A column of finite numbers as float64: a numeric column, or texts that the one rule
    for numbers reads; None otherwise (a missing value, a bool, a text that is no number,
    a number that is not finite)."""
    if values.null_count:
        return None
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        numbers = values.cast(pa.float64())
    elif kind in STRING_TYPES:
        # Arrow's parser takes what the one rule for numbers takes, and inf/nan, which the
        # finite check below refuses (tested form by form); a text it cannot read is an
        # ArrowInvalid, and the row reading names it
        numbers = _stripped(values).cast(pa.float64())
    else:
        return None
    if len(numbers) and not pc.all(pc.is_finite(numbers)).as_py():
        return None
    return numbers


def _stripped(values: pa.Array) -> pa.Array:
    return pc.utf8_trim(values, characters=PYTHON_WHITESPACE)


def _integral(numbers: pa.Array) -> bool:
    """Whether every number is an integer (true of no numbers)."""
    return bool(pc.all(pc.equal(pc.floor(numbers), numbers)).as_py() in (True, None))


def column_dtype(table: Dataset, name: str) -> str | None:
    """A column's ``datasets`` type (``string``, ``int64``…; None for a ``Json`` column)."""
    return getattr(table.features[name], "dtype", None)
