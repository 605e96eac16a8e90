"""SIFTER-LSTM's SST-2 program: the word set, the flags on word pieces, and
``sts-sifter-lstm`` end to end on a tiny SST folder with a tiny BERT's embeddings."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sts_sifter import sentiment
from sts_sifter.sentiment import encode, load_embeddings, load_word_set, main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

POSITIVE = ["a good film , a great cast", "fine and funny", "good fun", "a great story"]
NEGATIVE = ["a bad film , a dull cast", "boring and bad", "dull fun", "a bad story"]


def write_sst(folder: Path) -> Path:
    """``sst/binary/sentiment-{train,dev,test}`` and a Hu & Liu style lexicon."""
    sst = folder / "sst" / "binary"
    sst.mkdir(parents=True)
    rows = [f"{s} \t1" for s in POSITIVE] + [f"{s} \t0" for s in NEGATIVE]
    for split in ("train", "dev", "test"):
        (sst / f"sentiment-{split}").write_text("\n".join(rows) + "\n", encoding="utf-8")
    lexicon = folder / "lexicon" / "hu-liu"
    lexicon.mkdir(parents=True)
    (lexicon / "positive-words.txt").write_text(";comment\ngood\ngreat\nfine\n")
    (lexicon / "negative-words.txt").write_text(";comment\n\nbad\ndull\nboring\n")
    return folder


def test_word_sets_from_named_lists_and_files(tmp_path: Path) -> None:
    data = write_sst(tmp_path)
    assert load_word_set("hu-liu", data) == {"good", "great", "fine", "bad", "dull", "boring"}
    words = tmp_path / "mine.txt"
    words.write_text("Wow\n", encoding="utf-8")
    assert load_word_set(str(words)) == {"wow"}
    with pytest.raises(OSError, match="cannot read"):
        load_word_set(str(tmp_path / "absent.txt"))


@pytest.mark.real_data
def test_real_lexicons_load(sts_data_dir: Path) -> None:
    hu_liu = load_word_set("hu-liu", sts_data_dir)
    assert len(hu_liu) > 6000 and {"good", "bad"} <= hu_liu
    assert len(load_word_set("vader", sts_data_dir)) > 7000


def test_every_piece_of_a_listed_word_is_flagged(tiny_bert_dir: Path) -> None:
    _, tokenizer = load_embeddings(tiny_bert_dir)
    encoded = encode(["a goodish film", "good"], [1, 1], tokenizer, frozenset({"goodish", "good"}))
    pieces = tokenizer.convert_ids_to_tokens(encoded.input_ids[0])
    flagged = [p for p, f in zip(pieces, encoded.bypass[0], strict=True) if f]
    assert "".join(flagged).replace("##", "") == "goodish" and len(flagged) > 1
    assert all(encoded.bypass[1])


def test_the_command_trains_both_models_and_reports_mean_and_sd(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    data = write_sst(tmp_path / "data")
    output = tmp_path / "lstm"
    argv = [
        "--embeddings",
        str(tiny_bert_dir),
        "--data-dir",
        str(data),
        "--seeds",
        "0",
        "1",
        "--epochs",
        "2",
        "--batch-size",
        "4",
        "--eval-steps",
        "2",
        "--learning-rate",
        "1e-2",
        "--output",
        str(output),
    ]
    assert main(argv) == 0
    report = json.loads(output.with_suffix(".json").read_text(encoding="utf-8"))
    assert set(report["models"]) == {"plain", "sifter"}
    for result in report["models"].values():
        assert len(result["runs"]) == 2 and 0 <= result["test_mean"] <= 100
        assert all(run["steps"] == 4 for run in result["runs"])
    assert report["word_set"]["pieces_flagged"] > 0
    assert "| sifter |" in output.with_suffix(".md").read_text(encoding="utf-8")


def test_a_missing_lexicon_is_one_line(tiny_bert_dir: Path, tmp_path: Path, capsys) -> None:
    data = write_sst(tmp_path / "data")
    argv = ["--embeddings", str(tiny_bert_dir), "--data-dir", str(data), "--lexicon", "x.txt"]
    assert main(argv) == 2
    assert one_line(capsys.readouterr().err).startswith(
        "sts-sifter-lstm: error: lexicon 'x.txt': cannot read"
    )


def one_line(err: str) -> str:
    """The single line ``sts-sifter-lstm: error: …`` on stderr (no traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sts-sifter-lstm: error: "), err
    return lines[0]


def forbid_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make loading the embeddings or training fail the test: a bad argument must stop
    the command first."""

    def no_work(*args, **kwargs):
        pytest.fail("the command started its work before the arguments were checked")

    monkeypatch.setattr(sentiment, "load_embeddings", no_work)
    monkeypatch.setattr(sentiment, "train_one", no_work)


def test_an_output_that_is_a_folder_fails_before_training(
    tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    forbid_work(monkeypatch)
    data = write_sst(tmp_path / "data")
    output = tmp_path / "lstm"
    (tmp_path / "lstm.json").mkdir()
    argv = ["--embeddings", str(tiny_bert_dir), "--data-dir", str(data), "--output", str(output)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert f"--output {output}.json" in line and "is a folder" in line
    assert captured.out == ""


def test_vader_package_without_the_package_is_one_line(
    tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    forbid_work(monkeypatch)
    monkeypatch.setitem(sys.modules, "vaderSentiment", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "vaderSentiment.vaderSentiment", None)
    data = write_sst(tmp_path / "data")
    argv = ["--embeddings", str(tiny_bert_dir), "--data-dir", str(data)]
    assert main([*argv, "--lexicon", "vader-package"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "vader-package" in line and "pip install vaderSentiment" in line


@pytest.mark.parametrize("problem", ["does not exist", "has no config.json"])
def test_embeddings_that_are_no_model_folder_are_one_line(
    problem: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    forbid_work(monkeypatch)
    data = write_sst(tmp_path / "data")
    folder = tmp_path / "model"
    if problem != "does not exist":
        folder.mkdir()
    assert main(["--embeddings", str(folder), "--data-dir", str(data)]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"--embeddings: model folder {folder} {problem}" in line


def test_a_train_limit_below_one_is_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--embeddings", "x", "--train-limit", "0"])
    assert exit_info.value.code == 2
    assert "--train-limit" in capsys.readouterr().err


@pytest.mark.parametrize("rate", ["nan", "0", "-1e-5", "inf"])
def test_a_learning_rate_that_is_no_rate_is_refused_before_any_weights_load(
    rate: str, capsys
) -> None:
    """It was refused by the optimizer, after the weights had loaded (the probe)."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--embeddings", "x", f"--learning-rate={rate}"])
    assert exit_info.value.code == 2
    assert "--learning-rate must be finite and > 0" in capsys.readouterr().err


def test_an_output_it_wrote_is_replaced_only_with_overwrite(
    tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    """``<output>.json`` and ``.md`` go through the one door for a command's files: written
    atomically and recorded, replaced with ``--overwrite`` only, a file sts-core did not
    write never (the training is replaced by a fixed report here)."""
    monkeypatch.setattr(sentiment, "run", lambda args: {"models": {}})
    monkeypatch.setattr(sentiment, "markdown", lambda report: "| model |\n")
    output = tmp_path / "out" / "lstm"
    data = write_sst(tmp_path / "data")
    argv = ["--embeddings", str(tiny_bert_dir), "--data-dir", str(data), "--output", str(output)]
    assert main(argv) == 0
    assert main(argv) == 2
    assert "pass --overwrite to replace it" in one_line(capsys.readouterr().err)
    assert main([*argv, "--overwrite"]) == 0
    output.with_suffix(".md").write_text("the user's own notes", encoding="utf-8")
    capsys.readouterr()
    assert main([*argv, "--overwrite"]) == 2
    assert "was not written by sts-core" in one_line(capsys.readouterr().err)
    assert output.with_suffix(".md").read_text(encoding="utf-8") == "the user's own notes"
