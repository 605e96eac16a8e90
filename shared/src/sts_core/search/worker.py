"""One process per cell: ``python -m sts_core.search.worker train CELL_FOLDER`` trains the
cell's recipe with ``sts-train``'s own path (every check, the method's data preparation,
the save), scores the saved model on the dev table and writes ``result.json`` last;
``... score CELL_FOLDER`` scores a finished cell's model on the test table
(``test.json``). The search starts these (:mod:`sts_core.search.run`); the exit status is
``sts-train``'s (2: a bad input, named on stderr's ``error:`` line).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from sts_core.command_files import end_with_parent
from sts_core.saving import remove_path, write_json_atomic
from sts_core.search.cells import (
    CELL_FILE,
    MODEL_FOLDER,
    RECIPE_FILE,
    RESULT_FILE,
    TEST_FILE,
    read_json,
)
from sts_core.search.peers import PEER_METHOD, train_peer
from sts_core.search.spec import STS_TASKS_TEST, fingerprint

resource: ModuleType | None
try:  # POSIX only: where it is missing (Windows) a cell's peak resident memory is unknown
    import resource
except ImportError:
    resource = None

#: ``sts-train``'s exit status for a run that diverged (2: a bad input)
DIVERGED = 1


def table_evaluator(scoring: dict[str, Any], reference: str, name: str, default_split: str) -> Any:
    """The evaluator of ``reference`` under the search's scorer (``scoring``: task,
    eval_columns, data_dir, and for classification the dev table the thresholds are chosen
    on: test accuracy and F1 use the dev set's thresholds; the dev set's own are chosen on
    itself)."""
    from sts_core.data import load_reference
    from sts_core.data.tables import scored_reading
    from sts_core.evaluation import PairEvaluator, cosine_scorer
    from sts_core.evaluation.pair_tasks import PairClassificationEvaluator, RankingEvaluator
    from sts_core.evaluation.sts import spread_sample

    def load(table: str, split: str) -> Any:
        dataset = load_reference(
            table,
            split,
            data_dir=scoring.get("data_dir"),
            columns=scoring.get("eval_columns"),
            reading=scored_reading("--eval-columns"),
        )[1]
        return spread_sample(dataset, scoring.get("eval_pairs"))

    if reference == STS_TASKS_TEST:
        return SevenTasksEvaluator(scoring.get("data_dir"), name, scoring.get("eval_pairs"))
    dataset = load(reference, default_split)
    task = scoring["task"]
    if task == "classification":
        thresholds = None if name == "dev" else load(scoring["dev"], "dev")
        return PairClassificationEvaluator(dataset, thresholds, name=name, source=reference)
    if task == "ranking":
        return RankingEvaluator(dataset, name=name, source=reference)
    return PairEvaluator(dataset, name, cosine_scorer, source=reference)


class SevenTasksEvaluator:
    """``--test sts-tasks``: the seven STS tasks of the data folder under the SentEval
    protocol ('all' aggregation, as the papers report them), read and checked when built.
    Metrics: each task's Spearman and Pearson × 100 over all its pairs
    (``test_sts12_spearman``, …) and their averages (``test_spearman``, ``test_pearson``);
    the same for the mean over a task's subsets weighted by their size
    (``test_sts12_spearman_wmean``, ``test_spearman_wmean``: within-subset ranking only).
    ``eval_pairs``: each task's pairs spread-sampled to at most that many."""

    def __init__(self, data_dir: str | None, name: str, eval_pairs: int | None = None) -> None:
        from sts_core.evaluation import STSEvaluator
        from sts_core.evaluation.sts import load_task_pairs, spread_sample
        from sts_core.names import STS_TASKS

        self.name = name
        datasets = None
        if eval_pairs:
            datasets = {
                task: spread_sample(
                    load_task_pairs(task, "senteval", "senteval", data_dir), eval_pairs
                )
                for task in STS_TASKS
            }
        self.evaluator = STSEvaluator(data_dir=data_dir, datasets=datasets, show_progress_bar=False)

    def __call__(self, encoder: Any) -> dict[str, float]:
        report = self.evaluator.evaluate(encoder)
        metrics = {}
        for metric in ("spearman", "pearson"):
            for task, result in report.results.items():
                metrics[f"{self.name}_{task}_{metric}"] = getattr(result, metric)["all"]
                metrics[f"{self.name}_{task}_{metric}_wmean"] = getattr(result, metric)["wmean"]
            metrics[f"{self.name}_{metric}"] = report.average("all", metric)
            metrics[f"{self.name}_{metric}_wmean"] = report.average("wmean", metric)
        return metrics


def score_model(model_dir: Path, evaluator: Any, metric: str) -> tuple[float, dict[str, float]]:
    """The saved model's ``metric`` on the evaluator's table, and all its metrics."""
    import torch

    from sts_core.encoder import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(str(model_dir))
    encoder = encoder.to("cuda" if torch.cuda.is_available() else "cpu").eval()
    metrics = {k: float(v) for k, v in evaluator(encoder).items()}
    return metrics[f"{evaluator.name}_{metric}"], metrics


def peak_memory() -> dict[str, float | None]:
    """This process's peak resident memory (MiB; None where the platform has no
    ``resource`` module, e.g. Windows) and, on a GPU, its peak allocated."""
    import torch

    peak: dict[str, float | None] = {"peak_rss_mib": peak_rss_mib()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        peak["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return peak


def peak_rss_mib() -> float | None:
    """This process's peak resident memory in MiB (``ru_maxrss`` is KiB on Linux); None
    where the ``resource`` module is missing."""
    if resource is None:
        return None
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def train(folder: Path, own_process: bool = True) -> int:
    """Train the cell in ``folder``, score its dev table, write ``result.json`` (the peak
    memory only from a process of the cell's own)."""
    from sts_core.training.run import main as sts_train

    cell = read_json(folder / CELL_FILE)
    if cell is None:
        print(f"error: {folder / CELL_FILE} not found", file=sys.stderr)
        return 2
    threads = os.environ.get("STS_SEARCH_THREADS") if own_process else None
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    remove_path(folder / MODEL_FOLDER)  # an interrupted run of this cell (its own folder)
    model = folder / MODEL_FOLDER
    start = time.perf_counter()
    if cell["method_name"] == PEER_METHOD:
        from sts_core.training.parser import read_recipe  # as sts-train reads the others

        recipe = read_recipe(folder / RECIPE_FILE)
        steps = train_peer(recipe, model)
    else:
        argv = ["--method", cell["method_name"], "--config", str(folder / RECIPE_FILE)]
        status = sts_train(argv)
        if status == DIVERGED:  # a result of the recipe, not a bad input: recorded
            return finish(
                folder, start, None, {}, error="training diverged (log.txt)", memory=own_process
            )
        if status != 0:
            return status
        steps = (read_json(model / "metrics.json") or {}).get("train", {}).get("global_step")
    trained = time.perf_counter()
    scoring = cell["scoring"]
    evaluator = table_evaluator(scoring, scoring["dev"], "dev", "dev")
    try:
        dev, dev_metrics = score_model(model, evaluator, scoring["metric"])
    except ValueError as error:  # e.g. embeddings that collapsed to one point
        reason = " ".join(str(error).split())
        return finish(folder, start, steps, {}, error=reason, trained=trained, memory=own_process)
    return finish(folder, start, steps, dev_metrics, dev=dev, trained=trained, memory=own_process)


def finish(
    folder: Path,
    start: float,
    steps: int | None,
    dev_metrics: dict[str, float],
    dev: float | None = None,
    error: str | None = None,
    trained: float | None = None,
    memory: bool = True,
) -> int:
    """Write ``result.json`` (last): a dev score, or none and why (a diverged run or a
    model the scorer cannot score is a finished cell that is never picked); ``seconds``
    from the training's start to now, ``train_seconds`` to ``trained`` (the model saved,
    before the dev scoring; a diverged run: now); the process's peak memory with
    ``memory`` (None without: a process the cell shares with the search)."""
    now = time.perf_counter()
    result: dict[str, Any] = {
        "dev": dev,
        "dev_metrics": dev_metrics,
        "seconds": round(now - start, 1),
        "train_seconds": round((now if trained is None else trained) - start, 1),
        "steps": steps,
        **(peak_memory() if memory else {"peak_rss_mib": None}),
    }
    if error is not None:
        result["error"] = error
    write_json_atomic(folder / RESULT_FILE, result)
    return 0


def score_test(folder: Path) -> int:
    """Score a finished cell's model on the test table, write ``test.json``."""
    cell = read_json(folder / CELL_FILE)
    if cell is None or read_json(folder / RESULT_FILE) is None:
        print(f"error: {folder} holds no finished cell", file=sys.stderr)
        return 2
    scoring = cell["scoring"]
    evaluator = table_evaluator(scoring, scoring["test"], "test", "test")
    score, metrics = score_model(folder / MODEL_FOLDER, evaluator, scoring["metric"])
    content = {"table": scoring["test"], "fingerprint": fingerprint(scoring["test"])}
    write_json_atomic(folder / TEST_FILE, {**content, "score": score, "metrics": metrics})
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    end_with_parent(
        "the sts-search that started this worker",
        "the cell is trained again when the search is run again",
    )
    if len(args) != 2 or args[0] not in ("train", "score"):
        print("usage: python -m sts_core.search.worker train|score CELL_FOLDER", file=sys.stderr)
        return 2
    return run_action(args[0], Path(args[1]))


def run_action(verb: str, folder: Path, own_process: bool = True) -> int:
    """``train`` or ``score`` the cell in ``folder``; its exit status (2: a bad input,
    named on an ``error:`` line)."""
    try:
        return train(folder, own_process) if verb == "train" else score_test(folder)
    except (ValueError, OSError) as error:  # a table the scorer cannot read
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
