"""Fallback to the Hugging Face hub when no local data folder is configured.

Used only when neither ``data_dir`` nor ``STS_DATA_DIR`` is given and the hub is
not switched off (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``). Hub columns are
mapped onto the project's (``sentence1``, ``sentence2``, ``score`` [, ``label``]).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from datasets import Dataset, Features, Value

logger = logging.getLogger("sts_core.data")

_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class HubSource:
    """Where a registry dataset lives on the hub and how to map it onto our columns.

    Attributes:
        repo_id: hub dataset id, e.g. ``"mteb/sts12-sts"``.
        splits: our split name -> the hub's split name.
        config: hub configuration name, if any.
        columns: hub column -> our column (renames applied before anything else).
        score_scale: factor bringing the hub's score onto our range (STS-B on the hub
            ``sentence-transformers/stsb`` is 0-1, ours 0-5).
        nli: the hub ``label`` is an NLI class (0/1/2, -1 = no gold): rows with -1 are
            dropped (logged) and ``score`` is derived as 2.0/1.0/0.0.
    """

    repo_id: str
    splits: Mapping[str, str]
    config: str | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
    score_scale: float = 1.0
    nli: bool = False


def hub_offline() -> bool:
    """True when the environment switches the Hugging Face hub off."""
    names = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in names)


def _load_raw(source: HubSource, split: str) -> Dataset:
    """Download (or read from the hub cache) one split; patched out in tests."""
    from datasets import load_dataset

    return load_dataset(source.repo_id, source.config, split=source.splits[split])


def _nli_rows(ds: Dataset, source: HubSource) -> Dataset:
    """Drop rows without gold label and add the ordered-class ``score``."""
    total = len(ds)
    ds = ds.filter(lambda label: label >= 0, input_columns="label")
    if len(ds) < total:
        logger.info(
            "%s: skipped %d of %d rows (no gold label)", source.repo_id, total - len(ds), total
        )
    return ds.map(lambda b: {"score": [2.0 - float(x) for x in b["label"]]}, batched=True)


def load_from_hub(source: HubSource, split: str) -> Dataset:
    """Load ``split`` of ``source`` and map it onto the project's columns and types."""
    ds = _load_raw(source, split)
    renames = {k: v for k, v in source.columns.items() if k in ds.column_names and k != v}
    ds = ds.rename_columns(renames)
    if source.nli:
        ds = _nli_rows(ds, source)
    elif source.score_scale != 1.0:
        scale = source.score_scale
        ds = ds.map(lambda b: {"score": [float(x) * scale for x in b["score"]]}, batched=True)
    keep = [c for c in ("sentence1", "sentence2", "score", "label") if c in ds.column_names]
    types = {"score": "float64", "label": "int64"}
    features = Features({c: Value(types.get(c, "string")) for c in keep})
    return ds.select_columns(keep).cast(features)
