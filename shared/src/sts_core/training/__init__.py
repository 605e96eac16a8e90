"""Training: base config and argument parsing, collator, base Trainer, the run.

The Trainer classes (``AnyModelTrainer``, ``BaseTrainer``) and ``trainer_class`` load on
first use (module ``__getattr__``): importing the package, and a run's checks
(``check_only``), import no ``transformers.Trainer``.
"""

from typing import TYPE_CHECKING, Any

from sts_core.training.collator import SentenceCollator, split_features
from sts_core.training.config import (
    BaseConfig,
    DataArguments,
    GatherOptions,
    InfoNCEOptions,
    ModelArguments,
    SoftmaxHeadOptions,
)
from sts_core.training.encoder_setup import build_encoder
from sts_core.training.parser import ConfigError, ConfigParser, read_recipe
from sts_core.training.run import TrainingRun, cli_main, command, run_stages

if TYPE_CHECKING:  # at run time they load on first use (__getattr__)
    from sts_core.training.trainer import AnyModelTrainer, BaseTrainer, trainer_class

#: the names of :mod:`sts_core.training.trainer` the package gives, imported on first use
_TRAINER_NAMES = ("AnyModelTrainer", "BaseTrainer", "trainer_class")

__all__ = [
    "AnyModelTrainer",
    "BaseConfig",
    "BaseTrainer",
    "ConfigError",
    "ConfigParser",
    "DataArguments",
    "GatherOptions",
    "InfoNCEOptions",
    "ModelArguments",
    "SentenceCollator",
    "SoftmaxHeadOptions",
    "TrainingRun",
    "build_encoder",
    "cli_main",
    "command",
    "read_recipe",
    "run_stages",
    "split_features",
    "trainer_class",
]


def __getattr__(name: str) -> Any:
    if name in _TRAINER_NAMES:
        from sts_core.training import trainer

        return getattr(trainer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
