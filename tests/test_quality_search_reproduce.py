"""``quality_search.py --compare``: a second run's cells against the stored ones, on made-up
cells: the differences, the picks made over the second run's grid only, and what one side
lacks (``grid_search/reproduce.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_support import load_benchmark_module, load_benchmark_script

search = load_benchmark_script("quality_search")
reproduce = load_benchmark_module("grid_search.reproduce")


def record(method: str, epochs: float, lr: float, seed: int, dev: float, **extra) -> dict:
    return {
        "method": method,
        "variant": method,
        "settings": {},
        "epochs": epochs,
        "learning_rate": lr,
        "seed": seed,
        "dev": dev,
        **extra,
    }


def cells(*records: dict) -> dict[str, dict]:
    return {
        f"{r['variant']} | epochs {r['epochs']:g} | lr {r['learning_rate']:g} | seed {r['seed']}": r
        for r in records
    }


#: stored: a grid of three rates; its best "a" recipe (lr 1e-05) lies outside the second
#: run's grid, so over that grid the stored pick of "a" is epochs 2; "b" picks epochs 1
STORED = cells(
    record("a", 1, 1e-5, 0, 90.0),
    record("a", 1, 4e-5, 0, 88.0),
    record("a", 2, 4e-5, 0, 88.5, test={"avg": 80.0}, train_seconds=100.0),
    record("a", 2, 4e-5, 1, 88.2, test={"avg": 80.4}),
    record("b", 1, 4e-5, 0, 87.0, test={"avg": 79.0}),
    record("b", 2, 4e-5, 0, 86.9),
)
#: the second run: lr 4e-05 only; "a" the same to 1e-4 but for one test score, "b" flipped
FRESH = cells(
    record("a", 1, 4e-5, 0, 88.0001),
    record("a", 2, 4e-5, 0, 88.4999, test={"avg": 80.03}, train_seconds=150.0),
    record("b", 1, 4e-5, 0, 86.8),
    record("b", 2, 4e-5, 0, 86.95, test={"avg": 79.5}),
    record("b", 2, 4e-5, 1, 86.5, test={"avg": 79.1}),
)


def test_the_picks_are_made_over_the_second_runs_grid_on_both_sides() -> None:
    comparison = reproduce.compare(STORED, FRESH, [0])
    assert comparison["picks"] == {
        "a": {"stored": "a | epochs 2 | lr 4e-05", "fresh": "a | epochs 2 | lr 4e-05"},
        "b": {"stored": "b | epochs 1 | lr 4e-05", "fresh": "b | epochs 2 | lr 4e-05"},
    }
    assert comparison["pick_budgets"]["b"] == {
        "stored": "epochs 1, lr 4e-05",
        "fresh": "epochs 2, lr 4e-05",
    }


def test_every_shared_cell_is_compared_and_each_side_lacks_are_listed() -> None:
    comparison = reproduce.compare(STORED, FRESH, [0])
    rows = {row["cell"]: row for row in comparison["cells"]}
    assert list(rows) == [key for key in FRESH if key in STORED]  # the fresh file's order
    tested = rows["a | epochs 2 | lr 4e-05 | seed 0"]
    assert tested["dev"]["diff"] == pytest.approx(88.4999 - 88.5)
    assert tested["test_avg"] == {
        "stored": 80.0,
        "fresh": 80.03,
        "diff": pytest.approx(0.03),
    }
    assert tested["train_seconds"] == {"stored": 100.0, "fresh": 150.0}
    untested = rows["b | epochs 2 | lr 4e-05 | seed 0"]  # tested only in the second run
    assert untested["test_avg"] == {"stored": None, "fresh": 79.5, "diff": None}
    assert comparison["largest_diff"] == {
        "dev": pytest.approx(0.2),
        "test_avg": pytest.approx(0.03),
    }
    assert comparison["only_fresh"] == ["b | epochs 2 | lr 4e-05 | seed 1"]
    # the stored cell outside the second run's grid (lr 1e-05) is not "lacking"
    assert comparison["only_stored"] == ["a | epochs 2 | lr 4e-05 | seed 1"]


def test_a_soups_recipe_is_read_from_its_records_fields() -> None:
    """A stored soup outside the second run lacks there when its recipe (its record's fields:
    method, settings, epochs, rate) is in the second run's grid; one of another recipe not."""
    soup = "soup of 3 seeds | a [x=1] | epochs 2 | lr 4e-05"
    fields = {**record("a", 2, 4e-5, 0, 88.0, soup_of=[0, 1, 2]), "settings": {"x": "1"}}
    other = "soup of 3 seeds | a [x=2] | epochs 2 | lr 4e-05"
    stored = {soup: fields, other: {**fields, "settings": {"x": "2"}}}
    fresh = cells({**record("a", 2, 4e-5, 0, 88.1), "variant": "a [x=1]", "settings": {"x": "1"}})
    assert reproduce.compare(stored, fresh, [0])["only_stored"] == [soup]


def write_cells(path: Path, content: dict) -> Path:
    path.write_text(json.dumps({"cells": content}), encoding="utf-8")
    return path


def test_the_command_writes_the_comparison_and_marks_a_changed_pick(tmp_path: Path) -> None:
    stored = write_cells(tmp_path / "stored.json", STORED)
    fresh = write_cells(tmp_path / "fresh.json", FRESH)
    argv = ["--compare", str(fresh), "--cells", str(stored), "--output-dir", str(tmp_path)]
    assert search.main(argv) == 0
    text = (tmp_path / "quality_search_reproduced.md").read_text(encoding="utf-8")
    assert "| a | epochs 2, lr 4e-05 | epochs 2, lr 4e-05 | yes |" in text
    assert "| b | epochs 1, lr 4e-05 | epochs 2, lr 4e-05 | **no** |" in text
    assert "| a \\| epochs 2 \\| lr 4e-05 \\| seed 0 | 88.5000 | 88.4999 | -0.0001 |" in text
    written = json.loads((tmp_path / "quality_search_reproduced.json").read_text())
    assert written["fresh"] == str(fresh) and len(written["cells"]) == 4
    assert written["second_run"] is None  # no report of the second run beside its cells
    assert not list(tmp_path.glob("quality_search.*"))  # no report, nothing trained


@pytest.mark.parametrize(
    "content,message", [(None, "no such cells file"), ("[1]", "not a cells file")]
)
def test_a_missing_or_wrong_file_is_named(tmp_path: Path, content, message) -> None:
    fresh = tmp_path / "fresh.json"
    if content is not None:
        fresh.write_text(content, encoding="utf-8")
    stored = write_cells(tmp_path / "stored.json", STORED)
    argv = ["--compare", str(fresh), "--cells", str(stored), "--output-dir", str(tmp_path)]
    with pytest.raises(RuntimeError, match=f"{fresh}: {message}"):  # BenchmarkError
        search.main(argv)
    assert not list(tmp_path.glob("quality_search_reproduced.*"))


def test_the_second_runs_command_is_read_from_its_report(tmp_path: Path) -> None:
    fresh = write_cells(tmp_path / "fresh.json", FRESH)
    settings = {
        "methods": ["a", "b"], "epochs": [1.0, 2.0], "learning_rate": [4e-05],
        "seeds": [0, 1], "set_pairs": ["x=1"], "threads": 1, "soup": True,
        "cells": str(fresh), "output_dir": "/r",
    }  # fmt: skip
    machine = {"logical_cpus": 2, "torch": "2.15.0", "wall_seconds": 3997.9}
    report = tmp_path / "quality_search.json"
    report.write_text(json.dumps({"settings": settings, "machine": machine}), "utf-8")
    run = reproduce.second_run(str(fresh))
    assert reproduce.run_text(run) == (
        "The second run: `quality_search.py --methods a b --epochs 1 2 --learning-rate 4e-05 "
        f"--seeds 0 1 --set x=1 --cells {fresh} --output-dir /r --threads 1 --soup` (3998 s "
        "wall, 2 logical "
        "CPUs, torch 2.15.0)."
    )
    settings["cells"] = str(tmp_path / "other.json")  # the report of another cells file
    report.write_text(json.dumps({"settings": settings, "machine": machine}), "utf-8")
    assert reproduce.second_run(str(fresh)) is None


RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def committed_records() -> list[tuple[str, dict]]:
    """Every committed cell record under its key: the cells file, the report's copy of it
    and the comparison's cells (looked up in the cells file by their key)."""
    cells_file = json.loads((RESULTS / "quality_search_cells.json").read_text("utf-8"))["cells"]
    report = json.loads((RESULTS / "quality_search.json").read_text("utf-8"))["cells"]
    compared = json.loads((RESULTS / "quality_search_reproduced.json").read_text("utf-8"))
    keys = [row["cell"] for row in compared["cells"]] + compared["only_stored"]
    return [*cells_file.items(), *report.items(), *((k, cells_file[k]) for k in keys)]


def test_every_committed_key_is_rendered_from_its_records_fields(monkeypatch) -> None:
    """The one cell type (``sts_core.search.cells.Cell``) rebuilds every committed key byte
    for byte from the record's fields alone: a run's key as ``Cell.key``, a soup's as its
    recipe's ``soup_key`` over its seeds; the benchmark's ``describe`` writes the same
    fields back."""
    from sts_core.search.cells import Cell

    monkeypatch.setattr(cells_module, "teacher_id", lambda name: "(not checked here)")
    records = committed_records()
    assert len(records) >= 240
    for key, record in records:
        cell = Cell.from_record(record)
        soup = record.get("soup_of")
        assert (cell.recipe.soup_key(len(soup)) if soup else cell.key) == key
        assert cell.recipe.variant == record["variant"]
        described = cells_module.describe(cell)
        assert {k: described[k] for k in FIELDS} == {k: record[k] for k in FIELDS}


FIELDS = ("method", "variant", "settings", "epochs", "learning_rate", "seed")
cells_module = load_benchmark_module("grid_search.cells")
