"""sts-search's options, its folder's identity, its grid and its slots (no training)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sts_core.search.cells import Cell, done_record
from sts_core.search.command import grid_values, main, parse_settings
from sts_core.search.schedule import Scheduler, Slot, slots
from sts_core.search.spec import (
    SearchError,
    SearchSpec,
    check_folder,
    folder_lock,
    grid_cells,
    record_identity,
    seed_cells,
)


def spec(tmp_path: Path, **changes) -> SearchSpec:
    train = tmp_path / "train.csv"
    dev = tmp_path / "dev.csv"
    for path in (train, dev):
        if not path.exists():
            path.write_text("sentence1,sentence2,score\na b,c d,1\n", encoding="utf-8")
    fields = {"train": [str(train)], "dev": str(dev), "model": "m", "output_dir": tmp_path / "out"}
    return SearchSpec(**{**fields, **changes})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"task": "regression"}, "--task 'regression' is not one of sts"),
        ({"metric": "accuracy"}, "--metric 'accuracy' is not a sts metric"),
        ({"task": "ranking", "metric": "spearman"}, "not a ranking metric (map, mrr"),
        ({"epochs": [1, 0]}, "--epochs needs positive values"),
        ({"learning_rates": []}, "--learning-rate needs positive values"),
        ({"seeds": [0, 0]}, "--seeds needs distinct seeds"),
        ({"settings": {"seed": 3}}, "may not name seed"),
        ({"grid": {"learning_rate": [1, 2]}}, "may not name learning_rate"),
        ({"settings": {"pooling": "cls"}, "grid": {"pooling": ["mean"]}}, "pooling: given both"),
        ({"score_range": [5, 0]}, "--score-range needs LOW < HIGH"),
        ({"jobs": 0}, "--jobs needs a positive number"),
        ({"retrain": "all"}, "--retrain is picks or best"),
        ({"batch_size": 0}, "--batch-size needs a positive number"),
    ],
)
def test_each_bad_option_is_refused_with_its_name(tmp_path: Path, changes, message) -> None:
    with pytest.raises(SearchError, match=message.replace("(", r"\(")):
        spec(tmp_path, **changes)


def test_the_default_metric_follows_the_task(tmp_path: Path) -> None:
    assert spec(tmp_path).metric == "spearman"
    assert spec(tmp_path, task="classification").metric == "accuracy"
    assert spec(tmp_path, task="ranking").metric == "map"


def test_set_and_grid_values_are_read_as_yaml() -> None:
    assert parse_settings(["pooling=cls", "warmup_steps=0.1"], "--set") == {
        "pooling": "cls",
        "warmup_steps": "0.1",
    }
    assert grid_values("mean,cls") == ["mean", "cls"]
    assert grid_values("0.1,1") == [0.1, 1]
    assert grid_values("[[384, 64], [384]]") == [[384, 64], [384]]
    with pytest.raises(SearchError, match="--grid 'pooling': expected KEY=VALUE"):
        parse_settings(["pooling"], "--grid")


def test_the_grid_is_methods_by_grid_values_by_epochs_by_rates_at_the_first_seed(
    tmp_path: Path,
) -> None:
    search = spec(
        tmp_path,
        methods=["a", "b:row"],
        epochs=[1, 2],
        learning_rates=[1e-5, 2e-5],
        grid={"pooling": ["mean", "cls"]},
        settings={"warmup_steps": 0.1},
        seeds=[7, 8],
    )
    rows = {"a": ("a", {}), "b:row": ("b", {"loss": "x", "warmup_steps": 0})}
    cells = grid_cells(search, rows)
    assert len(cells) == 2 * 2 * 2 * 2
    assert {c.seed for c in cells} == {7}
    assert cells[0].key == "a [pooling=mean] | epochs 1 | lr 1e-05 | seed 7"
    assert cells[-1].key == "b:row [pooling=cls] | epochs 2 | lr 2e-05 | seed 7"
    # the row's settings, then --set over them, then the grid's value
    assert cells[-1].settings == {"loss": "x", "warmup_steps": 0.1, "pooling": "cls"}
    assert len({c.folder_name for c in cells}) == len(cells)
    again = seed_cells(cells[-1], [8])
    assert again[0].recipe_key == cells[-1].recipe_key and again[0].seed == 8


def test_a_cell_recipe_puts_the_cell_over_the_fixed_settings(tmp_path: Path) -> None:
    cell = Cell("a", "a", {"logging_steps": 5}, {}, 2.0, 3e-5, 4)
    recipe = cell.recipe({"model_name_or_path": "m", "train_datasets": ["t"]}, tmp_path)
    assert recipe["logging_steps"] == 5
    assert recipe["eval_dataset"] == "none" and recipe["save_strategy"] == "no"
    assert (recipe["num_train_epochs"], recipe["learning_rate"], recipe["seed"]) == (2.0, 3e-5, 4)
    assert recipe["output_dir"] == str(tmp_path)


def test_a_folder_of_another_search_or_of_other_files_is_refused(tmp_path: Path) -> None:
    first = spec(tmp_path)
    check_folder(first)  # a new folder: nothing to refuse, nothing written
    assert not first.output_dir.exists()
    record_identity(first)
    check_folder(spec(tmp_path, epochs=[1, 2], seeds=[0, 1]))  # the same search, extended
    with pytest.raises(SearchError, match=r"another search's cells \(.* differs in metric, task"):
        check_folder(spec(tmp_path, task="classification"))
    # the same path, another content: the dev table's SHA-256 differs
    (tmp_path / "dev.csv").write_text("sentence1,sentence2,score\na b,c d,2\n", encoding="utf-8")
    with pytest.raises(SearchError, match="differs in dev"):
        check_folder(spec(tmp_path))
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(SearchError, match="is not empty and holds no search.json"):
        check_folder(spec(tmp_path, output_dir=other))
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_a_second_search_in_a_folder_in_use_is_refused(tmp_path: Path) -> None:
    search = spec(tmp_path)
    held = folder_lock(search)
    try:
        with pytest.raises(SearchError, match="is in use by another sts-search"):
            folder_lock(spec(tmp_path))
    finally:
        held.release()
    folder_lock(search).release()  # free again
    check_folder(search)  # the lock file alone is not a foreign file


def test_a_cell_folder_describing_another_cell_is_an_error(tmp_path: Path) -> None:
    cell = Cell("a", "a", {}, {}, 1.0, 1e-5, 0)
    (tmp_path / "cell.json").write_text(json.dumps({"key": "something else"}), encoding="utf-8")
    with pytest.raises(ValueError, match="describes 'something else'"):
        done_record(tmp_path, cell)


def test_cpu_slots_split_the_threads_and_gpu_slots_take_a_device_each() -> None:
    assert slots(2, [], cpus=8) == [Slot(4), Slot(4)]
    assert slots(3, [], cpus=2) == [Slot(1)] * 3
    assert slots(2, ["0", "1", "2"], cpus=8) == [Slot(4, "0"), Slot(4, "1")]
    assert Slot(4, "1").environment()["CUDA_VISIBLE_DEVICES"] == "1"
    assert Slot(3).environment()["OMP_NUM_THREADS"] == "3"
    with pytest.raises(ValueError, match="--jobs 3 needs as many --devices"):
        slots(3, ["0", "1"])


def test_the_scheduler_starts_nothing_after_its_deadline() -> None:
    ran = []
    scheduler = Scheduler([Slot(1)], deadline=time.monotonic() - 1)
    scheduler.run([("x", lambda slot: ran.append("x"))])
    assert ran == [] and scheduler.skipped == ["x (time limit)"]
    scheduler = Scheduler([Slot(1), Slot(1)])
    scheduler.run([(name, lambda slot, n=name: ran.append(n)) for name in "abc"])
    assert sorted(ran) == ["a", "b", "c"] and scheduler.skipped == []


def test_the_command_refuses_a_bad_option_in_one_line(tmp_path: Path, capsys) -> None:
    search = spec(tmp_path)
    argv = ["--train", *search.train, "--dev", search.dev, "--model", "m"]
    argv += ["--output-dir", str(tmp_path / "out"), "--set", "seed=1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --set / --grid may not name seed")
    assert not (tmp_path / "out").exists()
