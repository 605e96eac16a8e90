"""Dataset references as recipes and ``sts-eval --pairs`` write them: a registry name with
an optional split (``stsb:dev``, ``stsb-zh:test``), a file or folder path, a hub dataset id,
or (in Python) a ``datasets.Dataset`` / ``DatasetDict``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from datasets import Dataset, DatasetDict

from ._io import PathLike, ScoreRange
from .errors import DataConfigError, DataError
from .filtering import sick_to_sts
from .formats import TABLE_FORMATS
from .named_sets import DEFAULT_VARIANT, data_location, list_datasets, load_named, load_pairs
from .tables import READ, TableReading, from_dataset

#: the name :func:`load_reference` gives a Dataset passed in memory
IN_MEMORY = "in-memory dataset"

__all__ = ["load_reference", "registry_names", "split_reference"]


def registry_names() -> set[str]:
    """The names of the registry's datasets."""
    return {spec.name for spec in list_datasets()}


def split_reference(reference: str, default_split: str) -> tuple[str, str]:
    """``"stsb:dev"`` → ``("stsb", "dev")``; a name or path alone takes ``default_split``."""
    name, sep, split = reference.rpartition(":")
    if sep and name and name in registry_names() and split:
        return name, split
    return reference, default_split


def load_reference(
    reference: str | Dataset | DatasetDict,
    default_split: str,
    data_dir: PathLike | None = None,
    variant: str = DEFAULT_VARIANT,
    fmt: str | None = None,
    sick_to_sts_scale: bool = False,
    columns: Mapping[str, str] | None = None,
    score_range: ScoreRange | None = None,
    reading: TableReading = READ,
) -> tuple[str, Dataset]:
    """Load a dataset reference: a registry name (``name[:split]``), a path, a hub dataset
    id (``owner/name[:split]``) or a ``datasets.Dataset`` / ``DatasetDict``.

    Args:
        reference: ``name``, ``name:split``, a file or folder path (``folder:split`` for a
            DatasetDict's), a hub id, or a Dataset / DatasetDict object.
        default_split: the split when the reference names none.
        data_dir: the data folder (default ``$STS_DATA_DIR``).
        variant: the data variant of registry datasets (``senteval`` or ``raw``).
        fmt: the format of a file given by path, when its name does not say (``table``
            reads any file with a header as a table).
        sick_to_sts_scale: rescale SICK's 1–5 scores to 0–5 (``sickr`` only).
        columns: for tables (files with a header, save_to_disk folders, hub ids, Dataset
            objects): ``{project column: table column}``, e.g. ``{"sentence1": "text_a",
            "sentence2": "text_b", "score": "sim"}``; unset: found by the reader's rules
            (:mod:`sts_core.data.tables`; against sentence-transformers: docs/data.md). An
            error with a registry name or a file in a benchmark format.
        score_range: for tables: refuse a score outside ``[low, high]``, naming the row and
            the table's column.
        reading: for tables: the option their errors name, how their label column is
            found, NLI classes (:class:`~sts_core.data.tables.TableReading`; ``fmt="nli"``
            reads NLI classes too).

    Returns:
        The dataset's name (the path for a file, ``"in-memory dataset"`` for an object) and
        the dataset.
    """
    if isinstance(reference, Dataset | DatasetDict):
        if fmt not in (None, *TABLE_FORMATS):
            raise DataConfigError(f"fmt={fmt!r} is for files and folders, not a Dataset object")
        reading = reading.for_format(fmt)
        dataset = from_dataset(reference, columns, default_split, score_range, IN_MEMORY, reading)
        return IN_MEMORY, dataset
    name, split = split_reference(reference, default_split)
    if name in registry_names():
        if columns:
            raise DataConfigError(
                f"{reading.option}: {name} is a registry dataset, read with the project's "
                "columns; a columns mapping is for tables (files with a header, hub ids, "
                "Datasets)"
            )
        dataset = load_named(name, split, data_dir=data_dir, variant=variant)
    else:
        dataset = load_pairs(name, split, data_dir, fmt, columns, score_range, reading)
    if name == "sickr" and sick_to_sts_scale:
        dataset = sick_to_sts(dataset)
    return name, dataset


def reference_path(
    reference: str, split: str, data_dir: PathLike | None = None, variant: str = DEFAULT_VARIANT
) -> str | None:
    """Where :func:`load_reference` reads ``reference`` from, as a local path: a registry
    dataset's file under the data folder (None when it is not there), else the path
    (``folder:split``: the folder; a relative path that does not exist: under the data
    folder). A hub id comes back as it is (it is not a local path)."""
    name, split = split_reference(reference, split)
    if name in registry_names():
        try:
            return data_location(name, split, data_dir, variant)
        except DataError:
            return None
    root = data_dir or os.environ.get("STS_DATA_DIR")
    base, sep, named_split = name.rpartition(":")
    candidates = [name, base] if sep and base and named_split else [name]  # folder:split
    for candidate in candidates:
        path = Path(candidate).expanduser()
        if path.exists():
            return str(path)
        if not path.is_absolute() and root and (Path(root).expanduser() / path).exists():
            return str(Path(root).expanduser() / path)
    return str(Path(name).expanduser())
