"""``main()`` of ``train.py`` (and the ``sts-bsc-train`` command)."""

from __future__ import annotations

from collections.abc import Sequence

from sts_bsc.config import BscConfig
from sts_bsc.trainer import BscTrainer
from sts_core.training import ConfigParser, cli_main
from sts_core.training import make_parser as core_parser

DESCRIPTION = (
    "Train with the batch-softmax contrastive loss (BSC): in-batch softmax over both sides "
    "of the pairs, labeled negatives, the combo with MSE, and batches rebuilt every epoch "
    "by example-based or fast shuffling. --config <recipe>.yaml gives defaults; flags "
    "override them."
)


def make_parser() -> ConfigParser:
    return core_parser(BscConfig, description=DESCRIPTION)


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(BscConfig, BscTrainer, argv, description=DESCRIPTION)
