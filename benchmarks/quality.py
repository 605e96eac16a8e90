"""Quality on one fixed CPU budget: our methods against sentence-transformers' losses.

all-MiniLM-L6-v2 fine-tuned on the filtered STS-B + SICK-R training set (5,398 pairs), one
epoch, batch 16, lr 2e-5, by every method we have (``ours-cosent``: the CoSENT method) and by
``SentenceTransformerTrainer`` with ``CoSENTLoss``, ``AnglELoss`` and ``CosineSimilarityLoss``
(labels scaled to 0–1 for the latter); the model before training is the first row. Each
model is scored on the seven STS tasks (SentEval protocol, "all" aggregation, Spearman ×
100) through ``SentenceEncoder.encode`` (the trained sentence-transformers backbones are
wrapped, same pooling), with mean ± sd over seeds.

Fine-tuning this already-contrastive model on the filtered STS data can score *below* the
untrained model; ``--learning-rate`` and ``--pooling`` take several values (a grid, every
combination one row) and ``--methods`` picks losses, to search for a recipe that improves on
it. Our methods come from the packages: each declares its rows in its ``Method``
(``quality_rows``; entry point ``sts_core.methods``); the peer's are ``PEER_METHODS``.

Commands (from the repository root; STS_DATA_DIR and STS_MODELS_DIR must be set)::

    uv run python benchmarks/quality.py --quick   # 40 steps, seed 0, 300 pairs per task
    uv run python benchmarks/quality.py           # full: 1 epoch, seeds 0 1 2, all pairs
    uv run python benchmarks/quality.py --learning-rate 5e-6 1e-5 2e-5 --methods ours-cosent
    uv run python benchmarks/quality.py --smoke --output-dir /tmp/bench   # CI: every row, 2 steps
    uv run python benchmarks/quality.py --render benchmarks/results/quality.json  # re-render

Results: ``benchmarks/results/quality[_quick].{md,json,png}``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _common as common
import numpy as np

from sts_core.names import STS_TASKS
from sts_core.pooling import POOLING_MODES

TASKS = STS_TASKS
TITLES = common.STS_TITLES
AVERAGES = ("avg", "avg_wmean")  # mean of the seven 'all' numbers; the same with 'wmean'
ST_POOLING = {"mean": "mean", "cls": "cls", "max": "max", "last_token": "lasttoken"}
DEFAULT_METHODS = [
    "base",
    "ours-cosent",
    "ours-cosine_mse",
    "ours-smooth_k2",
    "ours-pcc_pearson",
    "st-cosent",
    "st-angle",
    "st-cosine",
]
MODES = {
    "smoke": {
        "max_steps": 2,
        "seeds": [0],
        "eval_pairs": 40,
        "methods": None,  # the untrained model, every registered "ours-" row, st-cosent
        "train_pairs_cap": 64,  # 2 steps of 16 need 32 (SIFTER parses only these sentences)
    },
    "quick": {"max_steps": 40, "seeds": [0], "eval_pairs": 300, "methods": DEFAULT_METHODS},
    "full": {"max_steps": -1, "seeds": [0, 1, 2], "eval_pairs": 0, "methods": DEFAULT_METHODS},
}


@dataclass(frozen=True)
class Recipe:
    """One training configuration (a row of the table, over seeds)."""

    model: str
    learning_rate: float
    pooling: str
    batch_size: int
    epochs: float
    max_steps: int
    max_length: int | None

    @classmethod
    def mean_pooled(
        cls, model: str, learning_rate: float, batch_size: int, epochs: float, max_steps: int
    ) -> Recipe:
        """``model`` (a name under ``$STS_MODELS_DIR`` or a path) with mean pooling and its
        own max length."""
        path = str(common.model_path(model))
        return cls(path, learning_rate, "mean", batch_size, epochs, max_steps, None)


@dataclass(frozen=True)
class Method:
    """How to get a trained encoder: ``train(recipe, seed, data) -> SentenceEncoder``."""

    label: str
    train: Callable[[Recipe, int, Any], Any] | None  # None: the model as loaded
    unit_labels: bool = False  # train on scores scaled to 0–1


# ----------------------------------------------------------------------------- ours
def train_ours(
    method: Any, row: Any, extra_config: dict[str, Any] | None = None
) -> Callable[[Recipe, int, Any], Any]:
    """Training for a row a package's method declares (``Method.quality_rows``), through
    the command line's own path (:meth:`TrainingRun.from_arguments`: every check, the
    method's data preparation, the teacher step of ``teacher_model``, the save);
    ``extra_config``: config fields over the row's own (e.g. ``teacher_model``)."""

    def train(recipe: Recipe, seed: int, data: Any) -> Any:
        from sts_core.training import DataArguments, ModelArguments, TrainingRun

        with tempfile.TemporaryDirectory(prefix="sts-bench-quality-") as output_dir:
            config = method.config(
                **training_arguments(recipe, seed, output_dir),
                **{**row.settings, **(extra_config or {})},
                load_best_model_at_end=False,
            )
            model_args = ModelArguments(
                model_name_or_path=recipe.model,
                pooling=recipe.pooling,
                max_seq_length=recipe.max_length,
            )
            data_args = DataArguments(data_dir=str(common.data_dir()), eval_dataset="none")
            run = TrainingRun.from_arguments(method, model_args, data_args, config, data)
            run.run()
            # teacher_model: what the run's teacher step made of the pairs (the search shows it)
            teacher = run.inputs.data_summary.get("teacher")
            model = run.trainer.accelerator.unwrap_model(run.trainer.model)
            model.trained_steps = run.trainer.state.global_step  # the cost column's steps
            model.teacher_summary = teacher
            return model

    return train


def load_ours(recipe: Recipe) -> Any:
    from sts_core.encoder import SentenceEncoder

    return SentenceEncoder.from_pretrained(
        recipe.model, pooling=recipe.pooling, max_length=recipe.max_length
    )


def training_arguments(recipe: Recipe, seed: int, output_dir: str) -> dict[str, Any]:
    return {
        "output_dir": output_dir,
        "per_device_train_batch_size": recipe.batch_size,
        "learning_rate": recipe.learning_rate,
        "weight_decay": 0.01,
        "warmup_steps": 0.1,
        "num_train_epochs": recipe.epochs,
        "max_steps": recipe.max_steps,
        "seed": seed,
        "logging_steps": 10,
        "eval_strategy": "no",
        "save_strategy": "no",
        "report_to": "none",
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
    }


# ----------------------------------------------------------------------------- peer
def train_peer(
    loss_name: str,
    positives_above: float | None = None,
    sentences_with_themselves: bool = False,
    **loss_args: Any,
) -> Callable[[Recipe, int, Any], Any]:
    """Training with sentence-transformers' ``loss_name``; with ``positives_above``, on the
    pairs whose score is above it only, without the score column (in-batch negative losses
    take every pair as a positive); with ``sentences_with_themselves``, on the distinct
    sentences of the pairs, each paired with itself (unsupervised SimCSE: the two sides
    differ by their dropout masks)."""

    def train(recipe: Recipe, seed: int, data: Any) -> Any:
        from sentence_transformers.sentence_transformer import losses
        from transformers import set_seed

        set_seed(seed)
        model = load_peer(recipe)
        loss = getattr(losses, loss_name)(model, **loss_args)
        if positives_above is not None:
            data = data.filter(lambda row: row["score"] > positives_above).remove_columns("score")
        if sentences_with_themselves:
            data = sentence_pairs_with_themselves(data)
        return run_peer_trainer(model, loss, data, recipe, seed)

    return train


def run_peer_trainer(model: Any, loss: Any, data: Any, recipe: Recipe, seed: int) -> Any:
    """``SentenceTransformerTrainer`` on ``data`` with ``loss`` and the budget's arguments;
    the trained model as a SentenceEncoder (``trained_steps``: its optimizer steps)."""
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )

    with tempfile.TemporaryDirectory(prefix="sts-bench-quality-") as output_dir:
        args = SentenceTransformerTrainingArguments(**training_arguments(recipe, seed, output_dir))
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss)
        trainer.train()
    encoder = wrap_peer(model, recipe)
    encoder.trained_steps = trainer.state.global_step
    return encoder


def sentence_pairs_with_themselves(data: Any) -> Any:
    """The distinct sentences of ``data``'s pairs (sentence1, then sentence2), each as an
    (anchor, positive) pair with itself; the order SIFTER's trainer reads them in."""
    from datasets import Dataset

    sentences = list(dict.fromkeys([*data["sentence1"], *data["sentence2"]]))
    return Dataset.from_dict({"anchor": sentences, "positive": sentences})


def load_peer(recipe: Recipe) -> Any:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    if recipe.pooling not in ST_POOLING:
        raise common.BenchmarkError(f"sentence-transformers has no {recipe.pooling!r} pooling")
    model = SentenceTransformer(recipe.model, device="cpu")
    if recipe.max_length:
        model.max_seq_length = recipe.max_length
    if getattr(model[1], "pooling_mode", None) != ST_POOLING[recipe.pooling]:
        dimension = model[0].auto_model.config.hidden_size
        model[1] = Pooling(dimension, pooling_mode=ST_POOLING[recipe.pooling])
    return model


def wrap_peer(model: Any, recipe: Recipe) -> Any:
    """The trained backbone as a SentenceEncoder (same pooling, length, normalisation)."""
    from sts_core.encoder import SentenceEncoder

    normalize = any(type(m).__name__ == "Normalize" for m in model)
    return SentenceEncoder(
        model[0].auto_model,
        model.tokenizer,
        pooling=recipe.pooling,
        max_length=model.max_seq_length,
        normalize=normalize,
    )


PEER_METHODS: dict[str, Method] = {
    "st-cosent": Method("sentence-transformers CoSENTLoss", train_peer("CoSENTLoss")),
    "st-angle": Method("sentence-transformers AnglELoss", train_peer("AnglELoss")),
    "st-cosine": Method(
        "sentence-transformers CosineSimilarityLoss", train_peer("CosineSimilarityLoss"), True
    ),
    # the symmetric in-batch softmax over the positive pairs (scores above 0.6 on the 0–1
    # scale), scale 1/τ = 10: half of BSC at τ 0.1 without labeled negatives (BSC sums the
    # two directions, the peer averages them; test_loss_peer.py in packages/bsc)
    "st-mnsrl": Method(
        "sentence-transformers MultipleNegativesSymmetricRankingLoss (pairs above 0.6, scale 10)",
        train_peer("MultipleNegativesSymmetricRankingLoss", positives_above=0.6, scale=10.0),
        True,
    ),
    # unsupervised SimCSE as sentence-transformers trains it (SIFTER's closest peer): the
    # distinct sentences of the pairs, each against itself, in-batch negatives, scale 1/τ = 20
    "st-simcse": Method(
        "sentence-transformers MultipleNegativesRankingLoss (each sentence with itself: "
        "unsupervised SimCSE, scale 20)",
        train_peer("MultipleNegativesRankingLoss", sentences_with_themselves=True, scale=20.0),
    ),
}


def all_methods() -> dict[str, Method]:
    """The untrained model, every method the installed packages register, the peer's."""
    from sts_core.training.method_registry import quality_rows

    ours = {
        key: Method(row.label, train_ours(method, row), row.unit_labels)
        for key, (method, row) in quality_rows().items()
    }
    return {"base": Method("before training", None), **ours, **PEER_METHODS}


METHODS: dict[str, Method] = all_methods()


# ----------------------------------------------------------------------------- data
def load_training_data() -> tuple[Any, Any]:
    """The filtered pairs with 0–5 scores, and the same with scores scaled to 0–1."""
    from sts_core.data import load_filtered_stsb_sick, rescale_scores

    train, _ = load_filtered_stsb_sick(common.data_dir())
    train = train.select_columns(["sentence1", "sentence2", "score"])
    return train, rescale_scores(train, (0.0, 5.0))


def build_evaluator(eval_pairs: int) -> Any:
    """The seven tasks; every k-th pair of each when ``eval_pairs`` caps their size."""
    from sts_core.evaluation import STSEvaluator
    from sts_core.evaluation.sts import load_task_pairs, spread_sample

    datasets = {}
    for task in TASKS:
        pairs = load_task_pairs(task, "senteval", "senteval", common.data_dir())
        datasets[task] = spread_sample(pairs, eval_pairs)  # as sts-search's --eval-pairs
    return STSEvaluator(tasks=TASKS, datasets=datasets, batch_size=64, show_progress_bar=False)


def evaluate(encoder: Any, evaluator: Any) -> dict[str, float]:
    report = evaluator.evaluate(encoder)
    scores = {task: float(report.results[task].spearman["all"]) for task in TASKS}
    scores["avg"] = report.average("all")
    scores["avg_wmean"] = report.average("wmean")  # within-subset ranking only
    return scores


# ----------------------------------------------------------------------------- runs
def recipes(args: argparse.Namespace) -> list[Recipe]:
    path = str(common.model_path(args.model))
    grid = itertools.product(args.learning_rate, args.pooling)
    return [
        Recipe(path, lr, pooling, args.batch_size, args.epochs, args.max_steps, args.max_length)
        for lr, pooling in grid
    ]


def run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    data, unit_data = load_training_data()
    cap = MODES[args.mode].get("train_pairs_cap")
    if cap:
        data, unit_data = data.select(range(cap)), unit_data.select(range(cap))
    args.train_pairs = len(data)  # saved with the settings, for the report
    evaluator = build_evaluator(args.eval_pairs)
    rows = []
    for recipe in recipes(args):
        for name in args.methods:
            if name == "base" and any(
                r["method"] == "base" and r["pooling"] == recipe.pooling for r in rows
            ):
                continue
            rows.append(run_method(name, recipe, args, evaluator, unit_data, data))
    return rows


def run_method(
    name: str, recipe: Recipe, args: argparse.Namespace, evaluator: Any, unit: Any, data: Any
) -> dict[str, Any]:
    method = METHODS[name]
    seeds = [args.seeds[0]] if method.train is None else args.seeds
    row: dict[str, Any] = {
        "method": name,
        "label": method.label,
        "learning_rate": recipe.learning_rate,
        "pooling": recipe.pooling,
        "seeds": {},
    }
    for seed in seeds:
        print(
            f"  {name} (lr {recipe.learning_rate}, pooling {recipe.pooling}, seed {seed}) …",
            flush=True,
        )
        start = time.perf_counter()
        if method.train is None:
            encoder = load_ours(recipe)
        else:
            encoder = method.train(recipe, seed, unit if method.unit_labels else data)
        trained = time.perf_counter() - start
        scores = evaluate(encoder, evaluator)
        scores["train_seconds"] = round(trained, 1)
        scores["eval_seconds"] = round(time.perf_counter() - start - trained, 1)
        row["seeds"][seed] = scores
        print(
            f"    avg {scores['avg']:.2f}, wmean avg {scores['avg_wmean']:.2f} "
            f"(train {trained:.0f} s)",
            flush=True,
        )
    row["summary"] = {
        key: common.mean_sd([s[key] for s in row["seeds"].values()]) for key in (*TASKS, *AVERAGES)
    }
    return row


# ----------------------------------------------------------------------------- output
def row_name(row: dict[str, Any], args: argparse.Namespace) -> str:
    extras = []
    if len(args.learning_rate) > 1 and row["method"] != "base":
        extras.append(f"lr {row['learning_rate']:g}")
    if len(args.pooling) > 1:
        extras.append(f"{row['pooling']} pooling")
    return row["label"] + (f" ({', '.join(extras)})" if extras else "")


def cell(mean: float, sd: float, seeds: int) -> str:
    return f"{mean:.2f}" if seeds < 2 else f"{mean:.2f} ± {sd:.2f}"


WMEAN_NOTE = (
    "*Avg. (wmean)* averages SentEval's 'wmean' instead (each subset ranked on its own, "
    "weighted by size; the same as 'all' for STS-B and SICK-R), which separates a loss of "
    "cross-subset calibration from a loss of ranking. "
)


def averages_in(rows: list[dict]) -> tuple[str, ...]:
    """The averages every row has (results written before 'avg_wmean' existed lack it)."""
    return tuple(key for key in AVERAGES if all(key in row["summary"] for row in rows))


def report_markdown(rows: list[dict], args: argparse.Namespace, info: dict, stem: Path) -> str:
    """The report; its chart is ``<stem>.png`` beside it."""
    base = {r["pooling"]: r["summary"]["avg"][0] for r in rows if r["method"] == "base"}
    averages = averages_in(rows)
    table_rows = []
    for row in rows:
        seeds = len(row["seeds"])
        cells = [cell(*row["summary"][key], seeds) for key in (*TASKS, *averages)]
        delta = row["summary"]["avg"][0] - base.get(row["pooling"], math.nan)
        table_rows.append([row_name(row, args), *cells, f"{delta:+.2f}", seeds])
    titles = {"avg": "Avg.", "avg_wmean": "Avg. (wmean)"}
    header = ["", *TITLES, *(titles[key] for key in averages), "Δ avg vs before", "seeds"]
    steps = "1 epoch" if args.max_steps < 0 else f"{args.max_steps} steps"
    evaluation = (
        "all test pairs"
        if not args.eval_pairs
        else f"≤ {args.eval_pairs} pairs per task (every k-th pair)"
    )
    train_pairs = getattr(args, "train_pairs", None)  # absent from older result files
    train = "filtered STS-B + SICK-R train" + (f" ({train_pairs:,} pairs)" if train_pairs else "")
    lines = [
        "# Quality: our methods vs sentence-transformers' losses, same budget",
        "",
        f"Mode `{args.mode}`: {args.model}; {train}; "
        f"{steps}, batch {args.batch_size}, lr {', '.join(f'{x:g}' for x in args.learning_rate)},"
        f" weight decay 0.01, 10 % warm-up; seeds {args.seeds}; evaluation: SentEval protocol, "
        f"'all', Spearman × 100 on {evaluation}.",
        "",
        common.sts_scored_by_line(),
        "",
        common.machine_markdown(info),
        "",
        common.markdown_table(header, table_rows),
        "",
        "Mean ± sd over seeds. *Avg.* is the headline: the mean of the seven 'all' numbers "
        "(STS12–16 subsets of a year pooled, so scores must agree *across* subsets). "
        + (WMEAN_NOTE if "avg_wmean" in averages else "")
        + "Fine-tuning an already-contrastive model on this small set may lower the "
        "average: compare each row with *before training*.",
        "",
        f"![quality chart]({stem.name}.png)",
    ]
    return "\n".join(lines)


def draw_chart(rows: list[dict], args: argparse.Namespace, path: Path) -> None:
    plt = common.pyplot()
    keys = (*TASKS, "avg")
    width = 0.8 / len(rows)
    fig, ax = plt.subplots(figsize=(12, 4.8))
    for i, row in enumerate(rows):
        means = [row["summary"][k][0] for k in keys]
        sds = [row["summary"][k][1] for k in keys]
        x = np.arange(len(keys)) + (i - (len(rows) - 1) / 2) * width
        ax.bar(
            x,
            means,
            width,
            yerr=sds if len(row["seeds"]) > 1 else None,
            label=row_name(row, args),
            capsize=2,
        )
    low = min(row["summary"][k][0] for row in rows for k in keys)
    ax.set_ylim(max(0.0, low - 5), None)
    ax.set_xticks(np.arange(len(keys)), [*TITLES, "Avg."])
    ax.set_ylabel("Spearman × 100 ('all')")
    ax.set_title(f"Seven STS tasks ({args.mode} mode; error bars: sd over seeds)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    common.save_figure(fig, path)


# ----------------------------------------------------------------------------- entry
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.benchmark_parser(
        __doc__,
        quick="a few minutes: 40 steps, 1 seed",
        smoke="2 steps on the first 64 training pairs, 40 pairs per task, every method's row",
    )
    common.add_model_argument(parser)
    parser.add_argument("--methods", nargs="+", choices=sorted(METHODS))
    parser.add_argument("--learning-rate", nargs="+", type=common.POSITIVE_NUMBER, default=[2e-5])
    parser.add_argument("--pooling", nargs="+", default=["mean"], choices=POOLING_MODES)
    parser.add_argument("--seeds", nargs="+", type=common.NON_NEGATIVE_INT)
    parser.add_argument("--epochs", type=common.POSITIVE_NUMBER, default=1.0)
    parser.add_argument(
        "--max-steps", type=common.COUNT, help="optimizer steps (default: --epochs)"
    )
    parser.add_argument("--batch-size", type=common.COUNT, default=16)
    parser.add_argument("--max-length", type=common.COUNT, help="default: the model's")
    parser.add_argument(
        "--eval-pairs", type=common.NON_NEGATIVE_INT, help="cap per task (0: all pairs)"
    )
    parser.add_argument("--threads", type=common.COUNT)
    parser.add_argument("--output-dir", help="default: benchmarks/results")
    parser.add_argument(
        "--render",
        metavar="JSON",
        help="rewrite the markdown and chart beside a saved quality JSON; trains nothing",
    )
    args = common.apply_mode(parser.parse_args(argv), MODES)
    if args.methods is None:  # smoke: one row per method a package registers
        args.methods = ["base", *sorted(k for k in METHODS if k.startswith("ours-")), "st-cosent"]
    return args


def write_report(rows: list[dict], args: argparse.Namespace, info: dict, stem: Path) -> list[Path]:
    """The markdown and the chart of ``rows``; the files written."""
    markdown = common.write_markdown(stem, report_markdown(rows, args, info, stem))
    chart = stem.with_suffix(".png")
    draw_chart(rows, args, chart)
    return [markdown, chart]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        return common.render_result(Path(args.render), "quality.py", write_report, (".md", ".png"))
    files, stem = common.result_files(
        "quality.py", "quality", args, common.REPORT_AND_CHART, [args.model]
    )
    files.check()
    if args.threads:
        common.set_threads(args.threads)
    info = common.machine_info()
    start = time.perf_counter()
    rows = run_all(args)
    info["wall_seconds"] = round(time.perf_counter() - start, 1)
    settings = dict(vars(args))
    common.write_json(stem, {"settings": settings, "machine": info, "rows": rows})
    write_report(rows, args, info, stem)
    for row in rows:
        (mean, sd), (wmean, wsd) = (row["summary"][key] for key in AVERAGES)
        print(f"{row_name(row, args)}: avg {mean:.2f} ± {sd:.2f}; wmean {wmean:.2f} ± {wsd:.2f}")
    print(f"wrote {stem}.md/.json/.png in {info['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    common.main_guard(main)
