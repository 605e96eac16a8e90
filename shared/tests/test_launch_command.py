"""``sts-launch``: the run's checks before any process starts, failures in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from sts_core import launch


def test_missing_script_is_one_line(capsys, tmp_path: Path) -> None:
    assert launch.main([str(tmp_path / "nope.py"), "--config", "r.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"sts-launch: error: training script {tmp_path / 'nope.py'} not found"


def test_script_check_runs_with_check_only(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    record = tmp_path / "argv.txt"
    script.write_text(
        "def main(argv):\n"
        f"    open({str(record)!r}, 'w').write(' '.join(argv))\n"
        "    return 2 if '--bad' in argv else 0\n"
    )
    assert launch.check_script(script, ["--config", "r.yaml", "--bad"]) == 2
    assert launch.check_script(script, ["--config", "r.yaml"]) == 0
    assert record.read_text() == "--config r.yaml --check_only true"


@pytest.mark.parametrize(
    "raised",
    [
        subprocess.CalledProcessError(returncode=3, cmd=["python", "train.py"]),
        ChildFailedError(
            "train.py", {1: ProcessFailure(local_rank=1, pid=1, exitcode=3, error_file="")}
        ),
    ],
)
def test_a_failed_process_is_one_line_with_its_exit_status(
    monkeypatch, capsys, raised: Exception
) -> None:
    def fails(args):
        raise raised

    monkeypatch.setattr("accelerate.commands.launch.launch_command", fails)
    assert launch.launch(object()) == 3
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sts-launch: error: ")
    assert "exited with status 3" in lines[0]
