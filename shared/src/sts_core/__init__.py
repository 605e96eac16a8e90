"""sts_core: sentence embeddings for Semantic Textual Similarity on the Hugging Face stack.

The names below load lazily, so ``import sts_core`` stays fast and imports neither
torch nor transformers until one of them is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names' types for mypy; at run time they load lazily (__getattr__)
    from sts_core.encoder import SentenceEncoder as SentenceEncoder
    from sts_core.evaluation.sts import STS_TASKS as STS_TASKS
    from sts_core.evaluation.sts import STSEvaluator as STSEvaluator
    from sts_core.pooling import POOLING_MODES as POOLING_MODES
    from sts_core.prompts import PROMPT_TEMPLATES as PROMPT_TEMPLATES
    from sts_core.training import BaseConfig as BaseConfig
    from sts_core.training import BaseTrainer as BaseTrainer
    from sts_core.training import DataArguments as DataArguments
    from sts_core.training import ModelArguments as ModelArguments

__version__ = "0.2.0"

_LAZY = {
    "SentenceEncoder": "sts_core.encoder",
    "POOLING_MODES": "sts_core.pooling",
    "PROMPT_TEMPLATES": "sts_core.prompts",
    "STSEvaluator": "sts_core.evaluation.sts",
    "STS_TASKS": "sts_core.evaluation.sts",
    "BaseConfig": "sts_core.training",
    "BaseTrainer": "sts_core.training",
    "ModelArguments": "sts_core.training",
    "DataArguments": "sts_core.training",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sts_core' has no attribute {name!r}")
