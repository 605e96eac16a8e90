"""Pairwise scoring tasks beside STS: BSC against sentence-transformers on MRPC, Quora and
WikiQA, the same model, data, budget and seeds on both sides.

Rows (each trained from all-MiniLM-L6-v2 on the task's training pairs, then scored on its
test pairs): the untrained model; ours, ``BscTrainer`` with the package's CPU recipe
settings (the combo 0.1·BSC + 0.9·MSE for MRPC and Quora, 0.9·BSC + 0.1·MSE for WikiQA,
positives = label 1, τ 0.1, L2, example-based batches); the peers
``MultipleNegativesSymmetricRankingLoss`` (the positive pairs only, scale 10 = 1/τ: half
of BSC at τ 0.1 without labeled negatives) and ``CosineSimilarityLoss`` (the MSE part
alone, on the 0/1 labels). Scores: MRPC and Quora, F1 and accuracy of the cosine at
thresholds chosen on the threshold split; WikiQA, MAP, MRR, P@1 and HasPositive@5
(``sts_core.evaluation.pair_tasks``).

Commands (from the repository root; STS_DATA_DIR and STS_MODELS_DIR must be set)::

    uv run python benchmarks/pair_tasks.py --quick    # 1 seed, 400 training pairs a task
    uv run python benchmarks/pair_tasks.py            # full: 1 epoch, seeds 0 1 2
    uv run python benchmarks/pair_tasks.py --tasks wikiqa --methods base ours-bsc st-mnsrl
    uv run python benchmarks/pair_tasks.py --train-pairs 2000   # full, each task's first 2,000
    uv run python benchmarks/pair_tasks.py --tasks wikiqa \
        --methods ours-bsc ours-bsc-random ours-bsc-alone ours-bsc-alone-random ours-mse
    uv run python benchmarks/pair_tasks.py --smoke --output-dir /tmp/bench   # for tests

Results: ``benchmarks/results/pair_tasks[_quick].{md,json}``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402


@dataclass(frozen=True)
class Task:
    """A pairwise task: where it trains, where thresholds come from, what it is scored on."""

    train: str
    test: str
    kind: str  # classification or ranking
    thresholds: str | None = None
    bsc: dict[str, Any] = field(default_factory=dict)  # BscConfig fields of ours


COMBO = {"mu": 0.1, "label_threshold": 0.5, "bsc_temperature": 0.1, "shuffle": "example"}
TASKS: dict[str, Task] = {
    "mrpc": Task(
        "mrpc:train", "mrpc:test", "classification", "mrpc:train", {**COMBO, "group_size": 4}
    ),
    "quora": Task(
        "quora:dev", "quora:test", "classification", "quora:dev", {**COMBO, "group_size": 8}
    ),
    "wikiqa": Task(
        "wikiqa:dev", "wikiqa:test", "ranking", None, {**COMBO, "mu": 0.9, "group_size": 8}
    ),
}
HEADLINE = {
    "classification": ("f1", "accuracy"),
    "ranking": ("map", "mrr", "p@1", "has_positive@5"),
}
# ours and its ablations (the README's "BSC vs MSE vs combo, random vs example-based"): the
# task's settings with these BscConfig fields changed
OURS_VARIANTS: dict[str, dict[str, Any]] = {
    "ours-bsc": {},
    "ours-bsc-random": {"shuffle": "random"},  # the same loss, random batches
    "ours-bsc-alone": {"mu": 1.0},  # BSC with labeled negatives, no MSE part
    "ours-bsc-alone-random": {"mu": 1.0, "shuffle": "random"},
    "ours-mse": {"mu": 0.0},  # the MSE part alone (eq. 6 with μ 0)
}
METHODS = ("base", *OURS_VARIANTS, "st-mnsrl", "st-cosine")
DEFAULT_METHODS = ("base", "ours-bsc", "st-mnsrl", "st-cosine")
MODES = {
    "smoke": {"max_steps": 2, "seeds": [0], "train_pairs": 60, "test_pairs": 120},
    "quick": {"max_steps": -1, "seeds": [0], "train_pairs": 400, "test_pairs": 1000},
    "full": {"max_steps": -1, "seeds": [0, 1, 2], "train_pairs": 0, "test_pairs": 0},
}


def load(reference: str, limit: int) -> Any:
    """A registry pair set, its first ``limit`` rows when ``limit`` (whole WikiQA questions:
    the rows of the question at the cut are kept)."""
    from sts_core.data import load_pairs

    name, split = reference.split(":")
    data = load_pairs(name, split, common.data_dir())
    if not limit or len(data) <= limit:
        return data
    end = limit
    if "query_id" in data.column_names:
        ids = data["query_id"]
        while end < len(data) and ids[end] == ids[end - 1]:
            end += 1
    return data.select(range(end))


def build_evaluator(task: Task, name: str, test_pairs: int) -> Any:
    from sts_core.evaluation.pair_tasks import PairClassificationEvaluator, RankingEvaluator

    test = load(task.test, test_pairs)
    if task.kind == "ranking":
        return RankingEvaluator(test, name=name, ks=(1, 5), source=task.test)
    thresholds = load(task.thresholds, test_pairs)
    return PairClassificationEvaluator(test, thresholds, name=name, source=task.test)


def train_method(method: str, task: Task, recipe: Any, seed: int, data: Any) -> Any:
    """The trained encoder of ``method`` (the untrained one for ``base``)."""
    import quality

    if method == "base":
        return quality.load_ours(recipe)
    if method in OURS_VARIANTS:
        from sts_bsc import METHOD as BSC
        from sts_core.method import QualityRow

        fields = {**task.bsc, **OURS_VARIANTS[method]}
        row = QualityRow(method, "BSC", fields, unit_labels=True)
        return quality.train_ours(BSC, row)(recipe, seed, data)
    if method == "st-mnsrl":
        train = quality.train_peer(
            "MultipleNegativesSymmetricRankingLoss", positives_above=0.5, scale=10.0
        )
        return train(recipe, seed, data)
    if method == "st-cosine":
        return quality.train_peer("CosineSimilarityLoss")(recipe, seed, data)
    raise ValueError(f"unknown method {method!r}")


def run_task(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    import quality

    task = TASKS[name]
    data = load(task.train, args.train_pairs).select_columns(["sentence1", "sentence2", "score"])
    evaluator = build_evaluator(task, name, args.test_pairs)
    recipe = quality.Recipe.mean_pooled(
        args.model, args.learning_rate, args.batch_size, args.epochs, args.max_steps
    )
    rows = []
    for method in args.methods:
        seeds = [args.seeds[0]] if method == "base" else args.seeds
        row: dict[str, Any] = {
            "task": name,
            "method": method,
            "train_pairs": len(data),
            "seeds": {},
        }
        for seed in seeds:
            print(f"  {name}: {method} (seed {seed}) …", flush=True)
            start = time.perf_counter()
            encoder = train_method(method, task, recipe, seed, data)
            trained = time.perf_counter() - start
            common.refuse_pair_scorer_head(encoder, f"{name}: {method}")
            scores = {k[len(name) + 1 :]: v for k, v in evaluator(encoder).items()}
            scores["train_seconds"] = round(trained, 1)
            row["seeds"][seed] = scores
            shown = ", ".join(f"{k} {scores[k]:.2f}" for k in HEADLINE[task.kind])
            print(f"    {shown} (train {trained:.0f} s)", flush=True)
        row["summary"] = {
            key: common.mean_sd([s[key] for s in row["seeds"].values()])
            for key in HEADLINE[task.kind]
        }
        rows.append(row)
    return rows


def report_markdown(rows: list[dict], args: argparse.Namespace, info: dict) -> str:
    from sts_core.evaluation.sts import COSINE_SCORER, describe_scorer

    lines = [
        f"# Pairwise tasks: BSC against sentence-transformers ({args.mode})",
        "",
        f"Model {args.model}, lr {args.learning_rate}, batch {args.batch_size}, "
        f"epochs {args.epochs}"
        + (f" (max {args.max_steps} steps)" if args.max_steps > 0 else "")
        + f", seeds {' '.join(map(str, args.seeds))}; training pairs capped at "
        f"{args.train_pairs or 'none'}, test pairs at {args.test_pairs or 'none'}. "
        "Mean ± sd over seeds (×100).",
        "",
        f"Scored by: {describe_scorer(COSINE_SCORER)}, every row (`cosine_scorer`; a model "
        "with a pair_scorer head is refused).",
        "",
    ]
    for name in args.tasks:
        kind = TASKS[name].kind
        keys = HEADLINE[kind]
        table = []
        for row in (r for r in rows if r["task"] == name):
            cells = [f"{row['summary'][k][0]:.2f} ± {row['summary'][k][1]:.2f}" for k in keys]
            table.append([row["method"], row["train_pairs"], *cells])
        lines += [f"## {name} ({TASKS[name].train} → {TASKS[name].test}, {kind})", ""]
        lines += [common.markdown_table(["method", "train pairs", *keys], table), ""]
    lines += [common.machine_markdown(info), ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.benchmark_parser(
        __doc__, quick="1 seed, 400 training pairs a task", smoke="2 steps, 60 pairs, for tests"
    )
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=sorted(TASKS))
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(DEFAULT_METHODS))
    common.add_model_argument(parser)
    parser.add_argument("--learning-rate", type=common.POSITIVE_NUMBER, default=2e-5)
    parser.add_argument("--batch-size", type=common.COUNT, default=30)
    parser.add_argument("--epochs", type=common.POSITIVE_NUMBER, default=1.0)
    parser.add_argument("--seeds", nargs="+", type=common.NON_NEGATIVE_INT)
    parser.add_argument(
        "--train-pairs",
        type=common.NON_NEGATIVE_INT,
        help="the first N training pairs of a task (0: all)",
    )
    parser.add_argument(
        "--test-pairs", type=common.NON_NEGATIVE_INT, help="the first N test pairs (0: all)"
    )
    parser.add_argument("--threads", type=common.COUNT)
    parser.add_argument("--output-dir", help="default: benchmarks/results")
    parser.add_argument("--render", metavar="JSON", help="only rewrite the report of a result")
    return common.apply_mode(parser.parse_args(argv), MODES)


def write_report(rows: list[dict], args: argparse.Namespace, info: dict, stem: Path) -> list[Path]:
    """The markdown of ``rows``; the file written."""
    return [common.write_markdown(stem, report_markdown(rows, args, info))]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        return common.render_result(Path(args.render), "pair_tasks.py", write_report)
    if args.threads:
        common.set_threads(args.threads)
    files, stem = common.result_files("pair_tasks.py", "pair_tasks", args, models=[args.model])
    files.check()
    start = time.perf_counter()
    rows = [row for name in args.tasks for row in run_task(name, args)]
    info = common.machine_info()
    settings = {k: v for k, v in vars(args).items() if k != "output_dir"}
    common.write_json(stem, {"settings": settings, "rows": rows, "machine": info})
    write_report(rows, args, info, stem)
    print(f"wrote {stem}.md/.json in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    common.main_guard(main)
