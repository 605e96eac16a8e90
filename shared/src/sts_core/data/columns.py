"""A dataset's column as a list or, for numbers, as an array, read in one piece; its text
columns as ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


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


def text_ids(dataset: Any, names: Sequence[str]) -> np.ndarray:
    """The texts of columns ``names`` of ``dataset`` (a ``datasets.Dataset``) as ids: a
    ``(rows, len(names))`` int32 array in the dataset's row order, where two cells hold
    the same id exactly when they hold the same text, in the same column or not. Arrow
    dictionary-encodes the columns together, without a Python string per cell."""
    rows = len(dataset)
    if rows == 0 or not names:
        return np.zeros((rows, len(names)), dtype=np.int32)
    table: pa.Table = dataset.select_columns(list(names)).with_format("arrow")[:]
    columns = [table.column(name) for name in names]
    kind = pa.large_string() if any(c.type == pa.large_string() for c in columns) else None
    chunks = [chunk.cast(kind) if kind else chunk for c in columns for chunk in c.chunks]
    encoded = pc.dictionary_encode(pa.chunked_array(chunks))
    flat = [chunk.indices.to_numpy() for chunk in encoded.chunks]
    return np.concatenate(flat).astype(np.int32).reshape(len(names), rows).T.copy()
