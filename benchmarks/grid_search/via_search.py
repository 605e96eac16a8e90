"""The rows ``sts-search`` trains for the quality search: every row of ours (with any
``--set`` but Pcc-tuning's two stages) and the peer's plain rows (``st-cosine``,
``st-cosent``, ``st-angle`` without a teacher). The search's own inputs, given to
``sts-search`` as a user would: ``--train stsb sickr --dev stsb:dev --test sts-tasks
--score-range 0 5 --set filter_test_overlap=true --set weight_decay=0.01 --set
warmup_steps=0.1 --set pooling=mean``, batch 16, the grid's epochs and rates, the selection
seeds first (``--select-seeds N``, N of them). One ``sts-search`` folder per method and
settings under ``<weights-dir>/sts-search/``: it trains the grid, picks the method's recipe
by dev alone, trains the pick on the other seeds and scores them on the seven tasks; its
cells are then copied into the cells file (:func:`stored_record`), from which the report is
written.

What ``sts-search`` does not offer stays in the benchmark's own trainer
(:mod:`grid_search.search`): the peer's rows with a teacher (``peer_teacher.py``), the
embedding distillation and in-batch rows, the two stages and ``--measure-cost``.
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

from grid_search.cells import STAGE_KEYS, config_values, describe
from grid_search.inputs import DEV_TABLE, FIXED_SETTINGS, SCORE_RANGE, TRAIN_TABLES
from grid_search.weights import embedding_weights
from sts_core.command_files import set_command
from sts_core.search.cells import Cell, Recipe

#: the peer's rows ``sts-search`` trains itself (``st:<row>``), without a teacher
PEER_ROWS = {"st-cosine": "st:cosine", "st-cosent": "st:cosent", "st-angle": "st:angle"}

#: the folder, under ``--weights-dir``, of the ``sts-search`` folders
SEARCH_FOLDER = "sts-search"
#: the writer the ledgers name for what the benchmark writes (its cells file, its report)
BENCHMARK = "quality_search.py"


def searched_row(args: argparse.Namespace, method: str, settings: tuple) -> str | None:
    """``sts-search``'s name of the row (``<method>:<row>`` or ``st:<row>``); None when the
    benchmark trains it itself (see the module's docstring)."""
    from sts_core.training.method_registry import quality_rows

    if args.measure_cost:
        return None
    if any(key in STAGE_KEYS for key, _ in settings):
        return None
    if method.startswith("ours-"):
        ours, row = quality_rows()[method]
        return f"{ours.name}:{row.name}"
    return PEER_ROWS.get(method) if not settings else None


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


def search_settings(args: argparse.Namespace, settings: tuple) -> dict[str, Any]:
    """Every cell's recipe keys: the benchmark's fixed ones, the run's ``--set`` (a teacher
    named under STS_MODELS_DIR given as its path) and, in the smoke mode, the pairs cap."""
    values = {**FIXED_SETTINGS, **config_values(settings)}
    if args.train_pairs_cap:
        values["max_train_samples"] = args.train_pairs_cap
    return values


def search_spec(args: argparse.Namespace, method: str, settings: tuple) -> Any:
    """The ``sts-search`` of one method and settings on the quality search's inputs."""
    from sts_core.search.spec import STS_TASKS_TEST, SearchSpec

    return SearchSpec(
        train=list(TRAIN_TABLES),
        dev=DEV_TABLE,
        test=None if args.grid_only else STS_TASKS_TEST,
        model=str(common.model_path(args.model)),
        output_dir=search_folder(args, method, settings),
        methods=[searched_row(args, method, settings)],
        epochs=list(args.epochs),
        learning_rates=list(args.learning_rate),
        settings=search_settings(args, settings),
        seeds=ordered_seeds(args),
        select_seeds=len(args.select_seeds),
        score_range=list(SCORE_RANGE),
        batch_size=args.batch_size,
        max_steps=args.max_steps,
        threads=args.threads,
        jobs=args.jobs,
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
) -> tuple[Cell, dict[str, Any]]:
    """The benchmark's cell and its record from an ``sts-search`` cell: dev to four places,
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
    teacher = run_data(found["folder"]).get("teacher")
    if teacher:  # what the run's teacher step made of the pairs
        record["teacher"] = teacher
    if "test_metrics" in found:
        record["test"] = test_scores(found["test_metrics"])
    return cell, record


def run_data(folder: str) -> dict[str, Any]:
    """What the cell's ``sts-train`` run recorded of its data (``metrics.json``)."""
    from sts_core.search.cells import MODEL_FOLDER, read_json

    metrics = read_json(Path(folder) / MODEL_FOLDER / "metrics.json") or {}
    return metrics.get("data") or {}


def run_method(
    args: argparse.Namespace, method: str, settings: tuple, keep: Callable[[Cell, dict], None]
) -> None:
    """Run (or resume) the method's ``sts-search``; ``keep`` each of its finished cells as
    (benchmark cell, record), also when the search stops early (a failure, Ctrl-C), so that
    the cells file holds every cell trained."""
    from sts_core.search.command import run_search
    from sts_core.search.spec import SearchError

    try:
        spec = search_spec(args, method, settings)
    except SearchError as error:  # a setting sts-search refuses, before anything trains
        raise common.BenchmarkError(f"sts-search for {method}: {error}") from None
    try:
        summary = run_search(spec, log=lambda line: print(line, flush=True))
    except SearchError as error:
        raise common.BenchmarkError(f"sts-search for {method}: {error}") from None
    finally:
        set_command(BENCHMARK)  # what the benchmark writes next is its own, not sts-search's
        for found in finished_cells(spec):
            keep(*stored_record(args, method, settings, found))
    if summary["failures"]:
        raise common.BenchmarkError(f"sts-search for {method}: {'; '.join(summary['failures'])}")


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


def model_state(args: argparse.Namespace, record: dict[str, Any]) -> dict[str, Any]:
    """The embedding weights of a cell ``sts-search`` trained, from its saved model."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.search.cells import MODEL_FOLDER

    folder = Path(args.weights_dir).expanduser() / record["search_cell"] / MODEL_FOLDER
    if not folder.is_dir():
        raise common.BenchmarkError(
            f"{folder}: the model of {record['variant']} (seed {record['seed']}) is gone; "
            "remove its cells from the cells file to train them again"
        )
    return embedding_weights(SentenceEncoder.from_pretrained(str(folder)))
