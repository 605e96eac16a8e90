"""Matryoshka embeddings: trained with and without, scored at several widths, beside the peer.

Four rows on ``quality.py``'s data, model and budget (all-MiniLM-L6-v2, the filtered STS-B
+ SICK-R training pairs, batch 16, learning rate 2e-5, one epoch, mean pooling):

- ``ours-cosent``: ``sts-cosent``'s CoSENT row;
- ``ours-cosent-matryoshka``: the same with ``matryoshka_dims`` (default 384 256 128 64,
  weights 1), the core's Matryoshka wrapper;
- ``st-cosent``: sentence-transformers' ``CoSENTLoss``;
- ``st-cosent-matryoshka``: ``MatryoshkaLoss(model, CoSENTLoss(model), matryoshka_dims)``.

Each trained model is scored on the seven STS test tasks (SentEval protocol, Spearman ×
100, 'all') at every ``--score-dims`` width: the embeddings of the full width are computed
once per model and truncated to the first D dimensions (what ``sts-eval --truncate-dim D``
scores; the cosine renormalises). Mean ± sd over seeds.

Commands (from the repository root; STS_DATA_DIR and STS_MODELS_DIR set)::

    uv run python benchmarks/matryoshka.py                 # full: 1 epoch, seeds 0 1 2
    uv run python benchmarks/matryoshka.py --quick         # 100 steps, 1 seed, 300 test pairs
    uv run python benchmarks/matryoshka.py --smoke --output-dir /tmp/bench   # CI

Results: ``benchmarks/results/matryoshka[_quick].{md,json}``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import _common as common
import numpy as np
import quality

ROWS = {
    "ours-cosent": "ours: CoSENT",
    "ours-cosent-matryoshka": "ours: CoSENT + matryoshka_dims",
    "st-cosent": "sentence-transformers CoSENTLoss",
    "st-cosent-matryoshka": "sentence-transformers MatryoshkaLoss(CoSENTLoss)",
}
MODES = {
    "full": {"max_steps": -1, "seeds": [0, 1, 2], "eval_pairs": 0},
    "quick": {"max_steps": 100, "seeds": [0], "eval_pairs": 300},
    "smoke": {"max_steps": 2, "seeds": [0], "eval_pairs": 40, "train_pairs_cap": 64},
}


def trainer_of(row: str, dims: list[int]) -> Any:
    """``train(recipe, seed, data) -> encoder`` of a row."""
    from sts_core.training.method_registry import quality_rows

    if row == "ours-cosent":
        return quality.train_ours(*quality_rows()["ours-cosent"])
    if row == "ours-cosent-matryoshka":
        return quality.train_ours(*quality_rows()["ours-cosent"], {"matryoshka_dims": dims})
    if row == "st-cosent":
        return quality.train_peer("CoSENTLoss")
    return lambda recipe, seed, data: train_peer_matryoshka(recipe, seed, data, dims)


def train_peer_matryoshka(recipe: quality.Recipe, seed: int, data: Any, dims: list[int]) -> Any:
    """sentence-transformers' ``MatryoshkaLoss`` over its ``CoSENTLoss``, as its docs wire it."""
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss, MatryoshkaLoss
    from transformers import set_seed

    set_seed(seed)
    model = quality.load_peer(recipe)
    loss = MatryoshkaLoss(model, CoSENTLoss(model), matryoshka_dims=dims)
    return quality.run_peer_trainer(model, loss, data, recipe, seed)


class TruncatedEmbeddings:
    """The evaluator's ``sentences → vectors`` at a width: each sentence encoded once at the
    full width (cached), the first ``width`` dimensions returned."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self.cache: dict[str, np.ndarray] = {}
        self.width: int | None = None

    def __call__(self, sentences: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(s for s in sentences if s not in self.cache))
        if missing:
            vectors = self.encoder.encode(missing, batch_size=64, show_progress_bar=False)
            self.cache.update(zip(missing, np.asarray(vectors, dtype=np.float32), strict=True))
        stacked = np.stack([self.cache[s] for s in sentences])
        return stacked if self.width is None else stacked[:, : self.width]


def score_at_widths(encoder: Any, evaluator: Any, widths: list[int]) -> dict[str, dict]:
    """The seven tasks' scores at each width (key: the width as text)."""
    embeddings = TruncatedEmbeddings(encoder)
    scores = {}
    for width in widths:
        embeddings.width = width
        scores[str(width)] = quality.evaluate(embeddings, evaluator)
    return scores


def run(args: Any) -> dict[str, Any]:
    data, unit_data = quality.load_training_data()
    if args.train_pairs_cap:
        cap = range(args.train_pairs_cap)
        data, unit_data = data.select(cap), unit_data.select(cap)
    evaluator = quality.build_evaluator(args.eval_pairs)
    recipe = quality.Recipe.mean_pooled(
        str(common.model_path(args.model)), args.learning_rate, 16, 1.0, args.max_steps
    )
    results: dict[str, Any] = {}
    for row in args.rows:
        train = trainer_of(row, args.dims)
        # the scores each side's plain row trains on (CoSENT ranks: the scale is unused)
        unit = quality.METHODS[row.removesuffix("-matryoshka")].unit_labels
        for seed in args.seeds:
            print(f"  {row} seed {seed} …", flush=True)
            start = time.perf_counter()
            encoder = train(recipe, seed, unit_data if unit else data)
            seconds = round(time.perf_counter() - start, 1)
            scores = score_at_widths(encoder, evaluator, args.score_dims)
            saved = getattr(encoder, "matryoshka_dims", None)
            results.setdefault(row, {})[str(seed)] = {
                "scores": scores,
                "train_seconds": seconds,
                "steps": getattr(encoder, "trained_steps", None),
                "saved_matryoshka_dims": saved,
            }
            line = ", ".join(f"{w}: {s['avg']:.2f}" for w, s in scores.items())
            print(f"    avg by width: {line} (train {seconds:.0f} s)", flush=True)
    return results


def summary(results: dict[str, Any], widths: list[int]) -> dict[str, dict[str, list[float]]]:
    """Per row and width, [mean, sd] of the seven-task average over seeds."""
    table = {}
    for row, seeds in results.items():
        table[row] = {
            str(w): list(common.mean_sd([s["scores"][str(w)]["avg"] for s in seeds.values()]))
            for w in widths
        }
    return table


def report_markdown(spec: dict[str, Any], table: dict[str, Any], info: dict[str, Any]) -> str:
    widths = spec["score_dims"]
    header = ["row", *(f"{w} dims" for w in widths)]
    rows = [
        [ROWS[row], *(f"{m:.2f} ± {sd:.2f}" for m, sd in (table[row][str(w)] for w in widths))]
        for row in table
    ]
    return "\n\n".join(
        [
            f"# Matryoshka embeddings ({spec['mode']})",
            f"`uv run python benchmarks/matryoshka.py{spec['flags']}` — "
            f"{spec['model']}, seeds {spec['seeds']}, max_steps {spec['max_steps']} "
            f"(-1: one epoch), batch 16, lr {spec['learning_rate']}, training dims "
            f"{spec['dims']}, test pairs per task {spec['eval_pairs'] or 'all'}.",
            "Seven-task average (Spearman × 100, SentEval 'all'), mean ± sd over seeds, at "
            "each width (the first D dimensions of the same embeddings).",
            common.markdown_table(header, rows),
            common.machine_markdown(info),
        ]
    )


def check_widths(args: Any) -> None:
    """``--dims`` and ``--score-dims`` no wider than the model's embeddings (its config's
    ``hidden_size``: mean pooling), before any data loads (BenchmarkError)."""
    import json

    config = common.model_path(args.model) / "config.json"
    try:
        width = json.loads(config.read_text(encoding="utf-8")).get("hidden_size")
    except (OSError, ValueError, AttributeError):
        width = None
    if not isinstance(width, int):
        return  # a config without it: the training names the problem
    for flag, dims in (("--dims", args.dims), ("--score-dims", args.score_dims)):
        wider = [dim for dim in dims if dim > width]
        if wider:
            raise common.BenchmarkError(
                f"{flag} {wider[0]}: wider than the embeddings of {args.model} ({width} "
                f"dimensions): give widths from 1 to {width}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = common.benchmark_parser(
        __doc__, quick="100 steps, one seed, 300 test pairs a task", smoke="2 steps (CI)"
    )
    common.add_model_argument(parser)
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--dims", type=common.COUNT, nargs="+", default=[384, 256, 128, 64])
    parser.add_argument("--score-dims", type=common.COUNT, nargs="+", default=[384, 128, 64])
    parser.add_argument("--learning-rate", type=common.POSITIVE_NUMBER, default=2e-5)
    parser.add_argument("--seeds", type=common.NON_NEGATIVE_INT, nargs="+", default=None)
    parser.add_argument("--max-steps", type=common.COUNT, default=None)
    parser.add_argument("--eval-pairs", type=common.NON_NEGATIVE_INT, default=None)
    parser.add_argument("--train-pairs-cap", type=common.NON_NEGATIVE_INT, default=None)
    parser.add_argument("--threads", type=common.COUNT, default=None)
    parser.add_argument("--output-dir", default=None)
    args = common.apply_mode(parser.parse_args(argv), MODES)
    check_widths(args)
    files, stem = common.result_files("matryoshka.py", "matryoshka", args, models=[args.model])
    files.check()
    if args.threads:
        common.set_threads(args.threads)
    spec = {
        "mode": args.mode,
        "flags": "".join(f" {a}" for a in (sys.argv[1:] if argv is None else argv)),
        "model": args.model,
        "seeds": args.seeds,
        "max_steps": args.max_steps,
        "eval_pairs": args.eval_pairs,
        "learning_rate": args.learning_rate,
        "dims": args.dims,
        "score_dims": args.score_dims,
    }
    info = common.machine_info()
    results = run(args)
    table = summary(results, args.score_dims)
    common.write_json(stem, {"spec": spec, "machine": info, "summary": table, "runs": results})
    path = common.write_markdown(stem, report_markdown(spec, table, info))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    common.main_guard(main)
