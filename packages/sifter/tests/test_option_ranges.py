"""Issue 30, case 5: SIFTER's numeric options out of their range (nan, inf, 0 for a
scale, a negative weight, a probability above 1) stop the parse with one line naming the
option, by the core's one rule (``sts_core.options.check_number``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sts_core.testing import NON_NEGATIVE_BAD, POSITIVE_BAD, option_parse_error, range_cases
from sts_sifter import SifterConfig

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


@pytest.mark.parametrize(("name", "value", "words"), range_cases(CASES))
def test_sifter_option_out_of_range_stops_the_parse_naming_it(
    tmp_path: Path, name: str, value: str, words: str
) -> None:
    assert words in option_parse_error(SifterConfig, tmp_path, name, value)
