"""Ctrl-C and killed parents (issue 61, item 6): a command stopped by Ctrl-C prints one line
(what was kept, how to go on) and exits 130 without a traceback; sts-search stops its
workers, and a worker whose search was killed ends by itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from transformers import TrainerCallback

from sts_core.command_files import INTERRUPTED
from sts_core.testing import write_fixture_recipe
from sts_core.training.run import TrainingRun, main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"


class CtrlCAt(TrainerCallback):
    """Raise KeyboardInterrupt (what Ctrl-C raises) when step ``step`` begins."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt


def only_error_line(err: str) -> str:
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    (line,) = [line for line in err.splitlines() if line.startswith(("error: ", "sts-"))]
    return line


def test_ctrl_c_in_training_names_the_checkpoint_and_the_resume(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    output = tmp_path / "run"
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml", "Ctrl-C", tiny_bert_nodropout_dir, FIXTURES / "sts-train.csv",
        FIXTURES / "sts-dev.csv", output, score_range="[0, 5]", per_device_train_batch_size="2",
    )  # fmt: skip
    monkeypatch.setattr(TrainingRun, "build_callbacks", lambda self: [CtrlCAt(3)])
    assert main(["--config", str(recipe)]) == INTERRUPTED
    line = only_error_line(capsys.readouterr().err)
    checkpoint = output / "checkpoint-2"
    assert line == (
        f"error: interrupted (Ctrl-C): the newest complete checkpoint is {checkpoint}; "
        f"continue the run: the same command with --resume_from_checkpoint {checkpoint}"
    )
    assert not (output / ".sts-staging").exists()
    monkeypatch.undo()
    # the lock is released and the resume the line gives finishes the run
    assert main(["--config", str(recipe), "--resume_from_checkpoint", str(checkpoint)]) == 0
    assert (output / "sts_save_complete.json").is_file()


def test_ctrl_c_before_the_first_checkpoint_says_how_to_start_again(
    tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    output = tmp_path / "run"
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml", "Ctrl-C", tiny_bert_dir, FIXTURES / "sts-train.csv",
        FIXTURES / "sts-dev.csv", output, score_range="[0, 5]",
    )  # fmt: skip
    monkeypatch.setattr(TrainingRun, "build_callbacks", lambda self: [CtrlCAt(1)])
    assert main(["--config", str(recipe)]) == INTERRUPTED
    line = only_error_line(capsys.readouterr().err)
    assert line == (
        f"error: interrupted (Ctrl-C): no checkpoint of this run was saved in {output}: run "
        "the same command again with --overwrite_output_dir true"
    )
    monkeypatch.undo()
    assert main(["--config", str(recipe), "--overwrite_output_dir", "true"]) == 0


@pytest.mark.parametrize(
    ("module", "name", "argv"),
    [
        ("sts_core.cli", "eval_main", ["--model", "m", "--pairs", "p.csv"]),
        ("sts_core.mining_cli", "main", ["--model", "m", "--pairs", "p.csv", "--output", "o.csv"]),
        ("sts_core.soup", "main", ["a", "b", "--output", "soup"]),
    ],
)
def test_ctrl_c_in_the_other_commands_is_one_line_and_130(
    module: str, name: str, argv: list[str], monkeypatch, capsys, tmp_path: Path
) -> None:
    import importlib

    monkeypatch.chdir(tmp_path)
    command = importlib.import_module(module)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    # the first thing each one does after parsing its arguments
    target = {"sts_core.cli": "eval_files", "sts_core.mining_cli": "MiningSettings"}
    monkeypatch.setattr(command, target.get(module, "check_inputs"), interrupted)
    assert getattr(command, name)(argv) == INTERRUPTED
    line = only_error_line(capsys.readouterr().err)
    assert line.endswith(
        "interrupted (Ctrl-C): nothing was written half-way (a file is written whole or not at all)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_ctrl_c_in_sts_search_keeps_the_finished_cells(tmp_path: Path, capsys, monkeypatch) -> None:
    from sts_core.search import command

    def interrupted(spec, log=print):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "run_search", interrupted)
    table = tmp_path / "pairs.csv"
    table.write_text("sentence1,sentence2,score\na,b,1\nc,d,2\n", encoding="utf-8")
    argv = ["--train", str(table), "--dev", str(table), "--model", "m", "--methods", "core"]
    assert command.main([*argv, "--output-dir", str(tmp_path / "s")]) == INTERRUPTED
    assert only_error_line(capsys.readouterr().err) == (
        f"error: interrupted (Ctrl-C): the cells finished so far are kept in {tmp_path / 's'}; "
        "the same command goes on from there (the cells that were training start again)"
    )


class _Recorded(set):
    """The scheduler's set of running workers, remembering every worker added to it."""

    def __init__(self) -> None:
        super().__init__()
        self.added: list = []

    def add(self, process) -> None:
        self.added.append(process)
        super().add(process)


def _ended(process) -> bool:
    return (
        process.poll() if isinstance(process, subprocess.Popen) else process.exitcode
    ) is not None


@pytest.mark.parametrize("start", ["fresh", "preloaded"])
def test_an_interrupted_scheduler_stops_its_workers_and_starts_no_more(
    start: str, tmp_path: Path, monkeypatch
) -> None:
    """Ctrl-C while a worker runs (or, preloaded, while the server that forks it starts):
    the worker is stopped and the next one never starts."""
    from sts_core.search import schedule
    from sts_core.search.schedule import Scheduler, Slot

    started = _Recorded()
    monkeypatch.setattr(schedule, "_CHILDREN", started)

    def sleeper(slot: Slot) -> None:
        if start == "preloaded":
            schedule._run_preloaded(time.sleep, (60,))
            return
        with open(tmp_path / "log.txt", "a") as log:
            command = [sys.executable, "-c", "import time; time.sleep(60)"]
            schedule._run_child(command, dict(os.environ), log)

    scheduler = Scheduler([Slot(1, start=start)])
    # Ctrl-C as in a terminal (KeyboardInterrupt), whatever handler an earlier test in this
    # process left (a library's launcher may install its own)
    earlier_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT)).start()  # Ctrl-C in 2 s
    begun = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            scheduler.run([("first", sleeper), ("second", sleeper)])
    finally:
        signal.signal(signal.SIGINT, earlier_handler)
    assert time.monotonic() - begun < 30
    assert len(started.added) == 1  # the second item never started
    assert _ended(started.added[0])  # the running worker was stopped


def test_a_worker_ends_when_its_search_is_killed(tmp_path: Path) -> None:
    """A worker outlived a killed sts-search and kept training."""
    child_pid = tmp_path / "child.pid"
    worker = (
        "import os, time; from sts_core.command_files import end_with_parent; "
        "end_with_parent('its search', 'stopped', 0.2); "
        f"open({str(child_pid)!r}, 'w').write(str(os.getpid())); "
        "time.sleep(60)"
    )
    parent = (
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {worker!r}]); "
        "time.sleep(60)"
    )
    search = subprocess.Popen([sys.executable, "-c", parent])
    deadline = time.monotonic() + 60
    while not child_pid.exists() or not child_pid.read_text():
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.1)
    pid = int(child_pid.read_text())
    search.kill()  # as `kill -9` would: the search cannot stop its worker
    search.wait()
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, "the worker outlived its search"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for init to reap it has ended too
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return True
    return state != "Z"


def test_the_worker_watches_its_parent_from_its_start(monkeypatch) -> None:
    from sts_core.search import worker

    calls = []
    monkeypatch.setattr(worker, "end_with_parent", lambda *args: calls.append("watching"))
    assert worker.main(["nothing"]) == 2
    assert calls == ["watching"]


@pytest.mark.parametrize("variable", ["TORCHELASTIC_RUN_ID", "STS_LAUNCHED", None])
def test_a_launched_training_process_watches_its_launcher(
    variable: str | None, monkeypatch, tmp_path: Path
) -> None:
    """A training process outlived a killed ``sts-launch`` and trained to its end (probe
    case 29); a plain ``sts-train`` (its parent a shell, perhaps gone under ``nohup``) does
    not watch."""
    from sts_core.training import run as run_module

    for name in run_module.LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if variable:
        monkeypatch.setenv(variable, "1")
    calls = []
    monkeypatch.setattr(run_module, "end_with_parent", lambda *args: calls.append(args[0]))
    assert run_module.main(["--config", str(tmp_path / "missing.yaml")]) == 2
    assert calls == (["the launcher that started this training process"] if variable else [])
