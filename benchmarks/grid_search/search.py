"""The search of every method through ``sts-search``: per method and settings one search
(:mod:`grid_search.via_search`) trains the grid on the selection seeds, picks by dev, trains
the pick on every seed, tests it and makes its soup; its cells are copied into the cells
file, from which the selections are read (:func:`run_search`). ``--measure-cost`` trains a
stored cell without its cost columns again, as a one-cell search in a scratch folder
(:func:`measure_cost`). Nothing here trains or scores a model itself."""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import _common as common

from grid_search.cells import DISTILL_METHODS, CellsFile, check_cell_teacher
from grid_search.via_search import run_method, search_summary
from sts_core.search.cells import Cell, Recipe
from sts_core.search.peer_teacher import TEACHER_KEYS
from sts_core.search.select import method_picks

#: ``--measure-cost``: how far a second training's dev score may be from the stored one (CPU
#: runs repeat exactly per seed; the store keeps four decimals)
DEV_REPRODUCED = 1e-3


def grid_cells(args: argparse.Namespace, method: str, seeds: list[int]) -> list[list[Cell]]:
    """The grid of one method: per (epochs, lr), its cells over ``seeds``. Our rows get
    every ``--set`` field; the peer's the teacher's (:data:`TEACHER_KEYS`) only, and a
    distillation row its ``teacher_model`` alone (it relabels no pairs)."""
    settings = args.settings
    if not method.startswith("ours-"):
        kept = ("teacher_model",) if method in DISTILL_METHODS else TEACHER_KEYS
        settings = tuple((k, v) for k, v in settings if k in kept)
    return [
        [Cell(Recipe(method, settings, epochs, lr), seed) for seed in seeds]
        for epochs, lr in itertools.product(args.epochs, args.learning_rate)
    ]


def soup_key(cells: list[Cell]) -> str:
    """The cells file's key of the soup of ``cells`` (one recipe's seeds)."""
    return cells[0].recipe.soup_key(len(cells))


class Selection:
    """One method's grid read from the cells file: its dev scores, its pick, the pick's
    seeds and their test scores and soup."""

    def __init__(self, args: argparse.Namespace, table: CellsFile, grid: list[list[Cell]]):
        self.args, self.table, self.grid = args, table, grid
        self.method = grid[0][0].method

    def stored(self, key: str) -> dict[str, Any] | None:
        """The stored record of ``key``, its teacher checked (:func:`check_cell_teacher`)."""
        record = self.table.cells.get(key)
        if record is not None:
            check_cell_teacher(self.table.path, key, record)
        return record

    def grid_records(self) -> list[dict[str, Any]] | None:
        """Each grid cell's dev score as the selection reads it; None while one is missing."""
        records = []
        for index, recipe in enumerate(self.grid):
            for cell in recipe:
                dev = (self.stored(cell.key) or {}).get("dev", "missing")
                if dev == "missing":
                    return None
                records.append({"method": self.method, "recipe": index, "seed": cell.seed})
                records[-1]["dev"] = dev
        return records

    def chosen(self) -> list[Cell] | None:
        """The pick (by dev alone, over the selection seeds) on every seed; None while the
        grid is incomplete."""
        records = self.grid_records()
        if records is None:
            return None
        best = self.grid[method_picks(records, self.args.select_seeds)[self.method]][0]
        return [replace(best, seed=seed) for seed in self.args.seeds]

    def complete(self) -> bool:
        """Whether the cells file holds every result of the method's search already: the
        grid's dev scores, the pick's test scores on every seed (unless ``--grid-only``),
        its soup (with ``--soup``); then ``sts-search`` is not started."""
        chosen = self.chosen()
        if chosen is None or self.args.grid_only:
            return chosen is not None
        if any("test" not in (self.stored(c.key) or {}) for c in chosen):
            return False
        return not (self.wants_soup(chosen) and self.stored(soup_key(chosen)) is None)

    def wants_soup(self, chosen: list[Cell]) -> bool:
        return bool(self.args.soup) and len(chosen) > 1

    def selection(self) -> dict[str, Any]:
        """The pick, its seeds' test scores and (with ``--soup``) its soup's record."""
        chosen = self.chosen()
        if chosen is None:
            raise common.BenchmarkError(f"{self.method}: sts-search left grid cells untrained")
        tests = []
        for cell in chosen:
            record = self.stored(cell.key) or {}
            if "test" not in record:
                raise common.BenchmarkError(
                    f"{self.table.path}: cell {cell.key!r} has no test score (sts-search did "
                    "not score it: not its pick): run the search again"
                )
            tests.append(record["test"])
        recipe = chosen[0].recipe
        selection = {"method": self.method, "variant": recipe.variant, "recipe": recipe.key}
        selection["tests"] = tests
        if self.wants_soup(chosen):
            selection["soup"] = self.stored(soup_key(chosen))
        return selection


def run_search(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per method: ``sts-search`` unless the cells file holds its results (dev on the grid,
    then, unless ``--grid-only``, the pick on every seed, tested, and its soup with
    ``--soup``); the selections read from the cells file."""
    table = CellsFile(Path(args.cells))
    selections = []
    for method in args.methods:
        grid = grid_cells(args, method, args.select_seeds)
        if args.measure_cost:
            for recipe in grid:
                for cell in recipe:
                    measure_cost(args, table, cell)
        found = Selection(args, table, grid)
        if not found.complete():
            settings = grid[0][0].recipe.settings
            run_method(args, method, settings, lambda key, record: keep(table, args, key, record))
        if not args.grid_only:
            selections.append(found.selection())
    return selections


def keep(table: CellsFile, args: argparse.Namespace, key: str, record: dict[str, Any]) -> None:
    """Store a record ``sts-search`` made (what its teacher step made of the pairs printed)
    with the inputs the search trained on."""
    if record.get("teacher"):
        print(f"    teacher labels: {record['teacher']}", flush=True)
    table.add(key, {**record, "inputs": args.inputs})


def measure_cost(args: argparse.Namespace, table: CellsFile, cell: Cell) -> None:
    """``--measure-cost``: a stored cell without the cost columns (trained before they were
    recorded) is trained again as a one-cell ``sts-search`` in a scratch folder; its cost is
    copied into the record only when the new training's dev score equals the stored one
    (within ``DEV_REPRODUCED``), i.e. when it is the same training."""
    record = table.cells.get(cell.key)
    if record is None or "dev" not in record or record.get("steps") is not None:
        return
    Path(args.weights_dir).expanduser().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=Path(args.weights_dir).expanduser()) as scratch:
        found = one_cell(args, cell, Path(scratch))
    dev = found["dev"]
    if dev is None or abs(dev - record["dev"]) > DEV_REPRODUCED:
        raise common.BenchmarkError(
            f"{table.path}: cell {cell.key!r} trained again for its cost scores dev "
            f"{dev if dev is None else f'{dev:.4f}'}, not its stored {record['dev']:.4f}: not "
            "the same training (another library version, thread count or machine?), so its "
            "cost is not copied"
        )
    cost = {"train_seconds": found["train_seconds"], "steps": found["steps"]}
    cost["peak_rss_mb"] = found.get("peak_rss_mib")
    day = time.strftime("%Y-%m-%d")
    cost["cost_measured_by"] = (
        f"a second training of the same cell on {day} (its dev reproduced: {dev:.4f})"
    )
    table.add(cell.key, {**record, **cost})
    print(f"    cost: {cost['train_seconds']:.0f} s, dev {dev:.4f} reproduced", flush=True)


def one_cell(args: argparse.Namespace, cell: Cell, folder: Path) -> dict[str, Any]:
    """The record of ``cell`` trained alone by ``sts-search`` in ``folder`` (no test, no
    soup): its dev and cost."""
    recipe = cell.recipe
    alone = argparse.Namespace(**vars(args))
    alone.epochs, alone.learning_rate = [recipe.epochs], [recipe.learning_rate]
    alone.seeds = alone.select_seeds = [cell.seed]
    alone.grid_only, alone.soup = True, False
    (record,) = search_summary(alone, recipe.method, recipe.settings, folder)["cells"]
    return record
