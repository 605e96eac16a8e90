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
(``sts_core.search.peer_teacher``: the relabelled pairs and the teacher's neighbour pairs, as its
Augmented SBERT example; labels on 0–1), and ``st-embed-distill`` / ``st-mse-distill``
distil the teacher's embeddings (``EmbedDistillLoss``, cosine or MSE, through a projection
to the teacher's width). Options the peer lacks (the Pearson loss, combined losses, soups,
weight averaging, the two stages) stay ours.

Every row is trained, chosen, tested and souped by ``sts-search`` itself, one search per
method and settings under ``<weights-dir>/sts-search/`` with this benchmark's inputs
(``grid_search/via_search.py``: ``sts-search --soup``, the peer's teacher and distillation
rows ``st:<row>``, the two stages as recipe keys): each cell trains in a fresh process
(``--in-process``: in the search's own, one at a time, without the peak memory), which
records the cost columns: wall seconds of the training, optimizer steps and peak resident
memory; a teacher's own training (``quality_teacher.py`` records it in its folder) is added
once per recipe. ``--soup`` adds a row per selected recipe: the uniform average of its seeds'
embedding weights (a model soup), scored on dev and test like any model. The search's cells
and soups are copied into the cells file, from which the selections and the report are read.

Every trained cell is kept in ``--cells`` (a JSON file, written after each search) and its
model in its ``sts-search`` folder under ``--weights-dir``: a search interrupted or extended
later trains only the cells it lacks (CPU runs repeat exactly per seed).
``--grid-only`` fills the grid's dev scores and stops: a large search can be split over
several runs, and the last one (without it) selects and tests.

Commands (from the repository root; STS_DATA_DIR and STS_MODELS_DIR must be set)::

    uv run python benchmarks/quality_search.py --methods ours-cosine_mse st-cosine \\
        --epochs 1 2 --learning-rate 1e-5 2e-5 4e-5 --soup --threads 1
    uv run python benchmarks/quality_search.py --methods ours-cosine_mse --epochs 1 \\
        --learning-rate 2e-5 --set teacher_model=all-mpnet-base-v2 --set teacher_weight=0.5
    uv run python benchmarks/quality_search.py --smoke --output-dir /tmp/bench  # CI
    uv run python benchmarks/quality_search.py --compare /tmp/repro/cells.json  # reproduced?

The code is in ``benchmarks/grid_search/`` by concern (cells, search, report, levers); this
script is its command line.

Results: ``benchmarks/results/quality_search.{md,json}`` (every run rewrites the report from
all cells in ``--cells``, so the tables grow as searches are added);
``quality_search_reproduced.{md,json}`` from ``--compare`` (``grid_search/reproduce.py``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import _common as common
from grid_search.cells import (
    DISTILL_METHODS,
    SEARCH_METHODS,
    SMOKE_METHODS,
    STAGE_KEYS,
    check_settings,
    check_stored_inputs,
    config_values,
    parse_settings,
    search_inputs,
    stage_of,
)
from grid_search.report import report_markdown, scores_cell
from grid_search.reproduce import COMPARISON, write_comparison
from grid_search.search import run_search

MODES = {
    "smoke": {
        "max_steps": 2,
        "seeds": [0, 1],
        "eval_pairs": 40,
        "train_pairs_cap": 64,
        "jobs": 2,
    },
    "full": {"max_steps": -1, "seeds": [0, 1, 2], "eval_pairs": 0, "train_pairs_cap": 0, "jobs": 1},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.benchmark_parser(__doc__, smoke="2 steps, 2 seeds, tiny sets")
    common.add_model_argument(parser)
    parser.add_argument(
        "--methods", nargs="+", choices=sorted(k for k in SEARCH_METHODS if k != "base")
    )
    parser.add_argument("--epochs", nargs="+", type=common.POSITIVE_NUMBER, default=[1.0])
    parser.add_argument("--learning-rate", nargs="+", type=common.POSITIVE_NUMBER, default=[2e-5])
    parser.add_argument("--seeds", nargs="+", type=common.NON_NEGATIVE_INT)
    parser.add_argument(
        "--select-seeds", nargs="+", type=common.NON_NEGATIVE_INT, help="default: the first seed"
    )
    parser.add_argument(
        "--set",
        dest="set_pairs",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config field of our rows (repeatable)",
    )
    parser.add_argument("--soup", action="store_true", help="add the soup of each selection")
    parser.add_argument("--batch-size", type=common.COUNT, default=16)
    parser.add_argument("--threads", type=common.COUNT)
    parser.add_argument(
        "--jobs",
        type=common.COUNT,
        help="cells an sts-search row trains side by side (sts-search --jobs; the cores split "
        "over them unless --threads); default 1, 2 in the smoke mode",
    )
    parser.add_argument("--output-dir", help="default: benchmarks/results")
    parser.add_argument("--cells", help="default: <output-dir>/quality_search_cells.json")
    parser.add_argument("--weights-dir", help="default: ~/.cache/sts-quality-search/<mode>")
    parser.add_argument("--render", action="store_true", help="only rewrite the report")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="train the cells in this process, one at a time (sts-search --in-process: no "
        "interpreter start per cell; peak memory is then not measured)",
    )
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
    parser.add_argument(
        "--compare",
        metavar="CELLS",
        help="compare a second run's cells file with --cells, cell by cell and pick by pick "
        "(writes <output-dir>/quality_search_reproduced.md/.json; trains nothing)",
    )
    args = common.apply_mode(parser.parse_args(argv), MODES)  # smoke or full
    args.methods = args.methods or (SMOKE_METHODS if args.smoke else ["ours-cosine_mse"])
    args.select_seeds = args.select_seeds or args.seeds[:1]
    if not set(args.select_seeds) <= set(args.seeds):
        parser.error("--select-seeds must be among --seeds")
    args.settings = parse_settings(args.set_pairs)
    stage_of(config_values(tuple(kv for kv in args.settings if kv[0] in STAGE_KEYS)))
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
    args.inputs = {}  # what the cells are trained on: check_paths fills it
    return args


def check_paths(args: argparse.Namespace) -> None:
    """What the search reads and writes (:func:`search_files`: the report's folder, the
    cells file's, the weights'), for ``--render`` the cells file present; then the stored
    cells against this search's inputs (:func:`grid_search.cells.check_stored_inputs`):
    before any data loads or any cell trains (BenchmarkError naming the flag and the
    path)."""
    cells = Path(args.cells).expanduser()
    if cells.is_dir():
        raise common.BenchmarkError(f"--cells {cells}: a folder, not a cells file")
    if args.render and not cells.is_file():
        raise common.BenchmarkError(f"--cells {cells}: no such file (nothing to --render)")
    search_files(args).check()
    if not args.render:
        args.inputs = search_inputs(args)
        check_stored_inputs(cells, args.inputs)


def search_files(args: argparse.Namespace) -> common.ScriptFiles:
    """What a search reads (the data, ``--model``, a ``--set teacher_model``; the cells file
    for ``--render``) and writes (its report, the cells file it extends, ``--weights-dir``:
    a cache of the cells' weights it manages itself); ``--compare`` reads the two cells
    files and writes the comparison."""
    files = common.ScriptFiles("quality_search.py", data=not (args.render or args.compare))
    if args.compare:
        files.reads("--cells", args.cells)
        files.reads("--compare", args.compare)
        files.results(Path(args.stem).with_name(COMPARISON))
        return files
    files.results(Path(args.stem))
    if args.render:
        files.reads("--cells", args.cells)
    else:
        files.model(args.model)
        teacher = dict(args.settings).get("teacher_model")
        if teacher:
            files.model(teacher, "--set teacher_model")
        files.folder("--cells", Path(args.cells).parent)
        files.writes("--cells", args.cells)
        files.folder("--weights-dir", args.weights_dir)
        files.writes("--weights-dir", args.weights_dir, kind="run")
    return files


def write_report(args: argparse.Namespace, info: dict) -> Path:
    cells = json.loads(Path(args.cells).read_text(encoding="utf-8"))["cells"]
    stem = Path(args.stem)
    settings = {k: v for k, v in vars(args).items() if k != "settings"}
    common.write_json(stem, {"settings": settings, "machine": info, "cells": cells})
    common.write_markdown(stem, report_markdown(cells, args, info))
    return stem


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.compare:
        search_files(args).check()
        print(f"wrote {write_comparison(args)}.md/.json")
        return 0
    check_paths(args)  # the data and the model too (search_files)
    info = common.machine_info()
    if not args.render:
        if args.threads:
            common.set_threads(args.threads)
        start = time.perf_counter()
        for selection in run_search(args):
            tests = [t["avg"] for t in selection["tests"]]
            print(f"{selection['recipe']}: test avg {scores_cell(tests)}", flush=True)
        info["wall_seconds"] = round(time.perf_counter() - start, 1)
    stem = write_report(args, info)
    print(f"wrote {stem}.md/.json")
    return 0


def kept() -> str:
    """What a search stopped by Ctrl-C keeps (``main_guard``)."""
    return (
        "the cells trained so far are kept in the cells file (--cells) and their models in "
        "--weights-dir; the same command goes on from there"
    )


if __name__ == "__main__":
    common.main_guard(main, kept)
