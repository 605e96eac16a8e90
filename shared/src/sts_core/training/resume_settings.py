"""A resume is the recipe it was started with: the settings a checkpoint was trained under.

Every checkpoint records the settings its run's result depends on
(``sts_run_settings.json``): every field of the run's ``ModelArguments``,
``DataArguments`` and config (the method's ``BaseConfig``, with ``TrainingArguments``'
fields), the method's name and the number of processes — all but the settings of
:data:`MAY_CHANGE` (and of :data:`MAY_CHANGE_WITHOUT_SELECTION` while
``load_best_model_at_end`` is off), so an option added later is recorded by default.
Weight averaging is recorded by :func:`~sts_core.training.averaging.averaging_settings`
(``ema_decay`` only under ``ema``, the start and period only when averaging is on).
Local paths (the options of :data:`~sts_core.training.path_options.PATH_OPTIONS`) are
recorded resolved (each set's ``path`` of ``train_datasets`` as a
mapping, with its loss, weight, prompt and columns), so a relative and an absolute path to
the same file agree.

A resume (``resume_from_checkpoint``) under other values is refused before any weights
load, in one line listing each changed setting with the checkpoint's value and the run's
(:func:`check_resume_settings`). A checkpoint written before the record existed holds at
most ``weight_averaging.json``: its averaging settings are checked as before
(:func:`~sts_core.training.averaging.check_resume_averaging`) and a warning says the
other settings cannot be.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sts_core.command_files import changed_identity
from sts_core.training.averaging import averaging_settings, check_resume_averaging
from sts_core.training.changeable_settings import may_change, may_change_without_selection
from sts_core.training.path_options import PATH_OPTION_NAMES

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig, DataArguments, ModelArguments

logger = logging.getLogger(__name__)

RUN_SETTINGS_NAME = "sts_run_settings.json"
#: the record's content identities of the run's inputs (:func:`check_resume_inputs`)
INPUTS_KEY = "inputs"

#: settings a resume may change: they decide where and how the run writes, logs and
#: reports, how fast the data is fed (not which data, nor its order), memory and device
#: placement, and what the final model is evaluated on — not the trained weights
#: (derived from ``TrainingArguments``' sections: :mod:`.changeable_settings`)
MAY_CHANGE = may_change()

#: settings that decide the final model only when ``load_best_model_at_end`` picks it
#: among the evaluated checkpoints: free to change while it is off
MAY_CHANGE_WITHOUT_SELECTION = may_change_without_selection()

#: recorded as ``averaging_settings`` gives them (only those the mode uses)
AVERAGING_FIELDS = (
    "weight_averaging",
    "weight_averaging_start",
    "weight_averaging_every",
    "ema_decay",
)

#: the number of processes: known in the launched run, not in ``sts-launch``'s check
PROCESSES = "world_size"


def recipe_settings(
    config: BaseConfig,
    model_args: ModelArguments | None = None,
    data_args: DataArguments | None = None,
) -> dict[str, Any]:
    """The settings of a run that a resume must repeat (what a checkpoint records), as
    JSON values: every field of ``model_args``, ``data_args`` and ``config`` but those a
    resume may change, the method and the number of processes."""
    values: dict[str, Any] = {}
    for arguments in (model_args, data_args):
        if arguments is not None:
            values.update(
                {f.name: getattr(arguments, f.name) for f in dataclasses.fields(arguments)}
            )
    values.update(config.to_dict() if hasattr(config, "to_dict") else vars(config))
    for name in AVERAGING_FIELDS:
        values.pop(name, None)
    values.update(averaging_settings(config))
    values["method"] = getattr(type(config), "declaring_method", None) or "core"
    values[PROCESSES] = int(getattr(config, "world_size", 1))
    changeable = MAY_CHANGE
    if not getattr(config, "load_best_model_at_end", False):
        changeable = changeable | MAY_CHANGE_WITHOUT_SELECTION
    kept = {name: _normalised(name, value) for name, value in values.items()}
    return {name: value for name, value in sorted(kept.items()) if name not in changeable}


def _normalised(name: str, value: Any) -> Any:
    """``value`` as JSON would give it back; a local path resolved."""
    if isinstance(value, Enum):
        value = value.value
    if name in PATH_OPTION_NAMES:  # recorded resolved
        if isinstance(value, dict):  # train_datasets as a mapping: each set's path
            value = {k: {**v, "path": _path(v.get("path"))} for k, v in value.items()}
        else:
            value = [_path(v) for v in value] if isinstance(value, list) else _path(value)
    return json.loads(json.dumps(value, default=str))


def _path(value: Any) -> Any:
    """A local path as an absolute path without symbolic links; anything else as it is."""
    if not isinstance(value, str) or not value:
        return value
    path = Path(value).expanduser()
    return str(path.resolve()) if path.exists() else value


def write_run_settings(folder: Path, settings: dict[str, Any]) -> None:
    """Record ``settings`` (:func:`recipe_settings`) in a checkpoint being written."""
    text = json.dumps(settings, sort_keys=True, indent=1)
    (Path(folder) / RUN_SETTINGS_NAME).write_text(text, encoding="utf-8")


def checkpoint_run_settings(folder: Path) -> dict[str, Any] | None:
    """The settings a checkpoint records; None for a checkpoint written before they were
    recorded."""
    path = Path(folder) / RUN_SETTINGS_NAME
    if not path.is_file():
        return None
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: unreadable record of the run's settings ({error})") from error
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: not a record of the run's settings")
    return settings


def changed_settings(
    saved: dict[str, Any],
    wanted: dict[str, Any],
    defaults: dict[str, Any],
    skip: Iterable[str] = (),
) -> list[str]:
    """``name saved → wanted`` for each setting that differs. A setting the record lacks
    (an option added since the checkpoint was written) differs only when the run sets it
    to something other than its default (``defaults``); one this run does not record
    although it has the option (``ema_decay`` without ``ema``) is decided by another that
    differs, and one it does not have (an option removed since) is listed."""
    changes = []
    for name in sorted(set(saved) | set(wanted)):
        if name in skip:
            continue
        if name not in saved:
            if name in defaults and wanted[name] == defaults[name]:
                continue
            changes.append(f"{name} (not recorded) → {_shown(wanted[name])}")
        elif name not in wanted:
            if name not in defaults:
                changes.append(f"{name} {_shown(saved[name])} → (no such option)")
        elif saved[name] != wanted[name]:
            changes.append(f"{name} {_shown(saved[name])} → {_shown(wanted[name])}")
    return changes


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def declared_defaults(*arguments: ModelArguments | DataArguments | BaseConfig) -> dict[str, Any]:
    """The declared default of every field of the argument objects (JSON values)."""
    defaults = {}
    for item in arguments:
        if item is None or not dataclasses.is_dataclass(item):
            continue
        for f in dataclasses.fields(item):
            if f.default is not dataclasses.MISSING:
                defaults[f.name] = _normalised(f.name, f.default)
            elif f.default_factory is not dataclasses.MISSING:
                defaults[f.name] = _normalised(f.name, f.default_factory())
    return defaults


def check_resume_settings(
    config: BaseConfig, settings: dict[str, Any], *arguments: ModelArguments | DataArguments
) -> None:
    """ValueError, before any weights load, when ``resume_from_checkpoint`` names a
    checkpoint saved under other ``settings`` (:func:`recipe_settings` of this run;
    ``arguments``: the argument objects they came from, for their defaults). The number of
    processes is not compared under ``check_only`` (``sts-launch`` checks in one process
    what it then launches in several). A checkpoint without the record: its averaging
    settings are checked, and a warning says the others cannot be."""
    checkpoint = config.resume_from_checkpoint
    if not checkpoint or not Path(checkpoint).is_dir():
        return
    saved = checkpoint_run_settings(Path(checkpoint))
    if saved is None:
        check_resume_averaging(config)
        logger.warning(
            "resume_from_checkpoint %s does not record the settings it was trained under "
            "(written by an older version): only its weight_averaging settings are checked; "
            "resume with the recipe it was started with",
            checkpoint,
        )
        return
    skip: tuple[str, ...] = (PROCESSES,) if getattr(config, "check_only", False) else ()
    skip += (INPUTS_KEY,)
    changes = changed_settings(saved, settings, declared_defaults(config, *arguments), skip)
    if changes:
        raise ValueError(
            f"resume_from_checkpoint {checkpoint} was saved under other settings: "
            f"{', '.join(changes)}; resume with the same recipe or start a new run"
        )
    check_resume_inputs(checkpoint, saved.get(INPUTS_KEY), settings.get(INPUTS_KEY, {}))


def check_resume_inputs(
    checkpoint: str, saved: dict[str, Any] | None, inputs: dict[str, Any]
) -> None:
    """ValueError naming the first input whose content changed since ``checkpoint`` was
    saved (same path, other rows or weights), with the old and new identity. A checkpoint
    that records no identities (written before they were recorded) is not compared."""
    if saved is None:
        return
    for key, identity in inputs.items():
        change = changed_identity(saved[key], identity) if key in saved else None
        if change:
            raise ValueError(
                f"resume_from_checkpoint {checkpoint}: its input {key} changed since the "
                f"checkpoint was saved ({change}): resume with the inputs it was trained on, "
                "or start a new run"
            )
