"""File formats by name, and guessing the format of a file or folder a user points at."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from datasets import Dataset

from .errors import DataConfigError
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
}

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


def _csv_format(path: Path) -> str | None:
    """Tell the CSV formats apart by their header line."""
    with path.open(encoding="utf-8-sig", errors="replace") as handle:
        header = handle.readline().strip().split(",")
    if header == ["sent0", "sent1", "hard_neg"]:
        return "nli-triplets"
    if "sentence1" in header and ("label" in header or "gold_label" in header):
        return "nli-csv"
    return None


def _folder_hint(path: Path) -> str | None:
    """Formats recognisable only by the folder or file name (``quora``, ``wikiqa``, ``wiki1m``)."""
    parts = [part.lower() for part in path.parts]
    for hint, fmt in (("wikiqa", "wikiqa"), ("quora", "quora"), ("wiki1m", "sentences")):
        if any(hint in part for part in parts):
            return fmt
    return None


def _file_format(path: Path) -> str | None:
    """Guess a file's format from its name, extension, folder or (for CSV) header."""
    name, suffix = path.name, path.suffix.lower()
    if name.startswith("sts-") and suffix == ".csv":
        return "stsb"
    if suffix == ".csv":
        return _csv_format(path)
    if suffix == ".jsonl":
        return "nli-jsonl"
    if name.startswith("SICK") and suffix == ".txt":
        return "sick"
    if name.startswith("msr_paraphrase"):
        return "mrpc"
    if suffix in (".data", ".tsv"):
        return "cosent"
    if name.startswith(("stsa.", "sentiment-")):
        return "sst"
    return _folder_hint(path)


def guess_format(path: str | Path, split: str = "train") -> tuple[str, Path]:
    """Return ``(format name, path to read)`` for a file or folder, or raise.

    Folders: STS12-16 (``STS*.input.*.txt``), SentEval NLI (``s1.<split>``), STS-B
    (``sts-<split>.csv``), SICK (``SICK_<train|trial|test_annotated>.txt``). Files:
    ``sts-*.csv`` STS-B, other ``.csv`` by header (triplets or NLI), ``.jsonl`` NLI,
    ``SICK*.txt``, ``msr_paraphrase*``, ``.data``/``.tsv`` CoSENT, ``stsa.*`` /
    ``sentiment-*`` SST; files under a ``*quora*`` / ``*wikiqa*`` folder and ``*wiki1m*``
    files. Anything else needs an explicit ``fmt``.
    """
    path = Path(path)
    target = _dir_target(path, split) if path.is_dir() else None
    if target is None and path.is_file():
        fmt = _file_format(path)
        target = (fmt, path) if fmt else None
    if target is None:
        known = ", ".join(FORMATS)
        raise DataConfigError(f"{path}: cannot guess the data format; pass fmt= one of: {known}")
    return target


def read_path(path: str | Path, split: str = "train", fmt: str | None = None) -> Dataset:
    """Read a file or folder in format ``fmt`` (guessed when ``None``)."""
    if fmt is None:
        fmt, path = guess_format(path, split)
    if fmt not in FORMATS:
        raise DataConfigError(f"unknown data format {fmt!r}; known: {', '.join(FORMATS)}")
    if fmt == "nli-senteval":
        return read_nli_senteval(path, split)
    return FORMATS[fmt](path)
