"""SIFTER-LSTM on SST-2 (§4, §5.3–5.5): the word set, the data, one training run per seed,
and the command ``sts-sifter-lstm`` that trains SIFTER-LSTM and the plain LSTM with the same
settings over several seeds and reports test accuracy as mean ± sd.

The paper's settings (§5.4) are the defaults: WordPiece embeddings from a BERT model's
input embeddings (768-d in the paper; any local model with a WordPiece vocabulary: say
which), hidden 384, dropout 0.2, Adam with lr 1e-5 and an L2 penalty of 1e-7 (Adam's
``weight_decay``), batch 32, the dev set every 50 steps with the best checkpoint kept, then
the test set. The number of epochs is not given in the paper (``--epochs``).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from sts_core.cli import fail, positive_int
from sts_core.command_files import CommandFiles, write_json, write_text
from sts_core.options import ListOptionsParser, check_number
from sts_sifter.lstm import SentimentLSTM

PROG = "sts-sifter-lstm"

logger = logging.getLogger(__name__)

#: named word lists under the data folder's lexicon/ (README of the benchmark data)
LEXICONS = {
    "hu-liu": ("hu-liu/positive-words.txt", "hu-liu/negative-words.txt"),
    "vader": ("vader/vader_positive_words.txt", "vader/vader_negative_words.txt"),
}


def load_word_set(spec: str, data_dir: str | Path | None = None) -> frozenset[str]:
    """The word set X of eq. 4, lower-cased: ``hu-liu`` or ``vader`` (the word lists under
    ``<data>/lexicon``), ``vader-package`` (the ``vaderSentiment`` package's lexicon, its
    alphabetic entries), or files with one word a line (comma-separated; lines starting
    with ``;`` are comments, as in Hu & Liu's files)."""
    if spec == "vader-package":
        analyzer = _vader_analyzer()
        return frozenset(w.lower() for w in analyzer().lexicon if w.isalpha())
    if spec in LEXICONS:
        from sts_core.data import resolve_data_dir

        paths = [resolve_data_dir(data_dir) / "lexicon" / name for name in LEXICONS[spec]]
    else:
        paths = [Path(p) for p in spec.split(",")]
    words: set[str] = set()
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as error:
            raise OSError(f"lexicon {spec!r}: cannot read {path} ({error})") from error
        words.update(line.strip().lower() for line in lines if line.strip() and line[0] != ";")
    if not words:
        raise ValueError(f"lexicon {spec!r}: no words in {', '.join(map(str, paths))}")
    return frozenset(words)


def _vader_analyzer() -> type:
    """The ``vaderSentiment`` package's analyser class, or an ImportError saying what to
    install (the package is optional)."""
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ImportError:
        raise ImportError(
            "lexicon 'vader-package' needs the vaderSentiment package, which is not "
            "installed: pip install vaderSentiment (or use --lexicon vader, the word lists "
            "of the data folder)"
        ) from None
    return SentimentIntensityAnalyzer


@dataclass
class Encoded:
    """Word pieces of sentences and, per piece, whether its word is in the word set."""

    input_ids: list[list[int]]
    bypass: list[list[bool]]
    labels: list[int]

    def __len__(self) -> int:
        return len(self.labels)


def encode(
    sentences: Sequence[str],
    labels: Sequence[int],
    tokenizer: Any,
    words: frozenset[str],
    max_length: int = 64,
) -> Encoded:
    """WordPiece ids without special tokens; every piece of a listed word is flagged. A
    sentence with no piece is an error naming it."""
    split = [sentence.split() for sentence in sentences]
    batch = tokenizer(split, is_split_into_words=True, add_special_tokens=False)
    ids, flags = [], []
    for row, pieces in enumerate(batch["input_ids"]):
        word_ids = batch.word_ids(row)
        if not pieces:
            raise ValueError(f"sentence {row} has no word piece: {sentences[row]!r}")
        ids.append(pieces[:max_length])
        flags.append([split[row][w].lower() in words for w in word_ids][:max_length])
    return Encoded(ids, flags, [int(label) for label in labels])


def batches(data: Encoded, size: int, order: Sequence[int]) -> Iterable[dict[str, torch.Tensor]]:
    """Right-padded tensors of ``size`` rows at a time, in ``order``."""
    for start in range(0, len(order), size):
        rows = order[start : start + size]
        lengths = torch.tensor([len(data.input_ids[r]) for r in rows])
        width = int(lengths.max())
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        bypass = torch.zeros(len(rows), width, dtype=torch.bool)
        for k, r in enumerate(rows):
            ids[k, : lengths[k]] = torch.tensor(data.input_ids[r])
            bypass[k, : lengths[k]] = torch.tensor(data.bypass[r])
        labels = torch.tensor([data.labels[r] for r in rows])
        yield {"input_ids": ids, "lengths": lengths, "bypass": bypass, "labels": labels}


def accuracy(model: nn.Module, data: Encoded, batch_size: int = 256) -> float:
    model.eval()
    correct = 0
    with torch.inference_mode():
        for batch in batches(data, batch_size, range(len(data))):
            logits = model(batch["input_ids"], batch["lengths"], batch["bypass"])
            correct += int((logits.argmax(-1) == batch["labels"]).sum())
    model.train()
    return 100.0 * correct / len(data)


@dataclass
class LstmSettings:
    """One run's settings (the paper's, §5.4, by default)."""

    hidden_size: int = 384
    dropout: float = 0.2
    learning_rate: float = 1e-5
    l2: float = 1e-7
    batch_size: int = 32
    epochs: float = 1.0
    eval_steps: int = 50
    max_length: int = 64


@dataclass
class RunResult:
    seed: int
    sifter: bool
    best_dev: float
    best_step: int
    test: float
    steps: int
    seconds: float
    dev_curve: list[tuple[int, float]] = field(default_factory=list)


def train_one(
    embeddings: torch.Tensor,
    data: dict[str, Encoded],
    settings: LstmSettings,
    seed: int,
    sifter: bool,
) -> RunResult:
    """Train on ``data["train"]``, select on ``data["dev"]`` every ``eval_steps`` steps, score
    the selected state on ``data["test"]``."""
    torch.manual_seed(seed)
    model = SentimentLSTM(
        embeddings, settings.hidden_size, 2, settings.dropout, sifter=sifter
    ).train()
    optimizer = torch.optim.Adam(
        model.parameters(), lr=settings.learning_rate, weight_decay=settings.l2
    )
    generator = torch.Generator().manual_seed(seed)
    per_epoch = math.ceil(len(data["train"]) / settings.batch_size)
    total = max(1, round(settings.epochs * per_epoch))
    best: tuple[float, int, dict[str, Any] | None] = (-1.0, 0, None)
    curve: list[tuple[int, float]] = []
    start, step = time.perf_counter(), 0
    while step < total:
        order = torch.randperm(len(data["train"]), generator=generator).tolist()
        for batch in batches(data["train"], settings.batch_size, order):
            logits = model(batch["input_ids"], batch["lengths"], batch["bypass"])
            loss = nn.functional.cross_entropy(logits, batch["labels"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % settings.eval_steps == 0 or step == total:
                dev = accuracy(model, data["dev"])
                curve.append((step, dev))
                if dev > best[0]:
                    best = (dev, step, {k: v.clone() for k, v in model.state_dict().items()})
            if step == total:
                break
    model.load_state_dict(best[2])  # type: ignore[arg-type]  # the first evaluation sets it
    test = accuracy(model, data["test"])
    seconds = time.perf_counter() - start
    return RunResult(seed, sifter, best[0], best[1], test, step, round(seconds, 1), curve)


def check_embeddings(model: str | Path) -> str:
    """The ``--embeddings`` location, checked before anything is loaded: a model folder
    (``config.json`` and tokenizer files) or a hub id the hub or its cache can serve.
    Raises an OSError naming the option and the path."""
    from sts_core.encoder import check_model_location

    try:
        return check_model_location(model)
    except OSError as error:
        raise OSError(f"--embeddings: {error}") from None


def load_embeddings(model: str | Path) -> tuple[torch.Tensor, Any]:
    """A model folder's input embeddings (the WordPiece vectors) and its tokenizer."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{model}: needs a fast tokenizer (word ids of the pieces)")
    weights = AutoModel.from_pretrained(model).get_input_embeddings().weight.detach().clone()
    return weights, tokenizer


def load_sst(variant: str, data_dir: str | Path | None, limit: int | None) -> dict[str, Any]:
    from sts_core.data import load_named

    splits = {s: load_named("sst2", s, data_dir, variant) for s in ("train", "dev", "test")}
    if limit:
        splits["train"] = splits["train"].select(range(min(limit, len(splits["train"]))))
    return splits


def summary(results: list[RunResult]) -> dict[str, Any]:
    tests = [r.test for r in results]
    sd = statistics.stdev(tests) if len(tests) > 1 else 0.0
    return {"test_mean": statistics.fmean(tests), "test_sd": sd, "tests": tests}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ListOptionsParser(
        prog="sts-sifter-lstm",
        description="SIFTER-LSTM against the plain LSTM on SST-2 (same settings, several "
        "seeds): test accuracy of the dev-selected checkpoint, mean ± sd.",
    )
    parser.add_argument("--embeddings", required=True, help="model folder (WordPiece vocab)")
    parser.add_argument("--lexicon", default="hu-liu", help="hu-liu, vader, vader-package, files")
    parser.add_argument("--data-dir", help="benchmark data folder (default $STS_DATA_DIR)")
    parser.add_argument(
        "--variant",
        default="senteval",
        choices=["senteval", "sentence-level"],
        help="senteval: GLUE SST-2 train (67,349 phrases, the paper's); sentence-level: "
        "6,920 whole sentences",
    )
    parser.add_argument("--models", nargs="+", default=["plain", "sifter"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-steps", type=int, default=50)
    parser.add_argument("--train-limit", type=positive_int, help="the first N training rows")
    parser.add_argument("--threads", type=positive_int)
    parser.add_argument("--output", help="write <output>.json and <output>.md")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace <output>.json and .md written by an earlier sts-sifter-lstm (a file "
        "sts-core did not write is never replaced)",
    )
    args = parser.parse_args(argv)
    unknown = set(args.models) - {"plain", "sifter"}
    if unknown or args.epochs <= 0 or args.batch_size < 1 or args.eval_steps < 1:
        parser.error("--models takes plain and sifter; epochs, batch and eval steps above 0")
    try:  # before any weights load (it was checked by the optimizer, after them)
        check_number("--learning-rate", args.learning_rate, 0, min_inclusive=False)
    except ValueError as error:
        parser.error(str(error))
    return args


def output_paths(output: str | None) -> tuple[Path, ...]:
    """``<output>.json`` and ``<output>.md``; none without ``--output``."""
    if not output:
        return ()
    return tuple(Path(f"{output}{suffix}").expanduser() for suffix in (".json", ".md"))


def lexicon_files(spec: str) -> list[str]:
    """The word-list files a ``--lexicon`` of files names (none for a named lexicon, whose
    files lie in the data folder)."""
    return [] if spec in LEXICONS or spec == "vader-package" else spec.split(",")


def command_files(args: argparse.Namespace) -> CommandFiles:
    """What ``sts-sifter-lstm`` reads (the embeddings' model, the data folder, word lists)
    and writes (``<output>.json`` and ``.md``), for :meth:`CommandFiles.check` before any
    work: an output never on or in an input, never over a file sts-core did not write, over
    one it wrote only with ``--overwrite``; its folder is created."""
    files = CommandFiles(PROG, "--overwrite", args.overwrite)
    files.reads("--embeddings", args.embeddings)
    files.reads("--data-dir", args.data_dir or os.environ.get("STS_DATA_DIR"))
    for path in lexicon_files(args.lexicon):
        files.reads("--lexicon", path)
    for output in output_paths(args.output):
        files.writes("--output", output)
    return files


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every input is read or checked (word set, embeddings location, SST) before the
    embeddings are loaded and the models trained."""
    words = load_word_set(args.lexicon, args.data_dir)
    location = check_embeddings(args.embeddings)
    splits = load_sst(args.variant, args.data_dir, args.train_limit)
    embeddings, tokenizer = load_embeddings(location)
    settings = LstmSettings(
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        epochs=args.epochs,
        eval_steps=args.eval_steps,
    )
    data = {
        name: encode(d["sentence"], d["label"], tokenizer, words, settings.max_length)
        for name, d in splits.items()
    }
    flagged = sum(map(sum, data["train"].bypass)) / sum(map(len, data["train"].bypass))
    report: dict[str, Any] = {
        "settings": {**vars(args), **asdict(settings)},
        "embeddings": {"model": str(args.embeddings), "dimension": int(embeddings.shape[1])},
        "word_set": {"lexicon": args.lexicon, "words": len(words), "pieces_flagged": flagged},
        "sizes": {name: len(d) for name, d in data.items()},
        "models": {},
    }
    for name in args.models:
        results = []
        for seed in args.seeds:
            result = train_one(embeddings, data, settings, seed, sifter=name == "sifter")
            print(
                f"{name} seed {seed}: dev {result.best_dev:.2f} (step {result.best_step}), "
                f"test {result.test:.2f}, {result.seconds:.0f} s",
                flush=True,
            )
            results.append(result)
        report["models"][name] = {"runs": [asdict(r) for r in results], **summary(results)}
    return report


def markdown(report: dict[str, Any]) -> str:
    settings = report["settings"]
    lines = [
        "# SIFTER-LSTM against the plain LSTM on SST-2",
        "",
        f"Embeddings {report['embeddings']['model']} ({report['embeddings']['dimension']}-d); "
        f"word set {report['word_set']['lexicon']} ({report['word_set']['words']} words, "
        f"{100 * report['word_set']['pieces_flagged']:.1f} % of training pieces); SST "
        f"{settings['variant']} {report['sizes']}; hidden {settings['hidden_size']}, dropout "
        f"{settings['dropout']}, Adam lr {settings['learning_rate']}, L2 {settings['l2']}, "
        f"batch {settings['batch_size']}, {settings['epochs']} epoch(s), dev every "
        f"{settings['eval_steps']} steps; seeds {settings['seeds']}.",
        "",
        "| model | test accuracy (mean ± sd) | per seed |",
        "| --- | --- | --- |",
    ]
    for name, result in report["models"].items():
        per_seed = ", ".join(f"{t:.2f}" for t in result["tests"])
        lines.append(
            f"| {name} | {result['test_mean']:.2f} ± {result['test_sd']:.2f} | {per_seed} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``sts-sifter-lstm``. The output files and every input are checked before any
    training; a problem is one line ``sts-sifter-lstm: error: …`` on stderr, exit status 2."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        command_files(args).check()
        report = run(args)
    except (OSError, ValueError, ImportError) as error:
        return fail(PROG, error)
    text = markdown(report)
    print(text)
    if args.output:
        json_path, md_path = output_paths(args.output)
        try:
            write_json(json_path, report)
            write_text(md_path, text)
        except (OSError, ValueError) as error:
            return fail(PROG, error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
