"""The BSC package's rows of ``benchmarks/quality.py`` (entry point
``sts_core.quality_methods``): the combo of eq. 6 (μ 0.1, positives = scores above 0.6 on
the [0, 1] scale, τ 0.1, L2) with example-based shuffling, on the benchmark's STS pairs."""

from sts_bsc.config import BscConfig
from sts_bsc.trainer import BscTrainer
from sts_core.quality_methods import register_quality_method

register_quality_method(
    "ours-bsc_combo",
    "ours: BscTrainer (0.1·BSC + 0.9·MSE, eq. 6; example-based batches)",
    BscConfig,
    BscTrainer,
    unit_labels=True,
    loss="bsc",
    mu=0.1,
    label_threshold=0.6,
    bsc_temperature=0.1,
    shuffle="example",
)
