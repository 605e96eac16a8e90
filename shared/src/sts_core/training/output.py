"""The output folder of a run: refused when it holds an earlier run, locked while in use.

- An ``output_dir`` with anything in it (an earlier run's checkpoints, model, metrics) is
  refused unless ``overwrite_output_dir`` (its contents are then removed first) or
  ``resume_from_checkpoint`` (the run continues there) is given.
- A lock file (``.sts-run.lock``, an OS file lock released when the process ends, even
  when killed) refuses a second run into the same folder while the first is running.
- ``resume_from_checkpoint`` must name a complete checkpoint (see :mod:`sts_core.saving`).

Only the main process (global rank 0) checks, cleans and locks: the other processes of a
launch write nothing before the first save, by which time rank 0 holds the lock.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sts_core.saving import PARTIAL_PREFIX, STAGING_DIR, check_complete_save, remove_path
from sts_core.training.parser import ConfigError

logger = logging.getLogger(__name__)

LOCK_NAME = ".sts-run.lock"


# Where launchers put the global rank: torchrun/accelerate, Open MPI, MPICH/Intel MPI, Slurm.
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "LOCAL_RANK")


def process_rank() -> int:
    """The global rank of this process from the launcher's environment (0 when alone)."""
    for name in RANK_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def is_main_process() -> bool:
    """Global rank 0 of a launch (or a plain process)."""
    return process_rank() == 0


@dataclass
class OutputDirPlan:
    """What :func:`prepare_output_dir` found and did: ``new``, ``replace`` or ``resume``."""

    path: Path
    action: str
    earlier: list[str]
    lock: Any = None

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def describe(self) -> str:
        if self.action == "replace":
            return f"{self.path}: replaces an earlier run ({_listing(self.earlier)})"
        if self.action == "resume":
            return f"{self.path}: continues the run there"
        return f"{self.path}: new"


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:6])
    return shown + (f", … ({len(names)} entries)" if len(names) > 6 else "")


def check_resume_checkpoint(checkpoint: str | None) -> None:
    """A ``resume_from_checkpoint`` that is not a complete checkpoint folder: ConfigError."""
    if checkpoint is None:
        return
    path = Path(checkpoint)
    if not path.is_dir():
        raise ConfigError(f"resume_from_checkpoint: {path} is not a folder")
    try:
        check_complete_save(path, required=True, training=True)
    except OSError as error:
        raise ConfigError(f"resume_from_checkpoint: {error}") from error


def prepare_output_dir(config: Any, dry_run: bool = False) -> OutputDirPlan | None:
    """Check (and, unless ``dry_run``, lock and clean) ``config.output_dir``; ConfigError
    when it cannot be used. Returns None on processes other than the main one."""
    check_resume_checkpoint(config.resume_from_checkpoint)
    if not is_main_process():
        return None
    path = Path(config.output_dir)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"output_dir {path} is a file, not a folder")
    if dry_run and not path.exists():
        _check_creatable(path)
        return OutputDirPlan(path, "new", [])
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"output_dir {path} cannot be created: {error}") from error
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"output_dir {path} is not writable")
    lock = _acquire_lock(path)
    earlier = sorted(e.name for e in path.iterdir() if e.name != LOCK_NAME)
    plan = OutputDirPlan(path, "new", earlier, lock)
    try:
        if earlier and config.resume_from_checkpoint:
            plan.action = "resume"
        elif earlier and config.overwrite_output_dir:
            plan.action = "replace"
        elif earlier:
            raise ConfigError(
                f"output_dir {path} holds an earlier run ({_listing(earlier)}): pass "
                "--overwrite_output_dir true to replace it, --resume_from_checkpoint "
                f"{path}/checkpoint-N to continue it, or choose another output_dir"
            )
    except ConfigError:
        plan.release()
        raise
    if dry_run:
        plan.release()
    elif plan.action == "replace":
        logger.warning("output_dir %s: removing the earlier run (%s)", path, _listing(earlier))
        for name in earlier:
            remove_path(path / name)
    elif plan.action == "resume":  # what a run killed while saving left behind
        for leftover in [path / STAGING_DIR, *path.glob(f"{PARTIAL_PREFIX}*")]:
            remove_path(leftover)
    return plan


def _check_creatable(path: Path) -> None:
    """ConfigError unless the nearest existing ancestor of ``path`` is a writable folder."""
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"output_dir {path} cannot be created: {ancestor} is a file")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"output_dir {path} cannot be created: {ancestor} is not writable")


def _acquire_lock(path: Path) -> Any:
    from filelock import FileLock, Timeout

    lock = FileLock(str(path / LOCK_NAME))
    try:
        lock.acquire(timeout=0)
    except Timeout as error:
        raise ConfigError(
            f"output_dir {path} is in use by another run (it holds {path / LOCK_NAME}): "
            "wait for it to finish or choose another output_dir"
        ) from error
    except OSError as error:  # a file system without locks (some NFS mounts)
        logger.warning(
            "output_dir %s: cannot lock it (%s): a second run into it would not be stopped",
            path,
            error,
        )
        return None
    return lock
