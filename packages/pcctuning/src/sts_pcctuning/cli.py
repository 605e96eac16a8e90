"""``main()`` of ``train.py`` (and the ``sts-pcc-train`` command)."""

from __future__ import annotations

from collections.abc import Sequence

from sts_core.training import ConfigParser, cli_main
from sts_core.training import make_parser as core_parser
from sts_pcctuning.config import PccConfig
from sts_pcctuning.trainer import PccTrainer

DESCRIPTION = (
    "Pcc-tuning: stage 1 trains with in-batch InfoNCE on NLI triplets (loss: infonce), "
    "stage 2 with 1 − Pearson correlation on scored pairs (loss: pearson). --config "
    "<recipe>.yaml gives defaults; flags override them."
)


def make_parser() -> ConfigParser:
    return core_parser(PccConfig, description=DESCRIPTION)


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(PccConfig, PccTrainer, argv, description=DESCRIPTION)
