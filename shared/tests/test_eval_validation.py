"""``sts-eval`` / ``sts-data``: every bad input is one ``<prog>: error: …`` line on stderr and
exit status 2, found before the model is loaded or the data work is done."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

import sts_core.cli as cli
import sts_core.data.hub as hub
from sts_core.cli import data_main, eval_main
from sts_core.testing import write_stsb_file

FIXTURES = Path(__file__).parent / "fixtures" / "data"
STSB_TEST = "senteval/STS/STSBenchmark/sts-test.csv"
STSB_DEV = "senteval/STS/STSBenchmark/sts-dev.csv"
SICK_TEST = "senteval/SICK/SICK_test_annotated.txt"
SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"


@pytest.fixture
def no_model_loading(monkeypatch):
    """Loading a model fails the test: every check must come before it."""
    from sts_core.encoder import SentenceEncoder

    def refuse(cls, *args, **kwargs):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(SentenceEncoder, "from_pretrained", classmethod(refuse))


@pytest.fixture
def data_copy(tmp_path) -> Path:
    """A writable copy of the fixture data folder."""
    return Path(shutil.copytree(FIXTURES, tmp_path / "data"))


def run_eval(capsys, *options: str, data: Path | str = FIXTURES, model="unused-model"):
    argv = ["--model", str(model), "--tasks", "stsb", "--data-dir", str(data), "--quiet"]
    code = eval_main([*argv, *options])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error_line(err: str, prog: str = "sts-eval") -> str:
    """The single stderr line ``<prog>: error: …``."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prog}: error: "), err
    return lines[0]


def argparse_error(capsys, argv: list[str]) -> str:
    """Exit status 2 and the ``sts-eval: error: …`` line of an argument problem."""
    with pytest.raises(SystemExit) as info:
        eval_main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("sts-eval: error: ")
    assert all(line.startswith(("usage:", " ")) for line in lines[:-1])  # argparse's usage
    return lines[-1]


BASE = ["--model", "unused-model", "--tasks", "stsb", "--data-dir", str(FIXTURES)]


# --------------------------------------------------------------------------- 1, 2: arguments


@pytest.mark.parametrize(
    "option,value",
    [
        ("--batch-size", "-4"),
        ("--batch-size", "0"),
        ("--batch-size", "many"),
        ("--max-length", "0"),
        ("--max-length", "-1"),
    ],
)
def test_sizes_must_be_positive_integers(capsys, no_model_loading, option, value):
    line = argparse_error(capsys, [*BASE, option, value])
    assert f"argument {option}:" in line and value in line


@pytest.mark.parametrize("tasks", [",", " , ,", ""])
def test_empty_task_list_is_an_error(capsys, no_model_loading, tasks):
    line = argparse_error(capsys, ["--model", "m", "--data-dir", str(FIXTURES), "--tasks", tasks])
    assert "argument --tasks: no task given" in line


# --------------------------------------------------------------------------- 3, 8: output


def test_output_under_a_file_fails_before_the_model(tmp_path, capsys, no_model_loading):
    blocker = tmp_path / "results"
    blocker.write_text("a file, not a folder\n")
    target = blocker / "run1" / "tiny"
    code, out, err = run_eval(capsys, "--output", str(target))
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert f"--output {target}.json: cannot write there ({blocker} is not a folder)" in line


def test_output_that_is_a_folder_fails_before_the_model(tmp_path, capsys, no_model_loading):
    (tmp_path / "tiny.json").mkdir()
    code, _, err = run_eval(capsys, "--output", str(tmp_path / "tiny"))
    assert code == 2
    assert f"{tmp_path / 'tiny.json'}: cannot write it, it is a folder" in one_error_line(err)


def test_check_output_path_creates_the_folder_and_leaves_no_probe(tmp_path):
    target = tmp_path / "a" / "b" / "out.jsonl"
    assert cli.check_output_path(target) == target
    assert (tmp_path / "a" / "b").is_dir() and list((tmp_path / "a" / "b").iterdir()) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match=r"--out .*file/x\.txt: cannot write there"):
        cli.check_output_path(tmp_path / "file" / "x.txt", option="--out")


def test_sts_data_filter_output_under_a_file_fails_before_filtering(tmp_path, capsys, monkeypatch):
    import sts_core.data

    def refuse(*args, **kwargs):
        raise AssertionError("filtered before the output was checked")

    monkeypatch.setattr(sts_core.data, "load_filtered_stsb_sick", refuse)
    (tmp_path / "blocker").write_text("x")
    target = tmp_path / "blocker" / "kept.jsonl"
    code = data_main(["filter", "--data-dir", str(FIXTURES), "--output", str(target)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    line = one_error_line(captured.err, "sts-data")
    assert f"--output {target}: cannot write there ({tmp_path / 'blocker'} is not a folder)" in line


# --------------------------------------------------------------------------- 4, 5: data


def test_missing_pairs_set_fails_before_the_model(capsys, no_model_loading):
    code, out, err = run_eval(capsys, "--pairs", "/nope")
    assert code == 2 and out == ""
    assert "/nope" in one_error_line(err)


def test_constant_pairs_set_fails_before_the_model(data_copy, capsys, no_model_loading):
    dev = write_stsb_file(data_copy / STSB_DEV, [2.0, 2.0, 2.0])
    code, _, err = run_eval(capsys, "--pairs", "stsb:dev", data=data_copy)
    assert code == 2
    line = one_error_line(err)
    assert "stsb_dev (stsb:dev): all 3 gold scores are equal" in line
    assert dev.exists()


@pytest.mark.parametrize(
    "task,problem",
    [
        ("stsb", "all 3 gold scores are equal"),
        ("stsb-one-row", "1 scored pair(s)"),
        ("sickr", "0 scored pair(s)"),
    ],
    ids=["all-equal gold", "one row", "header-only SICK"],
)
def test_unusable_task_data_fails_before_the_model(
    data_copy, capsys, no_model_loading, task, problem
):
    if task == "sickr":
        path = data_copy / SICK_TEST
        path.write_text(SICK_HEADER, encoding="utf-8")
    else:
        path = write_stsb_file(data_copy / STSB_TEST, [3.0] * 3 if task == "stsb" else [3.0])
        task = "stsb"
    code = eval_main(["--model", "m", "--tasks", task, "--data-dir", str(data_copy), "--quiet"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    line = one_error_line(captured.err)
    assert line.startswith(f"sts-eval: error: {task} ({path}): {problem}")


# --------------------------------------------------------------------------- 7: device


def fake_cuda(monkeypatch, count: int) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_check_device_without_cuda(monkeypatch):
    fake_cuda(monkeypatch, 0)
    assert cli.check_device(None) == "cpu"
    assert cli.check_device("cpu") == "cpu"
    for name in ("cuda", "cuda:3"):
        with pytest.raises(cli.DeviceError) as info:
            cli.check_device(name)
        message = str(info.value)
        assert f"device {name!r} is not available" in message
        assert "CUDA is not available" in message and message.endswith("available: cpu")


def test_check_device_with_one_gpu(monkeypatch):
    fake_cuda(monkeypatch, 1)
    assert cli.check_device(None) == "cuda"
    assert cli.check_device("cuda:0") == "cuda:0"
    with pytest.raises(
        cli.DeviceError, match=r"'cuda:3' is not available: this machine has 1 CUDA"
    ):
        cli.check_device("cuda:3")
    with pytest.raises(cli.DeviceError, match=r"available: cpu, cuda:0"):
        cli.check_device("cuda:1")


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "meta"])
def test_check_device_unknown_names(monkeypatch, name):
    fake_cuda(monkeypatch, 0)
    with pytest.raises(cli.DeviceError, match=rf"device {name!r} .*; available: cpu"):
        cli.check_device(name)


def test_unavailable_device_fails_before_the_model(monkeypatch, capsys, no_model_loading):
    fake_cuda(monkeypatch, 0)
    code, out, err = run_eval(capsys, "--device", "cuda:3")
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert "device 'cuda:3' is not available" in line and "available: cpu" in line


def test_load_encoder_checks_the_device_first(monkeypatch, no_model_loading):
    fake_cuda(monkeypatch, 0)
    args = cli.make_eval_parser().parse_args(["--model", "m", "--device", "cuda:3"])
    assert isinstance(args, argparse.Namespace)
    with pytest.raises(cli.DeviceError, match="cuda:3"):
        cli.load_encoder(args)


# --------------------------------------------------------------------------- 9, 10: data folder


def test_data_dir_that_is_a_file_is_not_reported_missing(tmp_path, capsys, no_model_loading):
    afile = tmp_path / "data.zip"
    afile.write_text("x")
    code, _, err = run_eval(capsys, data=afile)
    assert code == 2
    line = one_error_line(err)
    assert f"{afile}: data folder given by data_dir is not a folder" in line
    code = data_main(["filter", "--data-dir", str(afile)])
    assert code == 2
    assert "is not a folder" in one_error_line(capsys.readouterr().err, "sts-data")


@pytest.fixture
def hub_unreachable(monkeypatch):
    """No data folder anywhere, the hub switched on but unreachable (no network used)."""
    for name in ("STS_DATA_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    probes = []
    monkeypatch.setattr(hub, "_probe", lambda *args: probes.append(args) or False)

    def refuse(source, split):
        raise AssertionError("the hub was tried although it cannot be reached")

    monkeypatch.setattr(hub, "_load_raw", refuse)
    hub.reset_hub_reachable()
    yield probes
    hub.reset_hub_reachable()


def test_no_data_folder_and_unreachable_hub_fails_at_once(
    capsys, hub_unreachable, no_model_loading
):
    code = eval_main(["--model", "m", "--tasks", "sts12,stsb", "--quiet"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    line = one_error_line(captured.err)
    assert "set STS_DATA_DIR or pass --data-dir" in line and "cannot be reached" in line
    assert len(hub_unreachable) == 1  # one quick probe, not one per task


def test_no_data_folder_offline_names_the_variable(monkeypatch, capsys, hub_unreachable):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = data_main(["filter"])
    assert code == 2
    assert "set STS_DATA_DIR or pass --data-dir" in one_error_line(
        capsys.readouterr().err, "sts-data"
    )
    assert hub_unreachable == []  # offline: no probe at all


# --------------------------------------------------------------------------- LoRA base model


def test_base_model_of_a_full_model_is_refused(tiny_bert_dir, tmp_path, capsys, no_model_loading):
    """--base-model applies to a LoRA adapter folder only; with a complete model it would be
    silently unused, so it is an error (before the model is loaded)."""
    code, out, err = run_eval(capsys, "--base-model", str(tmp_path), model=tiny_bert_dir)
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith("sts-eval: error: --base-model: ")
    assert str(tiny_bert_dir) in line and "not a LoRA adapter folder" in line
