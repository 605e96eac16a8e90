"""One door for a command's files: declared before the work, written atomically, owned.

Every console script declares what it reads and what it writes to a :class:`CommandFiles`
before any work, and :meth:`CommandFiles.check` applies the rules once for all of them:

- **Outputs off inputs.** An output that is, holds or lies inside one of the command's
  inputs (compared as given, made absolute, and with symbolic links resolved) is refused
  in one line (:class:`FilesError`), in every mode.
- **Only what the project wrote is replaced.** An existing output file is replaced only
  when this project wrote it (:func:`written_by_project`: the folder's ledger records it,
  its content unchanged since) and the command's replace flag is given; a file the project
  did not write is never replaced, whatever the flags.
- **Atomic writes.** :func:`write_bytes`, :func:`write_text`, :func:`write_json` and
  :func:`writing` (for writers that take a path: a table, a figure) write a temporary
  file in the target's folder, flush and ``fsync`` it, rename it into place and ``fsync``
  the folder; an interrupted write leaves the old file or the new one, never a part. Each
  published file is recorded in the folder's ledger (:data:`LEDGER_NAME`: name → size,
  content hash, command, time), which is how the next command knows it wrote it.

The steps go through :data:`OPS` so that a test can fail each one in turn. Only the
standard library is imported here (``xxhash``, a dependency, when a file is hashed).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

try:
    import fcntl
except ImportError:  # no fcntl on Windows: the ledger is written without a folder lock
    fcntl = None  # type: ignore[assignment]

#: the ledger of a folder: which of its files this project wrote (name → size, hash, command)
LEDGER_NAME = ".sts-outputs.json"
RUN_LOCK = ".sts-run.lock"  # a training run's OS file lock (training/output.py)
#: temporary files and staging folders start with this (a kill leaves them; they are ours)
PARTIAL_PREFIX = ".sts-partial"
STAGING_DIR = ".sts-staging"
SAVE_MARKER = "sts_save_complete.json"
#: what a file's content is known by
CONTENT_HASH = "xxh3_128"
HASH_CHUNK = 16 << 20  # bytes read at a time: no whole file in memory

# Each step of a write, for tests to fail one in turn (:func:`write_bytes` and the folder
# publishing of sts_core.saving go through these).
OPS = SimpleNamespace(
    open=os.open,
    write=os.write,
    fsync=os.fsync,
    close=os.close,
    replace=os.replace,
    unlink=os.unlink,
    rmtree=shutil.rmtree,
)


class FilesError(ValueError):
    """An output that would overwrite an input or a file the project did not write: one
    line naming the option, the path and what to do."""


class OutputPathError(OSError):
    """An output file that cannot be written; the message names the path and why."""


# ----------------------------------------------------------------------------- paths
def forms(path: str | os.PathLike) -> set[Path]:
    """``path`` made absolute as written, and with symbolic links resolved."""
    given = Path(path).expanduser()
    return {Path(os.path.abspath(given)), given.resolve()}


def inside(paths: set[Path], folders: set[Path]) -> bool:
    """Whether one of ``paths`` is one of ``folders`` or lies inside one."""
    return any(path == folder or folder in path.parents for path in paths for folder in folders)


def is_scratch(name: str) -> bool:
    """A temporary file or staging folder of a write this project started."""
    return name.startswith(PARTIAL_PREFIX) or name == STAGING_DIR


# ----------------------------------------------------------------------------- hashing
_DIGESTS: dict[tuple[Any, ...], str] = {}


def file_digest(path: Path) -> str:
    """The :data:`CONTENT_HASH` of the file at ``path``, read in chunks. A file already
    hashed by this process and unchanged since (same inode, size, mtime and ctime) is not
    read again: a load that checks a folder twice hashes it once."""
    status = path.stat()
    key = (
        str(path.resolve()),
        status.st_dev,
        status.st_ino,
        status.st_size,
        status.st_mtime_ns,
        status.st_ctime_ns,
    )
    if key not in _DIGESTS:
        import xxhash

        digest = xxhash.xxh3_128()
        with path.open("rb") as handle:
            while chunk := handle.read(HASH_CHUNK):
                digest.update(chunk)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


# ----------------------------------------------------------------------------- identities
def content_identity(reference: str | os.PathLike) -> dict[str, Any]:
    """What an input is, by content, so that a run or a search knows when it changed at
    the same path: a file's size and :data:`CONTENT_HASH`; for a folder sts-core saved, the
    hash of the content hashes its save marker records of the model files (checked against
    the files whenever the folder is loaded); for any other folder, the hash of each file's
    hash (scratch files and ledgers left out); for a hub id, the revision of its copy in
    the local Hugging Face cache (None when there is none)."""
    path = Path(str(reference)).expanduser()
    if path.is_file():
        size = path.stat().st_size
        return {"path": str(path.resolve()), "size": size, CONTENT_HASH: file_digest(path)}
    if path.is_dir():
        return {"path": str(path.resolve()), CONTENT_HASH: _folder_digest(path)}
    return {"hub": str(reference), "revision": _cached_revision(str(reference))}


def changed_identity(recorded: dict[str, Any], now: dict[str, Any]) -> str | None:
    """How an input's identity changed, in words (``xxh3_128 1a2b… → 3c4d…``); None when
    it did not (a revision unknown on either side is not a change)."""
    for key in (CONTENT_HASH, "revision"):
        old, new = recorded.get(key), now.get(key)
        if old is not None and new is not None and old != new:
            return f"{key} {str(old)[:12]}… → {str(new)[:12]}…"
    if ("hub" in recorded) != ("hub" in now):
        return (
            f"{recorded.get('hub') or recorded.get('path')} → {now.get('hub') or now.get('path')}"
        )
    return None


def _folder_digest(folder: Path) -> str:
    import xxhash

    digest = xxhash.xxh3_128()
    recorded = _marker_hashes(folder)
    if recorded is not None:
        digest.update(json.dumps(recorded, sort_keys=True).encode("utf-8"))
        return "marker:" + digest.hexdigest()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_file() and not _skipped(relative):
            digest.update(f"{relative.as_posix()}\0{file_digest(path)}\0".encode())
    return digest.hexdigest()


def _skipped(relative: Path) -> bool:
    """Scratch files, ledgers and run locks: not part of what a folder holds."""
    return any(is_scratch(part) for part in relative.parts) or relative.name in (
        LEDGER_NAME,
        RUN_LOCK,
    )


def _marker_hashes(folder: Path) -> dict[str, str] | None:
    """The content hashes a save marker records of the model files (None without a marker
    with hashes)."""
    try:
        marker = json.loads((folder / SAVE_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    hashes = marker.get("hashes") if isinstance(marker, dict) else None
    if not isinstance(hashes, dict):
        return None
    return {name: hashes[name] for name in marker.get("files", {}) if name in hashes}


def _cached_revision(repo_id: str) -> str | None:
    """The commit of the local Hugging Face cache's copy of a hub model or dataset."""
    root = Path(
        os.environ.get("HF_HUB_CACHE")
        or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    )
    name = repo_id.split(":")[0].replace("/", "--")
    for kind in ("models", "datasets"):
        ref = root / f"{kind}--{name}" / "refs" / "main"
        if ref.is_file():
            return ref.read_text(encoding="utf-8").strip() or None
    return None


# ----------------------------------------------------------------------------- atomic writes
_COMMAND = {"name": Path(sys.argv[0]).name or "python"}


def set_command(name: str) -> None:
    """The command the ledger names as the writer of what this process writes."""
    _COMMAND["name"] = name


def temporary_name(path: Path) -> Path:
    """Where a write of ``path`` goes before it is renamed into place (same folder)."""
    return path.with_name(f"{PARTIAL_PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:8]}-{path.name}")


def write_bytes(path: str | os.PathLike, data: bytes, record: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file in its folder, written,
    ``fsync``-ed and closed, renamed into place, the folder ``fsync``-ed; recorded in the
    folder's ledger unless ``record`` is false. A failure at any step removes the temporary
    file and leaves ``path`` as it was."""
    with _publishing(Path(path), record, synced=True) as temporary:
        handle = OPS.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[OPS.write(handle, view) :]
            OPS.fsync(handle)
        finally:
            OPS.close(handle)
    return Path(path)


def write_text(path: str | os.PathLike, text: str, record: bool = True) -> Path:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8"), record)


def write_json(path: str | os.PathLike, content: Any, record: bool = True) -> Path:
    """:func:`write_bytes` of ``content`` as indented JSON (objects it cannot encode as
    their ``str``)."""
    return write_text(path, json.dumps(content, indent=2, default=str), record)


def writing(path: str | os.PathLike, record: bool = True) -> contextlib.AbstractContextManager:
    """For a writer that takes a path (``Dataset.to_parquet``, ``Figure.savefig``): yield a
    temporary path in ``path``'s folder to write to; when the block ends, ``fsync`` it,
    rename it into place and ``fsync`` the folder (and record it). An exception in the
    block, or at any step, removes the temporary file and leaves ``path`` as it was."""
    return _publishing(Path(path), record, synced=False)


@contextlib.contextmanager
def _publishing(path: Path, record: bool, synced: bool) -> Iterator[Path]:
    """The steps of every write around the block that writes the temporary file (already
    ``fsync``-ed when ``synced``): refuse a file sts-core did not write (when recorded),
    sync, rename, sync the folder, record; the temporary file goes on any failure."""
    if record:
        refuse_foreign(path)
    temporary = temporary_name(path)
    try:
        yield temporary
        if not synced:
            sync_file(temporary)
        OPS.replace(temporary, path)
    except BaseException:
        _discard(temporary)
        raise
    sync_folder(path.parent)
    if record:
        record_output(path)


def refuse_reserved(path: Path, option: str = "") -> None:
    """:class:`FilesError` when ``path``'s name is one sts-core keeps for itself: a
    folder's ledger (:data:`LEDGER_NAME`) or a temporary file (``.sts-partial-…``); a
    result written there would replace the record of what the folder holds."""
    if path.name == LEDGER_NAME or is_scratch(path.name):
        named = f"{option} {path}" if option else str(path)
        raise FilesError(
            f"{named}: {path.name} is the name sts-core keeps for its own "
            f"{'ledger' if path.name == LEDGER_NAME else 'temporary files'}: nothing was "
            "written; choose another name"
        )


def refuse_foreign(path: Path) -> None:
    """:class:`FilesError` when ``path`` exists and this project did not write it, or its
    name is one sts-core keeps (:func:`refuse_reserved`): the last guard of every recorded
    write (commands check their outputs before the work, too)."""
    refuse_reserved(path)
    if (path.exists() or path.is_symlink()) and written_by_project(path) is None:
        raise FilesError(
            f"{path} exists and was not written by sts-core (or was changed since): it was "
            "not replaced"
        )


def sync_file(path: Path) -> None:
    handle = OPS.open(path, os.O_RDONLY)
    try:
        OPS.fsync(handle)
    finally:
        OPS.close(handle)


def sync_folder(folder: Path) -> None:
    """``fsync`` a folder so that a rename in it survives a power loss (where the system
    allows opening a folder: not on Windows)."""
    try:
        handle = OPS.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        OPS.fsync(handle)
    except OSError:
        pass  # some file systems cannot sync a folder; the rename itself is atomic
    finally:
        OPS.close(handle)


def sync_tree(folder: Path) -> None:
    """``fsync`` every file under ``folder`` and the folders themselves (a staged save,
    before it is renamed into place)."""
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_file() and not path.is_symlink():
            sync_file(path)
        elif path.is_dir():
            sync_folder(path)
    sync_folder(folder)


def _discard(temporary: Path) -> None:
    with contextlib.suppress(OSError):
        OPS.unlink(temporary)


def remove_path(path: Path) -> None:
    """Remove a file, a link or a folder (what this project wrote)."""
    if path.is_dir() and not path.is_symlink():
        OPS.rmtree(path)
    elif path.exists() or path.is_symlink():
        OPS.unlink(path)


# ----------------------------------------------------------------------------- the ledger
@contextlib.contextmanager
def _folder_locked(folder: Path) -> Iterator[None]:
    """An OS lock on ``folder`` while its ledger is read and written (none where the
    system has no ``fcntl``, or cannot lock a folder)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        handle = None
    if handle is None or fcntl is None:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # closing releases the lock


def read_ledger(folder: Path) -> dict[str, dict[str, Any]]:
    """Name → record of each entry of ``folder`` the project wrote (empty without a ledger,
    or with one that cannot be read: then nothing there counts as the project's)."""
    try:
        content = json.loads((folder / LEDGER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = content.get("entries") if isinstance(content, dict) else None
    return entries if isinstance(entries, dict) else {}


def record_output(path: Path, kind: str = "file") -> None:
    """Record ``path`` (a file: its size and content hash; a folder this project made:
    ``kind="folder"``) in its folder's ledger as written by this command."""
    folder = path.parent
    entry: dict[str, Any] = {"kind": kind, "command": _COMMAND["name"]}
    entry["time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    if kind == "file":
        entry |= {"size": path.stat().st_size, CONTENT_HASH: file_digest(path)}
    with _folder_locked(folder):
        entries = read_ledger(folder)
        entries[path.name] = entry
        content = {"written_by": "sts-core", "entries": dict(sorted(entries.items()))}
        write_json(folder / LEDGER_NAME, content, record=False)


def forget_output(path: Path) -> None:
    """Take ``path`` out of its folder's ledger (after this project removed it)."""
    folder = path.parent
    with _folder_locked(folder):
        entries = read_ledger(folder)
        if entries.pop(path.name, None) is not None:
            content = {"written_by": "sts-core", "entries": entries}
            write_json(folder / LEDGER_NAME, content, record=False)


def written_by_project(path: Path) -> str | None:
    """How we know this project wrote ``path`` (``"written by sts-eval on …"``), or None
    when it did not (or the file changed since): the folder's ledger records it with this
    size and content hash; it is a temporary file, staging folder or ledger of ours; a
    folder holding a save marker (a saved model, a checkpoint); or a file the marker of
    its folder lists (a saved model's files)."""
    name = path.name
    if is_scratch(name) or name in (LEDGER_NAME, RUN_LOCK):
        return "a temporary file of an interrupted write, a ledger or a run's lock"
    if path.is_dir() and not path.is_symlink() and (path / SAVE_MARKER).is_file():
        return "a model saved by sts-core" if not foreign_entries(path) else None
    entry = read_ledger(path.parent).get(name)
    if entry is not None and ledger_matches(path, entry):
        return f"written by {entry.get('command', 'sts-core')} on {entry.get('time', '?')}"
    if name == SAVE_MARKER or _listed_by_marker(path):
        return "a file of the model saved there by sts-core"
    return None


def ledger_matches(path: Path, entry: dict[str, Any]) -> bool:
    """Whether ``path`` is still what its ledger ``entry`` recorded (a folder; a file of that
    size and content hash)."""
    if entry.get("kind") == "folder":
        return path.is_dir()
    if not path.is_file() or path.stat().st_size != entry.get("size"):
        return False
    return file_digest(path) == entry.get(CONTENT_HASH)


def _listed_by_marker(path: Path) -> bool:
    """Whether the save marker of ``path``'s folder lists ``path`` as it is now: a file with
    its size and content hash, or a folder (``1_Pooling``) every file of which it lists so
    (a file the user edited or added there is not the save's)."""
    try:
        marker = json.loads((path.parent / SAVE_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if path.is_symlink():
        return False
    listed = {**marker.get("files", {}), **marker.get("training_files", {})}
    hashes = marker.get("hashes") or {}
    if path.is_dir():
        found = [p for p in sorted(path.rglob("*")) if not p.is_dir() or p.is_symlink()]
        names = [p.relative_to(path.parent).as_posix() for p in found]
    else:
        names = [path.name]
    return bool(names) and all(
        _unchanged(path.parent / name, listed.get(name), hashes.get(name)) for name in names
    )


def _unchanged(path: Path, size: Any, digest: Any) -> bool:
    """Whether ``path`` is a regular file of ``size`` bytes and (when known) ``digest``."""
    if size is None or path.is_symlink() or not path.is_file() or path.stat().st_size != size:
        return False
    return digest is None or file_digest(path) == digest


def foreign_entries(folder: Path, ignore: Iterable[str] = ()) -> list[str]:
    """The entries of ``folder`` this project did not write (:func:`written_by_project`),
    by name; ``ignore``: names the caller accounts for itself."""
    skipped = set(ignore)
    return sorted(
        entry.name
        for entry in folder.iterdir()
        if entry.name not in skipped and written_by_project(entry) is None
    )


def check_writable_file(path: str | os.PathLike, option: str = "--output") -> Path:
    """Make sure a file can be written at ``path`` before any work is done: creates its
    folder, writes and removes a probe file there. Raises :class:`OutputPathError` naming
    ``option``, the path and the reason."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise OutputPathError(f"{option} {target}: cannot write it, it is a folder")
    blocker = next((p for p in target.parents if p.exists() or p.is_symlink()), None)
    if blocker is not None and not blocker.is_dir():
        raise OutputPathError(f"{option} {target}: cannot write there ({blocker} is not a folder)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=f"{PARTIAL_PREFIX}-probe-", dir=target.parent)
        os.close(handle)
        os.unlink(probe)
    except OSError as err:
        why = err.strerror or str(err)
        where = f": {err.filename}" if err.filename else ""
        raise OutputPathError(f"{option} {target}: cannot write there ({why}{where})") from None
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputPathError(f"{option} {target}: cannot write it (permission denied)")
    return target


# ----------------------------------------------------------------------------- interrupts
#: the exit status of a command stopped by Ctrl-C (128 + SIGINT), as a shell reports it
INTERRUPTED = 130


def on_interrupt(prog: str, saved: Callable[[], str] | None = None) -> Callable:
    """Decorate a command's ``main``: Ctrl-C (KeyboardInterrupt) ends it with one line on
    stderr — ``<prog>: interrupted (Ctrl-C): <saved()>`` (what was kept, and how to go on;
    by default: nothing half-written) — and exit status :data:`INTERRUPTED`, no
    traceback. Every write of the command is atomic, so nothing it was writing is left
    half-written."""

    def decorate(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def wrapped(*args: Any, **kwargs: Any) -> int:  # Any: main's own arguments
            try:
                return main(*args, **kwargs)
            except KeyboardInterrupt:
                what = saved() if saved is not None else NOTHING_HALF_WRITTEN
                sys.stderr.write(f"{prog}: interrupted (Ctrl-C): {what}\n")
                sys.stderr.flush()
                return INTERRUPTED

        return wrapped

    return decorate


NOTHING_HALF_WRITTEN = "nothing was written half-way (a file is written whole or not at all)"


def end_with_parent(parent_is: str, after: str, interval: float = 1.0) -> None:
    """End this process when the one that started it is gone (killed, so that it could not
    stop it: ``kill -9`` of ``sts-search`` or of a launcher): a daemon thread watches the
    parent's process id, which changes when the parent dies, and then exits with one line
    (``parent_is``: who the parent was; ``after``: what happens to the work)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                sys.stderr.write(
                    f"error: {parent_is} (process {parent}) has ended: stopping; {after}\n"
                )
                sys.stderr.flush()
                os._exit(1)

    threading.Thread(target=watch, name="sts-parent-watch", daemon=True).start()


# ----------------------------------------------------------------------------- declaring
@dataclass(frozen=True)
class Declared:
    """One path a command reads or writes, with the option that names it."""

    option: str
    path: Path
    # of an output: "file", "folder" (new, or replaced when sts-core wrote it) or "run"
    # (a folder its command checks itself: a run or a search resumes there)
    kind: str = "file"


@dataclass
class CommandFiles:
    """What one command reads and writes, declared before any work; :meth:`check` applies
    the rules (module docstring) and raises :class:`FilesError`.

    Args:
        command: the command's name (``sts-eval``), for the ledger and the messages.
        replace_flag: the option that lets the command replace what it wrote before
            (``--overwrite``), named in the refusal; None when it never replaces a file.
        replace: whether that option was given.
    """

    command: str
    replace_flag: str | None = "--overwrite"
    replace: bool = False
    inputs: list[Declared] = field(default_factory=list)
    outputs: list[Declared] = field(default_factory=list)

    def __post_init__(self) -> None:
        set_command(self.command)

    def reads(self, option: str, value: str | os.PathLike | None) -> None:
        """An input: recorded when it is a local path (a hub id or a registry name is not)."""
        if value is None or not str(value).strip():
            return
        path = Path(str(value)).expanduser()
        if path.exists() or path.is_symlink():
            self.inputs.append(Declared(option, path))

    def writes(self, option: str, value: str | os.PathLike, kind: str = "file") -> Path:
        """An output file (``kind="file"``) or folder (``"folder"``); returns its path."""
        path = Path(value).expanduser()
        self.outputs.append(Declared(option, path, kind))
        return path

    def identities(self, skip: Iterable[str] = ("--data-dir",)) -> dict[str, Any]:
        """``"<option> <path>"`` → :func:`content_identity` of each input (but the options
        ``skip``: a benchmark data folder is recorded by its path alone)."""
        left_out = set(skip)
        return {
            f"{item.option} {item.path.resolve()}": content_identity(item.path)
            for item in self.inputs
            if item.option not in left_out
        }

    def check(self) -> None:
        """:class:`FilesError` for the first output that would overwrite an input or a file
        the project did not write (or wrote, without the replace flag)."""
        for output in self.outputs:
            refuse_reserved(output.path, output.option)
            check_off_inputs(output, self.inputs, self.command)
            if output.kind == "file":
                self._check_existing_file(output)
            elif output.kind == "folder":
                self._check_existing_folder(output)
        for output in self.outputs:
            if output.kind == "file":
                check_writable_file(output.path, output.option)

    def _check_existing_folder(self, output: Declared) -> None:
        """A folder output: new, or holding only what sts-core wrote (replaced with the
        replace flag)."""
        path = output.path
        if path.exists() and not path.is_dir():
            raise FilesError(f"{output.option} {path} is a file, not a folder")
        entries = sorted(p.name for p in path.iterdir()) if path.is_dir() else []
        foreign = foreign_entries(path) if entries else []
        if foreign:
            raise FilesError(
                f"{output.option} {path} holds files sts-core did not write "
                f"({', '.join(foreign[:4])}): nothing is replaced there; choose a new folder"
            )
        if entries and not self.replace:
            raise FilesError(
                f"{output.option} {path} is not empty (written by sts-core): pass "
                f"{self.replace_flag} to replace it, or choose a new folder"
            )

    def _check_existing_file(self, output: Declared) -> None:
        path = output.path
        if path.is_dir() and not path.is_symlink():
            raise FilesError(f"{output.option} {path}: cannot write it, it is a folder")
        if not (path.exists() or path.is_symlink()):
            return
        ours = written_by_project(path) if not path.is_symlink() else None
        if ours is None:
            raise FilesError(
                f"{output.option} {path} exists and was not written by sts-core (or was "
                "changed since): nothing was replaced; choose a new name or move the file"
            )
        if not self.replace:
            how = (
                f"pass {self.replace_flag} to replace it"
                if self.replace_flag
                else (f"{self.command} writes a new file only")
            )
            raise FilesError(f"{output.option} {path} exists ({ours}): {how}, or choose a new name")


def check_off_inputs(output: Declared, inputs: Iterable[Declared], command: str) -> None:
    """:class:`FilesError` when ``output`` is one of ``inputs``, lies inside an input
    folder, or (a folder) holds an input."""
    target = forms(output.path)
    for source in inputs:
        read = forms(source.path)
        if read & target:
            relation = "is"
        elif inside(target, read):
            relation = f"lies inside {source.path},"
        elif inside(read, target):
            relation = f"holds {source.path},"
        else:
            continue
        raise FilesError(
            f"{output.option} {output.path} {relation} the input {source.option} of "
            f"{command}: writing there would change what it reads; nothing was written: "
            f"choose another {output.option}"
        )
