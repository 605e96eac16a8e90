"""``sts-launch``: ``accelerate launch`` that checks the run first and fails in one line.

``sts-launch [accelerate launch options] packages/<m>/train.py --config <recipe>.yaml``
takes exactly the options of ``accelerate launch``; instead of a script, the name of an
installed method (``sts-launch mymethod --config <recipe>.yaml``: entry-point group
``sts_core.methods``) launches ``python -m sts_core.training.run --method mymethod``.
Before any process starts, it runs the training script's own checks in this process (the
script's ``main`` with ``--check_only true``: arguments, model folder, data, output
folder), so a bad input is one line ``error: …`` and exit status 2. When a launched
process fails later, it prints one line naming the exit status (the process's own message
is above it) instead of the launcher's traceback, and exits with that status.

``accelerate launch`` itself works too: each process still stops before training with the
one-line error and exit status 2, but the launcher adds its own traceback and exits 1.
"""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def load_script_main(script: Path) -> Callable[[list[str]], int] | None:
    """The ``main(argv)`` of a training script, imported by path (None if it has none)."""
    spec = importlib.util.spec_from_file_location(f"_sts_launch_{script.stem}", script)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, "main", None)


def check_script(script: Path, script_args: list[str]) -> int:
    """Run the script's checks here (``--check_only true``); its exit status."""
    main = load_script_main(script)
    if main is None:
        print(f"sts-launch: {script} has no main(argv): launching without checks", file=sys.stderr)
        return 0
    return int(main([*script_args, "--check_only", "true"]) or 0)


RUN_MODULE = "sts_core.training.run"


def method_named(name: str) -> str | None:
    """``name`` when it is an installed method's (not a path), else None."""
    if Path(name).suffix or "/" in name or "\\" in name:
        return None
    from sts_core.method import installed_method

    return name if installed_method(name) is not None else None


def launch_method(args: Any, method: str) -> int:
    """Check, then launch, the method ``method`` through :data:`RUN_MODULE` (``-m``)."""
    from sts_core.training.run import main as run_main

    script_args = ["--method", method, *args.training_script_args]
    status = int(run_main([*script_args, "--check_only", "true"]) or 0)
    if status != 0:
        return status
    args.module, args.training_script, args.training_script_args = True, RUN_MODULE, script_args
    return launch(args)


def launch(args: object) -> int:
    """``accelerate launch`` with ``args``; the first failed process's exit status."""
    from accelerate.commands.launch import launch_command
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    try:
        launch_command(args)
    except subprocess.CalledProcessError as error:
        return _failed(error.returncode, "the training process")
    except ChildFailedError as error:
        rank, failure = error.get_first_failure()
        return _failed(failure.exitcode, f"the training process of rank {rank}")
    return 0


def _failed(status: int, who: str) -> int:
    status = status if status and status > 0 else 1
    print(
        f"sts-launch: error: {who} exited with status {status} (its message is above)",
        file=sys.stderr,
    )
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sts-launch``."""
    from accelerate.commands.launch import launch_command_parser

    parser = launch_command_parser()
    parser.prog = "sts-launch"
    parser.description = __doc__.split("\n\n")[1]
    args = parser.parse_args(argv)
    script = Path(args.training_script)
    method = None if script.is_file() else method_named(args.training_script)
    if method is not None:
        return launch_method(args, method)
    if not script.is_file():
        print(f"sts-launch: error: training script {script} not found", file=sys.stderr)
        return 2
    status = check_script(script, list(args.training_script_args))
    if status != 0:
        return status
    return launch(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
