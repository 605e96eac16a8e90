"""Issue 30, case 5: SIFTER's numeric options out of their range (nan, inf, 0 for a
scale, a negative weight, a probability above 1) stop the parse with one line naming the
option, by the core's one rule (``sts_core.options.check_number``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sts_core.training import ConfigError, ConfigParser
from sts_sifter import SifterConfig

NOT_FINITE = ["nan", "inf", "-inf"]
POSITIVE_BAD = [*NOT_FINITE, "0", "-0.5"]
NON_NEGATIVE_BAD = [*NOT_FINITE, "-0.5"]

#: (option, bad values, the words of the one-line error)
CASES = [
    ("lambda_xy", NON_NEGATIVE_BAD, "lambda_xy must be finite and ≥ 0"),
    ("lambda_xz", NON_NEGATIVE_BAD, "lambda_xz must be finite and ≥ 0"),
    ("lambda_yz", NON_NEGATIVE_BAD, "lambda_yz must be finite and ≥ 0"),
    ("infonce_temperature", POSITIVE_BAD, "infonce_temperature must be finite and > 0"),
    ("augment_workers", ["0"], "augment_workers must be at least 1"),
    ("backbone_dropout", ["nan", "-0.1", "1", "1.5"], "backbone_dropout must be in [0, 1)"),
    ("learning_rate", POSITIVE_BAD, "learning_rate must be finite and > 0"),
]


def parse_error(tmp_path: Path, name: str, value: str) -> str:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"model_name_or_path: some/model\nreport_to: none\n{name}: {value}\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:
        ConfigParser(SifterConfig).parse(["--config", str(recipe)])
    message = str(caught.value)
    assert "\n" not in message.strip() and str(recipe) in message
    return message


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        pytest.param(name, value, words, id=f"{name}={value}")
        for name, values, words in CASES
        for value in values
    ],
)
def test_sifter_option_out_of_range_stops_the_parse_naming_it(
    tmp_path: Path, name: str, value: str, words: str
) -> None:
    assert words in parse_error(tmp_path, name, value)
