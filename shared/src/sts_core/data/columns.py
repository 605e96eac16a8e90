"""A dataset's column as a list, read in one piece."""

from __future__ import annotations

from typing import Any


def column_list(dataset: Any, name: str) -> list[Any]:
    """The values of column ``name`` of ``dataset`` (a ``datasets.Dataset``, or a mapping
    of lists) as a list. ``dataset[name]`` is a lazy ``Column`` in datasets ≥ 4: iterating
    it, or ``np.asarray`` of it, formats one row at a time (1.6 s against 0.11 s for this
    slice, which reads the column at once, on 20,000 selected rows, datasets 5.2)."""
    return list(dataset[name][:])
