"""``sts-soup`` never averages what it should not and never leaves what is not its own
(issue 44, items 1 and 3): tokenizers compared by content, a damaged model refused, the
earlier model's results removed by ``--overwrite``, and no input inside the output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sts_core.command_files import write_text
from sts_core.encoder import SentenceEncoder
from sts_core.saving import SAVE_MARKER
from sts_core.soup import main as soup_main
from sts_core.testing import make_tiny_bert

pytestmark = pytest.mark.usefixtures("torch_one_thread")

RESULT_FILES = ("metrics.json", "sts_results.json", "sts_results.md")


def saved_run(folder: Path, seed: int) -> Path:
    backbone = make_tiny_bert(folder.with_name(folder.name + "-backbone"), seed=seed)
    SentenceEncoder.from_pretrained(str(backbone)).save_pretrained(folder)
    return folder


def refusal(argv: list[str], capsys) -> str:
    """The one ``sts-soup: error:`` line of a refused soup (exit status 2, no traceback)."""
    capsys.readouterr()
    assert soup_main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if line.startswith("sts-soup: error: ")]
    return line


def no_weights_loaded(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("weights loaded before the inputs were checked")

    monkeypatch.setattr(SentenceEncoder, "from_pretrained", refuse)


def test_tokenizers_of_one_size_that_map_other_ids_are_refused_before_loading(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """Same vocabulary size, two tokens swapped: the soup averaged their embedding rows."""
    from transformers import AutoTokenizer, BertTokenizerFast

    first = make_tiny_bert(tmp_path / "first", seed=0)
    second = make_tiny_bert(tmp_path / "second", seed=1)
    vocabulary = AutoTokenizer.from_pretrained(second).get_vocab()
    vocabulary["cat"], vocabulary["dog"] = vocabulary["dog"], vocabulary["cat"]
    swapped = BertTokenizerFast(vocab=vocabulary, do_lower_case=True)
    swapped.save_pretrained(second)
    assert len(AutoTokenizer.from_pretrained(second)) == len(AutoTokenizer.from_pretrained(first))
    no_weights_loaded(monkeypatch)
    output = tmp_path / "soup"
    line = refusal([str(first), str(second), "--output", str(output)], capsys)
    low, high = sorted((vocabulary["cat"], vocabulary["dog"]))
    token = "cat" if vocabulary["dog"] == low else "dog"
    assert line == (
        f"sts-soup: error: {second}: its tokenizer differs from {first}'s (token {token!r} "
        f"has id {high}, the first model's has id {low}): a soup averages runs of one base "
        "model and tokenizer"
    )
    assert not output.exists()


def test_a_model_damaged_in_place_is_refused_naming_the_file(tmp_path: Path, capsys) -> None:
    runs = [saved_run(tmp_path / f"seed{seed}", seed) for seed in (0, 1)]
    weights = runs[1] / "model.safetensors"
    with weights.open("r+b") as handle:
        handle.seek(weights.stat().st_size - 2048)
        handle.write(bytes(1024))
    line = refusal([*map(str, runs), "--output", str(tmp_path / "soup")], capsys)
    assert line.startswith(f"sts-soup: error: {runs[1]}: model.safetensors does not match its save")


def test_overwrite_removes_the_earlier_model_s_results(tmp_path: Path, capsys) -> None:
    """The results of the model saved there before (a training run's, say) went on
    describing the soup."""
    runs = [str(saved_run(tmp_path / f"seed{seed}", seed)) for seed in (0, 1)]
    output = saved_run(tmp_path / "earlier-run", 2)
    for name in RESULT_FILES:  # written by sts-core (the folder's ledger records them)
        write_text(output / name, json.dumps({"stsb": 83.7}))
    assert soup_main([*runs, "--output", str(output), "--overwrite"]) == 0
    assert [name for name in RESULT_FILES if (output / name).exists()] == []
    record = json.loads((output / "sts_soup.json").read_text(encoding="utf-8"))
    assert record["summary"] == "averaged 2 models"
    SentenceEncoder.from_pretrained(output)


def test_overwrite_of_a_folder_holding_the_models_is_refused_naming_both(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    runs_folder = tmp_path / "runs"
    runs = [saved_run(runs_folder / f"seed{seed}", seed) for seed in (0, 1)]
    before = sorted(str(p) for p in runs_folder.rglob("*"))
    no_weights_loaded(monkeypatch)
    for output in (runs_folder, tmp_path):
        line = refusal([*map(str, runs), "--output", str(output), "--overwrite"], capsys)
        assert line == (
            f"sts-soup: error: --output {output} holds {runs[0]}, the input model of "
            "sts-soup: writing there would change what it reads; nothing was written: "
            "choose another --output"
        )
    assert sorted(str(p) for p in runs_folder.rglob("*")) == before


def test_overwrite_of_a_folder_sts_core_did_not_save_is_refused(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """--overwrite replaced the files a save may write (README.md, config.json, …) in any
    folder: a project's own README.md was deleted."""
    runs = [str(saved_run(tmp_path / f"seed{seed}", seed)) for seed in (0, 1)]
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("my project", encoding="utf-8")
    (project / "config.json").write_text("{}", encoding="utf-8")
    no_weights_loaded(monkeypatch)
    line = refusal([*runs, "--output", str(project), "--overwrite"], capsys)
    assert line == (
        f"sts-soup: error: --output {project} holds files sts-core did not write "
        "(README.md, config.json): nothing is replaced there; choose a new folder"
    )
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "config.json"]
    assert not (project / SAVE_MARKER).exists()
