"""A second search's cells against the stored ones, cell by cell: does the table reproduce?

``quality_search.py --compare FRESH`` reads the cells of a second run (a fresh ``--cells``
file, e.g. the same grid trained again through ``sts-search``) and the stored cells
(``--cells``), and writes ``<output-dir>/quality_search_reproduced.{md,json}``: for every cell
both hold, the dev score and the test average of each and their difference, the seconds of
each, and per method the pick each makes by dev over the recipes the second run trained
(the stored file's cells outside that grid take no part, so the same selection is made on
both sides). Cells only one side holds are listed, never dropped silently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import _common as common

from grid_search.report import recipe_rows, selected_recipes, typed_recipe
from sts_core.search.cells import Cell, Recipe


def shared_keys(stored: dict[str, dict], fresh: dict[str, dict]) -> list[str]:
    """The cells both files hold, in the fresh file's order."""
    return [key for key in fresh if key in stored]


def test_avg_of(record: dict[str, Any]) -> float | None:
    test = record.get("test")
    return None if not test else test["avg"]


def cell_row(key: str, stored: dict[str, Any], fresh: dict[str, Any]) -> dict[str, Any]:
    """One cell on both sides: dev and test average (None where not scored) and seconds."""
    row: dict[str, Any] = {"cell": key}
    for score, read in (("dev", lambda r: r.get("dev")), ("test_avg", test_avg_of)):
        old, new = read(stored), read(fresh)
        row[score] = {
            "stored": old,
            "fresh": new,
            "diff": None if old is None or new is None else new - old,
        }
    row["train_seconds"] = {
        "stored": stored.get("train_seconds"),
        "fresh": fresh.get("train_seconds"),
    }
    return row


def picks(cells: dict[str, dict], recipes: set[str], selection_seeds: list[int]) -> dict:
    """Per variant, the recipe picked by dev among the recipe keys ``recipes`` (report's
    selection)."""
    rows = {key: row for key, row in recipe_rows(cells).items() if key in recipes}
    chosen = selected_recipes(rows, selection_seeds)
    return {variant: typed_recipe(recipe) for variant, recipe in chosen.items()}


def compare(
    stored: dict[str, dict], fresh: dict[str, dict], selection_seeds: list[int]
) -> dict[str, Any]:
    """The comparison: the shared cells' rows, both sides' picks over the fresh run's grid,
    the cells only one side holds (the stored ones within the fresh run's recipes) and the
    largest differences."""
    rows = [cell_row(key, stored[key], fresh[key]) for key in shared_keys(stored, fresh)]
    grid = set(recipe_rows(fresh))
    old, new = picks(stored, grid, selection_seeds), picks(fresh, grid, selection_seeds)
    variants = sorted(set(old) | set(new))
    return {
        "cells": rows,
        "picks": {
            variant: {side: _key(chosen.get(variant)) for side, chosen in sides(old, new)}
            for variant in variants
        },
        "pick_budgets": {
            variant: {side: _budget(chosen.get(variant)) for side, chosen in sides(old, new)}
            for variant in variants
        },
        "only_fresh": [key for key in fresh if key not in stored],
        "only_stored": [
            key
            for key, record in stored.items()
            if key not in fresh and Cell.from_record(record).recipe.key in grid
        ],
        "largest_diff": {score: largest_diff(rows, score) for score in ("dev", "test_avg")},
    }


def sides(old: dict, new: dict) -> tuple[tuple[str, dict], ...]:
    return (("stored", old), ("fresh", new))


def _key(recipe: Recipe | None) -> str | None:
    return None if recipe is None else recipe.key


def _budget(recipe: Recipe | None) -> str | None:
    """A picked recipe without its variant: ``epochs 2, lr 4e-05`` (None for no pick)."""
    return None if recipe is None else recipe.budget


def largest_diff(rows: list[dict[str, Any]], score: str) -> float | None:
    diffs = [abs(row[score]["diff"]) for row in rows if row[score]["diff"] is not None]
    return max(diffs, default=None)


def second_run(cells_path: str) -> dict[str, Any] | None:
    """The second run's report (``quality_search.json`` beside its cells file, written by the
    run that filled it): its settings and machine; None when there is none."""
    cells = Path(cells_path).expanduser().resolve()
    try:
        report = json.loads((cells.parent / "quality_search.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    settings = report.get("settings") or {}
    if Path(settings.get("cells", "")).expanduser().resolve() != cells:
        return None  # a report of another cells file
    return {"settings": settings, "machine": report.get("machine") or {}}


def run_text(run: dict[str, Any]) -> str:
    """The second run's command (its grid and seeds) and where it ran."""
    settings, machine = run["settings"], run["machine"]
    flags = [f"--methods {' '.join(settings['methods'])}"]
    flags.append(f"--epochs {' '.join(f'{e:g}' for e in settings['epochs'])}")
    flags.append(f"--learning-rate {' '.join(f'{r:g}' for r in settings['learning_rate'])}")
    flags.append(f"--seeds {' '.join(str(seed) for seed in settings['seeds'])}")
    flags += [f"--set {pair}" for pair in settings.get("set_pairs", [])]
    flags.append(f"--cells {settings['cells']}")  # a fresh file: the stored one trains nothing
    flags += [
        f"--{key.replace('_', '-')} {settings[key]}"
        for key in ("output_dir", "weights_dir")
        if settings.get(key)
    ]
    if settings.get("threads"):
        flags.append(f"--threads {settings['threads']}")
    if settings.get("soup"):
        flags.append("--soup")
    where = ", ".join(
        f"{key} {machine[key]}" for key in ("torch", "sentence-transformers") if key in machine
    )
    wall = machine.get("wall_seconds")
    return (
        f"The second run: `quality_search.py {' '.join(flags)}` ({common.fmt_or_na(wall)} s "
        f"wall, {machine.get('logical_cpus', '?')} logical CPUs, {where})."
    )


def render(comparison: dict[str, Any], stored_path: str, fresh_path: str) -> str:
    """The comparison as Markdown: the picks, then every shared cell, then what one side
    lacks."""
    fmt = common.fmt_or_na
    lines = [
        "# The quality search reproduced",
        "",
        f"Stored cells: `{stored_path}`; the second run's: `{fresh_path}` "
        "(`quality_search.py --compare`, see docs/search.md for the commands). Scores are "
        "Spearman × 100; a pick is made by dev alone over the recipes the second run trained.",
        "",
        *([run_text(comparison["second_run"]), ""] if comparison.get("second_run") else []),
        "## Picks",
        "",
        common.markdown_table(
            ["method", "stored pick", "second run's pick", "same"],
            [
                (
                    escaped(variant),
                    budgets["stored"] or "–",
                    budgets["fresh"] or "–",
                    "yes" if p["stored"] == p["fresh"] else "**no**",
                )
                for (variant, p), budgets in zip(
                    comparison["picks"].items(), comparison["pick_budgets"].values(), strict=True
                )
            ],
        ),
        "",
        "## Cells",
        "",
        common.markdown_table(
            [
                "cell",
                "dev stored",
                "dev again",
                "Δ dev",
                "test avg stored",
                "test avg again",
                "Δ test",
                "seconds stored / again",
            ],
            [_cell_cells(row, fmt) for row in comparison["cells"]],
        ),
        "",
        f"Largest |Δ dev|: {fmt(comparison['largest_diff']['dev'], 4)}; largest |Δ test avg|: "
        f"{fmt(comparison['largest_diff']['test_avg'], 4)}.",
    ]
    for title, key in (("Only in the second run", "only_fresh"), ("Only stored", "only_stored")):
        if comparison[key]:
            lines += ["", f"{title}: " + "; ".join(f"`{k}`" for k in comparison[key]) + "."]
    return "\n".join(lines) + "\n"


def _cell_cells(row: dict[str, Any], fmt: Any) -> tuple[str, ...]:
    dev, test, seconds = row["dev"], row["test_avg"], row["train_seconds"]
    return (
        escaped(row["cell"]),
        fmt(dev["stored"], 4),
        fmt(dev["fresh"], 4),
        signed(dev["diff"], 4),
        fmt(test["stored"], 4),
        fmt(test["fresh"], 4),
        signed(test["diff"], 4),
        f"{fmt(seconds['stored'])} / {fmt(seconds['fresh'])}",
    )


def escaped(text: str) -> str:
    """Text for a Markdown table's cell (a key's ``|`` would end the cell)."""
    return text.replace("|", "\\|")


def signed(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


#: the stem of the comparison's report, beside the search's
COMPARISON = "quality_search_reproduced"


def write_comparison(args: Any) -> Path:
    """``--compare``: the stored cells (``--cells``) against ``args.compare``'s, written to
    ``<output-dir>/quality_search_reproduced.{md,json}``."""
    stored = read_cells(args.cells)
    fresh = read_cells(args.compare)
    comparison = {
        **compare(stored, fresh, args.select_seeds),
        "second_run": second_run(args.compare),
    }
    stem = Path(args.stem).with_name(COMPARISON)
    paths = shown(args.cells), shown(args.compare)
    common.write_json(stem, {"stored": paths[0], "fresh": paths[1], **comparison})
    common.write_markdown(stem, render(comparison, *paths))
    return stem


def shown(path: str) -> str:
    """A path as the report shows it: relative to the repository when inside it."""
    resolved = Path(path).expanduser().resolve()
    root = common.RESULTS_DIR.resolve().parents[1]
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(resolved)


def read_cells(path: str) -> dict[str, dict]:
    """A cells file's cells; BenchmarkError naming the file when it is missing or not one."""
    file = Path(path).expanduser()
    try:
        return json.loads(file.read_text(encoding="utf-8"))["cells"]
    except FileNotFoundError:
        raise common.BenchmarkError(f"{file}: no such cells file") from None
    except (ValueError, KeyError, TypeError) as error:
        raise common.BenchmarkError(f"{file}: not a cells file ({error})") from None
