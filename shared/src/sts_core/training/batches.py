"""An epoch's global batches as two arrays: the row indices of every batch in order, and
where each batch ends.

A batch plan over millions of rows hands its batches around as :class:`Batches` (8 bytes
a row), not as Python lists of ints (about 40 bytes a row); indexing or iterating gives
each batch as a list of ints, so code written for lists of lists reads it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

__all__ = ["Batches"]


class Batches(Sequence[list[int]]):
    """Global batches: ``rows`` (int64, every batch's indices in order) and ``ends``
    (int64, where each batch ends in ``rows``)."""

    def __init__(self, rows: np.ndarray, ends: np.ndarray) -> None:
        self.rows = np.asarray(rows, dtype=np.int64)
        self.ends = np.asarray(ends, dtype=np.int64)

    @classmethod
    def of(cls, batches: Sequence[Any]) -> Batches:
        """``batches`` (lists or arrays of indices) as Batches; Batches as they are."""
        if isinstance(batches, Batches):
            return batches
        rows = np.fromiter((int(row) for batch in batches for row in batch), dtype=np.int64)
        return cls(rows, np.cumsum([len(batch) for batch in batches]))

    @classmethod
    def chunked(cls, order: np.ndarray, size: int) -> Batches:
        """``order`` in consecutive batches of ``size`` (the last one shorter)."""
        ends = np.minimum(np.arange(size, len(order) + size, size), len(order))
        return cls(order, ends)

    @property
    def starts(self) -> np.ndarray:
        """Where each batch starts in :attr:`rows`."""
        starts = np.zeros_like(self.ends)
        starts[1:] = self.ends[:-1]
        return starts

    @property
    def sizes(self) -> np.ndarray:
        """Each batch's rows."""
        return self.ends - self.starts

    def __len__(self) -> int:
        return len(self.ends)

    @overload
    def __getitem__(self, index: int) -> list[int]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[int]]: ...

    def __getitem__(self, index: int | slice) -> list[int] | list[list[int]]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        position = range(len(self))[index]  # an IndexError beyond the end, as a list's
        start = int(self.ends[position - 1]) if position else 0
        return self.rows[start : int(self.ends[position])].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        for start, end in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
            yield self.rows[start:end].tolist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Batches):
            return np.array_equal(self.rows, other.rows) and np.array_equal(self.ends, other.ends)
        if isinstance(other, Sequence):
            return self.to_lists() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable arrays, as a list

    def to_lists(self) -> list[list[int]]:
        """Every batch as a list of ints (what a checkpoint saves)."""
        return list(self)

    def __repr__(self) -> str:
        return f"Batches({len(self)} batches, {len(self.rows)} rows)"
