"""Inputs known by their content (issue 61, item 2): each data file and model folder a run,
an evaluation or a search reads has a content identity, recorded beside what it produced; a
resume whose input changed at the same path is refused naming it, and a search trains again
the cells whose inputs changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import xxhash

from sts_core.command_files import changed_identity, content_identity
from sts_core.saving import SAVE_MARKER
from sts_core.testing import make_tiny_bert, one_line_error, write_fixture_recipe
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"


# ----------------------------------------------------------------------------- identities
def test_a_file_is_known_by_its_xxh3_and_size(tmp_path: Path) -> None:
    path = tmp_path / "pairs.csv"
    path.write_bytes(b"sentence1,sentence2,score\na,b,1\n")
    identity = content_identity(path)
    assert identity == {
        "path": str(path.resolve()),
        "size": 32,
        "xxh3_128": xxhash.xxh3_128(path.read_bytes()).hexdigest(),
    }
    path.write_bytes(b"sentence1,sentence2,score\na,b,2\n")  # same size, another score
    assert changed_identity(identity, content_identity(path)).startswith("xxh3_128 ")


def test_a_saved_model_is_known_by_its_marker_and_another_folder_by_its_files(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    from sts_core.encoder import SentenceEncoder

    plain = tmp_path / "plain"
    shutil.copytree(tiny_bert_dir, plain)
    before = content_identity(plain)
    (plain / "notes.txt").write_text("x", encoding="utf-8")
    assert content_identity(plain) != before  # a file more is another folder
    saved = tmp_path / "saved"
    SentenceEncoder.from_pretrained(tiny_bert_dir).save_pretrained(saved)
    marker = json.loads((saved / SAVE_MARKER).read_text(encoding="utf-8"))
    hashes = {name: marker["hashes"][name] for name in marker["files"] if name in marker["hashes"]}
    expected = xxhash.xxh3_128(json.dumps(hashes, sort_keys=True).encode()).hexdigest()
    assert content_identity(saved)["xxh3_128"] == "marker:" + expected
    (saved / "README.md").write_text("my notes", encoding="utf-8")  # the card may be edited
    assert content_identity(saved)["xxh3_128"] == "marker:" + expected


def test_a_hub_id_is_known_by_its_cached_revision(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert content_identity("owner/model") == {"hub": "owner/model", "revision": None}
    ref = tmp_path / "models--owner--model" / "refs" / "main"
    ref.parent.mkdir(parents=True)
    ref.write_text("0123456789abcdef\n", encoding="utf-8")
    identity = content_identity("owner/model")
    assert identity == {"hub": "owner/model", "revision": "0123456789abcdef"}
    moved = {"hub": "owner/model", "revision": "fedcba"}
    assert changed_identity(identity, moved) == "revision 0123456789ab… → fedcba…"
    assert changed_identity(identity, {"hub": "owner/model", "revision": None}) is None


# ----------------------------------------------------------------------------- a resume
def trained_with_a_checkpoint(model: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A 4-step run on a copy of the training pairs, a checkpoint every 2 steps, scored on
    the fixtures' STS-B at the end."""
    train = tmp_path / "sts-train.csv"  # the STS-B layout, known by its name
    shutil.copy(FIXTURES / "sts-train.csv", train)
    output = tmp_path / "run"
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml", "identity", model, train, FIXTURES / "sts-dev.csv", output,
        score_range="[0, 5]", per_device_train_batch_size="2", final_sts_tasks="[stsb]",
        data_dir=str(Path(__file__).parent / "fixtures" / "data"),
    )  # fmt: skip
    assert main(["--config", str(recipe)]) == 0
    return recipe, train, output


def test_a_resume_after_the_training_rows_changed_is_refused_naming_the_file(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    """The resume went on with exit 0 on other rows at the same path (the record held the
    path only)."""
    model = tiny_bert_dir
    recipe, train, output = trained_with_a_checkpoint(model, tmp_path)
    metrics = json.loads((output / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["inputs"][f"train_datasets {train.resolve()}"] == content_identity(train)
    assert metrics["inputs"][f"model_name_or_path {model.resolve()}"] == content_identity(model)
    table = json.loads((output / "sts_results.json").read_text(encoding="utf-8"))
    assert table["inputs"] == metrics["inputs"]
    old = content_identity(train)["xxh3_128"]
    rows = train.read_text(encoding="utf-8").splitlines()
    train.write_text("\n".join(rows[:1] + rows[1:][::-1]) + "\n", encoding="utf-8")  # reordered
    new = content_identity(train)["xxh3_128"]
    capsys.readouterr()
    resume = ["--config", str(recipe), "--resume_from_checkpoint", str(output / "checkpoint-2")]
    for check_only in ("true", "false"):
        assert main([*resume, "--check_only", check_only]) == 2
        line = one_line_error(capsys.readouterr().err)
        assert line == (
            f"error: resume_from_checkpoint {output / 'checkpoint-2'}: its input "
            f"train_datasets {train.resolve()} changed since the checkpoint was saved "
            f"(xxh3_128 {old[:12]}… → {new[:12]}…): resume with the inputs it was trained "
            "on, or start a new run"
        )


def test_a_resume_with_another_model_at_the_same_path_is_refused(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, model)
    recipe, _, output = trained_with_a_checkpoint(model, tmp_path)
    shutil.rmtree(model)
    make_tiny_bert(model, seed=7)  # other weights, same path
    capsys.readouterr()
    argv = ["--config", str(recipe), "--resume_from_checkpoint", str(output / "checkpoint-2")]
    assert main([*argv, "--check_only", "true"]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert f"its input model_name_or_path {model.resolve()} changed since" in line
    shutil.rmtree(model)
    shutil.copytree(tiny_bert_dir, model)  # the model it was trained from, copied back
    assert main([*argv, "--check_only", "true"]) == 0


# ----------------------------------------------------------------------------- sts-eval
def test_sts_eval_records_what_it_scored_by_content(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from sts_core.cli import eval_main

    pairs = tmp_path / "pairs.csv"
    rows = [f"a man plays {i},a dog runs {i},{i % 5}" for i in range(8)]
    pairs.write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n", encoding="utf-8")
    output = tmp_path / "scores"
    argv = ["--model", str(tiny_bert_dir), "--pairs", str(pairs), "--output", str(output)]
    assert eval_main([*argv, "--quiet"]) == 0
    saved = json.loads(output.with_suffix(".json").read_text(encoding="utf-8"))
    assert saved["inputs"] == {
        f"--model {tiny_bert_dir.resolve()}": content_identity(tiny_bert_dir),
        f"--pairs {pairs.resolve()}": content_identity(pairs),
    }


# ----------------------------------------------------------------------------- sts-search
def test_a_search_trains_again_the_cells_whose_table_changed(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    """sts-search re-used the finished cells of a table that changed at the same path (its
    identity refused the whole folder instead, with every other cell); now it says how many
    cells it trains again and scores them on the new rows."""
    from sts_core.search.command import main as search

    table = tmp_path / "pairs.csv"
    rows = [f"a man plays {i},a dog runs {i},{i % 5}" for i in range(8)]
    table.write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n", encoding="utf-8")
    argv = ["--train", str(table), "--dev", str(table), "--model", str(tiny_bert_dir)]
    argv += ["--methods", "core", "--max-steps", "1", "--batch-size", "4", "--score-range", "0"]
    argv += ["5", "--output-dir", str(tmp_path / "search")]
    assert search(argv) == 0
    first = json.loads((tmp_path / "search" / "results.json").read_text(encoding="utf-8"))
    capsys.readouterr()
    assert search(argv) == 0  # nothing changed: nothing trained
    assert "cell(s) to train" not in capsys.readouterr().out
    rows[0] = "a man plays 0,a man plays 0,5"
    table.write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n", encoding="utf-8")
    assert search(argv) == 0
    out = capsys.readouterr().out
    assert "sts-search: 1 cell(s) to train, 0 done before" in out
    assert "1 of them finished before on other inputs" in out
    second = json.loads((tmp_path / "search" / "results.json").read_text(encoding="utf-8"))
    assert second["cells"][0]["dev"] != first["cells"][0]["dev"]  # scored on the new rows
