"""``main()`` of ``train.py`` (and the ``sts-regression-train`` command)."""

from __future__ import annotations

from collections.abc import Sequence

from sts_core.training import ConfigParser, cli_main
from sts_core.training import make_parser as core_parser
from sts_regression.config import RegressionConfig
from sts_regression.trainer import RegressionTrainer

DESCRIPTION = (
    "Train sentence embeddings through a Siamese regression head with Translated ReLU or "
    "Smooth K2 (or L1, MSE, SBERT's softmax classifier). --config <recipe>.yaml gives "
    "defaults; flags override them."
)


def make_parser() -> ConfigParser:
    return core_parser(RegressionConfig, description=DESCRIPTION)


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(RegressionConfig, RegressionTrainer, argv, description=DESCRIPTION)
