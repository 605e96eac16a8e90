"""Issue 30, case 5: Pcc-tuning's numeric options out of their range (nan, inf, 0 for a
scale, a negative weight, a probability above 1) stop the parse with one line naming the
option, by the core's one rule (``sts_core.options.check_number``)."""

from __future__ import annotations

from sts_core.testing import (
    NON_NEGATIVE_BAD,
    NOT_FINITE,
    POSITIVE_BAD,
    config_option_tests,
)
from sts_pcctuning import PccConfig

#: (option, bad values, the words of the one-line error)
CASES = [
    ("infonce_temperature", POSITIVE_BAD, "infonce_temperature must be finite and > 0"),
    ("positive_threshold", NOT_FINITE, "positive_threshold must be a finite number"),
    ("learning_rate", POSITIVE_BAD, "learning_rate must be finite and > 0"),
    ("warmup_steps", NON_NEGATIVE_BAD, "warmup_steps must be finite and ≥ 0"),
    ("lora_dropout", ["nan", "-0.1", "1"], "lora_dropout must be in [0, 1)"),
]


# ------------------------------------------------------------------- choices, whole messages
#: (settings, the whole message of the ValueError the config raises)
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

(
    test_an_option_out_of_range_stops_the_parse_naming_it,
    test_a_bad_choice_or_combination_is_refused_with_its_whole_message,
    test_the_settings_next_to_a_refused_one_are_accepted,
) = config_option_tests(PccConfig, CASES, CHOICE_ERRORS, ACCEPTED)
