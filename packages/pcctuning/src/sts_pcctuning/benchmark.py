"""The Pcc-tuning package's row of ``benchmarks/quality.py`` (entry point
``sts_core.quality_methods``): the Pearson stage (eq. 9) on the benchmark's STS pairs from
the base model (stage 2 alone: the base model, all-MiniLM-L6-v2, is already contrastive)."""

from sts_core.quality_methods import register_quality_method
from sts_pcctuning.config import PccConfig
from sts_pcctuning.trainer import PccTrainer

register_quality_method(
    "ours-pcc_pearson",
    "ours: PccTrainer (1 − Pearson over the batch, eq. 9)",
    PccConfig,
    PccTrainer,
    loss="pearson",
)
