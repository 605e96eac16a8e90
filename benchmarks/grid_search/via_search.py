"""The quality search through ``sts-search``: every row, ours (with any ``--set``, Pcc-tuning's
two stages included) and the peer's (``st-cosine``, ``st-cosent``, ``st-angle``, with or
without a teacher, the in-batch rows ``st-mnsrl``, ``st-simcse`` and the distillation rows
``st-embed-distill``, ``st-mse-distill``). The
search's own inputs, given to ``sts-search`` as a user would: ``--train stsb sickr --dev
stsb:dev --test sts-tasks --score-range 0 5 --set filter_test_overlap=true --set
weight_decay=0.01 --set warmup_steps=0.1 --set pooling=mean``, batch 16, the grid's epochs
and rates, the selection seeds first (``--select-seeds N``, N of them), ``--soup``. One
``sts-search`` folder per method and settings under ``<weights-dir>/sts-search/``: it trains
the grid, picks the method's recipe by dev alone, trains the pick on the other seeds, scores
them on the seven tasks and makes their soup; its cells and soups are then copied into the
cells file (:func:`stored_record`, :func:`soup_record`), from which the report is written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common as common
import quality

from grid_search.cells import config_values, describe
from grid_search.inputs import DEV_TABLE, FIXED_SETTINGS, SCORE_RANGE, TRAIN_TABLES
from sts_core.command_files import set_command
from sts_core.search.cells import Cell, Recipe

#: the peer's rows by their ``sts-search`` names (``st:<row>``)
PEER_ROWS = {
    "st-cosine": "st:cosine",
    "st-cosent": "st:cosent",
    "st-angle": "st:angle",
    "st-mnsrl": "st:mnsrl",
    "st-simcse": "st:simcse",
    "st-embed-distill": "st:embed-distill",
    "st-mse-distill": "st:mse-distill",
}

#: the folder, under ``--weights-dir``, of the ``sts-search`` folders
SEARCH_FOLDER = "sts-search"
#: the writer the ledgers name for what the benchmark writes (its cells file, its report)
BENCHMARK = "quality_search.py"


def searched_row(method: str) -> str:
    """``sts-search``'s name of the row: ``<method>:<row>`` for ours, ``st:<row>`` for the
    peer's."""
    from sts_core.training.method_registry import quality_rows

    if method.startswith("ours-"):
        ours, row = quality_rows()[method]
        return f"{ours.name}:{row.name}"
    return PEER_ROWS[method]


def search_folder(args: argparse.Namespace, method: str, settings: tuple) -> Path:
    """``<weights-dir>/sts-search/<method>[-<hash of the settings>]``: one folder per
    method and settings (two searches side by side never share one)."""
    name = method
    if settings:
        name += "-" + hashlib.sha1(json.dumps(settings).encode()).hexdigest()[:10]
    return Path(args.weights_dir).expanduser() / SEARCH_FOLDER / name


def ordered_seeds(args: argparse.Namespace) -> list[int]:
    """The selection seeds first (``sts-search`` trains the grid on its first
    ``--select-seeds N`` seeds and chooses by their mean dev), then the rest; the selection
    seeds alone with ``--grid-only``."""
    chosen = list(args.select_seeds)
    if args.grid_only:
        return chosen
    return [*chosen, *(seed for seed in args.seeds if seed not in chosen)]


def search_settings(args: argparse.Namespace, method: str, settings: tuple) -> dict[str, Any]:
    """Every cell's recipe keys: the benchmark's fixed ones, the run's ``--set`` in the
    types the checks read them in (the parser of the row's method; the core's for the
    peer's teacher keys; a teacher named under STS_MODELS_DIR given as its path) and, in
    the smoke mode, the pairs cap."""
    from sts_core.training.method_registry import CORE_METHOD, quality_rows
    from sts_core.training.parser import ConfigParser

    ours = quality_rows()[method][0] if method.startswith("ours-") else CORE_METHOD
    values = {**FIXED_SETTINGS, **config_values(settings, ConfigParser.for_method(ours))}
    if args.train_pairs_cap:
        values["max_train_samples"] = args.train_pairs_cap
    return values


def search_spec(
    args: argparse.Namespace, method: str, settings: tuple, folder: Path | None = None
) -> Any:
    """The ``sts-search`` of one method and settings on the quality search's inputs, in
    ``folder`` (default: :func:`search_folder`)."""
    from sts_core.search.spec import STS_TASKS_TEST, SearchSpec

    return SearchSpec(
        train=list(TRAIN_TABLES),
        dev=DEV_TABLE,
        test=None if args.grid_only else STS_TASKS_TEST,
        model=str(common.model_path(args.model)),
        output_dir=folder or search_folder(args, method, settings),
        methods=[searched_row(method)],
        epochs=list(args.epochs),
        learning_rates=list(args.learning_rate),
        settings=search_settings(args, method, settings),
        seeds=ordered_seeds(args),
        select_seeds=len(args.select_seeds),
        score_range=list(SCORE_RANGE),
        batch_size=args.batch_size,
        max_steps=args.max_steps,
        threads=args.threads,
        jobs=1 if args.in_process else args.jobs,
        in_process=args.in_process,
        soup=args.soup,
        eval_pairs=args.eval_pairs or None,
        data_dir=str(common.data_dir()),
    )


def test_scores(metrics: dict[str, float]) -> dict[str, float]:
    """``sts-search``'s seven-task metrics as the cells file's test scores: each task's
    Spearman ('all'), their mean and the mean of the subset-weighted ones."""
    scores = {task: metrics[f"test_{task}_spearman"] for task in quality.TASKS}
    scores["avg"] = metrics["test_spearman"]
    scores["avg_wmean"] = metrics["test_spearman_wmean"]
    return scores


def stored_record(
    args: argparse.Namespace, method: str, settings: tuple, found: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The benchmark's key of an ``sts-search`` cell and its record: dev to four places,
    the cost (``train_seconds``: the ``sts-train`` run, its data preparation included), the
    test scores when the cell was scored, and its folder (relative to ``--weights-dir``),
    where its model is."""
    cell = Cell(Recipe(method, settings, found["epochs"], found["learning_rate"]), found["seed"])
    weights = Path(args.weights_dir).expanduser()
    record = {
        **describe(cell),
        "train_seconds": found["train_seconds"],
        "steps": found["steps"],
        "peak_rss_mb": found.get("peak_rss_mib"),
        "dev": None if found["dev"] is None else round(found["dev"], 4),
        "search_cell": str(Path(found["folder"]).relative_to(weights)),
    }
    if found.get("error"):
        record["error"] = found["error"]
    teacher = found.get("teacher") or run_data(found["folder"]).get("teacher")
    if teacher:  # what the run's teacher step made of the pairs
        record["teacher"] = teacher
    if "test_metrics" in found:
        record["test"] = test_scores(found["test_metrics"])
    return cell.key, record


def soup_record(
    args: argparse.Namespace, method: str, settings: tuple, soup: dict[str, Any], budget: tuple
) -> tuple[str, dict[str, Any]]:
    """The benchmark's key of an ``sts-search`` soup (the uniform average of a pick's seeds)
    and its record: the first seed's cell described, the seeds, dev to four places, the
    test scores, its folder (relative to ``--weights-dir``). ``budget``: the recipe's
    epochs and learning rate."""
    recipe = Recipe(method, settings, *budget)
    seeds = list(soup["seeds"])
    cell = Cell(recipe, seeds[0])
    weights = Path(args.weights_dir).expanduser()
    record = {
        **describe(cell),
        "soup_of": seeds,
        "dev": None if soup["dev"] is None else round(soup["dev"], 4),
        "search_cell": str(Path(soup["folder"]).relative_to(weights)),
    }
    if soup.get("test_metrics"):
        record["test"] = test_scores(soup["test_metrics"])
    return recipe.soup_key(len(seeds)), record


def run_data(folder: str) -> dict[str, Any]:
    """What the cell's ``sts-train`` run recorded of its data (``metrics.json``)."""
    from sts_core.search.cells import MODEL_FOLDER, read_json

    metrics = read_json(Path(folder) / MODEL_FOLDER / "metrics.json") or {}
    return metrics.get("data") or {}


def run_method(
    args: argparse.Namespace,
    method: str,
    settings: tuple,
    keep: Callable[[str, dict[str, Any]], None],
) -> None:
    """Run (or resume) the method's ``sts-search``; ``keep`` each of its finished cells and
    soups as (benchmark key, record), also when the search stops early (a failure, Ctrl-C),
    so that the cells file holds every cell trained."""
    summary = search_summary(args, method, settings, None, keep)
    if summary["failures"]:
        raise common.BenchmarkError(f"sts-search for {method}: {'; '.join(summary['failures'])}")


def search_summary(
    args: argparse.Namespace,
    method: str,
    settings: tuple,
    folder: Path | None,
    keep: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume) ``sts-search`` of one method and settings in ``folder`` (default:
    :func:`search_folder`); ``keep`` its finished cells and soups; its summary."""
    from sts_core.search.command import run_search
    from sts_core.search.spec import SearchError

    try:
        spec = search_spec(args, method, settings, folder)
    except SearchError as error:  # a setting sts-search refuses, before anything trains
        raise common.BenchmarkError(f"sts-search for {method}: {error}") from None
    summary: dict[str, Any] = {}
    try:
        summary = run_search(spec, log=lambda line: print(line, flush=True))
    except SearchError as error:
        raise common.BenchmarkError(f"sts-search for {method}: {error}") from None
    finally:
        set_command(BENCHMARK)  # what the benchmark writes next is its own, not sts-search's
        if keep is not None:
            found = finished_cells(spec)
            for cell in found:
                keep(*stored_record(args, method, settings, cell))
            budgets = {cell["recipe"]: (cell["epochs"], cell["learning_rate"]) for cell in found}
            for soup in summary.get("soups", []):
                keep(*soup_record(args, method, settings, soup, budgets[soup["recipe"]]))
    return summary


def finished_cells(spec: Any) -> list[dict[str, Any]]:
    """The records of every finished cell in the search's folder trained on the search's
    inputs as they are now (their content identities; a cell trained on other content is
    left out: ``sts-search`` trains it again), with its test score when it was scored on
    the search's test table, in folder order."""
    from sts_core.search.cells import CELL_FILE, done_record, read_json
    from sts_core.search.command import CELLS_FOLDER
    from sts_core.search.spec import fingerprint

    test = fingerprint(spec.test) if spec.test else None
    inputs = spec.input_identities()
    records = []
    for folder in sorted((spec.output_dir / CELLS_FOLDER).glob("*/")):
        described = read_json(folder / CELL_FILE)
        if described is None:
            continue
        cell = Cell.from_record(described)
        record = done_record(folder, cell, test, inputs)
        if record is not None:
            records.append(record)
    return records
