"""Writing a table a command made (``sts-mine``'s triplets, ``sts-data filter``'s pairs) in
the format its name says, through the atomic writer, so that every reader of the project
reads it back (``train_datasets``, ``--pairs``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sts_core.command_files import writing

#: the output formats, by the output's suffix (JSON: one object per line)
WRITERS = {".csv": "to_csv", ".jsonl": "to_json", ".json": "to_json", ".parquet": "to_parquet"}


def check_table_suffix(path: Path, option: str = "--output") -> None:
    """ValueError when ``path``'s name does not say a format :func:`write_table` writes."""
    if path.suffix.lower() not in WRITERS:
        raise ValueError(
            f"{option} {path}: give the name one of the suffixes {', '.join(WRITERS)} (the "
            "format the table is written in)"
        )


def write_table(dataset: Any, path: Path) -> None:
    """``dataset`` (a ``datasets.Dataset``) at ``path`` in the format of its suffix."""
    writer = WRITERS[path.suffix.lower()]
    options = {"lines": True, "force_ascii": False} if writer == "to_json" else {}
    options |= {"index": False} if writer == "to_csv" else {}
    with writing(path) as temporary:
        getattr(dataset, writer)(str(temporary), **options)
