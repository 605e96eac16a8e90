"""Readers for the STS, pair-classification and single-sentence file formats.

Each reader returns a :class:`datasets.Dataset`. Pair readers give ``sentence1``,
``sentence2`` (str) and ``score`` (float64), plus ``label`` (int64) where the
format has a class label; single-sentence readers give ``sentence`` (+ ``label``).
Sentences are stripped of surrounding whitespace. Malformed input raises
:class:`~sts_core.data.errors.DataFormatError` naming file, line and problem;
rows a format legitimately lacks (empty STS gold lines) are skipped, logged at
INFO level and listed in ``dataset.info.description``.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from datasets import Dataset

from ._io import (
    PathLike,
    ScoreRange,
    binary_label,
    check_header,
    int_label,
    is_int,
    logger,
    read_lines,
    require_dir,
    score,
    sentence,
    skip_note,
    split_fields,
    to_dataset,
)
from .errors import DataFormatError
from .nli import nli_label

__all__ = [
    "read_cosent_tsv",
    "read_mrpc",
    "read_quora",
    "read_senteval_sts",
    "read_sentences",
    "read_sick",
    "read_sst",
    "read_stsb_csv",
    "read_wikiqa",
]

_STS_FILE = re.compile(r"(?P<prefix>STS(?:\d{4})?)\.(?P<kind>input|gs)\.(?P<subset>.+)\.txt")
_MRPC_HEADER = ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")
_SICK_LABEL_COLUMNS = ("entailment_judgment", "entailment_label")


# --------------------------------------------------------------------------- STS12-16


def _sts_file_pairs(directory: Path) -> list[tuple[str, Path, Path]]:
    """``(subset, input file, gold file)`` for each subset with both files, sorted by subset."""
    found: dict[tuple[str, str], dict[str, Path]] = defaultdict(dict)
    for path in directory.iterdir():
        match = _STS_FILE.fullmatch(path.name)
        if match and path.is_file():
            found[match["subset"], match["prefix"]][match["kind"]] = path
    pairs = []
    for (subset, _), files in sorted(found.items()):
        if "input" in files and "gs" in files:
            pairs.append((subset, files["input"], files["gs"]))
        elif "input" in files:  # a subset without gold scores: it cannot be scored
            logger.warning(
                "%s: subset %r dropped, it has no gold file (STS.gs.%s.txt)",
                files["input"],
                subset,
                subset,
            )
        else:  # e.g. STS2012's STS.gs.ALL.txt, the gold of every subset concatenated
            logger.info("%s: ignored, it has no input/gold partner file", files["gs"])
    if not pairs:
        problem = "no STS.input.<subset>.txt + STS.gs.<subset>.txt pair found"
        raise DataFormatError(directory, problem)
    return pairs


def _read_sts_subset(
    subset: str,
    input_path: Path,
    gold_path: Path,
    score_range: ScoreRange | None,
    columns: dict[str, list[Any]],
) -> list[str]:
    """Append one subset's scored pairs to ``columns``; return the skip note."""
    inputs, golds = read_lines(input_path), read_lines(gold_path)
    if len(inputs) != len(golds):
        problem = f"{len(golds)} gold lines but {input_path} has {len(inputs)} input lines"
        raise DataFormatError(gold_path, problem)
    skipped = 0
    for lineno, (line, gold) in enumerate(zip(inputs, golds, strict=True), start=1):
        fields = split_fields(line, input_path, lineno, 2, at_least=True)
        s1 = sentence(fields[0], input_path, lineno, "sentence1")
        s2 = sentence(fields[1], input_path, lineno, "sentence2")
        if not gold.strip():
            skipped += 1
            continue
        columns["sentence1"].append(s1)
        columns["sentence2"].append(s2)
        columns["score"].append(score(gold, gold_path, lineno, score_range))
        columns["subset"].append(subset)
    if skipped == len(golds):
        reason = f"every gold score is empty: subset {subset!r} dropped"
        return skip_note(gold_path, skipped, len(golds), reason, level=logging.WARNING)
    return skip_note(gold_path, skipped, len(golds), "empty gold score: pair not scored")


def read_senteval_sts(directory: PathLike, score_range: ScoreRange | None = (0.0, 5.0)) -> Dataset:
    """Read an STS12-16 test folder (SentEval layout or the official release).

    Pairs ``STS.input.<subset>.txt`` (two tab-separated sentences a line; further
    columns, such as STS2016's sources, are ignored) with ``STS.gs.<subset>.txt``
    (one score a line); ``STS2016.input/gs.*`` names are accepted too and files
    without a partner (STS2012's ``STS.gs.ALL.txt``) are ignored; an input file
    without gold file is logged at WARNING level. Empty gold lines are skipped (as
    SentEval does), logged and counted in ``info.description``; a subset whose gold
    lines are all empty is dropped with a WARNING, and a folder with no scored pair
    at all is an error.

    Returns:
        columns ``sentence1``, ``sentence2``, ``score``, ``subset``; subsets sorted by
        name, rows in file order.
    """
    directory = require_dir(directory)
    columns: dict[str, list[Any]] = {"sentence1": [], "sentence2": [], "score": [], "subset": []}
    notes: list[str] = []
    for subset, input_path, gold_path in _sts_file_pairs(directory):
        notes += _read_sts_subset(subset, input_path, gold_path, score_range, columns)
    if not columns["score"]:
        raise DataFormatError(directory, "no scored pair: every gold score line is empty")
    return to_dataset(columns, notes)


# --------------------------------------------------------------------------- STS-B, SICK


def read_stsb_csv(path: PathLike, score_range: ScoreRange | None = (0.0, 5.0)) -> Dataset:
    """Read an STS Benchmark file: genre, file, year, id, score, sentence1, sentence2.

    Tab-separated without quoting (quote characters occur inside sentences);
    trailing fields after the seventh (sources) are tolerated.

    Returns:
        columns ``sentence1``, ``sentence2``, ``score`` (0-5), ``genre``.
    """
    columns: dict[str, list[Any]] = {"sentence1": [], "sentence2": [], "score": [], "genre": []}
    for lineno, line in enumerate(read_lines(path), start=1):
        fields = split_fields(line, path, lineno, 7, at_least=True)
        columns["genre"].append(fields[0].strip())
        columns["score"].append(score(fields[4], path, lineno, score_range))
        columns["sentence1"].append(sentence(fields[5], path, lineno, "sentence1"))
        columns["sentence2"].append(sentence(fields[6], path, lineno, "sentence2"))
    return to_dataset(columns)


def _sick_columns(header: list[str], path: PathLike) -> tuple[int, int, int, int]:
    """Indices of sentence_A, sentence_B, relatedness_score and the entailment label."""
    names = [name.strip() for name in header]
    label = next((n for n in _SICK_LABEL_COLUMNS if n in names), "entailment_judgment")
    wanted = ("sentence_A", "sentence_B", "relatedness_score", label)
    missing = [name for name in wanted if name not in names]
    if missing:
        raise DataFormatError(path, f"header lacks column(s) {missing}: found {names}", 1)
    a, b, rel, ent = (names.index(name) for name in wanted)
    return a, b, rel, ent


def read_sick(path: PathLike, score_range: ScoreRange | None = (1.0, 5.0)) -> Dataset:
    """Read a SICK file (header; pair_ID, sentence_A, sentence_B, relatedness_score,
    entailment_judgment; tab-separated, CRLF tolerated). Columns are found by header
    name, so the full ``SICK.txt`` layout (``entailment_label``) reads too.

    Returns:
        columns ``sentence1``, ``sentence2``, ``score`` (1-5 as in the file) and
        ``label`` (0 entailment, 1 neutral, 2 contradiction).
    """
    lines = read_lines(path)
    header = lines[0].split("\t")
    a, b, rel, ent = _sick_columns(header, path)
    columns: dict[str, list[Any]] = {"sentence1": [], "sentence2": [], "score": [], "label": []}
    for lineno, line in enumerate(lines[1:], start=2):
        fields = split_fields(line, path, lineno, len(header))
        columns["sentence1"].append(sentence(fields[a], path, lineno, "sentence_A"))
        columns["sentence2"].append(sentence(fields[b], path, lineno, "sentence_B"))
        columns["score"].append(score(fields[rel], path, lineno, score_range))
        label = nli_label(fields[ent], path, lineno)
        if label is None:
            raise DataFormatError(path, "missing entailment label '-'", lineno)
        columns["label"].append(label)
    return to_dataset(columns)


# --------------------------------------------------------------------------- pair classification


def read_cosent_tsv(path: PathLike, score_range: ScoreRange | None = None) -> Dataset:
    """Read CoSENT's Chinese format ``sentence1 \\t sentence2 \\t label`` (no header).

    ATEC/BQ/LCQMC/PAWSX have 0/1 labels, STS-B (Chinese) 0-5; pass ``score_range``
    to check them.

    Returns:
        columns ``sentence1``, ``sentence2``, ``score``, plus ``label`` (int) when
        every label is written as an integer.
    """
    columns: dict[str, list[Any]] = {"sentence1": [], "sentence2": [], "score": []}
    raw_labels = []
    for lineno, line in enumerate(read_lines(path), start=1):
        fields = split_fields(line, path, lineno, 3)
        columns["sentence1"].append(sentence(fields[0], path, lineno, "sentence1"))
        columns["sentence2"].append(sentence(fields[1], path, lineno, "sentence2"))
        columns["score"].append(score(fields[2], path, lineno, score_range))
        raw_labels.append(fields[2])
    if all(is_int(value) for value in raw_labels):
        columns["label"] = [int(value) for value in raw_labels]
    return to_dataset(columns)


def read_mrpc(path: PathLike) -> Dataset:
    """Read an MSR paraphrase file (UTF-8 with BOM; header Quality, #1 ID, #2 ID,
    #1 String, #2 String).

    Returns:
        columns ``sentence1``, ``sentence2``, ``score`` (0.0/1.0), ``label`` (0/1).
    """
    lines = read_lines(path)
    check_header(lines[0].split("\t"), _MRPC_HEADER, path)
    columns: dict[str, list[Any]] = {"sentence1": [], "sentence2": [], "score": [], "label": []}
    for lineno, line in enumerate(lines[1:], start=2):
        fields = split_fields(line, path, lineno, 5)
        label = binary_label(fields[0], path, lineno)
        columns["sentence1"].append(sentence(fields[3], path, lineno, "#1 String"))
        columns["sentence2"].append(sentence(fields[4], path, lineno, "#2 String"))
        columns["score"].append(float(label))
        columns["label"].append(label)
    return to_dataset(columns)


def _read_binary_pairs(path: PathLike, order: tuple[int, int, int]) -> dict[str, list]:
    """Rows of a 3-column tab-separated file; ``order`` gives the s1, s2, label positions."""
    columns: dict[str, list[Any]] = {"sentence1": [], "sentence2": [], "score": [], "label": []}
    i1, i2, il = order
    for lineno, line in enumerate(read_lines(path), start=1):
        fields = split_fields(line, path, lineno, 3)
        label = binary_label(fields[il], path, lineno)
        columns["sentence1"].append(sentence(fields[i1], path, lineno, "sentence1"))
        columns["sentence2"].append(sentence(fields[i2], path, lineno, "sentence2"))
        columns["score"].append(float(label))
        columns["label"].append(label)
    return columns


def read_wikiqa(path: PathLike) -> Dataset:
    """Read WikiQA ``question \\t candidate \\t 0/1`` (questions in consecutive runs).

    Returns:
        columns ``sentence1`` (question), ``sentence2`` (candidate), ``score``,
        ``label`` and ``query_id`` (0, 1, ...: one id per run of the same question).
    """
    columns = _read_binary_pairs(path, (0, 1, 2))
    query_ids: list[int] = []
    previous = None
    for question in columns["sentence1"]:
        if question != previous:
            query_ids.append(query_ids[-1] + 1 if query_ids else 0)
        else:
            query_ids.append(query_ids[-1])
        previous = question
    columns["query_id"] = query_ids
    return to_dataset(columns)


def read_quora(path: PathLike) -> Dataset:
    """Read Quora question pairs.

    The files here (BiMPM split, tokenized) are ``question1 \\t question2 \\t 0/1``;
    BiMPM's original 4-column layout ``label \\t question1 \\t question2 \\t id`` is
    recognised from the first line and read too.

    Returns:
        columns ``sentence1``, ``sentence2``, ``score`` (0.0/1.0), ``label`` (0/1).
    """
    lines = read_lines(path)
    if len(lines[0].split("\t")) != 4:
        return to_dataset(_read_binary_pairs(path, (0, 1, 2)))
    columns: dict[str, list[Any]] = {"sentence1": [], "sentence2": [], "score": [], "label": []}
    for lineno, line in enumerate(lines, start=1):
        fields = split_fields(line, path, lineno, 4)
        label = binary_label(fields[0], path, lineno)
        columns["sentence1"].append(sentence(fields[1], path, lineno, "question1"))
        columns["sentence2"].append(sentence(fields[2], path, lineno, "question2"))
        columns["score"].append(float(label))
        columns["label"].append(label)
    return to_dataset(columns)


# --------------------------------------------------------------------------- single sentences


def _sst_row(line: str, tabbed: bool, path: PathLike, lineno: int) -> tuple[str, int]:
    """``(sentence, label)`` from one SST line in either layout."""
    if tabbed:
        text, label = split_fields(line, path, lineno, 2)
    else:
        label, _, text = line.partition(" ")
    return sentence(text, path, lineno), int_label(label, path, lineno)


def read_sst(path: PathLike) -> Dataset:
    """Read SST: SentEval's ``sentence \\t label`` or ``stsa.binary``'s ``label sentence``.

    The layout is taken from the first line (a tab means SentEval's); every line
    must then follow it.

    Returns:
        columns ``sentence`` and ``label`` (int).
    """
    lines = read_lines(path)
    tabbed = "\t" in lines[0]
    columns: dict[str, list[Any]] = {"sentence": [], "label": []}
    for lineno, line in enumerate(lines, start=1):
        text, label = _sst_row(line, tabbed, path, lineno)
        columns["sentence"].append(text)
        columns["label"].append(label)
    return to_dataset(columns)


def read_sentences(path: PathLike, skip_empty: bool = False) -> Dataset:
    """Read one sentence a line (e.g. SimCSE's wiki1m), stripped of surrounding spaces.

    An empty (or blank) line is an error by default: in an unlabelled corpus it is
    most likely a broken file. With ``skip_empty=True`` such lines are skipped,
    logged at WARNING level with their count and noted in ``info.description``.

    Returns:
        column ``sentence``.
    """
    lines = read_lines(path)
    texts, skipped = [], 0
    for lineno, line in enumerate(lines, start=1):
        if skip_empty and not line.strip():
            skipped += 1
            continue
        texts.append(sentence(line, path, lineno))
    notes = skip_note(path, skipped, len(lines), "empty line", level=logging.WARNING)
    return to_dataset({"sentence": texts}, notes)
