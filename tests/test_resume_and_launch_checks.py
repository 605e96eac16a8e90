"""The launch paths' one-process parts, beside the cross-package tests rather than among the
launches (marker ``launch``, run one at a time on every core):

- Stopping mid-epoch and restarting with ``--resume_from_checkpoint`` logs the same
  per-step losses as the uninterrupted run, for every package's ``train.py``.
- ``sts-launch`` checks a run before it launches anything: a bad input is one line and exit
  2; with ``check_only`` the checks run once and no process starts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from launch_support import PACKAGES, free_port, sts_launch, write_tiny_recipe

from sts_core.testing import load_train_script

# one process, on one thread as each launched process is (OMP_NUM_THREADS=1)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("torch_one_thread")]
COSENT = next(p for p in PACKAGES if p.name == "cosent")


def logged_losses(trainer_state: Path) -> dict[int, float]:
    state = json.loads(trainer_state.read_text(encoding="utf-8"))
    return {entry["step"]: entry["loss"] for entry in state["log_history"] if "loss" in entry}


@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_resume_from_checkpoint_gives_the_same_per_step_losses(
    package: Path, tiny_bert_dir: Path, tmp_path: Path
) -> None:
    main = load_train_script(package).main
    settings = {"eval_strategy": "no", "save_total_limit": "null"}  # dropout on: RNG restored
    full = write_tiny_recipe(
        tmp_path / "full.yaml", package.name, tiny_bert_dir, tmp_path / "full", **settings
    )
    assert main(["--config", str(full)]) == 0
    expected = logged_losses(tmp_path / "full" / "checkpoint-4" / "trainer_state.json")
    assert sorted(expected) == [1, 2, 3, 4]

    # stop after step 2 of 4 (mid-epoch: 4 batches an epoch): start again from its checkpoint
    stopped = tmp_path / "stopped"
    shutil.copytree(tmp_path / "full" / "checkpoint-2", stopped / "checkpoint-2")
    recipe = write_tiny_recipe(
        tmp_path / "stopped.yaml", package.name, tiny_bert_dir, stopped, **settings
    )
    checkpoint = stopped / "checkpoint-2"
    assert main(["--config", str(recipe), "--resume_from_checkpoint", str(checkpoint)]) == 0
    resumed = logged_losses(stopped / "checkpoint-4" / "trainer_state.json")
    assert resumed == pytest.approx(expected, rel=1e-6)


def test_sts_launch_stops_a_bad_input_in_one_line_before_any_process_starts(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under ``accelerate launch`` a bad recipe is a 30-line ChildFailedError traceback and
    exit 1; ``sts-launch`` checks the run first: one line, exit 2, no traceback. (Its
    ``main`` is called here: a launch it should not have started fails with another status;
    the command itself is started by the test below.)"""
    from sts_core.launch import main as sts_launch_main

    launcher = ["--config_file", "accelerate_configs/cpu.yaml", "--num_processes", "2"]
    script = str(COSENT / "train.py")
    for overrides, expected in (
        ({"lerning_rate": "1"}, "lerning_rate"),
        ({"pooling": "maen"}, "unknown pooling mode 'maen'"),
        ({"per_device_train_batch_size": "0"}, "per_device_train_batch_size"),
    ):
        recipe = write_tiny_recipe(
            tmp_path / "bad.yaml", "cosent", tiny_bert_dir, tmp_path / "out", **overrides
        )
        status = sts_launch_main(
            [*launcher, "--main_process_port", str(free_port()), script, "--config", str(recipe)]
        )
        err = capsys.readouterr().err
        assert status == 2, err[-3000:]
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), err[-3000:]
        assert expected in lines[0]
        assert not (tmp_path / "out").exists()


def test_sts_launch_check_only_checks_once_and_starts_no_process(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """The checks ran in sts-launch, then again in every launched process (the line twice);
    with ``check_only`` they run once, and nothing is launched (the method's name here, a
    script path in shared/tests/test_launch_command.py)."""
    recipe = write_tiny_recipe(tmp_path / "r.yaml", "cosent", tiny_bert_dir, tmp_path / "out")
    launcher = ["--config_file", "accelerate_configs/cpu.yaml", "--num_processes", "2"]
    port = ["--main_process_port", str(free_port())]
    result = sts_launch(*launcher, *port, "cosent", "--config", str(recipe), "--check_only", "true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("check_only: the inputs are usable") == 1, result.stdout
    assert "torch.distributed" not in result.stderr and not (tmp_path / "out").exists()
