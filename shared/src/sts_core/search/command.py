"""``sts-search``: which loss, at which rate and length, for the user's pairs.

Trains every method (an installed method's quality rows by default) over a grid of epochs,
learning rates and optional recipe keys on the first seed, scores each on the dev table,
picks each method's best recipe and the best overall by dev alone, trains the picks again
on the other seeds, scores them on the test table when one is named (never used to
choose), with ``--soup`` averages each pick's seeds into one model
(:mod:`sts_core.search.soups`), and writes a folder that explains itself
(:mod:`sts_core.search.report`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sts_core.command_files import (
    INTERRUPTED,
    NOTHING_HALF_WRITTEN,
    CommandFiles,
    FilesError,
    remove_path,
)
from sts_core.options import ListOptionsParser
from sts_core.recipe_yaml import RecipeYAMLError, load_yaml
from sts_core.search.cells import Cell
from sts_core.search.peers import PEER_METHOD, check_peer_recipe, default_peer_rows, peer_settings
from sts_core.search.report import write_report
from sts_core.search.schedule import Scheduler, finished, score_tests, slots, train_cells
from sts_core.search.select import headline, method_picks, overall_pick, recipes_of
from sts_core.search.soups import SOUPS_FOLDER, make_soups
from sts_core.search.spec import (
    LOCK_FILE,
    TASK_METRICS,
    WORKER_STARTS,
    SearchError,
    SearchSpec,
    check_folder,
    default_worker_start,
    fingerprint,
    folder_lock,
    grid_cells,
    record_identity,
    seed_cells,
)
from sts_core.search.stages import STAGE_KEYS, StageError, first_stage, stage_keys_text
from sts_core.search.untrained import score_untrained

if TYPE_CHECKING:
    from sts_core.method import Method

CELLS_FOLDER = "cells"


def make_parser() -> argparse.ArgumentParser:
    parser = ListOptionsParser(
        prog="sts-search",
        description="Compare the installed methods' losses on your pairs: a grid of epochs "
        "and learning rates (and recipe keys) per method, chosen by the dev table alone, "
        "the picks trained again on more seeds, a test table scored only after (docs/search.md).",
    )
    add = parser.add_argument
    add(
        "--train",
        nargs="+",
        required=True,
        metavar="TABLE",
        help="training tables: files (.csv/.tsv/.jsonl/.parquet…), save_to_disk folders, "
        "registry names or hub ids, as train_datasets takes them",
    )
    add("--dev", required=True, metavar="TABLE", help="the dev table: chooses everything")
    add(
        "--test",
        metavar="TABLE",
        help="a test table, scored for the picks only, after selection; 'sts-tasks': the "
        "seven STS tasks of --data-dir (STS12-16, STS-B test, SICK-R test; SentEval "
        "protocol, 'all'), the test score their mean",
    )
    add("--model", required=True, help="the model to start from (a folder or a hub id)")
    add(
        "--output-dir", required=True, type=Path, help="the search's folder (new, empty or its own)"
    )
    add(
        "--methods",
        nargs="+",
        default=None,
        metavar="METHOD[:ROW]",
        help="what to compare: an installed method (its default loss), method:row (one of "
        "its quality rows) or st:cosent, st:angle, st:cosine (sentence-transformers' losses; "
        "with --set teacher_model on the pairs the teacher relabels), st:embed-distill, "
        "st:mse-distill (distilling teacher_model's embeddings); default: every installed "
        "method's quality rows and, when installed, the peer's",
    )
    add("--epochs", nargs="+", type=float, default=[1.0], help="the grid's epochs (default 1)")
    add(
        "--learning-rate",
        nargs="+",
        type=float,
        default=[2e-5],
        dest="learning_rates",
        help="the grid's learning rates (default 2e-5)",
    )
    add(
        "--set",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="recipe keys for every cell (YAML values), e.g. --set pooling=cls "
        "max_seq_length=64 (several after one flag, or the flag repeated); "
        "stage1_loss=LOSS with stage1_epochs=E: a first stage with another loss of the "
        "method, then the row's loss from its model (docs/search.md)",
    )
    add(
        "--grid",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=V1,V2",
        help="recipe keys to search over (comma-separated values, or a YAML list), several "
        "after one flag or the flag repeated",
    )
    add(
        "--seeds",
        nargs="+",
        type=int,
        default=[0],
        help="the first chooses; the picks are trained on all of them (default 0)",
    )
    add(
        "--select-seeds",
        type=int,
        default=1,
        metavar="N",
        help="train the grid on the first N --seeds and choose by the mean dev over them "
        "(default 1)",
    )
    add(
        "--task",
        choices=tuple(TASK_METRICS),
        default="sts",
        help="the dev and test scorer: sts (scored pairs), classification (0/1 labels: "
        "thresholds chosen on dev), ranking (query_id groups)",
    )
    add(
        "--metric",
        default=None,
        help="the metric that chooses: "
        + "; ".join(
            f"{task}: {', '.join(m)} (default {d})" for task, (m, d) in TASK_METRICS.items()
        ),
    )
    add("--columns", default=None, metavar="JSON", help="the training tables' columns")
    add("--eval-columns", default=None, metavar="JSON", help="the dev and test tables' columns")
    add(
        "--score-range",
        nargs=2,
        type=float,
        default=None,
        metavar=("LOW", "HIGH"),
        help="the scale of the scores, for methods that train on scores scaled to 0–1",
    )
    add("--batch-size", type=int, default=16, help="per-device training batch (default 16)")
    add("--max-steps", type=int, default=-1, help="a step budget per cell (default: epochs)")
    add(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start no cell after this many seconds (the rest when started again)",
    )
    add(
        "--jobs",
        type=int,
        default=None,
        help="cells at a time (default: one per --devices, else 1); CPU threads are split",
    )
    add(
        "--threads",
        type=int,
        default=None,
        help="CPU threads per cell (default: the cores split over --jobs), e.g. 1 for two "
        "searches side by side",
    )
    add(
        "--eval-pairs",
        type=int,
        default=None,
        metavar="N",
        help="score at most N pairs of the dev and test tables (and of each STS task), "
        "every k-th: a quick look at a large search, not a result",
    )
    add(
        "--devices",
        nargs="+",
        default=[],
        metavar="GPU",
        help="GPU ids (CUDA_VISIBLE_DEVICES values), one cell on each at a time",
    )
    add(
        "--retrain",
        choices=("picks", "best"),
        default="picks",
        help="train every method's pick on the seeds (default), or the overall pick only",
    )
    add(
        "--in-process",
        action="store_true",
        help="train and score the cells in this process, one at a time (no interpreter "
        "start per cell; a cell's peak memory is then not measured)",
    )
    add(
        "--worker-start",
        choices=WORKER_STARTS,
        default=default_worker_start(),
        help="how each cell's own process starts: preloaded (default on Linux): forked from "
        "a server that imported torch, transformers and the training path once; fresh "
        "(default elsewhere): a new interpreter per cell",
    )
    add(
        "--soup",
        action="store_true",
        help="after the picks' seeds: each pick's soup, the uniform average of its seeds' "
        "embedding weights (heads left out), scored as a cell on dev and test (needs two or "
        "more --seeds)",
    )
    add("--data-dir", default=None, help="the registry datasets' folder ($STS_DATA_DIR)")
    add("--list", action="store_true", help="print the grid's cells and stop")
    return parser


def parse_value(text: str, option: str = "--set") -> Any:
    """A ``--set`` or ``--grid`` value as a recipe holds it (the recipe reader's YAML);
    SearchError naming ``option`` (``--set KEY``) when the reader refuses it."""
    if not text.strip():
        return text
    try:
        return load_yaml(text)[0]
    except RecipeYAMLError as error:
        raise SearchError(f"{option} {text!r}: {error}") from None


def parse_settings(items: Sequence[str], option: str) -> dict[str, str]:
    settings = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise SearchError(f"{option} {item!r}: expected KEY=VALUE")
        settings[key.strip()] = value
    return settings


def grid_values(text: str, option: str = "--grid") -> list[Any]:
    """``a,b`` → ``[a, b]``; a YAML list as written."""
    value = parse_value(text, option)
    if isinstance(value, list):
        return value
    return [parse_value(part, option) for part in text.split(",")]


def spec_from_arguments(args: argparse.Namespace) -> SearchSpec:
    from sts_core.options import parse_json_mapping

    try:
        columns = parse_json_mapping(args.columns, "--columns")
        eval_columns = parse_json_mapping(args.eval_columns, "--eval-columns")
    except ValueError as error:
        raise SearchError(str(error)) from None
    return SearchSpec(
        train=args.train,
        dev=args.dev,
        test=args.test,
        model=args.model,
        output_dir=args.output_dir,
        methods=args.methods or [],
        epochs=args.epochs,
        learning_rates=args.learning_rates,
        settings={
            k: parse_value(v, f"--set {k}") for k, v in parse_settings(args.set, "--set").items()
        },
        grid={
            k: grid_values(v, f"--grid {k}") for k, v in parse_settings(args.grid, "--grid").items()
        },
        seeds=args.seeds,
        select_seeds=args.select_seeds,
        task=args.task,
        metric=args.metric,
        columns=columns,
        eval_columns=eval_columns,
        score_range=args.score_range,
        batch_size=args.batch_size,
        max_steps=args.max_steps,
        time_limit=args.time_limit,
        jobs=args.jobs if args.jobs is not None else max(1, len(args.devices)),
        devices=args.devices,
        retrain=args.retrain,
        data_dir=args.data_dir,
        threads=args.threads,
        eval_pairs=args.eval_pairs,
        in_process=args.in_process,
        soup=args.soup,
        worker_start=args.worker_start,
    )


def method_rows(spec: SearchSpec) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each ``--methods`` entry → (installed method, the row's settings); fills the default
    (every installed method's quality rows, else the core's cosine MSE)."""
    from sts_core.training.method_registry import installed_method_names, load_methods

    methods = load_methods()
    if not spec.methods:
        spec.methods = [f"{m.name}:{r.name}" for m in methods.values() for r in m.quality_rows]
        spec.methods = (spec.methods or ["core"]) + default_peer_rows()
    rows = {}
    teacher = bool(spec.settings.get("teacher_model")) or "teacher_model" in spec.grid
    for entry in spec.methods:
        name, _, row_name = entry.partition(":")
        if name == "st":
            settings = peer_settings(entry, row_name, spec.score_range, teacher)
            rows[entry] = (PEER_METHOD, settings)
            continue
        method = methods.get(name) if name != "core" else _core()
        if method is None:
            raise SearchError(
                f"--methods {entry!r}: no installed method {name!r} "
                f"(installed: {', '.join(installed_method_names())})"
            )
        rows[entry] = (method.name, _row_settings(spec, entry, method, row_name))
    return rows


def _core() -> Method[Any]:
    from sts_core.training.method_registry import CORE_METHOD

    return CORE_METHOD


def _row_settings(
    spec: SearchSpec, entry: str, method: Method[Any], row_name: str
) -> dict[str, Any]:
    if not row_name:
        return {}
    found = [row for row in method.quality_rows if row.name == row_name]
    if not found:
        names = ", ".join(row.name for row in method.quality_rows) or "none"
        raise SearchError(f"--methods {entry!r}: {method.name} has no row {row_name!r} ({names})")
    row = found[0]
    settings = dict(row.settings)
    if row.unit_labels:
        if spec.score_range is None:
            raise SearchError(
                f"--methods {entry!r} trains on scores scaled to 0–1: give --score-range LOW "
                "HIGH, the scale of your scores (e.g. 0 5)"
            )
        settings["score_range"] = list(spec.score_range)
    return settings


def scoring_of(spec: SearchSpec) -> dict[str, Any]:
    return {
        "task": spec.task,
        "metric": spec.metric,
        "dev": spec.dev,
        "test": spec.test,
        "test_fingerprint": fingerprint(spec.test) if spec.test else None,
        "inputs": spec.input_identities(),
        "eval_columns": spec.eval_columns,
        "data_dir": spec.data_dir,
        "eval_pairs": spec.eval_pairs,
    }


def check_training_tables(spec: SearchSpec) -> None:
    """Each ``--train`` table read with ``--columns`` before any cell's check, so that a
    missing or wrong column is named with the search's option (a cell's ``sts-train``
    names its recipe key, ``columns``)."""
    from sts_core.data import TableReading, load_reference, registry_names, split_reference

    for table in spec.train:
        registry = split_reference(table, "train")[0] in registry_names()
        try:
            load_reference(
                table,
                "train",
                data_dir=spec.data_dir,
                columns=None if registry else spec.columns,
                reading=TableReading("--columns"),
            )
        except (ValueError, OSError) as error:
            raise SearchError(f"--train {table}: {' '.join(str(error).split())}") from None


def check_inputs(spec: SearchSpec, cells: Sequence[Cell]) -> None:
    """Before any training: each cell's first stage (:func:`check_stages`), the training
    tables read under ``--columns``, the dev (and test) table loads under the scorer, and
    each method's first cell passes ``sts-train --check_only`` (recipe keys, training tables
    under each loss, model; a first stage's loss as well): the first problem is one line."""
    from sts_core.search.worker import table_evaluator

    # one cell for each method and settings (a --grid value may be a recipe key's problem)
    distinct = {(cell.method, json.dumps(cell.training, sort_keys=True)): cell for cell in cells}
    for cell in distinct.values():
        check_stages(spec, cell)
    check_training_tables(spec)
    scoring = scoring_of(spec)
    for table, name in ((spec.dev, "dev"), (spec.test, "test")):
        if table is not None:
            try:
                table_evaluator(scoring, table, name, name)
            except (ValueError, OSError) as error:
                raise SearchError(f"--{name} {table}: {' '.join(str(error).split())}") from None
    with tempfile.TemporaryDirectory(prefix="sts-search-check-") as scratch:
        for (method, _), cell in distinct.items():
            content = cell.train_recipe(spec.base_recipe(), Path(scratch) / "model")
            if cell.method_name == PEER_METHOD:
                check_peer_recipe(content, method)
                continue
            reason = check_recipe(cell.method_name, content, Path(scratch))
            if reason is not None:
                raise SearchError(f"--methods {method}: {reason}")
            first = first_stage(cell.training)
            if first is None:
                continue
            stage1 = first.recipe(content, str(Path(scratch) / "stage1"))
            reason = check_recipe(cell.method_name, stage1, Path(scratch), where="")
            if reason is not None:
                stage = stage_keys_text({"stage1_loss": first.loss}, _option_of(spec))
                raise SearchError(f"--methods {method}: {stage} (the first stage): {reason}")


def check_stages(spec: SearchSpec, cell: Cell) -> None:
    """The cell's first stage (:mod:`sts_core.search.stages`): both keys or neither, a loss
    name and epochs > 0, and only for an installed method with more than one loss (a peer
    row's loss is sentence-transformers'); SearchError naming the ``--set`` / ``--grid``
    keys. Whether the loss is one of the method's is ``sts-train``'s check of the first
    stage's recipe (:func:`check_inputs`)."""
    given = {key: cell.training[key] for key in STAGE_KEYS if key in cell.training}
    if not given:
        return
    shown = stage_keys_text(given, _option_of(spec))
    if cell.method_name == PEER_METHOD:
        raise SearchError(
            f"--methods {cell.method}: {shown}: two stages train an installed method's "
            "losses; a peer row (st:*) trains one sentence-transformers loss"
        )
    try:
        first_stage(given)
    except StageError as error:
        raise SearchError(f"--methods {cell.method}: {shown}: {error}") from None
    losses = _loss_names(cell.method_name)
    if len(losses) < 2:
        raise SearchError(
            f"--methods {cell.method}: {shown}: {cell.method_name} has one loss "
            f"({', '.join(losses)}); a first stage trains another loss of the method"
        )


def _loss_names(method_name: str) -> tuple[str, ...]:
    """The losses of the installed method ``method_name`` (method_rows found it)."""
    from sts_core.training.method_registry import installed_method

    method = installed_method(method_name)
    return method.loss_names if method is not None else ()


def _option_of(spec: SearchSpec) -> Callable[[str], str]:
    """A recipe key → the option that gave it (``--grid`` or ``--set``)."""
    return lambda key: "--grid" if key in spec.grid else "--set"


#: how a refusal names the scratch recipe: what the user gave (the row's and ``--set``)
OWN_RECIPE = "its recipe (the row's settings and --set)"


def check_recipe(
    method_name: str, content: dict[str, Any], scratch: Path, where: str = OWN_RECIPE
) -> str | None:
    """Why ``sts-train --check_only`` refuses the recipe ``content``, as one line naming
    the scratch recipe (and its line) as ``where`` (nothing: ``""``); None when it passes."""
    from sts_core.training.run import main as sts_train

    recipe = scratch / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(content), encoding="utf-8")
    argv = ["--method", method_name, "--config", str(recipe), "--check_only", "true"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = sts_train(argv)
    if status == 0:
        return None
    lines = [x for x in err.getvalue().splitlines() if x.startswith("error: ")]
    reason = lines[-1][len("error: ") :] if lines else err.getvalue().strip()[-300:]

    def named(found: re.Match[str]) -> str:
        """The scratch recipe is the search's own: what the user gave instead."""
        if not where:
            return ""
        return f"{where}, line {found[1]}: " if found[1] else f"{where}: "

    return re.sub(rf"{re.escape(str(recipe))}(?::(\d+))?: ?", named, reason)


def search_files(spec: SearchSpec) -> CommandFiles:
    """What the search reads (the model, every table, the data folder) and writes (its
    folder, which it checks itself: :func:`sts_core.search.spec.check_folder`)."""
    from sts_core.data.references import reference_path

    files = CommandFiles("sts-search", replace_flag=None)
    files.reads("--model", spec.model)
    files.reads("--data-dir", spec.data_dir or os.environ.get("STS_DATA_DIR"))
    tables = [("--train", t) for t in spec.train] + [("--dev", spec.dev), ("--test", spec.test)]
    for option, table in tables:
        if table:
            files.reads(option, reference_path(table, "train", spec.data_dir))
    files.writes("--output-dir", spec.output_dir, kind="run")
    return files


def run_search(spec: SearchSpec, log: Any = print) -> dict[str, Any]:
    """Run (or resume) the search; write its folder; return its summary."""
    rows = method_rows(spec)
    grid = grid_cells(spec, rows)
    try:
        search_files(spec).check()
    except FilesError as error:
        raise SearchError(str(error)) from None
    new_folder = not spec.output_dir.exists()
    new_lock = not (spec.output_dir / LOCK_FILE).exists()
    lock = folder_lock(spec)
    try:
        check_folder(spec)
        check_inputs(spec, grid)
        record_identity(spec)
    except BaseException:
        lock.release()
        if new_folder:  # made for the lock alone: nothing of the user's is in it
            remove_path(spec.output_dir)
        elif new_lock:  # the folder is left as it was
            (spec.output_dir / LOCK_FILE).unlink(missing_ok=True)
        raise
    try:
        return _search(spec, grid, log)
    finally:
        lock.release()


def _search(spec: SearchSpec, grid: list[Cell], log: Any) -> dict[str, Any]:
    deadline = None if spec.time_limit is None else time.monotonic() + spec.time_limit
    scheduler = Scheduler(
        slots(
            spec.jobs,
            spec.devices,
            threads=spec.threads,
            in_process=spec.in_process,
            start=spec.worker_start,
        ),
        deadline,
    )
    root = spec.output_dir / CELLS_FOLDER
    base, scoring = spec.base_recipe(), scoring_of(spec)
    records = train_cells(scheduler, grid, root, base, scoring, log)
    picks = method_picks(records, spec.selection_seeds)
    best = overall_pick(records, picks, spec.selection_seeds)
    retrained = [best] if spec.retrain == "best" and best else list(picks.values())
    by_recipe = {cell.recipe_key: cell for cell in grid}
    rest = spec.seeds[spec.select_seeds :]
    extra = [c for key in retrained for c in seed_cells(by_recipe[key], rest)]
    records += train_cells(scheduler, extra, root, base, scoring, log)
    if spec.test:
        runs = recipes_of(records)
        score_tests(scheduler, [r for key in retrained for r in runs[key]], spec.test, log)
        # their test scores
        records = finished(grid + extra, root, scoring["test_fingerprint"], scoring["inputs"])
    soups = []
    if spec.soup:
        folder = spec.output_dir / SOUPS_FOLDER
        soups = make_soups(scheduler, records, retrained, spec.seeds, folder, scoring, log)
    # once per search (kept while the model and the dev table are), after the cells: its
    # failure stops nothing of theirs
    untrained = score_untrained(scheduler, spec.model, spec.settings, spec.output_dir, scoring, log)
    return summarise(spec, records, picks, best, scheduler, soups, untrained)


def summarise(
    spec: SearchSpec,
    records: list[dict[str, Any]],
    picks: dict,
    best: str | None,
    scheduler: Any,
    soups: list[dict[str, Any]] | None = None,
    untrained: dict[str, Any] | None = None,
) -> dict[str, Any]:
    best_record = next(
        (r for r in records if r["recipe"] == best and r["seed"] == spec.selection_seed), None
    )
    summary = {
        "headline": headline(records, spec.selection_seeds, spec.seeds, spec.metric),
        "task": spec.task,
        "metric": spec.metric,
        "dev": spec.dev,
        "test": spec.test,
        "selection_seed": spec.selection_seed,
        "selection_seeds": spec.selection_seeds,
        "seeds": spec.seeds,
        "picks": picks,
        "best": best,
        "best_record": best_record,
        "cells": records,
        "soups": soups or [],
        "untrained": untrained,
        "not_run": scheduler.skipped,
        "failures": scheduler.failures,
    }
    write_report(spec.output_dir, summary)
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    spec = None
    try:
        spec = spec_from_arguments(args)
        if args.list:
            for cell in grid_cells(spec, method_rows(spec)):
                print(cell.key)
            return 0
        summary = run_search(spec)
    except SearchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        kept = (
            NOTHING_HALF_WRITTEN
            if spec is None
            else (
                f"the cells finished so far are kept in {spec.output_dir}; the same command goes "
                "on from there (the cells that were training start again)"
            )
        )
        print(f"error: interrupted (Ctrl-C): {kept}", file=sys.stderr)
        return INTERRUPTED
    print(summary["headline"])
    print(f"sts-search: the report is {spec.output_dir / 'search.md'}")
    if summary["failures"]:
        print("error: " + "; ".join(summary["failures"]), file=sys.stderr)
        return 1
    return 0
