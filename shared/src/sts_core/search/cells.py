"""A cell of the search: one method (a quality row or a method's default), one recipe
(grid settings, epochs, learning rate) and one seed, trained as an ``sts-train`` run.

Each cell has a folder ``<output>/cells/<id>/`` that only the search writes:
``cell.json`` (what the cell is), ``recipe.yaml`` (the ``sts-train`` recipe), ``model/``
(the trained model), ``log.txt`` (the run's output), ``result.json`` (written last, when the
cell is done: dev score, seconds, steps, peak memory) and ``test.json`` (the test table's
score, only for the picks' runs, after selection).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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
MODEL_FOLDER = "model"


@dataclass(frozen=True)
class Cell:
    """One training run of the search.

    Args:
        method: ``<method>`` (its default loss) or ``<method>:<quality row>``.
        method_name: the installed method (``sts-train --method``).
        settings: the recipe keys of the row, then ``--set``, then the grid's values.
        grid: the grid values of this cell (part of its recipe's key).
        epochs, learning_rate, seed: the cell's budget and seed.
    """

    method: str
    method_name: str
    settings: dict[str, Any]
    grid: dict[str, Any] = field(default_factory=dict)
    epochs: float = 1.0
    learning_rate: float = 2e-5
    seed: int = 0

    @property
    def recipe_key(self) -> str:
        """``cosent:cosine_mse [pooling=cls] | epochs 1 | lr 2e-05`` (no seed)."""
        grid = ", ".join(f"{k}={_text(v)}" for k, v in sorted(self.grid.items()))
        method = f"{self.method} [{grid}]" if grid else self.method
        return f"{method} | epochs {self.epochs:g} | lr {self.learning_rate:g}"

    @property
    def key(self) -> str:
        return f"{self.recipe_key} | seed {self.seed}"

    @property
    def folder_name(self) -> str:
        """A readable, unique folder name: the method, epochs, rate, seed and a hash of
        the whole key (grid values included)."""
        digest = hashlib.sha1(self.key.encode("utf-8")).hexdigest()[:8]
        stem = f"{self.method}-e{self.epochs:g}-lr{self.learning_rate:g}-s{self.seed}"
        return f"{re.sub(r'[^A-Za-z0-9_.=-]+', '_', stem)}-{digest}"

    def describe(self) -> dict[str, Any]:
        """What ``cell.json`` and the records hold of the cell."""
        return {
            "key": self.key,
            "recipe": self.recipe_key,
            "method": self.method,
            "method_name": self.method_name,
            "settings": self.settings,
            "grid": self.grid,
            "epochs": self.epochs,
            "learning_rate": self.learning_rate,
            "seed": self.seed,
        }

    def recipe(self, base: dict[str, Any], output_dir: Path) -> dict[str, Any]:
        """The ``sts-train`` recipe: ``base`` (model, data, batch, budget), the fixed
        settings, the cell's settings, epochs, rate, seed and output folder."""
        return {
            **base,
            **FIXED_RECIPE,
            **self.settings,
            "num_train_epochs": self.epochs,
            "learning_rate": self.learning_rate,
            "seed": self.seed,
            "output_dir": str(output_dir),
        }


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
    model and tables) when it was trained on other inputs (:func:`trained_on_other_inputs`).
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
    if inputs is not None and trained_on_other_inputs(described, inputs):
        return None
    record = {**cell.describe(), **result, "folder": str(folder)}
    scored = read_json(folder / TEST_FILE)
    if test is not None and scored is not None and scored.get("fingerprint") == test:
        record["test"] = scored["score"]
        record["test_metrics"] = scored["metrics"]
    return record
