"""Issue 30, case 5: CoSENT's numeric options out of their range (nan, inf, 0 for a
scale, a negative weight, a probability above 1) stop the parse with one line naming the
option, by the core's one rule (``sts_core.options.check_number``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sts_core.testing import (
    NON_NEGATIVE_BAD,
    NOT_FINITE,
    POSITIVE_BAD,
    config_option_tests,
    load_train_script,
    one_line_error,
    write_fixture_recipe,
)
from sts_cosent import CoSENTConfig

#: (option, bad values, the words of the one-line error)
CASES = [
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


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("--cosent_scale=nan", "cosent_scale must be finite and > 0, got nan"),
        ("--learning_rate=-inf", "learning_rate must be finite and > 0, got -inf"),
        ("--contrastive_margin=1.5", "contrastive_margin must be in [0, 1), got 1.5"),
    ],
)
def test_main_stops_with_one_line_and_status_2_before_the_model_loads(
    flag: str, words: str, tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    def not_loaded(*args, **kwargs):
        raise AssertionError("the model was loaded before the options were checked")

    monkeypatch.setattr("sts_core.encoder.model.SentenceEncoder.from_pretrained", not_loaded)
    fixtures = Path(__file__).parent / "fixtures"
    recipe = write_fixture_recipe(
        tmp_path / "r.yaml",
        "CoSENT, one option out of range",
        tiny_bert_dir,
        fixtures / "sts-train.csv",
        fixtures / "sts-dev.csv",
        tmp_path / "out",
    )
    main = load_train_script(Path(__file__).resolve().parents[1]).main
    assert main(["--config", str(recipe), flag]) == 2
    assert words in one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------- choices, whole messages
#: (settings, the whole message of the ValueError the config raises)
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

(
    test_an_option_out_of_range_stops_the_parse_naming_it,
    test_a_bad_choice_or_combination_is_refused_with_its_whole_message,
    test_the_settings_next_to_a_refused_one_are_accepted,
) = config_option_tests(CoSENTConfig, CASES, CHOICE_ERRORS, ACCEPTED)
