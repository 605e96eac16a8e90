"""The process's folder for the Arrow files of the tables it reads, and reading an
Arrow-backed table batch by batch with memory bounded by the batch, not the table.

A table file is converted to Arrow by ``datasets`` and its checked columns written as a
second Arrow file, both memory-mapped rather than held in memory; they live in one
temporary folder per process (under ``TMPDIR``), made on the first read and removed when
the process ends, a process of ``multiprocessing`` included (its finalizers run where
``atexit`` does not). A process killed outright leaves the folder behind, named
``sts-tables-*``, for the system's temporary files cleaner.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from multiprocessing.util import Finalize
from pathlib import Path
from typing import Any

import pyarrow as pa
from datasets.table import MemoryMappedTable

__all__ = ["BATCH_ROWS", "has_own_files", "record_batches", "scratch_folder", "scratch_subfolder"]

#: rows per batch of the checks and of the test-pair matching
BATCH_ROWS = 65_536

_FOLDERS: dict[int, Path] = {}  # by process id: a forked child makes its own


def scratch_folder() -> Path:
    """This process's temporary folder for table files, made on the first call."""
    pid = os.getpid()
    if pid not in _FOLDERS:
        folder = Path(tempfile.mkdtemp(prefix="sts-tables-"))
        Finalize(
            None, shutil.rmtree, args=(folder,), kwargs={"ignore_errors": True}, exitpriority=0
        )
        _FOLDERS[pid] = folder
    return _FOLDERS[pid]


def scratch_subfolder(prefix: str) -> Path:
    """A new folder inside :func:`scratch_folder`."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_folder()))


def record_batches(
    dataset: Any, names: Sequence[str], rows: int | None = None
) -> Iterator[pa.RecordBatch]:
    """Columns ``names`` of ``dataset`` (a ``datasets.Dataset``) in its row order, as
    Arrow batches of ``rows`` rows (default :data:`BATCH_ROWS`; the last one fewer). A
    table that is exactly its Arrow files (read by ``datasets`` from a file, no rows
    selected) is read from those files with plain reads, so that its pages do not stay in
    the process's memory as a memory map's do; any other one is sliced."""
    rows = rows or BATCH_ROWS
    files = _own_files(dataset)
    if files is None:
        table = dataset.select_columns(list(names)).with_format("arrow")
        for start in range(0, len(dataset), rows):
            yield from table[start : start + rows].to_batches()
        return
    held: list[pa.RecordBatch] = []  # the files' batches (datasets writes 1,000 rows each)
    count = 0
    for path in files:
        with pa.OSFile(path) as source:
            for batch in pa.ipc.open_stream(source):
                held.append(batch.select(list(names)))
                count += batch.num_rows
                while count >= rows:  # one batch is sliced, not copied (a large one often)
                    whole = held[0] if len(held) == 1 else pa.concat_batches(held)
                    yield whole.slice(0, rows)
                    held, count = [whole.slice(rows)], count - rows
    if count:
        yield pa.concat_batches(held)


def has_own_files(dataset: Any) -> bool:
    """Whether ``dataset`` is exactly its Arrow files (see :func:`record_batches`)."""
    return _own_files(dataset) is not None


def _own_files(dataset: Any) -> list[str] | None:
    """The Arrow files ``dataset`` is exactly (in order), or None: a selection of rows
    (an indices mapping), a table in memory, or one sliced, cast or renamed since it was
    read (only a choice of columns, or new metadata, leaves it its files)."""
    if dataset._indices is not None:
        return None
    data = dataset.data
    blocks = data.blocks if hasattr(data, "blocks") else [[data]]
    tables = [block for row in blocks for block in row]
    if not all(_is_whole_file(table) for table in tables):
        return None
    if sum(table.num_rows for table in tables) != len(dataset):
        return None
    return [table.path for table in tables]


#: what ``datasets`` may have replayed on a memory-mapped file that leaves its rows as read
_SAME_ROWS = {"replace_schema_metadata", "select"}


def _is_whole_file(table: Any) -> bool:
    """A ``datasets`` memory-mapped table whose rows are its file's, in order."""
    if not isinstance(table, MemoryMappedTable):
        return False
    return all(name in _SAME_ROWS for name, _args, _kwargs in table.replays)
