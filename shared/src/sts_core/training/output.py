"""The output folder of a run: refused when it holds an earlier run, locked while in use.

- An ``output_dir`` with anything in it (an earlier run's checkpoints, model, metrics) is
  refused unless ``overwrite_output_dir`` (what sts-core wrote there is then removed
  first; a folder holding anything else is refused: :mod:`sts_core.command_files`) or
  ``resume_from_checkpoint`` (the run continues there) is given.
- A lock file (``.sts-run.lock``, an OS file lock released when the process ends, even
  when killed) refuses a second run into the same folder while the first is running.
- ``resume_from_checkpoint`` must name a complete checkpoint (see :mod:`sts_core.saving`).
- No input of the run lies in what it would delete or write over (:func:`check_inputs_outside`):
  the model, the teacher, every data file and folder, the data folder and (but for the
  resume checkpoint itself, on a resume) a checkpoint are refused inside ``output_dir``,
  and ``output_dir`` is refused inside a model, teacher or data folder it would replace.
- A folder that holds only what a killed run left while saving (``.sts-partial-*``,
  ``.sts-staging``) is cleaned and used as a new one.

Only the main process (global rank 0) checks, cleans and locks: the other processes of a
launch write nothing before the first save, by which time rank 0 holds the lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sts_core.command_files import (
    RUN_LOCK,
    content_identity,
    forms,
    inside,
    record_output,
    written_by_project,
)
from sts_core.distributed import is_main_process
from sts_core.saving import (
    PARTIAL_PREFIX,
    SAVE_MARKER,
    STAGING_DIR,
    check_complete_save,
    checkpoints,
    remove_path,
)
from sts_core.training.curves import CURVES_IMAGE
from sts_core.training.multi_dataset import train_references
from sts_core.training.parser import ConfigError
from sts_core.training.path_options import PATH_OPTIONS, PathOption

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig, DataArguments, ModelArguments

logger = logging.getLogger(__name__)

LOCK_NAME = RUN_LOCK
METRICS_NAME = "metrics.json"
#: what a run writes beside its model (removed before a new model is published)
RESULT_FILES = (METRICS_NAME, "sts_results.json", "sts_results.md", CURVES_IMAGE)
#: where the Trainer's TensorBoard writer logs, inside output_dir
TENSORBOARD_DIR = "runs"


@dataclass
class OutputDirPlan:
    """What :func:`prepare_output_dir` found and did: ``new``, ``replace`` or ``resume``."""

    path: Path
    action: str
    earlier: list[str]
    lock: Any = None
    leftovers: list[str] = field(default_factory=list)  # a killed run's staging files

    def release(self, remove: bool = False) -> None:
        """Release the lock; ``remove``: and its file (made by this check, which ends the
        run: a refused or checked folder is left as it was)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None
            if remove:
                (self.path / LOCK_NAME).unlink(missing_ok=True)

    def describe(self) -> str:
        if self.action == "replace":
            return f"{self.path}: replaces an earlier run ({_listing(self.earlier)})"
        if self.action == "resume":
            return f"{self.path}: continues the run there"
        if self.leftovers:
            return f"{self.path}: new (removes what a killed run left: {_listing(self.leftovers)})"
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


def prepare_output_dir(
    config: BaseConfig, dry_run: bool = False, inputs: Sequence[tuple[str, Path]] = ()
) -> OutputDirPlan | None:
    """Check (and, unless ``dry_run``, lock and clean) ``config.output_dir``; ConfigError
    when it cannot be used, or when one of ``inputs`` (option, local path:
    :func:`run_inputs`) lies in what the run would delete or write over — checked on every
    process, before anything is removed. Returns None on processes other than the main
    one."""
    check_resume_checkpoint(config.resume_from_checkpoint)
    path = Path(config.output_dir)
    check_inputs_outside(path, inputs, planned_action(config))
    if not is_main_process():
        return None
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
    created = not (path / LOCK_NAME).exists()  # removed again when the run does not go on
    lock = _acquire_lock(path)
    earlier = sorted(e.name for e in path.iterdir() if e.name != LOCK_NAME)
    plan = OutputDirPlan(path, "new", earlier, lock)
    try:
        foreign = [name for name in earlier if written_by_project(path / name) is None]
        if earlier and config.resume_from_checkpoint:
            plan.action = "resume"
            _refuse_foreign(path, foreign, "resume")
        elif earlier and config.overwrite_output_dir:
            plan.action = "replace"
            _refuse_foreign(path, foreign, "replace")
        elif earlier and all(_is_leftover(name) for name in earlier):
            plan.leftovers, plan.earlier = earlier, []
        elif earlier:
            raise ConfigError(
                f"output_dir {path} holds an earlier run ({_listing(earlier)}): pass "
                f"--overwrite_output_dir true to replace it{_resume_hint(path)}, or choose "
                "another output_dir"
            )
    except ConfigError:
        plan.release(remove=created)
        raise
    if dry_run:
        plan.release(remove=created)
    elif plan.leftovers:
        logger.warning(
            "output_dir %s: removing what a run killed while saving left (%s)",
            path,
            _listing(plan.leftovers),
        )
        for name in plan.leftovers:
            remove_path(path / name)
    elif plan.action == "replace":
        logger.warning("output_dir %s: removing the earlier run (%s)", path, _listing(earlier))
        for name in earlier:
            remove_path(path / name)
    elif plan.action == "resume":  # what a run killed while saving left behind
        for leftover in [path / STAGING_DIR, *path.glob(f"{PARTIAL_PREFIX}*")]:
            remove_path(leftover)
    if not dry_run:
        _claim_logs(path, config)
    return plan


def _refuse_foreign(path: Path, foreign: list[str], action: str) -> None:
    """ConfigError when ``output_dir`` holds entries sts-core did not write that the run
    would remove (``replace``) or write over (``resume``: its result files)."""
    if not foreign:
        return
    what = (
        "--overwrite_output_dir true removes only what sts-core wrote"
        if action == "replace"
        else "the resumed run saves its model and results there, over files of any name"
    )
    raise ConfigError(
        f"output_dir {path} holds files sts-core did not write ({_listing(foreign)}): "
        f"{what}; nothing was removed: move them out or choose another output_dir"
    )


def _claim_logs(path: Path, config: BaseConfig) -> None:
    """Record in the folder's ledger the log folder the Trainer's TensorBoard writer makes
    inside ``output_dir`` (the run empties or creates the folder before it, so whatever is
    written there is the run's)."""
    report_to = config.report_to if isinstance(config.report_to, list) else [config.report_to]
    if any(str(name) in ("tensorboard", "all") for name in report_to):
        record_output(path / TENSORBOARD_DIR, kind="folder")


def _is_leftover(name: str) -> bool:
    """What a run killed while saving leaves: a staging folder or a partial file."""
    return name == STAGING_DIR or name.startswith(PARTIAL_PREFIX)


def _resume_hint(path: Path) -> str:
    """``, --resume_from_checkpoint <newest complete checkpoint> to continue it`` when the
    folder holds one; empty when it holds none (nothing there to resume from)."""
    complete = [folder for folder in checkpoints(path) if (folder / SAVE_MARKER).is_file()]
    if not complete:
        return ""
    return f", --resume_from_checkpoint {complete[-1]} to continue it"


def planned_action(config: BaseConfig) -> str:
    """What the run would do to a non-empty ``output_dir``: ``resume``, ``replace`` or
    (``new``) refuse it."""
    if config.resume_from_checkpoint:
        return "resume"
    return "replace" if config.overwrite_output_dir else "new"


# what the run does in output_dir, by planned action: why an input may not be there
_WHAT_THE_RUN_DOES = {
    "replace": "--overwrite_output_dir true would delete it",
    "resume": "the resumed run removes staging folders, rotates checkpoints and saves its "
    "model there",
    "new": "the run saves its model and checkpoints there",
}


def check_inputs_outside(output_dir: Path, inputs: Sequence[tuple[str, Path]], action: str) -> None:
    """ConfigError when an input of the run lies in what it would delete or write over:
    equal to or inside ``output_dir`` (but the resume checkpoint on a resume, unless it is
    inside a staging folder the resume removes), or an input folder (model, teacher,
    checkpoint, data) that holds ``output_dir``, in every mode. Paths are compared as
    given (made absolute) and with symbolic links resolved, as
    :func:`sts_core.command_files.check_off_inputs` compares them for every other command."""
    target = forms(output_dir)
    for name, input_path in inputs:
        read = forms(input_path)
        if inside(read, target) and not _expected_inside(name, input_path, output_dir, action):
            relation = "is" if read & target else "holds"
            what = f"{name}" if read & target else f"{name} {input_path}"
            raise ConfigError(
                f"output_dir {output_dir} {relation} the run's input {what}: "
                f"{_WHAT_THE_RUN_DOES[action]}; nothing was removed: choose another "
                "output_dir or move the input out of it"
            )
        if inside(target, read):
            raise ConfigError(
                f"output_dir {output_dir} is inside the run's input {name} {input_path}: "
                f"{_WHAT_THE_RUN_DOES[action]} (part of {input_path}); nothing was "
                "removed: choose an output_dir outside it"
            )


def _expected_inside(name: str, path: Path, output_dir: Path, action: str) -> bool:
    """The resume checkpoint of a resume, in place (not in a staging folder it removes)."""
    if action != "resume" or name != "resume_from_checkpoint":
        return False
    for outer in forms(output_dir):
        for inner in forms(path):
            if inner != outer and outer in inner.parents:
                return not _is_leftover(inner.relative_to(outer).parts[0])
    return False


def run_inputs(
    model_args: ModelArguments, data_args: DataArguments, config: BaseConfig
) -> list[tuple[str, Path]]:
    """Every local path the run reads, with its option: the model (and a LoRA adapter's
    base model), the teacher, the resume checkpoint, each training, dev, final and
    threshold set (a registry dataset's file or folder under the data folder) and the data
    folder (the ``input`` options of :data:`~sts_core.training.path_options.PATH_OPTIONS`).
    Hub ids and registry datasets read from the hub are not local paths."""
    return [(label, path) for _, label, path in _local_inputs(model_args, data_args, config)]


def input_identities(
    model_args: ModelArguments, data_args: DataArguments, config: BaseConfig
) -> dict[str, Any]:
    """``"<option> <path or hub id>"`` → :func:`~sts_core.command_files.content_identity`
    of every input the trained weights depend on (the ``identity`` options of
    :data:`~sts_core.training.path_options.PATH_OPTIONS`): the model (and a LoRA adapter's
    base), the teacher, each training, dev and threshold set (local, or a hub id for the
    models). The data folder as a whole and the resume checkpoint are left out (the sets
    read from the folder are listed; the checkpoint is checked by its save marker)."""
    identities = {}
    for option in PATH_OPTIONS:
        value = _option_value(option.name, model_args, data_args, config)
        if option.model and value and not Path(str(value)).expanduser().exists():  # a hub id
            identities[f"{option.name} {value}"] = content_identity(value)
    for option, label, path in _local_inputs(model_args, data_args, config):
        if option.identity:
            identities[f"{label} {path.expanduser().resolve()}"] = content_identity(path)
    return identities


def _local_inputs(
    model_args: ModelArguments, data_args: DataArguments, config: BaseConfig
) -> Iterator[tuple[PathOption, str, Path]]:
    """(option, label, path) of each local path the run reads, in the options' order."""
    for option in PATH_OPTIONS:
        if not option.input:
            continue
        for label, value in _option_paths(option, model_args, data_args, config):
            path = Path(str(value)).expanduser() if value else None
            if path is not None and path.exists():
                yield option, label, path


def _option_paths(
    option: PathOption, model_args: ModelArguments, data_args: DataArguments, config: BaseConfig
) -> list[tuple[str, Any]]:
    """(label, path or None) of what ``option`` names: a data option's references resolved
    to where they are read from, a model's adapter base beside it, the data folder's
    default."""
    name = option.name
    value = _option_value(name, model_args, data_args, config)
    if name == "model_name_or_path":
        return [(name, value), (f"{name}'s base model", _adapter_base(value))]
    if name == "data_dir":
        return [(name, value or os.environ.get("STS_DATA_DIR"))]
    if option.split is None:
        return [(name, value)]
    references = train_references(value) if isinstance(value, Mapping | list | tuple) else [value]
    return [
        (name, _data_path(str(reference), option.split, data_args))
        for reference in references
        if reference and str(reference).lower() != "none"
    ]


def _option_value(name: str, *arguments: Any) -> Any:
    """The value of option ``name`` in the first of ``arguments`` that has it (None)."""
    for holder in arguments:
        if hasattr(holder, name):
            return getattr(holder, name)
    return None


def _adapter_base(model: str | None) -> str | None:
    """The base model a LoRA adapter folder records, or None."""
    from sts_core.encoder.location import ADAPTER_CONFIG_NAME, is_adapter_folder, read_json

    if not model or not is_adapter_folder(model):
        return None
    try:
        config = read_json(Path(model).expanduser() / ADAPTER_CONFIG_NAME) or {}
    except (OSError, ValueError):
        return None
    return config.get("base_model_name_or_path") if isinstance(config, dict) else None


def _data_path(reference: str, split: str, data_args: DataArguments) -> str | None:
    """Where a data reference is read from (:func:`sts_core.data.references.reference_path`)."""
    from sts_core.data.references import reference_path

    return reference_path(reference, split, data_args.data_dir, data_args.data_variant)


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
