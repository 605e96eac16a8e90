"""The methods ``benchmarks/quality.py`` compares: each package registers its own.

A package lists a module under the entry-point group ``sts_core.quality_methods`` in its
``pyproject.toml``; importing that module calls :func:`register_quality_method` for each of
its recipes (a config class, a trainer class and the config fields that make the method,
e.g. ``loss="cosent"``). The benchmark then trains every registered method on the same data
and budget as the sentence-transformers losses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

ENTRY_POINT_GROUP = "sts_core.quality_methods"


@dataclass(frozen=True)
class QualityMethod:
    """One row of the quality table: train ``trainer_class`` with ``config_class`` and
    ``config`` (on top of the benchmark's budget); ``unit_labels``: scores scaled to 0–1."""

    key: str
    label: str
    config_class: Any
    trainer_class: Any
    config: dict[str, Any] = field(default_factory=dict)
    unit_labels: bool = False


QUALITY_METHODS: dict[str, QualityMethod] = {}


def register_quality_method(
    key: str,
    label: str,
    config_class: Any,
    trainer_class: Any,
    unit_labels: bool = False,
    **config: Any,
) -> QualityMethod:
    """Add a method (key ``ours-<name>``) to the quality benchmark."""
    method = QualityMethod(key, label, config_class, trainer_class, dict(config), unit_labels)
    QUALITY_METHODS[key] = method
    return method


def load_quality_methods() -> dict[str, QualityMethod]:
    """Import every installed package's registration module; the registered methods."""
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        entry_point.load()
    return dict(QUALITY_METHODS)
