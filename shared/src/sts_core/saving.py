"""Atomic saves: a folder is either completely written or recognisably incomplete.

Every folder this library writes (the final model, each checkpoint) is first written to a
staging folder and then moved into place; the last file written is the save marker
``sts_save_complete.json``, which lists every file of the save with its size and a content
hash (xxh3-128). A loader checks the marker before reading anything
(:func:`check_complete_save`): a save that was interrupted (a kill, a full disk), a folder
whose files were changed afterwards (even in place, at the same size) or a staging folder
is refused with an error naming the folder and the file, never loaded as a model. A save
that fails while writing (a full disk, a file-size limit) raises :class:`SaveError` naming
the folder and the cause, with nothing published.

Only the standard library is imported here (``sts-eval``'s cold start; ``xxhash``, a
dependency, when a file is hashed).
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

from sts_core import command_files as files
from sts_core.command_files import (  # noqa: F401 - re-exported: the save's names and hashing
    CONTENT_HASH,
    HASH_CHUNK,
    PARTIAL_PREFIX,
    SAVE_MARKER,
    STAGING_DIR,
    file_digest,
    remove_path,
)

ENCODER_CONFIG_NAME = "sts_encoder_config.json"


UNCHECKED_FILES = frozenset({"README.md"})
# what torch and safetensors say when a write fails (a full disk, a file-size limit)
WRITE_FAILURE_TEXTS = (
    "unexpected pos",
    "PytorchStreamWriter failed",
    "file write failed",
    "I/O error",
    "(os error ",
)


class IncompleteSaveError(OSError):
    """A folder written by this library whose save did not complete (or was altered)."""


class SaveError(OSError):
    """A save that failed while writing (a full disk, a file-size limit): nothing of it was
    published. The message names the folder and the cause."""

    sts_cause: str  # the innermost cause, kept by save_failure


def content_hashes(folder: Path, names: Iterable[str]) -> dict[str, str]:
    """Relative path → content hash of the files ``names`` under ``folder`` (the model card,
    which may be edited, left out)."""
    return {name: file_digest(folder / name) for name in names if name not in UNCHECKED_FILES}


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
        files.RUN_LOCK,
    )


def write_json_atomic(path: Path, content: Any, record: bool = False) -> None:
    """Write JSON atomically (:func:`sts_core.command_files.write_json`); ``record``: in the
    folder's ledger (a result beside a model), not for the files of a save."""
    files.write_json(path, content, record=record)


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
    content["content_hash"] = CONTENT_HASH
    content["hashes"] = content_hashes(folder, content["files"])
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
    if "hashes" in content:
        content["hashes"].update(content_hashes(folder, content["training_files"]))
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

    A staging folder (``.sts-partial-…``, ``.sts-staging/…``) is refused. A folder that
    does not come from this library's atomic save (a transformers or sentence-transformers
    folder) passes unless ``required``. Otherwise the marker must exist and every model
    file it lists must be there with its recorded size and content hash (a marker written
    before hashes were recorded: sizes only); with ``training`` (resuming) the
    training-state files too. The model card (README.md) may be edited freely.
    """
    folder = Path(folder)
    check_not_staging(folder)
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
    listed = {name: size for name, size in listed.items() if name not in UNCHECKED_FILES}
    problems = _size_problems(folder, listed)
    if problems:
        raise IncompleteSaveError(
            f"{folder}: not the folder that was saved: {'; '.join(problems[:5])}"
            + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        )
    _check_hashes(folder, marker, listed)


def _size_problems(folder: Path, listed: dict[str, int]) -> list[str]:
    """Each listed file that is missing or of another size than the save wrote."""
    problems = []
    for name, size in listed.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif path.stat().st_size != size:
            problems.append(f"{name} has {path.stat().st_size} bytes, the save wrote {size}")
    return problems


def _check_hashes(folder: Path, marker: dict[str, Any], listed: dict[str, int]) -> None:
    """IncompleteSaveError naming the first listed file whose content hash is not the one
    the marker records (nothing to check in a marker without hashes)."""
    hashes = marker.get("hashes")
    if hashes is None:
        return
    algorithm = marker.get("content_hash")
    if algorithm != CONTENT_HASH:
        raise IncompleteSaveError(
            f"{folder}: {SAVE_MARKER} records content hashes of kind {algorithm!r}; this "
            f"version of sts-core checks {CONTENT_HASH!r} (a newer sts-core wrote it?)"
        )
    for name in listed:
        if name not in hashes:
            raise IncompleteSaveError(f"{folder}: {SAVE_MARKER} has no content hash of {name}")
        found = file_digest(folder / name)
        if found != hashes[name]:
            raise IncompleteSaveError(
                f"{folder}: {name} does not match its save (content hash {found}, the save "
                f"wrote {hashes[name]}): the file was changed after the save (damaged on "
                "disk, or written over in place): save or copy the model again"
            )


def check_not_staging(folder: Path) -> None:
    """IncompleteSaveError when ``folder`` is (inside) the staging folder of a save: where
    a save writes before it is published, half-written when its run was killed."""
    parts = Path(os.path.abspath(folder)).parts
    for index, part in enumerate(parts):
        if part.startswith(PARTIAL_PREFIX) or part == STAGING_DIR:
            target = Path(*parts[:index])
            instead = (
                f"load {target}, whose save completed"
                if part.startswith(PARTIAL_PREFIX) and (target / SAVE_MARKER).is_file()
                else "load a complete save" + _last_complete_hint(target, inside_only=True)
            )
            raise IncompleteSaveError(
                f"{folder}: the staging folder of an interrupted save ({part} is where a save "
                f"into {target} writes before it is published), not a saved model: {instead}"
            )


def _last_complete_hint(folder: Path, inside_only: bool = False) -> str:
    """Where to resume from: the newest complete checkpoint inside ``folder`` or (unless
    ``inside_only``) beside it."""
    candidates = checkpoints(folder) + ([] if inside_only else checkpoints(folder.parent))
    complete = [c for c in candidates if c != folder and (c / SAVE_MARKER).is_file()]
    complete.sort(key=lambda p: int(p.name[11:]))
    return f"; the last complete checkpoint is {complete[-1]}" if complete else ""


def checkpoints(folder: Path) -> list[Path]:
    """``checkpoint-N`` sub-folders, by step."""
    found = [p for p in folder.glob("checkpoint-*") if p.is_dir() and p.name[11:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[11:]))


@contextmanager
def staged_contents(target: str | os.PathLike, replaces: Iterable[str] = ()) -> Iterator[Path]:
    """Write into a staging folder inside ``target``; on success move its entries into
    ``target`` and write the save marker last.

    The old marker goes first, then the encoder config (which declares the marker), then
    every other entry; then the files of the previous save that this one does not write
    (and the entries ``replaces``, for folders saved before markers existed) are removed.
    A folder interrupted at any point has no marker and is refused by loaders. A write that
    fails (a full disk, a file-size limit) raises :class:`SaveError`: the staging folder is
    removed and nothing is published (the previous save, if any, is unchanged).
    """
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    staging = target / f"{PARTIAL_PREFIX}-{os.getpid()}"
    for leftover in [staging, *target.glob(f"{staging.name}-*")]:  # this process' earlier
        remove_path(leftover)  # interrupted save: its staging folder, a marker not in place
    staging.mkdir()
    try:
        with named_save_failure(
            target, "nothing of it was published (an earlier save there is unchanged)"
        ):
            yield staging
        previous = read_save_marker(target) if (target / SAVE_MARKER).is_file() else None
        replaced = _replaced_names(staging, previous, replaces)
        refuse_foreign_entries(target, replaced)
        with named_save_failure(target, "the folder holds no complete save"):
            _publish_entries(staging, target, replaced)
    finally:
        remove_path(staging)


def _replaced_names(
    staging: Path, previous: dict[str, Any] | None, replaces: Iterable[str]
) -> set[str]:
    """The entries of the target a save replaces or removes: those it wrote in ``staging``,
    the previous save's (``previous``: its marker) and ``replaces``."""
    stale = {Path(name).parts[0] for name in (previous or {}).get("files", {})}
    return {entry.name for entry in staging.iterdir()} | stale | set(replaces)


def refuse_foreign_entries(target: Path, names: Iterable[str]) -> None:
    """:class:`~sts_core.command_files.FilesError` when a save would replace or remove an
    entry ``names`` of ``target`` that sts-core did not write (a user's ``config.json``, the
    files of the transformers folder the model was loaded from, a file of an earlier save
    the user edited, a file the user put in its ``1_Pooling``): nothing is published. A
    folder of an earlier sts-core save without a marker (its encoder config) counts as
    sts-core's."""
    if (target / ENCODER_CONFIG_NAME).is_file() and not (target / SAVE_MARKER).exists():
        return
    clashes = sorted(
        name
        for name in names
        if ((target / name).exists() or (target / name).is_symlink())
        and files.written_by_project(target / name) is None
    )
    if clashes:
        raise files.FilesError(
            f"{target} holds files sts-core did not write that the save would replace "
            f"({', '.join(clashes[:6])}): nothing was saved; save into a new folder, or move "
            "them out"
        )


def _publish_entries(staging: Path, target: Path, replaced: set[str]) -> None:
    """Move the entries of ``staging`` into ``target`` and remove the rest of ``replaced``
    (:func:`_replaced_names`: the previous save's files this one does not write)
    (:func:`staged_contents`)."""
    files.sync_tree(staging)  # on disk before anything of it is published
    remove_path(target / SAVE_MARKER)
    entries = sorted(staging.iterdir(), key=lambda p: p.name != ENCODER_CONFIG_NAME)
    for entry in entries:
        _publish_mode(entry)
        existing = target / entry.name
        if entry.is_dir() or existing.is_dir():  # a file is renamed over its old self at once:
            remove_path(existing)  # the encoder config, which vouches for the folder, never absent
        files.OPS.replace(entry, existing)
    written = {p.name for p in entries}
    for name in replaced - written:
        remove_path(target / name)
    write_save_marker(target, written)


def is_write_failure(error: BaseException) -> bool:
    """Whether ``error`` is a file system's refusal to write: an OSError (a full disk, a
    file-size limit, no permission), or torch's or safetensors' words for one."""
    if isinstance(error, OSError):
        return True
    return isinstance(error, Exception) and any(t in str(error) for t in WRITE_FAILURE_TEXTS)


@contextmanager
def named_save_failure(folder: Path, outcome: str, staging: Path | None = None) -> Iterator[None]:
    """Turn a write failure inside the block into one :class:`SaveError` naming ``folder``,
    the cause and ``outcome`` (what was left), after removing ``staging`` (the folder the
    save was writing); other errors pass unchanged."""
    try:
        yield
    except Exception as error:
        if not is_write_failure(error):
            raise
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise save_failure(folder, error, outcome) from error


def save_failure(folder: Path, error: BaseException, outcome: str) -> SaveError:
    """``<folder>: the save failed (<cause>; N GB free on its disk): <outcome>``; the cause
    of a :class:`SaveError` of a save inside ``folder`` is kept, not named twice."""
    cause = getattr(error, "sts_cause", None) or _cause(error)
    existing = next((p for p in [folder, *folder.parents] if p.is_dir()), None)
    try:
        free = f"; {shutil.disk_usage(existing).free / 1e9:.1f} GB free on its disk"  # type: ignore[arg-type]
    except (OSError, TypeError):  # TypeError: no folder of it exists (None)
        free = ""
    failure = SaveError(f"{folder}: the save failed ({cause}{free}): {outcome}")
    failure.sts_cause = cause
    return failure


def _cause(error: BaseException) -> str:
    """Why a write failed, in one line: the system's words (and the file), else torch's or
    safetensors' with what they mean when they do not say it."""
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror}{where}"
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, OSError) or "(os error " in text:
        return text
    return f"{text}: a full disk or a file-size limit"


def publish_folder(staging: Path, target: Path) -> None:
    """Rename a completely written folder into place. An older folder there is renamed
    aside first and removed after: ``target`` is at every moment the old complete folder,
    the new one, or absent — never a mix of the two."""
    _publish_mode(staging)
    files.sync_tree(staging)  # on disk before it is renamed into place
    if not (target.exists() or target.is_symlink()):
        files.OPS.replace(staging, target)
        files.sync_folder(target.parent)
        return
    replaced = staging.with_name(f"{staging.name}.replaced")
    remove_path(replaced)
    files.OPS.replace(target, replaced)
    files.OPS.replace(staging, target)
    files.sync_folder(target.parent)
    remove_path(replaced)
