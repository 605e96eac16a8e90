"""Exceptions raised by the data layer.

Every problem with a data file is a :class:`DataFormatError` whose message reads
``"<path>:<line>: <problem>"`` (``"<path>: <problem>"`` for whole-file problems
such as a missing file), so callers catch one type and users can jump to the line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = [
    "DataConfigError",
    "DataContentError",
    "DataError",
    "DataFileNotFoundError",
    "DataFormatError",
]


class DataError(ValueError):
    """Base class of every error raised by :mod:`sts_core.data`."""


class DataFormatError(DataError):
    """A data file is malformed (or missing); the message names file, line and problem.

    Attributes:
        path: the offending file or folder.
        line: 1-based line number, or ``None`` for whole-file problems.
        problem: the problem alone, without the location.
    """

    def __init__(self, path: str | os.PathLike[str], problem: str, line: int | None = None):
        self.path = Path(path)
        self.line = line
        self.problem = problem
        location = f"{self.path}" if line is None else f"{self.path}:{line}"
        super().__init__(f"{location}: {problem}")

    # keep pickling (multiprocessing) working with the custom __init__
    def __reduce__(self) -> tuple[type[DataFormatError], tuple[Any, ...]]:
        return (type(self), (self.path, self.problem, self.line))


class DataFileNotFoundError(DataFormatError, FileNotFoundError):
    """A data file or folder does not exist; also a :class:`FileNotFoundError`."""


class DataConfigError(DataError):
    """A request the data layer cannot serve: unknown dataset, split, format or data folder."""


class DataContentError(DataError):
    """Data that read fine but cannot be used: too few pairs, constant gold scores.

    The message reads ``"<name> (<source>): <problem>"`` (``"<name>: <problem>"`` when
    the source is not known).

    Attributes:
        name: the task or set, e.g. ``"stsb"`` or ``"stsb_dev"``.
        source: the file, folder or hub id it came from, or ``None``.
        problem: the problem alone.
    """

    def __init__(self, name: str, problem: str, source: str | os.PathLike[str] | None = None):
        self.name = name
        self.source = None if source is None else os.fspath(source)
        self.problem = problem
        where = name if self.source is None else f"{name} ({self.source})"
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[type[DataContentError], tuple[Any, ...]]:
        return (type(self), (self.name, self.problem, self.source))
