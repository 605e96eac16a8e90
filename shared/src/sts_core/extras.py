"""Optional dependencies: import them only where used, with a message naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

EXTRAS = {
    "peft": "peft",
    "bitsandbytes": "bitsandbytes",
    "deepspeed": "deepspeed",
    "faiss": "faiss",
    "stanza": "stanza",
    "spacy": "spacy",
}


def require(module: str, extra: str | None = None, feature: str = "this feature") -> ModuleType:
    """Import ``module`` or raise ImportError saying which extra of sts-core brings it."""
    extra = extra or module
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{feature} needs the optional package {module!r}: install it with "
            f"`pip install 'sts-core[{extra}]'` (or `uv sync --extra {extra}`)"
        ) from error
