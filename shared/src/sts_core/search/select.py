"""Choosing by dev alone: the pick of each method, the overall pick and their seeds.

Pure functions over cell records (dicts as :mod:`sts_core.search.cells` writes them:
``method``, ``recipe`` (the recipe's key), ``seed``, ``dev``, optionally ``test``), so the
selection can be checked against a computation written out by hand. A record's ``test``
is read only by :func:`seed_summary` and :func:`headline`, after the picks are made:
:func:`method_picks` and :func:`overall_pick` never look at it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Record = Mapping[str, Any]


def recipes_of(records: Iterable[Record]) -> dict[str, list[Record]]:
    """Recipe key → its records (one per seed), recipes in the order first met."""
    grouped: dict[str, list[Record]] = {}
    for record in records:
        grouped.setdefault(record["recipe"], []).append(record)
    return grouped


def dev_at(records: Sequence[Record], seed: int) -> float | None:
    """The dev score of the record trained with ``seed`` (None when there is none, or when
    that run has none: it diverged)."""
    for record in records:
        if record["seed"] == seed and record["dev"] is not None:
            return float(record["dev"])
    return None


def selection_dev(runs: Sequence[Record], seeds: int | Sequence[int]) -> float | None:
    """The mean dev score of the runs trained with ``seeds`` (one seed: its dev score);
    None unless every one of those seeds has a run with a dev score."""
    devs = [dev_at(runs, seed) for seed in ([seeds] if isinstance(seeds, int) else seeds)]
    if not devs or None in devs:
        return None
    return statistics.fmean(devs)  # type: ignore[arg-type]


def pick_dev(runs: Sequence[Record], seeds: int | Sequence[int]) -> float:
    """:func:`selection_dev` of a pick's runs, which always have one (:func:`method_picks`
    picks none without)."""
    dev = selection_dev(runs, seeds)
    if dev is None:
        raise ValueError(f"{runs[0]['recipe']}: no dev score at seeds {seeds}, not a pick")
    return dev


def method_picks(records: Iterable[Record], selection_seed: int | Sequence[int]) -> dict[str, str]:
    """Method → the key of its recipe with the highest dev score at ``selection_seed``
    (several seeds: the highest mean over them, among the recipes trained on all of them;
    a tie goes to the recipe met first, i.e. first in the grid's order). Methods without
    a record at that seed have no pick."""
    picks: dict[str, tuple[float, str]] = {}
    for key, runs in recipes_of(records).items():
        dev = selection_dev(runs, selection_seed)
        if dev is None:
            continue
        method = runs[0]["method"]
        if method not in picks or dev > picks[method][0]:
            picks[method] = (dev, key)
    return {method: key for method, (_, key) in picks.items()}


def overall_pick(
    records: Iterable[Record], picks: Mapping[str, str], selection_seed: int | Sequence[int]
) -> str | None:
    """The method pick with the highest dev score at ``selection_seed`` (several seeds: the
    mean; a tie: the method listed first in ``picks``); None when there are no picks."""
    runs = recipes_of(records)
    best: tuple[float, str] | None = None
    for key in picks.values():
        dev = selection_dev(runs[key], selection_seed)
        if dev is not None and (best is None or dev > best[0]):
            best = (dev, key)
    return None if best is None else best[1]


def mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None for a single value)."""
    mean = statistics.fmean(values)
    return mean, statistics.stdev(values) if len(values) > 1 else None


def seed_summary(runs: Sequence[Record], seeds: Sequence[int]) -> dict[str, Any]:
    """A recipe's runs on ``seeds``: dev (and test, where every one of them has it) as
    mean ± sd over the runs with a dev score, the seeds whose run has none (diverged) and
    the seeds not trained yet."""
    finished = [r for r in runs if r["seed"] in seeds]
    done = [r for r in finished if r["dev"] is not None]
    summary: dict[str, Any] = {
        "seeds": sorted(r["seed"] for r in done),
        "failed_seeds": sorted(r["seed"] for r in finished if r["dev"] is None),
        "missing_seeds": [s for s in seeds if s not in {r["seed"] for r in finished}],
    }
    if done:
        summary["dev"] = mean_sd([float(r["dev"]) for r in done])
        tests = [float(r["test"]) for r in done if r.get("test") is not None]
        if len(tests) == len(done):
            summary["test"] = mean_sd(tests)
    return summary


def format_score(score: tuple[float, float | None] | None) -> str:
    """``81.23 ± 0.45`` (``81.23`` for one run; ``–`` for none)."""
    if score is None:
        return "–"
    mean, sd = score
    return f"{mean:.2f}" if sd is None else f"{mean:.2f} ± {sd:.2f}"


def headline(
    records: Iterable[Record],
    selection_seed: int | Sequence[int],
    seeds: Sequence[int],
    metric: str,
) -> str:
    """One sentence: the overall pick, its dev score at the selection seed (several: their
    mean), its runs on ``seeds`` (dev and, when scored, test), and the margin over the
    runner-up method's pick on dev."""
    records = list(records)
    picks = method_picks(records, selection_seed)
    best = overall_pick(records, picks, selection_seed)
    if best is None:
        return "No cell has a dev score yet: nothing is picked."
    runs = recipes_of(records)
    dev = pick_dev(runs[best], selection_seed)
    summary = seed_summary(runs[best], seeds)
    text = (
        f"Pick (by dev {metric} at {seeds_text(selection_seed)}): {best} — dev {dev:.2f}; "
        f"over seeds {summary['seeds']}: dev {format_score(summary.get('dev'))}"
    )
    if "test" in summary:
        text += f", test {format_score(summary['test'])}"
    others = [
        (pick_dev(runs[key], selection_seed), key) for method, key in picks.items() if key != best
    ]
    if others:
        runner_dev, runner = max(others, key=lambda item: item[0])
        text += f". Runner-up: {runner} — dev {runner_dev:.2f} ({dev - runner_dev:+.2f})"
    return text + "."


def seeds_text(seeds: int | Sequence[int]) -> str:
    """``seed 0``, or ``the mean over seeds [0, 1]``."""
    if isinstance(seeds, int) or len(seeds) == 1:
        return f"seed {seeds if isinstance(seeds, int) else seeds[0]}"
    return f"the mean over seeds {list(seeds)}"
