"""sts_pcctuning: Pcc-tuning (Zhang and Li, 2024): a contrastive stage, then a Pearson stage."""

from sts_pcctuning.ceiling import Ceiling, closed_form_ceiling, contrastive_ceiling
from sts_pcctuning.config import PccConfig
from sts_pcctuning.loss import PearsonLoss, pearson_correlation, pearson_loss
from sts_pcctuning.method import METHOD

__all__ = [
    "METHOD",
    "Ceiling",
    "PccConfig",
    "PearsonLoss",
    "closed_form_ceiling",
    "contrastive_ceiling",
    "pearson_correlation",
    "pearson_loss",
]
