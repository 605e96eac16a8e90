"""Equal-budget recipe search: every loss on one grid, selected on STS-B dev only.

Both sides get the same budget: all-MiniLM-L6-v2, the filtered STS-B + SICK-R training set
(5,398 pairs), batch 16, and the same grid of epochs × learning rates for every method —
ours (any row a package declares, ``Method.quality_rows``) and sentence-transformers'
(``st-cosine``: ``CosineSimilarityLoss``, ``st-cosent``, ``st-angle``, and with a teacher
``st-embed-distill``, ``st-mse-distill``). Each cell of the grid
is trained on the selection seeds (``--select-seeds``, default the first seed) and scored on
the STS-B *dev* set only (Spearman × 100). Per method the recipe with the best mean dev score
is selected, trained on every seed (``--seeds``) and only then scored on the seven test tasks
(SentEval protocol, 'all', as ``quality.py``). Test scores never choose anything.

Options are measured as variants: ``--set KEY=VALUE`` adds config fields to every ``ours-*``
method of the run (e.g. ``teacher_model=all-mpnet-base-v2 teacher_weight=0.5``,
``weight_averaging=ema``, ``loss_weights={"cosine_mse":1,"pearson":0.5}``), each checked
before any data loads by the recipe parser of every method the run trains
(:func:`check_settings`); the variant is its own method in the tables, searched on the
same grid; ``--set stage1_loss=cosine_mse
--set stage1_epochs=1`` trains Pcc-tuning's two stages (that loss first, then the row's own
for ``--epochs``, from the first stage's weights, on the same pairs). A teacher is no
feature of ours alone: the peer's rows get the teacher's settings too (``teacher_model``,
``teacher_weight``, ``teacher_neighbours``), written with sentence-transformers' own API
(``peer_teacher.py``: the relabelled pairs and the teacher's neighbour pairs, as its
Augmented SBERT example; labels on 0–1), and ``st-embed-distill`` / ``st-mse-distill``
distil the teacher's embeddings (``EmbedDistillLoss``, cosine or MSE, through a projection
to the teacher's width). Options the peer lacks (the Pearson loss, combined losses, soups,
weight averaging, the two stages) stay ours.

Every cell trains in a fresh process (``--worker cell``; ``--in-process`` trains them in the
search's own process, without the peak memory), which reports the cost columns:
wall seconds of the training, optimizer steps and peak resident memory; a teacher's own
training (``quality_teacher.py`` records it in its folder) is added once per recipe.
``--soup`` adds a row per selected recipe: the uniform average of its seeds' weights
(``sts_core.training.averaging.average_state_dicts``, a model soup), scored on dev and test
like any model.

Every trained cell is kept in ``--cells`` (a JSON file, written after each cell) and its
weights in ``--weights-dir``: a search interrupted or extended later trains only the cells
it lacks (a cell whose weights are gone is trained again; CPU runs repeat exactly per seed).
``--grid-only`` fills the grid's dev scores and stops: a large search can be split over
several runs, and the last one (without it) selects and tests.

Commands (from the repository root; STS_DATA_DIR and STS_MODELS_DIR must be set)::

    uv run python benchmarks/quality_search.py --methods ours-cosine_mse st-cosine \\
        --epochs 1 2 --learning-rate 1e-5 2e-5 4e-5 --soup --threads 1
    uv run python benchmarks/quality_search.py --methods ours-cosine_mse --epochs 1 \\
        --learning-rate 2e-5 --set teacher_model=all-mpnet-base-v2 --set teacher_weight=0.5
    uv run python benchmarks/quality_search.py --smoke --output-dir /tmp/bench  # CI

Results: ``benchmarks/results/quality_search.{md,json}`` (every run rewrites the report from
all cells in ``--cells``, so the tables grow as searches are added).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import _common as common
import peer_teacher
import quality

from sts_core.training.parser import ConfigParser

MODES = {
    "smoke": {"max_steps": 2, "seeds": [0, 1], "eval_pairs": 40, "train_pairs_cap": 64},
    "full": {"max_steps": -1, "seeds": [0, 1, 2], "eval_pairs": 0, "train_pairs_cap": 0},
}
SMOKE_METHODS = ["ours-cosine_mse", "st-cosine"]
#: the peer's embedding distillation from the teacher (``--set teacher_model=…``): the distinct
#: training sentences with the teacher's embeddings (``peer_teacher.embedding_targets``)
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
DISTILL_METRICS = {"st-embed-distill": "cosine", "st-mse-distill": "mse"}
SEARCH_METHODS = {**quality.METHODS, **DISTILL_METHODS}


@dataclass(frozen=True)
class Cell:
    """One trained model: a method (with our extra settings), a recipe, a seed."""

    method: str
    settings: tuple[tuple[str, str], ...]
    epochs: float
    learning_rate: float
    seed: int

    @property
    def variant(self) -> str:
        """The method's name in the tables: its key and the extra settings."""
        extras = ", ".join(f"{key}={value}" for key, value in self.settings)
        return f"{self.method} [{extras}]" if extras else self.method

    @property
    def recipe_key(self) -> str:
        return f"{self.variant} | epochs {self.epochs:g} | lr {self.learning_rate:g}"

    @property
    def key(self) -> str:
        return f"{self.recipe_key} | seed {self.seed}"

    def file_name(self) -> str:
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in self.key) + ".pt"


# ----------------------------------------------------------------------------- settings
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
    first = first_stage(values)  # the stage's keys taken out of the config fields
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
        _refuse(stage, parser.parse_values, {**base, **values, **first[0]}, "--set")


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


# ----------------------------------------------------------------------------- training
def recipe_of(args: argparse.Namespace, cell: Cell) -> quality.Recipe:
    """The cell's recipe on the search's budget (model, batch, steps; mean pooling)."""
    return quality.Recipe.mean_pooled(
        args.model, cell.learning_rate, args.batch_size, cell.epochs, args.max_steps
    )


class Trainer:
    """Trains cells on the benchmark's data."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.data, self.unit_data = quality.load_training_data()
        if args.train_pairs_cap:
            cap = range(args.train_pairs_cap)
            self.data, self.unit_data = self.data.select(cap), self.unit_data.select(cap)

    def recipe(self, cell: Cell) -> quality.Recipe:
        return recipe_of(self.args, cell)

    def train(self, cell: Cell) -> Any:
        """The cell's method on its data: an ``ours-*`` method with ``--set``'s fields (with
        ``teacher_model``, the run relabels the pairs as ``sts-train`` does); a peer method
        with the teacher's settings on the pairs the teacher relabels and adds
        (:mod:`peer_teacher`, sentence-transformers' API; labels on 0–1), or distilling the
        teacher's embeddings."""
        from sts_core.training.method_registry import quality_rows

        recipe = self.recipe(cell)
        if cell.method in DISTILL_METHODS:
            return self.distill(cell, recipe)
        method = quality.METHODS[cell.method]
        data = self.unit_data if method.unit_labels else self.data
        train = method.train
        if cell.settings and cell.method.startswith("ours-"):
            ours, row = quality_rows()[cell.method]
            values = config_values(
                cell.settings, ConfigParser.for_method(ours)
            )  # as check_settings
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
        elif cell.settings:
            data = self.peer_pairs(dict(cell.settings))
            encoder = train(recipe, cell.seed, data)
            added = len(data) - len(self.unit_data)
            encoder.teacher_summary = {"pairs": len(self.unit_data), "neighbour_pairs": added}
            return encoder
        return train(recipe, cell.seed, data)

    def peer_pairs(self, settings: dict[str, str]) -> Any:
        """The 0–1 pairs relabelled by the teacher, with its neighbour pairs."""
        values = config_values(tuple(settings.items()))
        teacher = peer_teacher.load_peer_teacher(values["teacher_model"])
        return peer_teacher.relabelled_pairs(
            teacher,
            self.unit_data,
            "score",
            float(values.get("teacher_weight", 1.0)),
            int(values.get("teacher_neighbours", 0)),
        )

    def distill(self, cell: Cell, recipe: quality.Recipe) -> Any:
        """``EmbedDistillLoss`` on the teacher's embeddings of the training sentences, through
        a projection to the teacher's width when the student's differs."""
        from sentence_transformers.sentence_transformer.losses import EmbedDistillLoss
        from transformers import set_seed

        values = config_values(cell.settings)
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


#: Pcc-tuning's schedule on the search's own data (``--set stage1_loss=cosine_mse --set
#: stage1_epochs=1``): a first stage with another loss of the method, then the row's loss from
#: the first stage's weights (the paper's stage 1 is contrastive on NLI, data the peer is not
#: given; here both stages train on the same pairs, the teacher's where it is set)
STAGE_KEYS = ("stage1_loss", "stage1_epochs")


def first_stage(values: dict[str, Any]) -> tuple[dict[str, Any], float] | None:
    """Take ``stage1_loss`` / ``stage1_epochs`` out of the config fields: the first stage's
    own fields (its loss) and epochs, or None without them."""
    loss, epochs = values.pop("stage1_loss", None), values.pop("stage1_epochs", None)
    if loss is None and epochs is None:
        return None
    if loss is None or not isinstance(epochs, (int, float)) or epochs <= 0:
        raise common.BenchmarkError(
            f"--set stage1_loss={loss} --set stage1_epochs={epochs}: a first stage needs "
            "both, a loss of the method and a number of epochs > 0"
        )
    return {"loss": loss}, float(epochs)


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


# ----------------------------------------------------------------------------- scoring
class Scorer:
    """STS-B dev (selection) and the seven test tasks (report only)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from sts_core.data import load_named

        self.dev = load_named("stsb", "dev", common.data_dir())
        if args.eval_pairs:
            self.dev = self.dev.select(range(min(len(self.dev), args.eval_pairs)))
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


# ----------------------------------------------------------------------------- cells
class CellStore:
    """The cells trained so far (JSON, rewritten after each) and their weights."""

    def __init__(self, path: Path, weights_dir: Path) -> None:
        self.path, self.weights_dir = path, weights_dir
        self.cells: dict[str, dict[str, Any]] = {}
        if path.is_file():
            try:
                self.cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            except (ValueError, KeyError, TypeError) as error:
                raise common.BenchmarkError(
                    f"{path}: not a cells file of this script ({error})"
                ) from error
        weights_dir.mkdir(parents=True, exist_ok=True)

    def save(self, key: str) -> None:
        """Write cell ``key`` into the file: read again under a lock and merged, so two
        searches may share one cells file."""
        import fcntl

        with open(self.path.with_name(f".{self.path.name}.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            on_disk = self.read() if self.path.is_file() else {}
            on_disk[key] = self.cells[key]
            self.cells = on_disk
            text = json.dumps({"cells": on_disk}, indent=1) + "\n"
            handle, tmp = tempfile.mkstemp(  # a name of its own: no file beside it replaced
                prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
            )
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)  # this write's own file, never the store
                raise

    def read(self) -> dict[str, dict[str, Any]]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))["cells"]
        except (ValueError, KeyError, TypeError) as error:
            raise common.BenchmarkError(
                f"{self.path}: not a cells file of this script ({error})"
            ) from error

    def weights_path(self, cell: Cell) -> Path:
        return self.weights_dir / cell.file_name()


class Search:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.store = CellStore(Path(args.cells), Path(args.weights_dir))
        self.scorer = Scorer(args)

    def encoder_of(self, cell: Cell) -> Any:
        """The cell's trained model: from its saved weights, else trained now in a fresh
        process (:func:`train_cell`; its weights saved, dev scored, the cost recorded: a
        retrained cell replaces its record)."""
        path = self.store.weights_path(cell)
        trained = self.train_into(cell, path) if not path.is_file() else None
        encoder = self.load(cell, path)
        if trained is not None:
            dev = self.scorer.dev_spearman(encoder)
            cost = {k: trained[k] for k in COST_KEYS}
            if trained.get("teacher"):  # what the teacher step made of the pairs
                print(f"    teacher labels: {trained['teacher']}", flush=True)
                cost["teacher"] = trained["teacher"]
            self.store.cells[cell.key] = {**describe(cell), **cost, "dev": dev}
            self.store.save(cell.key)
            print(f"    dev {dev:.2f} (train {cost['train_seconds']:.0f} s)", flush=True)
        return encoder

    def train_into(self, cell: Cell, path: Path) -> dict[str, Any]:
        """Train the cell (a fresh process unless ``--in-process``), its weights to ``path``;
        what the worker reports (the cost columns, the teacher's summary)."""
        print(f"  train {cell.key} …", flush=True)
        spec = {"args": worker_args(self.args), "cell": describe(cell), "weights": str(path)}
        if self.args.in_process:  # no fresh process: no peak memory of its own
            return {**train_cell(spec), "peak_rss_mb": None}
        return common.run_worker(__file__, "cell", spec, timeout=24 * 3600)

    def load(self, cell: Cell, path: Path) -> Any:
        import torch

        encoder = quality.load_ours(recipe_of(self.args, cell))
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
            path = Path(scratch) / cell.file_name()
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
            record = self.store.cells.setdefault(cell.key, describe(cell))
            if "dev" not in record:  # weights kept, record lost
                record["dev"] = self.scorer.dev_spearman(encoder)
                self.store.save(cell.key)
        return self.store.cells[cell.key]["dev"]

    def test_score(self, cell: Cell) -> dict[str, float]:
        self.dev_score(cell)
        if "test" not in self.store.cells[cell.key]:
            encoder = self.encoder_of(cell)  # may train again: the record is replaced
            scores = self.scorer.test_scores(encoder)
            self.store.cells[cell.key]["test"] = scores
            self.store.save(cell.key)
            print(f"    test avg {scores['avg']:.2f} ({cell.key})", flush=True)
        return self.store.cells[cell.key]["test"]

    def soup(self, cells: list[Cell]) -> dict[str, Any]:
        """The uniform average of the cells' weights, scored on dev and test."""
        import torch

        from sts_core.training.averaging import average_state_dicts

        key = f"soup of {len(cells)} seeds | {cells[0].recipe_key}"
        stored = self.stored(key)
        if stored is not None:
            return stored
        for cell in cells:
            self.dev_score(cell)  # trains it if needed
        states = [
            torch.load(self.store.weights_path(c), map_location="cpu", weights_only=True)
            for c in cells
        ]
        encoder = quality.load_ours(recipe_of(self.args, cells[0]))
        load_weights(encoder, average_state_dicts(states, [c.key for c in cells]), key)
        record = {
            **describe(cells[0]),
            "soup_of": [c.seed for c in cells],
            "dev": self.scorer.dev_spearman(encoder),
            "test": self.scorer.test_scores(encoder),
        }
        self.store.cells[key] = record
        self.store.save(key)
        print(
            f"    soup: dev {record['dev']:.2f}, test avg {record['test']['avg']:.2f}", flush=True
        )
        return record


def embedding_weights(encoder: Any) -> dict[str, Any]:
    """The weights that make the embeddings: the encoder's, without the heads trained beside
    it (a regression head), which the cosine-scored evaluation never uses."""
    heads = tuple(f"{name}." for name in encoder.heads)
    return {key: value for key, value in encoder.state_dict().items() if not key.startswith(heads)}


def load_weights(encoder: Any, state: dict[str, Any], source: Any) -> None:
    """Load ``state`` into a freshly built encoder: every encoder weight must be there; a
    head's weights (saved by earlier versions of this script) are left out."""
    result = encoder.load_state_dict(state, strict=False)
    stray = [key for key in result.unexpected_keys if key.startswith("backbone.")]
    if result.missing_keys or stray:
        raise common.BenchmarkError(
            f"{source}: weights do not fit the model (missing {result.missing_keys[:3]}, "
            f"unexpected {stray[:3]}); delete the file to train the cell again"
        )


def describe(cell: Cell) -> dict[str, Any]:
    described = {
        "method": cell.method,
        "variant": cell.variant,
        "settings": dict(cell.settings),
        "epochs": cell.epochs,
        "learning_rate": cell.learning_rate,
        "seed": cell.seed,
    }
    teacher = dict(cell.settings).get("teacher_model")
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
    described = spec["cell"]
    cell = Cell(
        described["method"],
        tuple(sorted(described["settings"].items())),
        described["epochs"],
        described["learning_rate"],
        described["seed"],
    )
    key = json.dumps(spec["args"], sort_keys=True)
    if key not in _TRAINERS:  # its data read once per budget
        _TRAINERS[key] = Trainer(args)
    trainer = _TRAINERS[key]
    start = time.perf_counter()
    encoder = trainer.train(cell)
    seconds = round(time.perf_counter() - start, 1)
    torch.save(embedding_weights(encoder), spec["weights"])
    return {
        "train_seconds": seconds,
        "steps": getattr(encoder, "trained_steps", None),
        "teacher": getattr(encoder, "teacher_summary", None),
    }


# ----------------------------------------------------------------------------- search
def grid_cells(args: argparse.Namespace, method: str, seeds: list[int]) -> list[list[Cell]]:
    """The grid of one method: per (epochs, lr), its cells over ``seeds``. Our rows get
    every ``--set`` field; the peer's the teacher's (``peer_teacher.TEACHER_KEYS``) only."""
    settings = args.settings
    if not method.startswith("ours-"):
        settings = tuple((k, v) for k, v in settings if k in peer_teacher.TEACHER_KEYS)
    return [
        [Cell(method, settings, epochs, lr, seed) for seed in seeds]
        for epochs, lr in itertools.product(args.epochs, args.learning_rate)
    ]


def run_search(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per method: dev on the grid (selection seeds), then (unless ``--grid-only``) the
    selected recipe on every seed, tested; the soup of its seeds with ``--soup``."""
    search = Search(args)
    selections = []
    for method in args.methods:
        grid = grid_cells(args, method, args.select_seeds)
        dev = {recipe[0].recipe_key: [search.dev_score(c) for c in recipe] for recipe in grid}
        if args.grid_only:
            continue
        best = max(grid, key=lambda recipe: sum(dev[recipe[0].recipe_key]))
        chosen = [replace(best[0], seed=seed) for seed in args.seeds]
        tests = [search.test_score(c) for c in chosen]
        selection = {"method": method, "variant": best[0].variant, "recipe": best[0].recipe_key}
        selection["tests"] = tests
        if args.soup and len(chosen) > 1:
            selection["soup"] = search.soup(chosen)
        selections.append(selection)
    return selections


# ----------------------------------------------------------------------------- report
def recipe_rows(cells: dict[str, dict]) -> dict[str, dict[str, Any]]:
    """Trained cells grouped by recipe: dev per seed, test per seed where scored."""
    recipes: dict[str, dict[str, Any]] = {}
    for key, record in cells.items():
        if "soup_of" in record or "dev" not in record:
            continue
        recipe_key = key.rsplit(" | seed ", 1)[0]
        entry = recipes.setdefault(
            recipe_key,
            {
                **{k: record[k] for k in ("method", "variant", "epochs", "learning_rate")},
                "settings": record.get("settings", {}),
                "teacher_id": record.get("teacher_id"),
                "dev": {},
                "test": {},
                "cost": {},
            },
        )
        entry["dev"][record["seed"]] = record["dev"]
        if "test" in record:
            entry["test"][record["seed"]] = record["test"]
        entry["cost"][record["seed"]] = {k: record.get(k) for k in COST_KEYS}
    return recipes


COST_KEYS = ("train_seconds", "steps", "peak_rss_mb")
#: ``--measure-cost``: how far a second training's dev score may be from the stored one (CPU
#: runs repeat exactly per seed; the store keeps four decimals)
DEV_REPRODUCED = 1e-3
TEACHER_COST_FILE = "sts_teacher_cost.json"  # written by quality_teacher.py


def teacher_seconds(settings: dict[str, str]) -> float | None:
    """The seconds it took to train the recipe's teacher (``quality_teacher.py`` records
    them in the teacher's folder): 0 without a teacher, None when no record is found (a
    teacher used as released, or a folder that is gone)."""
    name = settings.get("teacher_model")
    if not name:
        return 0.0
    models = Path(os.environ.get("STS_MODELS_DIR", "."))
    for folder in (Path(name), models / name):
        record = folder / TEACHER_COST_FILE
        if record.is_file():
            return float(json.loads(record.read_text(encoding="utf-8"))["train_seconds"])
        if (folder / "config.json").is_file():
            return 0.0  # a model folder without the record: used as released, not trained here
    return None


def cost_cells(recipe: dict, models: int = 1) -> list[str]:
    """The cost of ``models`` models of the recipe on this machine: wall seconds (the
    teacher's training once, plus each model's training, the teacher's encoding in it),
    optimizer steps of one model, and the peak resident memory of a training process."""
    costs = [c for c in recipe["cost"].values() if c.get("steps") is not None]  # recorded
    if not costs:
        return ["–", "–", "–"]
    student = sum(c["train_seconds"] for c in costs) / len(costs)
    teacher = teacher_seconds(recipe["settings"])
    seconds = f"{teacher + models * student:,.0f}" if teacher is not None else "–"
    steps = [c["steps"] for c in costs if c.get("steps") is not None]
    memory = [c["peak_rss_mb"] for c in costs if c.get("peak_rss_mb") is not None]
    return [
        seconds,
        f"{max(steps):,}" if steps else "–",
        f"{max(memory):,.0f}" if memory else "–",
    ]


def split_unidentified(recipes: dict[str, dict]) -> tuple[dict[str, dict], dict[str, dict]]:
    """The recipes without a teacher or with an identified one (``teacher_id``), and those
    trained with a teacher before cells recorded its id: their teacher's weights cannot be
    checked or trained with again, so neither can their cost."""
    known, unidentified = {}, {}
    for name, recipe in recipes.items():
        lost = recipe["settings"].get("teacher_model") and not recipe.get("teacher_id")
        (unidentified if lost else known)[name] = recipe
    return known, unidentified


def selected_recipes(recipes: dict[str, dict], selection_seeds: list[int]) -> dict[str, dict]:
    """Per variant, the recipe with the best mean dev over the selection seeds (recipes
    lacking one of those seeds are not candidates), among those tested on ≥ 1 seed."""
    best: dict[str, dict] = {}
    for recipe in recipes.values():
        if not all(seed in recipe["dev"] for seed in selection_seeds):
            continue
        score = sum(recipe["dev"][s] for s in selection_seeds) / len(selection_seeds)
        current = best.get(recipe["variant"])
        if current is None or score > current["selection_dev"]:
            best[recipe["variant"]] = {**recipe, "selection_dev": score}
    return best


def summary_table(best: dict[str, dict], soups: dict[str, dict]) -> tuple[list, list]:
    header = [
        "method (dev-selected recipe)",
        "epochs",
        "lr",
        "dev (sel.)",
        *quality.TITLES,
        "Avg.",
        "seeds",
        "seconds",
        "steps",
        "peak MiB",
    ]
    rows = []
    ordered = sorted(best.values(), key=lambda r: -_test_mean(r))
    for recipe in ordered:
        tests = list(recipe["test"].values())
        cells = (
            [_cell([t[k] for t in tests]) for k in (*quality.TASKS, "avg")]
            if tests
            else ["–"] * (len(quality.TASKS) + 1)
        )
        rows.append(
            [
                label_of(recipe["variant"]),
                f"{recipe['epochs']:g}",
                f"{recipe['learning_rate']:g}",
                f"{recipe['selection_dev']:.2f}",
                *cells,
                len(tests),
                *cost_cells(recipe),
            ]
        )
        soup = soups.get(recipe_key_of(recipe))
        if soup:
            test = soup["test"]
            rows.append(
                [
                    f"↳ soup of seeds {soup['soup_of']} (one model)",
                    "",
                    "",
                    f"{soup['dev']:.2f}",
                    *(f"{test[k]:.2f}" for k in (*quality.TASKS, "avg")),
                    1,
                    *cost_cells(recipe, len(soup["soup_of"])),
                ]
            )
    return header, rows


def _test_mean(recipe: dict) -> float:
    tests = list(recipe["test"].values())
    return sum(t["avg"] for t in tests) / len(tests) if tests else float("-inf")


def _cell(values: list[float]) -> str:
    mean, sd = common.mean_sd(values)
    return f"{mean:.2f}" if len(values) < 2 else f"{mean:.2f} ± {sd:.2f}"


def label_of(variant: str) -> str:
    method, _, extras = variant.partition(" [")
    known = SEARCH_METHODS.get(method)
    label = known.label if known else method
    return f"{label} [{extras}" if extras else label


def grid_table(recipes: dict[str, dict]) -> tuple[list, list]:
    header = ["method", "epochs", "lr", "dev per seed", "dev mean", "test avg (seeds)"]
    rows = []
    for key in sorted(
        recipes,
        key=lambda k: (recipes[k]["variant"], recipes[k]["epochs"], recipes[k]["learning_rate"]),
    ):
        recipe = recipes[key]
        devs = ", ".join(f"{seed}: {score:.2f}" for seed, score in sorted(recipe["dev"].items()))
        mean = sum(recipe["dev"].values()) / len(recipe["dev"])
        tests = seed_test_averages(recipe)
        test = f"{_cell(tests)} ({len(tests)})" if tests else "–"
        rows.append(
            [
                label_of(recipe["variant"]),
                f"{recipe['epochs']:g}",
                f"{recipe['learning_rate']:g}",
                devs,
                f"{mean:.2f}",
                test,
            ]
        )
    return header, rows


def headline(best: dict[str, dict], soups: dict[str, dict]) -> list[str]:
    """Our pick, by dev alone (among our dev-selected recipes, dev averaged over every seed
    trained, and their soups), against every peer row (each peer variant's dev-selected
    recipe: with or without the teacher, distilling or not); the target is the strongest
    peer row's test average + 0.5. Our rows with a teacher that no scored peer row was given
    are not candidates (the peer gets every teacher ours get)."""
    peers = [
        (label_of(r["variant"]), r, seed_test_averages(r))
        for r in best.values()
        if r["method"].startswith("st-") and r["test"]
    ]
    given = {p[1]["settings"].get("teacher_model") for p in peers} | {None}
    ours, left_out = _our_candidates(best, soups, given)
    if not ours or not peers:
        return []
    dev, label, recipe, test, score = max(ours, key=lambda c: c[0])
    peers.sort(key=lambda p: -sum(p[2]) / len(p[2]))
    runs = seed_test_averages(recipe)
    of_runs = f" (its runs: {_cell(runs)})" if label.startswith("soup") else ""
    lines = [
        "## Headline: our pick by STS-B dev against every peer row",
        "",
        f"- ours: {label}, {recipe['epochs']:g} epoch(s), lr {recipe['learning_rate']:g} — "
        f"dev {dev:.2f}, test Avg. {test}{of_runs}",
        *_left_out_line(left_out),
        "",
        "| peer row (its dev-selected recipe) | epochs | lr | test Avg. | ours − peer |",
        "|---|---|---|---|---|",
    ]
    for peer_label, peer, tests in peers:
        gap = score - sum(tests) / len(tests)
        lines.append(
            f"| {peer_label} | {peer['epochs']:g} | {peer['learning_rate']:g} | "
            f"{_cell(tests)} | {gap:+.2f} |"
        )
    strongest = sum(peers[0][2]) / len(peers[0][2])
    gap = score - strongest
    verdict = "reached" if gap >= 0.5 else "not reached"
    lines += [
        "",
        f"Ours − the strongest peer row ({peers[0][0]}) on the 7-task Avg.: {gap:+.2f} "
        f"(target ≥ +0.50: {verdict}); the mean of our pick's runs − it: "
        f"{sum(runs) / len(runs) - strongest:+.2f}.",
        "",
    ]
    return lines


def _our_candidates(
    best: dict[str, dict], soups: dict[str, dict], given: set[str | None]
) -> tuple[list[tuple], set[str]]:
    """Our scored recipes and their soups as (dev, label, recipe, test text, test avg), but
    not those with a teacher outside ``given``; and the teachers so left out."""
    ours, left_out = [], set()
    for recipe in best.values():
        if not recipe["method"].startswith("ours-") or not recipe["test"]:
            continue
        if recipe["settings"].get("teacher_model") not in given:
            left_out.add(recipe["settings"]["teacher_model"])
            continue
        tests = seed_test_averages(recipe)
        dev = sum(recipe["dev"].values()) / len(recipe["dev"])
        ours.append(
            (dev, label_of(recipe["variant"]), recipe, _cell(tests), sum(tests) / len(tests))
        )
        soup = soups.get(recipe_key_of(recipe))
        if soup:
            label = f"soup of {label_of(recipe['variant'])}"
            ours.append(
                (soup["dev"], label, recipe, f"{soup['test']['avg']:.2f}", soup["test"]["avg"])
            )
    return ours, left_out


def _left_out_line(teachers: set[str]) -> list[str]:
    if not teachers:
        return []
    names = ", ".join(f"`{t}`" for t in sorted(teachers))
    return [f"- not candidates: our rows with a teacher no peer row was given ({names})"]


# ----------------------------------------------------------------------------- levers
@dataclass(frozen=True)
class Lever:
    """One of our levers, on and off: two recipes of the cells (``recipe_key_of``) that differ
    in that lever alone; ``soup`` compares a recipe's soup of its seeds with its runs."""

    name: str
    on: str
    off: str
    soup: bool = False


def _key(method: str, epochs: int, **settings: str) -> str:
    """The recipe key of a lever's recipe at lr 4e-5 (``Cell.recipe_key``)."""
    cell = Cell(method, tuple(sorted(settings.items())), epochs, 4e-5, 0)
    return cell.recipe_key


_NOW = {"teacher_model": "mpnet-sts-teacher", "teacher_weight": "1", "teacher_neighbours": "1"}
_HALF = {"teacher_model": "mpnet-sts-teacher", "teacher_weight": "0.5"}
_PICK = _key("ours-pcc_pearson", 2, **_NOW)
LEVERS = (
    Lever("soup of the three seeds", _PICK, _PICK, soup=True),
    Lever(
        "Pearson loss instead of cosine MSE (the peer's CosineSimilarityLoss), same teacher pairs",
        _PICK,
        _key("st-cosine", 2, **_NOW),
    ),
    Lever(
        "cosine MSE added to the Pearson loss (loss_weights 1 : 1), same teacher pairs",
        _key("ours-pcc_pearson", 2, **_NOW, loss_weights='{"pearson":1,"cosine_mse":1}'),
        _PICK,
    ),
    Lever(
        "checkpoints averaged along the run (weight_averaging uniform), same teacher pairs",
        _key("ours-pcc_pearson", 2, **_NOW, weight_averaging="uniform"),
        _PICK,
    ),
    Lever(
        "Pcc-tuning's two stages (1 epoch of cosine MSE, then 1 of the Pearson loss) instead "
        "of 2 epochs of the Pearson loss, same teacher pairs",
        _key("ours-pcc_pearson", 1, **_NOW, stage1_epochs="1", stage1_loss="cosine_mse"),
        _PICK,
    ),
    Lever("the teacher (w 1, one neighbour pair)", _PICK, _key("ours-pcc_pearson", 2)),
    Lever(
        "Pearson loss instead of cosine MSE, no teacher",
        _key("ours-pcc_pearson", 2),
        _key("ours-cosine_mse", 2),
    ),
    Lever(
        "one neighbour pair per sentence (cosine MSE, teacher w 0.5)",
        _key("ours-cosine_mse", 1, **_HALF, teacher_neighbours="1"),
        _key("ours-cosine_mse", 1, **_HALF),
    ),
    Lever(
        "Pearson added to cosine MSE (loss_weights pearson 0.5), no teacher",
        _key("ours-cosine_mse", 1, loss_weights='{"cosine_mse":1,"pearson":0.5}'),
        _key("ours-cosine_mse", 1),
    ),
    Lever(
        "checkpoints averaged along the run (weight_averaging uniform), no teacher",
        _key("ours-cosine_mse", 1, weight_averaging="uniform"),
        _key("ours-cosine_mse", 1),
    ),
)


def lever_lines(recipes: dict[str, dict], soups: dict[str, dict]) -> list[str]:
    """Each lever's test average on and off (mean over the seeds scored, their count) and the
    difference; a lever whose recipes are not both scored says so."""
    lines = [
        "## Levers: each on and off",
        "",
        "| lever | on: recipe | test Avg. on (seeds) | off: recipe | test Avg. off (seeds) "
        "| on − off |",
        "|---|---|---|---|---|---|",
    ]
    for lever in LEVERS:
        off = seed_test_averages(recipes.get(lever.off))
        on = (
            _soup_scored(soups.get(lever.on))
            if lever.soup
            else seed_test_averages(recipes.get(lever.on))
        )
        difference = f"{sum(on) / len(on) - sum(off) / len(off):+.2f}" if on and off else "–"
        on_name = ("soup of " if lever.soup else "") + _recipe_text(lever.on)
        lines.append(
            f"| {lever.name} | {on_name} | {_scores_text(on)} | {_recipe_text(lever.off)} | "
            f"{_scores_text(off)} | {difference} |"
        )
    return [*lines, ""]


def _recipe_text(key: str) -> str:
    """A recipe key for a table cell: its label, epochs and learning rate, no ``|``."""
    variant, _, rest = key.partition(" | ")
    return f"{label_of(variant)}, {rest.replace(' | ', ', ')}"


def seed_test_averages(recipe: dict | None) -> list[float]:
    """A recipe's seven-task test average per scored seed ([] for no recipe)."""
    return [t["avg"] for t in recipe["test"].values()] if recipe else []


def _soup_scored(soup: dict | None) -> list[float]:
    return [soup["test"]["avg"]] if soup else []


def _scores_text(scores: list[float]) -> str:
    return f"{_cell(scores)} ({len(scores)})" if scores else "not measured"


def teacher_text(name: str) -> str:
    seconds = teacher_seconds({"teacher_model": name})
    if seconds is None:
        return "its training not recorded (no seconds given for its rows)"
    if seconds == 0:
        return "used as released (no training)"
    return f"{seconds:,.0f} s of training"


def teacher_note(best: dict[str, dict]) -> str:
    """Which teachers the rows used and what training each took (its seconds are in the
    rows' cost)."""
    teachers = sorted(
        {r["settings"]["teacher_model"] for r in best.values() if "teacher_model" in r["settings"]}
    )
    parts = [f"`{t}`: {teacher_text(t)}" for t in teachers]
    return ("Teachers: " + "; ".join(parts) + ".") if parts else ""


def recipe_key_of(recipe: dict) -> str:
    return f"{recipe['variant']} | epochs {recipe['epochs']:g} | lr {recipe['learning_rate']:g}"


def report_markdown(cells: dict[str, dict], args: argparse.Namespace, info: dict) -> str:
    recipes = recipe_rows(cells)
    best = selected_recipes(recipes, args.select_seeds)
    soups = {k.split(" | ", 1)[1]: r for k, r in cells.items() if "soup_of" in r}
    tested, unidentified = split_unidentified(
        {variant: recipe for variant, recipe in best.items() if recipe["test"]}
    )
    header, rows = summary_table(tested, soups)
    old_header, old_rows = summary_table(unidentified, soups)
    dev_only = {variant: recipe for variant, recipe in best.items() if not recipe["test"]}
    dev_header, dev_rows = summary_table(dev_only, {})
    grid_header, grid_rows = grid_table(recipes)
    steps = "epochs as listed" if args.max_steps < 0 else f"{args.max_steps} steps"
    lines = [
        "# Quality: equal-budget recipe search, selected on STS-B dev",
        "",
        f"Mode `{args.mode}`: {args.model}; filtered STS-B + SICK-R train; batch "
        f"{args.batch_size}, {steps}, weight decay 0.01, 10 % warm-up, mean pooling; every "
        f"method on the same grid of epochs × learning rates; selection: best mean STS-B dev "
        f"Spearman over seeds {args.select_seeds}; the selected recipe is then trained on "
        f"seeds {args.seeds} and scored on the seven test tasks (SentEval protocol, 'all', "
        f"Spearman × 100). Tables hold every cell of `{Path(args.cells).name}` (searches run "
        "at different times add up).",
        "",
        common.sts_scored_by_line() + " STS-B dev selection: the same cosine.",
        "",
        common.machine_markdown(info),
        "",
        *headline(best, soups),
        *lever_lines(recipes, soups),
        "## Best dev-selected recipe per method",
        "",
        common.markdown_table(header, rows),
        "",
        *_unidentified_lines(old_header, old_rows),
        "Searched on dev only (`--grid-only`; no test score yet, so not in the headline):",
        "",
        common.markdown_table(dev_header[:4] + dev_header[-3:], [r[:4] + r[-3:] for r in dev_rows]),
        "",
        "Mean ± sd over seeds. A soup row is one model: the uniform average of the selected "
        "recipe's seed runs (`sts-soup`), selected by nothing but its recipe. A peer row with "
        "`teacher_model` trains on the pairs the same teacher relabels and adds, made with "
        "sentence-transformers' own API (`benchmarks/peer_teacher.py`), or distils the "
        "teacher's embeddings (`EmbedDistillLoss`).",
        "",
        "Cost, on this machine: *seconds* is the wall time of the whole recipe for one model "
        "(a soup: for all its seeds) — the teacher's training once (recorded by "
        "`quality_teacher.py` in the teacher's folder), plus each model's training in its own "
        "process (model loading, the teacher's encoding of the training sentences, the "
        "optimizer steps; not the data loading or the scoring); *steps*: optimizer steps of "
        "one model; *peak MiB*: the training process's peak resident memory; – where not "
        "recorded (cells trained before the script recorded their cost, a teacher whose "
        "training was not recorded). " + teacher_note(best),
        "",
        "## Every cell (STS-B dev; test only where a recipe was selected)",
        "",
        common.markdown_table(grid_header, grid_rows),
    ]
    return "\n".join(lines)


def _unidentified_lines(header: list, rows: list) -> list[str]:
    if not rows:
        return []
    return [
        "Trained with a teacher before the cells recorded its weights' id and the cost (its "
        "folder is gone; no peer row had it, so not candidates; no cost can be measured):",
        "",
        common.markdown_table(header[:-3], [row[:-3] for row in rows]),
        "",
    ]


# ----------------------------------------------------------------------------- entry
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.benchmark_parser(__doc__, smoke="2 steps, 2 seeds, tiny sets")
    common.add_model_argument(parser)
    parser.add_argument(
        "--methods", nargs="+", choices=sorted(k for k in SEARCH_METHODS if k != "base")
    )
    parser.add_argument("--epochs", nargs="+", type=float, default=[1.0])
    parser.add_argument("--learning-rate", nargs="+", type=float, default=[2e-5])
    parser.add_argument("--seeds", nargs="+", type=int)
    parser.add_argument("--select-seeds", nargs="+", type=int, help="default: the first seed")
    parser.add_argument(
        "--set",
        dest="set_pairs",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config field of our rows (repeatable)",
    )
    parser.add_argument("--soup", action="store_true", help="add the soup of each selection")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--output-dir", help="default: benchmarks/results")
    parser.add_argument("--cells", help="default: <output-dir>/quality_search_cells.json")
    parser.add_argument("--weights-dir", help="default: ~/.cache/sts-quality-search/<mode>")
    parser.add_argument("--render", action="store_true", help="only rewrite the report")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="train the cells in this process (no interpreter start per cell; peak memory "
        "is then not measured)",
    )
    parser.add_argument("--worker", choices=["cell"], help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument(
        "--grid-only",
        action="store_true",
        help="train and score the grid on dev only; select and test in a later run",
    )
    parser.add_argument(
        "--measure-cost",
        action="store_true",
        help="train again (into a scratch folder) the run's stored cells that lack the cost "
        "columns; copy the cost into their record when the dev score reproduces",
    )
    args = common.apply_mode(parser.parse_args(argv), MODES)  # smoke or full
    args.methods = args.methods or (SMOKE_METHODS if args.smoke else ["ours-cosine_mse"])
    args.select_seeds = args.select_seeds or args.seeds[:1]
    if not set(args.select_seeds) <= set(args.seeds):
        parser.error("--select-seeds must be among --seeds")
    args.settings = parse_settings(args.set_pairs)
    first_stage(config_values(tuple(kv for kv in args.settings if kv[0] in STAGE_KEYS)))
    check_settings(args)
    distill = [m for m in args.methods if m in DISTILL_METHODS]
    if distill and "teacher_model" not in dict(args.settings):
        parser.error(f"{', '.join(distill)} distil a teacher: add --set teacher_model=…")
    output = Path(args.output_dir) if args.output_dir else common.RESULTS_DIR
    stem = "quality_search" + ("_smoke" if args.smoke else "")
    args.stem = str(output / stem)
    args.cells = args.cells or str(output / f"{stem}_cells.json")
    default_weights = Path.home() / ".cache" / "sts-quality-search" / args.mode
    args.weights_dir = args.weights_dir or str(default_weights)
    return args


def check_paths(args: argparse.Namespace) -> None:
    """The folders the search writes (the report's, the cells file's, the weights') checked
    writable, and for ``--render`` the cells file present, before any data loads or any cell
    trains (BenchmarkError naming the flag and the path)."""
    common.check_output_dir(args.output_dir)
    cells = Path(args.cells).expanduser()
    if cells.is_dir():
        raise common.BenchmarkError(f"--cells {cells}: a folder, not a cells file")
    common.writable_folder("--cells", cells.parent)
    if args.render and not cells.is_file():
        raise common.BenchmarkError(f"--cells {cells}: no such file (nothing to --render)")
    if not args.render:
        common.writable_folder("--weights-dir", args.weights_dir)


def write_report(args: argparse.Namespace, info: dict) -> Path:
    cells = json.loads(Path(args.cells).read_text(encoding="utf-8"))["cells"]
    stem = Path(args.stem)
    settings = {k: v for k, v in vars(args).items() if k not in ("settings", "worker", "spec")}
    common.write_json(stem, {"settings": settings, "machine": info, "cells": cells})
    common.write_markdown(stem, report_markdown(cells, args, info))
    return stem


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        common.emit_result(train_cell(json.loads(args.spec)))
        return 0
    check_paths(args)
    info = common.machine_info()
    if not args.render:
        common.check_environment([args.model])
        if args.threads:
            common.set_threads(args.threads)
        start = time.perf_counter()
        for selection in run_search(args):
            tests = [t["avg"] for t in selection["tests"]]
            print(f"{selection['recipe']}: test avg {_cell(tests)}", flush=True)
        info["wall_seconds"] = round(time.perf_counter() - start, 1)
    stem = write_report(args, info)
    print(f"wrote {stem}.md/.json")
    return 0


if __name__ == "__main__":
    common.main_guard(main)
