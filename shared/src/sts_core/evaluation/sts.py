"""The STS evaluator: cosine similarity of embeddings against gold scores.

Two protocols (see the README, "Evaluation protocols"):

``senteval`` — as SentEval runs inside SimCSE's evaluation script, the protocol of the
papers. STS12–16: Spearman ×100 over all subsets of a year concatenated ("all"), plus
SentEval's "mean" (plain average over subsets) and "wmean" (average weighted by subset
size); STS-B and SICK-R on their test splits (one subset, so all = mean = wmean). The
headline is the plain mean of the seven "all" numbers. Data variant ``senteval``
(Moses-tokenized; lower-cased except SICK) by default.

``mteb`` — as MTEB scores these tasks: one Spearman of cosine similarity per task over
its whole test split, raw text; MTEB's SICK-R "test" is all 9,927 SICK pairs (train +
trial + test), not SentEval's 4,927-pair test split.

Pearson is reported beside Spearman everywhere. Every report says what scored the pairs
(``scorer``): always the cosine here, also for a model whose ``pair_scorer`` head scores
pairs elsewhere (``score_pairs``, the dev evaluator); the report names such a head as unused.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sts_core.command_files import write_json, write_text
from sts_core.data.columns import column_array, column_list
from sts_core.evaluation.metrics import pearson, spearman
from sts_core.evaluation.pairs import (
    check_scored_pairs,
    cosine_scores,
)
from sts_core.names import STS_TASKS

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

TASK_TITLES = {
    "sts12": "STS12",
    "sts13": "STS13",
    "sts14": "STS14",
    "sts15": "STS15",
    "sts16": "STS16",
    "stsb": "STS-B",
    "sickr": "SICK-R",
}
PROTOCOLS = ("senteval", "mteb")
AGGREGATES = ("all", "mean", "wmean")

Encode = Callable[[Sequence[str]], np.ndarray]
#: sentences and the name of the task they belong to → their vectors
TaskEncode = Callable[[Sequence[str], str], np.ndarray]

#: the scorer of the STS tables: cosine similarity of the two embeddings
COSINE_SCORER = "cosine"


def describe_scorer(scorer: str) -> str:
    """Words for a report's ``scorer``: ``cosine`` or ``head:<name>`` (a head's ``score``)."""
    if scorer == COSINE_SCORER:
        return "cosine similarity of the embeddings"
    if scorer.startswith("head:"):
        return f"the head {scorer.removeprefix('head:')!r} (the model's pair_scorer)"
    return scorer


def pair_scorer_of(model: Any) -> str | None:
    """The name of ``model``'s pair-scoring head (``SentenceEncoder.pair_scorer``), or None."""
    name = getattr(model, "pair_scorer", None)
    return name if isinstance(name, str) else None


@dataclass
class SubsetScore:
    """Correlations (×100) of one subset."""

    name: str
    size: int
    spearman: float
    pearson: float


@dataclass
class TaskResult:
    """One task's scores under one protocol and data variant (all numbers ×100)."""

    task: str
    protocol: str
    variant: str
    size: int
    spearman: dict[str, float]
    pearson: dict[str, float]
    subsets: list[SubsetScore] = field(default_factory=list)


@dataclass
class STSReport:
    """Every task's result and the averages over tasks."""

    protocol: str
    variant: str
    model: str
    results: dict[str, TaskResult]
    seconds: float = 0.0
    sentence_edit: str | None = None  # the edit of the test sentences, if any
    scorer: str = COSINE_SCORER  # what scored the pairs: "cosine" or "head:<name>"
    unused_pair_scorer: str | None = None  # the model's pair-scoring head, not scored
    model_save_id: str | None = None  # the save (its marker's save_id) that was scored
    # the content identities of what was read (sts_core.command_files.content_identity)
    inputs: dict[str, Any] | None = None

    def scored_by(self) -> str:
        """What scored the pairs, in words (and the model's unused head, if any): the
        ``scored by`` line of every table."""
        unused = self.unused_pair_scorer
        note = f" (the model's pair_scorer head {unused!r} is not used)" if unused else ""
        return describe_scorer(self.scorer) + note

    def average(self, aggregate: str = "all", metric: str = "spearman") -> float:
        values = [getattr(r, metric)[aggregate] for r in self.results.values()]
        return float(np.mean(values))

    def to_dict(self) -> dict[str, Any]:
        averages = {
            f"{metric}_{agg}": self.average(agg, metric)
            for metric in ("spearman", "pearson")
            for agg in self._aggregates()
        }
        return {
            "protocol": self.protocol,
            "variant": self.variant,
            "model": self.model,
            **({"model_save_id": self.model_save_id} if self.model_save_id else {}),
            **({"inputs": self.inputs} if self.inputs else {}),
            "seconds": round(self.seconds, 2),
            "scorer": self.scorer,
            **({"unused_pair_scorer": self.unused_pair_scorer} if self.unused_pair_scorer else {}),
            **({"sentence_edit": self.sentence_edit} if self.sentence_edit else {}),
            "average": averages,
            "tasks": {name: asdict(result) for name, result in self.results.items()},
        }

    def _aggregates(self) -> tuple[str, ...]:
        return AGGREGATES if self.protocol == "senteval" else ("all",)

    def table_rows(self) -> list[tuple[str, list[str]]]:
        rows = []
        for metric in ("spearman", "pearson"):
            for agg in self._aggregates():
                cells = [f"{getattr(r, metric)[agg]:.2f}" for r in self.results.values()]
                cells.append(f"{self.average(agg, metric):.2f}")
                rows.append((f"{metric} {agg}", cells))
        return rows

    def header(self) -> list[str]:
        return ["", *(TASK_TITLES.get(t, t) for t in self.results), "Avg."]

    def to_markdown(self) -> str:
        edit = f", test sentences edited as `{self.sentence_edit}`" if self.sentence_edit else ""
        lines = [
            f"Model `{self.model}`, protocol `{self.protocol}`, data variant `{self.variant}`"
            f"{edit} (correlation with gold × 100)",
            "",
            f"Scored by: {self.scored_by()}.",
            "",
            "| " + " | ".join(self.header()) + " |",
            "|" + "---|" * len(self.header()),
        ]
        lines += ["| " + " | ".join([name, *cells]) + " |" for name, cells in self.table_rows()]
        return "\n".join(lines) + "\n"

    def to_text(self) -> str:
        header = self.header()
        rows = [header] + [[name, *cells] for name, cells in self.table_rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        edit = f", sentences edited: {self.sentence_edit}" if self.sentence_edit else ""
        text = [f"{self.model} — protocol {self.protocol}, data {self.variant}{edit}"]
        text.append(f"scored by: {self.scored_by()}")
        for row in rows:
            text.append("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
        return "\n".join(text) + "\n"

    def save(self, output: str | os.PathLike) -> tuple[Path, Path]:
        """Write ``<output>.json`` and ``<output>.md`` (``output`` may end in .json)."""
        base = Path(output)  # its suffix, if any, is replaced by .json and .md
        base.parent.mkdir(parents=True, exist_ok=True)
        json_path, md_path = base.with_suffix(".json"), base.with_suffix(".md")
        write_json(json_path, self.to_dict())
        write_text(md_path, self.to_markdown())
        return json_path, md_path


def score_subsets(
    gold: np.ndarray, predicted: np.ndarray, subsets: Sequence[str] | None
) -> tuple[dict[str, float], dict[str, float], list[SubsetScore]]:
    """'all', 'mean' and 'wmean' of Spearman and Pearson (×100) from pair scores."""
    names = list(subsets) if subsets is not None else ["all"] * len(gold)
    labels = np.asarray(names)
    parts = []
    for name in dict.fromkeys(names):
        mask = labels == name
        parts.append(
            SubsetScore(
                name=name,
                size=int(mask.sum()),
                spearman=_subset_correlation(spearman, predicted[mask], gold[mask], name),
                pearson=_subset_correlation(pearson, predicted[mask], gold[mask], name),
            )
        )
    sizes = np.array([p.size for p in parts], dtype=np.float64)
    result = {}
    for metric, correlate in (("spearman", spearman), ("pearson", pearson)):
        values = np.array([getattr(p, metric) for p in parts])
        result[metric] = {
            "all": 100 * correlate(predicted, gold),
            "mean": float(values.mean()),
            "wmean": float((values * sizes).sum() / sizes.sum()),
        }
    return result["spearman"], result["pearson"], parts


def _subset_correlation(
    correlate: Callable, predicted: np.ndarray, gold: np.ndarray, name: str
) -> float:
    """×100 correlation of one subset; NaN (logged) when undefined (under 2 pairs or constant)."""
    try:
        return 100 * correlate(predicted, gold)
    except ValueError as error:
        logger.warning("subset %s: correlation undefined (%s); its mean/wmean are NaN", name, error)
        return float("nan")


def load_task_pairs(
    task: str, protocol: str, variant: str, data_dir: str | os.PathLike | None
) -> Dataset:
    """The evaluation pairs of one task under a protocol (a ``datasets.Dataset``)."""
    from datasets import concatenate_datasets

    from sts_core.data import load_named

    if protocol == "mteb" and task == "sickr":
        splits = [
            load_named("sickr", s, data_dir=data_dir, variant=variant) for s in _MTEB_SICK_SPLITS
        ]
        return concatenate_datasets(
            [s.select_columns(["sentence1", "sentence2", "score"]) for s in splits]
        )
    return load_named(task, "test", data_dir=data_dir, variant=variant)


_MTEB_SICK_SPLITS = ("train", "dev", "test")


def spread_sample(dataset: Dataset, limit: int | None) -> Dataset:
    """At most ``limit`` rows spread over the whole table: every k-th row from the first,
    k = ⌈n / limit⌉, in the table's order (a quick look at a large evaluation set that
    keeps its mix of sources); the table itself when ``limit`` is None or not below n."""
    if not limit or len(dataset) <= limit:
        return dataset
    return dataset.select(range(0, len(dataset), math.ceil(len(dataset) / limit)))


def task_source(
    task: str, protocol: str, variant: str, data_dir: str | os.PathLike | None
) -> str | None:
    """The file(s) or folder a task's pairs come from (for messages), or ``None``."""
    from sts_core.data import data_location

    try:
        if protocol == "mteb" and task == "sickr":
            places = [data_location("sickr", s, data_dir, variant) for s in _MTEB_SICK_SPLITS]
            return " + ".join(dict.fromkeys(places))
        return data_location(task, "test", data_dir, variant)
    except ValueError:
        return None


class STSEvaluator:
    """Evaluate sentence embeddings on the seven STS tasks (or a subset of them).

    Args:
        data_dir: the benchmark folder (default: ``$STS_DATA_DIR``).
        tasks: task names from ``STS_TASKS``.
        protocol: ``senteval`` (the papers') or ``mteb``.
        variant: ``senteval`` (tokenized files) or ``raw`` (official releases); default
            ``senteval`` for the senteval protocol and ``raw`` for mteb.
        batch_size: encoding batch size.
        datasets: preloaded task → Dataset (``sentence1``, ``sentence2``, ``score`` and
            optionally ``subset``), bypassing the data folder.
        sentence_edit: an edit of every test sentence before encoding, to reproduce a
            paper's evaluation script (:mod:`sts_core.evaluation.sentence_edits`:
            ``pcc-tuning``); none by default. The report records it.

    Every task's data is loaded and checked here, before any model is involved: a task
    with fewer than 2 scored pairs or with constant gold scores raises
    :class:`~sts_core.data.DataContentError` naming the task and its file or folder.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike | None = None,
        tasks: Sequence[str] = STS_TASKS,
        protocol: str = "senteval",
        variant: str | None = None,
        batch_size: int = 64,
        datasets: Mapping[str, Any] | None = None,
        show_progress_bar: bool = True,
        sentence_edit: str | None = None,
    ) -> None:
        from sts_core.evaluation.sentence_edits import check_sentence_edit

        self.sentence_edit = None if sentence_edit in (None, "", "none") else sentence_edit
        self._edit = check_sentence_edit(sentence_edit)
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
        unknown = [
            t for t in tasks if t not in STS_TASKS and (datasets is None or t not in datasets)
        ]
        if unknown:
            raise ValueError(f"unknown STS task(s) {unknown}; choose from {', '.join(STS_TASKS)}")
        self.protocol = protocol
        self.variant = variant or ("senteval" if protocol == "senteval" else "raw")
        self.batch_size = batch_size
        self.show_progress_bar = show_progress_bar
        self.tasks = list(dict.fromkeys(tasks))
        if not self.tasks:
            raise ValueError("no task given; choose from " + ", ".join(STS_TASKS))
        if datasets is not None:
            self.data = dict(datasets)
            missing = [t for t in self.tasks if t not in self.data]
            if missing:
                raise ValueError(f"no dataset given for task(s) {missing}")
            sources: dict[str, str | None] = dict.fromkeys(self.tasks)
        else:
            self.data = {
                task: load_task_pairs(task, protocol, self.variant, data_dir) for task in self.tasks
            }
            sources = {
                task: task_source(task, protocol, self.variant, data_dir) for task in self.tasks
            }
        for task in self.tasks:  # fail now, before any model is loaded or run
            check_scored_pairs(self.data[task], task, sources[task])

    def evaluate(self, encode: Any, model_name: str = "model") -> STSReport:
        """Score ``encode`` (a SentenceEncoder, or any callable sentences → array) by the
        cosine of its embeddings; a ``pair_scorer`` head it has is named as unused."""
        encode_fn = _as_encode_fn(encode, self.batch_size, self.show_progress_bar)
        start = time.perf_counter()
        results = {task: self._evaluate_task(task, encode_fn) for task in self.tasks}
        report = STSReport(
            self.protocol,
            self.variant,
            model_name,
            results,
            sentence_edit=self.sentence_edit,
            unused_pair_scorer=pair_scorer_of(encode),
        )
        report.seconds = time.perf_counter() - start
        return report

    __call__ = evaluate

    def _evaluate_task(self, task: str, encode_fn: TaskEncode) -> TaskResult:
        data = self.data[task]
        sentences1, sentences2 = column_list(data, "sentence1"), column_list(data, "sentence2")
        if self._edit is not None:
            sentences1 = [self._edit(s) for s in sentences1]
            sentences2 = [self._edit(s) for s in sentences2]
        predicted = cosine_scores(
            *encode_each_sentence_once(encode_fn, sentences1, sentences2, task)
        )
        gold = column_array(data, "score")
        keep_subsets = self.protocol == "senteval" and "subset" in data.column_names
        spearman_, pearson_, parts = score_subsets(
            gold, predicted, column_list(data, "subset") if keep_subsets else None
        )
        return TaskResult(task, self.protocol, self.variant, len(gold), spearman_, pearson_, parts)


def encode_each_sentence_once(
    encode_fn: TaskEncode, left: list[str], right: list[str], task: str
) -> tuple[np.ndarray, np.ndarray]:
    """The embeddings of ``left`` and ``right``, row by row, from one call of ``encode_fn``
    on the task's distinct sentences in their first-seen order (a quarter of the seven
    tasks' 37,700 sentences repeat one, SICK-R's above all: they are encoded once)."""
    distinct = list(dict.fromkeys(left + right))
    vectors = encode_fn(distinct, task)
    if len(vectors) != len(distinct):
        raise ValueError(
            f"{task}: the encoder returned {len(vectors)} embeddings for {len(distinct)} sentences"
        )
    row = {sentence: i for i, sentence in enumerate(distinct)}
    return vectors[[row[s] for s in left]], vectors[[row[s] for s in right]]


def _as_encode_fn(encoder: Any, batch_size: int, progress: bool) -> TaskEncode:
    """``(sentences, task) → vectors`` of ``encoder``: its ``encode`` (the progress bar named
    by the task where ``encode`` takes ``progress_desc``, as ``SentenceEncoder.encode``
    does), or the callable itself."""
    if hasattr(encoder, "encode"):
        named = progress and "progress_desc" in _parameters(encoder.encode)

        def encode_task(sentences: Sequence[str], task: str) -> np.ndarray:
            extra = {"progress_desc": task} if named else {}
            return np.asarray(
                encoder.encode(
                    sentences, batch_size=batch_size, show_progress_bar=progress, **extra
                )
            )

        return encode_task
    if callable(encoder):
        return lambda sentences, task: np.asarray(encoder(sentences))
    raise TypeError("evaluate() needs an object with encode(sentences) or a callable")


def _parameters(function: Callable[..., Any]) -> Mapping[str, Any]:
    """The parameters of ``function`` by name (none when Python cannot tell)."""

    try:
        return inspect.signature(function).parameters
    except (TypeError, ValueError):
        return {}
