"""``main()`` of ``train.py`` (and the ``sts-cosent-train`` command)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from sts_core.training import ConfigError, ConfigParser, cli_main
from sts_core.training import make_parser as core_parser
from sts_cosent.config import CoSENTConfig
from sts_cosent.trainer import CoSENTCrossEncoderTrainer, CoSENTTrainer

DESCRIPTION = (
    "Train sentence embeddings (or a cross-encoder) with the CoSENT ranking loss. "
    "--config <recipe>.yaml gives defaults; flags override them."
)


def make_parser() -> ConfigParser:
    return core_parser(CoSENTConfig, description=DESCRIPTION)


def trainer_class_for(
    argv: Sequence[str] | None,
) -> type[CoSENTTrainer] | type[CoSENTCrossEncoderTrainer]:
    """The trainer the recipe's ``architecture`` asks for."""
    _, _, config = make_parser().parse(argv)
    return CoSENTCrossEncoderTrainer if config.architecture == "cross-encoder" else CoSENTTrainer


def main(argv: Sequence[str] | None = None) -> int:
    try:
        trainer_class = trainer_class_for(argv)
    except (ConfigError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return cli_main(CoSENTConfig, trainer_class, argv, description=DESCRIPTION)
