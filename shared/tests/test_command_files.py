"""Every console script of sts-core against the same output cases (issue 61, item 1).

Each script declares its inputs and outputs to :mod:`sts_core.command_files` before any work. For
each script, an output that is an input file, lies inside an input folder, is a file of the
input model, is a link to an input, or is an existing file the project did not write is
refused: exit status 2, one line, no traceback, every input and the foreign file
byte-identical after. A console script added to sts-core without its cases here fails
:func:`test_every_console_script_of_sts_core_has_its_cases`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from sts_core.testing import make_tiny_bert
from sts_core.testing.option_checks import refused_leaving

pytestmark = pytest.mark.usefixtures("torch_one_thread", "no_model_loading")

CASES = ("an input file", "inside an input folder", "a model's file", "a link", "foreign")
PAIRS_TEXT = "".join(
    f'{{"sentence1": "a man plays {i}", "sentence2": "a dog runs {i}", "score": {i % 5}}}\n'
    for i in range(8)
)


@dataclass
class Workspace:
    """The inputs every script reads: a model folder (two, for a soup), a pairs table and a
    data folder, and a folder for outputs. A case makes only its own link or foreign file
    (each case's output is built lazily: a foreign file written through another case's
    link would change an input before the test looks)."""

    root: Path

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def second_model(self) -> Path:
        return self.root / "model-b"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def pairs(self) -> Path:
        return self.data / "pairs.json"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def inputs(self) -> dict[str, str]:
        """Every file under the inputs with its content hash."""
        found = {}
        for folder in (self.model, self.second_model, self.data):
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        return found

    def state(self) -> tuple[dict[str, str], dict[Path, bytes]]:
        """What a refused command must leave as it was: the inputs, and the files of the
        output folder (a user's file where the output would go)."""
        return self.inputs(), {p: p.read_bytes() for p in self.out.rglob("*") if p.is_file()}

    def link(self, name: str, target: Path) -> Path:
        self.out.mkdir(exist_ok=True)
        os.symlink(target, self.out / name)
        return self.out / name

    def foreign(self, name: str) -> Path:
        """A file of the user's where the output goes."""
        path = self.out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("the user's own file\n", encoding="utf-8")
        return path


@pytest.fixture
def workspace(tiny_bert_dir: Path, tmp_path: Path) -> Workspace:
    space = Workspace(tmp_path)
    shutil.copytree(tiny_bert_dir, space.model)
    make_tiny_bert(space.second_model, seed=1)
    space.data.mkdir()
    space.pairs.write_text(PAIRS_TEXT, encoding="utf-8")
    return space


# ----------------------------------------------------------------------------- the scripts
def eval_case(space: Workspace, case: str) -> list[str]:
    """``sts-eval --output BASE`` writes BASE.json and BASE.md."""
    base = {
        "an input file": lambda: space.data / "pairs",  # → data/pairs.json, the --pairs table
        "inside an input folder": lambda: space.model / "results",
        "a model's file": lambda: space.model / "config",  # → model/config.json
        "a link": lambda: space.link("results.json", space.pairs).with_suffix(""),
        "foreign": lambda: space.foreign("results.json").with_suffix(""),
    }[case]()
    return ["--model", str(space.model), "--pairs", str(space.pairs), "--output", str(base)]


def data_case(space: Workspace, case: str) -> list[str] | None:
    """``sts-data filter --data-dir DATA --output FILE`` (no model)."""
    output = {
        "an input file": lambda: space.data,
        "inside an input folder": lambda: space.data / "kept.jsonl",
        "a model's file": lambda: None,
        "a link": lambda: space.link("kept.jsonl", space.pairs),
        "foreign": lambda: space.foreign("kept.jsonl"),
    }[case]()
    if output is None:
        return None
    return ["filter", "--data-dir", str(space.data), "--output", str(output)]


def mine_case(space: Workspace, case: str) -> list[str]:
    output = {
        "an input file": lambda: space.pairs,
        "inside an input folder": lambda: space.model / "mined.csv",
        "a model's file": lambda: space.model / "tokenizer.json",
        "a link": lambda: space.link("mined.json", space.pairs),
        "foreign": lambda: space.foreign("mined.csv"),
    }[case]()
    return ["--model", str(space.model), "--pairs", str(space.pairs), "--output", str(output)]


def soup_case(space: Workspace, case: str) -> list[str]:
    output = {
        "an input file": lambda: space.model,
        "inside an input folder": lambda: space.model / "soup",
        "a model's file": lambda: space.model / "config.json",
        "a link": lambda: space.link("soup", space.model),
        "foreign": lambda: space.foreign("soup/notes.txt").parent,
    }[case]()
    models = [str(space.model), str(space.second_model)]
    return [*models, "--output", str(output), "--overwrite"]


def search_case(space: Workspace, case: str) -> list[str]:
    output = {
        "an input file": lambda: space.pairs,
        "inside an input folder": lambda: space.model / "search",
        "a model's file": lambda: space.model / "config.json",
        "a link": lambda: space.link("search", space.data),
        "foreign": lambda: space.foreign("search/notes.txt").parent,
    }[case]()
    tables = ["--train", str(space.pairs), "--dev", str(space.pairs)]
    return [*tables, "--model", str(space.model), "--methods", "core", "--output-dir", str(output)]


def train_case(space: Workspace, case: str) -> list[str]:
    output = {
        "an input file": lambda: space.pairs,
        "inside an input folder": lambda: space.model / "run",
        "a model's file": lambda: space.model / "config.json",
        "a link": lambda: space.link("run", space.model),
        "foreign": lambda: space.foreign("run/notes.txt").parent,
    }[case]()
    recipe = space.root / "recipe.yaml"
    recipe.write_text(
        f"model_name_or_path: {space.model}\ntrain_datasets: [{space.pairs}]\n"
        f"eval_dataset: {space.pairs}\nscore_range: [0, 5]\nmax_steps: 1\n"
        f"output_dir: {output}\noverwrite_output_dir: true\nreport_to: none\n",
        encoding="utf-8",
    )
    return ["--config", str(recipe)]


def launch_case(space: Workspace, case: str) -> list[str]:
    """``sts-launch <method> --config …``: the run's own checks, in this process."""
    return ["core", *train_case(space, case)]


def _main(module: str, name: str) -> Callable[[list[str]], int]:
    def call(argv: list[str]) -> int:
        return getattr(importlib.import_module(module), name)(argv)

    return call


#: console script → (its main, the argv of each case, the prefix of its error line)
SCRIPTS: dict[str, tuple[Callable, Callable, str]] = {
    "sts-eval": (_main("sts_core.cli", "eval_main"), eval_case, "sts-eval: error: "),
    "sts-data": (_main("sts_core.cli", "data_main"), data_case, "sts-data: error: "),
    "sts-mine": (_main("sts_core.mining_cli", "main"), mine_case, "sts-mine: error: "),
    "sts-soup": (_main("sts_core.soup", "main"), soup_case, "sts-soup: error: "),
    "sts-search": (_main("sts_core.search.command", "main"), search_case, "error: "),
    "sts-train": (_main("sts_core.training.run", "main"), train_case, "error: "),
    "sts-launch": (_main("sts_core.launch", "main"), launch_case, "error: "),
}


def test_every_console_script_of_sts_core_has_its_cases() -> None:
    scripts = importlib.metadata.distribution("sts-core").entry_points
    names = {entry.name for entry in scripts if entry.group == "console_scripts"}
    assert names == set(SCRIPTS)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_an_output_on_an_input_or_a_foreign_file_is_refused_in_one_line(
    workspace: Workspace, capsys, script: str, case: str
) -> None:
    main, argv_of, prefix = SCRIPTS[script]
    argv = argv_of(workspace, case)
    if argv is None:
        pytest.skip(f"{script} reads no model")
    assert workspace.pairs.read_text(encoding="utf-8") == PAIRS_TEXT  # the case left it
    line = refused_leaving(main, argv, capsys, prefix, workspace.state)
    # refused by the files rule (not for another reason): it names the output and says so
    assert re.search(r"nothing (was|is) (written|replaced|removed)", line), line
    assert re.search(r"(--output|--output-dir|output_dir) ", line), line
