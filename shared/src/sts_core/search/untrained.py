"""The untrained model's rows of a search's report: ``--model`` as every cell starts from
it, scored once per search with the cells' scorers on the dev table and, with ``--test``,
on the test table: what the training adds is read against it.

The model loads as ``sts-train`` loads it with the search's ``--set`` encoder keys
(:data:`ENCODER_KEYS`; a row's or a ``--grid`` value is a cell's own). Its folder
``<output>/untrained/`` only the search writes: ``untrained.json`` (the model, its encoder
settings and the scoring, with the content identities of the model and the dev table;
written before the worker starts), ``log.txt``, ``result.json`` (written last: dev score,
its metrics, seconds, 0 steps) and ``test.json``. It is scored again only when one of
these changed (the model or the dev table at the same path, by content); a new test table
is scored alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sts_core.search.cells import RESULT_FILE, TEST_FILE, UNTRAINED_FILE, read_json
from sts_core.search.schedule import Scheduler, Slot, run_worker, worker_result
from sts_core.search.soups import complete, describe_folder, made_from

UNTRAINED_FOLDER = "untrained"
#: the untrained model's key in the report and the scheduler's messages
UNTRAINED_KEY = "untrained model"
#: the ``--set`` keys the untrained model loads with → ``SentenceEncoder.from_pretrained``'s
ENCODER_KEYS = {
    "pooling": "pooling",
    "prompt": "prompt",
    "max_seq_length": "max_length",
    "normalize_embeddings": "normalize",
    "padding_side": "padding_side",
    "trust_remote_code": "trust_remote_code",
}
#: the inputs whose content decides its scores: the model and the dev table
_OWN_INPUTS = ("--model ", "--dev ")


def describe_untrained(
    model: str, settings: Mapping[str, Any], scoring: Mapping[str, Any]
) -> dict[str, Any]:
    """What ``untrained.json`` holds: the key, the model, the encoder settings of the
    search's ``--set`` keys (``settings``) and the scoring (of the search's ``inputs``, the
    model's and the dev table's identities alone)."""
    own = dict(scoring)
    if own.get("inputs") is not None:
        own["inputs"] = {k: v for k, v in own["inputs"].items() if k.startswith(_OWN_INPUTS)}
    return {
        "key": UNTRAINED_KEY,
        "model": model,
        "encoder": {ENCODER_KEYS[k]: v for k, v in settings.items() if k in ENCODER_KEYS},
        "scoring": own,
    }


def untrained_record(
    folder: Path, description: Mapping[str, Any], test: dict[str, str] | None = None
) -> dict[str, Any] | None:
    """The untrained model's record when ``folder`` scored it as ``description`` says
    (None when it did not, or scored another model or dev table): its key, model, dev
    score and metrics, seconds, steps (0), peak memory, folder and, when ``test`` (the test
    table's fingerprint) is the table its ``test.json`` scored, the test score and
    metrics."""
    described = read_json(folder / UNTRAINED_FILE)
    result = read_json(folder / RESULT_FILE)
    if described is None or result is None or made_from(described) != made_from(description):
        return None
    record = {**result, "key": UNTRAINED_KEY, "model": described["model"], "folder": str(folder)}
    scored = read_json(folder / TEST_FILE)
    if test is not None and scored is not None and scored.get("fingerprint") == test:
        record["test"] = scored["score"]
        record["test_metrics"] = scored["metrics"]
    return record


def score_untrained(
    scheduler: Scheduler,
    model: str,
    settings: Mapping[str, Any],
    root: Path,
    scoring: dict[str, Any],
    log: Callable[[str], None] = print,
) -> dict[str, Any] | None:
    """Score (or keep) the untrained ``model`` in ``root/untrained/``, a worker on the
    scheduler's slots; its record (None when it was not scored: the time limit or a
    failure before it, or its worker failed: the scheduler records why)."""
    folder = root / UNTRAINED_FOLDER
    description = describe_untrained(model, settings, scoring)
    test = scoring.get("test_fingerprint")
    if complete(untrained_record(folder, description, test), scoring):
        return untrained_record(folder, description, test)
    scheduler.run([(UNTRAINED_KEY, _scorer(folder, description, log))])
    return untrained_record(folder, description, test)


def prepare_untrained(folder: Path, description: dict[str, Any]) -> None:
    """Write ``untrained.json``; a scoring of another model or dev table loses its
    ``result.json`` (the worker then scores it again, its test score first removed)."""
    describe_folder(folder, UNTRAINED_FILE, description)


def _scorer(folder: Path, description: dict[str, Any], log: Callable) -> Callable[[Slot], None]:
    def work(slot: Slot) -> None:
        prepare_untrained(folder, description)
        log(f"  scoring the {UNTRAINED_KEY} ({description['model']})")
        run_worker("untrained", folder, slot)
        _, dev = worker_result(folder, untrained_record(folder, description))
        log(f"  done the {UNTRAINED_KEY}: dev {dev}")

    return work
