"""``CoSENTConfig``: the CoSENT method's own options on top of ``BaseConfig``."""

from __future__ import annotations

from dataclasses import dataclass, field

from sts_core.options import BELOW_ONE, POSITIVE, check_ranges
from sts_core.training import BaseConfig, GatherOptions, InfoNCEOptions, SoftmaxHeadOptions

ARCHITECTURES = ("bi-encoder", "cross-encoder")
#: the real-valued options and their ranges (sts_core.options.check_number): ε is a cosine
#: below which negatives stop being pushed; below 0 it pushes them up (loss.py), at 1 never
RANGES = {"cosent_scale": POSITIVE, "contrastive_margin": BELOW_ONE}


@dataclass
class CoSENTConfig(BaseConfig, SoftmaxHeadOptions, GatherOptions, InfoNCEOptions):
    """Training arguments of CoSENT (Huang et al., 2024) and its baselines.

    Only the method's fields are here; everything else is ``BaseConfig``'s (whose
    defaults — lr 2e-5, weight decay 0.01, 10 % warm-up, batch 16 — are the paper's);
    ``gather_across_processes`` (``GatherOptions``), ``infonce_temperature`` and
    ``positive_threshold`` (``InfoNCEOptions``) are the core's.
    """

    loss: str = "cosent"
    architecture: str = field(
        default="bi-encoder",
        metadata={
            "help": "bi-encoder (Siamese, cosine of pooled embeddings) or cross-encoder "
            "(eq. 11: one score from the concatenated pair)."
        },
    )
    cosent_scale: float = field(
        default=20.0,
        metadata={"help": "λ of eq. 10, above 0 (the paper uses 20 for every dataset)."},
    )
    contrastive_margin: float = field(
        default=0.5,
        metadata={"help": "ε of the contrastive baseline (eq. 2), in [0, 1); labels 0/1."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_infonce_options()
        check_ranges(self, RANGES)
        if self.architecture not in ARCHITECTURES:
            raise ValueError(
                f"architecture {self.architecture!r} is not one of {', '.join(ARCHITECTURES)}"
            )
        if self.architecture == "cross-encoder" and self.loss != "cosent":
            raise ValueError("the cross-encoder (eq. 11) trains with loss: cosent")
