"""Tables with a header: CSV, TSV, JSON, JSON Lines and Parquet files, folders written by
``Dataset.save_to_disk``, hub dataset ids and ``datasets.Dataset`` / ``DatasetDict`` objects,
mapped onto the project's columns.

Files are read by ``datasets``' own loaders (``load_dataset("csv" | "json" | "parquet")``,
``load_from_disk``) into memory, with a temporary cache that is removed afterwards: nothing
is written beside the data. CSV and TSV cells are read as text (``007`` stays ``007``; an
empty cell is an empty text, not a missing value); a TSV has no quoting (a tab separates
the fields, a line is a row).

Columns (a ``columns`` mapping, else the rules below). Against sentence-transformers'
``SentenceTransformerDataCollator`` (the label and the positional texts it feeds the loss):
equal for the tables ``shared/tests/test_columns_peer.py`` reads, and different where
docs/data.md ("Columns against sentence-transformers") lists it: ``score`` beside
``label``, named text columns in another order, a column of numbers not named a label,
more than three text columns, surrounding spaces, ``query_id``, NLI class names.

- a column named ``score`` or ``label`` is the label as it stands: ``score`` (float64);
  ``label`` gives ``score`` (float64) and, when every value is an integer, ``label``
  (int64). With both, ``score`` is the score and ``label`` (integers) the class. NLI
  classes only where the data say so: class names in the label column (or a
  ``ClassLabel`` of them), or ``TableReading.nli`` (the format ``nli``); then ``label`` is
  the class id and ``score`` entailment 2 > neutral 1 > contradiction 0, rows without a
  gold label skipped (logged). Integer labels that look like NLI classes are read as
  scores, named in one warning when the reader says how to choose the other reading.
- a column whose every value is a number (:func:`~sts_core.data._io.parse_number`, the
  one rule for numbers) is never taken for a text; with no label column named, one such
  column is the label, as :class:`TableReading` says.
- the text columns: the names ``anchor``/``positive``/``negative`` (→ ``sentence1``,
  ``sentence2``, ``hard_negative``), ``sentence1``/``sentence2`` (/``hard_negative``) or
  ``sentence``; otherwise the remaining columns in their order (the order
  sentence-transformers' collator feeds them in): one (``sentence``), two (``sentence1``,
  ``sentence2``) or three (a triplet, the third ``hard_negative``); more are refused.
- ``columns`` = ``{project column: file column}`` names them instead, e.g.
  ``{sentence1: text_a, sentence2: text_b, score: sim}``; columns it leaves out are found
  as above (``score``/``label`` by name; the texts only when it names none).

Columns neither named nor found are not read (logged). Texts are stripped of surrounding
spaces. A bad value is a :class:`~sts_core.data.errors.DataFormatError` naming the source,
the row (1-based data row: the header is not counted) and the file's column; an error
about a missing or wrong column names the option that maps the table's columns
(``TableReading.option``).
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import signal
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict

from sts_core.options import parse_json_mapping

from ._io import (
    NUMBER_PATTERN,
    PathLike,
    ScoreRange,
    is_number,
    logger,
    parse_number,
    score_range_problem,
    skip_note,
    to_dataset,
)
from .arrow_checks import STRING_TYPES, column_dtype, vectorised_table
from .errors import DataConfigError, DataFileNotFoundError, DataFormatError
from .nli import NLI_LABELS, NLI_SCORES, nli_class
from .scratch import scratch_subfolder

__all__ = [
    "LABEL_COLUMNS",
    "PROJECT_COLUMNS",
    "TABLE_SUFFIXES",
    "TEXT_COLUMNS",
    "TableReading",
    "check_columns_mapping",
    "parse_columns_option",
    "find_columns",
    "from_dataset",
    "is_saved_dataset",
    "looks_like_hub_id",
    "normalise_table",
    "read_table",
    "table_header",
]

#: file suffix -> ``datasets`` loader
TABLE_SUFFIXES: Mapping[str, str] = {
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
}
TEXT_COLUMNS = ("sentence1", "sentence2", "hard_negative", "sentence")
LABEL_COLUMNS = ("score", "label")
#: the column that groups a ranking set's candidates by their query (kept when present)
GROUP_COLUMN = "query_id"
PROJECT_COLUMNS = TEXT_COLUMNS + LABEL_COLUMNS + (GROUP_COLUMN,)
#: text columns found by name, the largest layout first: file column -> project column
NAMED_LAYOUTS: tuple[Mapping[str, str], ...] = (
    {"anchor": "sentence1", "positive": "sentence2", "negative": "hard_negative"},
    {"sentence1": "sentence1", "sentence2": "sentence2", "hard_negative": "hard_negative"},
    {"anchor": "sentence1", "positive": "sentence2"},
    {"sentence1": "sentence1", "sentence2": "sentence2"},
    {"sentence": "sentence"},
)
#: text columns found by order, as sentence-transformers' collator feeds one to three
#: (more: refused here; docs/data.md lists the differences): count -> project columns
ORDERED_LAYOUTS: Mapping[int, tuple[str, ...]] = {
    1: ("sentence",),
    2: ("sentence1", "sentence2"),
    3: ("sentence1", "sentence2", "hard_negative"),
}
#: the text-column sets a table may have
VALID_TEXTS = (
    {"sentence1", "sentence2"},
    {"sentence1", "sentence2", "hard_negative"},
    {"sentence"},
)
#: split names accepted for each of ours, in order of preference
SPLIT_NAMES: Mapping[str, tuple[str, ...]] = {
    "dev": ("dev", "validation", "valid", "val"),
    "validation": ("validation", "dev", "valid", "val"),
    "test": ("test",),
    "train": ("train",),
}
LABEL_READINGS = ("needed", "read", "named")


@dataclass(frozen=True)
class TableReading:
    """What reads a table, beside its ``columns`` mapping: how its label columns are found
    and what its errors name.

    Attributes:
        option: the option that maps this table's columns, named in every error about a
            missing or wrong column (``columns`` for training tables, ``eval_columns`` for
            dev and test tables, ``--columns`` for ``sts-eval --pairs``…).
        labels: ``"read"`` (default): a column of numbers that is not named (no ``score``
            or ``label`` column found by name or mapping) is the label; ``"needed"``: so
            too, and a table without a label column is refused (a scorer reads the
            scores); ``"named"``: only a named label column is read, and a column of
            numbers not named is refused (the loss reads no labels: what is it?).
        nli: the label column holds NLI classes (``train_format: nli``).
        nli_hint: how to choose the NLI reading instead, said in the one warning given
            when an integer label column looks like NLI classes and is read as scores;
            None: no warning (the scores are not read).
    """

    option: str = "columns"
    labels: str = "read"
    nli: bool = False
    nli_hint: str | None = None

    def __post_init__(self) -> None:
        if self.labels not in LABEL_READINGS:
            raise ValueError(f"labels must be one of {', '.join(LABEL_READINGS)}")

    def for_format(self, fmt: str | None) -> TableReading:
        """This reading for a table read in the format ``fmt``: ``nli`` (``train_format:
        nli``) says its label column holds NLI classes, as names or as the integers 0
        entailment, 1 neutral, 2 contradiction (-1 or ``-``: no gold label)."""
        return replace(self, nli=self.nli or fmt == "nli")

    def expected(self) -> str:
        """What a table must have, and the option that names its columns."""
        return (
            "expected two text columns and a score or label column (sentence-transformers' "
            "convention), anchor/positive/negative, sentence1/sentence2 or sentence; or name "
            f"them with {self.option}, e.g. {{sentence1: text_a, sentence2: text_b, score: sim}}"
        )


#: a table read with the defaults
READ = TableReading()
#: how to choose NLI classes for an evaluation table (no format option there)
NLI_BY_NAMES = "write the classes as names (entailment, neutral, contradiction)"


def scored_reading(option: str) -> TableReading:
    """How a dev or test table is read, under ``option`` (``eval_columns``, ``sts-eval
    --columns``…): its pairs are scored against its labels, so a column of numbers not
    named is the label and a table without one is refused."""
    return TableReading(option, "needed", nli_hint=NLI_BY_NAMES)


# --------------------------------------------------------------------------- the mapping


def parse_columns_option(value: object, option: str) -> dict[str, str] | None:
    """A columns option as a recipe or a command line gives it (a mapping, or its YAML or
    JSON text; None or empty: unset), parsed and checked (:func:`check_columns_mapping`):
    ``columns``, ``eval_columns``, ``sts-eval --columns``, ``sts-mine --columns``.
    ValueError naming ``option``."""
    columns = parse_json_mapping(value, option)
    check_columns_mapping(columns, option)
    return columns


def check_columns_mapping(columns: Mapping[str, Any] | None, option: str = "columns") -> None:
    """DataConfigError unless ``columns`` maps project columns (``sentence1``, ``sentence2``,
    ``hard_negative``, ``sentence``, ``score``, ``label``) to distinct, non-empty column
    names; None or an empty mapping (unset) passes."""
    if columns is None:
        return
    if not isinstance(columns, Mapping):
        raise DataConfigError(
            f"{option} must be a mapping of project column: file column, got {columns!r}"
        )
    for key, value in columns.items():
        if key not in PROJECT_COLUMNS:
            raise DataConfigError(
                f"{option}: {key!r} is not one of the project's columns "
                f"({', '.join(PROJECT_COLUMNS)}); the mapping is project column: file column"
            )
        if not isinstance(value, str) or not value.strip():
            raise DataConfigError(f"{option}: {key}: expected a column name, got {value!r}")
    values = list(columns.values())
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise DataConfigError(f"{option} names the column(s) {', '.join(twice)} twice")
    texts = {key for key in columns if key in TEXT_COLUMNS}
    if texts and texts not in VALID_TEXTS:
        raise DataConfigError(f"{option} names the text columns {_listed(texts)}: {_VALID_WORDS}")


_VALID_WORDS = (
    "a table has sentence1 and sentence2 (and optionally hard_negative), or sentence alone"
)


def _listed(names: set[str]) -> str:
    """Project column names in the project's order."""
    return ", ".join(c for c in PROJECT_COLUMNS if c in names)


def find_columns(
    names: Sequence[str],
    columns: Mapping[str, str] | None,
    source: str | PathLike,
    reading: TableReading = READ,
    numbers: Callable[[Sequence[str]], Collection[str]] | None = None,
) -> dict[str, str]:
    """``{project column: table column}`` for a table whose columns are ``names``, by the
    ``columns`` mapping and the conventions (module docstring). ``numbers``: which of some
    columns hold numbers only (:func:`number_columns` of the table), asked of the columns
    texts would be taken from by their order: those are never texts
    (:func:`_label_from_numbers`); None: none do.
    DataFormatError naming ``source`` and ``reading.option`` for a mapped column the table
    lacks or a table without recognisable columns."""
    check_columns_mapping(columns, reading.option)
    found: dict[str, str] = dict(columns or {})
    absent = [(key, value) for key, value in found.items() if value not in names]
    if absent:
        key, value = absent[0]
        raise DataFormatError(
            source,
            f"{reading.option} maps {key} to {value!r}, which is not a column here "
            f"(its columns: {', '.join(names)})",
        )
    rest = [name for name in names if name not in found.values()]
    for label in (*LABEL_COLUMNS, GROUP_COLUMN):
        if label not in found and label in rest:
            found[label] = label
            rest.remove(label)
    if reading.nli and "label" not in found and NLI_LABEL_NAME in rest:
        found["label"] = NLI_LABEL_NAME
        rest.remove(NLI_LABEL_NAME)
    numeric: list[str] = []
    if not any(column in found for column in TEXT_COLUMNS):
        named = any(set(layout) <= set(rest) for layout in NAMED_LAYOUTS)
        held = () if named or numbers is None else numbers(rest)
        numeric = [name for name in rest if name in held]
        found.update(_found_texts([n for n in rest if n not in numeric], names, source, reading))
    _label_from_numbers(found, numeric, names, source, reading)
    unused = [name for name in names if name not in found.values()]
    if unused:
        logger.info("%s: columns not read: %s", source, ", ".join(unused))
    return found


#: the label column of the official NLI releases, read as ``label`` under ``nli``
NLI_LABEL_NAME = "gold_label"


def _found_texts(
    rest: list[str], names: Sequence[str], source: str | PathLike, reading: TableReading
) -> dict[str, str]:
    """The text columns among ``rest`` (neither mapped, labels nor numbers), by name or by
    order; DataFormatError for a half-named layout or none."""
    missing = _partial_layout(rest)
    if missing:
        problem = f"no column {missing!r} (its columns: {', '.join(names)})"
        raise DataFormatError(source, f"{problem}; {reading.expected()}")
    texts = _text_columns(rest)
    if texts is None:
        problem = f"no recognisable columns: found {', '.join(names) or 'none'}"
        raise DataFormatError(source, f"{problem}; {reading.expected()}")
    if not any(set(layout) <= set(rest) for layout in NAMED_LAYOUTS):
        check_names_by_order(texts, names, source)
    return texts


def _label_from_numbers(
    found: dict[str, str],
    numeric: list[str],
    names: Sequence[str],
    source: str | PathLike,
    reading: TableReading,
) -> None:
    """``numeric``: the columns of numbers left out of the texts taken by their order (a
    column of numbers is never a text). With no label column named, one such column is
    the label (``found["label"]``) unless ``reading.labels`` is ``"named"``; several, or
    one under ``"named"``, are refused in one line naming ``reading.option``; so is a
    table without a label column when ``reading.labels`` is ``"needed"``."""
    if any(label in found for label in LABEL_COLUMNS):
        return
    listed = ", ".join(repr(name) for name in numeric)
    others = [name for name in names if name not in found.values()]
    example = f"e.g. {reading.option}: {{score: {(numeric or others or ['similarity'])[0]}}}"
    if len(numeric) > 1:
        problem = f"the columns {listed} hold numbers, so none is a text, and no column is "
        problem += f"named score or label: name the score column with {reading.option}, {example}"
        raise DataFormatError(source, problem)
    if numeric and reading.labels == "named":
        raise DataFormatError(
            source,
            f"column {listed} holds numbers, so it is no text, and a score is read here only "
            f"from a column named score or label: map it with {reading.option} ({example}), "
            "or leave the column out",
        )
    if numeric:
        found["label"] = numeric[0]
    elif reading.labels == "needed":
        problem = f"no score or label column (its columns: {', '.join(names)}): the pairs are "
        problem += f"scored against one; name it with {reading.option}, {example}"
        raise DataFormatError(source, problem)


def _text_columns(names: list[str]) -> dict[str, str] | None:
    """The text columns among ``names`` (no label columns): by name, else by order."""
    for layout in NAMED_LAYOUTS:
        if set(layout) <= set(names):
            return {project: name for name, project in layout.items()}
    ordered = ORDERED_LAYOUTS.get(len(names))
    return dict(zip(ordered, names, strict=True)) if ordered else None


def check_names_by_order(texts: Mapping[str, str], names: Sequence[str], source: Any) -> None:
    """Text columns taken by their order (the module docstring): DataFormatError when a
    column name is a number (a file without a header line, whose first row was taken for
    one); otherwise a warning saying which column became which, so a first line of data
    read as a header is seen."""
    numbers = [name for name in names if is_number(str(name))]
    if numbers:
        raise DataFormatError(
            source,
            f"the header names a column {numbers[0]!r}, a number: the first line of a table "
            "names its columns (e.g. sentence1,sentence2,score); add a header line",
            1,
        )
    taken = ", ".join(f"{project} ← {name!r}" for project, name in texts.items())
    logger.warning("%s: text columns taken by their order: %s", source, taken)


def _partial_layout(names: list[str]) -> str | None:
    """The column a half-named layout lacks (``sentence1`` without ``sentence2``, ``anchor``
    without ``positive``…), or None."""
    present = set(names)
    if any(set(layout) <= present for layout in NAMED_LAYOUTS):
        return None
    for first, second in (("sentence1", "sentence2"), ("anchor", "positive")):
        if first in present or second in present:
            return second if first in present else first
    if "negative" in present:
        return "anchor"
    if "hard_negative" in present:
        return "sentence1"
    return None


def header_is_recognisable(names: Sequence[str], columns: Mapping[str, str] | None) -> bool:
    """Whether a first line ``names`` is a header: it names a ``score`` or ``label`` column or
    a named text layout (``anchor``/``positive``…, ``sentence1``/``sentence2``, ``sentence``),
    or ``columns`` is given (its names are then required)."""
    if columns:
        return True
    if any(label in names for label in LABEL_COLUMNS):
        return True
    return any(set(layout) <= set(names) for layout in NAMED_LAYOUTS)


# --------------------------------------------------------------------------- the values


def normalise_table(
    table: Dataset,
    source: str | PathLike,
    columns: Mapping[str, str] | None = None,
    score_range: ScoreRange | None = None,
    reading: TableReading = READ,
) -> Dataset:
    """``table`` (any column names and types) as the project's columns: texts (str,
    stripped), ``score`` (float64), ``label`` (int64). Every value is checked: an empty or
    non-text text, a score that is not a number (:func:`~sts_core.data._io.parse_number`)
    or lies outside ``score_range``, a ``label`` beside ``score`` that is not an integer —
    DataFormatError naming ``source``, the 1-based row and the table's column. A label
    column of NLI classes (``reading.nli``, class names, or a ``ClassLabel`` of them) gives
    the class ids and ``score`` entailment 2 > neutral 1 > contradiction 0, its rows
    without a gold label skipped (logged); any other label is the label as it stands."""
    if len(table) == 0:
        raise DataFormatError(source, "no data rows")
    found = find_columns(
        table.column_names, columns, source, reading, lambda names: number_columns(table, names)
    )
    if not _holds_nli_classes(table, found, source, reading):
        checked = vectorised_table(
            table,
            found,
            source,
            score_range,
            lambda out: _note_nli_like(out, found, source, reading),
            lambda row: name_bad_row(table, found, source, row),
        )
        if checked is not None:
            return checked
    return read_row_by_row(table, found, source, score_range, reading)


def name_bad_row(
    table: Dataset, found: Mapping[str, str], source: str | PathLike, row: int
) -> None:
    """The DataFormatError that the row-by-row reading of a table without NLI classes
    gives for row ``row`` (1-based) of ``table``, its first bad value in the reading's
    order of columns; nothing when that reading takes the row."""
    one = table.select([row - 1])
    _texts(one, found, source, row)
    _labels(one, found, source, None, row)


def read_row_by_row(
    table: Dataset,
    found: Mapping[str, str],
    source: str | PathLike,
    score_range: ScoreRange | None,
    reading: TableReading,
) -> Dataset:
    """:func:`normalise_table`'s reading of each value in Python: the tables the Arrow
    checks (:mod:`~sts_core.data.arrow_checks`) do not cover, and those with a bad value,
    which it names (source, row, column)."""
    out = _texts(table, found, source)
    if _holds_nli_classes(table, found, source, reading):
        out |= _nli_labels(table, found, source, score_range)
    else:
        out |= _labels(table, found, source, score_range)
        _note_nli_like(out, found, source, reading)
    if GROUP_COLUMN in found:
        out[GROUP_COLUMN] = _group_ids(table, found[GROUP_COLUMN], source)
    return to_dataset(*_without_no_gold(out, source))


def _texts(
    table: Dataset, found: Mapping[str, str], source: str | PathLike, first_row: int = 1
) -> dict[str, list[Any]]:
    """The text columns of ``table``, each value checked (:func:`_text`); rows numbered
    from ``first_row`` in the messages."""
    return {
        column: [
            _text(value, source, n, found[column])
            for n, value in _rows(table, found[column], first_row)
        ]
        for column in TEXT_COLUMNS
        if column in found
    }


def number_columns(table: Dataset, names: Sequence[str]) -> set[str]:
    """Those of ``names`` whose every value is a number: a numeric type, texts that
    :func:`~sts_core.data._io.parse_number` reads (checked vectorised by Arrow), or, in a
    column of mixed JSON values, numbers and such texts."""
    return {name for name in names if _holds_numbers(table, name)}


def _holds_numbers(table: Dataset, name: str) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    values = table.data.column(name)
    kind = values.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return True
    if column_dtype(table, name) in STRING_TYPES:
        matched = pc.match_substring_regex(pc.utf8_trim_whitespace(values), NUMBER_PATTERN)
        return values.null_count == 0 and bool(pc.all(matched).as_py())
    return all(_is_number_value(value) for value in table[name])  # e.g. JSON values, decoded


def _is_number_value(value: object) -> bool:
    if isinstance(value, str):
        return is_number(value)
    return isinstance(value, int | float) and not isinstance(value, bool)


def _labels(
    table: Dataset,
    found: Mapping[str, str],
    source: str | PathLike,
    score_range: Any,
    first_row: int = 1,
) -> dict[str, list[Any]]:
    """``score`` and ``label`` as they stand (for one label column, the label
    sentence-transformers' collator takes; with both, the module docstring): ``score`` from
    a score column, else from the label column (with ``label`` when every value is an
    integer); ``label`` beside ``score`` must be integers. ``first_row``: the number of the
    table's first row in the messages (with a ``score_range``, 1)."""
    out: dict[str, list[Any]] = {}
    if "score" in found:
        out["score"] = _scores(table, found["score"], source, score_range, first_row)
        if "label" in found:
            name = found["label"]
            rows = _rows(table, name, first_row)
            out["label"] = [_integer(v, source, n, name) for n, v in rows]
    elif "label" in found:
        scores = _scores(table, found["label"], source, score_range, first_row)
        out["score"] = scores
        if all(float(x).is_integer() for x in scores):
            out["label"] = [int(x) for x in scores]
    return out


def _holds_nli_classes(
    table: Dataset, found: Mapping[str, str], source: str | PathLike, reading: TableReading
) -> bool:
    """Whether the label column holds NLI classes: ``reading.nli`` (refused without a label
    column), a ``ClassLabel`` whose names are NLI classes, or texts with a class name."""
    column = found.get("label")
    if column is None:
        if reading.nli:
            problem = f"no label column of NLI classes (its columns: {_names(table)}): name "
            raise DataFormatError(source, f"{problem}it with {reading.option}, e.g. {{label: y}}")
        return False
    names = getattr(table.features[column], "names", None)
    if reading.nli or (names and {name.lower() for name in names} <= set(NLI_LABELS)):
        return True
    if column_dtype(table, column) not in STRING_TYPES:
        return False
    return any(str(value).strip().lower() in NLI_LABELS for value in table.unique(column))


def _names(table: Dataset) -> str:
    return ", ".join(table.column_names)


def _nli_labels(
    table: Dataset, found: Mapping[str, str], source: str | PathLike, score_range: Any
) -> dict[str, list[Any]]:
    """``label`` (class ids, None where there is no gold label) and ``score`` (entailment
    2 > neutral 1 > contradiction 0, or the score column's) from a label column of NLI
    classes; DataFormatError naming the row and column of a value that is no class."""
    column = found["label"]
    names = getattr(table.features[column], "names", None)  # a ClassLabel's, by id
    labels = []
    for row, value in _rows(table, column):
        if names and isinstance(value, int) and 0 <= value < len(names):
            value = names[value]
        try:
            labels.append(nli_class(value))
        except (ValueError, AttributeError) as error:
            raise DataFormatError(source, f"{_where(row, column)}: {error}") from None
    if "score" in found:
        return {"score": _scores(table, found["score"], source, score_range), "label": labels}
    scores = [math.nan if label is None else NLI_SCORES[label] for label in labels]
    problem = score_range_problem(scores, score_range, column) if score_range else None
    if problem:
        raise DataFormatError(source, problem)
    return {"score": scores, "label": labels}


def _without_no_gold(
    out: dict[str, list[Any]], source: str | PathLike
) -> tuple[dict[str, list[Any]], list[str]]:
    """``out`` without the rows whose NLI label is None (no gold label), and the note
    that says how many were skipped (logged)."""
    labels = out.get("label", [])
    keep = [n for n, label in enumerate(labels) if label is not None]
    if len(keep) == len(labels):
        return out, []
    if not keep:
        problem = "no data rows left: every row's NLI label is '-' or -1 (no gold label)"
        raise DataFormatError(source, problem)
    note = skip_note(source, len(labels) - len(keep), len(labels), "no gold label: '-' or -1")
    return {name: [values[n] for n in keep] for name, values in out.items()}, note


#: integer labels that may be NLI classes (0 entailment, 1 neutral, 2 contradiction, -1)
_NLI_LIKE = {-1, 0, 1, 2}


def _note_nli_like(
    out: Mapping[str, list[Any]],
    found: Mapping[str, str],
    source: str | PathLike,
    reading: TableReading,
) -> None:
    """One warning when a label column (no score column) holds the integers 0, 1 and 2
    (-1 too, perhaps), read as scores where they may be NLI classes, saying how to choose
    the other reading (``reading.nli_hint``; no warning without one)."""
    labels = set(out.get("label", ()))
    if reading.nli_hint is None or "score" in found or not {0, 1, 2} <= labels <= _NLI_LIKE:
        return
    logger.warning(
        "%s: column %r holds the integers %s: read as scores as they stand, as "
        "sentence-transformers reads a label column (2 the most similar); if they are NLI "
        "classes (0 entailment, 1 neutral, 2 contradiction), %s",
        source,
        found["label"],
        ", ".join(str(label) for label in sorted(labels)),
        reading.nli_hint,
    )


def _group_ids(table: Dataset, column: str, source: str | PathLike) -> list[int]:
    """A ranking set's query ids (any values) as 0, 1, …, in order of first appearance;
    an empty id is a DataFormatError naming the row."""
    ids: dict[str, int] = {}
    out = []
    for n, value in _rows(table, column):
        if value is None or not str(value).strip():
            raise DataFormatError(source, f"{_where(n, column)}: an empty query id")
        out.append(ids.setdefault(str(value).strip(), len(ids)))
    return out


def _rows(table: Dataset, column: str, first_row: int = 1) -> Iterator[tuple[int, Any]]:
    """``(1-based row, value)`` of one column (its first row numbered ``first_row``)."""
    return enumerate(table[column], start=first_row)


def _where(row: int, column: str) -> str:
    return f"row {row}, column {column!r}"


def _text(value: object, source: str | PathLike, row: int, column: str) -> str:
    if value is None:
        raise DataFormatError(source, f"{_where(row, column)}: empty text (no value)")
    if not isinstance(value, str):
        kind = type(value).__name__
        raise DataFormatError(source, f"{_where(row, column)}: {value!r} is not a text ({kind})")
    text = value.strip()
    if not text:
        raise DataFormatError(source, f"{_where(row, column)}: empty text")
    return text


def _number(value: object, source: str | PathLike, row: int, column: str) -> float:
    """A finite number from a number or a text (``"3.5"``, read by
    :func:`~sts_core.data._io.parse_number`)."""
    where = _where(row, column)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise DataFormatError(source, f"{where}: no value")
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise DataFormatError(source, f"{where}: {value!r} is not a number")
    if isinstance(value, str):
        try:
            return parse_number(value)
        except ValueError as error:
            raise DataFormatError(source, f"{where}: {error}") from None
    if not math.isfinite(value):
        raise DataFormatError(source, f"{where}: {value!r} is not a finite number")
    return float(value)


def _scores(
    table: Dataset,
    column: str,
    source: str | PathLike,
    score_range: ScoreRange | None,
    first_row: int = 1,
) -> list[float]:
    rows = _rows(table, column, first_row)
    scores = [_number(value, source, row, column) for row, value in rows]
    problem = score_range_problem(scores, score_range, column) if score_range else None
    if problem:
        raise DataFormatError(source, problem)
    return scores


def _integer(value: object, source: str | PathLike, row: int, column: str) -> int:
    number = _number(value, source, row, column)
    if not number.is_integer():
        raise DataFormatError(source, f"{_where(row, column)}: label {value!r} is not an integer")
    return int(number)


# --------------------------------------------------------------------------- reading


def table_header(path: PathLike) -> list[str]:
    """The column names in the first line of a CSV (quoted) or TSV (tab-separated) file."""
    path = Path(path)
    with path.open(encoding="utf-8-sig", errors="replace", newline="") as handle:
        if path.suffix.lower() == ".tsv":
            line = handle.readline().rstrip("\r\n")
            return [name.strip() for name in line.split("\t")] if line else []
        row = next(csv.reader(handle), [])
    return [name.strip() for name in row]


def is_saved_dataset(path: PathLike) -> bool:
    """Whether ``path`` is a folder written by ``Dataset.save_to_disk`` or
    ``DatasetDict.save_to_disk``."""
    from datasets import config

    folder = Path(path)
    return (folder / config.DATASETDICT_JSON_FILENAME).is_file() or (
        (folder / config.DATASET_STATE_JSON_FILENAME).is_file()
        and (folder / config.DATASET_INFO_FILENAME).is_file()
    )


@contextmanager
def _quiet_datasets() -> Iterator[None]:
    """``datasets``' progress bars off while a table loads (restored afterwards)."""
    import datasets

    was_enabled = not datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


@contextmanager
def _interrupts_noted() -> Iterator[list[int]]:
    """Ctrl-C while a table loads, noted (the list it yields gets the signal): pandas' C
    reader turns a KeyboardInterrupt during its read into a ParserError ("Calling
    read(nbytes) on source failed"), which would then read as a malformed file. Only in
    the main thread, where Python handles signals, and where Ctrl-C raises at all."""
    noted: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield noted
        return

    def note(signum: int, frame: Any) -> None:
        noted.append(signum)
        previous(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, previous)


def _csv_options(path: Path) -> dict[str, Any]:
    """``load_dataset("csv")`` options: every column as text, empty cells kept, TSV
    unquoted; DataFormatError for an empty file or a header naming a column twice."""
    from datasets import Features, Value

    names = table_header(path)
    if not names or names == [""]:
        raise DataFormatError(path, "file is empty (a table needs a header line)")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise DataFormatError(path, f"the header names {', '.join(map(repr, twice))} twice", 1)
    options: dict[str, Any] = {
        "features": Features({name: Value("string") for name in names}),
        "column_names": names,  # the header's names stripped of spaces ("a, b" is a and b)
        "header": 0,
        "na_filter": False,
        "encoding": "utf-8-sig",
    }
    if path.suffix.lower() == ".tsv":
        options |= {"sep": "\t", "quoting": csv.QUOTE_NONE}
    return options


def _load_file(path: Path, cache: Path) -> Dataset:
    """One CSV/TSV/JSON/JSONL/Parquet file by ``datasets``' loader, as an Arrow file in
    ``cache``, memory-mapped."""
    from datasets import load_dataset

    loader = TABLE_SUFFIXES[path.suffix.lower()]
    options = _csv_options(path) if loader == "csv" else {}
    with _quiet_datasets(), _interrupts_noted() as interrupted:
        try:
            return load_dataset(
                loader, data_files=str(path), split="train", cache_dir=str(cache), **options
            )
        except Exception as error:  # pandas, pyarrow and datasets errors of a malformed file
            if interrupted:
                raise KeyboardInterrupt from None
            if "corresponds to no data" in str(error):  # datasets' words for no rows
                raise DataFormatError(path, "no data rows") from None
            problem = f"cannot be read as {_kind(path)}: {_cause(error)}"
            raise DataFormatError(path, problem) from None


def _kind(path: Path) -> str:
    suffix = path.suffix.lower()
    return {".jsonl": "JSON Lines", ".tsv": "TSV"}.get(suffix, suffix.lstrip(".").upper())


def _cause(error: BaseException) -> str:
    """The innermost error's message, on one line (``datasets`` wraps the reader's)."""
    inner: BaseException | None = error
    while inner is not None:
        error, inner = inner, inner.__cause__ or inner.__context__
    return " ".join(f"{type(error).__name__}: {error}".split())[:300]


def pick_split(splits: Sequence[str], split: str, source: str | PathLike) -> str:
    """The split of ``splits`` that ``split`` names (``dev`` is also ``validation``,
    ``valid`` or ``val``); DataConfigError listing them otherwise."""
    for name in SPLIT_NAMES.get(split, (split,)):
        if name in splits:
            return name
    raise DataConfigError(
        f"{source} has no split {split!r} (its splits: {', '.join(splits)}); "
        f"name one as {source}:<split>"
    )


def _from_saved(path: Path, split: str) -> Dataset:
    """A ``save_to_disk`` folder (a DatasetDict's split ``split``)."""
    from datasets import load_from_disk

    try:
        loaded = load_from_disk(str(path))
    except Exception as error:  # a folder datasets cannot read
        raise DataFormatError(path, f"cannot be read by load_from_disk: {_cause(error)}") from None
    if isinstance(loaded, DatasetDict):
        return loaded[pick_split(list(loaded), split, path)]
    return loaded


def read_table(
    path: PathLike,
    columns: Mapping[str, str] | None = None,
    split: str = "train",
    score_range: ScoreRange | None = None,
    reading: TableReading = READ,
) -> Dataset:
    """Read a table with a header: a ``.csv``, ``.tsv``, ``.json``, ``.jsonl`` or
    ``.parquet`` file, or a ``save_to_disk`` folder (``split`` of a DatasetDict's), as the
    project's columns (:func:`normalise_table`: ``columns`` mapping, ``score_range`` check,
    ``reading``).
    """
    path = Path(path)
    if path.is_dir():
        if not is_saved_dataset(path):
            raise DataFormatError(path, "not a folder written by Dataset.save_to_disk")
        raw = _from_saved(path, split)
    elif path.is_file():
        if path.suffix.lower() not in TABLE_SUFFIXES:
            known = ", ".join(TABLE_SUFFIXES)
            raise DataFormatError(path, f"a table file ends in one of {known}")
        cache = scratch_subfolder("read-")  # the file as Arrow, while it is checked
        try:
            return normalise_table(_load_file(path, cache), path, columns, score_range, reading)
        finally:  # the checked table is a file of its own, or in memory
            shutil.rmtree(cache, ignore_errors=True)
    else:
        raise DataFileNotFoundError(path, "no such file or folder")
    return normalise_table(raw, path, columns, score_range, reading)


def from_dataset(
    dataset: Dataset | DatasetDict,
    columns: Mapping[str, str] | None = None,
    split: str = "train",
    score_range: ScoreRange | None = None,
    name: str = "in-memory dataset",
    reading: TableReading = READ,
) -> Dataset:
    """A ``datasets.Dataset`` (or split ``split`` of a ``DatasetDict``) with any column
    names, as the project's columns: the same conventions, mapping and checks as a file
    (:func:`normalise_table`); errors name ``name``. The result is a new in-memory
    Dataset: the argument is not changed."""
    if isinstance(dataset, DatasetDict):
        dataset = dataset[pick_split(list(dataset), split, name)]
    if not isinstance(dataset, Dataset):
        raise DataConfigError(
            f"{name}: expected a datasets.Dataset or DatasetDict, got {type(dataset).__name__}"
        )
    return normalise_table(dataset, name, columns, score_range, reading)


# --------------------------------------------------------------------------- the hub


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def looks_like_hub_id(reference: str) -> bool:
    """``owner/name``: one slash, names of letters, digits, ``-``, ``_`` and ``.`` starting
    with a letter or digit, and no file suffix (``data/mine.csv`` is a missing file)."""
    if not _HUB_ID.fullmatch(reference):
        return False
    return Path(reference).suffix.lower() not in (*TABLE_SUFFIXES, ".txt", ".data")


def _hub_split_names(repo_id: str) -> list[str]:
    """The splits of a hub dataset (network; patched out in tests)."""
    from datasets import get_dataset_split_names

    return list(get_dataset_split_names(repo_id))


def _load_hub_split(repo_id: str, split: str) -> Dataset:
    """One split of a hub dataset, through the hub cache (patched out in tests)."""
    from datasets import load_dataset

    with _quiet_datasets():
        return load_dataset(repo_id, split=split)


def load_hub_table(
    repo_id: str,
    split: str = "train",
    columns: Mapping[str, str] | None = None,
    score_range: ScoreRange | None = None,
    reading: TableReading = READ,
) -> Dataset:
    """Split ``split`` of the hub dataset ``repo_id`` as the project's columns. One-line
    DataConfigError when the hub is switched off or cannot be reached, or the dataset or
    split cannot be loaded."""
    from . import hub

    where = f"{repo_id} is not a local file or folder, and as a hub dataset id"
    if hub.hub_offline():
        raise DataConfigError(
            f"{where} it cannot be loaded: the Hugging Face hub is switched off "
            "(HF_HUB_OFFLINE / HF_DATASETS_OFFLINE); give a local file or a "
            "save_to_disk folder"
        )
    if not hub.hub_reachable():
        host, port = hub.hub_address()
        raise DataConfigError(
            f"{where} it cannot be loaded: the Hugging Face hub ({host}:{port}) cannot be "
            "reached; give a local file or a save_to_disk folder"
        )
    try:
        hub_split = pick_split(_hub_split_names(repo_id), split, repo_id)
        raw = _load_hub_split(repo_id, hub_split)
    except DataConfigError:
        raise
    except Exception as error:  # network, hub and cache errors of datasets/huggingface_hub
        raise DataConfigError(
            f"{repo_id}: loading it from the hub failed ({_cause(error)})"
        ) from None
    logger.info("%s: read split %s from the hub (%d rows)", repo_id, hub_split, len(raw))
    return normalise_table(raw, f"{repo_id}:{hub_split}", columns, score_range, reading)


def first_json_record(path: PathLike) -> dict[str, Any] | None:
    """The first record of a JSON Lines file (None when it is not a JSON object)."""
    with Path(path).open(encoding="utf-8-sig", errors="replace") as handle:
        for line in handle:
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    return None
                return record if isinstance(record, dict) else None
    return None
