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

``--cross-encoder`` trains a cross-encoder teacher instead, the way Augmented SBERT
(Thakur et al., 2021) and sentence-transformers' example train one: ``CrossEncoder(model,
num_labels=1)`` with ``BinaryCrossEntropyLoss`` on the same 0–1 pairs and budget, saved as a
sentence-transformers folder (its sigmoid recorded), so ours and the peer read the same
scores; its dev Spearman is that of ``CrossEncoder.predict`` on the STS-B dev pairs.

Command (from the repository root; STS_DATA_DIR and STS_MODELS_DIR must be set)::

    uv run python benchmarks/quality_teacher.py --model all-mpnet-base-v2 --epochs 1 \\
        --learning-rate 2e-5 --output "$STS_MODELS_DIR/mpnet-sts-teacher" --threads 2
    uv run python benchmarks/quality_teacher.py --model all-MiniLM-L6-v2 --smoke \
        --output /tmp/teacher  # CI
    uv run python benchmarks/quality_teacher.py --cross-encoder --model all-mpnet-base-v2 \
        --output "$STS_MODELS_DIR/mpnet-sts-cross-encoder" --threads 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import _common as common
import quality
from grid_search.report import TEACHER_COST_FILE


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.benchmark_parser(__doc__)
    common.add_model_argument(parser, default=common.MPNET)
    parser.add_argument("--epochs", type=common.POSITIVE_NUMBER, default=1.0)
    parser.add_argument("--learning-rate", type=common.POSITIVE_NUMBER, default=2e-5)
    parser.add_argument("--batch-size", type=common.COUNT, default=16)
    parser.add_argument("--seed", type=common.NON_NEGATIVE_INT, default=0)
    parser.add_argument("--output", required=True, help="the teacher's folder (must not exist)")
    parser.add_argument("--test", action="store_true", help="also score the seven test tasks")
    parser.add_argument("--threads", type=common.COUNT)
    parser.add_argument("--smoke", action="store_true", help="2 steps, 40 dev pairs (CI)")
    parser.add_argument(
        "--cross-encoder",
        action="store_true",
        help="train a sentence-transformers CrossEncoder (binary cross-entropy) instead",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from sts_core.training.method_registry import quality_rows

    args = parse_args(argv)
    output = check_files(args)
    if args.threads:
        common.set_threads(args.threads)
    steps = 2 if args.smoke else -1
    recipe = quality.Recipe.mean_pooled(
        args.model, args.learning_rate, args.batch_size, args.epochs, steps
    )
    _, unit_data = quality.load_training_data()
    start = time.perf_counter()
    if args.cross_encoder:
        teacher = train_cross_encoder(recipe, args.seed, unit_data)
    else:
        train = quality.train_ours(*quality_rows()["ours-cosine_mse"])
        teacher = train(recipe, args.seed, unit_data)
    seconds = round(time.perf_counter() - start, 1)
    print(f"trained in {seconds:.0f} s", flush=True)
    cost = {"train_seconds": seconds, "steps": teacher.trained_steps, "model": args.model}
    cost["peak_rss_mb"] = round(common.peak_rss_mb(), 1)
    save_teacher(teacher, output, cost, args.cross_encoder)
    eval_pairs = 40 if args.smoke else 0
    dev = dev_pairs(eval_pairs)
    if args.cross_encoder:
        print(f"STS-B dev Spearman: {cross_encoder_dev(teacher, dev):.2f}", flush=True)
        print(f"wrote {output}")
        return 0
    print(f"STS-B dev Spearman: {dev_spearman(teacher, dev):.2f}", flush=True)
    if args.test:
        scores = quality.evaluate(teacher, quality.build_evaluator(eval_pairs))
        print("test: " + ", ".join(f"{k} {v:.2f}" for k, v in scores.items()), flush=True)
    print(f"wrote {output}")
    return 0


def check_files(args: argparse.Namespace) -> Path:
    """``--output`` (a new folder, its parent writable; not in, on or around an input) and
    what the training reads (the data, ``--model``), before any of it; the folder."""
    output = Path(args.output).expanduser()
    if output.exists():
        raise common.BenchmarkError(f"--output {output} exists: name a new folder")
    files = common.ScriptFiles("quality_teacher.py")
    files.model(args.model)
    files.folder("--output", output.parent)  # made before the training, not after
    files.writes("--output", output, kind="run")
    files.check()
    return output


def save_teacher(teacher: object, output: Path, cost: dict, cross_encoder: bool) -> None:
    """The teacher's folder with its cost (:data:`TEACHER_COST_FILE`), saved atomically:
    staged, the save marker written last (:func:`sts_core.saving.staged_contents`)."""
    from sts_core.command_files import write_text
    from sts_core.saving import staged_contents

    def write_cost(folder: Path) -> None:
        write_text(folder / TEACHER_COST_FILE, json.dumps(cost, indent=1) + "\n", record=False)

    if not cross_encoder:  # SentenceEncoder.save_pretrained stages its save itself
        teacher.save_pretrained(str(output), write_extra=write_cost)
        return
    with staged_contents(output) as folder:
        teacher.save(str(folder))
        write_cost(folder)


def train_cross_encoder(recipe: quality.Recipe, seed: int, data: object) -> object:
    """sentence-transformers' cross-encoder recipe (its STS example, Augmented SBERT's
    teacher): ``CrossEncoder(model, num_labels=1)``, ``BinaryCrossEntropyLoss`` on the 0–1
    scores, the budget's arguments (``trained_steps``: its optimizer steps)."""
    import tempfile

    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder import (
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
    )
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from transformers import set_seed

    set_seed(seed)
    model = CrossEncoder(recipe.model, num_labels=1, device="cpu")
    pairs = data.select_columns(["sentence1", "sentence2", "score"])
    with tempfile.TemporaryDirectory(prefix="sts-bench-teacher-") as output_dir:
        arguments = CrossEncoderTrainingArguments(
            **quality.training_arguments(recipe, seed, output_dir)
        )
        trainer = CrossEncoderTrainer(
            model=model, args=arguments, train_dataset=pairs, loss=BinaryCrossEntropyLoss(model)
        )
        trainer.train()
    model.trained_steps = trainer.state.global_step
    return model


def dev_pairs(eval_pairs: int) -> object:
    """The STS-B dev pairs, every k-th of them with ``eval_pairs`` (as sts-search's
    ``--eval-pairs``)."""
    from sts_core.data import load_named
    from sts_core.evaluation.sts import spread_sample

    return spread_sample(load_named("stsb", "dev", common.data_dir()), eval_pairs)


def dev_spearman(encoder: object, dev: object) -> float:
    """Spearman × 100 of cos(u, v) against the dev scores."""
    from scipy.stats import spearmanr

    from sts_core.training.distill import teacher_similarities  # cos of each pair

    cosines = teacher_similarities(encoder, dev, batch_size=64)
    return round(float(spearmanr(cosines, dev["score"]).statistic) * 100, 4)


def cross_encoder_dev(model: object, dev: object) -> float:
    """Spearman × 100 of ``CrossEncoder.predict`` against the dev scores."""
    from scipy.stats import spearmanr

    pairs = list(zip(dev["sentence1"], dev["sentence2"], strict=True))
    scores = model.predict(pairs, batch_size=64, show_progress_bar=False)
    return round(float(spearmanr(scores, dev["score"]).statistic) * 100, 4)


if __name__ == "__main__":
    common.main_guard(main)
