"""Training: base config and argument parsing, collator, base Trainer, distributed helpers."""

from sts_core.training.collator import SentenceCollator, split_features
from sts_core.training.config import (
    BaseConfig,
    DataArguments,
    GatherOptions,
    InfoNCEOptions,
    ModelArguments,
    SoftmaxHeadOptions,
)
from sts_core.training.distributed import (
    all_gather_with_grad,
    gathered_loss_scale,
    scale_gathered_gradient,
    world_size,
)
from sts_core.training.losses import cosine_mse_loss
from sts_core.training.model import build_encoder
from sts_core.training.parser import ConfigError, ConfigParser, read_recipe
from sts_core.training.run import TrainingRun, cli_main, run_stages
from sts_core.training.trainer import BaseTrainer

__all__ = [
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
    "all_gather_with_grad",
    "build_encoder",
    "cli_main",
    "cosine_mse_loss",
    "gathered_loss_scale",
    "read_recipe",
    "run_stages",
    "scale_gathered_gradient",
    "split_features",
    "world_size",
]
