"""Command-line tools: ``sts-eval`` (the STS table of a model) and ``sts-data``.

Heavy libraries are imported after the arguments are parsed, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

POOLING_CHOICES = ("mean", "cls", "max", "first_last_avg", "last_token")
TASK_NAMES = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")


def _task_list(text: str) -> list[str]:
    tasks = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in TASK_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown task(s) {unknown}; choose from {','.join(TASK_NAMES)}"
        )
    return tasks


def add_encoder_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that build a SentenceEncoder (shared by the tools)."""
    parser.add_argument(
        "--model",
        required=True,
        help="model folder (a saved SentenceEncoder, a sentence-transformers or a "
        "transformers folder) or a hub id (online only)",
    )
    parser.add_argument(
        "--pooling",
        choices=POOLING_CHOICES,
        help="pooling mode (default: what the folder records, else mean)",
    )
    parser.add_argument(
        "--prompt", help="prompt template: prompteol, promptsth, promptsum, or a string with [X]"
    )
    parser.add_argument("--max-length", type=int, help="truncation length in tokens")
    parser.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="L2-normalise embeddings (cosine scores are unchanged)",
    )
    parser.add_argument(
        "--padding-side",
        choices=("left", "right"),
        help="tokenizer padding side (pooling is correct either way)",
    )
    parser.add_argument(
        "--dtype", default=None, help="float32 (default), bfloat16, float16 or auto"
    )
    parser.add_argument(
        "--device", default=None, help="cpu, cuda, cuda:1 … (default: cuda if available)"
    )


def make_eval_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sts-eval",
        description="Evaluate a sentence-embedding model on the seven STS tasks "
        "(STS12–16, STS-B, SICK-R) and print the table.",
    )
    add_encoder_arguments(parser)
    parser.add_argument(
        "--data-dir", default=None, help="benchmark data folder (default: $STS_DATA_DIR)"
    )
    parser.add_argument(
        "--tasks",
        type=_task_list,
        default=list(TASK_NAMES),
        help="comma-separated subset of " + ",".join(TASK_NAMES),
    )
    parser.add_argument(
        "--protocol",
        choices=("senteval", "mteb"),
        default="senteval",
        help="senteval: the papers' protocol (all/mean/wmean); mteb: as MTEB scores it",
    )
    parser.add_argument(
        "--variant",
        choices=("senteval", "raw"),
        default=None,
        help="data variant: SentEval-tokenized files or the raw releases "
        "(default: senteval for the senteval protocol, raw for mteb)",
    )
    parser.add_argument(
        "--pairs",
        action="append",
        default=[],
        metavar="NAME:SPLIT|PATH",
        help="also score other labelled pair sets (e.g. stsb-zh:test, mrpc:test, or a file): "
        "Spearman/Pearson of cosine similarity against their labels; repeatable",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--output",
        default=None,
        help="write <output>.json and <output>.md (path with or without suffix)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def load_encoder(args: argparse.Namespace):
    """Build the SentenceEncoder the encoder options describe, on the chosen device."""
    import torch

    from sts_core.encoder import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(
        args.model,
        pooling=args.pooling,
        prompt=args.prompt,
        max_length=args.max_length,
        normalize=args.normalize,
        padding_side=args.padding_side,
        dtype=args.dtype,
    )
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return encoder.to(device).eval()


def eval_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sts-eval``."""
    args = make_eval_parser().parse_args(argv)
    from sts_core.evaluation.sts import STSEvaluator

    start = time.perf_counter()
    try:
        evaluator = STSEvaluator(
            data_dir=args.data_dir,
            tasks=args.tasks,
            protocol=args.protocol,
            variant=args.variant,
            batch_size=args.batch_size,
            show_progress_bar=not args.quiet,
        )
        encoder = load_encoder(args)
    except (OSError, ValueError) as error:
        print(f"sts-eval: error: {error}", file=sys.stderr)
        return 2
    report = evaluator.evaluate(encoder, model_name=str(args.model))
    try:
        extra = _score_pair_sets(encoder, args)
    except (OSError, ValueError) as error:
        print(f"sts-eval: error: {error}", file=sys.stderr)
        return 2
    report.seconds = time.perf_counter() - start
    print(report.to_text())
    for reference, scores in extra.items():
        print(reference, ", ".join(f"{k} {v:.2f}" for k, v in scores.items()))
    print(f"wall time {report.seconds:.1f} s (loading data and model included)")
    if args.output:
        json_path, md_path = report.save(args.output)
        if extra:
            content = json.loads(json_path.read_text(encoding="utf-8"))
            content["pairs"] = extra
            json_path.write_text(json.dumps(content, indent=2), encoding="utf-8")
        print(f"wrote {json_path} and {md_path}")
    return 0


def _score_pair_sets(encoder, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Spearman/Pearson of cosine similarity on each ``--pairs`` set."""
    from sts_core.evaluation.sts import PairSimilarityEvaluator
    from sts_core.training.config import DataArguments
    from sts_core.training.data import load_reference

    data_args = DataArguments(data_dir=args.data_dir, data_variant=args.variant or "senteval")
    scores = {}
    for reference in args.pairs:
        _, dataset = load_reference(reference, "test", data_args)
        name = reference.replace(":", "_").replace("-", "_")
        scores[reference] = PairSimilarityEvaluator(dataset, name, args.batch_size)(encoder)
    return scores


def make_data_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sts-data", description="Inspect the benchmark data.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the named datasets, their splits and paths")
    filt = commands.add_parser(
        "filter",
        help="STS-B train + SICK train (rescaled to 0–5), minus every pair of the seven test sets "
        "(regression paper, Appendix A); prints the counts",
    )
    filt.add_argument("--variant", choices=("senteval", "raw"), default="senteval")
    filt.add_argument("--output", help="write the kept pairs as JSON lines")
    for sub in commands.choices.values():
        sub.add_argument(
            "--data-dir", default=None, help="benchmark data folder (default: $STS_DATA_DIR)"
        )
    return parser


def data_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sts-data``."""
    args = make_data_parser().parse_args(argv)
    from sts_core import data

    try:
        if args.command == "list":
            for spec in data.list_datasets():
                print(f"{spec.name:14s} splits={','.join(spec.splits):22s} {spec.description}")
            return 0
        kept, report = data.load_filtered_stsb_sick(data_dir=args.data_dir, variant=args.variant)
    except (OSError, ValueError) as error:
        print(f"sts-data: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=2))
    if args.output:
        kept.to_json(args.output, force_ascii=False)
        print(f"wrote {len(kept)} pairs to {args.output}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(eval_main())
