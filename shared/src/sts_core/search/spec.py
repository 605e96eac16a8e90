"""What a search is: its data, model, scorer and grid (:class:`SearchSpec`), the cells the
grid makes, and the identity its folder records (``search.json``).

The identity is what makes two searches' cells comparable: the model, the training and
dev tables (paths and a SHA-256 of each file's content), the scorer, the columns, the
fixed ``--set`` keys, the batch size and the step budget. A search started again in its
folder with the same identity reuses every finished cell; one with another identity is
refused. The grid (methods, epochs, rates, ``--grid`` values), the seeds, the test table,
``--soup`` and the parallelism are not part of it: a search may be extended, or given a
test table or soups, in the same folder.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from sts_core.command_files import content_identity, write_json
from sts_core.search.cells import (
    OWNED_KEYS,
    TEACHER_INPUT,
    Cell,
    Recipe,
    SearchError,
    settings_of,
)

#: dev / test scorers: task → (metrics it can select on, default metric)
TASK_METRICS: dict[str, tuple[tuple[str, ...], str]] = {
    "sts": (("spearman", "pearson"), "spearman"),
    "classification": (("accuracy", "f1", "average_precision", "precision", "recall"), "accuracy"),
    "ranking": (("map", "mrr", "p@1", "ndcg@10", "has_positive@5"), "map"),
}

IDENTITY_FILE = "search.json"

#: ``--test`` name of the seven STS tasks (STS12–16, STS-B test, SICK-R test) from the
#: data folder, scored as the papers do (SentEval protocol, 'all' aggregation); the test
#: score is their average
STS_TASKS_TEST = "sts-tasks"

#: how a cell's worker process starts (``--worker-start``; :mod:`sts_core.search.schedule`)
WORKER_STARTS = ("preloaded", "fresh")


def default_worker_start() -> str:
    """``preloaded`` on Linux (workers forked from a server that imported the training path
    once: ``multiprocessing``'s forkserver); ``fresh`` elsewhere (macOS and Windows: a new
    interpreter per cell)."""
    return "preloaded" if sys.platform.startswith("linux") else "fresh"


@dataclass
class SearchSpec:
    """A search: see ``sts-search --help`` for each field."""

    train: list[str]
    dev: str
    model: str
    output_dir: Path
    methods: list[str] = field(default_factory=list)
    epochs: list[float] = field(default_factory=lambda: [1.0])
    learning_rates: list[float] = field(default_factory=lambda: [2e-5])
    settings: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=lambda: [0])
    select_seeds: int = 1
    test: str | None = None
    task: str = "sts"
    metric: str = ""  # "" → the task's default
    columns: dict[str, str] | None = None
    eval_columns: dict[str, str] | None = None
    score_range: list[float] | None = None
    batch_size: int = 16
    max_steps: int = -1
    time_limit: float | None = None
    jobs: int = 1
    devices: list[str] = field(default_factory=list)
    retrain: str = "picks"
    data_dir: str | None = None
    threads: int | None = None
    eval_pairs: int | None = None
    in_process: bool = False
    soup: bool = False
    worker_start: str = field(default_factory=default_worker_start)

    def __post_init__(self) -> None:
        """Every check of the search's own options, in one place."""
        self._check_scorer()
        self._check_grid()
        self._check_resources()

    def _check_scorer(self) -> None:
        if self.task not in TASK_METRICS:
            raise SearchError(f"--task {self.task!r} is not one of {', '.join(TASK_METRICS)}")
        metrics, default = TASK_METRICS[self.task]
        self.metric = self.metric or default
        if self.metric not in metrics:
            raise SearchError(
                f"--metric {self.metric!r} is not a {self.task} metric ({', '.join(metrics)})"
            )
        if self.dev == STS_TASKS_TEST:
            raise SearchError(
                f"--dev {STS_TASKS_TEST}: the seven STS tasks are test sets, never chosen on; "
                "give a dev table (e.g. stsb:dev) and --test sts-tasks"
            )
        if self.test == STS_TASKS_TEST and self.task != "sts":
            raise SearchError(
                f"--test {STS_TASKS_TEST} scores the seven STS tasks: it needs --task sts, "
                f"not {self.task}"
            )
        if self.score_range is not None and not self.score_range[0] < self.score_range[1]:
            raise SearchError(f"--score-range needs LOW < HIGH, got {self.score_range}")

    def _check_grid(self) -> None:
        for name, values in (("--epochs", self.epochs), ("--learning-rate", self.learning_rates)):
            if not values or any(not v > 0 for v in values):
                raise SearchError(f"{name} needs positive values, got {values}")
        if self.max_steps > 0 and len(self.epochs) > 1:
            raise SearchError(
                f"--max-steps {self.max_steps} bounds every cell instead of its epochs: "
                f"--epochs {' '.join(f'{e:g}' for e in self.epochs)} would train each cell "
                "once per value, the same run; give one value (or no --max-steps)"
            )
        if not self.seeds:
            raise SearchError("--seeds needs at least one seed")
        if self.soup and len(self.seeds) < 2:
            raise SearchError(
                f"--soup averages each pick's models over its seeds: give two or more --seeds, "
                f"got {self.seeds}"
            )
        if not 1 <= self.select_seeds <= len(self.seeds):
            raise SearchError(
                f"--select-seeds {self.select_seeds}: the grid is trained and chosen on the "
                f"first N of --seeds, 1 ≤ N ≤ {len(self.seeds)}"
            )
        lists: dict[str, Sequence[Any]] = {
            "--epochs": self.epochs, "--learning-rate": self.learning_rates,
            "--seeds": self.seeds, "--methods": self.methods,
            **{f"--grid {k}": v for k, v in self.grid.items()}}  # fmt: skip
        for name, listed in lists.items():
            texts = [f"{v:g}" if isinstance(v, float) else json.dumps(v) for v in listed]
            if len(set(texts)) != len(texts):
                raise SearchError(f"{name} names a value twice (the same cell twice): {listed}")
        owned = sorted(OWNED_KEYS & (set(self.settings) | set(self.grid)))
        if owned:
            raise SearchError(
                f"--set / --grid may not name {', '.join(owned)}: the search sets them "
                "(--model, --train, --dev, --epochs, --learning-rate, --seeds, --max-steps, "
                "--batch-size)"
            )
        both = sorted(set(self.settings) & set(self.grid))
        if both:
            raise SearchError(f"{', '.join(both)}: given both to --set and --grid")

    def _check_resources(self) -> None:
        if self.jobs < 1:
            raise SearchError(f"--jobs needs a positive number, got {self.jobs}")
        if self.devices and self.jobs > len(self.devices):
            raise SearchError(f"--jobs {self.jobs} needs as many --devices, got {self.devices}")
        if self.worker_start not in WORKER_STARTS:
            raise SearchError(
                f"--worker-start is {' or '.join(WORKER_STARTS)}, got {self.worker_start!r}"
            )
        if self.in_process and (self.jobs > 1 or self.devices):
            raise SearchError(
                "--in-process trains one cell at a time in the search's own process: it "
                "takes neither --jobs above 1 nor --devices"
            )
        if self.retrain not in ("picks", "best"):
            raise SearchError(f"--retrain is picks or best, got {self.retrain!r}")
        if self.batch_size < 1:
            raise SearchError(f"--batch-size needs a positive number, got {self.batch_size}")
        if self.threads is not None and self.threads < 1:
            raise SearchError(f"--threads needs a positive number, got {self.threads}")
        if self.eval_pairs is not None and self.eval_pairs < 1:
            raise SearchError(f"--eval-pairs needs a positive number, got {self.eval_pairs}")
        if self.eval_pairs is not None and self.task == "ranking":
            raise SearchError(
                "--eval-pairs keeps every k-th pair, which would split a ranking set's "
                "queries: it is for --task sts and classification"
            )

    @property
    def selection_seed(self) -> int:
        """The first seed: the cell ``pick.yaml`` is written from."""
        return self.seeds[0]

    @property
    def selection_seeds(self) -> list[int]:
        """The grid is trained on the first ``select_seeds`` seeds and each recipe chosen by
        its mean dev score over them."""
        return self.seeds[: self.select_seeds]

    def base_recipe(self) -> dict[str, Any]:
        """What every cell's recipe starts from: the model, the data, the batch, the step
        budget, the user's fixed settings."""
        recipe: dict[str, Any] = {
            "model_name_or_path": self.model,
            "train_datasets": list(self.train),
            "per_device_train_batch_size": self.batch_size,
            "max_steps": self.max_steps,
        }
        if self.columns:
            recipe["columns"] = self.columns
        if self.data_dir:
            recipe["data_dir"] = self.data_dir
        return recipe

    def input_identities(self) -> dict[str, Any]:
        """``"<option> <path or hub id>"`` → content identity of the model and of each
        training and dev table (:func:`~sts_core.command_files.content_identity`), and
        ``"teacher_model <folder or hub id>"`` → that of each teacher ``--set`` or
        ``--grid`` names: what each cell records (the teacher only where its recipe names
        it: :func:`~sts_core.search.cells.cell_inputs`), so that a cell trained on other
        content — a teacher folder retrained under the same name — is trained again."""
        from sts_core.data.references import reference_path

        found = {f"--model {self.model}": content_identity(self.model)}
        for option, table, split in [
            *(("--train", t, "train") for t in self.train),
            ("--dev", self.dev, "dev"),
        ]:
            path = reference_path(table, split, self.data_dir) or table
            found[f"{option} {table}"] = content_identity(path)
        for teacher in self.teachers():
            found[f"{TEACHER_INPUT}{teacher}"] = content_identity(teacher)
        return found

    def teachers(self) -> list[str]:
        """The ``teacher_model`` values of ``--set`` and ``--grid`` (an empty one, no
        teacher, left out)."""
        named = [self.settings.get("teacher_model"), *self.grid.get("teacher_model", [])]
        return [str(teacher) for teacher in named if teacher]

    def identity(self) -> dict[str, Any]:
        """What ``search.json`` records and a resumed search must match."""
        return {
            "model": self.model,
            "train": [reference_of(t) for t in self.train],
            "dev": reference_of(self.dev),
            "task": self.task,
            "metric": self.metric,
            "columns": self.columns,
            "eval_columns": self.eval_columns,
            "score_range": self.score_range,
            "settings": self.settings,
            "batch_size": self.batch_size,
            "max_steps": self.max_steps,
            "data_dir": self.data_dir,
            # the dev scores change with it (absent when unset: older folders resume)
            **({"eval_pairs": self.eval_pairs} if self.eval_pairs else {}),
        }


def reference_of(reference: str) -> dict[str, str]:
    """A data reference, a local one as its absolute path (its content is each cell's
    record: :meth:`SearchSpec.input_identities`)."""
    path = Path(reference)
    return {"reference": str(path.resolve()) if path.exists() else reference}


def fingerprint(reference: str) -> dict[str, str]:
    """A data reference and, for a local file or folder, its absolute path and a SHA-256 of
    its content (a registry name or hub id as written: its content is not hashed)."""
    path = Path(reference)
    if path.is_file():
        return {"reference": str(path.resolve()), "sha256": file_digest(path)}
    if path.is_dir():
        digest = hashlib.sha256()
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(str(item.relative_to(path)).encode("utf-8"))
            digest.update(file_digest(item).encode("ascii"))
        return {"reference": str(path.resolve()), "sha256": digest.hexdigest()}
    return {"reference": reference}


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


LOCK_FILE = "search.lock"


def check_folder(spec: SearchSpec) -> None:
    """Refuse a folder that holds another search's cells, or files no search wrote (reads
    only: :func:`record_identity` writes the identity once the inputs are checked)."""
    folder = spec.output_dir
    path = folder / IDENTITY_FILE
    if path.is_file():
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise SearchError(f"{path} is not a search's identity: {error}") from None
        if not isinstance(recorded, dict):
            raise SearchError(f"{path} is not a search's identity: not a mapping")
        identity = spec.identity()
        recorded = _without_content_hashes(recorded)
        if recorded != identity:
            changed = sorted(k for k in identity if recorded.get(k) != identity.get(k))
            raise SearchError(
                f"{folder} holds another search's cells ({path} differs in "
                f"{', '.join(changed) or 'its keys'}): name a new --output-dir"
            )
    elif folder.exists() and any(p.name != LOCK_FILE for p in folder.iterdir()):
        held = sorted(p.name for p in folder.iterdir() if p.name != LOCK_FILE)
        raise SearchError(
            f"--output-dir {folder} is not empty ({', '.join(held[:4])}) and holds no "
            f"{IDENTITY_FILE}: a search writes only into a new or empty folder, or its own; "
            "nothing was written"
        )


def _without_content_hashes(recorded: dict[str, Any]) -> dict[str, Any]:
    """A ``search.json`` of an older search, whose tables were recorded with their
    SHA-256, as the references alone (the content is each cell's record now)."""

    def reference(entry: Any) -> Any:
        return {"reference": entry["reference"]} if isinstance(entry, dict) else entry

    return {
        **recorded,
        "train": [reference(t) for t in recorded.get("train", [])],
        "dev": reference(recorded.get("dev")),
    }


def record_identity(spec: SearchSpec) -> None:
    spec.output_dir.mkdir(parents=True, exist_ok=True)
    write_json(spec.output_dir / IDENTITY_FILE, spec.identity(), record=False)


def folder_lock(spec: SearchSpec) -> Any:
    """The search folder's lock (held while the search runs): a second search in the same
    folder at the same time is refused."""
    spec.output_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(spec.output_dir / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise SearchError(
            f"{spec.output_dir} is in use by another sts-search (it holds "
            f"{spec.output_dir / LOCK_FILE})"
        ) from None
    return lock


def grid_cells(spec: SearchSpec, rows: dict[str, tuple[str, dict[str, Any]]]) -> list[Cell]:
    """The grid at the selection seeds: every method × ``--grid`` combination × epochs ×
    learning rate × selection seed, in that order. ``rows``: method spec → (installed
    method, its settings)."""
    keys = sorted(spec.grid)
    combos = [
        dict(zip(keys, values, strict=True))
        for values in itertools.product(*(spec.grid[k] for k in keys))
    ]
    cells = []
    for method in spec.methods:
        method_name, row_settings = rows[method]
        for combo, epochs, rate in itertools.product(combos, spec.epochs, spec.learning_rates):
            settings = {**row_settings, **spec.settings, **combo}
            recipe = Recipe(method, settings_of(combo), epochs, rate, spec.max_steps)
            cells += [Cell(recipe, s, method_name, settings) for s in spec.selection_seeds]
    return cells


def seed_cells(cell: Cell, seeds: Sequence[int]) -> list[Cell]:
    """``cell``'s recipe on each of ``seeds``."""
    return [replace(cell, seed=seed) for seed in seeds]
