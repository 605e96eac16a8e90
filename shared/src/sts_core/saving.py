"""Atomic saves: a folder is either completely written or recognisably incomplete.

Every folder this library writes (the final model, each checkpoint) is first written to a
staging folder and then moved into place; the last file written is the save marker
``sts_save_complete.json``, which lists every file of the save with its size. A loader
checks the marker before reading anything (:func:`check_complete_save`): a save that was
interrupted (a kill, a full disk) or a folder whose files were changed afterwards is
refused with an error naming the folder and what is missing, never loaded as a model.

Only the standard library is imported here (``sts-eval``'s cold start).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SAVE_MARKER = "sts_save_complete.json"
PARTIAL_PREFIX = ".sts-partial"
STAGING_DIR = ".sts-staging"
ENCODER_CONFIG_NAME = "sts_encoder_config.json"


UNCHECKED_FILES = frozenset({"README.md"})


class IncompleteSaveError(OSError):
    """A folder written by this library whose save did not complete (or was altered)."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _publish_mode(path: Path) -> None:
    """Give a written file or folder the ordinary permissions (the umask's), not 0600."""
    mask = _umask()
    for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.chmod(item, (0o777 if item.is_dir() else 0o666) & ~mask)


def list_files(folder: Path, names: Iterable[str] | None = None) -> dict[str, int]:
    """Relative path → size of every file under ``folder`` (or under its entries
    ``names``), staging folders, the marker and the run lock excluded."""
    roots = [folder / name for name in names] if names is not None else [folder]
    files = {}
    for root in roots:
        for path in sorted([root, *root.rglob("*")] if root.is_dir() else [root]):
            relative = path.relative_to(folder)
            if path.is_file() and not _is_scratch(relative):
                files[relative.as_posix()] = path.stat().st_size
    return files


def _is_scratch(relative: Path) -> bool:
    first = relative.parts[0]
    return first.startswith((PARTIAL_PREFIX, STAGING_DIR)) or first in (
        SAVE_MARKER,
        ".sts-run.lock",
    )


def write_json_atomic(path: Path, content: Any) -> None:
    """Write JSON to a temporary file beside ``path``, then rename it into place."""
    temporary = path.with_name(f"{PARTIAL_PREFIX}-{os.getpid()}-{path.name}")
    temporary.write_text(json.dumps(content, indent=2, default=str), encoding="utf-8")
    _publish_mode(temporary)
    os.replace(temporary, path)


def write_save_marker(
    folder: str | os.PathLike, names: Iterable[str] | None = None, **info: Any
) -> None:
    """Mark ``folder`` as completely written: the files and sizes of the model save (all of
    the folder, or its entries ``names``), and ``info``."""
    folder = Path(folder)
    content = {
        "complete": True,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "save_id": uuid.uuid4().hex,  # results written beside the model name it
        **info,
    }
    content["files"] = list_files(folder, names)
    write_json_atomic(folder / SAVE_MARKER, content)


def add_training_files(folder: str | os.PathLike, **info: Any) -> None:
    """Extend the marker of a model save with the files written beside it since (a
    checkpoint's optimizer, scheduler, RNG and trainer state): ``training_files``, checked
    when a run resumes from the folder, not when the model is loaded."""
    folder = Path(folder)
    content = read_save_marker(folder) or {"files": {}}
    every = list_files(folder)
    content.update(info)
    content["training_files"] = {k: v for k, v in every.items() if k not in content["files"]}
    write_json_atomic(folder / SAVE_MARKER, content)


def read_save_marker(folder: Path) -> dict[str, Any] | None:
    marker = folder / SAVE_MARKER
    if not marker.is_file():
        return None
    try:
        return json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise IncompleteSaveError(f"{marker}: unreadable save marker ({error})") from error


def expects_marker(folder: Path) -> bool:
    """Whether ``folder`` was (being) written by this library's atomic save: it has the
    marker, a staging folder, or an encoder config that declares the marker."""
    if (folder / SAVE_MARKER).exists() or any(folder.glob(f"{PARTIAL_PREFIX}*")):
        return True
    config = folder / ENCODER_CONFIG_NAME
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("save_marker") == SAVE_MARKER
    except (OSError, ValueError):
        return True  # a half-written config of ours


def check_complete_save(
    folder: str | os.PathLike, required: bool = False, training: bool = False
) -> None:
    """Raise :class:`IncompleteSaveError` unless ``folder`` holds a complete save.

    A folder that does not come from this library's atomic save (a transformers or
    sentence-transformers folder) passes unless ``required``. Otherwise the marker must
    exist and every model file it lists must be there with its recorded size; with
    ``training`` (resuming) the training-state files too. The model card (README.md) may
    be edited freely.
    """
    folder = Path(folder)
    if not expects_marker(folder) and not required:
        return
    marker = read_save_marker(folder)
    if marker is None:
        raise IncompleteSaveError(
            f"{folder}: incomplete save (no {SAVE_MARKER}): the run that wrote it was "
            "interrupted while saving, or the folder was not written by sts-core"
            + _last_complete_hint(folder)
        )
    listed = dict(marker.get("files", {}))
    if training:
        listed.update(marker.get("training_files", {}))
    problems = []
    for name, size in listed.items():
        if name in UNCHECKED_FILES:
            continue
        path = folder / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif path.stat().st_size != size:
            problems.append(f"{name} has {path.stat().st_size} bytes, the save wrote {size}")
    if problems:
        raise IncompleteSaveError(
            f"{folder}: not the folder that was saved: {'; '.join(problems[:5])}"
            + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        )


def _last_complete_hint(folder: Path) -> str:
    """Where to resume from: the newest complete checkpoint beside or inside ``folder``."""
    candidates = checkpoints(folder) + checkpoints(folder.parent)
    complete = [c for c in candidates if c != folder and (c / SAVE_MARKER).is_file()]
    complete.sort(key=lambda p: int(p.name[11:]))
    return f"; the last complete checkpoint is {complete[-1]}" if complete else ""


def checkpoints(folder: Path) -> list[Path]:
    """``checkpoint-N`` sub-folders, by step."""
    found = [p for p in folder.glob("checkpoint-*") if p.is_dir() and p.name[11:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[11:]))


def remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextmanager
def staged_contents(target: str | os.PathLike, replaces: Iterable[str] = ()) -> Iterator[Path]:
    """Write into a staging folder inside ``target``; on success move its entries into
    ``target`` and write the save marker last.

    The old marker goes first, then the encoder config (which declares the marker), then
    every other entry; then the files of the previous save that this one does not write
    (and the entries ``replaces``, for folders saved before markers existed) are removed.
    A folder interrupted at any point has no marker and is refused by loaders.
    """
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    staging = target / f"{PARTIAL_PREFIX}-{os.getpid()}"
    remove_path(staging)
    staging.mkdir()
    try:
        yield staging
        previous = read_save_marker(target) if (target / SAVE_MARKER).is_file() else None
        (target / SAVE_MARKER).unlink(missing_ok=True)
        entries = sorted(staging.iterdir(), key=lambda p: p.name != ENCODER_CONFIG_NAME)
        for entry in entries:
            _publish_mode(entry)
            remove_path(target / entry.name)
            os.replace(entry, target / entry.name)
        written = {p.name for p in entries}
        stale = {Path(name).parts[0] for name in (previous or {}).get("files", {})}
        for name in stale.union(replaces) - written:
            remove_path(target / name)
        write_save_marker(target, written)
    finally:
        remove_path(staging)


def publish_folder(staging: Path, target: Path) -> None:
    """Rename a completely written folder into place, replacing an older one."""
    if target.exists():
        remove_path(target)
    _publish_mode(staging)
    os.replace(staging, target)
