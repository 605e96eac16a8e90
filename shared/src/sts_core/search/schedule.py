"""Running cells: one worker process per cell, ``jobs`` at a time, each on its share of
the CPU threads or on its own GPU; finished cells are never trained again.

A worker starts ``preloaded`` (the default on Linux): forked from a server process that has
imported torch, transformers and the training path once (:mod:`multiprocessing`'s
``forkserver``), so a cell starts in a fraction of a second instead of an interpreter's
start and imports (seconds on a small machine); or ``fresh``: ``python -m
sts_core.search.worker`` per cell. Either way the cell has a process of its own.

A cell is finished when its ``result.json`` exists (the worker writes it last), so a
search killed at any point resumes where it stopped: the cells that were running start
again from scratch in their own folders.
"""

from __future__ import annotations

import contextlib
import functools
import json
import multiprocessing
import multiprocessing.context
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sts_core.command_files import remove_path, write_json, write_text
from sts_core.search.cells import (
    CELL_FILE,
    LOG_FILE,
    RECIPE_FILE,
    RESULT_FILE,
    STAGE1_FOLDER,
    STAGE1_RECIPE_FILE,
    TEST_FILE,
    Cell,
    cell_inputs,
    done_record,
)
from sts_core.search.worker import main as worker_main
from sts_core.search.worker import run_action

#: what the preloaded workers' server imports once: the modules every worker imports
PRELOADED_MODULES = (
    "torch",
    "transformers",
    "datasets",
    "sts_core.training",
    "sts_core.encoder",
    "sts_core.evaluation",
    "sts_core.search.worker",
)


class CellFailed(RuntimeError):
    """A cell's worker exited non-zero; the message has its ``error:`` line and log."""


@dataclass(frozen=True)
class Slot:
    """Where a worker runs: its threads and, on GPUs, its device."""

    threads: int
    device: str | None = None
    #: the worker's work done in the search's own process (``--in-process``)
    in_process: bool = False
    #: how its worker process starts (:data:`~sts_core.search.spec.WORKER_STARTS`)
    start: str = "fresh"

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            OMP_NUM_THREADS=str(self.threads),
            STS_SEARCH_THREADS=str(self.threads),
            TOKENIZERS_PARALLELISM="false",
        )
        if self.device is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.device
        return env


def slots(
    jobs: int,
    devices: Sequence[str],
    cpus: int | None = None,
    threads: int | None = None,
    in_process: bool = False,
    start: str = "fresh",
) -> list[Slot]:
    """``jobs`` slots: on GPUs (``devices``), one device each (jobs ≤ devices); on the
    CPU, ``threads`` each, else the cores split evenly (at least one thread each); with
    ``in_process`` one slot, the search's own process (SearchSpec checks jobs is 1);
    ``start``: how their workers start (:data:`~sts_core.search.spec.WORKER_STARTS`)."""
    cpus = cpus or os.cpu_count() or 1
    threads = threads or max(1, cpus // jobs)
    if devices:  # jobs <= len(devices): SearchSpec checks it
        return [Slot(threads, device, start=start) for device in devices[:jobs]]
    return [Slot(threads, in_process=in_process, start=start) for _ in range(jobs)]


def prepare(folder: Path, cell: Cell, base: dict[str, Any], scoring: dict[str, Any]) -> None:
    """Write the cell's description and recipe, and a two-stage cell's first stage's
    (before its worker starts); its scoring records the inputs it is trained on
    (:func:`cell_inputs`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for earlier in (RESULT_FILE, TEST_FILE):  # a run on other inputs: its results go first
        remove_path(folder / earlier)
    recipe = cell.train_recipe(base, folder / "model")
    write_text(folder / RECIPE_FILE, yaml.safe_dump(recipe, sort_keys=False), record=False)
    stage1 = cell.stage1_recipe(base, folder / STAGE1_FOLDER)
    if stage1 is not None:
        text = yaml.safe_dump(stage1, sort_keys=False)
        write_text(folder / STAGE1_RECIPE_FILE, text, record=False)
    if scoring.get("inputs") is not None:
        scoring = {**scoring, "inputs": cell_inputs(cell, scoring["inputs"])}
    write_json(folder / CELL_FILE, {**cell.describe(), "scoring": scoring}, record=False)


def run_worker(verb: str, folder: Path, slot: Slot) -> None:
    """``python -m sts_core.search.worker VERB FOLDER`` (a fresh process, or one forked
    from the preloaded server, or on an in-process slot the worker's action called here)
    with its output in ``log.txt``; :class:`CellFailed` when it fails."""
    command = [sys.executable, "-m", "sts_core.search.worker", verb, str(folder)]
    log_file = folder / LOG_FILE
    earlier = log_file.stat().st_size if log_file.exists() else 0
    how = "in-process" if slot.in_process else slot.start
    with open(log_file, "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(command)} ({how})\n")
        log.flush()
        if slot.in_process:
            status = _run_here(verb, folder, slot, log)
        elif slot.start == "preloaded":
            arguments = (verb, str(folder), slot.environment(), log.name)
            status = _run_preloaded(_worker_in_child, arguments)
        else:
            status = _run_child(command, slot.environment(), log)
    if status != 0:
        with open(log_file, encoding="utf-8") as log:
            log.seek(earlier)
            lines = log.read().splitlines()  # this attempt's lines only
        errors = [line for line in lines if line.startswith("error: ")]
        reason = errors[-1] if errors else (lines[-1] if lines else "no output")
        raise CellFailed(f"{folder.name}: exit {status}: {reason} (log: {log_file})")


def _run_here(verb: str, folder: Path, slot: Slot, log: Any) -> int:
    """The worker's ``verb`` in this process on ``slot.threads`` torch threads, its
    printed output into ``log``; its exit status."""
    import torch

    torch.set_num_threads(slot.threads)
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        return run_action(verb, folder, own_process=False)


Child = subprocess.Popen | multiprocessing.process.BaseProcess
_CHILDREN: set[Child] = set()
_CHILDREN_LOCK = threading.Lock()
#: set by :func:`stop_children`, cleared when a scheduler starts: a worker whose start was
#: under way when the search was interrupted is stopped as soon as it is known
_STOPPING = threading.Event()


def _watched(process: Child) -> None:
    """``process`` known to :func:`stop_children`; terminated at once if it came too late."""
    with _CHILDREN_LOCK:
        _CHILDREN.add(process)
        if _STOPPING.is_set():
            process.terminate()


def _forgotten(process: Child) -> None:
    with _CHILDREN_LOCK:
        _CHILDREN.discard(process)


def _run_child(command: list[str], environment: dict[str, str], log: Any) -> int:
    """Run a worker, known to :func:`stop_children` while it runs; its exit status."""
    process = subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)
    _watched(process)
    try:
        return process.wait()
    finally:
        _forgotten(process)


@functools.cache
def _preloaded_server() -> multiprocessing.context.ForkServerContext:
    """The forkserver context whose server imports :data:`PRELOADED_MODULES` once, when
    its first worker starts; it ends with the search's process."""
    context = multiprocessing.get_context("forkserver")
    assert isinstance(context, multiprocessing.context.ForkServerContext)
    context.set_forkserver_preload(list(PRELOADED_MODULES))
    return context


def _run_preloaded(target: Callable[..., Any], args: tuple[Any, ...]) -> int:
    """``target(*args)`` in a process forked from the preloaded server, known to
    :func:`stop_children` while it runs; its exit status (negative: the signal that
    ended it, as :class:`subprocess.Popen` says)."""
    process = _preloaded_server().Process(target=target, args=args)
    process.start()
    _watched(process)
    try:
        process.join()
        return 1 if process.exitcode is None else process.exitcode
    finally:
        _forgotten(process)


def _worker_in_child(verb: str, folder: str, environment: dict[str, str], log: str) -> None:
    """The worker in a process forked from the preloaded server, as ``python -m
    sts_core.search.worker VERB FOLDER`` runs (its ``main`` sets the slot's torch threads:
    the server's torch read OMP_NUM_THREADS when it was imported): in the slot's
    environment, its output (file descriptors 1 and 2) appended to the cell's log."""
    os.environ.clear()
    os.environ.update(environment)
    with open(log, "a", encoding="utf-8") as output:
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
    sys.exit(worker_main([verb, folder]))


def stop_children(grace: float = 10.0) -> None:
    """Terminate the workers running or starting (the search was interrupted), killing
    those that have not ended after ``grace`` seconds."""
    with _CHILDREN_LOCK:
        _STOPPING.set()
        running = list(_CHILDREN)
    for process in running:
        process.terminate()
    for process in running:
        if isinstance(process, subprocess.Popen):
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                process.kill()
        else:
            process.join(grace)
            if process.exitcode is None:
                process.kill()


class Scheduler:
    """Runs work items (cells to train, models to score) on the slots, in order; stops
    starting new ones after ``deadline`` (a ``time.monotonic()`` value) or a failure."""

    def __init__(self, slots: list[Slot], deadline: float | None = None) -> None:
        self.slots = slots
        self.deadline = deadline
        self.skipped: list[str] = []
        self.failures: list[str] = []
        self._free = list(slots)
        self._lock = threading.Lock()
        self.stopped = False

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def run(self, items: Sequence[tuple[str, Callable[[Slot], None]]]) -> None:
        """Run each ``(name, work)``: ``work(slot)`` on a free slot."""
        pool = ThreadPoolExecutor(max_workers=len(self.slots))
        _STOPPING.clear()
        try:
            list(pool.map(self._one, items))
        except BaseException:  # Ctrl-C: no new item starts, the running ones are stopped
            self.stopped = True
            stop_children()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _one(self, item: tuple[str, Callable[[Slot], None]]) -> None:
        name, work = item
        if self.stopped:
            return
        if self.failures or self.out_of_time():
            reason = "after a failure" if self.failures else "time limit"
            self.skipped.append(f"{name} ({reason})")
            return
        with self._lock:
            slot = self._free.pop()
        try:
            work(slot)
        except CellFailed as error:
            self.failures.append(str(error))
        except Exception as error:  # noqa: BLE001 - recorded, and no new cell starts
            self.failures.append(f"{name}: {type(error).__name__}: {error}")
        finally:
            with self._lock:
                self._free.append(slot)


def train_cells(
    scheduler: Scheduler,
    cells: Sequence[Cell],
    root: Path,
    base: dict[str, Any],
    scoring: dict[str, Any],
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Train every cell not yet finished; return the records of the finished ones."""
    todo, stale = [], 0
    for cell in cells:
        folder = root / cell.folder_name
        if done_record(folder, cell, inputs=scoring.get("inputs")) is None:
            stale += done_record(folder, cell) is not None  # finished, on other inputs
            todo.append((cell.key, _trainer(cell, folder, base, scoring, log)))
    if todo:
        log(f"sts-search: {len(todo)} cell(s) to train, {len(cells) - len(todo)} done before")
    if stale:
        log(
            f"sts-search: {stale} of them finished before on other inputs (the model or a "
            "table changed since, at the same path): trained again"
        )
    scheduler.run(todo)
    return finished(cells, root, scoring.get("test_fingerprint"), scoring.get("inputs"))


def finished(
    cells: Sequence[Cell],
    root: Path,
    test: dict[str, str] | None = None,
    inputs: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The records of the finished ones of ``cells``, in their order (with the score on
    the test table ``test`` fingerprints, where one was made; trained on ``inputs``, when
    given)."""
    records = (done_record(root / c.folder_name, c, test, inputs) for c in cells)
    return [r for r in records if r is not None]


def worker_result(folder: Path, record: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """The record a worker wrote in ``folder`` and its dev score as the log shows it
    (``none (the error)`` for a run without one); :class:`CellFailed` when it wrote none."""
    if record is None:
        raise CellFailed(f"{folder.name}: its worker ended without writing {RESULT_FILE}")
    dev = "none (" + record["error"] + ")" if record["dev"] is None else f"{record['dev']:.2f}"
    return record, dev


def _trainer(
    cell: Cell, folder: Path, base: dict[str, Any], scoring: dict[str, Any], log: Callable
) -> Callable[[Slot], None]:
    def work(slot: Slot) -> None:
        prepare(folder, cell, base, scoring)
        log(f"  training {cell.key}")
        run_worker("train", folder, slot)
        record, dev = worker_result(folder, done_record(folder, cell))
        log(f"  done {cell.key}: dev {dev}, {record['seconds']:.0f} s")

    return work


def score_tests(
    scheduler: Scheduler, records: Sequence[Mapping[str, Any]], test: str, log: Callable = print
) -> None:
    """Score each record's model on ``test`` unless it already was (on that table: its
    ``test`` is set) or has no model to score (a diverged run)."""
    todo = []
    for record in records:
        if "test" in record or record["dev"] is None:
            continue
        folder = Path(record["folder"])
        _set_test(folder, test)
        todo.append((record["key"], _scorer(folder, record["key"], log)))
    scheduler.run(todo)


def _set_test(folder: Path, test: str) -> None:
    """Name ``test`` in the cell's scoring; an earlier table's score goes (the search's)."""
    remove_path(folder / TEST_FILE)
    described = json.loads((folder / CELL_FILE).read_text(encoding="utf-8"))
    described["scoring"]["test"] = test
    write_json(folder / CELL_FILE, described, record=False)


def _scorer(folder: Path, key: str, log: Callable) -> Callable[[Slot], None]:
    def work(slot: Slot) -> None:
        log(f"  scoring the test table: {key}")
        run_worker("score", folder, slot)

    return work
