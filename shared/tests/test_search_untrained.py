"""``sts-search``'s untrained model — its dev and test rows, scored once per search with the
cells' scorers and kept while the model and the dev table are — checked against the
Spearman of the base model's cosines computed here; and each cell labelled by what bounds
it (``steps N`` under ``--max-steps``, ``epochs N`` otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sts_core.search import main, worker
from sts_core.search.cells import RESULT_FILE, UNTRAINED_FILE, Cell, Recipe
from sts_core.search.report import cell_rows, pick_rows
from sts_core.search.spec import SearchError, SearchSpec, grid_cells
from sts_core.search.untrained import UNTRAINED_FOLDER, describe_untrained, untrained_record
from sts_core.testing import table_cosine_spearman, write_scored_pairs

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture
def actions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The worker's actions the search runs (``--in-process``: in this process), in order."""
    calls: list[str] = []
    for verb, action in list(worker.ACTIONS.items()):

        def recorded(folder: Path, verb: str = verb, action=action) -> int:
            calls.append(verb)
            return action(folder)

        monkeypatch.setitem(worker.ACTIONS, verb, recorded)
    return calls


def test_the_report_has_the_untrained_models_rows_scored_once_per_search(
    tiny_bert_dir: Path, tmp_path: Path, actions: list[str]
) -> None:
    train = write_scored_pairs(tmp_path / "train.csv", 16, 0, words=4)
    dev = write_scored_pairs(tmp_path / "dev.csv", 12, 1, words=4)
    test = write_scored_pairs(tmp_path / "test.csv", 12, 2, words=4)
    out = tmp_path / "search"
    argv = [
        "--train", str(train), "--dev", str(dev), "--test", str(test),
        "--model", str(tiny_bert_dir), "--output-dir", str(out), "--methods", "core",
        "--learning-rate", "1e-3", "--batch-size", "8", "--max-steps", "1", "--in-process",
    ]  # fmt: skip
    assert main(argv) == 0
    assert actions == ["train", "score", "untrained"]
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    untrained = results["untrained"]
    assert untrained["dev"] == pytest.approx(table_cosine_spearman(tiny_bert_dir, dev), abs=1e-6)
    assert untrained["test"] == pytest.approx(table_cosine_spearman(tiny_bert_dir, test), abs=1e-6)
    assert untrained["dev_metrics"]["dev_spearman"] == untrained["dev"]
    assert (untrained["steps"], untrained["model"]) == (0, str(tiny_bert_dir))
    assert untrained["folder"] == str(out / UNTRAINED_FOLDER)
    (cell,) = results["cells"]  # bounded by --max-steps: labelled by it
    assert cell["key"] == "core | steps 1 | lr 0.001 | seed 0" and cell["steps"] == 1
    assert cell["recipe"] == "core | steps 1 | lr 0.001" and cell["max_steps"] == 1
    report = (out / "search.md").read_text(encoding="utf-8")
    dev_text, test_text = f"{untrained['dev']:.2f}", f"{untrained['test']:.2f}"
    assert (
        f"| untrained model | `{tiny_bert_dir}`, not trained | – | {dev_text} | {test_text} |"
    ) in report  # the picks' table
    assert f"| untrained model | {dev_text} | " in report  # every cell's
    assert "| core **(overall pick)** | core \\| steps 1 \\| lr 0.001 |" in report

    # started again: kept, not scored again
    stamp = (out / UNTRAINED_FOLDER / RESULT_FILE).stat().st_mtime_ns
    assert main(argv) == 0
    assert actions == ["train", "score", "untrained"]
    # another test table: only the test scores are made (the cell's and the untrained's)
    other = write_scored_pairs(tmp_path / "other.csv", 12, 3, words=4)
    assert main([*argv[:5], str(other), *argv[6:]]) == 0
    assert actions[3:] == ["score", "untrained"]
    assert (out / UNTRAINED_FOLDER / RESULT_FILE).stat().st_mtime_ns == stamp
    again = json.loads((out / "results.json").read_text(encoding="utf-8"))["untrained"]
    assert again["dev"] == untrained["dev"]
    assert again["test"] == pytest.approx(table_cosine_spearman(tiny_bert_dir, other), abs=1e-6)


def test_the_untrained_model_loads_with_the_encoder_keys_and_knows_its_own_inputs(
    tmp_path: Path,
) -> None:
    """``--set``'s encoder keys load it (a training key does not); it is scored again when
    the model or the dev table changed (their content identities), not a training table
    or a teacher; a test table alone is not part of what it is made from."""
    inputs = {"--model m": {"sha": 1}, "--dev d": {"sha": 2}, "--train t": {"sha": 3}}
    scoring = {"dev": "d", "test": None, "test_fingerprint": None, "inputs": inputs}
    settings = {"pooling": "cls", "max_seq_length": 32, "weight_decay": 0.1}
    description = describe_untrained("m", settings, scoring)
    assert description["encoder"] == {"pooling": "cls", "max_length": 32}
    assert description["scoring"]["inputs"] == {"--model m": {"sha": 1}, "--dev d": {"sha": 2}}
    folder = tmp_path / UNTRAINED_FOLDER
    folder.mkdir()
    (folder / UNTRAINED_FILE).write_text(json.dumps(description), encoding="utf-8")
    (folder / RESULT_FILE).write_text(json.dumps({"dev": 50.0, "steps": 0}), encoding="utf-8")
    assert untrained_record(folder, description)["dev"] == 50.0

    def kept(model: str, encoder: dict, changes: dict) -> bool:
        described = describe_untrained(model, encoder, {**scoring, **changes})
        return untrained_record(folder, described) is not None

    other_train = {**inputs, "--train t": {"sha": 4}, "teacher_model x": {"sha": 5}}
    assert kept("m", settings, {"inputs": other_train})
    assert kept("m", settings, {"test": "t.csv", "test_fingerprint": {"reference": "t.csv"}})
    assert not kept("m", settings, {"inputs": {**inputs, "--model m": {"sha": 9}}})
    assert not kept("m", settings, {"inputs": {**inputs, "--dev d": {"sha": 9}}})
    assert not kept("m", {}, {})  # other encoder settings
    assert not kept("other", settings, {})


def test_an_untrained_model_without_a_dev_score_says_why_in_both_tables() -> None:
    record = {"key": "untrained model", "model": "m", "dev": None, "error": "collapsed | x"}
    (row,) = pick_rows([], {}, None, [0], record)[2:]
    assert row == "| untrained model | `m`, not trained (collapsed \\| x) | – | – | – |"
    assert cell_rows([], record)[2].endswith("| – | collapsed \\| x |")
    assert len(cell_rows([])) == 2 and len(pick_rows([], {}, None, [0])) == 2  # none: no row


def test_a_cell_is_labelled_by_what_bounds_it(tmp_path: Path) -> None:
    bounded = Recipe("core", (("pooling", "cls"),), 2.0, 1e-3, max_steps=50)
    assert bounded.key == "core [pooling=cls] | steps 50 | lr 0.001"
    assert bounded.budget == "steps 50, lr 0.001"
    assert bounded.folder_name.startswith("core-steps50-lr0.001-")
    free = Recipe("core", (), 2.0, 1e-3)
    assert free.key == "core | epochs 2 | lr 0.001" and free.budget == "epochs 2, lr 0.001"
    assert free.folder_name.startswith("core-e2-lr0.001-")  # as before: older folders resume
    cell = Cell(bounded, 3, "core", {"pooling": "cls"})
    assert Cell.from_record(cell.describe()) == cell
    assert "max_steps" not in Cell(free, 3, "core", {}).describe()
    assert Cell.from_record(Cell(free, 3, "core", {}).describe()).recipe == free

    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    for path in (train, dev):
        path.write_text("sentence1,sentence2,score\na b,c d,1\n", encoding="utf-8")
    fields = {"train": [str(train)], "dev": str(dev), "model": "m", "output_dir": tmp_path / "o"}
    spec = SearchSpec(**fields, methods=["core"], max_steps=5)
    (grid,) = grid_cells(spec, {"core": ("core", {})})
    assert grid.key == "core | steps 5 | lr 2e-05 | seed 0"
    with pytest.raises(SearchError) as refused:
        SearchSpec(**fields, epochs=[1.0, 2.0], max_steps=5)
    assert str(refused.value).startswith(
        "--max-steps 5 bounds every cell instead of its epochs: --epochs 1 2 would train"
    )
