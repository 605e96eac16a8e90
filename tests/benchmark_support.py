"""Importing a benchmark script in a test (the benchmarks are scripts, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_benchmark_script(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported by path (its ``_common`` beside it)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(
            f"benchmark_{name}", REPO / "benchmarks" / f"{name}.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return module


def load_benchmark_module(name: str) -> ModuleType:
    """A module of a package under ``benchmarks/`` by its dotted name (``grid_search.cells``),
    imported with ``benchmarks/`` on the path (its ``_common`` and siblings beside it)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
