"""Training and scoring the cells: each cell in a fresh process (the search script's
``--worker cell``), dev scored for the selection, the selected recipe's seeds tested, their
soup; :func:`run_search` runs the grid of every method."""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import _common as common
import peer_teacher
import quality

from grid_search.cells import (
    COST_KEYS,
    DISTILL_METHODS,
    DISTILL_METRICS,
    WEIGHTS_HASH,
    CellStore,
    check_cell_teacher,
    config_values,
    describe,
    first_stage,
    weights_file_name,
)
from grid_search.via_search import model_state, run_method, searched_row
from grid_search.weights import embedding_weights, load_weights
from sts_core.command_files import file_digest, writing
from sts_core.search.cells import Cell, Recipe
from sts_core.search.select import method_picks
from sts_core.training.parser import ConfigParser

#: the script whose ``--worker cell`` trains one cell in a fresh process
SCRIPT = Path(__file__).resolve().parents[1] / "quality_search.py"


def training_recipe(args: argparse.Namespace, cell: Cell) -> quality.Recipe:
    """The benchmark's training settings of the cell: its epochs and rate on the search's
    budget (model, batch, steps; mean pooling)."""
    recipe = cell.recipe
    return quality.Recipe.mean_pooled(
        args.model, recipe.learning_rate, args.batch_size, recipe.epochs, args.max_steps
    )


class Trainer:
    """Trains cells on the benchmark's data."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.all_data, self.all_unit_data = quality.load_training_data()
        self.data, self.unit_data = self.all_data, self.all_unit_data

    def draw(self, seed: int) -> None:
        """The cell's pairs: all of them, or in the smoke mode ``train_pairs_cap`` drawn with
        the cell's seed, as ``sts-train``'s ``max_train_samples`` draws them for the cells
        ``sts-search`` trains (the same pairs on both sides)."""
        cap = self.args.train_pairs_cap
        if not cap or cap >= len(self.all_data):
            return
        self.data = self.all_data.shuffle(seed=seed).select(range(cap))
        self.unit_data = self.all_unit_data.shuffle(seed=seed).select(range(cap))

    def recipe(self, cell: Cell) -> quality.Recipe:
        return training_recipe(self.args, cell)

    def train(self, cell: Cell) -> Any:
        """The cell's method on its data: an ``ours-*`` method with ``--set``'s fields (with
        ``teacher_model``, the run relabels the pairs as ``sts-train`` does); a peer method
        with the teacher's settings on the pairs the teacher relabels and adds
        (:mod:`peer_teacher`, sentence-transformers' API; labels on 0–1), or distilling the
        teacher's embeddings."""
        from sts_core.training.method_registry import quality_rows

        recipe = self.recipe(cell)
        self.draw(cell.seed)
        if cell.method in DISTILL_METHODS:
            return self.distill(cell, recipe)
        method = quality.METHODS[cell.method]
        data = self.unit_data if method.unit_labels else self.data
        train = method.train
        settings = cell.recipe.settings
        if settings and cell.method.startswith("ours-"):
            ours, row = quality_rows()[cell.method]
            values = config_values(settings, ConfigParser.for_method(ours))  # as check_settings
            first = first_stage(values)  # its keys taken out of the config fields
            train = quality.train_ours(ours, row, values)
            if first is not None:
                return two_stages(
                    quality.train_ours(ours, row, {**values, **first[0]}),
                    first[1],
                    train,
                    recipe,
                    cell.seed,
                    data,
                )
        elif settings:
            data = self.peer_pairs(dict(settings), recipe)
            encoder = train(recipe, cell.seed, data)
            added = len(data) - len(self.unit_data)
            encoder.teacher_summary = {"pairs": len(self.unit_data), "neighbour_pairs": added}
            return encoder
        return train(recipe, cell.seed, data)

    def peer_pairs(self, settings: dict[str, str], recipe: quality.Recipe) -> Any:
        """The 0–1 pairs relabelled by the teacher, with its neighbour pairs; a cross-encoder
        teacher scores them and the student as it starts proposes the neighbours."""
        values = config_values(tuple(settings.items()))
        location = values["teacher_model"]
        cross_encoder = None
        if peer_teacher.is_cross_encoder(location):
            cross_encoder = peer_teacher.load_peer_cross_encoder(location)
            teacher = quality.load_peer(recipe)
        else:
            teacher = peer_teacher.load_peer_teacher(location)
        return peer_teacher.relabelled_pairs(
            teacher,
            self.unit_data,
            "score",
            float(values.get("teacher_weight", 1.0)),
            int(values.get("teacher_neighbours", 0)),
            cross_encoder=cross_encoder,
        )

    def distill(self, cell: Cell, recipe: quality.Recipe) -> Any:
        """``EmbedDistillLoss`` on the teacher's embeddings of the training sentences, through
        a projection to the teacher's width when the student's differs."""
        from sentence_transformers.sentence_transformer.losses import EmbedDistillLoss
        from transformers import set_seed

        values = config_values(cell.recipe.settings)
        if peer_teacher.is_cross_encoder(values["teacher_model"]):
            raise common.BenchmarkError(
                f"{cell.method} distils a teacher's embeddings; a cross-encoder has none"
            )
        teacher = peer_teacher.load_peer_teacher(values["teacher_model"])
        targets = peer_teacher.embedding_targets(teacher, self.data)
        width = peer_teacher.teacher_width(teacher)
        del teacher
        set_seed(cell.seed)
        model = quality.load_peer(recipe)
        own = model.get_embedding_dimension()
        loss = EmbedDistillLoss(
            model, DISTILL_METRICS[cell.method], projection_dim=width if width != own else None
        )
        return quality.run_peer_trainer(model, loss, targets, recipe, cell.seed)


def two_stages(
    first: Any, first_epochs: float, second: Any, recipe: quality.Recipe, seed: int, data: Any
) -> Any:
    """Train ``first`` for ``first_epochs`` on ``data``, save it, then ``second`` for the
    recipe's epochs from the saved model (same seed, same learning rate, a fresh optimizer and
    warm-up, as Pcc-tuning's two runs); the steps of both stages are counted."""
    stage1 = first(replace(recipe, epochs=first_epochs), seed, data)
    stage1_steps = stage1.trained_steps
    with tempfile.TemporaryDirectory(prefix="sts-search-stage1-") as folder:
        stage1.save_pretrained(folder)
        del stage1
        encoder = second(replace(recipe, model=folder), seed, data)
    encoder.trained_steps += stage1_steps
    return encoder


class Scorer:
    """STS-B dev (selection) and the seven test tasks (report only)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from sts_core.data import load_named
        from sts_core.evaluation.sts import spread_sample

        self.dev = load_named("stsb", "dev", common.data_dir())
        self.dev = spread_sample(self.dev, args.eval_pairs)  # as sts-search's --eval-pairs
        self.eval_pairs = args.eval_pairs
        self._test = None

    def dev_spearman(self, encoder: Any) -> float:
        """Spearman × 100 of cos(u, v) against the dev scores."""
        from scipy.stats import spearmanr

        from sts_core.training.distill import teacher_similarities  # cos of each pair

        cosines = teacher_similarities(encoder, self.dev, batch_size=64)
        return round(float(spearmanr(cosines, self.dev["score"]).statistic) * 100, 4)

    def test_scores(self, encoder: Any) -> dict[str, float]:
        if self._test is None:
            self._test = quality.build_evaluator(self.eval_pairs)
        return quality.evaluate(encoder, self._test)


class Search:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.inputs = args.inputs  # what its cells are trained on (search_inputs)
        self.store = CellStore(Path(args.cells), Path(args.weights_dir))
        self.scorer = Scorer(args)

    def record(self, cell: Cell, **fields: Any) -> dict[str, Any]:
        """A new record of ``cell``: its description, the inputs this search trains on
        (``inputs``: a later search on others refuses the cells file), ``fields``."""
        return {**describe(cell), "inputs": self.inputs, **fields}

    def encoder_of(self, cell: Cell) -> Any:
        """The cell's trained model: from its saved weights (:meth:`weights_fit`), else
        trained now in a fresh process (:func:`train_cell`; its weights saved, dev scored,
        the cost recorded: a retrained cell replaces its record)."""
        path = self.store.weights_path(cell)
        trained = None if self.weights_fit(cell, path) else self.train_into(cell, path)
        encoder = self.load(cell, path)
        if trained is not None:
            dev = self.scorer.dev_spearman(encoder)
            cost = {k: trained[k] for k in COST_KEYS}
            if trained.get("teacher"):  # what the teacher step made of the pairs
                print(f"    teacher labels: {trained['teacher']}", flush=True)
                cost["teacher"] = trained["teacher"]
            weights = {WEIGHTS_HASH: file_digest(path)}
            self.store.cells[cell.key] = self.record(cell, **cost, dev=dev, **weights)
            self.store.save(cell.key)
            print(f"    dev {dev:.2f} (train {cost['train_seconds']:.0f} s)", flush=True)
        return encoder

    def weights_fit(self, cell: Cell, path: Path) -> bool:
        """Whether the weights file ``path`` is the stored cell's: the cells file records
        the cell, and the weights' content hash it recorded (if any) is the file's. Weights
        no record vouches for (another search's cell of that name, in a shared
        ``--weights-dir``) are trained again."""
        record = self.store.cells.get(cell.key)
        if record is None or not path.is_file():
            return False
        return record.get(WEIGHTS_HASH) in (None, file_digest(path))

    def train_into(self, cell: Cell, path: Path) -> dict[str, Any]:
        """Train the cell (a fresh process unless ``--in-process``), its weights to ``path``;
        what the worker reports (the cost columns, the teacher's summary)."""
        print(f"  train {cell.key} …", flush=True)
        spec = {"args": worker_args(self.args), "cell": describe(cell), "weights": str(path)}
        if self.args.in_process:  # no fresh process: no peak memory of its own
            return {**train_cell(spec), "peak_rss_mb": None}
        return common.run_worker(str(SCRIPT), "cell", spec, timeout=24 * 3600)

    def load(self, cell: Cell, path: Path) -> Any:
        import torch

        encoder = quality.load_ours(training_recipe(self.args, cell))
        load_weights(encoder, torch.load(path, map_location="cpu", weights_only=True), path)
        return encoder

    def measure_cost(self, cell: Cell) -> None:
        """``--measure-cost``: a stored cell without the cost columns (trained before they were
        recorded) is trained again into a scratch folder; its cost is copied into the record
        only when the new training's dev score equals the stored one (within
        ``DEV_REPRODUCED``), i.e. when it is the same training."""
        record = self.stored(cell.key)
        if record is None or "dev" not in record or record.get("steps") is not None:
            return
        with tempfile.TemporaryDirectory(dir=self.store.weights_dir) as scratch:
            path = Path(scratch) / weights_file_name(cell)
            trained = self.train_into(cell, path)
            dev = self.scorer.dev_spearman(self.load(cell, path))
        if abs(dev - record["dev"]) > DEV_REPRODUCED:
            raise common.BenchmarkError(
                f"{self.store.path}: cell {cell.key!r} trained again for its cost scores dev "
                f"{dev:.4f}, not its stored {record['dev']:.4f}: not the same training (another "
                "library version, thread count or machine?), so its cost is not copied"
            )
        record.update({k: trained[k] for k in COST_KEYS})
        day = time.strftime("%Y-%m-%d")
        record["cost_measured_by"] = (
            f"a second training of the same cell on {day} (its dev reproduced: {dev:.4f})"
        )
        self.store.save(cell.key)
        print(f"    cost: {trained['train_seconds']:.0f} s, dev {dev:.4f} reproduced", flush=True)

    def stored(self, key: str) -> dict[str, Any] | None:
        """The stored record of ``key``, its teacher checked (:func:`check_cell_teacher`)."""
        record = self.store.cells.get(key)
        if record is not None:
            check_cell_teacher(self.store.path, key, record)
        return record

    def dev_score(self, cell: Cell) -> float:
        if self.args.measure_cost:
            self.measure_cost(cell)
        if "dev" not in (self.stored(cell.key) or {}):
            encoder = self.encoder_of(cell)
            record = self.store.cells.setdefault(cell.key, self.record(cell))
            if "dev" not in record:  # weights kept, record lost
                record["dev"] = self.scorer.dev_spearman(encoder)
                self.store.save(cell.key)
        return self.store.cells[cell.key]["dev"]

    def test_score(self, cell: Cell) -> dict[str, float]:
        self.dev_score(cell)
        record = self.store.cells[cell.key]
        if "test" not in record and "search_cell" in record:
            raise common.BenchmarkError(
                f"{self.store.path}: cell {cell.key!r} was trained by sts-search, which did "
                "not score it on the test tasks (not its pick): run the search again"
            )
        if "test" not in record:
            encoder = self.encoder_of(cell)  # may train again: the record is replaced
            scores = self.scorer.test_scores(encoder)
            self.store.cells[cell.key]["test"] = scores
            self.store.save(cell.key)
            print(f"    test avg {scores['avg']:.2f} ({cell.key})", flush=True)
        return self.store.cells[cell.key]["test"]

    def keep(self, cell: Cell, record: dict[str, Any]) -> None:
        """Store a cell ``sts-search`` trained (what its teacher step made of the pairs
        printed, as for the cells trained here)."""
        if record.get("teacher"):
            print(f"    teacher labels: {record['teacher']}", flush=True)
        self.store.cells[cell.key] = {**record, "inputs": self.inputs}
        self.store.save(cell.key)

    def state_of(self, cell: Cell) -> dict[str, Any]:
        """A trained cell's embedding weights: from its ``sts-search`` model, else from
        the weights file the benchmark saved."""
        import torch

        record = self.store.cells[cell.key]
        if "search_cell" in record:
            return model_state(self.args, record)
        path = self.store.weights_path(cell)
        return torch.load(path, map_location="cpu", weights_only=True)

    def complete(self, grid: list[list[Cell]]) -> bool:
        """Whether the cells file holds every result of the method's search already: the
        grid's dev scores, the pick's test scores on every seed (unless ``--grid-only``),
        its soup (with ``--soup``); then nothing is trained, not even by ``sts-search``."""
        cells = [cell for recipe in grid for cell in recipe]
        if any("dev" not in (self.stored(cell.key) or {}) for cell in cells):
            return False
        if self.args.grid_only:
            return True
        records = [
            {"method": c.method, "recipe": i, "seed": c.seed, "dev": self.stored(c.key)["dev"]}
            for i, recipe in enumerate(grid)
            for c in recipe
        ]
        best = grid[method_picks(records, self.args.select_seeds)[grid[0][0].method]][0]
        chosen = [replace(best, seed=seed) for seed in self.args.seeds]
        if any("test" not in (self.stored(c.key) or {}) for c in chosen):
            return False
        return not (self.args.soup and len(chosen) > 1 and self.stored(soup_key(chosen)) is None)

    def soup(self, cells: list[Cell]) -> dict[str, Any]:
        """The uniform average of the cells' weights, scored on dev and test."""

        from sts_core.training.averaging import average_state_dicts

        key = soup_key(cells)
        stored = self.stored(key)
        if stored is not None:
            return stored
        for cell in cells:
            self.dev_score(cell)  # trains it if needed
        states = [self.state_of(c) for c in cells]
        encoder = quality.load_ours(training_recipe(self.args, cells[0]))
        load_weights(encoder, average_state_dicts(states, [c.key for c in cells]), key)
        record = self.record(
            cells[0],
            soup_of=[c.seed for c in cells],
            dev=self.scorer.dev_spearman(encoder),
            test=self.scorer.test_scores(encoder),
        )
        self.store.cells[key] = record
        self.store.save(key)
        print(
            f"    soup: dev {record['dev']:.2f}, test avg {record['test']['avg']:.2f}", flush=True
        )
        return record


def soup_key(cells: list[Cell]) -> str:
    """The cells file's key of the soup of ``cells`` (one recipe's seeds)."""
    return cells[0].recipe.soup_key(len(cells))


WORKER_ARGS = ("model", "batch_size", "max_steps", "train_pairs_cap", "threads", "in_process")


_TRAINERS: dict[str, Trainer] = {}  # --in-process: one per budget, its data loaded once


def worker_args(args: argparse.Namespace) -> dict[str, Any]:
    return {key: getattr(args, key) for key in WORKER_ARGS}


def train_cell(spec: dict[str, Any]) -> dict[str, Any]:
    """Worker side: train one cell, save its embedding weights to ``spec["weights"]``; the
    seconds of the training (model loading, the teacher's step, the optimizer steps and the
    run's save; not the data loading) and its optimizer steps (``emit_result`` adds the
    process's peak resident memory)."""
    import torch

    args = argparse.Namespace(**spec["args"])
    if args.threads and not args.in_process:
        common.set_threads(args.threads)
    cell = Cell.from_record(spec["cell"])
    key = json.dumps(spec["args"], sort_keys=True)
    if key not in _TRAINERS:  # its data read once per budget
        _TRAINERS[key] = Trainer(args)
    trainer = _TRAINERS[key]
    start = time.perf_counter()
    encoder = trainer.train(cell)
    seconds = round(time.perf_counter() - start, 1)
    # the weights cache's own file, written where none is: atomic, so a kill leaves none
    with writing(spec["weights"], record=False) as temporary:
        torch.save(embedding_weights(encoder), temporary)
    return {
        "train_seconds": seconds,
        "steps": getattr(encoder, "trained_steps", None),
        "teacher": getattr(encoder, "teacher_summary", None),
    }


def grid_cells(args: argparse.Namespace, method: str, seeds: list[int]) -> list[list[Cell]]:
    """The grid of one method: per (epochs, lr), its cells over ``seeds``. Our rows get
    every ``--set`` field; the peer's the teacher's (``peer_teacher.TEACHER_KEYS``) only."""
    settings = args.settings
    if not method.startswith("ours-"):
        settings = tuple((k, v) for k, v in settings if k in peer_teacher.TEACHER_KEYS)
    return [
        [Cell(Recipe(method, settings, epochs, lr), seed) for seed in seeds]
        for epochs, lr in itertools.product(args.epochs, args.learning_rate)
    ]


def run_search(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per method: dev on the grid (selection seeds), then (unless ``--grid-only``) the
    selected recipe on every seed, tested; the soup of its seeds with ``--soup``."""
    search = Search(args)
    selections = []
    for method in args.methods:
        grid = grid_cells(args, method, args.select_seeds)
        settings = grid[0][0].recipe.settings
        if searched_row(args, method, settings) and not search.complete(grid):
            run_method(args, method, settings, search.keep)  # sts-search trains it
        records = [
            {"method": method, "recipe": index, "seed": cell.seed, "dev": search.dev_score(cell)}
            for index, recipe in enumerate(grid)
            for cell in recipe
        ]
        if args.grid_only:
            continue
        best = grid[method_picks(records, args.select_seeds)[method]]  # sts-search's choice
        chosen = [replace(best[0], seed=seed) for seed in args.seeds]
        tests = [search.test_score(c) for c in chosen]
        recipe = best[0].recipe
        selection = {"method": method, "variant": recipe.variant, "recipe": recipe.key}
        selection["tests"] = tests
        if args.soup and len(chosen) > 1:
            selection["soup"] = search.soup(chosen)
        selections.append(selection)
    return selections


#: ``--measure-cost``: how far a second training's dev score may be from the stored one (CPU
#: runs repeat exactly per seed; the store keeps four decimals)
DEV_REPRODUCED = 1e-3
