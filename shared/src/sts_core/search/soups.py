"""``sts-search --soup``: for each pick trained on several seeds, one model, the uniform
average of its seeds' embedding weights (the heads trained beside the encoder left out:
:func:`sts_core.soup.embedding_soup`), scored on the dev table and the test table as the
cells are.

Each soup has a folder ``<output>/soups/<recipe folder>/`` that only the search writes:
``soup.json`` (the recipe, its soup key, the seeds and each member: its cell's key, model
folder and the SHA-256 of its ``result.json``; written before the worker starts),
``model/`` (the soup, with ``sts_soup.json``), ``log.txt``, ``result.json`` (written
last: dev score, its metrics, seconds) and ``test.json``. A soup made from the same members
is not made again; a member trained again (another ``result.json``) or other seeds make it
again, in its folder: the search removes only the files it writes there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sts_core.command_files import remove_path, write_json
from sts_core.search.cells import (
    MODEL_FOLDER,
    RESULT_FILE,
    SOUP_FILE,
    TEST_FILE,
    Cell,
    read_json,
)
from sts_core.search.schedule import Scheduler, Slot, run_worker, worker_result
from sts_core.search.select import recipes_of
from sts_core.search.spec import file_digest

SOUPS_FOLDER = "soups"

Record = Mapping[str, Any]


def soup_members(
    records: Sequence[Record], recipes: Sequence[str], seeds: Sequence[int]
) -> dict[str, list[Record]]:
    """Recipe key → its runs on ``seeds`` (in that order), for each of ``recipes`` whose
    every seed has finished with a dev score (a run that diverged has no model to average;
    a seed not trained yet: no soup until it is)."""
    runs = recipes_of(records)
    found = {}
    for key in recipes:
        by_seed = {r["seed"]: r for r in runs.get(key, []) if r["dev"] is not None}
        if all(seed in by_seed for seed in seeds):
            found[key] = [by_seed[seed] for seed in seeds]
    return found


def describe_soup(members: Sequence[Record], scoring: dict[str, Any]) -> dict[str, Any]:
    """What ``soup.json`` holds: the soup's key, its recipe, seeds, members and scoring."""
    recipe = Cell.from_record(members[0]).recipe
    return {
        "key": recipe.soup_key(len(members)),
        "recipe": recipe.key,
        "seeds": [member["seed"] for member in members],
        "members": [member_identity(member) for member in members],
        "scoring": scoring,
    }


def member_identity(record: Record) -> dict[str, str]:
    """A member as its soup records it: its cell's key, its model folder and the SHA-256
    of its ``result.json`` (another training of the cell writes another one)."""
    folder = Path(record["folder"])
    return {
        "key": record["key"],
        "model": str(folder / MODEL_FOLDER),
        "result_sha256": file_digest(folder / RESULT_FILE),
    }


def made_from(described: Mapping[str, Any]) -> dict[str, Any]:
    """What decides a soup's model and dev score: its description without the test table
    (a soup is scored on another test table without being made again)."""
    scoring = {
        k: v
        for k, v in (described.get("scoring") or {}).items()
        if k not in ("test", "test_fingerprint")
    }
    return {**described, "scoring": scoring}


def soup_record(
    folder: Path, description: Mapping[str, Any], test: dict[str, str] | None = None
) -> dict[str, Any] | None:
    """The record of the soup in ``folder`` when it was made from ``description``'s members
    (None when it was not made, or made from others): its key, recipe, seeds, members, dev
    score and metrics, seconds, folder and, when ``test`` (the test table's fingerprint) is
    the table its ``test.json`` scored, the test score and metrics."""
    described = read_json(folder / SOUP_FILE)
    result = read_json(folder / RESULT_FILE)
    if described is None or result is None or made_from(described) != made_from(description):
        return None
    record = {
        "key": described["key"],
        "recipe": described["recipe"],
        "seeds": described["seeds"],
        "members": [member["key"] for member in described["members"]],
        "dev": result["dev"],
        "dev_metrics": result["dev_metrics"],
        "seconds": result["seconds"],
        "folder": str(folder),
    }
    if "error" in result:
        record["error"] = result["error"]
    scored = read_json(folder / TEST_FILE)
    if test is not None and scored is not None and scored.get("fingerprint") == test:
        record["test"] = scored["score"]
        record["test_metrics"] = scored["metrics"]
    return record


def complete(record: Mapping[str, Any] | None, scoring: Mapping[str, Any]) -> bool:
    """Whether a soup's record needs no more work: made, and scored on the test table
    when there is one (a soup without a dev score is not scored on it)."""
    if record is None:
        return False
    return not scoring.get("test") or "test" in record or record["dev"] is None


def make_soups(
    scheduler: Scheduler,
    records: Sequence[Record],
    recipes: Sequence[str],
    seeds: Sequence[int],
    root: Path,
    scoring: dict[str, Any],
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Make (or keep) the soup of each of ``recipes`` over its runs on ``seeds``, one
    worker each on the scheduler's slots; the records of the soups made."""
    members = soup_members(records, recipes, seeds)
    for key in recipes:
        if key not in members:
            log(f"sts-search: no soup of {key}: not every seed of {list(seeds)} has a dev score")
    soups = {}
    todo = []
    for runs in members.values():
        description = describe_soup(runs, scoring)
        folder = root / Cell.from_record(runs[0]).recipe.folder_name
        soups[folder] = description
        if not complete(soup_record(folder, description, scoring.get("test_fingerprint")), scoring):
            todo.append((description["key"], _souper(folder, description, log)))
    if todo:
        log(f"sts-search: {len(todo)} soup(s) to make or score, {len(soups) - len(todo)} done")
    scheduler.run(todo)
    made = (soup_record(f, d, scoring.get("test_fingerprint")) for f, d in soups.items())
    return [record for record in made if record is not None]


def prepare_soup(folder: Path, description: dict[str, Any]) -> None:
    """Write ``soup.json``; a soup made from other members loses its ``result.json`` (the
    worker then makes it again, removing its model and test score first)."""
    describe_folder(folder, SOUP_FILE, description)


def describe_folder(folder: Path, name: str, description: dict[str, Any]) -> None:
    """Write ``description`` to ``folder/name`` (the folder made); when the one there was
    made from other inputs (:func:`made_from`), the folder's ``result.json`` goes first, so
    that the worker makes it again."""
    folder.mkdir(parents=True, exist_ok=True)
    described = read_json(folder / name)
    if described is None or made_from(described) != made_from(description):
        remove_path(folder / RESULT_FILE)
    write_json(folder / name, description, record=False)


def _souper(folder: Path, description: dict[str, Any], log: Callable) -> Callable[[Slot], None]:
    def work(slot: Slot) -> None:
        prepare_soup(folder, description)
        log(f"  making the {description['key']}")
        run_worker("soup", folder, slot)
        _, dev = worker_result(folder, soup_record(folder, description))
        log(f"  done {description['key']}: dev {dev}")

    return work
