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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, Features, Value

from ._io import COLUMN_TYPES, PathLike, ScoreRange, score_range_problem
from .errors import DataFormatError

__all__ = ["STRING_TYPES", "column_dtype", "vectorised_table"]

#: the ``datasets`` types of text columns
STRING_TYPES = ("string", "large_string")
#: the characters Python's ``str.strip()`` removes (Unicode's White_Space and the
#: separators \x1c-\x1f), so that Arrow strips exactly what the row reading strips
PYTHON_WHITESPACE = "".join(chr(code) for code in range(0x3001) if chr(code).isspace())
#: what the caller does with the labels found: ``note(labels)`` warns about NLI-like ones
LabelNote = Callable[[Mapping[str, Any]], None]


def vectorised_table(
    table: Dataset,
    found: Mapping[str, str],
    source: str | PathLike,
    score_range: ScoreRange | None,
    note: LabelNote,
) -> Dataset | None:
    """``table`` as the project's columns (``found``: project column → the table's), or
    None when a check fails or the table needs the row-by-row reading. A score outside
    ``score_range`` is a DataFormatError here already (its message names the first row
    outside, as the row reading's does). ``note`` receives ``{"label": distinct labels}``
    when a label column was read as scores (the NLI-like warning)."""
    if table._indices is not None or "query_id" in found:
        return None
    try:
        columns = _columns(table, found)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # e.g. an integer beyond 2**53
        return None
    if columns is None:
        return None
    if "score" in columns and score_range is not None:
        name = found["score"] if "score" in found else found["label"]
        problem = score_range_problem(columns["score"].to_numpy(), score_range, name)
        if problem:
            raise DataFormatError(source, problem)
    if "label" in columns:  # the note itself says nothing where a score column was found
        note({"label": pc.unique(columns["label"]).to_pylist()})
    return _dataset(columns)


def _columns(table: Dataset, found: Mapping[str, str]) -> dict[str, pa.ChunkedArray] | None:
    """The texts, ``score`` and ``label``, checked; None when a value fails its check."""
    columns: dict[str, pa.ChunkedArray] = {}
    for project in ("sentence1", "sentence2", "hard_negative", "sentence"):
        if project in found:
            texts = _texts(table, found[project])
            if texts is None:
                return None
            columns[project] = texts
    labels = _labels(table, found)
    return None if labels is None else {**columns, **labels}


def _texts(table: Dataset, name: str) -> pa.ChunkedArray | None:
    """A text column stripped of surrounding spaces; None when a value is missing, blank or
    not a text."""
    values = table.data.column(name)
    if column_dtype(table, name) not in STRING_TYPES or values.null_count:
        return None
    stripped = _stripped(values)
    if len(stripped) and pc.min(pc.utf8_length(stripped)).as_py() == 0:
        return None
    return stripped.cast(pa.string())


def _labels(table: Dataset, found: Mapping[str, str]) -> dict[str, pa.ChunkedArray] | None:
    """``score`` and ``label`` as :func:`~sts_core.data.tables.normalise_table` reads them
    (sentence-transformers' convention); None when a value fails its check."""
    if "score" in found:
        scores = _numbers(table, found["score"])
        if scores is None:
            return None
        if "label" not in found:
            return {"score": scores}
        labels = _numbers(table, found["label"])
        if labels is None:
            return None
        # a label that is no integer: the safe cast refuses it (ArrowInvalid → the row reading)
        return {"score": scores, "label": labels.cast(pa.int64())}
    if "label" in found:
        scores = _numbers(table, found["label"])
        if scores is None:
            return None
        if _integral(scores):
            return {"score": scores, "label": scores.cast(pa.int64())}
        return {"score": scores}
    return {}


def _numbers(table: Dataset, name: str) -> pa.ChunkedArray | None:
    """A column of finite numbers as float64: a numeric column, or texts that the one rule
    for numbers reads; None otherwise (a missing value, a bool, a text that is no number,
    a number that is not finite)."""
    values = table.data.column(name)
    kind = values.type
    if values.null_count:
        return None
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        numbers = values.cast(pa.float64())
    elif column_dtype(table, name) in STRING_TYPES:
        # Arrow's parser takes what the one rule for numbers takes, and inf/nan, which the
        # finite check below refuses (tested form by form); a text it cannot read is an
        # ArrowInvalid, and the row reading names it
        numbers = _stripped(values).cast(pa.float64())
    else:
        return None
    if len(numbers) and not pc.all(pc.is_finite(numbers)).as_py():
        return None
    return numbers


def _stripped(values: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.utf8_trim(values, characters=PYTHON_WHITESPACE)


def _integral(numbers: pa.ChunkedArray) -> bool:
    """Whether every number is an integer (a table has rows: normalise_table refuses one
    without)."""
    return bool(pc.all(pc.equal(pc.floor(numbers), numbers)).as_py())


def column_dtype(table: Dataset, name: str) -> str | None:
    """A column's ``datasets`` type (``string``, ``int64``…; None for a ``Json`` column)."""
    return getattr(table.features[name], "dtype", None)


def _dataset(columns: Mapping[str, pa.ChunkedArray]) -> Dataset:
    """The columns as a Dataset with the project's types (``score`` float64, ids int64,
    texts string), as :func:`~sts_core.data._io.to_dataset` types them."""
    features = Features({name: Value(COLUMN_TYPES.get(name, "string")) for name in columns})
    return Dataset(pa.table(dict(columns)).cast(features.arrow_schema))
