"""A trained cell's embedding weights: what the benchmark saves of a cell
(:func:`~sts_core.training.averaging.embedding_weights`, the core's, which ``sts-search
--soup`` averages too) and how they are loaded into a fresh encoder (:func:`load_weights`).
A leaf module: the benchmark's trainer (:mod:`grid_search.search`) and ``sts-search``'s
side (:mod:`grid_search.via_search`) both use it."""

from __future__ import annotations

from typing import Any

import _common as common

from sts_core.training.averaging import embedding_weights

__all__ = ["embedding_weights", "load_weights"]


def load_weights(encoder: Any, state: dict[str, Any], source: Any) -> None:
    """Load ``state`` into a freshly built encoder: every encoder weight must be there; a
    head's weights (saved by earlier versions of this script) are left out."""
    result = encoder.load_state_dict(state, strict=False)
    stray = [key for key in result.unexpected_keys if key.startswith("backbone.")]
    if result.missing_keys or stray:
        raise common.BenchmarkError(
            f"{source}: weights do not fit the model (missing {result.missing_keys[:3]}, "
            f"unexpected {stray[:3]}); delete the file to train the cell again"
        )
