"""``sts-search --soup``: each pick's seeds averaged into one model (embedding weights only,
the heads left out), scored on dev and test as the cells are, and made once per set of
members. The soup is checked against an average computed here, tensor by tensor, and its
scores against the search's evaluator applied to a fresh encoder holding that average."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from sts_core.command_files import LEDGER_NAME
from sts_core.encoder import SentenceEncoder
from sts_core.heads import LinearHead
from sts_core.search import main, schedule, worker
from sts_core.search import soups as soups_module
from sts_core.search import untrained as untrained_module
from sts_core.search.cells import RESULT_FILE, SOUP_FILE, TEST_FILE, Cell, Recipe
from sts_core.search.schedule import Scheduler, Slot
from sts_core.search.spec import fingerprint
from sts_core.search.worker import table_evaluator
from sts_core.testing import write_scored_pairs
from sts_core.training.averaging import embedding_weights

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def averaged(models: list[Path]) -> dict[str, torch.Tensor]:
    """The members' embedding weights (every key outside their heads), averaged here."""
    states = []
    for model in models:
        encoder = SentenceEncoder.from_pretrained(str(model))
        heads = tuple(f"{name}." for name in encoder.heads)
        states.append({k: v for k, v in encoder.state_dict().items() if not k.startswith(heads)})
    return {
        key: torch.stack([state[key].double() for state in states]).mean(0).to(tensor.dtype)
        if tensor.is_floating_point()
        else tensor
        for key, tensor in states[0].items()
    }


def check_soup_weights(soup_model: Path, expected: dict[str, torch.Tensor]) -> None:
    soup = SentenceEncoder.from_pretrained(str(soup_model))
    assert dict(soup.heads) == {}
    state = soup.state_dict()
    assert sorted(state) == sorted(expected)
    for key, tensor in expected.items():
        torch.testing.assert_close(state[key], tensor, rtol=0, atol=1e-6)


def fresh_score(
    base: Path, weights: dict[str, torch.Tensor], scoring: dict[str, Any], table: str, name: str
) -> float:
    """The evaluator the search scores with, applied to a fresh encoder of the base model
    that holds ``weights``."""
    encoder = SentenceEncoder.from_pretrained(str(base))
    encoder.load_state_dict(weights)
    evaluator = table_evaluator(scoring, table, name, name)
    return float(evaluator(encoder.eval())[f"{name}_spearman"])


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each worker called in this process (a tiny model trains and scores in a fraction of
    a worker process's start; the processes are tests/test_search_command.py's): the
    verbs, in order."""
    calls: list[str] = []

    def run_worker(verb: str, folder: Path, slot: Slot) -> None:
        calls.append(verb)
        assert worker.main([verb, str(folder)]) == 0

    for module in (schedule, soups_module, untrained_module):
        monkeypatch.setattr(module, "run_worker", run_worker)
    monkeypatch.setattr(worker, "end_with_parent", lambda *args: None)
    return calls


def test_a_search_soups_its_picks_seeds_scores_them_and_keeps_them(
    tiny_bert_dir: Path, tmp_path: Path, in_process: list[str]
) -> None:
    train = write_scored_pairs(tmp_path / "train.csv", 16, 0, words=4)
    dev = write_scored_pairs(tmp_path / "dev.csv", 12, 1, words=4)
    test = write_scored_pairs(tmp_path / "test.csv", 12, 2, words=4)
    out = tmp_path / "search"
    argv = [
        "--train", str(train), "--dev", str(dev), "--test", str(test),
        "--model", str(tiny_bert_dir), "--output-dir", str(out), "--methods", "core",
        "--learning-rate", "1e-3", "--seeds", "0", "1", "--batch-size", "8", "--soup",
    ]  # fmt: skip
    assert main(argv) == 0
    assert in_process == ["train", "train", "score", "score", "soup", "untrained"]
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    (soup,) = results["soups"]
    runs = sorted((c for c in results["cells"]), key=lambda c: c["seed"])
    recipe = Cell.from_record(runs[0]).recipe
    assert soup["recipe"] == recipe.key and soup["key"] == recipe.soup_key(2)
    assert soup["seeds"] == [0, 1] and soup["members"] == [c["key"] for c in runs]
    folder = Path(soup["folder"])
    assert folder == out / "soups" / recipe.folder_name

    expected = averaged([Path(c["folder"]) / "model" for c in runs])
    check_soup_weights(folder / "model", expected)
    scoring = {"task": "sts", "dev": str(dev)}
    for name, table in (("dev", dev), ("test", test)):
        score = fresh_score(tiny_bert_dir, expected, scoring, str(table), name)
        assert abs(soup[name] - score) < 1e-6
        assert soup[name] == soup[f"{name}_metrics"][f"{name}_spearman"]
    report = (out / "search.md").read_text(encoding="utf-8")
    assert "## Soups" in report and f"{soup['dev']:.2f}" in report

    # started again: the soup is kept, not made again (a changed member: below)
    stamp = (folder / RESULT_FILE).stat().st_mtime_ns
    assert main(argv) == 0
    assert in_process == ["train", "train", "score", "score", "soup", "untrained"]
    assert (folder / RESULT_FILE).stat().st_mtime_ns == stamp


# --------------------------------------------------------- members made here (no training)
def member(tmp_path: Path, base: Path, seed: int, noise: int, head: bool = True) -> dict:
    """A finished cell of one recipe at ``seed``: the base model with its weights moved by
    noise ``noise`` and a regression head (its own weights), and its ``result.json``."""
    cell = Cell(Recipe("core", (), 1.0, 1e-3), seed, "core", {})
    folder = tmp_path / "cells" / cell.folder_name
    encoder = SentenceEncoder.from_pretrained(str(base))
    generator = torch.Generator().manual_seed(noise)
    if head:
        encoder.add_head("regression", LinearHead.for_pairs(encoder.dimension, 1))
    with torch.no_grad():
        for parameter in encoder.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    encoder.save_pretrained(str(folder / "model"))
    result = {"dev": 1.0, "noise": noise}
    (folder / RESULT_FILE).write_text(json.dumps(result), encoding="utf-8")
    return {**cell.describe(), **result, "folder": str(folder)}


def make(tmp_path: Path, dev: Path, records: list[dict], test: Path | None = None) -> list[dict]:
    """The soup of ``records`` (seeds 0 and 1) made as the search makes it (its workers in
    this process: :func:`in_process`), scored on ``dev`` and ``test``."""
    scheduler = Scheduler([Slot(1)])
    scoring = {
        "task": "sts",
        "metric": "spearman",
        "dev": str(dev),
        "test": None if test is None else str(test),
        "test_fingerprint": None if test is None else fingerprint(str(test)),
    }
    recipes, root = [records[0]["recipe"]], tmp_path / "soups"
    made = soups_module.make_soups(scheduler, records, recipes, [0, 1], root, scoring)
    assert scheduler.failures == []
    return made


def test_the_soup_leaves_the_heads_out_and_holds_the_average_of_the_rest(
    tiny_bert_dir: Path, tmp_path: Path, in_process: list[str]
) -> None:
    """Members with a regression head each: the soup averages every weight but the heads'
    and has no head (the scores are the cosine's, as a fresh encoder holding the average)."""
    dev = write_scored_pairs(tmp_path / "dev.csv", 12, 1, words=4)
    records = [member(tmp_path, tiny_bert_dir, seed, 10 + seed) for seed in (0, 1)]
    (soup,) = make(tmp_path, dev, records)
    expected = averaged([Path(r["folder"]) / "model" for r in records])
    assert not any(key.startswith("regression.") for key in expected)
    check_soup_weights(Path(soup["folder"]) / "model", expected)
    scoring = {"task": "sts", "dev": str(dev)}
    assert abs(soup["dev"] - fresh_score(tiny_bert_dir, expected, scoring, str(dev), "dev")) < 1e-6


def test_a_soup_is_made_again_only_when_a_member_changed(
    tiny_bert_dir: Path, tmp_path: Path, in_process: list[str]
) -> None:
    """Kept when its members are; scored again (not made again) on another test table; made
    again, with its test score, when a member was trained again."""
    dev, test, other = (
        write_scored_pairs(tmp_path / f"{n}.csv", 12, n, words=4) for n in (1, 2, 3)
    )
    records = [member(tmp_path, tiny_bert_dir, seed, 10 + seed, head=False) for seed in (0, 1)]
    (first,) = make(tmp_path, dev, records, test)
    assert in_process == ["soup"]
    assert make(tmp_path, dev, records, test) == [first] and in_process == ["soup"]  # kept
    folder = Path(first["folder"])
    stamp = (folder / RESULT_FILE).stat().st_mtime_ns
    scoring = {"task": "sts", "dev": str(dev)}
    # another test table: scored on it, the soup kept
    (rescored,) = make(tmp_path, dev, records, other)
    assert in_process == ["soup", "soup"] and (folder / RESULT_FILE).stat().st_mtime_ns == stamp
    expected = averaged([Path(r["folder"]) / "model" for r in records])
    assert rescored["dev"] == first["dev"]
    assert (
        abs(rescored["test"] - fresh_score(tiny_bert_dir, expected, scoring, str(other), "test"))
        < 1e-6
    )
    # seed 1 trained again, to other weights: the soup is made again, from them
    records[1] = member(tmp_path, tiny_bert_dir, 1, 99, head=False)
    (second,) = make(tmp_path, dev, records, other)
    assert in_process == ["soup"] * 3 and second["dev"] != first["dev"]
    expected = averaged([Path(r["folder"]) / "model" for r in records])
    check_soup_weights(folder / "model", expected)
    for name, table in (("dev", dev), ("test", other)):
        assert (
            abs(second[name] - fresh_score(tiny_bert_dir, expected, scoring, str(table), name))
            < 1e-6
        )


def test_embedding_weights_are_the_state_dict_without_the_heads(tiny_bert_dir: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir))
    encoder.add_head("regression", LinearHead.for_pairs(encoder.dimension, 1))
    state = encoder.state_dict()
    weights = embedding_weights(encoder)
    assert sorted(weights) == sorted(k for k in state if not k.startswith("regression."))
    assert len(weights) < len(state)


def test_no_soup_while_a_seed_has_no_dev_score(tmp_path: Path) -> None:
    runs = [
        {"recipe": "r", "seed": 0, "dev": 1.0},
        {"recipe": "r", "seed": 1, "dev": None},  # diverged
        {"recipe": "q", "seed": 1, "dev": 2.0},
        {"recipe": "q", "seed": 0, "dev": 3.0},
    ]
    found = soups_module.soup_members(runs, ["r", "q", "p"], [0, 1])
    assert found == {"q": [runs[3], runs[2]]}


# ------------------------------------------------------ soup.json and its record, by hand
def finished_cell(tmp_path: Path, seed: int, result: dict[str, Any] | None = None) -> dict:
    """A finished cell's record at ``seed`` with its ``result.json`` (no model: the soup's
    worker is replaced where these are used)."""
    cell = Cell(Recipe("core", (), 1.0, 1e-3), seed, "core", {})
    folder = tmp_path / "cells" / cell.folder_name
    folder.mkdir(parents=True, exist_ok=True)
    result = {"dev": 1.0 + seed} if result is None else result
    (folder / RESULT_FILE).write_text(json.dumps(result), encoding="utf-8")
    return {**cell.describe(), **result, "folder": str(folder)}


def test_made_from_is_the_description_without_the_test_table() -> None:
    scoring = {"dev": "d.csv", "metric": "spearman", "test": "t.csv", "test_fingerprint": {}}
    described = {"key": "k", "seeds": [0, 1], "scoring": scoring}
    assert soups_module.made_from(described) == {
        "key": "k",
        "seeds": [0, 1],
        "scoring": {"dev": "d.csv", "metric": "spearman"},
    }
    assert soups_module.made_from({"key": "k"}) == {"key": "k", "scoring": {}}


def test_soup_json_names_each_member_by_key_model_and_result_digest(tmp_path: Path) -> None:
    """A one-seed soup too: the recipe is its first member's."""
    record = finished_cell(tmp_path, 0)
    scoring = {"dev": "d.csv"}
    folder = Path(record["folder"])
    digest = hashlib.sha256((folder / RESULT_FILE).read_bytes()).hexdigest()
    recipe = Cell.from_record(record).recipe
    assert soups_module.describe_soup([record], scoring) == {
        "key": recipe.soup_key(1),
        "recipe": recipe.key,
        "seeds": [0],
        "members": [
            {"key": record["key"], "model": str(folder / "model"), "result_sha256": digest}
        ],
        "scoring": scoring,
    }


def test_a_soups_record_needs_its_soup_json_and_result_json_of_the_same_members(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "soup"
    folder.mkdir()
    scoring = {"dev": "d.csv", "test": "t.csv", "test_fingerprint": {"t.csv": "1"}}
    described = {
        "key": "soup of 2 seeds | r",
        "recipe": "r",
        "seeds": [0, 1],
        "members": [{"key": "a"}, {"key": "b"}],
        "scoring": scoring,
    }
    result = {"dev": None, "dev_metrics": {"n": 3}, "seconds": 12.5, "error": "diverged"}
    (folder / SOUP_FILE).write_text(json.dumps(described), encoding="utf-8")
    assert soups_module.soup_record(folder, described) is None  # no result.json
    (folder / RESULT_FILE).write_text(json.dumps(result), encoding="utf-8")
    (folder / SOUP_FILE).unlink()
    assert soups_module.soup_record(folder, described) is None  # no soup.json
    (folder / SOUP_FILE).write_text(json.dumps(described), encoding="utf-8")
    expected = {
        "key": "soup of 2 seeds | r",
        "recipe": "r",
        "seeds": [0, 1],
        "members": ["a", "b"],
        "dev": None,
        "dev_metrics": {"n": 3},
        "seconds": 12.5,
        "folder": str(folder),
        "error": "diverged",
    }
    assert soups_module.soup_record(folder, described) == expected
    # scored on a test table: its score when it is the table asked for
    (folder / TEST_FILE).write_text(
        json.dumps({"fingerprint": {"t.csv": "1"}, "score": 0.5, "metrics": {"m": 1}}),
        encoding="utf-8",
    )
    scored = {**expected, "test": 0.5, "test_metrics": {"m": 1}}
    assert soups_module.soup_record(folder, described, {"t.csv": "1"}) == scored
    assert soups_module.soup_record(folder, described, {"t.csv": "2"}) == expected
    # another test table in the description: the same soup; another dev table: not this one
    other_test = {**described, "scoring": {**scoring, "test": "u.csv"}}
    assert soups_module.soup_record(folder, other_test) == expected
    other_dev = {**described, "scoring": {**scoring, "dev": "e.csv"}}
    assert soups_module.soup_record(folder, other_dev) is None
    del result["error"]
    (folder / RESULT_FILE).write_text(json.dumps({**result, "dev": 0.25}), encoding="utf-8")
    without = {k: v for k, v in expected.items() if k != "error"}
    assert soups_module.soup_record(folder, described) == {**without, "dev": 0.25}


def test_make_soups_logs_each_step_and_gives_the_worker_its_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker replaced by one that writes ``result.json``: what make_soups logs, the
    slot it runs on, the record it returns (one seed: the recipe is its only run's)."""
    record = finished_cell(tmp_path, 0)
    slot = Slot(1)
    calls: list[tuple[str, Path, Slot]] = []

    def run_worker(verb: str, folder: Path, given: Slot) -> None:
        calls.append((verb, folder, given))
        result = {"dev": 0.123, "dev_metrics": {}, "seconds": 2.0}
        (folder / RESULT_FILE).write_text(json.dumps(result), encoding="utf-8")

    monkeypatch.setattr(soups_module, "run_worker", run_worker)
    lines: list[str] = []
    scheduler = Scheduler([slot])
    root = tmp_path / "soups"
    recipes = ["absent | recipe", record["recipe"]]
    made = soups_module.make_soups(scheduler, [record], recipes, [0], root, {}, lines.append)
    assert scheduler.failures == []
    recipe = Cell.from_record(record).recipe
    folder = root / recipe.folder_name
    key = recipe.soup_key(1)
    assert calls == [("soup", folder, slot)]
    assert lines == [
        "sts-search: no soup of absent | recipe: not every seed of [0] has a dev score",
        "sts-search: 1 soup(s) to make or score, 0 done",
        f"  making the {key}",
        f"  done {key}: dev 0.12",
    ]
    assert [(r["key"], r["folder"], r["dev"]) for r in made] == [(key, str(folder), 0.123)]


def test_a_soup_worker_that_writes_no_result_is_a_failure_of_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [finished_cell(tmp_path, seed) for seed in (0, 1)]
    monkeypatch.setattr(soups_module, "run_worker", lambda verb, folder, slot: None)
    scheduler = Scheduler([Slot(1)])
    root = tmp_path / "soups"
    made = soups_module.make_soups(
        scheduler, records, [records[0]["recipe"]], [0, 1], root, {}, lambda line: None
    )
    assert made == []
    folder = root / Cell.from_record(records[0]).recipe.folder_name
    assert scheduler.failures == [f"{folder.name}: its worker ended without writing result.json"]


def test_prepare_soup_replaces_a_soup_json_it_did_not_record(tmp_path: Path) -> None:
    """The soup folder is the search's own: soup.json is written without the folder's
    ledger, so one written by hand (or by an older search) is replaced, not refused; a
    soup of other members loses its result.json, the same soup keeps it."""
    folder = tmp_path / "soup"
    folder.mkdir()
    (folder / SOUP_FILE).write_text(json.dumps({"key": "old"}), encoding="utf-8")
    (folder / RESULT_FILE).write_text("{}", encoding="utf-8")
    description = {"key": "new", "members": [], "scoring": {"dev": "d.csv"}}
    soups_module.prepare_soup(folder, description)
    assert json.loads((folder / SOUP_FILE).read_text(encoding="utf-8")) == description
    assert not (folder / RESULT_FILE).exists()
    assert not (folder / LEDGER_NAME).exists()
    (folder / RESULT_FILE).write_text("{}", encoding="utf-8")
    soups_module.prepare_soup(folder, {**description, "scoring": {"dev": "d.csv", "test": "t"}})
    assert (folder / RESULT_FILE).exists()
