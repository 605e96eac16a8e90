"""The unlabelled corpus SIFTER trains on: §5.4's cleaning, then the positives of every
sentence, computed once per corpus in parallel processes, shown with a progress bar,
cached on disk chunk by chunk (an interrupted run resumes where it stopped)."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sts_core.command_files import write_text
from sts_sifter.augment import Augmented, AugmentOptions, AugmentReport, augment
from sts_sifter.parsing import Parser, build_parser, check_parser_package

logger = logging.getLogger(__name__)
CACHE_FORMAT = 1
MIN_WORDS = 3
CHUNK_SIZE = 500  # sentences per cache file


@dataclass
class CorpusReport:
    """What §5.4's cleaning removed: ``short`` (fewer than three words),
    ``capitalised_end`` (the last word capitalised: likely a sentence cut at an
    abbreviation, "He married Smt.") and ``following`` (the sentence after such a one)."""

    read: int = 0
    kept: int = 0
    short: int = 0
    capitalised_end: int = 0
    following: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"kept {self.kept} of {self.read} sentences: removed {self.short} of fewer than "
            f"{MIN_WORDS} words, {self.capitalised_end} ending in a capitalised word and "
            f"the {self.following} sentences after them"
        )


#: which capitalised last words mark a sentence as cut (with the one after it)
CAPITALISED_RULES = ("any", "abbreviation", "off")
ABBREVIATION = re.compile(r"^[A-Z][a-z]{0,3}\.$")  # Smt. Dr. St. Mr. Jr.


def last_word_capitalised(sentence: str, rule: str = "any") -> bool:
    """``any``: the last word, stripped of closing punctuation, starts with a capital
    (§5.4 as written); ``abbreviation``: it is a short capitalised abbreviation ("Smt.",
    "Dr."), the cut the rule is after; ``off``: never."""
    words = sentence.split()
    if not words or rule == "off":
        return False
    if rule == "abbreviation":
        return bool(ABBREVIATION.match(words[-1]))
    last = words[-1].rstrip(".!?,;:\"')]")
    return last[:1].isupper()


def clean_corpus(
    sentences: Sequence[str], capitalised: str = "any"
) -> tuple[list[str], CorpusReport]:
    """§5.4: drop a sentence whose last word is capitalised (``capitalised``: see
    :func:`last_word_capitalised`) together with the sentence after it, then sentences of
    fewer than three words. Order is kept."""
    if capitalised not in CAPITALISED_RULES:
        raise ValueError(f"capitalised {capitalised!r}: choose {', '.join(CAPITALISED_RULES)}")
    report = CorpusReport(read=len(sentences))
    kept: list[str] = []
    skip_next = False
    for sentence in sentences:
        if skip_next:
            report.following += 1
            skip_next = False
            continue
        if last_word_capitalised(sentence, capitalised):
            report.capitalised_end += 1
            skip_next = True
            continue
        if len(sentence.split()) < MIN_WORDS:
            report.short += 1
            continue
        kept.append(sentence)
    report.kept = len(kept)
    logger.info("corpus cleaning (§5.4): %s", report)
    return kept, report


# ----------------------------------------------------------------------------- the cache
def cache_folder(
    cache_dir: str | os.PathLike, sentences: Sequence[str], parser: str, options: AugmentOptions
) -> Path:
    """One folder per (corpus, parser, options): their hash names it."""
    digest = hashlib.sha256()
    digest.update(json.dumps([CACHE_FORMAT, parser, asdict(options)]).encode())
    for sentence in sentences:
        digest.update(sentence.encode("utf-8") + b"\n")
    return Path(cache_dir) / digest.hexdigest()[:20]


def chunk_path(folder: Path, index: int) -> Path:
    return folder / f"chunk-{index:06d}.jsonl"


def cache_holds(
    sentences: Sequence[str],
    parser: str,
    options: AugmentOptions,
    cache_dir: str | os.PathLike,
    chunk_size: int = CHUNK_SIZE,
) -> bool:
    """Whether ``cache_dir`` has a finished chunk file for every chunk of ``sentences``
    (then :func:`augment_corpus` parses nothing, and needs no parser). Nothing is read or
    created; the chunks' contents are checked when they are used."""
    folder = cache_folder(cache_dir, sentences, parser, options)
    return all(chunk_path(folder, index).is_file() for index, _ in chunks(sentences, chunk_size))


def read_chunk(path: Path, texts: Sequence[str]) -> list[Augmented] | None:
    """A finished chunk's rows, or None when the file is absent or not this chunk's."""
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, ValueError):
        return None
    if [row.get("sentence") for row in rows] != list(texts):
        return None
    return [Augmented(**row) for row in rows]


def write_chunk(path: Path, items: Sequence[Augmented]) -> None:
    """Atomically (:func:`sts_core.command_files.write_text`: a temporary file synced and
    renamed into place): a chunk file is complete or absent. Not recorded in a ledger: the
    folder is the cache's own, named by the hash of the corpus and the parser's settings,
    and a chunk file there that does not hold its chunk is parsed and written again."""
    lines = "".join(json.dumps(item.to_dict(), ensure_ascii=False) + "\n" for item in items)
    write_text(path, lines, record=False)


# ----------------------------------------------------------------------------- the work
_WORKER: dict[str, Any] = {}


def _start_worker(parser: str, options: AugmentOptions) -> None:
    _WORKER["parser"] = build_parser(parser)
    _WORKER["options"] = options


def _augment_chunk(job: tuple[int, list[str]]) -> tuple[int, list[Augmented]]:
    index, texts = job
    return index, augment_texts(_WORKER["parser"], texts, _WORKER["options"])


def augment_texts(parser: Parser, texts: Sequence[str], options: AugmentOptions) -> list[Augmented]:
    return [augment(t, parse, options) for t, parse in zip(texts, parser.parse(texts), strict=True)]


def chunks(sentences: Sequence[str], size: int) -> Iterator[tuple[int, list[str]]]:
    for index, start in enumerate(range(0, len(sentences), size)):
        yield index, list(sentences[start : start + size])


def augment_corpus(
    sentences: Sequence[str],
    parser: str | Parser = "spacy",
    options: AugmentOptions | None = None,
    cache_dir: str | os.PathLike | None = None,
    workers: int = 1,
    chunk_size: int = CHUNK_SIZE,
    progress: bool = True,
) -> tuple[list[Augmented], AugmentReport]:
    """Y and Z for every sentence, in order, and the counts.

    Chunks of ``chunk_size`` sentences are parsed by ``workers`` processes (each loads
    the parser ``parser`` once; ``1``: in this process) and written to ``cache_dir`` as
    they finish: a second call, or one after an interruption, reads the finished chunks
    and parses only the rest. ``cache_dir`` None: nothing is cached. ``parser``: a name for
    :func:`~sts_sifter.parsing.build_parser`, or a parser object (then in this process).
    A parser whose package cannot be imported is
    :class:`~sts_sifter.parsing.ParserUnavailable` before any chunk is parsed, and only
    when some chunk is not in the cache.
    """
    from tqdm.auto import tqdm

    options = options or AugmentOptions()
    if workers < 1 or chunk_size < 1:
        raise ValueError(f"workers and chunk_size must be ≥ 1, got {workers}, {chunk_size}")
    name = parser if isinstance(parser, str) else parser.name
    folder = None if cache_dir is None else cache_folder(cache_dir, sentences, name, options)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    done: dict[int, list[Augmented]] = {}
    pending: list[tuple[int, list[str]]] = []
    for index, texts in chunks(sentences, chunk_size):
        cached = None if folder is None else read_chunk(chunk_path(folder, index), texts)
        if cached is None:
            pending.append((index, texts))
        else:
            done[index] = cached
    if pending and isinstance(parser, str):
        check_parser_package(parser)  # before the progress bar and any worker process
    report = AugmentReport(parser=name, cached=sum(len(c) for c in done.values()))
    bar = tqdm(
        total=len(sentences), initial=report.cached, desc="SIFTER positives", disable=not progress
    )
    for index, items in _run(pending, parser, options, workers):
        if folder is not None:
            write_chunk(chunk_path(folder, index), items)
        done[index] = items
        bar.update(len(items))
    bar.close()
    result = [item for index in sorted(done) for item in done[index]]
    for item in result:
        report.add(item)
    logger.info("SIFTER positives: %s%s", report, f" (cache {folder})" if folder else "")
    return result, report


def _run(
    pending: list[tuple[int, list[str]]],
    parser: str | Parser,
    options: AugmentOptions,
    workers: int,
) -> Iterator[tuple[int, list[Augmented]]]:
    """The pending chunks' results, as they finish."""
    if not pending:
        return
    if workers == 1 or len(pending) == 1 or not isinstance(parser, str):
        loaded = build_parser(parser) if isinstance(parser, str) else parser
        for index, texts in pending:
            yield index, augment_texts(loaded, texts, options)
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(workers, len(pending)), _start_worker, (parser, options)) as pool:
        yield from pool.imap_unordered(_augment_chunk, pending)
