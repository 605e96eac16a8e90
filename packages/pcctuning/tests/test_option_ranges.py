"""Issue 30, case 5: Pcc-tuning's numeric options out of their range (nan, inf, 0 for a
scale, a negative weight, a probability above 1) stop the parse with one line naming the
option, by the core's one rule (``sts_core.options.check_number``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sts_core.testing import (
    NON_NEGATIVE_BAD,
    NOT_FINITE,
    POSITIVE_BAD,
    option_parse_error,
    range_cases,
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


@pytest.mark.parametrize(("name", "value", "words"), range_cases(CASES))
def test_pcc_option_out_of_range_stops_the_parse_naming_it(
    tmp_path: Path, name: str, value: str, words: str
) -> None:
    assert words in option_parse_error(PccConfig, tmp_path, name, value)
