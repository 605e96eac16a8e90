"""Issue 30, case 5: The regression method's numeric options out of their range (nan, inf, 0 for a
scale, a negative weight, a probability above 1) stop the parse with one line naming the
option, by the core's one rule (``sts_core.options.check_number``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sts_core.testing import NON_NEGATIVE_BAD, POSITIVE_BAD, option_parse_error, range_cases
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


@pytest.mark.parametrize(("name", "value", "words"), range_cases(CASES))
def test_regression_option_out_of_range_stops_the_parse_naming_it(
    tmp_path: Path, name: str, value: str, words: str
) -> None:
    assert words in option_parse_error(RegressionConfig, tmp_path, name, value)
