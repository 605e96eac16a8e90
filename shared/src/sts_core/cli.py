"""Command-line tools: ``sts-eval`` (the STS table of a model) and ``sts-data``.

Heavy libraries are imported after the arguments are parsed, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sts_core.command_files import (  # noqa: F401 - OutputPathError: re-exported
    CommandFiles,
    OutputPathError,
    check_writable_file,
    on_interrupt,
    write_json,
    write_text,
)
from sts_core.names import POOLING_MODES, STS_TASKS
from sts_core.options import ListOptionsParser

if TYPE_CHECKING:
    from sts_core.encoder.model import SentenceEncoder
    from sts_core.evaluation.sts import STSReport


class DeviceError(ValueError):
    """A ``--device`` this machine does not have; the message names it and what is available."""


def _task_list(text: str) -> list[str]:
    tasks = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not tasks:
        raise argparse.ArgumentTypeError(f"no task given; choose from {','.join(STS_TASKS)}")
    unknown = [t for t in tasks if t not in STS_TASKS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown task(s) {unknown}; choose from {','.join(STS_TASKS)}"
        )
    return list(dict.fromkeys(tasks))


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1 (argparse names the option in its error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer of at least 1, got {value}")
    return value


def available_devices() -> list[str]:
    """The devices this machine can run on: ``cpu``, ``cuda:N``, ``mps``, ``xpu:N``."""
    import torch

    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        devices += [f"xpu:{i}" for i in range(xpu.device_count())]
    return devices


def check_device(name: str | None = None) -> str:
    """The device to run on: ``name`` checked against this machine, or the default
    (``cuda`` when available, else ``cpu``) when ``name`` is empty.

    Raises :class:`DeviceError` (a ValueError) naming the device and the available ones
    for a string torch does not parse, an unknown device type, or a device this machine
    lacks (``cuda``/``cuda:N`` without CUDA or with N ≥ the number of GPUs).
    """
    import torch

    if name is None or not str(name).strip():
        return "cuda" if torch.cuda.is_available() else "cpu"
    text = str(name).strip()
    available = available_devices()

    def error(problem: str) -> DeviceError:
        return DeviceError(f"device {text!r} {problem}; available: {', '.join(available)}")

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError, TypeError):
        raise error("is not a device name") from None
    if device.type == "cpu":
        return text
    if device.type in ("cuda", "xpu"):
        backend = getattr(torch, device.type, None)
        count = backend.device_count() if backend is not None and backend.is_available() else 0
        kind = device.type.upper()
        if count == 0:
            raise error(f"is not available: {kind} is not available on this machine")
        if device.index is not None and device.index >= count:
            raise error(f"is not available: this machine has {count} {kind} device(s)")
        return text
    if device.type == "mps" and "mps" in available:
        return text
    if device.type == "mps":
        raise error("is not available on this machine")
    raise error(f"has an unsupported device type {device.type!r}")


def check_output_path(path: str | os.PathLike[str], option: str = "--output") -> Path:
    """Make sure a file can be written at ``path`` before any work is done
    (:func:`sts_core.command_files.check_writable_file`)."""
    return check_writable_file(path, option)


def _report_paths(output: str | os.PathLike[str]) -> tuple[Path, Path]:
    """The ``.json`` and ``.md`` files :meth:`STSReport.save` writes for ``output``."""
    base = Path(output).expanduser()
    base = base.with_suffix("") if base.suffix in (".json", ".md") else base
    return base.with_suffix(".json"), base.with_suffix(".md")


def fail(prog: str, error: BaseException) -> int:
    """Print ``<prog>: error: <message>`` as one line on stderr; return exit status 2."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    message = " ".join(lines) or type(error).__name__
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


def add_encoder_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that build a SentenceEncoder (shared by the tools)."""
    parser.add_argument(
        "--model",
        required=True,
        help="model folder (a saved SentenceEncoder, a sentence-transformers or a "
        "transformers folder) or a hub id (online only)",
    )
    parser.add_argument(
        "--base-model",
        metavar="PATH",
        default=None,
        help="the base model of a LoRA adapter --model folder, when the one its "
        "sts_encoder_config.json records has moved (default: the recorded one)",
    )
    parser.add_argument(
        "--pooling",
        choices=POOLING_MODES,
        help="pooling mode (default: what the folder records, else mean)",
    )
    parser.add_argument(
        "--prompt", help="prompt template: prompteol, promptsth, promptsum, or a string with [X]"
    )
    parser.add_argument(
        "--max-length", type=positive_int, help="truncation length in tokens (at least 1)"
    )
    parser.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="L2-normalise embeddings (cosine scores are unchanged)",
    )
    parser.add_argument(
        "--truncate-dim",
        type=positive_int,
        metavar="D",
        help="use the first D dimensions of each embedding (a Matryoshka model's smaller "
        "embedding; normalised again when the model normalises)",
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
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run the modelling code the model ships (Jina Embeddings v2, Nomic Embed)",
    )
    parser.add_argument(
        "--max-batch-tokens",
        type=positive_int,
        metavar="N",
        default=None,
        help="encode in batches of up to N tokens instead of --batch-size sentences (short "
        "sentences in large batches; at least one sentence a batch). Default: on a CUDA "
        "device --batch-size × 256 tokens, on a CPU --batch-size sentences",
    )


def make_eval_parser() -> argparse.ArgumentParser:
    parser = ListOptionsParser(
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
        default=None,
        help="comma-separated subset of " + ",".join(STS_TASKS) + " (default: all of them; "
        "with --pairs, none unless given)",
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
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME:SPLIT|PATH",
        help="score labelled pair sets (e.g. stsb-zh:test, mrpc:test, a .csv/.tsv/.json/"
        ".jsonl/.parquet file with a header, a save_to_disk folder or a hub id): "
        "Spearman/Pearson against their labels of the model's score_pairs (its pair_scorer "
        "head if it has one, else cosine similarity; printed with the scores); several "
        "after one flag (--pairs a.csv b.csv) or the flag repeated. "
        "Without --tasks only these are scored",
    )
    parser.add_argument(
        "--columns",
        metavar="JSON",
        default=None,
        help="the columns of the --pairs tables, project column: file column, e.g. "
        '\'{"sentence1": "text_a", "sentence2": "text_b", "score": "sim"}\' (default: '
        "two text columns and a score or label column, as sentence-transformers reads "
        "them; docs/data.md lists where the two differ)",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=64, help="encoding batch size (default 64)"
    )
    parser.add_argument(
        "--output",
        default=None,
        help="write <output>.json and <output>.md (path with or without suffix)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace <output>.json and .md written by an earlier sts-eval (a file sts-core "
        "did not write is never replaced)",
    )
    parser.add_argument(
        "--sentence-edit",
        default=None,
        choices=("none", "pcc-tuning"),
        help="edit the test sentences before encoding as a paper's evaluation script does: "
        "pcc-tuning (append '.' unless a sentence ends in . ? \" ', then \" → ' and a final "
        "? → .); default none",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def load_encoder(args: argparse.Namespace, prog: str = "sts-eval") -> SentenceEncoder:
    """Build the SentenceEncoder the encoder options describe, on the chosen device.

    The device is checked (:func:`check_device`) before the model is loaded, and
    ``--base-model`` against ``--model``. A LoRA adapter whose base model cannot be found
    raises :class:`~sts_core.encoder.LoRABaseModelError` naming ``--base-model`` (and
    ``prog``), not the Python argument.
    """
    device = check_device(args.device)

    from sts_core.encoder import LoRABaseModelError, SentenceEncoder

    base_model = getattr(args, "base_model", None)
    if base_model is not None:
        check_base_model_option(args.model)
    try:
        encoder = SentenceEncoder.from_pretrained(
            args.model,
            pooling=args.pooling,
            prompt=args.prompt,
            max_length=args.max_length,
            normalize=args.normalize,
            padding_side=args.padding_side,
            dtype=args.dtype,
            base_model=base_model,
            trust_remote_code=args.trust_remote_code,
        )
    except LoRABaseModelError as error:
        raise error.for_option(f"--base-model PATH to {prog}") from None
    set_truncate_dim(encoder, getattr(args, "truncate_dim", None), prog)
    # the token budget every encode() of the command batches by (the evaluators pass only
    # the batch size): None keeps the device's default
    encoder.max_batch_tokens = getattr(args, "max_batch_tokens", None)
    return encoder.to(device).eval()


def set_truncate_dim(encoder: Any, width: int | None, prog: str) -> None:
    """``--truncate-dim``: the width ``encode`` returns (ValueError beyond the model's); a
    warning when the folder records Matryoshka widths and this is not one of them."""
    if width is None:
        return
    if width > encoder.dimension:
        raise ValueError(
            f"--truncate-dim {width}: the model's embeddings have {encoder.dimension} dimensions"
        )
    trained = encoder.matryoshka_dims
    if trained and width not in trained:
        print(
            f"{prog}: warning: --truncate-dim {width}: the model was trained with "
            f"matryoshka_dims {trained}, not this width",
            file=sys.stderr,
        )
    encoder.truncate_dim = width


def check_base_model_option(model: str) -> None:
    """ValueError unless ``model`` is a LoRA adapter folder, the only kind of model that
    ``--base-model`` applies to (any other would load without it, the option unused)."""
    from sts_core.encoder import check_model_location, is_adapter_folder

    if not is_adapter_folder(check_model_location(model)):
        raise ValueError(
            f"--base-model: --model {model} is not a LoRA adapter folder "
            "(adapter_config.json without config.json), so it has no base model to replace; "
            "leave --base-model out"
        )


@on_interrupt("sts-eval")
def eval_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sts-eval``.

    Every input is checked before the model is loaded: the output location, the
    device, each task's data and each ``--pairs`` set; a problem is one line on
    stderr and exit status 2.
    """
    args = make_eval_parser().parse_args(argv)
    start = time.perf_counter()
    tasks = args.tasks if args.tasks is not None else [] if args.pairs else list(STS_TASKS)
    try:
        files = eval_files(args, tasks)
        files.check()
        args.input_identities = files.identities() if args.output else {}
        check_device(args.device)
        from sts_core.encoder.model_shape import check_model_max_length

        check_model_max_length(args.model, args.max_length, "--max-length", args.base_model)
        from sts_core.evaluation.sts import STSEvaluator

        evaluator = None
        if tasks:
            evaluator = STSEvaluator(
                data_dir=args.data_dir,
                tasks=tasks,
                protocol=args.protocol,
                variant=args.variant,
                batch_size=args.batch_size,
                show_progress_bar=not args.quiet,
                sentence_edit=args.sentence_edit,
            )
        pair_sets = _load_pair_sets(args)
        encoder = load_encoder(args)
        report = None if evaluator is None else evaluator.evaluate(encoder, str(args.model))
        extra = {reference: _pair_scores(score(encoder)) for reference, score in pair_sets.items()}
    except (OSError, ValueError) as error:
        return fail("sts-eval", error)
    seconds = time.perf_counter() - start
    if report is not None:
        report.seconds = seconds
        print(report.to_text())
    pairs_scorer = _pairs_scorer(encoder)
    for line in pair_lines(extra):
        print(line)
    if extra:
        from sts_core.evaluation.sts import describe_scorer

        print(f"--pairs scored by: {describe_scorer(pairs_scorer)}")
    print(f"wall time {seconds:.1f} s (loading data and model included)")
    if args.output:
        try:
            json_path, md_path = _save_results(args, report, extra, pairs_scorer, seconds)
        except OSError as error:
            return fail("sts-eval", error)
        print(f"wrote {json_path} and {md_path}")
    return 0


def eval_files(args: argparse.Namespace, tasks: Sequence[str]) -> CommandFiles:
    """What ``sts-eval`` reads (the model and its base, each ``--pairs`` table, the data
    folder when a task or a registry set is read) and writes (``<output>.json``, ``.md``)."""
    from sts_core.data.references import reference_path, registry_names, split_reference

    files = CommandFiles("sts-eval", "--overwrite", args.overwrite)
    files.reads("--model", args.model)
    files.reads("--base-model", getattr(args, "base_model", None))
    names = registry_names()
    registry = [ref for ref in args.pairs if split_reference(ref, "test")[0] in names]
    if tasks or registry:
        files.reads("--data-dir", args.data_dir or os.environ.get("STS_DATA_DIR"))
    for reference in args.pairs:
        files.reads(
            "--pairs", reference_path(reference, "test", args.data_dir, args.variant or "senteval")
        )
    for path in _report_paths(args.output) if args.output else ():
        files.writes("--output", path)
    return files


def _pair_scores(scores: dict[str, float]) -> dict[str, float]:
    """A PairEvaluator's ``{<name>_spearman, <name>_pearson}`` as ``{spearman, pearson}``."""
    return {key.rsplit("_", 1)[-1]: value for key, value in scores.items()}


def pair_lines(extra: dict[str, dict[str, float]]) -> list[str]:
    """One line a ``--pairs`` set: ``<reference>: spearman 81.02, pearson 87.10``."""
    return [
        f"{reference}: " + ", ".join(f"{metric} {value:.2f}" for metric, value in scores.items())
        for reference, scores in extra.items()
    ]


def _save_results(
    args: argparse.Namespace,
    report: STSReport | None,
    extra: dict[str, dict[str, float]],
    pairs_scorer: str,
    seconds: float,
) -> tuple[Path, Path]:
    """``<output>.json`` and ``.md``: the STS table (when tasks were scored) with the
    ``--pairs`` sets (``pairs``: reference → ``{spearman, pearson}``) and their scorer."""
    if report is not None:
        json_path, md_path = report.save(args.output)
        content = json.loads(json_path.read_text(encoding="utf-8"))
    else:
        json_path, md_path = _report_paths(args.output)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        content = {"model": str(args.model), "seconds": round(seconds, 2)}
        lines = [f"Model `{args.model}` (correlation with gold × 100)", ""]
        lines += ["| pair set | Spearman | Pearson |", "|---|---|---|"]
        lines += [
            f"| {reference} | {scores['spearman']:.2f} | {scores['pearson']:.2f} |"
            for reference, scores in extra.items()
        ]
        write_text(md_path, "\n".join(lines) + "\n")
    if extra:
        content["pairs"] = extra
        content["pairs_scorer"] = pairs_scorer
    content["inputs"] = getattr(args, "input_identities", {})
    write_json(json_path, content)
    return json_path, md_path


def _pairs_scorer(encoder: object) -> str:
    """What scores the ``--pairs`` sets (:func:`~sts_core.evaluation.cosine_scorer`, through
    the model's ``score_pairs``): ``head:<name>`` of its pair_scorer head, else ``cosine``."""
    from sts_core.evaluation.sts import COSINE_SCORER, pair_scorer_of

    head = pair_scorer_of(encoder)
    return f"head:{head}" if head else COSINE_SCORER


def _load_pair_sets(args: argparse.Namespace) -> dict:
    """``--pairs`` reference → its evaluator, each set loaded and checked (before any model);
    ``--columns`` applies to the sets that are not registry names."""
    from sts_core.data import load_reference, parse_columns_option, registry_names
    from sts_core.data.references import split_reference
    from sts_core.data.tables import scored_reading
    from sts_core.evaluation import PairEvaluator, cosine_scorer

    columns = parse_columns_option(args.columns, "--columns")
    names = registry_names()
    references = list(dict.fromkeys(args.pairs))
    tables = [ref for ref in references if split_reference(ref, "test")[0] not in names]
    if columns and not tables:
        raise ValueError("--columns names the columns of --pairs files, and none is given")
    evaluators = {}
    for reference in references:
        table = reference in tables
        _, dataset = load_reference(
            reference,
            "test",
            data_dir=args.data_dir,
            variant=args.variant or "senteval",
            sick_to_sts_scale=True,  # as training scores SICK (correlations are unchanged)
            columns=columns if table else None,
            reading=scored_reading("--columns"),
        )
        name = Path(reference).name if table else reference.replace(":", "_").replace("-", "_")
        evaluators[reference] = PairEvaluator(
            dataset, name, cosine_scorer, args.batch_size, source=reference
        )
    return evaluators


def make_data_parser() -> argparse.ArgumentParser:
    parser = ListOptionsParser(prog="sts-data", description="Inspect the benchmark data.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the named datasets, their splits and paths")
    filt = commands.add_parser(
        "filter",
        help="STS-B train + SICK train (rescaled to 0–5), minus every pair of the seven test sets "
        "(regression paper, Appendix A); prints the counts",
    )
    filt.add_argument("--variant", choices=("senteval", "raw"), default="senteval")
    filt.add_argument(
        "--output",
        help="write the kept pairs there, in the format its suffix says (.csv, .jsonl, .json: "
        "JSON lines, .parquet)",
    )
    filt.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an --output written by an earlier sts-data (a file sts-core did not "
        "write is never replaced)",
    )
    for sub in commands.choices.values():
        sub.add_argument(
            "--data-dir", default=None, help="benchmark data folder (default: $STS_DATA_DIR)"
        )
    return parser


@on_interrupt("sts-data")
def data_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sts-data``."""
    args = make_data_parser().parse_args(argv)
    from sts_core.data.table_output import check_table_suffix, write_table

    try:
        if args.command == "filter" and args.output:
            files = CommandFiles("sts-data filter", "--overwrite", args.overwrite)
            files.reads("--data-dir", args.data_dir or os.environ.get("STS_DATA_DIR"))
            files.writes("--output", args.output)
            files.check()
            check_table_suffix(Path(args.output).expanduser())
        from sts_core import data

        if args.command == "list":
            for spec in data.list_datasets():
                print(f"{spec.name:14s} splits={','.join(spec.splits):22s} {spec.description}")
            return 0
        kept, report = data.load_filtered_stsb_sick(data_dir=args.data_dir, variant=args.variant)
    except (OSError, ValueError) as error:
        return fail("sts-data", error)
    print(json.dumps(report.to_dict(), indent=2))
    if args.output:
        try:
            write_table(kept, Path(args.output).expanduser())
        except OSError as error:
            return fail("sts-data", error)
        print(f"wrote {len(kept)} pairs to {args.output}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(eval_main())
