"""Helpers shared by the readers: strict decoding, line splitting and field checks.

Every helper raises :class:`~sts_core.data.errors.DataFormatError` with the file,
the 1-based line number and the problem.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetInfo, Features, Value

from .errors import DataFileNotFoundError, DataFormatError

PathLike = str | os.PathLike[str]
ScoreRange = tuple[float, float]

logger = logging.getLogger("sts_core.data")

_BOM = b"\xef\xbb\xbf"
_INT = re.compile(r"[+-]?[0-9]+")
#: a decimal number as data files write one: a sign, ASCII digits with at most one point,
#: an exponent; nothing else (no inf/nan, digit separators, comma decimals, other digits)
NUMBER_PATTERN = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
_NUMBER = re.compile(NUMBER_PATTERN)
_NOT_FINITE = {"inf", "infinity", "nan"}

#: dtype of every column the readers produce; anything else is a string.
COLUMN_TYPES: Mapping[str, str] = {
    "score": "float64",
    "label": "int64",
    "query_id": "int64",
}


def require_file(path: PathLike) -> Path:
    """Return ``path`` as a Path, raising when it is not an existing file."""
    p = Path(path)
    if p.is_dir():
        raise DataFormatError(p, "expected a file, found a folder")
    if not p.is_file():
        raise DataFileNotFoundError(p, "no such file")
    return p


def require_dir(path: PathLike) -> Path:
    """Return ``path`` as a Path, raising when it is not an existing folder."""
    p = Path(path)
    if p.is_file():
        raise DataFormatError(p, "expected a folder, found a file")
    if not p.is_dir():
        raise DataFileNotFoundError(p, "no such folder")
    return p


def read_text(path: PathLike) -> str:
    """Decode a whole file as strict UTF-8 (a leading byte-order mark is dropped)."""
    p = require_file(path)
    data = p.read_bytes()
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        problem = f"not valid UTF-8: byte 0x{data[err.start]:02x} at column {column}"
        raise DataFormatError(p, problem, line) from None


def read_lines(path: PathLike) -> list[str]:
    """Lines of a UTF-8 file without their ``\\n`` / ``\\r\\n`` ends; an empty file is an error.

    Only ``\\n`` separates lines (not the other characters ``str.splitlines`` splits on,
    which may occur inside sentences).
    """
    text = read_text(path)
    if not text:
        raise DataFormatError(path, "file is empty")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def csv_rows(path: PathLike) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(first line number, row)`` for each record of a real (quoted) CSV file."""
    text = read_text(path)
    if not text:
        raise DataFormatError(path, "file is empty")
    reader = csv.reader(io.StringIO(text, newline=""))
    previous = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise DataFormatError(path, f"malformed CSV: {err}", reader.line_num) from None
        yield previous + 1, row
        previous = reader.line_num


def split_fields(
    line: str, path: PathLike, lineno: int, count: int, *, at_least: bool = False
) -> list[str]:
    """Split a line on tabs, checking the number of fields (exactly or at least ``count``)."""
    fields = line.split("\t")
    if len(fields) == count or (at_least and len(fields) > count):
        return fields
    expected = f"at least {count}" if at_least else f"{count}"
    problem = f"expected {expected} tab-separated fields, found {len(fields)}"
    raise DataFormatError(path, problem, lineno)


def check_columns(
    row: Sequence[str], path: PathLike, lineno: int, count: int, what: str = "tab-separated"
) -> None:
    """Raise unless ``row`` has exactly ``count`` fields."""
    if len(row) != count:
        raise DataFormatError(path, f"expected {count} {what} fields, found {len(row)}", lineno)


def check_header(found: Sequence[str], expected: Sequence[str], path: PathLike) -> None:
    """Raise unless a header row equals ``expected`` (surrounding spaces ignored)."""
    if [name.strip() for name in found] != list(expected):
        problem = f"expected header {list(expected)}, found {list(found)}"
        raise DataFormatError(path, problem, 1)


def sentence(value: str, path: PathLike, lineno: int, column: str = "sentence") -> str:
    """Strip surrounding whitespace; an empty sentence is an error."""
    text = value.strip()
    if not text:
        raise DataFormatError(path, f"empty sentence in column {column!r}", lineno)
    return text


def parse_number(text: str) -> float:
    """The one rule for a number written in a data file: a decimal number — an optional
    sign, ASCII digits with at most one point, an optional exponent (``4``, ``-0.5``,
    ``.5``, ``1e-3``) — with surrounding spaces; finite. ValueError saying what is wrong
    otherwise (Python's ``float`` also takes ``inf``, ``nan``, ``1_000``, other scripts'
    digits, which no data file means as a number; ``0,5`` and ``1,000`` are refused too)."""
    stripped = text.strip()
    if _NUMBER.fullmatch(stripped) is None:
        if stripped.lower().lstrip("+-") in _NOT_FINITE:
            raise ValueError(f"{stripped!r} is not a finite number")
        digits = any(character.isdigit() for character in stripped)  # 0,5 1_000 ٣
        raise ValueError(f"{stripped!r} is not a number" + (_NUMBER_FORM if digits else ""))
    number = float(stripped)
    if not math.isfinite(number):  # 1e999
        raise ValueError(f"{stripped!r} is not a finite number")
    return number


_NUMBER_FORM = (
    " (a number is written as digits 0-9 with an optional sign, one decimal point and an "
    "exponent, e.g. -0.5 or 1e-3: no digit separators, no decimal comma)"
)


def is_number(text: str) -> bool:
    """Whether :func:`parse_number` reads ``text``."""
    try:
        parse_number(text)
    except ValueError:
        return False
    return True


def score(value: str, path: PathLike, lineno: int, score_range: ScoreRange | None = None) -> float:
    """Parse a score (:func:`parse_number`), checking it lies in ``score_range`` (inclusive)
    when given."""
    try:
        number = parse_number(value)
    except ValueError as error:
        raise DataFormatError(path, f"score {error}", lineno) from None
    if score_range is not None and not score_range[0] <= number <= score_range[1]:
        low, high = score_range
        problem = f"score {number:g} outside the stated range [{low:g}, {high:g}]"
        raise DataFormatError(path, problem, lineno)
    return number


def is_int(value: str) -> bool:
    """True when ``value`` is written as an integer (``"3"``, not ``"3.0"``)."""
    return _INT.fullmatch(value.strip()) is not None


def int_label(value: str, path: PathLike, lineno: int, allowed: Sequence[int] | None = None) -> int:
    """Parse an integer label, checking it is one of ``allowed`` when given."""
    if not is_int(value):
        raise DataFormatError(path, f"label {value.strip()!r} is not an integer", lineno)
    label = int(value)
    if allowed is not None and label not in allowed:
        problem = f"label {label} not in {sorted(allowed)}"
        raise DataFormatError(path, problem, lineno)
    return label


def binary_label(value: str, path: PathLike, lineno: int) -> int:
    """Parse a 0/1 label."""
    return int_label(value, path, lineno, allowed=(0, 1))


def to_dataset(columns: Mapping[str, list[Any]], notes: Sequence[str] = ()) -> Dataset:
    """Build a Dataset with the project's column types (``score`` float64, ids int64).

    ``notes`` (e.g. what was skipped) go into ``dataset.info.description``.
    """
    features = Features({name: Value(COLUMN_TYPES.get(name, "string")) for name in columns})
    info = DatasetInfo(description="; ".join(notes), features=features)
    return Dataset.from_dict(dict(columns), features=features, info=info)


def skip_note(
    path: PathLike, skipped: int, total: int, reason: str, level: int = logging.INFO
) -> list[str]:
    """Log how many rows of a file were skipped and why; return it as a one-item note list.

    Returns an empty list (and logs nothing) when nothing was skipped.
    """
    if not skipped:
        return []
    note = f"{path}: skipped {skipped} of {total} rows ({reason})"
    logger.log(level, note)
    return [note]


def score_range_problem(scores: Any, score_range: ScoreRange, column: str) -> str | None:
    """The one check of data against ``score_range``: every score within [low, high]
    (inclusive). None when all are, else what is wrong, naming the first row outside
    (1-based, in the order read), the column and how many rows are outside. The readers of
    tables and the training data both call it, adding the file or dataset."""
    import numpy as np

    low, high = score_range
    values = np.asarray(scores, dtype=np.float64)
    outside = (values < low) | (values > high)
    if not outside.any():
        return None
    first = int(np.argmax(outside))
    return (
        f"row {first + 1}, column {column!r}: score {values[first]:g} is outside score_range "
        f"[{low:g}, {high:g}] ({int(outside.sum())} of {len(values)} rows are)"
    )
