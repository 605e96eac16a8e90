"""Pcc-tuning's options (temperature, threshold, LoRA dropout) refused out of range or in a bad
combination (``sts_core.testing.config_option_tests``)."""

from __future__ import annotations

from sts_core.testing import NON_NEGATIVE_BAD, NOT_FINITE, POSITIVE_BAD, config_option_tests
from sts_pcctuning import PccConfig

RANGES = [
    ("infonce_temperature", POSITIVE_BAD, "infonce_temperature must be finite and > 0"),
    ("positive_threshold", NOT_FINITE, "positive_threshold must be a finite number"),
    ("learning_rate", POSITIVE_BAD, "learning_rate must be finite and > 0"),
    ("warmup_steps", NON_NEGATIVE_BAD, "warmup_steps must be finite and ≥ 0"),
    ("lora_dropout", ["nan", "-0.1", "1"], "lora_dropout must be in [0, 1)"),
]


CHOICE_ERRORS = [
    ({"loss": "nope"}, "loss 'nope' is not one of infonce, pearson, cosine_mse"),
    (
        {"loss": "pearson", "per_device_train_batch_size": 1},
        "loss pearson needs at least 2 pairs per batch (a correlation), got "
        "per_device_train_batch_size 1",
    ),
]


ACCEPTED = [
    {"loss": "pearson", "per_device_train_batch_size": 2},
    {"loss": "cosine_mse", "per_device_train_batch_size": 1},
]

TestPccOptions = config_option_tests(PccConfig, RANGES, CHOICE_ERRORS, ACCEPTED)
