"""File formats by name, and guessing the format of a file or folder a user points at."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from datasets import Dataset

from ._io import ScoreRange
from .errors import DataConfigError, DataFormatError
from .nli import read_nli_csv, read_nli_jsonl, read_nli_senteval, read_nli_triplets
from .readers import (
    read_cosent_tsv,
    read_mrpc,
    read_quora,
    read_sentences,
    read_senteval_sts,
    read_sick,
    read_sst,
    read_stsb_csv,
    read_wikiqa,
)
from .tables import (
    READ,
    TABLE_SUFFIXES,
    TableReading,
    first_json_record,
    header_is_recognisable,
    is_saved_dataset,
    read_table,
    table_header,
)

__all__ = ["FORMATS", "guess_format", "read_path"]

#: format name -> reader taking a path
FORMATS: dict[str, Callable[..., Dataset]] = {
    "sts": read_senteval_sts,
    "stsb": read_stsb_csv,
    "sick": read_sick,
    "nli-senteval": read_nli_senteval,
    "nli-csv": read_nli_csv,
    "nli-jsonl": read_nli_jsonl,
    "nli-triplets": read_nli_triplets,
    "cosent": read_cosent_tsv,
    "mrpc": read_mrpc,
    "wikiqa": read_wikiqa,
    "quora": read_quora,
    "sst": read_sst,
    "sentences": read_sentences,
    "table": read_table,
    "nli": read_table,  # a table of NLI classes (TableReading.for_format)
}
#: the formats read as tables with a header (``columns``, ``score_range``, a reading)
TABLE_FORMATS = ("table", "nli")

_SICK_FILES = {
    "train": "SICK_train.txt",
    "dev": "SICK_trial.txt",
    "test": "SICK_test_annotated.txt",
}


def _dir_target(path: Path, split: str) -> tuple[str, Path] | None:
    """Format and path for a folder: STS12-16, SentEval NLI, STS-B or SICK folders."""
    if any(path.glob("STS*.input.*.txt")):
        return "sts", path
    if (path / f"s1.{split}").is_file():
        return "nli-senteval", path
    if (path / f"sts-{split}.csv").is_file():
        return "stsb", path / f"sts-{split}.csv"
    if split in _SICK_FILES and (path / _SICK_FILES[split]).is_file():
        return "sick", path / _SICK_FILES[split]
    return None


def _csv_format(path: Path) -> str:
    """Tell the CSV formats apart by their header line: SimCSE's triplets, the official NLI
    layout (a ``gold_label`` column), else a table (whose label column of NLI class names
    is read as NLI classes there, :mod:`~sts_core.data.tables`)."""
    header = table_header(path)
    if header == ["sent0", "sent1", "hard_neg"]:
        return "nli-triplets"
    if "sentence1" in header and "gold_label" in header:
        return "nli-csv"
    return "table"


def _jsonl_format(path: Path) -> str:
    """The official SNLI/MultiNLI jsonl (a ``gold_label`` key), else a table."""
    record = first_json_record(path)
    return "nli-jsonl" if record is not None and "gold_label" in record else "table"


def _tsv_format(path: Path, columns: Mapping[str, str] | None) -> str:
    """A table when the first line is a header (:func:`header_is_recognisable`), else
    CoSENT's three tab-separated columns without a header."""
    return "table" if header_is_recognisable(table_header(path), columns) else "cosent"


def _folder_hint(path: Path) -> str | None:
    """Formats recognisable only by the folder or file name (``quora``, ``wikiqa``, ``wiki1m``)."""
    parts = [part.lower() for part in path.parts]
    for hint, fmt in (("wikiqa", "wikiqa"), ("quora", "quora"), ("wiki1m", "sentences")):
        if any(hint in part for part in parts):
            return fmt
    return None


def _file_format(path: Path, columns: Mapping[str, str] | None = None) -> str | None:
    """Guess a file's format from its name, extension, folder or first line; a ``columns``
    mapping makes a ``.csv``, ``.tsv`` or ``.jsonl`` file a table."""
    name, suffix = path.name, path.suffix.lower()
    if name.startswith("sts-") and suffix == ".csv":
        return "stsb"
    if suffix in (".json", ".parquet") or (columns and suffix in TABLE_SUFFIXES):
        return "table"
    if suffix == ".csv":
        return _csv_format(path)
    if suffix == ".jsonl":
        return _jsonl_format(path)
    if suffix == ".tsv":
        return _tsv_format(path, columns)
    if name.startswith("SICK") and suffix == ".txt":
        return "sick"
    if name.startswith("msr_paraphrase"):
        return "mrpc"
    if suffix == ".data":
        return "cosent"
    if name.startswith(("stsa.", "sentiment-")):
        return "sst"
    return _folder_hint(path)


def guess_format(
    path: str | Path, split: str = "train", columns: Mapping[str, str] | None = None
) -> tuple[str, Path]:
    """Return ``(format name, path to read)`` for a file or folder, or raise.

    Folders: ``save_to_disk`` folders (``table``), STS12-16 (``STS*.input.*.txt``),
    SentEval NLI (``s1.<split>``), STS-B (``sts-<split>.csv``), SICK
    (``SICK_<train|trial|test_annotated>.txt``). Files: ``sts-*.csv`` STS-B; other ``.csv``
    by header (SimCSE triplets ``sent0,sent1,hard_neg``; NLI: ``sentence1`` and
    ``gold_label``; else a table); ``.jsonl`` NLI when its
    first record has ``gold_label``, else a table; ``.json`` and ``.parquet`` tables;
    ``.tsv`` a table when its first line is a header (it names ``score`` or ``label``,
    ``anchor``/``positive``, ``sentence1``/``sentence2`` or ``sentence``), else CoSENT's
    three columns without header, as ``.data``; ``SICK*.txt``, ``msr_paraphrase*``,
    ``stsa.*`` / ``sentiment-*`` SST; files under a ``*quora*`` / ``*wikiqa*`` folder and
    ``*wiki1m*`` files. With ``columns``, a ``.csv``/``.tsv``/``.jsonl`` file is a table.
    Anything else needs an explicit ``fmt``.
    """
    path = Path(path)
    target = None
    if path.is_dir():
        target = ("table", path) if is_saved_dataset(path) else _dir_target(path, split)
    if target is None and path.is_file():
        fmt = _file_format(path, columns)
        target = (fmt, path) if fmt else None
    if target is None:
        known = ", ".join(FORMATS)
        raise DataConfigError(f"{path}: cannot guess the data format; pass fmt= one of: {known}")
    return target


def read_path(
    path: str | Path,
    split: str = "train",
    fmt: str | None = None,
    columns: Mapping[str, str] | None = None,
    score_range: ScoreRange | None = None,
    reading: TableReading = READ,
) -> Dataset:
    """Read a file or folder in format ``fmt`` (guessed when ``None``). ``columns``,
    ``score_range`` and ``reading`` are for tables (:func:`~sts_core.data.tables.read_table`;
    ``nli``: a table of NLI classes); a ``columns`` mapping for a file read in another
    format is an error naming ``reading.option``."""
    guessed = fmt is None
    if fmt is None:
        fmt, path = guess_format(path, split, columns)
    if guessed and fmt == "cosent" and Path(path).suffix.lower() == ".tsv":
        return _read_headerless_tsv(Path(path), reading.option)
    if fmt not in FORMATS:
        raise DataConfigError(f"unknown data format {fmt!r}; known: {', '.join(FORMATS)}")
    if fmt in TABLE_FORMATS:
        return read_table(path, columns, split, score_range, reading.for_format(fmt))
    if columns:
        raise DataConfigError(
            f"{path}: {reading.option} is for tables with a header, but this is read as the "
            f"{fmt} format (set the format to table to read it as a table)"
        )
    if fmt == "nli-senteval":
        return read_nli_senteval(path, split)
    return FORMATS[fmt](path)


def _read_headerless_tsv(path: Path, option: str = "columns") -> Dataset:
    """A ``.tsv`` without a recognisable header, read as CoSENT's three columns; an error on
    its first line says how a header is recognised (and names ``option``)."""
    try:
        return read_cosent_tsv(path)
    except DataFormatError as error:
        if error.line != 1:
            raise
        hint = (
            "; read as three tab-separated columns without a header (sentence1, sentence2, "
            "score): a header line must name a score or label column, anchor/positive, "
            f"sentence1/sentence2 or sentence, or name the columns with {option}"
        )
        raise DataFormatError(error.path, error.problem + hint, 1) from None
