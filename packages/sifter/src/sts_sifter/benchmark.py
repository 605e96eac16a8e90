"""The SIFTER package's rows of ``benchmarks/quality.py`` (entry point
``sts_core.quality_methods``): unsupervised, on the distinct sentences of the benchmark's
STS pairs (their scores unused), with the benchmark's budget (its batch, learning rate and
epochs; the model's own dropout): SIFTER-SimCSE (eq. 2, spaCy positives, the MLP in
training only) and the SimCSE baseline (eq. 1). Peer: ``st-simcse``."""

from sts_core.quality_methods import register_quality_method
from sts_sifter.config import SifterConfig
from sts_sifter.trainer import SifterTrainer

register_quality_method(
    "ours-sifter",
    "ours: SifterTrainer (SIFTER-SimCSE, eq. 2, on the pairs' sentences)",
    SifterConfig,
    SifterTrainer,
    loss="sifter",
    parser="spacy",
)
register_quality_method(
    "ours-simcse",
    "ours: SifterTrainer (unsupervised SimCSE, eq. 1, on the pairs' sentences)",
    SifterConfig,
    SifterTrainer,
    loss="simcse",
)
