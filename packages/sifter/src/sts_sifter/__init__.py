"""sts_sifter: SIFTER (Yu et al., 2024): SimCSE with syntax-aware positives (a sentence with
its backbone added, and without its articles and conjunctions), and SIFTER-LSTM."""

from sts_sifter.augment import Augmented, AugmentOptions, augment
from sts_sifter.config import SifterConfig
from sts_sifter.corpus import augment_corpus, clean_corpus
from sts_sifter.loss import SifterLoss, SimCSELoss, sifter_loss
from sts_sifter.method import METHOD

__all__ = [
    "METHOD",
    "AugmentOptions",
    "Augmented",
    "SifterConfig",
    "SifterLoss",
    "SimCSELoss",
    "augment",
    "augment_corpus",
    "clean_corpus",
    "sifter_loss",
]
