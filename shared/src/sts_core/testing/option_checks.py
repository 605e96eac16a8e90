"""Checks of a config's options and of bad recipes: every refusal is one line naming the option."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

QUICK_TRAINING_ARGS: dict[str, Any] = {
    "learning_rate": 1e-3,
    "warmup_steps": 0,
    "logging_steps": 1,
    "eval_strategy": "no",
    "save_strategy": "no",
    "metric_for_best_model": None,
    "report_to": "none",
    "disable_tqdm": True,
    "seed": 0,
    "dataloader_pin_memory": False,
}


def quick_training_args(config_class: type, output_dir: str | os.PathLike, **overrides: Any) -> Any:
    """``config_class`` (BaseConfig or a method's) for a few fast, logged, unsaved steps."""
    return config_class(output_dir=str(output_dir), **{**QUICK_TRAINING_ARGS, **overrides})


# Bad values of a numeric option by its range (``sts_core.options.check_number``), for the
# range tests of the core and of each package.
NOT_FINITE = ("nan", "inf", "-inf")


POSITIVE_BAD = (*NOT_FINITE, "0", "-0.5")


NON_NEGATIVE_BAD = (*NOT_FINITE, "-0.5")


def range_cases(cases: list[tuple[str, Any, str]]) -> list[Any]:
    """``pytest.param(option, value, words)`` for each bad value of each
    ``(option, bad values, words of the error)``."""
    return [
        pytest.param(name, value, words, id=f"{name}={value}")
        for name, values, words in cases
        for value in values
    ]


def config_error(config_class: type, **settings: Any) -> str:
    """The whole message of the ValueError that ``config_class(**settings)`` raises (the
    config is built directly, without a recipe); AssertionError when it raises none."""
    with pytest.raises(ValueError) as caught:
        config_class(output_dir="unused", report_to="none", **settings)
    return str(caught.value)


def config_accepts(config_class: type, **settings: Any) -> Any:
    """``config_class(**settings)``, which must not raise (the boundary of a check)."""
    return config_class(output_dir="unused", report_to="none", **settings)


def option_parse_error(config_class: type, folder: Path, name: str, value: str) -> str:
    """The one-line ConfigError that parsing a recipe with ``name: value`` gives (it names
    the recipe)."""
    from sts_core.training import ConfigError, ConfigParser

    recipe = folder / "recipe.yaml"
    recipe.write_text(
        f"model_name_or_path: some/model\nreport_to: none\n{name}: {value}\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:
        ConfigParser(config_class).parse(["--config", str(recipe)])
    message = str(caught.value)
    assert "\n" not in message.strip() and str(recipe) in message
    return message


def config_option_tests(
    config_class: type,
    ranges: list[tuple[str, Any, str]],
    choice_errors: list[tuple[dict[str, Any], str]],
    accepted: list[dict[str, Any]],
) -> type:
    """The three checks of a method config's options, as a pytest test class (bind it to a
    ``Test…`` name in the package's test module): each option of ``ranges`` ((option, bad
    values, the words of the one-line error)) out of its range stops the parse naming it
    and the recipe; each of ``choice_errors`` ((settings, the whole message of the
    ValueError the config raises)) is refused with its message; each of ``accepted`` (the
    settings next to a refused one) is accepted."""

    class ConfigOptionTests:
        @pytest.mark.parametrize(("name", "value", "words"), range_cases(ranges))
        def test_an_option_out_of_range_stops_the_parse_naming_it(
            self, tmp_path: Path, name: str, value: str, words: str
        ) -> None:
            assert words in option_parse_error(config_class, tmp_path, name, value)

        @pytest.mark.parametrize(("settings", "message"), choice_errors)
        def test_a_bad_choice_or_combination_is_refused_with_its_whole_message(
            self, settings: dict, message: str
        ) -> None:
            assert config_error(config_class, **settings) == message

        @pytest.mark.parametrize("settings", accepted)
        def test_the_settings_next_to_a_refused_one_are_accepted(self, settings: dict) -> None:
            config_accepts(config_class, **settings)

    ConfigOptionTests.__name__ = f"Test{config_class.__name__}Options"
    return ConfigOptionTests


def one_line_error(err: str) -> str:
    """The one line a command printed on standard error for a bad input (``error: …``),
    asserting there is nothing else (no traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def refusal(main: Any, argv: list[str], capsys: Any) -> str:
    """``main(argv)`` exits with status 2 after one ``error: …`` line on standard error (no
    traceback): the line."""
    assert main(list(argv)) == 2
    return one_line_error(capsys.readouterr().err)


def refused_leaving(main: Any, argv: list[str], capsys: Any, prefix: str, state: Any) -> str:
    """``main(argv)`` exits with status 2 after exactly one line starting with ``prefix`` on
    standard error (loading bars may come with it, a traceback may not), and ``state()``
    (what must be left as it was: inputs, a user's files) is the same after: the line."""
    before = state()
    assert main(list(argv)) == 2, argv
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith(prefix)]
    assert len(errors) == 1, err
    assert state() == before
    return errors[0]


def bad_recipe_tests(main: Any, write_recipe: Any, cases: list[tuple[dict[str, str], str]]) -> type:
    """A package's bad-input check of ``main`` (its train.py), as a pytest test class (bind
    it to a ``Test…`` name): for each of ``cases`` ((recipe lines over the package's fixture
    recipe, the words of the error)), ``main`` on ``write_recipe(path, model, output_dir,
    **lines)`` exits with status 2 and one ``error:`` line holding the words, before any
    model loads and without making the output folder."""

    class BadRecipeTests:
        @pytest.mark.usefixtures("no_model_loading")
        @pytest.mark.parametrize(("overrides", "words"), cases, ids=[w for _, w in cases])
        def test_bad_input_stops_with_one_line_before_the_model_loads(
            self, overrides: dict, words: str, tiny_bert_dir: Path, tmp_path: Path, capsys: Any
        ) -> None:
            recipe = write_recipe(tmp_path / "r.yaml", tiny_bert_dir, tmp_path / "out", **overrides)
            assert words in refusal(main, ["--config", str(recipe)], capsys)
            assert not (tmp_path / "out").exists()

    return BadRecipeTests
