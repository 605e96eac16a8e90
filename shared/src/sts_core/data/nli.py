"""Readers for natural language inference data (SNLI, MultiNLI, SimCSE triplets).

Labels: ``label`` 0 entailment, 1 neutral, 2 contradiction (the Hugging Face
convention); ``score`` is the ordered class value entailment 2.0 > neutral 1.0 >
contradiction 0.0. Label names are case-insensitive; the integers 0/1/2 are
accepted with the same meaning. Rows without a gold label (``-``, or ``-1`` in
integer-labelled files) are skipped, logged at INFO level with their count and
noted in ``dataset.info.description``; any other label is an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from datasets import Dataset

from ._io import (
    PathLike,
    check_columns,
    check_header,
    csv_rows,
    read_lines,
    require_dir,
    sentence,
    skip_note,
    to_dataset,
)
from .errors import DataFormatError

__all__ = [
    "NLI_LABELS",
    "NLI_SCORES",
    "nli_class",
    "nli_label",
    "read_nli_csv",
    "read_nli_jsonl",
    "read_nli_senteval",
    "read_nli_triplets",
]

#: label name -> label id
NLI_LABELS: dict[str, int] = {"entailment": 0, "neutral": 1, "contradiction": 2}
#: label id -> ordered class value used as ``score``
NLI_SCORES: dict[int, float] = {0: 2.0, 1: 1.0, 2: 0.0}
_NO_GOLD = ("-", "-1")
_TRIPLET_HEADER = ("sent0", "sent1", "hard_neg")
_NO_GOLD_REASON = "no gold label '-'"


def nli_class(value: str | int) -> int | None:
    """The class id of one NLI label: a class name (any case) or 0/1/2 (as text or an
    integer); ``None`` for "no gold label" (``-`` or -1). ValueError naming the value
    otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    text = value.strip() if isinstance(value, str) else value
    if text in _NO_GOLD:
        return None
    if text in ("0", "1", "2"):
        return int(text)
    label = NLI_LABELS.get(text.lower()) if isinstance(text, str) else None
    if label is None:
        known = ", ".join([*NLI_LABELS, "'-'"])
        raise ValueError(f"unknown NLI label {text!r} (expected {known})")
    return label


def nli_label(value: str, path: PathLike, lineno: int) -> int | None:
    """Label id of an NLI label name (or 0/1/2); ``None`` for "no gold label"
    (:func:`nli_class`, its error naming the file and line)."""
    try:
        return nli_class(value)
    except ValueError as error:
        raise DataFormatError(path, str(error), lineno) from None


def _nli_dataset(
    rows: Iterable[tuple[int, str, str, str]], path: PathLike, notes: list[str] | None = None
) -> Dataset:
    """Build the NLI dataset from ``(line, s1, s2, label)``; skip rows without gold."""
    columns: dict[str, list] = {"sentence1": [], "sentence2": [], "label": [], "score": []}
    total = skipped = 0
    for lineno, s1, s2, raw_label in rows:
        total += 1
        first = sentence(s1, path, lineno, "sentence1")
        second = sentence(s2, path, lineno, "sentence2")
        label = nli_label(raw_label, path, lineno)
        if label is None:
            skipped += 1
            continue
        columns["sentence1"].append(first)
        columns["sentence2"].append(second)
        columns["label"].append(label)
        columns["score"].append(NLI_SCORES[label])
    notes = (notes or []) + skip_note(path, skipped, total, _NO_GOLD_REASON)
    return to_dataset(columns, notes)


def read_nli_senteval(directory: PathLike, split: str) -> Dataset:
    """Read SentEval's NLI layout: ``s1.<split>``, ``s2.<split>``, ``labels.<split>``.

    The three files must have the same number of lines. Line numbers in errors
    refer to ``s1.<split>`` / ``s2.<split>`` for sentences and ``labels.<split>``
    for labels.

    Returns:
        columns ``sentence1``, ``sentence2``, ``label``, ``score``.
    """
    directory = require_dir(directory)
    paths = [directory / f"{name}.{split}" for name in ("s1", "s2", "labels")]
    s1, s2, labels = texts = [read_lines(path) for path in paths]
    if not len(s1) == len(s2) == len(labels):
        counts = ", ".join(f"{p.name}: {len(x)}" for p, x in zip(paths, texts, strict=True))
        raise DataFormatError(directory, f"line counts differ ({counts})")
    first = [sentence(x, paths[0], n, "sentence1") for n, x in enumerate(s1, start=1)]
    second = [sentence(x, paths[1], n, "sentence2") for n, x in enumerate(s2, start=1)]
    triples = zip(first, second, labels, strict=True)
    rows = ((n, a, b, y) for n, (a, b, y) in enumerate(triples, start=1))
    return _nli_dataset(rows, paths[2])


def _header_index(header: list[str], names: tuple[str, ...], path: PathLike) -> int:
    """Index of the first of ``names`` found in a CSV header."""
    for name in names:
        if name in header:
            return header.index(name)
    raise DataFormatError(path, f"header lacks column {names[0]!r}: found {header}", 1)


def read_nli_csv(path: PathLike) -> Dataset:
    """Read an NLI CSV with a header naming ``sentence1``, ``sentence2`` and ``label``
    (``gold_label`` accepted); other columns (``pairID``) are ignored. Real CSV quoting.

    Returns:
        columns ``sentence1``, ``sentence2``, ``label``, ``score``.
    """
    rows = csv_rows(path)
    _, header = next(rows)
    header = [name.strip() for name in header]
    i1 = _header_index(header, ("sentence1",), path)
    i2 = _header_index(header, ("sentence2",), path)
    il = _header_index(header, ("label", "gold_label"), path)

    def records() -> Iterator[tuple[int, str, str, str]]:
        for lineno, row in rows:
            check_columns(row, path, lineno, len(header), "comma-separated")
            yield lineno, row[i1], row[i2], row[il]

    return _nli_dataset(records(), path)


def _json_record(line: str, path: PathLike, lineno: int) -> tuple[int, str, str, str]:
    """``(line, sentence1, sentence2, gold_label)`` from one JSON line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        problem = f"invalid JSON: {err.msg} at column {err.colno}"
        raise DataFormatError(path, problem, lineno) from None
    if not isinstance(record, dict):
        raise DataFormatError(path, "expected a JSON object", lineno)
    values = []
    for key in ("sentence1", "sentence2", "gold_label"):
        value = record.get(key)
        if not isinstance(value, str):
            raise DataFormatError(path, f"key {key!r} missing or not a string", lineno)
        values.append(value)
    return lineno, values[0], values[1], values[2]


def read_nli_jsonl(path: PathLike) -> Dataset:
    """Read the official SNLI/MultiNLI jsonl (keys ``sentence1``, ``sentence2``,
    ``gold_label``; other keys ignored).

    Returns:
        columns ``sentence1``, ``sentence2``, ``label``, ``score``.
    """
    lines = read_lines(path)
    records = (_json_record(line, path, n) for n, line in enumerate(lines, start=1))
    return _nli_dataset(records, path)


def read_nli_triplets(path: PathLike) -> Dataset:
    """Read SimCSE's supervised CSV ``sent0,sent1,hard_neg`` (premise, entailed
    hypothesis, contradicting hypothesis).

    Returns:
        columns ``sentence1``, ``sentence2``, ``hard_negative`` and ``score`` (1.0).
    """
    rows = csv_rows(path)
    _, header = next(rows)
    check_header(header, _TRIPLET_HEADER, Path(path))
    columns: dict[str, list] = {"sentence1": [], "sentence2": [], "hard_negative": []}
    for lineno, row in rows:
        check_columns(row, path, lineno, 3, "comma-separated")
        for column, value, name in zip(columns, row, _TRIPLET_HEADER, strict=True):
            columns[column].append(sentence(value, path, lineno, name))
    columns["score"] = [1.0] * len(columns["sentence1"])
    return to_dataset(columns)
