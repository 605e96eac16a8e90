"""The quality search's data and fixed settings, as ``sts-search`` is given them: the
training and dev tables, the score range and the recipe keys every cell gets. A leaf module:
the cells (:func:`grid_search.cells.search_inputs`) and ``sts-search``'s side
(:mod:`grid_search.via_search`) both read it, neither through the other."""

from __future__ import annotations

from typing import Any

#: the quality search's data and budget as ``sts-search``'s inputs
TRAIN_TABLES = ["stsb", "sickr"]
DEV_TABLE = "stsb:dev"
SCORE_RANGE = [0.0, 5.0]
FIXED_SETTINGS: dict[str, Any] = {
    "filter_test_overlap": True,  # the 5,398 pairs: no sentence of a test task
    "weight_decay": 0.01,
    "warmup_steps": 0.1,
    "pooling": "mean",
}
