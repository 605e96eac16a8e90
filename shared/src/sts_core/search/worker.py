"""One process per cell: ``python -m sts_core.search.worker train CELL_FOLDER`` trains the
cell's recipe with ``sts-train``'s own path (every check, the method's data preparation,
the save), scores the saved model on the dev table and writes ``result.json`` last;
``... score CELL_FOLDER`` scores a finished cell's model on the test table
(``test.json``); ``... soup SOUP_FOLDER`` averages a pick's seeds into one model and scores
it on the dev (and test) table (:func:`make_soup`); ``... untrained FOLDER`` scores the
search's ``--model`` as the cells start from it on the dev (and test) table
(:func:`score_untrained`). The search starts these
(:mod:`sts_core.search.schedule`); the exit status is ``sts-train``'s (2: a bad input, named
on stderr's ``error:`` line).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sts_core.command_files import end_with_parent
from sts_core.process_memory import peak_rss_mib
from sts_core.saving import remove_path, write_json_atomic
from sts_core.search.cells import (
    CELL_FILE,
    MODEL_FOLDER,
    RECIPE_FILE,
    RESULT_FILE,
    SOUP_FILE,
    STAGE1_FOLDER,
    STAGE1_RECIPE_FILE,
    TEST_FILE,
    UNTRAINED_FILE,
    read_json,
)
from sts_core.search.peers import PEER_METHOD, train_peer
from sts_core.search.spec import STS_TASKS_TEST, fingerprint
from sts_core.search.stages import first_stage

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


def score_model(
    model_dir: Path | str,
    evaluator: Any,
    metric: str,
    settings: Mapping[str, Any] | None = None,
) -> tuple[float, dict[str, float]]:
    """The saved model's ``metric`` on the evaluator's table, and all its metrics;
    ``settings``: ``SentenceEncoder.from_pretrained``'s keyword arguments (pooling, …)."""
    import torch

    from sts_core.encoder import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(str(model_dir), **(settings or {}))
    encoder = encoder.to("cuda" if torch.cuda.is_available() else "cpu").eval()
    metrics = {k: float(v) for k, v in evaluator(encoder).items()}
    return metrics[f"{evaluator.name}_{metric}"], metrics


#: whether this process is the work item's own (``python -m sts_core.search.worker``), so
#: that its peak memory is the item's; not while ``--in-process`` runs it in the search's
_own_process = True


def peak_memory() -> dict[str, float | None]:
    """This process's peak resident memory (MiB; None where the platform has no
    ``resource`` module, e.g. Windows, or where the process is the search's, not the
    item's own) and, on a GPU, its peak allocated."""
    import torch

    if not _own_process:
        return {"peak_rss_mib": None}
    peak: dict[str, float | None] = {"peak_rss_mib": peak_rss_mib()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        peak["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return peak


def train(folder: Path) -> int:
    """Train the cell in ``folder``, score its dev table, write ``result.json``."""
    cell = read_json(folder / CELL_FILE)
    if cell is None:
        print(f"error: {folder / CELL_FILE} not found", file=sys.stderr)
        return 2
    for own in (MODEL_FOLDER, STAGE1_FOLDER):  # an interrupted run of this cell (its own)
        remove_path(folder / own)
    model = folder / MODEL_FOLDER
    start = time.perf_counter()
    steps: int | None
    recorded: dict[str, Any] = {}  # what the result records besides (a peer's teacher)
    if cell["method_name"] == PEER_METHOD:
        from sts_core.training.parser import read_recipe  # as sts-train reads the others

        recipe = read_recipe(folder / RECIPE_FILE)
        steps, recorded = train_peer(recipe, model)
    else:
        status, steps = train_stages(folder, cell)
        if status == DIVERGED:  # a result of the recipe, not a bad input: recorded
            return finish(folder, start, None, {}, error="training diverged (log.txt)")
        if status != 0:
            return status
    return score_dev(folder, cell["scoring"], start, steps, time.perf_counter(), recorded)


def use_slot_threads() -> None:
    """Torch on the slot's CPU threads (``STS_SEARCH_THREADS``, set by the scheduler)."""
    threads = os.environ.get("STS_SEARCH_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))


def score_dev(
    folder: Path,
    scoring: dict[str, Any],
    start: float,
    steps: int | None,
    trained: float,
    recorded: dict[str, Any] | None = None,
    model: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> int:
    """Score the model in ``folder`` (or ``model``, loaded with ``settings``) on the dev
    table and write ``result.json`` (:func:`finish`); ``trained``: when the model was
    saved; ``recorded``: the training's own fields (a peer cell's ``teacher``)."""
    recorded = recorded or {}
    evaluator = table_evaluator(scoring, scoring["dev"], "dev", "dev")
    where = folder / MODEL_FOLDER if model is None else model
    try:
        dev, dev_metrics = score_model(where, evaluator, scoring["metric"], settings)
    except ValueError as error:  # e.g. embeddings that collapsed to one point
        problem = " ".join(str(error).split())
        return finish(folder, start, steps, {}, error=problem, trained=trained, **recorded)
    return finish(folder, start, steps, dev_metrics, dev=dev, trained=trained, **recorded)


def train_stages(folder: Path, cell: dict[str, Any]) -> tuple[int, int | None]:
    """``sts-train`` on the cell's recipe into its model folder; for a two-stage cell
    (:mod:`sts_core.search.stages`) first its first stage's recipe into ``stage1/``, then
    the cell's recipe from that model, the folder removed after. Returns the exit status
    (a failed stage's) and the optimizer steps (both stages')."""
    method, model = cell["method_name"], folder / MODEL_FOLDER
    if first_stage(cell["settings"]) is None:
        return run_sts_train(method, folder / RECIPE_FILE, model)
    stage1 = folder / STAGE1_FOLDER
    try:
        status, first_steps = run_sts_train(method, folder / STAGE1_RECIPE_FILE, stage1)
        if status != 0:
            return status, None
        flags = ["--model_name_or_path", str(stage1)]
        status, steps = run_sts_train(method, folder / RECIPE_FILE, model, flags)
    finally:
        remove_path(stage1)
    total = None if steps is None or first_steps is None else first_steps + steps
    return status, total


def run_sts_train(
    method: str, recipe: Path, output: Path, flags: Sequence[str] = ()
) -> tuple[int, int | None]:
    """``sts-train --method METHOD --config RECIPE FLAGS`` (its model in ``output``): its
    exit status and, when it trained, its optimizer steps."""
    from sts_core.training.run import main as sts_train

    status = sts_train(["--method", method, "--config", str(recipe), *flags])
    if status != 0:
        return status, None
    metrics = read_json(output / "metrics.json") or {}
    return status, metrics.get("train", {}).get("global_step")


def finish(
    folder: Path,
    start: float,
    steps: int | None,
    dev_metrics: dict[str, float],
    dev: float | None = None,
    error: str | None = None,
    trained: float | None = None,
    **recorded: Any,
) -> int:
    """Write ``result.json`` (last): a dev score, or none and why (a diverged run or a
    model the scorer cannot score is a finished cell that is never picked); ``seconds``
    from the training's start to now, ``train_seconds`` to ``trained`` (the model saved,
    before the dev scoring; a diverged run: now); ``recorded``: the training's own fields
    (a peer cell's ``teacher``: the pairs and neighbour pairs it trained on)."""
    now = time.perf_counter()
    result: dict[str, Any] = {
        "dev": dev,
        "dev_metrics": dev_metrics,
        "seconds": round(now - start, 1),
        "train_seconds": round((now if trained is None else trained) - start, 1),
        "steps": steps,
        **peak_memory(),
        **recorded,
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
    write_test_score(folder, cell["scoring"])
    return 0


def write_test_score(
    folder: Path,
    scoring: dict[str, Any],
    model: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> None:
    """Score the model in ``folder`` (or ``model``, loaded with ``settings``) on the
    scoring's test table, write ``test.json``."""
    evaluator = table_evaluator(scoring, scoring["test"], "test", "test")
    where = folder / MODEL_FOLDER if model is None else model
    score, metrics = score_model(where, evaluator, scoring["metric"], settings)
    content = {"table": scoring["test"], "fingerprint": fingerprint(scoring["test"])}
    write_json_atomic(folder / TEST_FILE, {**content, "score": score, "metrics": metrics})


def make_soup(folder: Path) -> int:
    """Make the soup ``folder/soup.json`` describes (:mod:`sts_core.search.soups`): the
    uniform average of its members' embedding weights saved in ``model/`` and scored on the
    dev table (``result.json``, written last); then, when its scoring names a test table and
    the soup has a dev score, scored on it (``test.json``). A soup whose ``result.json``
    exists is kept (only its test score is made, when missing or of another table)."""
    from sts_core.soup import embedding_soup

    described = read_json(folder / SOUP_FILE)
    if described is None:
        print(f"error: {folder / SOUP_FILE} not found", file=sys.stderr)
        return 2
    scoring = described["scoring"]
    if read_json(folder / RESULT_FILE) is None:
        for earlier in (MODEL_FOLDER, TEST_FILE):  # an interrupted or older soup (its own)
            remove_path(folder / earlier)
        start = time.perf_counter()
        embedding_soup([member["model"] for member in described["members"]], folder / MODEL_FOLDER)
        score_dev(folder, scoring, start, None, time.perf_counter())
    result = read_json(folder / RESULT_FILE) or {}
    scored = read_json(folder / TEST_FILE) or {}
    test = scoring.get("test")
    if test and result.get("dev") is not None and scored.get("fingerprint") != fingerprint(test):
        write_test_score(folder, scoring)
    return 0


def score_untrained(folder: Path) -> int:
    """Score the model ``folder/untrained.json`` names (the search's ``--model``, loaded
    with its encoder settings: :mod:`sts_core.search.untrained`) on the dev table
    (``result.json``, written last, 0 steps) unless it was, then, when its scoring names a
    test table and it has a dev score, on that table unless it was (``test.json``)."""
    described = read_json(folder / UNTRAINED_FILE)
    if described is None:
        print(f"error: {folder / UNTRAINED_FILE} not found", file=sys.stderr)
        return 2
    scoring, model, settings = described["scoring"], described["model"], described["encoder"]
    if read_json(folder / RESULT_FILE) is None:
        remove_path(folder / TEST_FILE)  # an earlier scoring's (its own)
        start = time.perf_counter()
        score_dev(folder, scoring, start, 0, start, model=model, settings=settings)
    result = read_json(folder / RESULT_FILE) or {}
    scored = read_json(folder / TEST_FILE) or {}
    test = scoring.get("test")
    if test and result.get("dev") is not None and scored.get("fingerprint") != fingerprint(test):
        write_test_score(folder, scoring, model, settings)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    end_with_parent(
        "the sts-search that started this worker",
        "the cell is trained again when the search is run again",
    )
    if len(args) != 2 or args[0] not in ACTIONS:
        verbs = "|".join(ACTIONS)
        print(f"usage: python -m sts_core.search.worker {verbs} FOLDER", file=sys.stderr)
        return 2
    use_slot_threads()  # a fresh process and one forked from the preloaded server alike
    return run_action(args[0], Path(args[1]))


def run_action(verb: str, folder: Path, own_process: bool = True) -> int:
    """``train``, ``score``, ``soup`` or ``untrained`` the item in ``folder``; its exit
    status (2: a bad input, named on an ``error:`` line). ``own_process``: False when the
    search runs it in its own process (``--in-process``: no peak memory of the item's
    own)."""
    global _own_process
    _own_process = own_process
    try:
        return ACTIONS[verb](folder)
    except (ValueError, OSError) as error:  # a table the scorer cannot read
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    finally:
        _own_process = True


#: the worker's actions by the verb its command line names
ACTIONS = {"train": train, "score": score_test, "soup": make_soup, "untrained": score_untrained}


if __name__ == "__main__":
    sys.exit(main())
