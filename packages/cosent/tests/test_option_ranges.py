"""CoSENT's options (scale, margin, architecture) refused out of range or in a bad combination,
naming the option (``sts_core.testing.config_option_tests``)."""

from __future__ import annotations

from sts_core.testing import NON_NEGATIVE_BAD, NOT_FINITE, POSITIVE_BAD, config_option_tests
from sts_cosent import CoSENTConfig

RANGES = [
    ("cosent_scale", POSITIVE_BAD, "cosent_scale must be finite and > 0"),
    (
        "contrastive_margin",
        ["nan", "inf", "-0.1", "1", "1.5"],
        "contrastive_margin must be in [0, 1)",
    ),
    ("infonce_temperature", POSITIVE_BAD, "infonce_temperature must be finite and > 0"),
    ("positive_threshold", NOT_FINITE, "positive_threshold must be a finite number"),
    ("learning_rate", POSITIVE_BAD, "learning_rate must be finite and > 0"),
    ("max_grad_norm", NON_NEGATIVE_BAD, "max_grad_norm must be finite and ≥ 0"),
]


CHOICE_ERRORS = [
    (
        {"loss": "nope"},
        "loss 'nope' is not one of cosent, cosine_mse, contrastive, softmax, infonce",
    ),
    ({"architecture": "nope"}, "architecture 'nope' is not one of bi-encoder, cross-encoder"),
    (
        {"architecture": "cross-encoder", "loss": "cosine_mse"},
        "the cross-encoder (eq. 11) trains with loss: cosent",
    ),
]


ACCEPTED = [
    {"architecture": "bi-encoder", "loss": "cosine_mse"},
    {"architecture": "cross-encoder", "loss": "cosent"},
]

TestCoSENTOptions = config_option_tests(CoSENTConfig, RANGES, CHOICE_ERRORS, ACCEPTED)
