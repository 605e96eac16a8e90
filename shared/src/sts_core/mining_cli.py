"""``sts-mine``: hard negatives for a table of (anchor, positive) pairs
(:mod:`sts_core.mining`), written as a table ``train_datasets`` reads (anchor, positive,
negative) with a report beside it.

Every input is checked before the model loads: the settings, the output (never an input,
never a file sts-core did not write; one it wrote only with ``--overwrite``), the device
and the pairs; a problem is one line on
stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sts_core.cli import add_encoder_arguments, check_device, fail, load_encoder
from sts_core.cli import positive_int as _positive_int
from sts_core.command_files import CommandFiles, on_interrupt, write_json
from sts_core.mining import (
    SAMPLING,
    SCORE_COLUMNS,
    MiningSettings,
    SearchSettings,
    mine,
    positive_rows,
)
from sts_core.options import ListOptionsParser

if TYPE_CHECKING:
    from datasets import Dataset


def make_parser() -> argparse.ArgumentParser:
    parser = ListOptionsParser(
        prog="sts-mine",
        description="Mine hard negatives for (anchor, positive) pairs with a sentence "
        "encoder and write (anchor, positive, negative) triplets: the selection of "
        "sentence-transformers' util.mine_hard_negatives (its parameter names, kebab-cased), "
        "memory bounded.",
    )
    add_encoder_arguments(parser)
    parser.add_argument(
        "--pairs",
        required=True,
        metavar="NAME:SPLIT|PATH",
        help="the pairs: a registry set (e.g. snli-entailment:train), a .csv/.tsv/.json/"
        ".jsonl/.parquet file with a header, a save_to_disk folder or a hub id; the first "
        "text column is the anchor, the second its positive",
    )
    parser.add_argument(
        "--columns",
        metavar="JSON",
        default=None,
        help="the table's columns, project column: table column, e.g. "
        '\'{"sentence1": "question", "sentence2": "answer"}\'',
    )
    parser.add_argument(
        "--corpus",
        metavar="PATH",
        default=None,
        help="a text file of more candidate negatives, one per line (besides the positives)",
    )
    parser.add_argument("--output", required=True, help="the triplets: .csv, .jsonl or .parquet")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace triplets (and their report) written by an earlier sts-mine (a file "
        "sts-core did not write is never replaced)",
    )
    parser.add_argument(
        "--data-dir", default=None, help="benchmark data folder (default: $STS_DATA_DIR)"
    )
    parser.add_argument("--num-negatives", type=_positive_int, default=3)
    parser.add_argument("--range-min", type=int, default=0, help="skip the N best candidates")
    parser.add_argument(
        "--range-max", type=int, default=None, help="consider the best N candidates only"
    )
    parser.add_argument("--max-score", type=float, default=None)
    parser.add_argument("--min-score", type=float, default=None)
    parser.add_argument(
        "--absolute-margin",
        type=float,
        default=None,
        help="keep a negative only if its cosine + M ≤ the anchor's lowest positive cosine",
    )
    parser.add_argument(
        "--relative-margin",
        type=float,
        default=None,
        help="keep a negative only if its cosine ≤ p − |p|·R (p: the lowest positive cosine)",
    )
    parser.add_argument(
        "--positive-threshold",
        type=float,
        default=None,
        metavar="T",
        help="with a scored table (a score or label column): only the pairs scored at or "
        "above T are positives, the others are left out and counted (default: the table's "
        "highest score, e.g. the 1s of 0/1 labels, entailment of NLI class names)",
    )
    parser.add_argument(
        "--sampling-strategy", "--sampling", choices=SAMPLING, default="top", dest="sampling"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="for --sampling-strategy random: the draws of sentence-transformers' after "
        "random.seed(SEED) (default 0)",
    )
    parser.add_argument("--batch-size", type=_positive_int, default=32)
    parser.add_argument(
        "--faiss-batch-size",
        type=_positive_int,
        default=16384,
        help="at most N anchors per search chunk (default 16384; --memory-mb may make it fewer)",
    )
    parser.add_argument(
        "--memory-mb",
        type=float,
        default=256,
        help="memory for the search's score blocks (default 256 MiB)",
    )
    parser.add_argument(
        "--use-faiss",
        "--faiss",
        action=argparse.BooleanOptionalAction,
        default=False,
        dest="faiss",
        help="search with faiss's exact IndexFlatIP (default: numpy)",
    )
    parser.add_argument(
        "--output-scores",
        "--scores",
        action="store_true",
        dest="scores",
        help="add positive_score and negative_score columns (the cosines)",
    )
    return parser


def mining_files(args: argparse.Namespace) -> tuple[CommandFiles, Path]:
    """What ``sts-mine`` reads (the model, the pairs, the corpus, the data folder for a
    registry set) and writes (the triplets, of a known suffix, and the report beside them)."""
    from sts_core.data.references import reference_path
    from sts_core.data.table_output import check_table_suffix

    target = Path(args.output).expanduser()
    check_table_suffix(target)
    files = CommandFiles("sts-mine", "--overwrite", args.overwrite)
    files.reads("--model", args.model)
    files.reads("--base-model", getattr(args, "base_model", None))
    files.reads("--pairs", reference_path(args.pairs, "train", args.data_dir))
    files.reads("--corpus", args.corpus)
    files.writes("--output", target)
    files.writes("--output's report", report_path(target))
    return files, target


def report_path(output: Path) -> Path:
    return output.with_name(output.name + ".report.json")


def read_pairs(args: argparse.Namespace) -> Dataset:
    """The ``--pairs`` table under ``--columns``: its score only from a column named score
    or label or mapped (a column of numbers not named is refused)."""
    from sts_core.data import load_reference, parse_columns_option
    from sts_core.mining import pairs_reading

    columns = parse_columns_option(args.columns, "--columns")
    reading = pairs_reading("--columns")
    return load_reference(args.pairs, "train", args.data_dir, columns=columns, reading=reading)[1]


def score_columns(triplets: Dataset) -> Dataset:
    """The ``scores`` column ([positive, negative] cosines) as two columns a table holds:
    ``positive_score`` and ``negative_score``."""
    if "scores" not in triplets.column_names:
        return triplets
    scores = triplets["scores"]
    triplets = triplets.remove_columns("scores")
    for position, name in enumerate(SCORE_COLUMNS):
        triplets = triplets.add_column(name, [pair[position] for pair in scores])
    return triplets


def read_corpus(path: str | None) -> list[str]:
    """The extra candidates, one per line (blank lines skipped, counted)."""
    if path is None:
        return []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise ValueError(f"--corpus {path}: no text in it")
    return texts


@on_interrupt("sts-mine")
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sts-mine``."""
    args = make_parser().parse_args(argv)
    try:
        settings = MiningSettings(
            num_negatives=args.num_negatives,
            range_min=args.range_min,
            range_max=args.range_max,
            max_score=args.max_score,
            min_score=args.min_score,
            absolute_margin=args.absolute_margin,
            relative_margin=args.relative_margin,
            sampling_strategy=args.sampling,
            seed=args.seed,
            positive_threshold=args.positive_threshold,
        )
        search_settings = SearchSettings(
            args.batch_size, args.faiss_batch_size, args.memory_mb, args.faiss
        )
        files, output = mining_files(args)
        files.check()
        check_device(args.device)
        pairs = read_pairs(args)
        positive_rows(pairs, settings.positive_threshold)  # checked before the model loads
        corpus = read_corpus(args.corpus)
        encoder = load_encoder(args, "sts-mine")
        triplets, report = mine(
            pairs,
            encoder,
            settings,
            corpus=corpus,
            search_settings=search_settings,
            output_scores=args.scores,
        )
        triplets = score_columns(triplets)
        from sts_core.data.table_output import write_table

        write_table(triplets, output)
        summary = {"pairs": args.pairs, "model": args.model, **report.as_dict()}
        write_json(report_path(output), summary)
    except (OSError, ValueError, ImportError) as error:
        return fail("sts-mine", error)
    for line in report.lines():
        print(line)
    print(f"wrote {output} and {report_path(output)}", file=sys.stdout)
    return 0
