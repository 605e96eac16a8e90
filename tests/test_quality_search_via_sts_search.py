"""The quality search as a caller of ``sts-search`` (``grid_search/via_search.py``), without
training: which rows ``sts-search`` trains, the inputs it is given, how its cells become
the cells file's records, and that a method whose stored cells are complete starts no
search. The training itself: ``test_benchmarks_smoke.py``'s quality-search tests."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from benchmark_support import load_benchmark_module, load_benchmark_script

search = load_benchmark_script("quality_search")  # the command line
via = load_benchmark_module("grid_search.via_search")
training = load_benchmark_module("grid_search.search")

TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")


def arguments(tmp_path: Path, *extra: str) -> SimpleNamespace:
    argv = ["--output-dir", str(tmp_path), "--weights-dir", str(tmp_path / "w"), *extra]
    return search.parse_args(argv)


def test_sts_search_trains_every_row_ours_and_the_peers() -> None:
    assert via.searched_row("ours-pcc_pearson") == "pcctuning:pcc_pearson"
    assert via.searched_row("ours-cosine_mse") == "cosent:cosine_mse"
    assert via.searched_row("st-cosine") == "st:cosine"
    assert via.searched_row("st-angle") == "st:angle"
    assert via.searched_row("st-mse-distill") == "st:mse-distill"
    assert set(via.PEER_ROWS) == {m for m in search.SEARCH_METHODS if m.startswith("st-")}


def test_each_row_gets_the_settings_it_takes(tmp_path: Path, monkeypatch) -> None:
    """Ours every ``--set``; the peer's loss rows the teacher's keys; a distillation row
    ``teacher_model`` alone (``sts-search`` refuses the relabelling keys there)."""
    args = arguments(tmp_path)
    args.settings = (("teacher_model", "t"), ("teacher_neighbours", "1"), ("weight_decay", "0"))
    settings = {
        method: training.grid_cells(args, method, [0])[0][0].recipe.settings
        for method in ("ours-cosine_mse", "st-cosine", "st-embed-distill")
    }
    assert settings == {
        "ours-cosine_mse": args.settings,
        "st-cosine": (("teacher_model", "t"), ("teacher_neighbours", "1")),
        "st-embed-distill": (("teacher_model", "t"),),
    }


def test_the_selection_seed_comes_first_and_alone_for_the_grid_only(tmp_path: Path) -> None:
    args = arguments(tmp_path, "--seeds", "0", "1", "2", "--select-seeds", "1")
    assert via.ordered_seeds(args) == [1, 0, 2]
    assert via.ordered_seeds(arguments(tmp_path, "--seeds", "3", "4")) == [3, 4]
    assert via.ordered_seeds(arguments(tmp_path, "--seeds", "3", "4", "--grid-only")) == [3]
    several = arguments(tmp_path, "--seeds", "0", "1", "2", "--select-seeds", "2", "0")
    assert via.ordered_seeds(several) == [2, 0, 1]
    assert via.ordered_seeds(arguments(tmp_path, "--seeds", "0", "1", "2", "--select-seeds",
                                       "2", "0", "--grid-only")) == [2, 0]  # fmt: skip


def test_the_search_gets_the_benchmarks_inputs(tmp_path: Path, monkeypatch) -> None:
    models = tmp_path / "models"
    for name in ("teacher", "all-MiniLM-L6-v2"):
        (models / name).mkdir(parents=True)
        (models / name / "config.json").write_text("{}", "utf-8")
    monkeypatch.setenv("STS_MODELS_DIR", str(models))
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("STS_DATA_DIR", str(tmp_path / "data"))
    settings = (("teacher_model", "teacher"), ("teacher_weight", "0.5"))
    args = arguments(tmp_path, "--epochs", "1", "2", "--learning-rate", "4e-5", "--threads", "1")
    spec = via.search_spec(args, "ours-cosine_mse", settings)
    assert (spec.train, spec.dev, spec.test) == (["stsb", "sickr"], "stsb:dev", "sts-tasks")
    assert spec.methods == ["cosent:cosine_mse"] and spec.seeds == [0, 1, 2]
    assert spec.selection_seeds == [0]
    several = arguments(tmp_path, "--select-seeds", "2", "1")
    assert via.search_spec(several, "ours-cosine_mse", ()).selection_seeds == [2, 1]
    assert (spec.epochs, spec.learning_rates) == ([1.0, 2.0], [4e-5])
    assert (spec.batch_size, spec.max_steps, spec.threads, spec.jobs) == (16, -1, 1, 1)
    assert spec.score_range == [0.0, 5.0] and spec.eval_pairs is None
    assert spec.settings == {
        "filter_test_overlap": True,
        "weight_decay": 0.01,
        "warmup_steps": 0.1,
        "pooling": "mean",
        "teacher_model": str(models / "teacher"),
        "teacher_weight": 0.5,
    }
    assert spec.data_dir == str(tmp_path / "data")
    assert spec.model == str(models / "all-MiniLM-L6-v2")
    assert spec.output_dir.parent == tmp_path / "w" / "sts-search"
    assert spec.output_dir.name.startswith("ours-cosine_mse-")  # a folder per settings
    assert via.search_spec(args, "ours-cosine_mse", ()).output_dir.name == "ours-cosine_mse"
    smoke = search.parse_args(["--smoke", "--output-dir", str(tmp_path), "--grid-only"])
    small = via.search_spec(smoke, "st-cosine", ())
    assert small.settings["max_train_samples"] == 64 and small.eval_pairs == 40
    assert small.max_steps == 2 and small.test is None and small.seeds == [0]
    assert small.jobs == 2  # the smoke mode's cells two at a time
    three = search.parse_args(["--smoke", "--output-dir", str(tmp_path), "--jobs", "3"])
    assert via.search_spec(three, "st-cosine", ()).jobs == 3
    here = search.parse_args(["--smoke", "--output-dir", str(tmp_path), "--in-process", "--soup"])
    alone = via.search_spec(here, "st-cosine", ())
    assert (alone.jobs, alone.in_process, alone.soup) == (1, True, True)  # one at a time
    assert spec.soup is False and spec.in_process is False


def sts_search_cell(tmp_path: Path, seed: int, dev: float | None, tested: bool) -> dict:
    folder = tmp_path / "w" / "sts-search" / "st-cosine" / "cells" / f"c{seed}"
    (folder / "model").mkdir(parents=True)
    data = {"train_pairs": 5398, "teacher": {"neighbour_pairs": 7}} if seed else {}
    (folder / "model" / "metrics.json").write_text(json.dumps({"data": data}), "utf-8")
    found = {
        "epochs": 2.0, "learning_rate": 4e-5, "seed": seed, "dev": dev, "steps": 676,
        "train_seconds": 812.25, "seconds": 850.0, "peak_rss_mib": 1790.5, "folder": str(folder),
    }  # fmt: skip
    if tested:
        metrics = {f"test_{task}_spearman": 70.0 + i for i, task in enumerate(TASKS)}
        metrics |= {"test_spearman": 73.0, "test_spearman_wmean": 74.5, "test_sts12_pearson": 1}
        found["test_metrics"] = metrics
    return found


def test_an_sts_search_cell_becomes_a_record_of_the_cells_file(tmp_path: Path) -> None:
    args = arguments(tmp_path)
    key, record = via.stored_record(
        args, "st-cosine", (), sts_search_cell(tmp_path, 1, 88.123456, True)
    )
    assert key == "st-cosine | epochs 2 | lr 4e-05 | seed 1"
    assert record == {
        "method": "st-cosine",
        "variant": "st-cosine",
        "settings": {},
        "epochs": 2.0,
        "learning_rate": 4e-5,
        "seed": 1,
        "train_seconds": 812.25,
        "steps": 676,
        "peak_rss_mb": 1790.5,
        "dev": 88.1235,
        "search_cell": "sts-search/st-cosine/cells/c1",
        "teacher": {"neighbour_pairs": 7},
        "test": {**{t: 70.0 + i for i, t in enumerate(TASKS)}, "avg": 73.0, "avg_wmean": 74.5},
    }
    _, diverged = via.stored_record(
        args, "st-cosine", (), {**sts_search_cell(tmp_path, 0, None, False), "error": "nan"}
    )
    assert diverged["dev"] is None and diverged["error"] == "nan"
    assert "test" not in diverged and "teacher" not in diverged


def test_an_sts_search_soup_becomes_a_record_of_the_cells_file(tmp_path: Path) -> None:
    args = arguments(tmp_path)
    folder = tmp_path / "w" / "sts-search" / "st-cosine" / "soups" / "r1"
    metrics = {f"test_{task}_spearman": 70.0 + i for i, task in enumerate(TASKS)}
    metrics |= {"test_spearman": 73.0, "test_spearman_wmean": 74.5}
    soup = {"recipe": "st:cosine | epochs 2 | lr 4e-05", "seeds": [1, 2], "dev": 88.123456,
            "folder": str(folder), "test_metrics": metrics}  # fmt: skip
    key, record = via.soup_record(args, "st-cosine", (), soup, (2.0, 4e-5))
    assert key == "soup of 2 seeds | st-cosine | epochs 2 | lr 4e-05"
    assert record == {
        "method": "st-cosine",
        "variant": "st-cosine",
        "settings": {},
        "epochs": 2.0,
        "learning_rate": 4e-5,
        "seed": 1,
        "soup_of": [1, 2],
        "dev": 88.1235,
        "search_cell": "sts-search/st-cosine/soups/r1",
        "test": {**{t: 70.0 + i for i, t in enumerate(TASKS)}, "avg": 73.0, "avg_wmean": 74.5},
    }


def test_a_method_whose_cells_are_stored_starts_no_search(tmp_path: Path, monkeypatch) -> None:
    args = arguments(tmp_path, "--epochs", "1", "2", "--learning-rate", "4e-5", "--soup")
    args.methods = ["st-cosine"]
    started = []
    monkeypatch.setattr(training, "run_method", lambda *a: started.append(a))
    store = {}
    for epochs, dev in ((1.0, 88.0), (2.0, 88.5)):
        for seed in (0, 1, 2):
            key = f"st-cosine | epochs {epochs:g} | lr 4e-05 | seed {seed}"
            store[key] = {"method": "st-cosine", "settings": {}, "search_cell": f"c{seed}"}
            store[key]["dev"] = dev if seed == 0 else 1.0  # only seed 0 chooses
            if epochs == 2.0:
                store[key]["test"] = {"avg": 80.0 + seed}
    store["soup of 3 seeds | st-cosine | epochs 2 | lr 4e-05"] = {"dev": 88.6, "test": {}}
    cells = Path(args.cells)
    cells.write_text(json.dumps({"cells": store}), "utf-8")
    selections = training.run_search(args)
    assert started == [] and selections[0]["recipe"] == "st-cosine | epochs 2 | lr 4e-05"
    assert [t["avg"] for t in selections[0]["tests"]] == [80.0, 81.0, 82.0]
    del store["st-cosine | epochs 2 | lr 4e-05 | seed 2"]["test"]  # a pick's run untested
    cells.write_text(json.dumps({"cells": store}), "utf-8")
    with pytest.raises(search.common.BenchmarkError, match="has no test score"):
        training.run_search(args)  # the search started: nothing (made up) came back
    assert len(started) == 1 and started[0][1:3] == ("st-cosine", ())


def test_the_cells_finished_are_kept_when_the_search_stops(tmp_path: Path, monkeypatch) -> None:
    """A search stopped part way (Ctrl-C here) leaves its finished cells in the cells file:
    they are read from its folder, the unfinished one is not."""
    from sts_core.search.cells import CELL_FILE, RESULT_FILE, TEST_FILE, Recipe
    from sts_core.search.cells import Cell as SearchCell

    args = arguments(tmp_path, "--epochs", "1", "2", "--learning-rate", "4e-5")
    folder = via.search_folder(args, "st-cosine", ()) / "cells"
    for epochs, done in ((1.0, True), (2.0, False)):
        cell = SearchCell(Recipe("st:cosine", (), epochs, 4e-5), 0, "sentence-transformers")
        (folder / cell.folder_name / "model").mkdir(parents=True)
        (folder / cell.folder_name / CELL_FILE).write_text(json.dumps(cell.describe()))
        if done:
            result = {"dev": 88.0, "train_seconds": 9.0, "steps": 338, "peak_rss_mib": 99.0}
            (folder / cell.folder_name / RESULT_FILE).write_text(json.dumps(result))
            metrics = {f"test_{task}_spearman": 1.0 for task in TASKS}
            metrics |= {"test_spearman": 1.0, "test_spearman_wmean": 2.0}
            scored = {"fingerprint": {"reference": "sts-tasks"}, "score": 1.0}
            (folder / cell.folder_name / TEST_FILE).write_text(
                json.dumps({**scored, "metrics": metrics})
            )

    def stopped(spec, log):
        raise KeyboardInterrupt

    monkeypatch.setattr("sts_core.search.command.run_search", stopped)
    monkeypatch.setattr(via, "search_spec", lambda *a: _spec(args, folder.parent))
    kept = []
    with pytest.raises(KeyboardInterrupt):
        via.run_method(args, "st-cosine", (), lambda key, record: kept.append((key, record)))
    assert [key for key, _ in kept] == ["st-cosine | epochs 1 | lr 4e-05 | seed 0"]
    assert kept[0][1]["dev"] == 88.0 and kept[0][1]["test"]["avg_wmean"] == 2.0


def _spec(args: SimpleNamespace, folder: Path, inputs: dict | None = None) -> SimpleNamespace:
    """A search spec of ``folder``, its inputs' identities ``inputs`` (None: not compared)."""
    return SimpleNamespace(
        output_dir=folder,
        test="sts-tasks",
        methods=["st:cosine"],
        input_identities=lambda: inputs,
    )


def test_a_cell_trained_on_other_inputs_is_not_kept(tmp_path: Path, monkeypatch) -> None:
    """A search stopped before it trained again the cells of an older content of its model
    (or a table) leaves them in its folder: they are not copied into the cells file."""
    from sts_core.search.cells import CELL_FILE, RESULT_FILE, Recipe
    from sts_core.search.cells import Cell as SearchCell

    args = arguments(tmp_path, "--epochs", "1", "2", "--learning-rate", "4e-5", "--grid-only")
    folder = via.search_folder(args, "st-cosine", ()) / "cells"
    for epochs, model in ((1.0, "now"), (2.0, "before")):
        cell = SearchCell(Recipe("st:cosine", (), epochs, 4e-5), 0, "sentence-transformers")
        (folder / cell.folder_name).mkdir(parents=True)
        described = {**cell.describe(), "scoring": {"inputs": {"--model m": model}}}
        (folder / cell.folder_name / CELL_FILE).write_text(json.dumps(described))
        result = {"dev": 88.0, "train_seconds": 9.0, "steps": 338, "peak_rss_mib": 99.0}
        (folder / cell.folder_name / RESULT_FILE).write_text(json.dumps(result))
    spec = _spec(args, folder.parent, {"--model m": "now"})
    assert [r["epochs"] for r in via.finished_cells(spec)] == [1.0]


def test_what_the_benchmark_writes_after_sts_search_is_its_own(tmp_path: Path, monkeypatch) -> None:
    """``sts-search`` runs in the benchmark's process and names itself the writer of what
    it writes; the cells file and the report written after it are the benchmark's again
    (a later run replaces them without a flag)."""
    from sts_core.command_files import read_ledger, set_command, write_text

    def searched(spec, log):
        set_command("sts-search")
        return {"failures": []}

    args = arguments(tmp_path)
    monkeypatch.setattr("sts_core.search.command.run_search", searched)
    monkeypatch.setattr(via, "search_spec", lambda *a: _spec(args, tmp_path / "search"))
    via.run_method(args, "st-cosine", (), lambda *a: None)
    write_text(tmp_path / "report.md", "# after the search\n")
    assert read_ledger(tmp_path)["report.md"]["command"] == "quality_search.py"


@pytest.mark.parametrize("flag", ["--jobs", "--threads"])
def test_a_count_below_one_is_refused_before_anything_loads(flag: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        search.parse_args(["--smoke", flag, "0"])
    assert stop.value.code == 2
    assert f"argument {flag}: must be an integer of at least 1, got 0" in capsys.readouterr().err


def test_a_setting_sts_search_refuses_stops_with_one_line(tmp_path: Path, monkeypatch) -> None:
    from sts_core.search.spec import SearchError

    def refused(*_):
        raise SearchError("--devices 0 needs a GPU")

    monkeypatch.setattr(via, "search_spec", refused)
    with pytest.raises(search.common.BenchmarkError, match="sts-search for st-cosine: --devices"):
        via.run_method(arguments(tmp_path), "st-cosine", (), lambda *a: None)
