"""sts-search's two training stages (``--set stage1_loss=… --set stage1_epochs=…``): the
keys read in one place (:mod:`sts_core.search.stages`), each refusal before anything trains,
the worker's two ``sts-train`` runs (a two-stage cell against two ``sts-train`` runs made
by hand: ``tests/test_search_command.py``, a method with two losses)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sts_core.search.cells import Cell, Recipe, settings_of
from sts_core.search.spec import SearchError, SearchSpec
from sts_core.search.stages import (
    STAGE_KEYS,
    FirstStage,
    StageError,
    first_stage,
    stage_keys_text,
    without_stages,
)

PAIRS, BATCH = 24, 8


def write_pairs(path: Path, rows: int, shift: int = 0) -> Path:
    from sts_core.testing import WORDS

    lines = ["sentence1,sentence2,score"]
    for i in range(rows):
        a = " ".join(WORDS[(i * 7 + j + shift) % len(WORDS)] for j in range(4))
        b = " ".join(WORDS[(i * 5 + 2 * j + shift) % len(WORDS)] for j in range(4))
        lines.append(f"{a},{b},{(i * 13 + shift) % 26 / 5:g}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def search_spec(tmp_path: Path, model: Path, **changes: Any) -> SearchSpec:
    train = write_pairs(tmp_path / "train.csv", PAIRS)
    dev = write_pairs(tmp_path / "dev.csv", 12, shift=3)
    fields: dict[str, Any] = {
        "train": [str(train)], "dev": str(dev), "model": str(model),
        "output_dir": tmp_path / "search", "methods": ["core"], "batch_size": BATCH,
    }  # fmt: skip
    return SearchSpec(**{**fields, **changes})


def test_the_stage_keys_make_a_first_stage_or_none() -> None:
    assert STAGE_KEYS == ("stage1_loss", "stage1_epochs")
    assert first_stage({"loss": "pearson"}) is None
    first = first_stage({"stage1_loss": "cosine_mse", "stage1_epochs": 1, "loss": "pearson"})
    assert first == FirstStage("cosine_mse", 1.0)
    assert first.settings() == {"loss": "cosine_mse", "num_train_epochs": 1.0}
    recipe = {"loss": "pearson", "num_train_epochs": 3, "seed": 2, "output_dir": "a"}
    assert first.recipe(recipe, "b") == {
        "loss": "cosine_mse", "num_train_epochs": 1.0, "seed": 2, "output_dir": "b"
    }  # fmt: skip
    assert first_stage({"stage1_loss": "x", "stage1_epochs": 0.5}) == FirstStage("x", 0.5)
    settings = {"stage1_loss": "x", "stage1_epochs": 2, "pooling": "cls"}
    assert without_stages(settings) == {"pooling": "cls"}
    assert stage_keys_text(settings) == "--set stage1_loss=x --set stage1_epochs=2"
    # a value that is not text is written as YAML reads it back (true, not Python's True)
    assert stage_keys_text({"stage1_epochs": True}, lambda key: "--grid") == (
        "--grid stage1_epochs=true"
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"stage1_loss": "cosine_mse"}, "a first stage needs both stage1_loss and stage1_epochs"),
        ({"stage1_epochs": 1}, "a first stage needs both stage1_loss and stage1_epochs"),
        ({"stage1_loss": "x", "stage1_epochs": 0}, "stage1_epochs is a number of epochs > 0"),
        ({"stage1_loss": "x", "stage1_epochs": -1}, "stage1_epochs is a number of epochs > 0"),
        ({"stage1_loss": "x", "stage1_epochs": "one"}, "stage1_epochs is a number of epochs > 0"),
        ({"stage1_loss": "x", "stage1_epochs": True}, "stage1_epochs is a number of epochs > 0"),
        ({"stage1_loss": 3, "stage1_epochs": 1}, "stage1_loss is the name of a loss of the method"),
        (
            {"stage1_loss": "", "stage1_epochs": 1},
            "stage1_loss is the name of a loss of the method",
        ),
    ],
)
def test_stage_keys_that_make_no_first_stage_are_refused(settings, message) -> None:
    with pytest.raises(StageError) as refused:
        first_stage(settings)
    assert str(refused.value) == message  # the whole message


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"settings": {"stage1_loss": "cosine_mse"}},
            "--methods core: --set stage1_loss=cosine_mse: a first stage needs both "
            "stage1_loss and stage1_epochs",
        ),
        (
            {"settings": {"stage1_loss": "cosine_mse"}, "grid": {"stage1_epochs": [0, 1]}},
            "--methods core: --set stage1_loss=cosine_mse --grid stage1_epochs=0: "
            "stage1_epochs is a number of epochs > 0",
        ),
        (
            {"settings": {"stage1_loss": "cosent", "stage1_epochs": 1}},
            "--methods core: --set stage1_loss=cosent --set stage1_epochs=1: core has one loss "
            "(cosine_mse); a first stage trains another loss of the method",
        ),
        (
            {
                "methods": ["st:cosine"],
                "score_range": [0, 5],
                "settings": {"stage1_loss": "cosine_mse", "stage1_epochs": 1},
            },
            "--methods st:cosine: --set stage1_loss=cosine_mse --set stage1_epochs=1: two "
            "stages train an installed method's losses; a peer row (st:*) trains one "
            "sentence-transformers loss",
        ),
    ],  # fmt: skip
)
def test_each_bad_first_stage_is_refused_before_anything_trains(
    tiny_bert_dir: Path, tmp_path: Path, changes, message
) -> None:
    from sts_core.search.command import run_search

    search = search_spec(tmp_path, tiny_bert_dir, **changes)
    with pytest.raises(SearchError) as refused:
        run_search(search, log=lambda line: None)
    assert str(refused.value) == message
    assert not search.output_dir.exists()


def test_the_stage_keys_never_reach_the_training_recipes() -> None:
    training = {"stage1_loss": "cosine_mse", "stage1_epochs": 1, "pooling": "cls"}
    cell = Cell(Recipe("core", (), 3.0), 0, "core", training)
    recipe = cell.train_recipe({"model_name_or_path": "m"}, Path("out"))
    assert recipe["pooling"] == "cls" and not set(STAGE_KEYS) & set(recipe)
    stage1 = cell.stage1_recipe({"model_name_or_path": "m"}, Path("first"))
    assert stage1 == {**recipe, "loss": "cosine_mse", "num_train_epochs": 1.0,
                      "output_dir": "first"}  # fmt: skip
    assert Cell(Recipe("core"), 0, "core", {"pooling": "cls"}).stage1_recipe({}, Path()) is None
    assert cell.describe()["settings"] == training  # the worker reads its stage from here
    # a --grid'ed stage in the key as the quality benchmark's committed cells name it
    grid = {"stage1_loss": "cosine_mse", "stage1_epochs": 1, "teacher_weight": 1}
    named = Cell(Recipe("ours-pcc_pearson", settings_of(grid), 2.0, 4e-5), 0, "pcctuning", grid)
    assert named.key == (
        "ours-pcc_pearson [stage1_epochs=1, stage1_loss=cosine_mse, teacher_weight=1] "
        "| epochs 2 | lr 4e-05 | seed 0"
    )


class FakeTrain:
    """``sts-train``'s main: records each argv, writes the steps it is given as
    ``metrics.json`` into the run's output folder (its recipe's), exits with the status it
    is given."""

    def __init__(self, outcomes: list[tuple[int, int]]) -> None:
        self.outcomes, self.argvs = list(outcomes), []

    def __call__(self, argv: list[str]) -> int:
        self.argvs.append(argv)
        status, steps = self.outcomes.pop(0)
        recipe = yaml.safe_load(Path(argv[argv.index("--config") + 1]).read_text())
        output = Path(recipe["output_dir"])
        output.mkdir()
        (output / "metrics.json").write_text(json.dumps({"train": {"global_step": steps}}))
        return status


def cell_folder(tmp_path: Path, training: dict[str, Any]) -> Path:
    from sts_core.search.schedule import prepare

    folder = tmp_path / "cell"
    cell = Cell(Recipe("core", (), 2.0, 1e-4), 0, "core", training)
    prepare(folder, cell, {"model_name_or_path": "m"}, {"dev": "dev.csv", "metric": "x"})
    return folder


def test_the_worker_trains_the_first_stage_then_the_recipe_from_its_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sts_core.search import worker

    folder = cell_folder(tmp_path, {"stage1_loss": "a_loss", "stage1_epochs": 0.5})
    fake = FakeTrain([(0, 3), (0, 5)])
    monkeypatch.setattr("sts_core.training.run.main", fake)
    assert worker.train_stages(folder, json.loads((folder / "cell.json").read_text())) == (0, 8)
    assert fake.argvs == [
        ["--method", "core", "--config", str(folder / "stage1.yaml")],
        ["--method", "core", "--config", str(folder / "recipe.yaml"),
         "--model_name_or_path", str(folder / "stage1")],
    ]  # fmt: skip
    assert not (folder / "stage1").exists() and (folder / "model").is_dir()
    own = yaml.safe_load((folder / "recipe.yaml").read_text(encoding="utf-8"))
    first = yaml.safe_load((folder / "stage1.yaml").read_text(encoding="utf-8"))
    assert own["num_train_epochs"] == 2.0 and not set(STAGE_KEYS) & set(own)
    assert first == {**own, "loss": "a_loss", "num_train_epochs": 0.5,
                     "output_dir": str(folder / "stage1")}  # fmt: skip


def test_a_diverged_first_stage_is_a_diverged_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sts_core.search import worker

    folder = cell_folder(tmp_path, {"stage1_loss": "a_loss", "stage1_epochs": 1})
    (folder / "stage1").mkdir()  # an interrupted run's: removed before the cell trains
    (folder / "stage1" / "left.txt").write_text("x")
    fake = FakeTrain([(worker.DIVERGED, 0)])
    monkeypatch.setattr("sts_core.training.run.main", fake)
    assert worker.train(folder) == 0
    result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    assert result["dev"] is None and result["error"] == "training diverged (log.txt)"
    assert len(fake.argvs) == 1 and not (folder / "stage1").exists()
