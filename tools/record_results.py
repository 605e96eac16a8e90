"""Record committed results as written by the project, so that a re-run may replace them.

    uv run python tools/record_results.py benchmarks/results          # every folder under it
    uv run python tools/record_results.py --check benchmarks/results  # writes nothing

A command of this project replaces an existing file only when the ledger of its folder
(``.sts-outputs.json``, :mod:`sts_core.command_files`) records it with its current size and
content hash. Results committed before the ledger existed have none, so a benchmark run
again would refuse to replace them. This records, in each folder's ledger, every file under
the given folders that git tracks and that is unchanged since the last commit (a file
edited by hand, or not committed, is left out: the project did not write it). ``--check``
lists the tracked files the ledgers do not vouch for and exits 1 when there are any
(``tests/test_command_files_everywhere.py`` runs it on ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from sts_core import command_files as files

REPO = Path(__file__).resolve().parents[1]
#: the writer the ledger names for what this records
COMMAND = "tools/record_results.py (committed results)"


def tracked_unchanged(folder: Path) -> list[Path]:
    """The files under ``folder`` that git tracks and that equal their committed content
    (ledgers and temporary files aside)."""

    def git(*args: str) -> list[str]:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, check=True)
        return [name for name in done.stdout.decode().split("\0") if name]

    tracked = git("ls-files", "-z", "--", str(folder))
    changed = set(git("diff", "--name-only", "-z", "HEAD", "--", str(folder)))
    return [
        REPO / name
        for name in tracked
        if name not in changed
        and Path(name).name != files.LEDGER_NAME
        and not files.is_scratch(Path(name).name)
    ]


def unvouched(paths: Sequence[Path]) -> list[Path]:
    """The paths no ledger vouches for (:func:`sts_core.command_files.written_by_project`)."""
    return [path for path in paths if files.written_by_project(path) is None]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders of committed results")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    paths = [path for folder in args.folders for path in tracked_unchanged(folder.resolve())]
    missing = unvouched(paths)
    if args.check:
        for path in missing:
            print(f"not in its folder's ledger: {path.relative_to(REPO)}")
        return 1 if missing else 0
    files.set_command(COMMAND)
    for path in missing:
        files.record_output(path)
    print(f"recorded {len(missing)} of {len(paths)} committed files (the others were already)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
