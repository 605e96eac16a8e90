"""CoSENT's options (scale, margin, architecture) refused out of range or in a bad combination,
naming the option (``sts_core.testing.config_option_tests``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sts_core.testing import (
    NON_NEGATIVE_BAD,
    NOT_FINITE,
    POSITIVE_BAD,
    PackageFiles,
    config_option_tests,
    one_line_error,
    write_fixture_recipe,
)
from sts_cosent import CoSENTConfig

FILES = PackageFiles(__file__)

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
    recipe = write_fixture_recipe(
        tmp_path / "r.yaml",
        "CoSENT, one option out of range",
        tiny_bert_dir,
        FILES.train,
        FILES.dev,
        tmp_path / "out",
    )
    assert FILES.main(["--config", str(recipe), flag]) == 2
    assert words in one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


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
