"""``main()`` of ``train.py`` (and the ``sts-sifter-train`` command)."""

from __future__ import annotations

from collections.abc import Sequence

from sts_core.training import ConfigParser, cli_main
from sts_core.training import make_parser as core_parser
from sts_sifter.config import SifterConfig
from sts_sifter.trainer import SifterTrainer

DESCRIPTION = (
    "SIFTER-SimCSE: unsupervised contrastive learning on single sentences with two "
    "syntax-aware positives (loss: sifter), or unsupervised SimCSE (loss: simcse). --config "
    "<recipe>.yaml gives defaults; flags override them."
)


def make_parser() -> ConfigParser:
    return core_parser(SifterConfig, description=DESCRIPTION)


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(SifterConfig, SifterTrainer, argv, description=DESCRIPTION)
