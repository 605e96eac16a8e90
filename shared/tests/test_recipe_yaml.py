"""Recipes are read by one YAML reader (:mod:`sts_core.recipe_yaml`): a key given twice is
refused naming both lines, aliases are bounded before any value is built, and an error
names where the value came from — the recipe's file and line, or the command line
(issue 61, item 4)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sts_core.recipe_yaml import ALIAS_VALUES
from sts_core.search.command import main as search_main
from sts_core.training import ConfigError, ConfigParser, read_recipe
from sts_core.training.run import main as train_main


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as error:
        read_recipe(path)
    return str(error.value)


def alias_bomb(levels: int) -> str:
    """``levels`` lists of ten aliases of the one before: 10**levels values."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "model_name_or_path: m\n" + "\n".join(lines) + "\n"


# ----------------------------------------------------------------- a key given twice
def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "r.yaml", "model_name_or_path: m\nlearning_rate: 1e-5\n"
                 "seed: 1\nlearning_rate: 2e-5\n")  # fmt: skip
    assert refusal(path) == (
        f"{path}:4: learning_rate is given twice (lines 2 and 4): give each key once"
    )


def test_a_training_set_given_twice_is_refused_at_its_depth(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.yaml",
        "model_name_or_path: m\ntrain_datasets:\n  nli: {path: a.csv}\n  nli: {path: b.csv}\n",
    )
    assert refusal(path).startswith(f"{path}:4: nli is given twice (lines 3 and 4)")


def test_a_key_given_twice_on_one_line_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "r.yaml", "model_name_or_path: m\ncolumns: {score: a, score: b}\n")
    assert "score is given twice (lines 2 and 2)" in refusal(path)


def test_sts_train_refuses_a_key_given_twice_in_one_line(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "r.yaml", "model_name_or_path: m\nseed: 1\nseed: 2\n")
    assert train_main(["--config", str(path), "--check_only", "true"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {path}:3: seed is given twice (lines 2 and 3): give each key once"


# ----------------------------------------------------------------- aliases
def test_aliases_within_the_bound_are_read_as_the_values_they_name(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.yaml",
        "model_name_or_path: &m some/model\nteacher_model: *m\n"
        "train_datasets: {a: &set {path: a.csv, loss: cosent}, b: {<<: *set, path: b.csv}}\n",
    )
    recipe = read_recipe(path)
    assert recipe["teacher_model"] == "some/model"
    assert recipe["train_datasets"]["b"] == {"path": "b.csv", "loss": "cosent"}


def test_aliases_repeating_more_than_the_bound_are_refused_at_their_line(tmp_path: Path) -> None:
    path = write(tmp_path / "r.yaml", alias_bomb(4))  # line 5's list repeats 11,110 values
    message = refusal(path)
    assert message.startswith(f"{path}:5: the aliases repeat more than {ALIAS_VALUES} values")


def test_a_few_hundred_bytes_of_aliases_are_refused_before_they_expand(tmp_path: Path) -> None:
    path = write(tmp_path / "r.yaml", alias_bomb(9))  # 10**9 values once expanded
    assert path.stat().st_size < 700
    start = time.perf_counter()
    assert "the aliases repeat more than" in refusal(path)
    assert time.perf_counter() - start < 2


def test_an_alias_inside_the_value_it_names_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "r.yaml", "model_name_or_path: m\ntrain_datasets: &a [x, *a]\n")
    assert refusal(path) == (
        f"{path}:2: an alias inside the value it names (a value holding itself)"
    )


# ----------------------------------------------------------------- where a value came from
@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    return write(tmp_path / "r.yaml", "model_name_or_path: m\nseed: 3\nweight_decay: 0.1\n")


def parse_error(*argv: str) -> str:
    with pytest.raises(ConfigError) as error:
        ConfigParser().parse(list(argv))
    return str(error.value)


def test_a_value_of_the_command_line_is_named_as_the_command_lines(recipe: Path) -> None:
    message = parse_error("--config", str(recipe), "--learning_rate", "nan")
    assert (
        message == "command line (--learning_rate): learning_rate must be finite and > 0, got nan"
    )


def test_an_abbreviated_flag_is_named_as_the_command_lines(recipe: Path) -> None:
    message = parse_error("--config", str(recipe), "--weight_dec", "-1")
    assert message.startswith("command line (--weight_decay): weight_decay must be finite")


def test_a_value_of_the_recipe_is_named_by_its_file_and_line(recipe: Path) -> None:
    write(recipe, recipe.read_text(encoding="utf-8") + "learning_rate: .nan\n")
    message = parse_error("--config", str(recipe), "--seed", "4")
    assert message == f"{recipe}:4: learning_rate must be finite and > 0, got nan"


def test_a_value_overridden_on_the_command_line_is_the_command_lines(recipe: Path) -> None:
    message = parse_error("--config", str(recipe), "--weight_decay=-1")
    assert message.startswith("command line (--weight_decay): weight_decay must be")


def test_unknown_keys_and_unreadable_values_name_their_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "r.yaml", "model_name_or_path: m\nlearnig_rate: 1\nzzz: 2\n")
    assert parse_error("--config", str(path)) == (
        f"{path}:2: unknown key(s) 'learnig_rate' (did you mean 'learning_rate'?), 'zzz' (line 3)"
    )
    write(path, "model_name_or_path: m\nseed: 1\nlearning_rate: fast\n")
    assert parse_error("--config", str(path)).startswith(
        f"{path}:3: learning_rate: cannot read 'fast' as float"
    )


def test_yaml_that_does_not_parse_is_named_by_its_line(tmp_path: Path) -> None:
    path = write(tmp_path / "r.yaml", "model_name_or_path: m\nscore_range: [0, 5\n")
    assert refusal(path).startswith(f"{path}:3: not valid YAML: expected ',' or ']'")


# ----------------------------------------------------------------- sts-search's values
@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--set", "error: --set columns '{score: a, score: b}': score is given twice"),
        ("--grid", "error: --grid columns '{score: a, score: b}': score is given twice"),
    ],
)
def test_sts_search_reads_its_values_with_the_recipe_reader(
    tmp_path: Path, capsys, flag: str, message: str
) -> None:
    argv = ["--train", "t.csv", "--dev", "d.csv", "--model", "m", "--output-dir", str(tmp_path)]
    assert search_main([*argv, flag, "columns={score: a, score: b}"]) == 2
    assert capsys.readouterr().err.startswith(message)
