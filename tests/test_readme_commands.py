"""The README gets a newcomer there on the first try: its first screen gives the set-up, the
main and the test command; every command of the README, the docs and the packages' READMEs
that needs the project's environment runs through ``uv run`` (``accelerate: command not
found`` otherwise); and each command of the README's shell blocks works as written after the
set-up, on the real data and models: a training command with ``--check_only true`` appended
(it checks the recipe, data, model and output folder, loads no weights), ``sts-eval`` on one
task, the others as they are."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from doc_commands import REPO, Command, all_commands, fenced_commands

from sts_core.testing import free_port

README = REPO / "README.md"
SET_UP = ("pip install", "uv sync", "git clone", "cd ")
TEST_COMMAND = "bash .ci/test"
TRAINS = re.compile(r"\b(sts-train|sts-launch|accelerate launch|train\.py)\b")
CHECK_LINE = "check_only: the inputs are usable"
README_COMMANDS = fenced_commands(README)


def test_every_command_of_the_pages_runs_through_uv_run() -> None:
    commands = all_commands()
    with_commands = {README, REPO / "benchmarks" / "README.md", REPO / "docs" / "benchmarks.md"}
    assert len(commands) > 50 and {c.page for c in commands} >= with_commands
    outside = [
        f"{c.where}: {c.text}"
        for c in commands
        if c.runs_in_the_venv() and c.words[:2] != ["uv", "run"]
    ]
    assert not outside, "without `uv run` (or an active .venv) these are not found:\n" + "\n".join(
        outside
    )


def test_the_scan_finds_a_command_without_uv_run(tmp_path: Path) -> None:
    """The scan above is not vacuous: each form it must catch, it catches."""
    import doc_commands

    page = tmp_path / "page.md"
    page.write_text(
        "Run `accelerate launch --config_file c.yaml train.py` or\n"
        "`sts-eval --model\nout/model` (over a line break), not `sts-eval --quiet`.\n\n"
        "```bash\nsts-train --config r.yaml \\\n    --output_dir o  # a comment\n"
        "uv run python x.py\n```\n",
        encoding="utf-8",
    )
    found = [*doc_commands.fenced_commands(page), *doc_commands.inline_commands(page)]
    flagged = [(c.line, c.text) for c in found if c.runs_in_the_venv() and c.words[0] != "uv"]
    assert flagged == [
        (6, "sts-train --config r.yaml --output_dir o"),
        (1, "accelerate launch --config_file c.yaml train.py"),
        (2, "sts-eval --model out/model"),
    ]


def test_the_first_screen_gives_set_up_main_and_test_commands() -> None:
    first_screen = "\n".join(README.read_text(encoding="utf-8").splitlines()[:40])
    for command in ("uv sync --locked", "uv run sts-eval --model", "uv run sts-train"):
        assert command in first_screen, command
    assert TEST_COMMAND in first_screen
    assert "source .venv/bin/activate" in first_screen
    assert "STS_DATA_DIR" in first_screen and "STS_MODELS_DIR" in first_screen


def test_the_readme_trains_and_evaluates_locally() -> None:
    """What the next test runs: at least one training command and one local evaluation."""
    texts = [c.text for c in README_COMMANDS]
    assert sum(bool(TRAINS.search(text)) for text in texts) >= 2
    assert any("sts-eval" in text and "$STS_MODELS_DIR" in text for text in texts)


def needs_the_hub(command: Command) -> bool:
    """A word like ``owner/name`` that is no file of the repository: a hub id."""
    for word in command.words:
        word = word.strip("'\"")
        if re.fullmatch(r"[\w.-]+/[\w.-]+", word) and not (REPO / word).exists():
            return True
    return False


def as_run(command: Command, scratch: Path) -> tuple[str, str]:
    """The command line to run and the line its output must hold."""
    text = command.text
    if TRAINS.search(text):
        if text.startswith("uv run accelerate launch "):  # a free port: tests run side by side
            port = f"--main_process_port {free_port()} "
            text = text.replace("accelerate launch ", "accelerate launch " + port, 1)
        return f"{text} --check_only true --output_dir {scratch / 'out'}", CHECK_LINE
    if " sts-eval " in f" {text} ":
        return f"{text} --tasks sts16", "STS16"
    return text, ""


@pytest.mark.real_data
@pytest.mark.real_model
@pytest.mark.parametrize("command", README_COMMANDS, ids=[c.where for c in README_COMMANDS])
def test_a_readme_command_works_as_written(
    command: Command, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if command.text.startswith(SET_UP):
        pytest.skip("the set-up: this test runs in the environment it made")
    if command.text.startswith(TEST_COMMAND):
        pytest.skip("the test command, which runs this test")
    request.getfixturevalue("sts_data_dir")  # skip unless STS_DATA_DIR is set
    request.getfixturevalue("sts_models_dir")
    if shutil.which("uv") is None:
        pytest.skip("uv is not on PATH (the README's set-up installs it)")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    if needs_the_hub(command):
        from sts_core.data.hub import hub_reachable

        if not hub_reachable():
            pytest.skip("a hub id, and the Hugging Face hub cannot be reached")
    else:
        env["HF_HUB_OFFLINE"] = "1"
    line, expected = as_run(command, tmp_path)
    result = subprocess.run(
        ["bash", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, f"{command.where}: {line}\n{result.stderr[-3000:]}"
    assert expected in result.stdout, result.stdout[-3000:]
