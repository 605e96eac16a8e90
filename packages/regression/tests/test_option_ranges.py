"""Issue 30, case 5: The regression method's numeric options out of their range (nan, inf, 0 for a
scale, a negative weight, a probability above 1) stop the parse with one line naming the
option, by the core's one rule (``sts_core.options.check_number``)."""

from __future__ import annotations

from sts_core.testing import (
    NON_NEGATIVE_BAD,
    POSITIVE_BAD,
    config_option_tests,
)
from sts_regression import RegressionConfig

#: (option, bad values, the words of the one-line error)
CASES = [
    ("k", POSITIVE_BAD, "k must be finite and > 0"),
    ("x0", NON_NEGATIVE_BAD, "x0 must be finite and ≥ 0"),
    ("label_spacing", POSITIVE_BAD, "label_spacing must be finite and > 0"),
    ("label_range", ["[0, nan]", "[-inf, 5]", "[0, .inf]"], "label_range must be a finite number"),
    ("num_labels", ["1"], "num_labels must be at least 2"),
    ("layer_lr_decay", ["nan", "inf", "0", "1.5"], "layer_lr_decay must be in (0, 1]"),
    ("learning_rate", POSITIVE_BAD, "learning_rate must be finite and > 0"),
]


# ------------------------------------------------------------------- choices, whole messages
#: (settings, the whole message of the ValueError the config raises)
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

(
    test_an_option_out_of_range_stops_the_parse_naming_it,
    test_a_bad_choice_or_combination_is_refused_with_its_whole_message,
    test_the_settings_next_to_a_refused_one_are_accepted,
) = config_option_tests(RegressionConfig, CASES, CHOICE_ERRORS, ACCEPTED)
