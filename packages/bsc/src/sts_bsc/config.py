"""``BscConfig``: the BSC method's own options on top of ``BaseConfig``."""

from __future__ import annotations

from dataclasses import dataclass, field

from sts_bsc.loss import NORMALIZATIONS
from sts_bsc.shuffling import SHUFFLES
from sts_core.options import FINITE, POSITIVE, PROBABILITY, check_ranges
from sts_core.training import BaseConfig, GatherOptions
from sts_core.training.config import require_at_least

SHUFFLE_COLUMNS = ("sentence1", "sentence2")
#: the trainable temperature's parameter, for ``learning_rate_mapping``
TEMPERATURE_PARAMETER = r"^sts_loss\.inverse_temperature$"
#: the same parameter as the part ``bsc`` of a ``loss_weights`` sum
WEIGHTED_TEMPERATURE_PARAMETER = r"^sts_loss\.parts\.bsc\.inverse_temperature$"
#: the real-valued options and their ranges (sts_core.options.check_number)
RANGES = {
    "bsc_temperature": POSITIVE,
    "temperature_learning_rate": POSITIVE,
    "label_threshold": FINITE,
    "mu": PROBABILITY,
}


@dataclass
class BscConfig(BaseConfig, GatherOptions):
    """Training arguments of the batch-softmax contrastive loss (Chernyavskiy et al., NAACL
    2022). Only the method's fields are here (the loss, then the batch construction);
    ``gather_across_processes`` is the core's. The recipes set the paper's values."""

    loss: str = "bsc"
    bsc_temperature: float = field(
        default=0.1,
        metadata={"help": "τ of S = Q·Aᵀ/τ (the paper: 0.1 with l2; 1–3 by coordinates)."},
    )
    trainable_temperature: bool = field(
        default=False,
        metadata={
            "help": "Learn α = 1/τ (starting at 1/bsc_temperature) with its own learning "
            "rate (temperature_learning_rate) and no weight decay."
        },
    )
    temperature_learning_rate: float = field(
        default=1e-3,
        metadata={"help": "Learning rate of the trainable α (the authors' code: 1e-3)."},
    )
    bsc_normalization: str = field(
        default="l2",
        metadata={
            "help": "§3.5: l2 (per embedding), coordinates_l2 or coordinates_minmax (each "
            "coordinate over the batch), coordinates_range (x / (max − min), the authors' "
            "code), none."
        },
    )
    bsc_symmetric: bool = field(
        default=True,
        metadata={"help": "L0 + L1 (eq. 1); false: L0 only (first elements against all)."},
    )
    label_threshold: float | None = field(
        default=None,
        metadata={
            "help": "A pair is positive when its label > this (eq. 5; the paper: 0.6 on "
            "STS-B scores scaled to [0, 1]); only positives give a numerator, negatives stay "
            "in the denominators. None: every pair is positive."
        },
    )
    repeated_anchors: bool = field(
        default=True,
        metadata={
            "help": "Rows with the same first element are each other's positives (eq. 3–4); "
            "false: only the diagonal."
        },
    )
    mu: float = field(
        default=1.0,
        metadata={
            "help": "Combo (eq. 6): mu·BSC + (1 − mu)·MSE(q̂·â, label); 1: BSC alone (the "
            "paper's combo: 0.1 on STS-B, MRPC, Quora)."
        },
    )
    shuffle: str = field(
        default="example",
        metadata={
            "help": "Batch construction (§3.2), rebuilt at every epoch: example (Algorithm "
            "1, k-NN with the current model), words (Algorithm 2), clusters (k-means), "
            "neighbours (nearest-neighbour shingles), random, original (the data's order)."
        },
    )
    shuffle_by: str = field(
        default="sentence1",
        metadata={"help": "Group pairs by their sentence1 (first) or sentence2 elements."},
    )
    group_size: int = field(
        default=8, metadata={"help": "s: pairs per group (the paper: 8; 4 for MRPC)."}
    )
    shuffle_candidates: int = field(
        default=500,
        metadata={"help": "n: nearest neighbours searched per example (the authors' code: 200)."},
    )
    reverse_groups: bool = field(
        default=True,
        metadata={"help": "Reverse the example-based order (simple 1-element groups first)."},
    )
    shingle_size: int = field(
        default=1, metadata={"help": "t: words (or neighbour positions) per shingle."}
    )
    num_clusters: int = field(
        default=300, metadata={"help": "k-means clusters of the clusters shuffle (the paper: 300)."}
    )
    shingle_neighbours: int = field(
        default=5, metadata={"help": "k nearest neighbours forming a row's neighbour shingle."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_choices()
        check_ranges(self, RANGES)
        require_at_least(
            1,
            group_size=self.group_size,
            shuffle_candidates=self.shuffle_candidates,
            shingle_size=self.shingle_size,
            num_clusters=self.num_clusters,
            shingle_neighbours=self.shingle_neighbours,
        )
        if self.trainable_temperature and self.gradient_cache_batch_size is not None:
            raise ValueError(
                "trainable_temperature with gradient_cache_batch_size: gradient caching "
                "supports losses without parameters of their own; fix the temperature "
                "(bsc_temperature) or drop gradient_cache_batch_size"
            )
        if self.trainable_temperature:
            self._map_temperature()

    def _map_temperature(self) -> None:
        """The trainable α gets temperature_learning_rate (ValueError without the bsc loss,
        whose parameter it is)."""
        parts = list(self.loss_weights or [self.loss])
        if "bsc" not in parts:
            raise ValueError(
                f"trainable_temperature: true needs the bsc loss (its α), got {' + '.join(parts)}"
            )
        pattern = WEIGHTED_TEMPERATURE_PARAMETER if self.loss_weights else TEMPERATURE_PARAMETER
        mapping = dict(self.parsed_learning_rate_mapping or {})
        mapping.setdefault(pattern, self.temperature_learning_rate)
        self.learning_rate_mapping = mapping

    def _check_choices(self) -> None:
        choices = {
            "bsc_normalization": (self.bsc_normalization, NORMALIZATIONS),
            "shuffle": (self.shuffle, SHUFFLES),
            "shuffle_by": (self.shuffle_by, SHUFFLE_COLUMNS),
        }
        for name, (value, allowed) in choices.items():
            if value not in allowed:
                raise ValueError(f"{name} {value!r} is not one of {', '.join(allowed)}")
