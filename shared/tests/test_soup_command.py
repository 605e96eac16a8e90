"""``sts-soup`` at its edges, each against a value written here: its help, the record it
saves (the file's exact text), the whole messages of its refusals, ``--overwrite``, and the
names of the options. Found by the mutation pass (``tools/mutation.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sts_core.encoder import SentenceEncoder
from sts_core.soup import _absolute, check_inputs, lora_bases, lora_note, make_parser
from sts_core.soup import main as soup_main
from sts_core.testing import make_tiny_bert


def saved_encoder(folder: Path, seed: int) -> Path:
    backbone = make_tiny_bert(folder.with_name(folder.name + "-backbone"), seed=seed)
    SentenceEncoder.from_pretrained(str(backbone)).save_pretrained(folder)
    return folder


def test_the_help_names_each_argument() -> None:
    parser = make_parser()
    assert parser.prog == "sts-soup"
    assert parser.description == "average the weights of several fine-tuned runs into one model."
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    described = {
        dest: (a.help, a.required, a.metavar, a.nargs, a.const) for dest, a in actions.items()
    }
    assert described == {
        "models": ("saved model folders (two or more)", True, None, "+", None),
        "output": ("folder to save the averaged model", True, None, None, None),
        "overwrite": ("replace a model already saved in --output", False, None, 0, True),
        "base_model": (
            "the base model of LoRA adapter runs whose recorded base has moved",
            False,
            "PATH",
            None,
            None,
        ),
    }
    with pytest.raises(SystemExit):
        parser.parse_args(["a", "b"])  # --output is required


def test_the_soup_record_and_overwrite(tmp_path: Path, capsys) -> None:
    runs = [str(saved_encoder(tmp_path / f"seed{seed}", seed)) for seed in (0, 1)]
    output = tmp_path / "soup"
    assert soup_main([*runs, "--output", str(output)]) == 0
    record = {
        "soup": "uniform",
        "models": [str(Path(run).resolve()) for run in runs],
        "merged_lora_adapters": [],
        "summary": "averaged 2 models",
    }
    assert (output / "sts_soup.json").read_text(encoding="utf-8") == json.dumps(record, indent=2)
    assert soup_main([*runs, "--output", str(output)]) == 2
    assert soup_main([*runs, "--output", str(output), "--overwrite"]) == 0
    assert capsys.readouterr().out.count(f"averaged 2 models into {output}") == 2


def test_a_folder_that_does_not_exist_is_recorded_as_given(tmp_path: Path, monkeypatch) -> None:
    assert _absolute("org/model") == "org/model"
    assert _absolute(str(tmp_path)) == str(tmp_path.resolve())
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path)
    assert _absolute("run") == str((tmp_path / "run").resolve())


def test_soup_names_both_runs_when_they_differ(tmp_path: Path) -> None:
    from sts_core.soup import soup

    first = saved_encoder(tmp_path / "first", 0)
    other_pooling = tmp_path / "cls"
    SentenceEncoder.from_pretrained(
        str(tmp_path / "first-backbone"), pooling="cls"
    ).save_pretrained(other_pooling)
    with pytest.raises(ValueError) as error:
        soup([str(first), str(other_pooling)], str(tmp_path / "out"))
    assert str(error.value) == (
        f"{other_pooling}: pooling 'cls' differs from {first}'s 'mean': a soup averages runs "
        "of one recipe"
    )
    from transformers import AutoTokenizer, BertConfig, BertModel

    narrower = tmp_path / "narrower-backbone"
    config = BertConfig.from_pretrained(tmp_path / "first-backbone")
    config.intermediate_size = 48
    BertModel(config).save_pretrained(narrower)
    AutoTokenizer.from_pretrained(tmp_path / "first-backbone").save_pretrained(narrower)
    other_shape = tmp_path / "narrower"
    SentenceEncoder.from_pretrained(str(narrower)).save_pretrained(other_shape)
    with pytest.raises(ValueError) as error:
        soup([str(first), str(other_shape)], str(tmp_path / "out"))
    message = str(error.value)
    assert message.startswith(f"{other_shape}: ") and f", {first} has (" in message


def test_refusals_have_their_whole_message(tmp_path: Path) -> None:
    first, second = (
        str(saved_encoder(tmp_path / name, seed)) for name, seed in (("a", 0), ("b", 1))
    )
    with pytest.raises(ValueError) as error:
        check_inputs([first, first], str(tmp_path / "out"), False)
    assert str(error.value) == f"model {Path(first).resolve()} is given more than once"
    a_file = tmp_path / "file.txt"
    a_file.write_text("x", encoding="utf-8")
    with pytest.raises(ValueError) as error:
        check_inputs([first, second], str(a_file), False)
    assert str(error.value) == f"--output {a_file} is a file, not a folder"
    with pytest.raises(ValueError) as error:
        lora_bases([first, second], str(tmp_path))
    assert str(error.value) == "--base-model is for LoRA adapter runs; none of the models is one"
    assert lora_note([first, second], {}) == ""
    assert lora_note([first, second], {first: "base/model"}) == (
        " (1 of 2 runs LoRA adapters, averaged as merged models: each adapter merged into "
        "base/model first)"
    )


def test_soup_checks_the_lora_bases_itself_when_not_given(tmp_path: Path) -> None:
    from sts_core.soup import soup

    runs = [str(saved_encoder(tmp_path / f"seed{seed}", seed)) for seed in (0, 1)]
    folder = soup(runs, str(tmp_path / "soup"))
    record = json.loads((folder / "sts_soup.json").read_text(encoding="utf-8"))
    assert record["merged_lora_adapters"] == [] and record["summary"] == "averaged 2 models"
