"""sts-search's options, its folder's identity, its grid and its slots (no training)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from sts_core.search.cells import Cell, Recipe, done_record, settings_of
from sts_core.search.command import grid_values, main, parse_settings
from sts_core.search.schedule import Scheduler, Slot, score_tests, slots
from sts_core.search.spec import (
    SearchError,
    SearchSpec,
    check_folder,
    fingerprint,
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
        ({"task": "regression"}, "--task 'regression' is not one of sts, classification, ranking"),
        ({"metric": "accuracy"}, "--metric 'accuracy' is not a sts metric"),
        (
            {"task": "ranking", "metric": "spearman"},
            "--metric 'spearman' is not a ranking metric (map, mrr, p@1, ndcg@10, has_positive@5)",
        ),
        ({"epochs": [1, 0]}, "--epochs needs positive values"),
        ({"learning_rates": []}, "--learning-rate needs positive values"),
        ({"seeds": [0, 0]}, "--seeds names a value twice"),
        ({"seeds": []}, "--seeds needs at least one seed"),
        ({"learning_rates": [2e-5, 2.0e-5]}, "--learning-rate names a value twice"),
        ({"epochs": [1, 1.0000001]}, "--epochs names a value twice"),
        ({"methods": ["core", "core"]}, "--methods names a value twice"),
        ({"grid": {"pooling": ["cls", "cls"]}}, "--grid pooling names a value twice"),
        ({"jobs": 3, "devices": ["0", "1"]}, "--jobs 3 needs as many --devices"),
        ({"settings": {"seed": 3}}, "--set / --grid may not name seed"),
        ({"select_seeds": 0}, "--select-seeds 0: the grid is trained and chosen on the first N"),
        ({"seeds": [0, 1], "select_seeds": 3}, "--select-seeds 3: the grid is trained and chosen"),
        (
            {"soup": True, "seeds": [0]},
            "--soup averages each pick's models over its seeds: give two or more --seeds, got [0]",
        ),
        # --batch-size's key: a --set of it would silently override --batch-size
        (
            {"settings": {"per_device_train_batch_size": 8}},
            "--set / --grid may not name per_device_train_batch_size",
        ),
        (
            {"grid": {"per_device_train_batch_size": [8, 32]}},
            "--set / --grid may not name per_device_train_batch_size",
        ),
        (
            {"settings": {"seed": 3}, "grid": {"learning_rate": [1, 2]}},
            "--set / --grid may not name learning_rate, seed: the search sets them (--model, "
            "--train, --dev, --epochs, --learning-rate, --seeds, --max-steps, --batch-size)",
        ),
        (
            {"settings": {"pooling": "cls", "k": 1}, "grid": {"pooling": ["mean"], "k": [2]}},
            "k, pooling: given both to --set and --grid",
        ),
        ({"score_range": [5, 0]}, "--score-range needs LOW < HIGH"),
        ({"score_range": [5, 5]}, "--score-range needs LOW < HIGH"),
        ({"jobs": 0}, "--jobs needs a positive number"),
        (
            {"in_process": True, "jobs": 2},
            "--in-process trains one cell at a time in the search's own process: it takes "
            "neither --jobs above 1 nor --devices",
        ),
        ({"in_process": True, "devices": ["0"]}, "--in-process trains one cell at a time"),
        ({"retrain": "all"}, "--retrain is picks or best"),
        ({"worker_start": "spawn"}, "--worker-start is preloaded or fresh, got 'spawn'"),
        ({"batch_size": 0}, "--batch-size needs a positive number"),
        ({"threads": 0}, "--threads needs a positive number"),
        ({"eval_pairs": 0}, "--eval-pairs needs a positive number"),
        (
            {"eval_pairs": 10, "task": "ranking"},
            "--eval-pairs keeps every k-th pair, which would split a ranking set's queries: "
            "it is for --task sts and classification",
        ),
        (
            {"dev": "sts-tasks"},
            "--dev sts-tasks: the seven STS tasks are test sets, never chosen on; give a dev "
            "table (e.g. stsb:dev) and --test sts-tasks",
        ),
        (
            {"test": "sts-tasks", "task": "ranking"},
            "--test sts-tasks scores the seven STS tasks: it needs --task sts, not ranking",
        ),
    ],
)
def test_each_bad_option_is_refused_with_its_name(tmp_path: Path, changes, message) -> None:
    with pytest.raises(SearchError) as refused:
        spec(tmp_path, **changes)
    assert str(refused.value).startswith(message)
    if message.endswith(")"):  # the whole message
        assert str(refused.value) == message


def test_the_default_metric_follows_the_task(tmp_path: Path) -> None:
    assert spec(tmp_path).metric == "spearman"
    assert spec(tmp_path, task="classification").metric == "accuracy"
    assert spec(tmp_path, task="ranking").metric == "map"


def test_the_seven_sts_tasks_are_a_test_of_the_sts_task(tmp_path: Path) -> None:
    assert spec(tmp_path, test="sts-tasks", metric="pearson").test == "sts-tasks"
    assert spec(tmp_path, test="sts-tasks").metric == "spearman"


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
    assert cells[-1].training == {"loss": "x", "warmup_steps": 0.1, "pooling": "cls"}
    assert len({c.folder_name for c in cells}) == len(cells)
    again = seed_cells(cells[-1], [8])
    assert again[0].recipe_key == cells[-1].recipe_key and again[0].seed == 8


def test_a_cell_recipe_puts_the_cell_over_the_fixed_settings(tmp_path: Path) -> None:
    cell = Cell(Recipe("a", (), 2.0, 3e-5), 4, "a", {"logging_steps": 5})
    recipe = cell.train_recipe({"model_name_or_path": "m", "train_datasets": ["t"]}, tmp_path)
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
    # another dev table: its path differs
    (tmp_path / "dev2.csv").write_text("sentence1,sentence2,score\na b,c d,2\n", encoding="utf-8")
    with pytest.raises(SearchError, match="differs in dev"):
        check_folder(spec(tmp_path, dev=str(tmp_path / "dev2.csv")))
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(SearchError, match=r"is not empty \(notes.txt\) and holds no search.json"):
        check_folder(spec(tmp_path, output_dir=other))
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    "changes",
    [
        {"model": "another"},
        {"columns": {"score": "sim"}},
        {"eval_columns": {"score": "sim"}},
        {"settings": {"pooling": "cls"}},
        {"batch_size": 32},
        {"max_steps": 10},
        {"score_range": [0, 5]},
        {"data_dir": "elsewhere"},
        {"metric": "pearson"},
        {"eval_pairs": 40},
    ],
    ids=lambda changes: next(iter(changes)),
)
def test_each_part_of_the_identity_refuses_a_changed_search(tmp_path: Path, changes) -> None:
    record_identity(spec(tmp_path))
    with pytest.raises(SearchError, match="holds another search's cells"):
        check_folder(spec(tmp_path, **changes))


def test_the_training_table_is_known_by_its_path_and_each_cell_by_its_content(
    tmp_path: Path, monkeypatch
) -> None:
    """Issue 61: a table changed at the same path refused the whole folder; now the folder
    resumes and each cell trained on the old content is trained again."""
    record_identity(spec(tmp_path))
    monkeypatch.chdir(tmp_path)
    check_folder(spec(tmp_path, train=["train.csv"]))  # the same file, written relatively
    before = spec(tmp_path).input_identities()
    cell = Cell(Recipe("a", (), 1.0, 1e-5), 0, "a")
    (tmp_path / "cell.json").write_text(
        json.dumps({**cell.describe(), "scoring": {"inputs": before}}), encoding="utf-8"
    )
    (tmp_path / "result.json").write_text('{"dev": 80.0}', encoding="utf-8")
    assert done_record(tmp_path, cell, inputs=before)["dev"] == 80.0
    (tmp_path / "train.csv").write_text("sentence1,sentence2,score\nx,y,3\n", encoding="utf-8")
    check_folder(spec(tmp_path))  # the same search
    after = spec(tmp_path).input_identities()
    assert [key for key in after if after[key] != before[key]] == [
        f"--train {tmp_path / 'train.csv'}"
    ]
    assert done_record(tmp_path, cell, inputs=after) is None  # trained again
    assert done_record(tmp_path, cell) is not None  # (finished, on the old content)
    folder = tmp_path / "saved"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "data.arrow").write_bytes(b"1")
    first = fingerprint(str(folder))
    (folder / "sub" / "data.arrow").write_bytes(b"2")
    assert fingerprint(str(folder)) != first  # a save_to_disk folder: its files' content
    assert fingerprint("stsb:train") == {"reference": "stsb:train"}


def test_a_cell_naming_a_teacher_records_its_content_and_is_trained_again_when_it_changes(
    tmp_path: Path,
) -> None:
    """A teacher folder retrained under the same name (``--set`` or ``--grid``
    teacher_model) trains again the cells whose recipe names it, and only those."""
    from sts_core.search.schedule import prepare

    teacher = tmp_path / "teacher"
    teacher.mkdir()
    (teacher / "model.safetensors").write_bytes(b"1")
    search = spec(tmp_path, grid={"teacher_model": [str(teacher), ""]})
    before = search.input_identities()
    assert search.teachers() == [str(teacher)]
    cells = {
        name: Cell(
            Recipe("core", settings_of({"teacher_model": name})), 0, "core", {"teacher_model": name}
        )
        for name in (str(teacher), "")
    }
    for name, cell in cells.items():
        folder = tmp_path / "cells" / cell.folder_name
        prepare(folder, cell, {}, {"inputs": before})
        (folder / "result.json").write_text('{"dev": 80.0}', encoding="utf-8")
        recorded = json.loads((folder / "cell.json").read_text("utf-8"))["scoring"]["inputs"]
        assert (f"teacher_model {teacher}" in recorded) == bool(name)
        assert done_record(folder, cell, inputs=before) is not None
    (teacher / "model.safetensors").write_bytes(b"2")
    after = spec(tmp_path, grid={"teacher_model": [str(teacher), ""]}).input_identities()
    for name, cell in cells.items():
        found = done_record(tmp_path / "cells" / cell.folder_name, cell, inputs=after)
        assert (found is None) == bool(name)  # the teacher's cell trained again, the other kept
    with_set = spec(tmp_path, settings={"teacher_model": str(teacher)}).input_identities()
    assert with_set[f"teacher_model {teacher}"] == after[f"teacher_model {teacher}"]


def test_a_search_json_of_an_older_search_with_content_hashes_resumes(tmp_path: Path) -> None:
    search = spec(tmp_path)
    record_identity(search)
    path = search.output_dir / "search.json"
    recorded = json.loads(path.read_text(encoding="utf-8"))
    recorded["train"][0]["sha256"] = "0" * 64  # as sts-search wrote it before issue 61
    recorded["dev"]["sha256"] = "1" * 64
    path.write_text(json.dumps(recorded), encoding="utf-8")
    check_folder(search)


def test_a_damaged_identity_file_is_one_line(tmp_path: Path) -> None:
    search = spec(tmp_path)
    search.output_dir.mkdir()
    (search.output_dir / "search.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(SearchError, match="is not a search's identity"):
        check_folder(search)
    (search.output_dir / "search.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(SearchError, match="not a mapping"):
        check_folder(search)


def test_a_test_score_counts_only_for_the_table_it_was_made_on(tmp_path: Path) -> None:
    cell = Cell(Recipe("a", (), 1.0, 1e-5), 0, "a")
    (tmp_path / "cell.json").write_text(json.dumps({"key": cell.key}), encoding="utf-8")
    (tmp_path / "result.json").write_text(json.dumps({"dev": 70.0}), encoding="utf-8")
    test = {"reference": "/t.csv", "sha256": "1"}
    scored = {"table": "/t.csv", "fingerprint": test, "score": 60.0, "metrics": {}}
    (tmp_path / "test.json").write_text(json.dumps(scored), encoding="utf-8")
    assert done_record(tmp_path, cell, test)["test"] == 60.0
    assert "test" not in done_record(tmp_path, cell, {**test, "sha256": "2"})
    assert "test" not in done_record(tmp_path, cell, None)


def test_a_failing_work_item_stops_the_rest_and_is_recorded(tmp_path: Path) -> None:
    ran = []

    def broken(slot: Slot) -> None:
        raise KeyError("boom")

    scheduler = Scheduler([Slot(1)])
    scheduler.run([("a", broken), ("b", lambda slot: ran.append("b"))])
    assert scheduler.failures == ["a: KeyError: 'boom'"]
    assert ran == [] and scheduler.skipped == ["b (after a failure)"]


def test_only_unscored_models_are_scored_on_the_test_table(tmp_path: Path) -> None:
    folders = {}
    for name in ("scored", "fresh", "diverged"):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        content = {"key": name, "scoring": {"test": None}}
        (folders[name] / "cell.json").write_text(json.dumps(content), encoding="utf-8")
    records = [
        {"key": "scored", "folder": str(folders["scored"]), "dev": 1.0, "test": 2.0},
        {"key": "fresh", "folder": str(folders["fresh"]), "dev": 1.0},
        {"key": "diverged", "folder": str(folders["diverged"]), "dev": None},
    ]
    (folders["fresh"] / "test.json").write_text("{}", encoding="utf-8")  # another table's

    class Recorder:
        def run(self, items):
            self.names = [name for name, _ in items]

    recorder = Recorder()
    score_tests(recorder, records, "t.csv")
    assert recorder.names == ["fresh"]
    assert not (folders["fresh"] / "test.json").exists()  # the earlier table's score went
    described = json.loads((folders["fresh"] / "cell.json").read_text(encoding="utf-8"))
    assert described["scoring"]["test"] == "t.csv"


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
    cell = Cell(Recipe("a", (), 1.0, 1e-5), 0, "a")
    (tmp_path / "cell.json").write_text(json.dumps({"key": "something else"}), encoding="utf-8")
    with pytest.raises(ValueError, match="describes 'something else'"):
        done_record(tmp_path, cell)


def test_cpu_slots_split_the_threads_and_gpu_slots_take_a_device_each() -> None:
    assert slots(2, [], cpus=8) == [Slot(4), Slot(4)]
    assert slots(2, [], cpus=8, threads=1) == [Slot(1), Slot(1)]  # --threads: as asked
    assert slots(1, [], cpus=8, threads=3) == [Slot(3)]
    assert slots(3, [], cpus=2) == [Slot(1)] * 3
    assert slots(2, ["0", "1", "2"], cpus=8) == [Slot(4, "0"), Slot(4, "1")]
    assert Slot(4, "1").environment()["CUDA_VISIBLE_DEVICES"] == "1"
    assert Slot(3).environment()["OMP_NUM_THREADS"] == "3"
    assert slots(1, [], cpus=8, in_process=True) == [Slot(8, in_process=True)]


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


def test_the_scorer_of_each_task_reads_the_table_and_takes_thresholds_from_dev(
    tmp_path: Path,
) -> None:
    from sts_core.evaluation import PairEvaluator
    from sts_core.evaluation.pair_tasks import PairClassificationEvaluator, RankingEvaluator
    from sts_core.search.worker import table_evaluator

    def table(name: str, labels: list[int]) -> str:
        lines = ["query_id,sentence1,sentence2,label"]
        lines += [f"q{i // 2},a {i},b {i},{y}" for i, y in enumerate(labels)]
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        return str(tmp_path / name)

    dev, test = table("dev.csv", [1, 0, 0, 1]), table("test.csv", [0, 1, 1, 0, 1, 0])
    scoring = {"task": "classification", "dev": dev}
    on_dev = table_evaluator(scoring, dev, "dev", "dev")
    on_test = table_evaluator(scoring, test, "test", "test")
    assert isinstance(on_test, PairClassificationEvaluator)
    assert on_dev.name == "dev_oracle" and on_dev.threshold_labels is None
    assert on_test.name == "test" and list(on_test.threshold_labels) == [1, 0, 0, 1]
    ranking = table_evaluator({"task": "ranking", "dev": dev}, test, "test", "test")
    assert isinstance(ranking, RankingEvaluator) and ranking.query_ids == [0, 0, 1, 1, 2, 2]
    scored = tmp_path / "scored.csv"
    scored.write_text("sentence1,sentence2,score\na,b,1\nc,d,4\ne,f,2\n", encoding="utf-8")
    sts = table_evaluator({"task": "sts", "dev": str(scored)}, str(scored), "dev", "dev")
    assert isinstance(sts, PairEvaluator) and list(sts.gold) == [1.0, 4.0, 2.0]


def test_found_by_mutation_edges_of_the_options_and_the_identity(tmp_path: Path) -> None:
    # at the edges: as many jobs as devices, retrain best, a batch of one
    assert spec(tmp_path, jobs=2, devices=["0", "1"]).jobs == 2
    assert spec(tmp_path, retrain="best").retrain == "best"
    assert spec(tmp_path, batch_size=1).batch_size == 1
    search = spec(
        tmp_path,
        columns={"score": "sim"},
        eval_columns={"score": "s"},
        score_range=[0, 5],
        settings={"pooling": "cls"},
        batch_size=8,
        max_steps=3,
        data_dir="d",
    )
    assert search.identity() == {
        "model": "m",
        "train": [{"reference": str((tmp_path / "train.csv").resolve())}],
        "dev": {"reference": str((tmp_path / "dev.csv").resolve())},
        "task": "sts",
        "metric": "spearman",
        "columns": {"score": "sim"},
        "eval_columns": {"score": "s"},
        "score_range": [0, 5],
        "settings": {"pooling": "cls"},
        "batch_size": 8,
        "max_steps": 3,
        "data_dir": "d",
    }
    folder = tmp_path / "saved"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "x.arrow").write_bytes(b"xyz")
    by_hand = hashlib.sha256()
    by_hand.update(b"a/x.arrow")
    by_hand.update(hashlib.sha256(b"xyz").hexdigest().encode("ascii"))
    assert fingerprint(str(folder)) == {
        "reference": str(folder.resolve()),
        "sha256": by_hand.hexdigest(),
    }


def test_found_by_mutation_the_folder_its_identity_file_and_its_lock(tmp_path: Path) -> None:
    nested = spec(tmp_path, output_dir=tmp_path / "a" / "b" / "c")
    lock = folder_lock(nested)  # makes the folders above it
    assert (nested.output_dir / "search.lock").exists()
    record_identity(nested)  # into the folder the lock made
    text = (nested.output_dir / "search.json").read_text(encoding="utf-8")
    assert text == json.dumps(nested.identity(), indent=2)  # readable: one key a line
    start = time.monotonic()
    with pytest.raises(SearchError, match="in use by another sts-search"):
        folder_lock(spec(tmp_path, output_dir=nested.output_dir))
    assert time.monotonic() - start < 0.5  # refused at once, not after a wait
    lock.release()
    record_identity(spec(tmp_path, output_dir=tmp_path / "x" / "y"))  # nested, no lock first
    # an identity file of an older format (a key this version does not write)
    older = spec(tmp_path)
    record_identity(older)
    path = older.output_dir / "search.json"
    path.write_text(json.dumps({**older.identity(), "old": 1}), encoding="utf-8")
    with pytest.raises(SearchError, match=r"differs in its keys\): name a new --output-dir$"):
        check_folder(older)
    other = tmp_path / "other"
    other.mkdir()
    (other / "x").write_text("x", encoding="utf-8")
    with pytest.raises(SearchError) as refused:
        check_folder(spec(tmp_path, output_dir=other))
    assert str(refused.value).endswith("a new or empty folder, or its own; nothing was written")


def test_found_by_mutation_cells_keep_their_method_and_settings() -> None:
    search = SearchSpec(train=["t"], dev="d", model="m", output_dir=Path("o"), methods=["b:row"])
    cells = grid_cells(search, {"b:row": ("b", {"loss": "x"})})
    assert cells[0].method_name == "b" and cells[0].training == {"loss": "x"}
    again = seed_cells(cells[0], [5])[0]
    assert (again.method_name, again.training, again.seed) == ("b", {"loss": "x"}, 5)


def test_every_cell_starts_from_the_model_the_data_the_batch_and_the_budget(
    tmp_path: Path,
) -> None:
    plain = spec(tmp_path)
    assert plain.base_recipe() == {
        "model_name_or_path": "m",
        "train_datasets": plain.train,
        "per_device_train_batch_size": 16,
        "max_steps": -1,
    }
    full = spec(tmp_path, columns={"score": "sim"}, data_dir="d", batch_size=4, max_steps=7)
    assert full.base_recipe() == {
        "model_name_or_path": "m",
        "train_datasets": full.train,
        "per_device_train_batch_size": 4,
        "max_steps": 7,
        "columns": {"score": "sim"},
        "data_dir": "d",
    }
    assert full.base_recipe()["train_datasets"] is not full.train  # a copy per cell


def test_the_scorer_reads_renamed_columns_and_selects_the_named_metric(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """``--eval-columns`` renames the dev table's columns; ``--metric pearson`` selects the
    Pearson of the saved model's cosine, computed here with numpy and scipy."""
    import numpy as np
    from scipy.stats import pearsonr

    from sts_core.encoder import SentenceEncoder
    from sts_core.search.worker import score_model, table_evaluator

    rows = [("a b c", "a b d", 4.0), ("c d e", "f g h", 1.0), ("a a b", "a b b", 3.0)]
    table = tmp_path / "dev.csv"
    lines = ["left,right,sim"] + [f"{a},{b},{s}" for a, b, s in rows]
    table.write_text("\n".join(lines) + "\n", encoding="utf-8")
    scoring = {
        "task": "sts",
        "eval_columns": {"sentence1": "left", "sentence2": "right", "score": "sim"},
    }
    evaluator = table_evaluator(scoring, str(table), "dev", "dev")
    assert list(evaluator.gold) == [4.0, 1.0, 3.0]
    score, metrics = score_model(tiny_bert_dir, evaluator, "pearson")
    encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir))
    u = encoder.encode([r[0] for r in rows], show_progress_bar=False)
    v = encoder.encode([r[1] for r in rows], show_progress_bar=False)
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    assert score == pytest.approx(100 * pearsonr(cosine, [4.0, 1.0, 3.0]).statistic, abs=1e-4)
    assert score == metrics["dev_pearson"] != metrics["dev_spearman"]


def test_an_identity_without_eval_pairs_is_the_one_folders_recorded_before_it(
    tmp_path: Path,
) -> None:
    assert "eval_pairs" not in spec(tmp_path).identity()  # a folder of an earlier version resumes
    assert spec(tmp_path, eval_pairs=40).identity()["eval_pairs"] == 40


def test_eval_pairs_scores_every_kth_pair_of_the_dev_and_test_tables(tmp_path: Path) -> None:
    from sts_core.evaluation.pair_tasks import PairClassificationEvaluator
    from sts_core.search.worker import table_evaluator

    scored = tmp_path / "scored.csv"
    rows = [f"a {i},b {i},{i}" for i in range(10)]
    scored.write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n", encoding="utf-8")
    scoring = {"task": "sts", "dev": str(scored), "eval_pairs": 4}
    sts = table_evaluator(scoring, str(scored), "dev", "dev")
    assert list(sts.gold) == [0.0, 3.0, 6.0, 9.0]  # k = ceil(10 / 4) = 3, from the first
    scoring["eval_pairs"] = 5
    assert list(table_evaluator(scoring, str(scored), "dev", "dev").gold) == [0, 2, 4, 6, 8]
    scoring["eval_pairs"] = 10  # not below n: every pair
    assert len(table_evaluator(scoring, str(scored), "dev", "dev").gold) == 10
    labelled = tmp_path / "labelled.csv"
    rows = [f"a {i},b {i},{i // 2 % 2}" for i in range(6)]  # 0 0 1 1 0 0
    labelled.write_text("sentence1,sentence2,label\n" + "\n".join(rows) + "\n", "utf-8")
    scoring = {"task": "classification", "dev": str(labelled), "eval_pairs": 3}
    test = table_evaluator(scoring, str(labelled), "test", "test")
    assert isinstance(test, PairClassificationEvaluator)
    assert list(test.labels) == [0, 1, 0] and list(test.threshold_labels) == [0, 1, 0]


def test_eval_pairs_caps_each_of_the_seven_tasks(monkeypatch) -> None:
    """``--test sts-tasks --eval-pairs N``: each task's pairs every k-th, as the benchmark's
    smoke mode scores them (the same tables otherwise)."""
    import datasets

    from sts_core.names import STS_TASKS
    from sts_core.search import worker

    def pairs(task, protocol, variant, data_dir):
        assert (protocol, variant) == ("senteval", "senteval")
        rows = range(STS_TASKS.index(task) + 5)
        return datasets.Dataset.from_dict(
            {"sentence1": [f"{task} a{i}" for i in rows], "sentence2": [f"b{i}" for i in rows],
             "score": [float(i) for i in rows]}
        )  # fmt: skip

    monkeypatch.setattr("sts_core.evaluation.sts.load_task_pairs", pairs)
    capped = worker.SevenTasksEvaluator("data", "test", eval_pairs=3)
    for index, task in enumerate(STS_TASKS):
        n = index + 5
        expected = [float(i) for i in range(0, n, -(-n // 3))]
        assert list(capped.evaluator.data[task]["score"]) == expected


def test_the_command_line_passes_threads_and_eval_pairs_to_the_search(tmp_path: Path) -> None:
    from sts_core.search.command import make_parser, spec_from_arguments

    search = spec(tmp_path)
    argv = ["--train", *search.train, "--dev", search.dev, "--model", "m"]
    argv += ["--output-dir", str(tmp_path / "out")]
    plain = spec_from_arguments(make_parser().parse_args(argv))
    assert plain.threads is None and plain.eval_pairs is None
    given = spec_from_arguments(
        make_parser().parse_args([*argv, "--threads", "1", "--eval-pairs", "40"])
    )
    assert given.threads == 1 and given.eval_pairs == 40


def test_a_bad_set_key_names_the_users_settings_not_a_scratch_recipe(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """The refusal named the search's temporary recipe.yaml (the probe's case 44)."""
    from sts_core.search.command import run_search

    table = tmp_path / "pairs.csv"
    table.write_text(
        "sentence1,sentence2,score\n" + "".join(f"a {i},b {i},{i % 5}\n" for i in range(8)),
        encoding="utf-8",
    )
    search = spec(
        tmp_path, model=str(tiny_bert_dir), methods=["core"], train=[str(table)],
        dev=str(table), settings={"learnin_rate": 1},
    )  # fmt: skip
    with pytest.raises(SearchError) as refused:
        run_search(search)
    message = str(refused.value)
    assert message.startswith("--methods core: its recipe (the row's settings and --set), line ")
    assert "unknown key(s) 'learnin_rate' (did you mean 'learning_rate'?)" in message
    assert "sts-search-check-" not in message


def test_a_cell_is_its_records_fields_and_keeps_its_key_and_folder() -> None:
    """One cell type: ``cell.json`` (:meth:`Cell.describe`) reads back as the same cell
    (:meth:`Cell.from_record`), and the key and folder name are those of the searches
    before the type was shared (a resumed search finds its cells' folders)."""
    recipe = Recipe("cosent:cosine_mse", settings_of({"warmup_steps": 0.1, "pooling": "cls"}))
    training = {"loss": "x", "pooling": "cls", "warmup_steps": 0.1}
    cell = Cell(replace(recipe, epochs=2.0, learning_rate=4e-5), 3, "cosent", training)
    key = "cosent:cosine_mse [pooling=cls, warmup_steps=0.1] | epochs 2 | lr 4e-05 | seed 3"
    assert cell.key == key and cell.folder_name == "cosent_cosine_mse-e2-lr4e-05-s3-49df2b59"
    described = json.loads(json.dumps(cell.describe()))  # as cell.json holds it
    assert described["grid"] == {"pooling": "cls", "warmup_steps": 0.1}
    assert Cell.from_record(described) == cell
    plain = Cell(Recipe("st:cosine"), 0, "sentence-transformers")
    assert plain.folder_name == "st_cosine-e1-lr2e-05-s0-06687322"
    # the quality benchmark's records name their variant's settings "settings"
    bench = {"method": "m", "settings": {"b": "2", "a": "1"}, "epochs": 1.0,
             "learning_rate": 1e-5, "seed": 4}  # fmt: skip
    assert Cell.from_record(bench).key == "m [a=1, b=2] | epochs 1 | lr 1e-05 | seed 4"
    soup = Cell.from_record(bench).recipe.soup_key(3)
    assert soup == "soup of 3 seeds | m [a=1, b=2] | epochs 1 | lr 1e-05"


def test_several_selection_seeds_train_the_grid_on_each_and_the_picks_on_the_rest(
    tmp_path: Path, monkeypatch
) -> None:
    """``--select-seeds 2``: every recipe on the first two seeds, each method's pick by the
    mean dev over them (not by the first seed's), then the pick on the other seeds."""
    from sts_core.search import command

    search = spec(tmp_path, methods=["a"], learning_rates=[1e-5, 2e-5], seeds=[3, 4, 5],
                  select_seeds=2)  # fmt: skip
    grid = grid_cells(search, {"a": ("a", {})})
    assert [(c.recipe.learning_rate, c.seed) for c in grid] == [
        (1e-5, 3), (1e-5, 4), (2e-5, 3), (2e-5, 4)
    ]  # fmt: skip
    # lr 1e-05 is the best at seed 3 alone, lr 2e-05 on the mean over seeds 3 and 4
    dev = {(1e-5, 3): 82.0, (1e-5, 4): 78.0, (2e-5, 3): 81.0, (2e-5, 4): 81.0, (2e-5, 5): 80.0}
    trained = []

    def train_cells(scheduler, cells, root, base, scoring, log) -> list[dict]:
        trained.append([c.key for c in cells])
        return [
            {
                "method": c.method,
                "recipe": c.recipe_key,
                "seed": c.seed,
                "key": c.key,
                "dev": dev[(c.recipe.learning_rate, c.seed)],
            }  # fmt: skip
            for c in cells
        ]

    monkeypatch.setattr(command, "train_cells", train_cells)
    monkeypatch.setattr(command, "scoring_of", lambda spec: {})
    monkeypatch.setattr(command, "write_report", lambda folder, summary: None)
    summary = command._search(search, grid, log=lambda line: None)
    assert summary["picks"] == {"a": "a | epochs 1 | lr 2e-05"}
    assert trained[1] == ["a | epochs 1 | lr 2e-05 | seed 5"]  # the pick on the rest
    assert summary["selection_seeds"] == [3, 4]
    assert summary["headline"].startswith(
        "Pick (by dev spearman at the mean over seeds [3, 4]): a | epochs 1 | lr 2e-05 — dev 81.00"
    )


def test_the_command_line_passes_select_seeds(tmp_path: Path) -> None:
    from sts_core.search.command import make_parser, spec_from_arguments

    search = spec(tmp_path)
    argv = ["--train", *search.train, "--dev", search.dev, "--model", "m"]
    argv += ["--output-dir", str(tmp_path / "out"), "--seeds", "0", "1", "2"]
    plain = spec_from_arguments(make_parser().parse_args(argv))
    assert plain.selection_seeds == [0]
    given = spec_from_arguments(make_parser().parse_args([*argv, "--select-seeds", "2"]))
    assert given.selection_seeds == [0, 1]


def test_a_worker_that_ends_without_its_result_fails_its_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that exits 0 without writing result.json: the cell fails, naming the file
    (it was a TypeError on the missing record)."""
    from sts_core.search import schedule

    monkeypatch.setattr(schedule, "prepare", lambda *args: None)
    monkeypatch.setattr(schedule, "run_worker", lambda *args: None)
    cell = Cell(Recipe("a", (), 1.0, 1e-5), 0, "a")
    work = schedule._trainer(cell, tmp_path / cell.folder_name, {}, {}, lambda line: None)
    with pytest.raises(schedule.CellFailed, match="ended without writing result.json"):
        work(schedule.Slot(1))
