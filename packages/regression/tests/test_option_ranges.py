"""The regression losses' options (k, x0, label spacing and range) refused out of range or in a
bad combination (``sts_core.testing.config_option_tests``)."""

from __future__ import annotations

from sts_core.testing import NON_NEGATIVE_BAD, POSITIVE_BAD, config_option_tests
from sts_regression import RegressionConfig

RANGES = [
    ("k", POSITIVE_BAD, "k must be finite and > 0"),
    ("x0", NON_NEGATIVE_BAD, "x0 must be finite and ≥ 0"),
    ("label_spacing", POSITIVE_BAD, "label_spacing must be finite and > 0"),
    ("label_range", ["[0, nan]", "[-inf, 5]", "[0, .inf]"], "label_range must be a finite number"),
    ("num_labels", ["1"], "num_labels must be at least 2"),
    ("layer_lr_decay", ["nan", "inf", "0", "1.5"], "layer_lr_decay must be in (0, 1]"),
    ("learning_rate", POSITIVE_BAD, "learning_rate must be finite and > 0"),
]


CHOICE_ERRORS = [
    ({"loss": "nope"}, "loss 'nope' is not one of smooth_k2, translated_relu, mse, l1, softmax"),
    ({"clamp_predictions": "nope"}, "clamp_predictions 'nope' is not one of none, low, both"),
    (
        {"pair_features": "nope"},
        "pair_features 'nope' is not one of u,v,|u-v|, u,v, |u-v|, u,v,|u-v|,u*v",
    ),
    (
        {"label_range": [1.0, 1.0]},
        "label_range must be [low, high] with low < high, got [1.0, 1.0]",
    ),
    (
        {"label_range": [0.0, 1.0, 2.0]},
        "label_range must be [low, high] with low < high, got [0.0, 1.0, 2.0]",
    ),
    ({"label_range": [0.0, float("nan")]}, "label_range must be a finite number, got nan"),
    (
        {"clamp_predictions": "low", "label_range": None},
        "clamp_predictions: low needs label_range: [low, high] (e.g. [0, 2] for NLI labels "
        "0/1/2, [0, 5] for STS scores)",
    ),
    (
        {"loss": "softmax", "clamp_predictions": "low", "label_range": [0.0, 2.0]},
        "clamp_predictions applies to the regression losses, not softmax",
    ),
]


ACCEPTED = [
    {"label_range": [0.0, 1e-6]},
    {"loss": "softmax", "clamp_predictions": "none", "label_range": [0.0, 2.0]},
    {"loss": "mse", "clamp_predictions": "both", "label_range": [0.0, 2.0]},
]

TestRegressionOptions = config_option_tests(RegressionConfig, RANGES, CHOICE_ERRORS, ACCEPTED)
