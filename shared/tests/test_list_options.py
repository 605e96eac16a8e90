"""One rule for every list option: a JSON list or the values apart, on the training command
line (``--matryoshka_dims '[384, 128, 64]'`` or ``--matryoshka_dims 384 128 64``) and in a
recipe, each value checked against the list's element type; the tools' list flags take
several values after one flag or the flag repeated (``sts-eval --pairs a.csv b.csv``)."""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from sts_core.cli import make_eval_parser
from sts_core.search.command import make_parser as make_search_parser
from sts_core.training import BaseConfig, ConfigError, ConfigParser, read_recipe
from sts_core.training.config import DataArguments, ModelArguments
from sts_core.training.method_registry import load_methods


def list_options() -> list[tuple[type, str, Any]]:
    """(config class, option, element type) of every list-typed field (``list[X]``, alone or
    in a union) of the core's argument classes and of every installed method's config; the
    config class is the one whose parser has the option (``BaseConfig`` for the core's)."""
    classes: list[type] = [ModelArguments, DataArguments, BaseConfig]
    classes += [method.config for method in load_methods().values()]
    found: dict[str, tuple[type, str, Any]] = {}
    for cls in classes:
        owner = cls if issubclass(cls, BaseConfig) else BaseConfig
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            kind = hints[field.name]
            union = typing.get_origin(kind) in (typing.Union, types.UnionType)
            for member in typing.get_args(kind) if union else (kind,):
                if typing.get_origin(member) is list and field.init:
                    found.setdefault(field.name, (owner, field.name, typing.get_args(member)[0]))
    return list(found.values())


LIST_OPTIONS = list_options()


def sample(element: Any) -> list[Any]:
    """Two values of the element type ``element``."""
    if element is int:
        return [384, 128]
    if element is float:
        return [0.5, 2.0]
    if element is str:
        return ["a.csv", "b.csv"]
    if isinstance(element, type) and issubclass(element, enum.Enum):
        return [member.value for member in list(element)[:2]]
    raise AssertionError(f"no sample values for a list of {element}")


def bad_value(element: Any) -> tuple[str, str]:
    """A JSON list whose second value the element type refuses, and that value as the
    error names it."""
    if element is str:
        return '["a.csv", ["b.csv"]]', "['b.csv']"  # a list inside the list
    return f'[{json.dumps(sample(element)[0])}, "x"]', "'x'"


def test_the_list_options_are_found() -> None:
    names = {name for _, name, _ in LIST_OPTIONS}
    expected = {"train_datasets", "score_range", "matryoshka_dims", "label_range", "report_to"}
    assert expected <= names


@pytest.mark.parametrize(
    ("config_class", "name", "element"),
    LIST_OPTIONS,
    ids=[name for _, name, _ in LIST_OPTIONS],
)
def test_a_list_option_reads_a_json_list_and_the_values_apart_alike(
    tmp_path: Path, config_class: type[BaseConfig], name: str, element: Any
) -> None:
    parser = ConfigParser(config_class)
    values = sample(element)
    flag = f"--{name}"
    as_json, _ = parser.parser.parse_known_args([flag, json.dumps(values)])
    apart, _ = parser.parser.parse_known_args([flag, *(str(value) for value in values)])
    parsed = getattr(as_json, name)
    assert parsed == getattr(apart, name) == [element(value) for value in values]
    assert all(type(value) is element for value in parsed)
    # a recipe: a YAML list, or the JSON list's text
    recipe = tmp_path / "recipe.yaml"
    for text in (json.dumps(values), repr(json.dumps(values))):
        recipe.write_text(f"{name}: {text}\n", encoding="utf-8")
        coerced = parser.coerce_values(read_recipe(recipe), str(recipe))
        assert coerced[name] == parsed and all(type(value) is element for value in coerced[name])
    bad, shown = bad_value(element)
    with pytest.raises(ConfigError) as error:
        parser.parser.parse_known_args([flag, bad])
    assert f"--{name}" in str(error.value) and shown in str(error.value)


def test_matryoshka_dims_and_label_range_parse_to_the_same_config() -> None:
    regression = load_methods()["regression"]
    parser = ConfigParser.for_method(regression)
    common = ["--model_name_or_path", "m", "--output_dir", "unused", "--report_to", "none"]
    forms = [
        ["--label_range", "[0, 1]", "--train_datasets", '["a.csv", "b.csv"]'],
        ["--label_range", "0", "1", "--train_datasets", "a.csv", "b.csv"],
    ]
    (_, data_a, config_a), (_, data_b, config_b) = (parser.parse(common + f) for f in forms)
    assert config_a.label_range == config_b.label_range == [0.0, 1.0]
    assert data_a.train_datasets == data_b.train_datasets == ["a.csv", "b.csv"]
    core = ConfigParser()
    dims = [
        core.parse([*common, "--matryoshka_dims", *form])[2].matryoshka_dims
        for form in (["[384, 128, 64]"], ["384", "128", "64"])
    ]
    assert dims == [[384, 128, 64]] * 2


def test_a_bad_value_names_the_option_and_the_value(tmp_path: Path) -> None:
    argv = ["--model_name_or_path", "m", "--matryoshka_dims", "[384, 1.5]"]
    with pytest.raises(ConfigError, match=r"--matryoshka_dims: cannot read 1\.5 as int"):
        ConfigParser().parse(argv)
    with pytest.raises(ConfigError, match=r"--matryoshka_dims: '\[384, 1' is not a JSON list"):
        ConfigParser().parse(["--model_name_or_path", "m", "--matryoshka_dims", "[384, 1"])
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model_name_or_path: m\nmatryoshka_dims: [384, big]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"r\.yaml:2: matryoshka_dims: cannot read 'big'"):
        ConfigParser().parse(["--config", str(recipe)])


def test_a_text_or_list_option_keeps_one_text_alone() -> None:
    parser = ConfigParser().parser
    assert parser.parse_known_args(["--optim_target_modules", "attn"])[0].optim_target_modules == (
        "attn"
    )
    for argv in (["q_proj", "v_proj"], ['["q_proj", "v_proj"]']):
        parsed = parser.parse_known_args(["--optim_target_modules", *argv])[0]
        assert parsed.optim_target_modules == ["q_proj", "v_proj"]


def test_sts_eval_pairs_takes_several_files_after_one_flag_or_the_flag_repeated() -> None:
    parser = make_eval_parser()
    one_flag = parser.parse_args(["--model", "m", "--pairs", "a.csv", "b.csv"])
    repeated = parser.parse_args(["--model", "m", "--pairs", "a.csv", "--pairs", "b.csv"])
    assert one_flag.pairs == repeated.pairs == ["a.csv", "b.csv"]
    assert parser.parse_args(["--model", "m"]).pairs == []


def test_sts_search_set_and_grid_take_several_values_after_one_flag_or_repeated() -> None:
    parser = make_search_parser()
    common = ["--train", "t.csv", "--dev", "d.csv", "--model", "m", "--output-dir", "out"]
    one_flag = parser.parse_args([*common, "--set", "a=1", "b=2", "--grid", "c=1,2", "d=3,4"])
    repeated = parser.parse_args(
        [*common, "--set", "a=1", "--set", "b=2", "--grid", "c=1,2", "--grid", "d=3,4"]
    )
    assert one_flag.set == repeated.set == ["a=1", "b=2"]
    assert one_flag.grid == repeated.grid == ["c=1,2", "d=3,4"]
    assert parser.parse_args(common).set == []


def command_parsers() -> dict[str, Any]:
    """Every ``sts-*`` command's argparse parser (sts-data's subcommands each), by name."""
    import argparse

    from sts_core.cli import make_data_parser
    from sts_core.mining_cli import make_parser as make_mining_parser
    from sts_core.soup import make_parser as make_soup_parser

    parsers = {"sts-eval": make_eval_parser(), "sts-search": make_search_parser(),
               "sts-mine": make_mining_parser(), "sts-soup": make_soup_parser()}  # fmt: skip
    data = make_data_parser()
    for action in data._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers.update({f"sts-data {n}": p for n, p in action.choices.items()})
    try:
        from sts_pcctuning.ceiling import make_parser as make_ceiling_parser
    except ImportError:  # the package is not installed (a core-only run)
        return parsers
    return {**parsers, "sts-pcctuning-ceiling": make_ceiling_parser()}


def command_list_options() -> list[tuple[str, Any, Any]]:
    return [
        (name, parser, action)
        for name, parser in command_parsers().items()
        for action in parser._actions
        if action.option_strings and action.nargs in ("+", "*")
    ]


def test_the_commands_list_options_are_found() -> None:
    found = {(name, action.dest) for name, _, action in command_list_options()}
    assert {("sts-eval", "pairs"), ("sts-search", "set"), ("sts-search", "grid"),
            ("sts-search", "epochs"), ("sts-search", "seeds")} <= found  # fmt: skip


@pytest.mark.parametrize(
    ("name", "parser", "action"), command_list_options(),
    ids=[f"{name}:{action.dest}" for name, _, action in command_list_options()],
)  # fmt: skip
def test_a_commands_list_option_reads_a_json_list_and_the_values_apart_alike(
    name: str, parser: Any, action: Any
) -> None:
    """The rule of the training options on every command (``ListOptionsParser``): a JSON
    list is the values apart, each read by the option's type and choices; a JSON text that
    is no list is refused naming the option."""
    if action.choices:
        items: list[Any] = list(action.choices)[:2]
    elif action.type in (int, float):
        items = [1, 2]
    else:
        items = ["a=1", "b=2"] if action.dest in ("set", "grid") else ["1", "2"]
    apart = parser._get_values(action, [str(item) for item in items])
    assert parser._get_values(action, [json.dumps(items)]) == apart
    assert len(apart) == len(items)
    with pytest.raises(SystemExit):
        parser._get_values(action, ['["unclosed"'])


def test_a_bad_json_list_on_a_command_names_the_option(capsys) -> None:
    with pytest.raises(SystemExit):
        make_eval_parser().parse_args(["--model", "m", "--pairs", '["a.csv", '])
    assert "--pairs: '[\"a.csv\", ' is not a JSON list" in capsys.readouterr().err
    parsed = make_eval_parser().parse_args(["--model", "m", "--pairs", '["a.csv", "b.csv"]'])
    assert parsed.pairs == ["a.csv", "b.csv"]
