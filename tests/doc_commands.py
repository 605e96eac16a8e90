"""The shell commands of the Markdown pages (README.md, docs/, the packages' READMEs): the
lines of their fenced ``bash`` blocks and the inline code that is a whole command, so tests
can check that each works as written after the README's set-up."""

from __future__ import annotations

import importlib.util
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [
        REPO / "README.md",
        *(REPO / "docs").glob("*.md"),
        *(REPO / "packages").glob("*/README.md"),
        REPO / "benchmarks" / "README.md",
        REPO / "shared" / "README.md",
    ]
)
SHELL_LANGUAGES = ("bash", "sh", "shell", "console")
#: commands that exist only inside the project's environment (.venv)
VENV_COMMANDS = re.compile(
    r"^(accelerate|mypy|python3?|pytest|ruff|torchrun|deepspeed|sts-[a-z0-9-]+)$"
)
_FENCE = re.compile(r"^(\s*)```+\s*([\w-]*)")
_INLINE = re.compile(r"(?<!`)`((?:[^`\n]|\n(?!\s*\n))+)`(?!`)")  # not over a blank line


@dataclass(frozen=True)
class Command:
    """One shell command of a page: where it is and its text (continuation lines joined,
    the trailing comment removed)."""

    page: Path
    line: int  # 1-based, of its first line
    text: str
    inline: bool

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def words(self) -> list[str]:
        return self.text.split()

    def runs_in_the_venv(self) -> bool:
        """Whether the command is one of the environment's (its first word, after
        ``uv run``); ``accelerate`` only as ``accelerate launch …``."""
        words = self.words[2:] if self.words[:2] == ["uv", "run"] else self.words
        while words and words[0].startswith("--"):  # uv run --with pip python …
            words = words[2:] if len(words) > 1 and not words[0].count("=") else words[1:]
        return bool(words) and VENV_COMMANDS.match(words[0]) is not None


def strip_comment(line: str) -> str:
    """``line`` without a shell comment (a ``#`` at a word's start, outside quotes)."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line.rstrip()


def fenced_commands(page: Path) -> list[Command]:
    """The commands of the page's shell code blocks."""
    commands: list[Command] = []
    language: str | None = None
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = _FENCE.match(raw)
        if fence:
            language = None if language is not None else fence.group(2).lower()
            continue
        if language not in SHELL_LANGUAGES:
            continue
        text = strip_comment(raw)
        if not pending:
            start = number
        if text.endswith("\\"):
            pending.append(text[:-1].strip())
            continue
        pending.append(text.strip())
        joined = " ".join(part for part in pending if part)
        pending = []
        if joined:
            commands.append(Command(page, start, joined, inline=False))
    return commands


def inline_commands(page: Path) -> list[Command]:
    """Inline code outside code blocks (over a line break too) that is a whole command of
    the environment: a launch (``accelerate launch …``), a script run with ``python``, or a
    console command given a recipe, a model, a folder or a file (``sts-eval --model out``,
    ``sts-soup runs/a runs/b``); not a bare name (``sts-launch``, ``sts-eval --quiet``)."""
    lines, in_block = [], False
    for raw in page.read_text(encoding="utf-8").splitlines():
        fence = _FENCE.match(raw) is not None
        lines.append("" if in_block or fence else raw)  # line numbers kept
        in_block = in_block != fence
    text = "\n".join(lines)
    commands: list[Command] = []
    for match in _INLINE.finditer(text):
        span = " ".join(match.group(1).split())
        line = text.count("\n", 0, match.start()) + 1
        command = Command(page, line, span, inline=True)
        if span and command.runs_in_the_venv() and _is_a_whole_command(command):
            commands.append(command)
    return commands


def _is_a_whole_command(command: Command) -> bool:
    words = command.words[2:] if command.words[:2] == ["uv", "run"] else command.words
    name, arguments = words[0], words[1:]
    if name == "accelerate":
        return arguments[:1] == ["launch"] and len(arguments) > 1
    if name.startswith("python"):
        return bool(arguments)
    given = {"--config", "--model", "--output", "--config_file"}  # with their value
    valued = any(a in given for a in arguments[:-1])
    return valued or any("/" in a or a.endswith((".yaml", ".py")) for a in arguments)


def all_commands() -> list[Command]:
    return [c for page in PAGES for c in (*fenced_commands(page), *inline_commands(page))]


def repository_files() -> list[str]:
    """The repository's files as a fresh clone has them, with this checkout's edits: tracked
    and untracked, less what git ignores (``tools/generate_docs.py``'s list). Skips the
    calling test outside a git checkout."""
    import pytest

    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the files git lists are read")
    return docs_generator().repository_files(REPO)


def docs_generator() -> ModuleType:
    """``tools/generate_docs.py`` as a module (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "generate_docs", REPO / "tools" / "generate_docs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
