"""``sts-train --help`` and each ``train.py --help``: a one-line usage, ``--method`` listed,
the options in groups with the most used first, and every option still there; the
options reference of docs/options.md, generated from the method configs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path

import pytest

from sts_core.losses.similarity import CosineMSELoss, InfoNCELoss
from sts_core.method import Method
from sts_core.training.config import BaseConfig, DataArguments, GatherOptions, ModelArguments
from sts_core.training.help import START_TITLE, method_options_table, options_reference
from sts_core.training.method_registry import load_methods
from sts_core.training.parser import ConfigParser
from sts_core.training.run import main

REPO = Path(__file__).resolve().parents[2]
HEADINGS = (
    f"{START_TITLE}:",
    "model (ModelArguments):",
    "data (DataArguments):",
    "training: the options this project adds or sets a default for (BaseConfig):",
    "training: transformers' other TrainingArguments:",
)


def sts_train_help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def flags(*classes: type) -> set[str]:
    return {f"--{f.name}" for cls in classes for f in fields(cls) if f.init}


def test_the_first_screen_has_the_method_model_data_and_output(capsys) -> None:
    """867 lines began with ~150 of usage, ``--method`` nowhere."""
    text = sts_train_help(capsys)
    lines = text.splitlines()
    assert lines[0] == (
        "usage: sts-train [--method NAME] --config RECIPE.yaml [--OPTION VALUE ...]"
    )
    first_screen = "\n".join(lines[:40])
    for flag in ("--method", "--config", "--model_name_or_path", "--train_datasets"):
        assert flag in first_screen
    assert "--output_dir" in first_screen and "--check_only" in first_screen
    assert "core, " in text  # --method lists the installed methods
    positions = [lines.index(heading) for heading in HEADINGS]
    assert positions == sorted(positions), "groups out of order"
    assert "other:" not in lines  # every option has its group


def test_every_option_is_still_listed_in_one_group(capsys) -> None:
    text = sts_train_help(capsys)
    listed = {word.rstrip(",") for word in text.split() if word.startswith("--")}
    assert flags(ModelArguments, DataArguments, BaseConfig) | {"--config"} <= listed
    parser = ConfigParser(BaseConfig).parser
    assert {s for a in parser._actions for s in a.option_strings if s.startswith("--")} <= listed
    grouped = [a for group in parser._action_groups for a in group._group_actions]
    assert sorted(map(id, grouped)) == sorted(map(id, parser._actions))


def test_the_groups_hold_their_own_options(capsys) -> None:
    sections = sts_train_help(capsys).split("\n\n")

    def section(heading: str) -> str:
        return next(s for s in sections if s.startswith(heading))

    assert "--pooling" in section("model (") and "--data_dir" in section("data (")
    assert "--filter_test_overlap" in section("data (")
    assert "--weight_averaging" in section("training: the options this project")
    assert "--gradient_accumulation_steps" in section("training: transformers'")
    assert "--learning_rate LEARNING_RATE" in section(START_TITLE)
    assert "--learning_rate LEARNING_RATE" not in section("training: the options this project")


@dataclass
class MarginConfig(BaseConfig):
    margin: float = field(default=0.1, metadata={"help": "m of the margin MSE."})


METHOD = Method(
    name="marginhelp",
    title="Margin (a help example)",
    config=MarginConfig,
    losses=(CosineMSELoss,),
    description="Train with a margin.",
)


def test_a_method_s_own_options_have_their_group_and_train_py_no_method() -> None:
    text = ConfigParser.for_method(METHOD).parser.format_help()
    assert "--method" not in text  # train.py's method is fixed: nothing to choose
    assert "--config RECIPE.yaml [--OPTION VALUE ...]" in text.splitlines()[0]
    own = next(s for s in text.split("\n\n") if s.startswith("marginhelp: the method's own"))
    assert "--margin" in own and "(MarginConfig)" in own
    assert "--loss" not in own and "--learning_rate" not in own


def test_the_help_shows_the_recipe_s_values_as_defaults(capsys, tmp_path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("learning_rate: 3.0e-5\noutput_dir: runs/mine\n", encoding="utf-8")
    text = " ".join(sts_train_help(capsys, "--config", str(recipe)).split())
    assert "(default: 3e-05)" in text and "(default: runs/mine)" in text


def test_a_bad_recipe_with_help_is_one_line(capsys, tmp_path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("lerning_rate: 1\n", encoding="utf-8")
    assert main(["--config", str(recipe), "--help"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "lerning_rate" in err and "\n" not in err


# ----------------------------------------------------------------- the options reference
@dataclass
class TableConfig(BaseConfig, GatherOptions):
    """Two fields of its own, one group, and the core's fields (left out of the table)."""

    loss: str = "infonce"
    scale: float = field(default=20.0, metadata={"help": "λ of the\n   loss | above 0."})
    views: list[str] = field(default_factory=lambda: ["a", "b"])
    drop: bool | None = None


TABLE = Method(
    name="tablehelp",
    title="t",
    config=TableConfig,
    losses=(CosineMSELoss, InfoNCELoss),
    readme="packages/tablehelp/README.md",
)


def test_a_method_s_options_table_is_its_own_fields_with_defaults_and_help() -> None:
    lines = method_options_table(TABLE, link_prefix="../").splitlines()
    loss_help = f"cosine_mse: {CosineMSELoss.title}; infonce: {InfoNCELoss.title}"
    assert lines == [
        "### `tablehelp` ([README](../packages/tablehelp/README.md))",
        "",
        "`TableConfig`, with `GatherOptions` (above):",
        "",
        "| option | default | what it does |",
        "| --- | --- | --- |",
        f"| `loss` | `infonce` | {loss_help} |",
        "| `scale` | 20 | λ of the loss \\| above 0. |",
        "| `views` | `a`, `b` |  |",
        "| `drop` | none |  |",
    ]


def test_the_options_reference_in_the_docs_is_the_installed_methods() -> None:
    text = (REPO / "docs" / "options.md").read_text(encoding="utf-8")
    part = re.search(r"<!-- method-options[^\n]*-->\n(.*?)<!-- end method-options -->", text, re.S)
    assert part is not None, "docs/options.md has no generated options reference"
    expected = options_reference(list(load_methods().values()), link_prefix="../")
    assert part.group(1).strip() == expected, "run: uv run python tools/generate_docs.py"
