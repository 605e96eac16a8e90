"""A dataset's column as a list or, for numbers, as an array, read in one piece."""

from __future__ import annotations

from typing import Any

import numpy as np


def column_list(dataset: Any, name: str) -> list[Any]:
    """The values of column ``name`` of ``dataset`` (a ``datasets.Dataset``, or a mapping
    of lists) as a list. ``dataset[name]`` is a lazy ``Column`` in datasets ≥ 4: iterating
    it, or ``np.asarray`` of it, formats one row at a time (1.6 s against 0.11 s for this
    slice, which reads the column at once, on 20,000 selected rows, datasets 5.2)."""
    return list(dataset[name][:])


def column_array(dataset: Any, name: str) -> np.ndarray:
    """The numbers of column ``name`` as a float64 array, in the dataset's row order (its
    selection of rows, if any), read from its Arrow column without a Python object per
    value; a mapping of lists (or any other dataset) through :func:`column_list`."""
    if hasattr(dataset, "with_format") and hasattr(dataset, "select_columns"):
        table = dataset.select_columns([name]).with_format("arrow")[:]
        return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)
    return np.asarray(column_list(dataset, name), dtype=np.float64)
