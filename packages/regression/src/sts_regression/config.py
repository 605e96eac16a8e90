"""``RegressionConfig``: the regression method's own options on top of ``BaseConfig``."""

from __future__ import annotations

from dataclasses import dataclass, field

from sts_core.heads import PAIR_FEATURES
from sts_core.options import FINITE, NON_NEGATIVE, POSITIVE, check_number, check_ranges
from sts_core.training import BaseConfig, SoftmaxHeadOptions
from sts_regression.loss import CLAMP_MODES, check_band

#: the real-valued options and their ranges (sts_core.options.check_number); x0 ≤ d/2 is
#: check_band's
RANGES = {"k": POSITIVE, "x0": NON_NEGATIVE, "label_spacing": POSITIVE}


@dataclass
class RegressionConfig(BaseConfig, SoftmaxHeadOptions):
    """Training arguments of the Siamese regression framework (Zhang and Li, EMNLP 2024).

    Only the method's fields are here; everything else is ``BaseConfig``'s (lr 2e-5, weight
    decay 0.01, 10 % warm-up, batch 16, 1 epoch; the recipes set the paper's values).
    ``layer_lr_decay`` (the authors' 0.95) and ``freeze_backbone`` (stage 1 for contrastive
    models) are the core's options.
    """

    loss: str = "smooth_k2"
    k: float = field(
        default=2.0,
        metadata={"help": "k of Translated ReLU (slope) and Smooth K2 (scale); above 0."},
    )
    x0: float = field(
        default=0.25,
        metadata={
            "help": "x0: half-width of the zero-gradient band of Translated ReLU and Smooth "
            "K2; in [0, label_spacing / 2]."
        },
    )
    label_spacing: float = field(
        default=1.0,
        metadata={
            "help": "d: spacing of the label grid (1 for NLI 0/1/2 and for 0–5 STS grades); "
            "x0 may not exceed d/2."
        },
    )
    clamp_predictions: str = field(
        default="none",
        metadata={
            "help": "Before the loss, move predictions outside label_range to its nearest "
            "end: none; low (below the low end only: the authors' code, prediction · "
            "(prediction ≥ 0) with labels from 0); both (either end, §3.3). Moved "
            "predictions get no gradient."
        },
    )
    label_range: list[float] | None = field(
        default=None,
        metadata={
            "help": "[low, high] of the labels, e.g. [0, 2] for NLI or [0, 5] for STS: needed "
            "by clamp_predictions; when set, every training label must lie in it."
        },
    )
    pair_features: str = field(
        default="u,v,|u-v|",
        metadata={
            "help": "What the head reads (Table 6): u,v,|u-v| (3·d → 1, the paper's), u,v, "
            "|u-v|, or u,v,|u-v|,u*v."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ranges(self, RANGES)
        check_band(self.k, self.x0, self.label_spacing)
        if self.clamp_predictions not in CLAMP_MODES:
            raise ValueError(
                f"clamp_predictions {self.clamp_predictions!r} is not one of "
                f"{', '.join(CLAMP_MODES)}"
            )
        if self.pair_features not in PAIR_FEATURES:
            choices = ", ".join(PAIR_FEATURES)
            raise ValueError(f"pair_features {self.pair_features!r} is not one of {choices}")
        self._check_label_range()
        self.check_softmax_options()

    def _check_label_range(self) -> None:
        if self.label_range is not None:
            for bound in self.label_range:
                check_number("label_range", bound, **FINITE)
            if len(self.label_range) != 2 or not self.label_range[0] < self.label_range[1]:
                raise ValueError(
                    f"label_range must be [low, high] with low < high, got {self.label_range}"
                )
            self.label_range = [float(x) for x in self.label_range]
        if self.clamp_predictions != "none" and self.label_range is None:
            raise ValueError(
                f"clamp_predictions: {self.clamp_predictions} needs label_range: [low, high] "
                "(e.g. [0, 2] for NLI labels 0/1/2, [0, 5] for STS scores)"
            )
        if self.clamp_predictions != "none" and self.loss == "softmax":
            raise ValueError("clamp_predictions applies to the regression losses, not softmax")
