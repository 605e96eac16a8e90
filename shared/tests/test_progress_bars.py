"""What a person sees while the work runs: a training run shows the Trainer's progress bar
with its ETA (``disable_tqdm`` still turns it off), the final STS table and ``sts-eval``
show one bar per task, named by the task."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sts_core.cli import eval_main
from sts_core.testing import write_fixture_recipe
from sts_core.training import cli_main
from sts_core.training.method_registry import CORE_METHOD

pytestmark = pytest.mark.usefixtures("torch_one_thread")

DATA = Path(__file__).parent / "fixtures" / "data"
TRAINING = Path(__file__).parent / "fixtures" / "training"
# tqdm's bar: "<name>: 100%|█████| 4/4 [00:01<00:00, 3.10it/s]" — elapsed<remaining (the ETA)
BAR = r"(?:^|\r){name}:? *\d+%\|[^\r\n]*\| *\d+/(\d+) \[\d\d:\d\d<\d\d:\d\d"


def bars(stderr: str, name: str) -> list[int]:
    """The totals of the progress bars called ``name`` in ``stderr`` (each redraw counts)."""
    return [int(total) for total in re.findall(BAR.format(name=name), stderr, re.M)]


def test_sts_eval_names_each_bar_by_its_task(tiny_bert_dir: Path, capsys) -> None:
    tasks = ["sts13", "stsb", "sickr"]
    argv = ["--model", str(tiny_bert_dir), "--data-dir", str(DATA), "--batch-size", "2"]
    assert eval_main([*argv, "--tasks", ",".join(tasks)]) == 0
    err = capsys.readouterr().err
    for task in tasks:
        assert bars(err, task), f"no bar named {task}: {err[-500:]!r}"
    assert not bars(err, "Encoding")
    assert eval_main([*argv, "--tasks", "stsb", "--quiet"]) == 0
    assert not bars(capsys.readouterr().err, "stsb")


def train(model: Path, root: Path, **settings: str) -> None:
    """4 steps on the fixture pairs, then the final STS table on STS-B."""
    root.mkdir()
    recipe = write_fixture_recipe(
        root / "recipe.yaml",
        "cosine MSE, fixture pairs",
        model,
        TRAINING / "sts-train.csv",
        TRAINING / "sts-dev.csv",
        root / "out",
        score_range="[0, 5]",
        eval_strategy="no",
        save_strategy="no",
        data_dir=str(DATA),
        final_sts_tasks="[stsb]",
        per_device_eval_batch_size="2",
        **settings,
    )
    assert cli_main(CORE_METHOD, ["--config", str(recipe)]) == 0


def test_a_training_run_shows_a_bar_with_its_eta(
    tiny_bert_dir: Path, tmp_path: Path, capfd
) -> None:
    train(tiny_bert_dir, tmp_path / "shown", disable_tqdm="false")
    err = capfd.readouterr().err
    assert 4 in bars(err, ""), f"no training bar of the 4 steps: {err[-800:]!r}"
    assert bars(err, "stsb"), "the final STS table shows no bar named by its task"
    train(tiny_bert_dir, tmp_path / "quiet", disable_tqdm="true")
    err = capfd.readouterr().err
    assert not bars(err, "") and not bars(err, "stsb")
