"""BSC's options (temperature, μ, shuffling) refused out of range or in a bad combination,
naming the option (``sts_core.testing.config_option_tests``)."""

from __future__ import annotations

import pytest

from sts_bsc import BscConfig
from sts_core.testing import NON_NEGATIVE_BAD, NOT_FINITE, POSITIVE_BAD, config_option_tests
from sts_core.training import ConfigError, ConfigParser

RANGES = [
    ("bsc_temperature", POSITIVE_BAD, "bsc_temperature must be finite and > 0"),
    ("temperature_learning_rate", POSITIVE_BAD, "temperature_learning_rate must be finite and > 0"),
    ("label_threshold", NOT_FINITE, "label_threshold must be a finite number"),
    ("mu", ["nan", "inf", "-0.1", "1.5"], "mu must be in [0, 1]"),
    ("group_size", ["0"], "group_size must be at least 1"),
    ("shuffle_candidates", ["0"], "shuffle_candidates must be at least 1"),
    ("shingle_size", ["0"], "shingle_size must be at least 1"),
    ("num_clusters", ["0"], "num_clusters must be at least 1"),
    ("shingle_neighbours", ["0"], "shingle_neighbours must be at least 1"),
    ("learning_rate", POSITIVE_BAD, "learning_rate must be finite and > 0"),
    ("weight_decay", NON_NEGATIVE_BAD, "weight_decay must be finite and ≥ 0"),
]


@pytest.mark.parametrize(
    "losses",
    [["--loss", "cosine_mse"], ["--loss", "cosine_mse", "--loss_weights", '{"cosine_mse": 1}']],
)
def test_a_trainable_temperature_needs_the_bsc_loss(losses: list[str]) -> None:
    argv = ["--model_name_or_path", "m", "--report_to", "none", "--trainable_temperature", "true"]
    with pytest.raises(ConfigError, match="trainable_temperature: true needs the bsc loss"):
        ConfigParser(BscConfig).parse([*argv, *losses])


CHOICE_ERRORS = [
    ({"loss": "nope"}, "loss 'nope' is not one of bsc, cosine_mse"),
    (
        {"bsc_normalization": "nope"},
        "bsc_normalization 'nope' is not one of l2, coordinates_l2, coordinates_minmax, "
        "coordinates_range, none",
    ),
    (
        {"shuffle": "nope"},
        "shuffle 'nope' is not one of example, words, clusters, neighbours, random, original",
    ),
    ({"shuffle_by": "nope"}, "shuffle_by 'nope' is not one of sentence1, sentence2"),
    (
        {"trainable_temperature": True, "gradient_cache_batch_size": 4},
        "trainable_temperature with gradient_cache_batch_size: gradient caching supports "
        "losses without parameters of their own; fix the temperature (bsc_temperature) or "
        "drop gradient_cache_batch_size",
    ),
    (
        {"trainable_temperature": True, "loss": "cosine_mse"},
        "trainable_temperature: true needs the bsc loss (its α), got cosine_mse",
    ),
    (
        {
            "trainable_temperature": True,
            "loss": "cosine_mse",
            "loss_weights": {"cosine_mse": 1.0, "infonce": 1.0},  # core losses: bsc alone
        },
        "trainable_temperature: true needs the bsc loss (its α), got cosine_mse + infonce",
    ),
]


ACCEPTED = [
    {"trainable_temperature": True, "loss": "bsc"},
    {"trainable_temperature": False, "gradient_cache_batch_size": 4},
]

TestBscOptions = config_option_tests(BscConfig, RANGES, CHOICE_ERRORS, ACCEPTED)
