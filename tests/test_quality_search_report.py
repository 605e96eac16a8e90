"""The quality search's cost columns and headline, from made-up cells (no training): the
seconds of a recipe are its teacher's recorded training once plus each model's training; a
soup of n seeds costs n models; the headline's margins are against every peer row and the
strongest one; the first stage's keys and `--measure-cost` with training replaced."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from benchmark_support import load_benchmark_module, load_benchmark_script

from sts_core.search.cells import Recipe

search = load_benchmark_script("quality_search")  # the command line
cells = load_benchmark_module("grid_search.cells")
training = load_benchmark_module("grid_search.search")
report = load_benchmark_module("grid_search.report")
levers = load_benchmark_module("grid_search.levers")


def recipe(method: str, settings: dict, seconds: list[float], steps: int, avg: list[float]):
    seeds = range(len(seconds))
    return {
        "method": method,
        "variant": method,
        "epochs": 1.0,
        "learning_rate": 4e-5,
        "settings": settings,
        "dev": dict.fromkeys(seeds, 88.0),
        "test": {seed: {"avg": value} for seed, value in zip(seeds, avg, strict=True)},
        "cost": {
            seed: {"train_seconds": s, "steps": steps, "peak_rss_mb": 1000.0 + seed}
            for seed, s in zip(seeds, seconds, strict=True)
        },
        "selection_dev": 88.0,
    }


def test_a_recipe_costs_its_teacher_once_and_each_model(tmp_path: Path, monkeypatch) -> None:
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    (teacher / report.TEACHER_COST_FILE).write_text(json.dumps({"train_seconds": 1000.0}))
    monkeypatch.setenv("STS_MODELS_DIR", str(tmp_path))
    row = recipe("ours-x", {"teacher_model": "teacher"}, [100.0, 110.0, 120.0], 338, [81, 81, 81])
    assert report.cost_cells(row) == ["1,110", "338", "1,002"]  # 1000 + mean(100, 110, 120)
    assert report.cost_cells(row, models=3)[0] == "1,330"  # the soup: teacher + 3 models
    released = tmp_path / "released"
    released.mkdir()
    (released / "config.json").write_text("{}")
    row["settings"] = {"teacher_model": "released"}
    assert report.cost_cells(row)[0] == "110"  # a teacher used as released: no training
    row["settings"] = {"teacher_model": "gone"}
    assert report.cost_cells(row)[0] == "–"  # unknown: not a number
    row["cost"] = {0: {"train_seconds": 99.0}}  # a cell from before the cost was recorded
    assert report.cost_cells(row) == ["–", "–", "–"]


def test_the_headline_compares_our_pick_with_every_peer_row() -> None:
    best = {
        "ours-a": recipe("ours-a", {}, [1.0], 1, [81.5]),
        "st-cosine": recipe("st-cosine", {}, [1.0, 1.0], 1, [80.9, 80.7]),
        "st-embed-distill": recipe("st-embed-distill", {}, [1.0], 1, [81.2]),
    }
    lines = "\n".join(report.headline(best, {}))
    assert "| +0.70 |" in lines  # 81.5 − mean(80.9, 80.7)
    assert "| +0.30 |" in lines  # 81.5 − 81.2
    strongest = cells.SEARCH_METHODS["st-embed-distill"].label
    assert f"strongest peer row ({strongest}) on the 7-task Avg.: +0.30" in lines
    assert "target ≥ +0.50: not reached" in lines


@pytest.mark.parametrize("method", ["st-embed-distill", "st-mse-distill"])
def test_a_distillation_row_without_a_teacher_is_refused(method: str) -> None:
    with pytest.raises(SystemExit):
        search.parse_args(["--smoke", "--methods", method])


def test_a_cell_of_a_teacher_since_retrained_under_its_name_is_refused(tmp_path: Path) -> None:
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    (teacher / "config.json").write_text("{}")
    (teacher / "model.safetensors").write_bytes(b"first weights")
    cell = cells.Cell(Recipe("st-cosine", (("teacher_model", str(teacher)),), 1.0, 4e-5), 0)
    record = cells.describe(cell)
    first_id = record["teacher_id"]
    assert len(first_id) == 12
    cells.check_cell_teacher(tmp_path / "cells.json", cell.key, record)  # the same weights: kept
    cells._TEACHER_IDS.clear()
    (teacher / "model.safetensors").write_bytes(b"other weights")  # retrained, same folder
    with pytest.raises(search.common.BenchmarkError, match="st-cosine.*give the new teacher"):
        cells.check_cell_teacher(tmp_path / "cells.json", cell.key, record)
    legacy = {k: v for k, v in record.items() if k != "teacher_id"}  # before ids were kept
    with pytest.raises(search.common.BenchmarkError, match=r"\(not recorded\)"):
        cells.check_cell_teacher(tmp_path / "cells.json", cell.key, legacy)
    assert cells.teacher_id(str(teacher)) != first_id
    plain = cells.Cell(Recipe("st-cosine", (), 1.0, 4e-5), 0)
    no_teacher = cells.describe(plain)
    cells.check_cell_teacher(tmp_path / "cells.json", plain.key, no_teacher)


def test_our_rows_with_a_teacher_the_peer_was_not_given_are_not_the_pick() -> None:
    teacher_row = recipe("ours-a", {"teacher_model": "old-teacher"}, [1.0], 1, [83.0])
    teacher_row["variant"] = "ours-a [teacher_model=old-teacher]"
    teacher_row["dev"] = {0: 90.0}  # the best dev of ours, but the peer never had that teacher
    best = {
        teacher_row["variant"]: teacher_row,
        "ours-b": recipe("ours-b", {}, [1.0], 1, [81.4]),
        "st-cosine": recipe("st-cosine", {}, [1.0], 1, [80.9]),
    }
    lines = "\n".join(report.headline(best, {}))
    assert "- ours: ours-b" in lines and "| +0.50 |" in lines  # 81.4 − 80.9
    assert "not candidates: our rows with a teacher no peer row was given (`old-teacher`)" in lines
    given = recipe("st-cosine", {"teacher_model": "old-teacher"}, [1.0], 1, [82.0])
    given["variant"] = "st-cosine [teacher_model=old-teacher]"
    best[given["variant"]] = given  # now the peer has it too: our teacher row is the pick
    lines = "\n".join(report.headline(best, {}))
    assert "- ours: ours-a [teacher_model=old-teacher]" in lines
    assert "on the 7-task Avg.: +1.00" in lines and "not candidates" not in lines


def test_each_lever_is_its_recipes_test_average_on_minus_off(monkeypatch) -> None:
    on = recipe("ours-a", {}, [1.0, 1.0], 1, [81.0, 81.4])
    off = recipe("st-cosine", {}, [1.0, 1.0, 1.0], 1, [80.0, 80.5, 80.9])
    recipes = {"ours-a | epochs 1 | lr 4e-05": on, "st-cosine | epochs 1 | lr 4e-05": off}
    soups = {"ours-a | epochs 1 | lr 4e-05": {"test": {"avg": 81.5}}}
    ours, peer = Recipe("ours-a", (), 1.0, 4e-5), Recipe("st-cosine", (), 1.0, 4e-5)
    made_up = (
        levers.Lever("loss", ours, peer),
        levers.Lever("soup", ours, ours, True),
        levers.Lever("absent", Recipe("ours-z", (), 1.0, 4e-5), peer),
        levers.Lever("no soup", peer, peer, True),
    )
    monkeypatch.setattr(levers, "LEVERS", made_up)
    rows = {line.split(" | ")[0][2:]: line for line in report.lever_lines(recipes, soups)[4:-1]}
    assert rows["loss"].endswith("| 80.47 ± 0.45 (3) | +0.73 |")  # 81.2 − mean(80, 80.5, 80.9)
    assert "| 81.20 ± 0.28 (2) |" in rows["loss"]
    assert rows["soup"].endswith("| +0.30 |")  # the soup 81.5 − its runs' mean 81.2
    assert "| not measured |" in rows["absent"] and rows["absent"].endswith("| – |")
    assert rows["no soup"].split(" | ")[2] == "not measured"  # its runs are not its soup
    assert all(line.count("|") == 7 for line in rows.values())  # no "|" inside a cell


def test_every_lever_names_recipes_the_search_can_train() -> None:
    for lever in levers.LEVERS:
        for recipe in (lever.on, lever.off):
            assert recipe.method in cells.SEARCH_METHODS, recipe.key
            assert recipe.epochs > 0 and recipe.learning_rate == 4e-5, recipe.key
            # a recipe key of the cells file: the method, its --set settings, epochs, lr
            assert recipe.key == f"{recipe.variant} | {recipe.budget.replace(', ', ' | ')}"


def test_a_first_stage_needs_its_loss_and_epochs() -> None:
    """The stage keys read by the core's one reader (``sts_core.search.stages``), its
    refusal naming both ``--set`` options."""
    values = {"stage1_loss": "cosine_mse", "stage1_epochs": 1, "teacher_weight": 1}
    first = cells.stage_of(values)
    assert (first.loss, first.epochs) == ("cosine_mse", 1.0)
    assert cells.stage_of({"loss_weights": {}}) is None
    for half in ({"stage1_loss": "cosine_mse"}, {"stage1_epochs": 1}):
        with pytest.raises(search.common.BenchmarkError, match="needs both") as error:
            cells.stage_of(dict(half))
        assert str(error.value).startswith("--set stage1_loss=")
    with pytest.raises(search.common.BenchmarkError, match="epochs > 0"):
        cells.stage_of({"stage1_loss": "cosine_mse", "stage1_epochs": 0})


def measuring(tmp_path: Path, monkeypatch, stored_dev: float, new_dev: float):
    """A cells file holding one cell without cost (dev ``stored_dev``) whose second training
    (a one-cell ``sts-search``, replaced) scores ``new_dev``; the folders it trained in."""
    cell = cells.Cell(Recipe("ours-a", (), 1.0, 4e-5), 0)
    table = cells.CellsFile(tmp_path / "cells.json")
    table.add(cell.key, {**cells.describe(cell), "dev": stored_dev})
    cost = {"train_seconds": 12.5, "steps": 338, "peak_rss_mib": 1700.0}
    folders: list[Path] = []

    def one_cell(args, trained, folder):
        assert trained == cell and folder.is_dir()
        folders.append(folder)
        return {**cost, "dev": new_dev}

    monkeypatch.setattr(training, "one_cell", one_cell)
    args = SimpleNamespace(weights_dir=str(tmp_path / "weights"))
    return args, table, cell, folders


def test_measure_cost_copies_the_cost_of_a_cell_whose_dev_reproduces(
    tmp_path: Path, monkeypatch
) -> None:
    args, table, cell, folders = measuring(tmp_path, monkeypatch, 88.2330, 88.2330)
    training.measure_cost(args, table, cell)
    record = json.loads((tmp_path / "cells.json").read_text("utf-8"))["cells"][cell.key]
    assert (record["train_seconds"], record["steps"], record["peak_rss_mb"]) == (12.5, 338, 1700.0)
    assert record["cost_measured_by"].endswith("(its dev reproduced: 88.2330)")
    assert record["dev"] == 88.2330 and not folders[0].exists()  # the scratch folder: gone
    training.measure_cost(args, table, cell)  # measured: a second call trains nothing
    assert len(folders) == 1


def test_measure_cost_refuses_a_cell_whose_dev_differs(tmp_path: Path, monkeypatch) -> None:
    args, table, cell, _ = measuring(tmp_path, monkeypatch, 88.2330, 88.2350)
    with pytest.raises(search.common.BenchmarkError) as error:
        training.measure_cost(args, table, cell)
    assert f"cell {cell.key!r} trained again for its cost scores dev 88.2350, not its " in str(
        error.value
    )
    record = json.loads((tmp_path / "cells.json").read_text("utf-8"))["cells"][cell.key]
    assert "steps" not in record and "cost_measured_by" not in record


def test_rows_of_a_teacher_recorded_without_its_id_get_a_table_of_their_own() -> None:
    def record(teacher: str | None, **extra: object) -> dict:
        settings = {"teacher_model": teacher} if teacher else {}
        variant = f"ours-a [teacher_model={teacher}]" if teacher else "ours-a"
        return {"method": "ours-a", "variant": variant, "settings": settings, "epochs": 1.0,
                "learning_rate": 4e-5, "seed": 0, "dev": 88.0, **extra}  # fmt: skip

    now, gone = "ours-a [teacher_model=now]", "ours-a [teacher_model=gone]"
    cells = {
        "ours-a | epochs 1 | lr 4e-05 | seed 0": record(None),
        f"{now} | epochs 1 | lr 4e-05 | seed 0": record("now", teacher_id="3be2"),
        f"{gone} | epochs 1 | lr 4e-05 | seed 0": record("gone"),
    }
    recipes = report.recipe_rows(cells)
    assert recipes[f"{now} | epochs 1 | lr 4e-05"]["settings"] == {"teacher_model": "now"}
    known, unidentified = report.split_unidentified(recipes)
    assert sorted(known) == [f"{now} | epochs 1 | lr 4e-05", "ours-a | epochs 1 | lr 4e-05"]
    assert sorted(unidentified) == [f"{gone} | epochs 1 | lr 4e-05"]


RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def test_the_committed_table_is_sts_searchs_choice_over_the_stored_cells(
    tmp_path: Path, monkeypatch
) -> None:
    """The report selects through ``sts_core.search.select``: over the 120 stored cells its
    picks are each variant's dev argmax at seed 0 written out here, and rendering the stored
    cells again gives the committed report line for line (its machine line from the
    committed JSON, the teachers' cost as the report states it: 888 s and 1,307.4 s, one used
    as released)."""
    stored = json.loads((RESULTS / "quality_search_cells.json").read_text())["cells"]
    recipes = report.recipe_rows(stored)
    by_hand: dict[str, tuple[float, str]] = {}
    for key, row in recipes.items():  # first met wins a tie, as the grid's order
        dev = row["dev"].get(0)
        if dev is not None and (row["variant"] not in by_hand or dev > by_hand[row["variant"]][0]):
            by_hand[row["variant"]] = (dev, key)
    picks = report.selected_recipes(recipes, [0])
    assert {variant: report.recipe_key_of(row) for variant, row in picks.items()} == {
        variant: key for variant, (_, key) in by_hand.items()
    }
    assert len(picks) == 31
    for name, seconds in (("mpnet-sts-teacher", 888.0), ("mpnet-sts-cross-encoder", 1307.4)):
        teacher = tmp_path / name
        teacher.mkdir()
        (teacher / report.TEACHER_COST_FILE).write_text(json.dumps({"train_seconds": seconds}))
    (tmp_path / "all-mpnet-base-v2").mkdir()
    (tmp_path / "all-mpnet-base-v2" / "config.json").write_text("{}")
    monkeypatch.setenv("STS_MODELS_DIR", str(tmp_path))
    args = search.parse_args(["--render", "--cells", str(RESULTS / "quality_search_cells.json")])
    machine = json.loads((RESULTS / "quality_search.json").read_text())["machine"]
    rendered = report.report_markdown(stored, args, machine)
    assert rendered == (RESULTS / "quality_search.md").read_text().rstrip("\n")
