"""The CoSENT package's rows of ``benchmarks/quality.py`` (entry point
``sts_core.quality_methods``)."""

from sts_core.quality_methods import register_quality_method
from sts_cosent.config import CoSENTConfig
from sts_cosent.trainer import CoSENTTrainer

register_quality_method(
    "ours-cosent", "ours: CoSENTTrainer (cosent)", CoSENTConfig, CoSENTTrainer, loss="cosent"
)
register_quality_method(
    "ours-cosine_mse",
    "ours: CoSENTTrainer (cosine_mse)",
    CoSENTConfig,
    CoSENTTrainer,
    unit_labels=True,
    loss="cosine_mse",
)
