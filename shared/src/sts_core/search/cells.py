"""A cell of the search: one method (a quality row or a method's default), one recipe
(grid settings, epochs, learning rate) and one seed, trained as an ``sts-train`` run.

Each cell has a folder ``<output>/cells/<id>/`` that only the search writes:
``cell.json`` (what the cell is), ``recipe.yaml`` (the ``sts-train`` recipe), ``model/``
(the trained model), for a two-stage cell ``stage1.yaml`` (its first stage's recipe) and,
while it trains, ``stage1/`` (that stage's model: :mod:`sts_core.search.stages`),
``log.txt`` (the run's output), ``result.json`` (written last, when the cell is done: dev
score, seconds, steps, peak memory) and ``test.json`` (the test table's score, only for the
picks' runs, after selection).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sts_core.search.stages import first_stage, without_stages


class SearchError(ValueError):
    """A search that cannot run as asked (one line, exit status 2)."""


#: the recipe keys the search sets itself; ``--set`` / ``--grid`` may not name them
OWNED_KEYS = frozenset(
    {
        "model_name_or_path",
        "train_datasets",
        "eval_dataset",
        "output_dir",
        "seed",
        "per_device_train_batch_size",
        "learning_rate",
        "num_train_epochs",
        "max_steps",
        "final_eval_datasets",
        "final_sts_tasks",
        "columns",
        "eval_columns",
        "resume_from_checkpoint",
        "overwrite_output_dir",
        "check_only",
    }
)

#: every cell's training settings the user does not choose: the final model is scored
#: (no checkpoints, no evaluation during training, no tracker)
FIXED_RECIPE = {
    "eval_dataset": "none",
    "eval_strategy": "no",
    "save_strategy": "no",
    "load_best_model_at_end": False,
    "report_to": "none",
    "disable_tqdm": True,
    "logging_steps": 10,
}

CELL_FILE = "cell.json"
RESULT_FILE = "result.json"
TEST_FILE = "test.json"
RECIPE_FILE = "recipe.yaml"
LOG_FILE = "log.txt"
#: a soup folder's description (:mod:`sts_core.search.soups`)
SOUP_FILE = "soup.json"
#: the untrained model's folder's description (:mod:`sts_core.search.untrained`)
UNTRAINED_FILE = "untrained.json"
MODEL_FOLDER = "model"
#: a two-stage cell's first stage: its recipe and its model (removed once the cell's own
#: is trained)
STAGE1_RECIPE_FILE = "stage1.yaml"
STAGE1_FOLDER = "stage1"


#: a recipe's named settings: ``(key, value)`` pairs, sorted by key (a cell's key shows them)
Settings = tuple[tuple[str, Any], ...]


def settings_of(values: Mapping[str, Any]) -> Settings:
    """``values`` as a recipe's named settings (sorted by key)."""
    return tuple(sorted(values.items()))


@dataclass(frozen=True)
class Recipe:
    """What a cell trains but its seed: one method with its named settings (``sts-search``'s
    ``--grid`` values, the quality benchmark's ``--set`` ones), epochs and learning rate,
    and the search's step budget (``--max-steps``: above 0 it bounds the run instead of
    the epochs, and the key says ``steps N``).

    Its :attr:`key` is the name the records and reports give it; it is rendered from these
    fields, never read back (:meth:`Cell.from_record` reads the fields)."""

    method: str
    settings: Settings = ()
    epochs: float = 1.0
    learning_rate: float = 2e-5
    max_steps: int = -1

    @property
    def named(self) -> str:
        """The named settings as the key shows them: ``pooling=cls, warmup_steps=0.1``."""
        return ", ".join(f"{k}={_text(v)}" for k, v in self.settings)

    @property
    def variant(self) -> str:
        """The method and its named settings: ``cosent:cosine_mse [pooling=cls]``."""
        return f"{self.method} [{self.named}]" if self.settings else self.method

    @property
    def length(self) -> str:
        """What bounds the run: ``steps 50`` under a step budget, else ``epochs 1``."""
        return f"steps {self.max_steps}" if self.max_steps > 0 else f"epochs {self.epochs:g}"

    @property
    def budget(self) -> str:
        """Length and learning rate, for a table's cell: ``epochs 1, lr 2e-05``."""
        return f"{self.length}, lr {self.learning_rate:g}"

    @property
    def key(self) -> str:
        """``cosent:cosine_mse [pooling=cls] | epochs 1 | lr 2e-05`` (no seed; ``steps N``
        in place of the epochs under a step budget)."""
        return f"{self.variant} | {self.length} | lr {self.learning_rate:g}"

    def soup_key(self, seeds: int) -> str:
        """The key of the soup (uniform weight average) of the recipe's first ``seeds``
        seeds' models: ``soup of 3 seeds | <key>``."""
        return f"soup of {seeds} seeds | {self.key}"

    @property
    def folder_name(self) -> str:
        """A readable, unique folder name (its soup's, ``sts-search --soup``): the method,
        epochs, rate and a hash of the whole key."""
        return readable_name(f"{self.method}-{self.length_tag}-lr{self.learning_rate:g}", self.key)

    @property
    def length_tag(self) -> str:
        """The length in a folder name: ``e1``, or ``steps50`` under a step budget."""
        return f"steps{self.max_steps}" if self.max_steps > 0 else f"e{self.epochs:g}"


def readable_name(stem: str, key: str) -> str:
    """``stem`` with what a folder name cannot hold replaced, and the first 8 hex digits of
    the SHA-1 of ``key`` (unique)."""
    digest = hashlib.sha1(key.encode("utf-8")).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_.=-]+', '_', stem)}-{digest}"


@dataclass(frozen=True)
class Cell:
    """One training run of the search: a recipe and a seed.

    Args:
        recipe: the method, its named settings, epochs and learning rate.
        seed: the cell's seed.
        method_name: ``sts-search``'s installed method (``sts-train --method``).
        training: ``sts-search``'s recipe keys of the cell: the row's, then ``--set``, then
            the grid's values (:attr:`Recipe.settings`).
    """

    recipe: Recipe
    seed: int = 0
    method_name: str = ""
    training: dict[str, Any] = field(default_factory=dict, hash=False)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Cell:
        """The cell a record describes, from its fields alone (the one reader of records):
        ``sts-search``'s (``cell.json``, ``results.json``), whose named settings are
        ``grid`` (``settings``: the whole recipe's keys), or the quality benchmark's cells
        file's, whose named settings are ``settings`` (a soup's record: its first seed's
        cell)."""
        named = record["grid"] if "grid" in record else record.get("settings") or {}
        recipe = Recipe(
            record["method"],
            settings_of(named),
            record["epochs"],
            record["learning_rate"],
            record.get("max_steps", -1),
        )
        if "grid" not in record:
            return cls(recipe, record["seed"])
        return cls(recipe, record["seed"], record["method_name"], dict(record["settings"]))

    @property
    def method(self) -> str:
        """``<method>`` (its default loss) or ``<method>:<quality row>``."""
        return self.recipe.method

    @property
    def recipe_key(self) -> str:
        """The recipe's key (:attr:`Recipe.key`)."""
        return self.recipe.key

    @property
    def key(self) -> str:
        return f"{self.recipe.key} | seed {self.seed}"

    @property
    def folder_name(self) -> str:
        """A readable, unique folder name: the method, epochs, rate, seed and a hash of
        the whole key (grid values included)."""
        recipe = self.recipe
        stem = f"{recipe.method}-{recipe.length_tag}-lr{recipe.learning_rate:g}-s{self.seed}"
        return readable_name(stem, self.key)

    def describe(self) -> dict[str, Any]:
        """What ``cell.json`` and the records hold of the cell (:meth:`from_record` reads
        it back)."""
        return {
            "key": self.key,
            "recipe": self.recipe.key,
            "method": self.recipe.method,
            "method_name": self.method_name,
            "settings": self.training,
            "grid": dict(self.recipe.settings),
            "epochs": self.recipe.epochs,
            "learning_rate": self.recipe.learning_rate,
            **({"max_steps": self.recipe.max_steps} if self.recipe.max_steps > 0 else {}),
            "seed": self.seed,
        }

    def train_recipe(self, base: dict[str, Any], output_dir: Path) -> dict[str, Any]:
        """The ``sts-train`` recipe: ``base`` (model, data, batch, budget), the fixed
        settings, the cell's settings but a first stage's keys (the worker trains the first
        stage: :mod:`sts_core.search.stages`), epochs, rate, seed and output folder."""
        return {
            **base,
            **FIXED_RECIPE,
            **without_stages(self.training),
            "num_train_epochs": self.recipe.epochs,
            "learning_rate": self.recipe.learning_rate,
            "seed": self.seed,
            "output_dir": str(output_dir),
        }

    def stage1_recipe(self, base: dict[str, Any], output_dir: Path) -> dict[str, Any] | None:
        """A two-stage cell's first stage's ``sts-train`` recipe (:meth:`train_recipe` with
        the stage's loss and epochs, into ``output_dir``); None for a cell of one stage."""
        first = first_stage(self.training)
        if first is None:
            return None
        return first.recipe(self.train_recipe(base, output_dir), str(output_dir))


#: the start of an input's name that only the cells whose recipe names it record: the
#: teacher folder (``teacher_model <folder>``), so that a teacher retrained under the same
#: name trains its cells again and leaves the others
TEACHER_INPUT = "teacher_model "


def cell_inputs(cell: Cell, inputs: dict[str, Any]) -> dict[str, Any]:
    """The content identities ``cell`` records of the search's ``inputs``
    (:meth:`~sts_core.search.spec.SearchSpec.input_identities`): the model's and the
    tables', and the identity of the teacher its recipe names (``teacher_model``)."""
    own = {name: found for name, found in inputs.items() if not name.startswith(TEACHER_INPUT)}
    teacher = cell.training.get("teacher_model")
    name = f"{TEACHER_INPUT}{teacher}"
    if teacher and name in inputs:
        own[name] = inputs[name]
    return own


def trained_on_other_inputs(described: dict[str, Any], inputs: dict[str, Any]) -> bool:
    """Whether a cell's ``cell.json`` records other content identities of the model and
    tables than ``inputs`` (or none: a cell of an older search)."""
    return (described.get("scoring") or {}).get("inputs") != inputs


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file's content; None when it is missing."""
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def done_record(
    folder: Path,
    cell: Cell,
    test: dict[str, str] | None = None,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The record of a finished cell: its description, result and, when ``test`` (the test
    table's fingerprint) is the table its ``test.json`` scored, the test score; None when
    it has not finished, or (``inputs`` given: the content identities of the search's
    model, tables and teachers) when it was trained on other inputs (its own of them:
    :func:`cell_inputs`, :func:`trained_on_other_inputs`).
    A folder whose ``cell.json`` describes another cell is refused (it is not this
    search's)."""
    described = read_json(folder / CELL_FILE)
    if described is not None and described.get("key") != cell.key:
        raise SearchError(
            f"{folder / CELL_FILE} describes {described.get('key')!r}, not {cell.key!r}"
        )
    result = read_json(folder / RESULT_FILE)
    if described is None or result is None:
        return None
    if inputs is not None and trained_on_other_inputs(described, cell_inputs(cell, inputs)):
        return None
    record = {**cell.describe(), **result, "folder": str(folder)}
    scored = read_json(folder / TEST_FILE)
    if test is not None and scored is not None and scored.get("fingerprint") == test:
        record["test"] = scored["score"]
        record["test_metrics"] = scored["metrics"]
    return record
