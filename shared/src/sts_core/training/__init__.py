"""Training: base config and argument parsing, collator, base Trainer, the run."""

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
from sts_core.training.trainer import AnyModelTrainer, BaseTrainer, trainer_class

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
