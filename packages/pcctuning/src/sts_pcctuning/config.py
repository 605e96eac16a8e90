"""``PccConfig``: Pcc-tuning's own options on top of ``BaseConfig``."""

from __future__ import annotations

from dataclasses import dataclass, field

from sts_core.training import BaseConfig, GatherOptions, InfoNCEOptions

#: stage 1 (eq. 8, the core's InfoNCE with hard negatives), stage 2 (eq. 9), and the
#: cosine-MSE baseline on the same stage-2 data
LOSSES = ("infonce", "pearson", "cosine_mse")


@dataclass
class PccConfig(BaseConfig, GatherOptions, InfoNCEOptions):
    """Training arguments of Pcc-tuning (Zhang and Li, EMNLP 2024).

    Only the method's field is here (``loss``: which stage); ``infonce_temperature``
    (τ = 0.05, the paper's) and ``positive_threshold`` (``InfoNCEOptions``),
    ``gather_across_processes`` (``GatherOptions``) and ``gradient_cache_batch_size``,
    the prompt, pooling, padding side and LoRA options are the core's. The recipes set the
    paper's values.
    """

    loss: str = field(
        default="pearson",
        metadata={
            "help": "infonce (stage 1, eq. 8: in-batch InfoNCE with the hard_negative "
            "column in every denominator), pearson (stage 2, eq. 9: 1 − Pearson of the "
            "batch's cosines with its gold scores), or cosine_mse (a baseline for stage 2)."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_infonce_options()
        if self.loss not in LOSSES:
            raise ValueError(f"loss {self.loss!r} is not one of {', '.join(LOSSES)}")
        if self.loss == "pearson" and self.per_device_train_batch_size < 2:
            raise ValueError(
                "loss pearson needs at least 2 pairs per batch (a correlation), got "
                f"per_device_train_batch_size {self.per_device_train_batch_size}"
            )
