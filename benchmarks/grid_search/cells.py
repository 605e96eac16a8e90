"""The search's cells as the benchmark records them: one trained model each (a method with
our ``--set`` settings, a recipe, a seed), the ``--set`` settings checked as a recipe's, the
cells file (the table the report reads) and the teacher id each cell records. The cells are
trained by ``sts-search`` (:mod:`grid_search.via_search`)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import _common as common
import quality

from grid_search.inputs import DEV_TABLE, TRAIN_TABLES
from sts_core.command_files import changed_identity, content_identity, write_text
from sts_core.search.cells import Cell
from sts_core.search.stages import STAGE_KEYS, StageError, first_stage, without_stages
from sts_core.training.parser import ConfigParser

SMOKE_METHODS = ["ours-cosine_mse", "st-cosine"]


#: the peer's embedding distillation from the teacher (``--set teacher_model=…``): the distinct
#: training sentences with the teacher's embeddings (``sts-search``'s ``st:embed-distill``,
#: ``st:mse-distill``)
DISTILL_METHODS = {
    "st-embed-distill": quality.Method(
        "sentence-transformers EmbedDistillLoss (cosine, on the teacher's embeddings)", None
    ),
    "st-mse-distill": quality.Method(
        "sentence-transformers EmbedDistillLoss (mse: MSELoss's metric, on the teacher's "
        "embeddings)",
        None,
    ),
}


SEARCH_METHODS = {**quality.METHODS, **DISTILL_METHODS}


def parse_settings(pairs: list[str]) -> tuple[tuple[str, str], ...]:
    """``KEY=VALUE`` options, checked for form (:func:`check_settings` checks the values)."""
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise common.BenchmarkError(f"--set {pair!r}: expected KEY=VALUE")
        if key.strip() in settings:
            raise common.BenchmarkError(f"--set {key.strip()}: given twice")
        settings[key.strip()] = value.strip()
    return tuple(sorted(settings.items()))


def config_values(settings: tuple[tuple[str, str], ...], parser: Any = None) -> dict[str, Any]:
    """``--set`` values as config fields: a model name under STS_MODELS_DIR for
    ``teacher_model``, else JSON where it parses (numbers, mappings), else the text. With
    ``parser`` (a method's ``ConfigParser``) a field's value is its field's type read from the
    text, as a flag's is (a mapping, list or null stays JSON): ConfigError when it cannot be."""
    values: dict[str, Any] = {}
    for key, text in settings:
        if key == "teacher_model":
            values[key] = str(common.model_path(text))
            continue
        try:
            values[key] = json.loads(text)
        except ValueError:
            values[key] = text
        if parser is not None and key not in STAGE_KEYS:
            kept = values[key] is None or isinstance(values[key], dict | list)
            values[key] = values[key] if kept else text
    if parser is None:
        return values
    stages = {key: values.pop(key) for key in STAGE_KEYS if key in values}
    return {**parser.coerce_values(values, "--set"), **stages}


#: the flags that set the fields of the search's budget a ``--set`` may not change
BUDGET_FLAGS = {
    "learning_rate": "--learning-rate",
    "num_train_epochs": "--epochs",
    "seed": "--seeds",
    "per_device_train_batch_size": "--batch-size",
}


def budget_values(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields the search gives every row of ours (``quality.train_ours``), for
    the grid's first recipe and seed (a placeholder for each cell's scratch folder)."""
    recipe = quality.Recipe(
        args.model, args.learning_rate[0], "mean", args.batch_size, args.epochs[0],
        args.max_steps, None,
    )  # fmt: skip
    arguments = quality.training_arguments(recipe, args.seeds[0], "(a scratch folder)")
    return {**arguments, "load_best_model_at_end": False}


def check_settings(args: argparse.Namespace) -> None:
    """Every ``--set KEY=VALUE`` through the checks a recipe gets from the parser of each
    method our rows train (:meth:`ConfigParser.parse_values`): each key known (else the
    closest names) and its value of its field's type, then all of them together over the
    row's own settings and the search's budget (ranges, names, what needs what; a first
    stage's loss among the method's), before any data loads: BenchmarkError naming the
    ``--set KEY=VALUE`` the problem is of. A field the search does not pass on (its budget's,
    the model's, the data's) is refused once its value passed."""
    from sts_core.training.method_registry import CORE_METHOD, quality_rows

    if not args.settings:
        return
    rows = quality_rows()
    ours = [rows[m] for m in args.methods if m.startswith("ours-")]
    for method, row in ours or [(CORE_METHOD, None)]:  # the peer's teacher keys: the core's
        check_method_settings(args, method, row.settings if row else {})


def check_method_settings(args: argparse.Namespace, method: Any, row: dict[str, Any]) -> None:
    """:func:`check_settings` for one method, its row's settings ``row``."""
    parser = ConfigParser.for_method(method)
    values = _settings_values(args.settings, parser)
    first = stage_of(values)
    values = without_stages(values)  # the stage's keys are no config fields
    given = [(key, text) for key, text in args.settings if key in values]
    for key, text in given:
        _refuse([(key, text)], parser.check_keys, {key: values[key]}, "--set")
    budget = budget_values(args)
    base = {**budget, **row, "model_name_or_path": args.model}
    _refuse(given, parser.parse_values, {**base, **values}, "--set")
    for key, text in given:
        _refuse_unpassed(key, f"--set {key}={text}", budget)
    if first is not None:  # the first stage's loss: one of the method's
        stage = [(key, text) for key, text in args.settings if key == "stage1_loss"]
        _refuse(stage, parser.parse_values, {**base, **values, "loss": first.loss}, "--set")


def _settings_values(settings: tuple[tuple[str, str], ...], parser: Any) -> dict[str, Any]:
    """:func:`config_values` with the failure of each value named by its ``--set``."""
    for key, text in settings:  # one at a time, so that the error names it
        _refuse([(key, text)], config_values, ((key, text),), parser)
    return config_values(settings, parser)


def _refuse(pairs: list[tuple[str, str]], check: Any, *arguments: Any) -> None:
    """``check(*arguments)``; its ConfigError (or BenchmarkError) as a BenchmarkError naming
    each ``--set KEY=VALUE`` of ``pairs`` whose key its message names (all when none is)."""
    import re

    from sts_core.training.parser import ConfigError

    try:
        check(*arguments)
    except (ConfigError, common.BenchmarkError) as error:
        problem = str(error).removeprefix("--set: ")
        named = [(k, t) for k, t in pairs if re.search(rf"\b{re.escape(k)}\b", problem)]
        shown = " ".join(f"--set {key}={text}" for key, text in named or pairs)
        raise common.BenchmarkError(f"{shown}: {problem}") from error


def _refuse_unpassed(key: str, source: str, budget: dict[str, Any]) -> None:
    """BenchmarkError for a ``--set`` of a field the search sets itself or does not pass on
    (``quality.train_ours`` gives the model and the data their own arguments)."""
    from dataclasses import fields

    from sts_core.training import DataArguments, ModelArguments

    if key in budget:
        flag = BUDGET_FLAGS.get(key)
        where = f"with {flag}" if flag else f"to {budget[key]!r} for every row"
        raise common.BenchmarkError(f"{source}: the search sets {key} itself ({where})")
    if key in {f.name for f in fields(ModelArguments)}:
        raise common.BenchmarkError(
            f"{source}: a model option: the search trains and scores every row with the "
            "model's own (mean pooling, its max length)"
        )
    if key in {f.name for f in fields(DataArguments)}:
        raise common.BenchmarkError(
            f"{source}: a data option: every row trains on the search's data (filtered "
            "STS-B + SICK-R)"
        )


def stage_of(values: dict[str, Any]) -> Any:
    """The first stage ``--set stage1_loss`` / ``stage1_epochs`` name
    (:func:`sts_core.search.stages.first_stage`), or None; BenchmarkError naming both."""
    try:
        return first_stage(values)
    except StageError as error:
        shown = " ".join(f"--set {key}={values.get(key)}" for key in STAGE_KEYS)
        raise common.BenchmarkError(f"{shown}: {error}") from None


def read_cells(path: Path) -> dict[str, dict[str, Any]]:
    """The cells of the cells file ``path`` (BenchmarkError when it is not one)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (ValueError, KeyError, TypeError) as error:
        raise common.BenchmarkError(f"{path}: not a cells file of this script ({error})") from error


class CellsFile:
    """The benchmark's table of trained cells (``--cells``, JSON): the records its
    ``sts-search`` cells and soups become (:mod:`grid_search.via_search`), which the report
    reads. Each record is added under a lock, merged with the file as it is on disk (two
    searches may share one cells file), written atomically and recorded in the folder's
    ledger, never over a file sts-core did not write."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cells: dict[str, dict[str, Any]] = read_cells(path) if path.is_file() else {}

    def add(self, key: str, record: dict[str, Any]) -> None:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(self.path.with_name(f".{self.path.name}.lock"), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            on_disk = read_cells(self.path) if self.path.is_file() else {}
            on_disk[key] = record
            self.cells = on_disk
            write_text(self.path, json.dumps({"cells": on_disk}, indent=1) + "\n")
        finally:
            os.close(lock)  # closing releases the lock


def describe(cell: Cell) -> dict[str, Any]:
    """A cell's fields as the cells file records them (:meth:`Cell.from_record` reads them
    back; ``variant``: the method with its ``--set`` settings, as the tables name it)."""
    recipe = cell.recipe
    described = {
        "method": recipe.method,
        "variant": recipe.variant,
        "settings": dict(recipe.settings),
        "epochs": recipe.epochs,
        "learning_rate": recipe.learning_rate,
        "seed": cell.seed,
    }
    teacher = dict(recipe.settings).get("teacher_model")
    if teacher:
        described["teacher_id"] = teacher_id(teacher)
    return described


_TEACHER_IDS: dict[str, str] = {}


def teacher_id(name: str) -> str:
    """The content id of a teacher folder: SHA-256 over its weight files (``*.safetensors``,
    ``*.bin``, sorted by path), first 12 hex digits. A cell records the id of the teacher it
    was trained with, so a folder retrained under the same name cannot pass off old cells."""
    if name not in _TEACHER_IDS:
        folder = common.model_path(name)
        files = sorted(p for p in folder.rglob("*") if p.suffix in (".safetensors", ".bin"))
        if not files:
            raise common.BenchmarkError(f"teacher {name!r}: no weight files in {folder}")
        digest = hashlib.sha256()
        for path in files:
            digest.update(str(path.relative_to(folder)).encode())
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        _TEACHER_IDS[name] = digest.hexdigest()[:12]
    return _TEACHER_IDS[name]


def check_cell_teacher(store_path: Path, key: str, record: dict[str, Any]) -> None:
    """Refuse a stored cell whose teacher folder now holds other weights than it was trained
    with (or whose record predates teacher ids while the folder exists)."""
    name = record.get("settings", {}).get("teacher_model")
    if not name:
        return
    recorded, current = record.get("teacher_id"), teacher_id(name)
    if recorded != current:
        raise common.BenchmarkError(
            f"{store_path}: cell {key!r} was trained with teacher {name!r} of weights "
            f"{recorded or '(not recorded)'}, but that folder now holds weights {current}: "
            "give the new teacher a folder name of its own (or remove the cell and its weights)"
        )


#: what a trained cell records of its cost
COST_KEYS = ("train_seconds", "steps", "peak_rss_mb")


# ----------------------------------------------------------------------------- inputs
#: the settings of a search that change what a cell learns or how it is scored
BUDGET_KEYS = ("batch_size", "max_steps", "train_pairs_cap", "eval_pairs")
BUDGET = "budget"


def search_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """What every cell of this search is trained on, beside its own recipe (each new record
    keeps it under ``inputs``): the content identity of ``--model`` and of the training and
    dev tables (:func:`sts_core.command_files.content_identity`), and the budget that
    changes a cell's result (:data:`BUDGET_KEYS`)."""
    from sts_core.data.references import reference_path

    data = common.data_dir()
    found = {"--model": content_identity(common.model_path(args.model))}
    for table, split in [*((name, "train") for name in TRAIN_TABLES), (DEV_TABLE, "dev")]:
        path = reference_path(table, split, data) or table
        found[f"{split} set {table}"] = content_identity(path)
    found[BUDGET] = {key: getattr(args, key) for key in BUDGET_KEYS}
    return found


def changed_inputs(recorded: dict[str, Any], now: dict[str, Any]) -> str | None:
    """How ``recorded`` (a cell's ``inputs``) differs from ``now`` (:func:`search_inputs`),
    in words; None when it does not (what a record lacks is not compared)."""
    for name, identity in now.items():
        old = recorded.get(name)
        if old is None:
            continue
        if name == BUDGET:
            changes = [f"{k} {old[k]} → {v}" for k, v in identity.items() if old.get(k, v) != v]
            change = f"the budget's {changes[0]}" if changes else None
        else:
            how = changed_identity(old, identity)
            change = f"{name} {old.get('path') or old.get('hub')}: {how}" if how else None
        if change:
            return change
    return None


def check_stored_inputs(path: Path, inputs: dict[str, Any]) -> None:
    """BenchmarkError when a cell of the cells file ``path`` was trained on other inputs
    than ``inputs`` (:func:`changed_inputs`): its scores are no scores of this search, and
    the report covers every cell of the file. A cell that records no inputs (trained
    before they were recorded) is not compared."""
    if not path.is_file():
        return
    for key, record in read_cells(path).items():
        change = changed_inputs(record.get("inputs") or {}, inputs)
        if change:
            raise common.BenchmarkError(
                f"--cells {path}: cell {key!r} was trained on other inputs ({change}): give "
                "this search a cells file and --weights-dir of its own, or run it on the "
                "inputs its cells were trained on"
            )
