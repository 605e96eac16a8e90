"""``ConfigParser.parse_values``: option values without a recipe file (a benchmark's
``--set``) get every check a recipe's keys get, and each error names the given source."""

from __future__ import annotations

from pathlib import Path

import pytest

from sts_core.training import ConfigError, ConfigParser


def test_values_read_as_a_recipe_reads_them(tmp_path: Path) -> None:
    values = {"model_name_or_path": "m", "learning_rate": "2e-5", "max_seq_length": "64",
              "score_range": [0, 5], "output_dir": str(tmp_path / "run")}  # fmt: skip
    recipe = tmp_path / "r.yaml"
    recipe.write_text("".join(f"{k}: {v}\n" for k, v in values.items()), encoding="utf-8")
    parser = ConfigParser()
    model, data, config = parser.parse_values(values, "--set")
    from_recipe = parser.parse(["--config", str(recipe)])
    assert (model, data) == from_recipe[:2] and config.learning_rate == 2e-5
    assert config.to_dict() == from_recipe[2].to_dict()
    assert type(model.max_seq_length) is int and data.score_range == [0.0, 5.0]


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("learnig_rate", 1, "src: unknown key(s) 'learnig_rate' (did you mean 'learning_rate'?)"),
        ("learning_rate", "abc", "src: learning_rate: cannot read 'abc' as float"),
        ("warmup_steps", True, "src: warmup_steps: expected a number, got True"),
        ("weight_decay", -1, "src: weight_decay must be finite and ≥ 0, got -1.0"),
        ("max_seq_length", 0, "src: max_seq_length must be at least 1, got 0"),
        ("score_range", [5, 0], "src: score_range must be [low, high] with low < high"),
    ],
)
def test_each_error_names_the_source(key: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        ConfigParser().parse_values({"model_name_or_path": "m", key: value}, "src")
    assert str(error.value).startswith(message)


def test_values_of_an_earlier_parse_are_forgotten() -> None:
    parser = ConfigParser()
    parser.parse_values({"model_name_or_path": "m", "weight_decay": 0.5}, "first")
    _, _, config = parser.parse_values({"model_name_or_path": "m"}, "second")
    assert config.weight_decay == 0.01  # the default again, not the first call's
