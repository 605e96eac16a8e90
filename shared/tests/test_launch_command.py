"""``sts-launch``: the launch settings and the run's checks before any process starts,
failures in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from sts_core import launch
from sts_core.training.config import accelerator_available

CONFIGS = Path(__file__).resolve().parents[2] / "accelerate_configs"
MULTI_NODE = CONFIGS / "multi_node.yaml"


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


@pytest.fixture
def checked_script(tmp_path: Path) -> Path:
    """A training script whose own checks pass."""
    script = tmp_path / "train.py"
    script.write_text("def main(argv):\n    return 0\n", encoding="utf-8")
    return script


def refused_before_launch(monkeypatch, capsys, argv: list[str]) -> str:
    """``sts-launch argv`` exits 2 with one ``sts-launch: error:`` line and starts nothing:
    the line."""
    launched = []
    monkeypatch.setattr(launch, "launch", lambda args: launched.append(args) or 0)
    assert launch.main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sts-launch: error: "), lines
    assert launched == []
    return lines[0]


def config_with(tmp_path: Path, **values: int) -> Path:
    """multi_node.yaml with some of its own values replaced."""
    lines = MULTI_NODE.read_text(encoding="utf-8").splitlines()
    for key, value in values.items():
        lines = [f"{key}: {value}" if line.startswith(f"{key}:") else line for line in lines]
    path = tmp_path / "edited.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--machine_rank", "5", "--num_machines", "2"], "--machine_rank is 5, but --num_machines"),
        (["--machine_rank", "2"], f"but num_machines in {MULTI_NODE} is 2"),
        (["--main_process_port", "99999"], "--main_process_port must be a whole number from 1"),
        (["--num_processes", "3"], f"not a multiple of num_machines in {MULTI_NODE} 2"),
        ([("machine_rank", 3)], "machine_rank in {edited} is 3, but num_machines in {edited}"),
        ([("main_process_port", 70000)], "main_process_port in {edited} must be a whole"),
    ],
)
def test_launch_settings_are_checked_before_any_process_starts(
    monkeypatch, capsys, tmp_path: Path, checked_script: Path, flags: list, expected: str
) -> None:
    """A machine rank at or above the machine count waited 60 s for a network error, a
    port above 65535 was a traceback: each, from a flag or from the config file's own
    values (the flag wins, as in ``accelerate launch``), is one line before the launch."""
    edits = dict(flag for flag in flags if isinstance(flag, tuple))
    config = config_with(tmp_path, **edits) if edits else MULTI_NODE
    options = [flag for flag in flags if not isinstance(flag, tuple)]
    argv = ["--config_file", str(config), *options, str(checked_script)]
    line = refused_before_launch(monkeypatch, capsys, argv)
    assert expected.format(edited=config) in line


def test_good_launch_settings_pass(monkeypatch, tmp_path: Path, checked_script: Path) -> None:
    """The refusals above are not of every multi-machine launch: the file's values with a
    flag's machine rank, or a flag overriding the file's bad value, launch."""
    launched = []
    monkeypatch.setattr(launch, "launch", lambda args: launched.append(args) or 0)
    for config, flags in (
        (MULTI_NODE, ["--machine_rank", "1", "--num_processes", "4"]),
        (config_with(tmp_path, machine_rank=7), ["--machine_rank", "0"]),
        (CONFIGS / "cpu.yaml", ["--num_processes", "2", "--main_process_port", "0"]),
    ):
        assert launch.main(["--config_file", str(config), *flags, str(checked_script)]) == 0
    assert len(launched) == 3


def test_a_missing_config_file_is_one_line(
    monkeypatch, capsys, tmp_path: Path, checked_script: Path
) -> None:
    missing = tmp_path / "nope.yaml"
    line = refused_before_launch(
        monkeypatch, capsys, ["--config_file", str(missing), str(checked_script)]
    )
    assert line.startswith(f"sts-launch: error: --config_file {missing}: not found")


def test_fsdp_without_an_accelerator_is_refused_before_any_process_starts(
    monkeypatch, capsys, checked_script: Path
) -> None:
    """Launched, every process stopped with the line and the launcher added a traceback;
    now the launch stops first."""
    if accelerator_available():
        pytest.skip("a machine with an accelerator runs FSDP")
    argv = ["--config_file", str(CONFIGS / "fsdp.yaml"), str(checked_script)]
    line = refused_before_launch(monkeypatch, capsys, argv)
    assert f"distributed_type FSDP in {CONFIGS / 'fsdp.yaml'}: FSDP needs GPUs" in line
    assert "cpu.yaml" in line


@pytest.mark.parametrize(
    ("script_args", "recipe", "asked"),
    [
        (["--check_only", "true"], "", True),
        (["--check_only"], "", True),  # a bare flag, as the training parser reads it
        (["--check_only=yes"], "", True),
        (["--check_only", "true", "--check_only", "false"], "", False),  # the last one wins
        ([], "check_only: true\n", True),
        (["--check_only", "false"], "check_only: true\n", False),  # the flag over the recipe
        ([], "check_only: false\n", False),
        ([], "learning_rate: 1.0e-5\n", False),
        (["--check_onlyx", "true"], "", False),  # another flag, not an abbreviation
    ],
)
def test_asks_check_only_reads_the_flag_then_the_recipe(
    tmp_path: Path, script_args: list[str], recipe: str, asked: bool
) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(recipe, encoding="utf-8")
    assert launch.asks_check_only(["--config", str(path), *script_args]) is asked


CHECK_LINE = "check_only: the inputs are usable"


@pytest.mark.parametrize(("flags", "launches"), [(["--check_only", "true"], 0), ([], 1)])
def test_check_only_checks_once_and_launches_nothing(
    monkeypatch, capsys, tmp_path: Path, flags: list[str], launches: int
) -> None:
    """``sts-launch … --check_only true`` ran the checks here, then launched the script,
    whose processes ran them again: the check's line twice. Now the checks here are the run."""
    script = tmp_path / "train.py"
    script.write_text(f"def main(argv):\n    print({CHECK_LINE!r})\n    return 0\n")
    launched = []
    monkeypatch.setattr(launch, "launch", lambda args: launched.append(args) or 0)
    argv = ["--config_file", str(CONFIGS / "cpu.yaml"), str(script), *flags]
    assert launch.main(argv) == 0
    assert capsys.readouterr().out.count(CHECK_LINE) == 1
    assert len(launched) == launches
