"""``PccConfig``: Pcc-tuning's own options on top of ``BaseConfig``."""

from __future__ import annotations

from dataclasses import dataclass

from sts_core.training import BaseConfig, GatherOptions, InfoNCEOptions


@dataclass
class PccConfig(BaseConfig, GatherOptions, InfoNCEOptions):
    """Training arguments of Pcc-tuning (Zhang and Li, EMNLP 2024).

    Only the method's field is here (``loss``: which stage); ``infonce_temperature``
    (τ = 0.05, the paper's) and ``positive_threshold`` (``InfoNCEOptions``),
    ``gather_across_processes`` (``GatherOptions``) and ``gradient_cache_batch_size``,
    the prompt, pooling, padding side and LoRA options are the core's. The recipes set the
    paper's values.
    """

    loss: str = "pearson"  # stage 2; infonce is stage 1

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_infonce_options()
        if self.loss == "pearson" and self.per_device_train_batch_size < 2:
            raise ValueError(
                "loss pearson needs at least 2 pairs per batch (a correlation), got "
                f"per_device_train_batch_size {self.per_device_train_batch_size}"
            )
