"""SIFTER's options (λs, temperature, workers, dropout) refused out of range or in a bad
combination (``sts_core.testing.config_option_tests``)."""

from __future__ import annotations

from sts_core.testing import NON_NEGATIVE_BAD, POSITIVE_BAD, config_accepts, config_option_tests
from sts_sifter import SifterConfig

RANGES = [
    ("lambda_xy", NON_NEGATIVE_BAD, "lambda_xy must be finite and ≥ 0"),
    ("lambda_xz", NON_NEGATIVE_BAD, "lambda_xz must be finite and ≥ 0"),
    ("lambda_yz", NON_NEGATIVE_BAD, "lambda_yz must be finite and ≥ 0"),
    ("infonce_temperature", POSITIVE_BAD, "infonce_temperature must be finite and > 0"),
    ("augment_workers", ["0"], "augment_workers must be at least 1"),
    ("backbone_dropout", ["nan", "-0.1", "1", "1.5"], "backbone_dropout must be in [0, 1)"),
    ("learning_rate", POSITIVE_BAD, "learning_rate must be finite and > 0"),
]


CHOICE_ERRORS = [
    ({"loss": "nope"}, "loss 'nope' is not one of sifter, simcse"),
    (
        {"lambda_xy": 0.0, "lambda_xz": 0.0, "lambda_yz": 0.0},
        "lambda_xy, lambda_xz and lambda_yz are all 0: eq. 2 has no term",
    ),
    ({"positive_threshold": 0.5}, "positive_threshold: SIFTER's data are unlabelled sentences"),
    (
        {"per_device_train_batch_size": 1},
        "in-batch negatives need at least 2 sentences per batch, got per_device_train_batch_size 1",
    ),
    ({"capitalised_end": "nope"}, "capitalised_end 'nope': choose any, abbreviation, off"),
    ({"backbone_relations": "nope"}, "backbone_relations 'nope': choose core or all"),
    (
        {"delete": ["NOUNX"]},
        "delete: ['NOUNX']; name article or universal POS tags (ADJ, ADP, ADV, AUX, CCONJ, "
        "DET, INTJ, NOUN, NUM, PART, PRON, PROPN, PUNCT, SCONJ, SYM, VERB, X)",
    ),
    (
        {"delete": []},
        "delete: nothing; name article or universal POS tags (ADJ, ADP, ADV, AUX, CCONJ, "
        "DET, INTJ, NOUN, NUM, PART, PRON, PROPN, PUNCT, SCONJ, SYM, VERB, X)",
    ),
    ({"parser": "corenlp"}, "parser 'corenlp': use spacy[:<pipeline>] or stanza[:<dir>]"),
]


ACCEPTED = [
    {"per_device_train_batch_size": 2},
    {"loss": "simcse", "lambda_xy": 0.0, "lambda_xz": 0.0, "lambda_yz": 0.0},
    {"lambda_xy": 0.0, "lambda_xz": 0.0, "lambda_yz": 0.5},
]

TestSifterOptions = config_option_tests(SifterConfig, RANGES, CHOICE_ERRORS, ACCEPTED)


def test_the_augment_options_are_the_configs() -> None:
    from sts_sifter.augment import AugmentOptions

    config = config_accepts(SifterConfig, backbone_relations="all", delete="CCONJ")
    assert config.augment_options() == AugmentOptions(relations="all", delete=("CCONJ",))
