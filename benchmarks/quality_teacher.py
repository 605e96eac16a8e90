"""A fine-tuned teacher for ``quality_search.py --set teacher_model=<folder>``.

Fine-tunes a (larger) model with our cosine MSE (``ours-cosine_mse``) on the search's own
training set — the filtered STS-B + SICK-R pairs, scores scaled to 0–1, batch 16, weight
decay 0.01, 10 % warm-up, mean pooling, one seed — saves it as a model folder and prints its
STS-B dev Spearman (× 100; with ``--test`` also the seven test tasks, which choose nothing).
The student then distils this teacher's cosines on the same training sentences
(``teacher_model``, ``teacher_weight``, ``teacher_neighbours``): no data beyond the
benchmark's, one larger model. The training's wall seconds, steps and peak memory are
written to ``sts_teacher_cost.json`` in the folder: the search counts them once in the cost
of every recipe that uses the teacher.

Command (from the repository root; STS_DATA_DIR and STS_MODELS_DIR must be set)::

    uv run python benchmarks/quality_teacher.py --model all-mpnet-base-v2 --epochs 1 \\
        --learning-rate 2e-5 --output "$STS_MODELS_DIR/mpnet-sts-teacher" --threads 2
    uv run python benchmarks/quality_teacher.py --model all-MiniLM-L6-v2 --smoke \
        --output /tmp/teacher  # CI
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import _common as common
import quality


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.benchmark_parser(__doc__)
    common.add_model_argument(parser, default=common.MPNET)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", required=True, help="the teacher's folder (must not exist)")
    parser.add_argument("--test", action="store_true", help="also score the seven test tasks")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--smoke", action="store_true", help="2 steps, 40 dev pairs (CI)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from grid_search.report import TEACHER_COST_FILE
    from grid_search.search import Scorer

    from sts_core.training.method_registry import quality_rows

    args = parse_args(argv)
    output = Path(args.output).expanduser()
    if output.exists():
        raise common.BenchmarkError(f"--output {output} exists: name a new folder")
    common.writable_folder("--output", output.parent)  # before the training, not after
    common.check_environment([args.model])
    if args.threads:
        common.set_threads(args.threads)
    steps = 2 if args.smoke else -1
    recipe = quality.Recipe.mean_pooled(
        args.model, args.learning_rate, args.batch_size, args.epochs, steps
    )
    _, unit_data = quality.load_training_data()
    start = time.perf_counter()
    teacher = quality.train_ours(*quality_rows()["ours-cosine_mse"])(recipe, args.seed, unit_data)
    seconds = round(time.perf_counter() - start, 1)
    print(f"trained in {seconds:.0f} s", flush=True)
    teacher.save_pretrained(str(output))
    cost = {"train_seconds": seconds, "steps": teacher.trained_steps, "model": args.model}
    cost["peak_rss_mb"] = round(common.peak_rss_mb(), 1)
    (output / TEACHER_COST_FILE).write_text(json.dumps(cost, indent=1) + "\n", encoding="utf-8")
    scorer = Scorer(argparse.Namespace(eval_pairs=40 if args.smoke else 0))
    print(f"STS-B dev Spearman: {scorer.dev_spearman(teacher):.2f}", flush=True)
    if args.test:
        scores = scorer.test_scores(teacher)
        print("test: " + ", ".join(f"{k} {v:.2f}" for k, v in scores.items()), flush=True)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    common.main_guard(main)
