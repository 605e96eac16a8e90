"""The search's report from its cells: recipes grouped and selected by dev, the summary
and grid tables with their cost, the headline against every peer row and the levers."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import _common as common
import quality

from grid_search import levers
from grid_search.cells import COST_KEYS, SEARCH_METHODS
from sts_core.search.cells import Cell, Recipe, settings_of
from sts_core.search.select import method_picks, recipes_of, selection_dev


def recipe_rows(cells: dict[str, dict]) -> dict[str, dict[str, Any]]:
    """Trained cells grouped by recipe: dev per seed, test per seed where scored."""
    recipes: dict[str, dict[str, Any]] = {}
    for record in cells.values():
        if "soup_of" in record or "dev" not in record:
            continue
        entry = recipes.setdefault(
            Cell.from_record(record).recipe.key,
            {
                **{k: record[k] for k in ("method", "variant", "epochs", "learning_rate")},
                "settings": record.get("settings", {}),
                "teacher_id": record.get("teacher_id"),
                "dev": {},
                "test": {},
                "cost": {},
            },
        )
        entry["dev"][record["seed"]] = record["dev"]
        if "test" in record:
            entry["test"][record["seed"]] = record["test"]
        entry["cost"][record["seed"]] = {k: record.get(k) for k in COST_KEYS}
    return recipes


TEACHER_COST_FILE = "sts_teacher_cost.json"  # written by quality_teacher.py


def teacher_seconds(settings: dict[str, str]) -> float | None:
    """The seconds it took to train the recipe's teacher (``quality_teacher.py`` records
    them in the teacher's folder): 0 without a teacher, None when no record is found (a
    teacher used as released, or a folder that is gone)."""
    name = settings.get("teacher_model")
    if not name:
        return 0.0
    models = Path(os.environ.get("STS_MODELS_DIR", "."))
    for folder in (Path(name), models / name):
        record = folder / TEACHER_COST_FILE
        if record.is_file():
            return float(json.loads(record.read_text(encoding="utf-8"))["train_seconds"])
        if (folder / "config.json").is_file():
            return 0.0  # a model folder without the record: used as released, not trained here
    return None


def cost_cells(recipe: dict, models: int = 1) -> list[str]:
    """The cost of ``models`` models of the recipe on this machine: wall seconds (the
    teacher's training once, plus each model's training, the teacher's encoding in it),
    optimizer steps of one model, and the peak resident memory of a training process."""
    costs = [c for c in recipe["cost"].values() if c.get("steps") is not None]  # recorded
    if not costs:
        return ["–", "–", "–"]
    student = sum(c["train_seconds"] for c in costs) / len(costs)
    teacher = teacher_seconds(recipe["settings"])
    seconds = f"{teacher + models * student:,.0f}" if teacher is not None else "–"
    steps = [c["steps"] for c in costs if c.get("steps") is not None]
    memory = [c["peak_rss_mb"] for c in costs if c.get("peak_rss_mb") is not None]
    return [
        seconds,
        f"{max(steps):,}" if steps else "–",
        f"{max(memory):,.0f}" if memory else "–",
    ]


def split_unidentified(recipes: dict[str, dict]) -> tuple[dict[str, dict], dict[str, dict]]:
    """The recipes without a teacher or with an identified one (``teacher_id``), and those
    trained with a teacher before cells recorded its id: their teacher's weights cannot be
    checked or trained with again, so neither can their cost."""
    known, unidentified = {}, {}
    for name, recipe in recipes.items():
        lost = recipe["settings"].get("teacher_model") and not recipe.get("teacher_id")
        (unidentified if lost else known)[name] = recipe
    return known, unidentified


def dev_records(recipes: dict[str, dict]) -> list[dict[str, Any]]:
    """The recipes' dev scores as ``sts-search``'s cell records (:mod:`sts_core.search.select`),
    a variant standing for a method."""
    return [
        {"method": recipe["variant"], "recipe": key, "seed": seed, "dev": dev}
        for key, recipe in recipes.items()
        for seed, dev in recipe["dev"].items()
    ]


def selected_recipes(recipes: dict[str, dict], selection_seeds: list[int]) -> dict[str, dict]:
    """Per variant, the recipe ``sts-search`` picks: the best mean dev over the selection
    seeds (recipes lacking one of those seeds are not candidates; a tie goes to the recipe
    met first), with that mean as ``selection_dev``."""
    records = dev_records(recipes)
    runs = recipes_of(records)
    return {
        variant: {**recipes[key], "selection_dev": selection_dev(runs[key], selection_seeds)}
        for variant, key in method_picks(records, selection_seeds).items()
    }


def summary_table(best: dict[str, dict], soups: dict[str, dict]) -> tuple[list, list]:
    header = [
        "method (dev-selected recipe)",
        "epochs",
        "lr",
        "dev (sel.)",
        *quality.TITLES,
        "Avg.",
        "seeds",
        "seconds",
        "steps",
        "peak MiB",
    ]
    rows = []
    ordered = sorted(best.values(), key=lambda r: -_test_mean(r))
    for recipe in ordered:
        tests = list(recipe["test"].values())
        cells = (
            [scores_cell([t[k] for t in tests]) for k in (*quality.TASKS, "avg")]
            if tests
            else ["–"] * (len(quality.TASKS) + 1)
        )
        rows.append(
            [
                label_of(recipe),
                f"{recipe['epochs']:g}",
                f"{recipe['learning_rate']:g}",
                f"{recipe['selection_dev']:.2f}",
                *cells,
                len(tests),
                *cost_cells(recipe),
            ]
        )
        soup = soups.get(recipe_key_of(recipe))
        if soup:
            test = soup["test"]
            rows.append(
                [
                    f"↳ soup of seeds {soup['soup_of']} (one model)",
                    "",
                    "",
                    f"{soup['dev']:.2f}",
                    *(f"{test[k]:.2f}" for k in (*quality.TASKS, "avg")),
                    1,
                    *cost_cells(recipe, len(soup["soup_of"])),
                ]
            )
    return header, rows


def _test_mean(recipe: dict) -> float:
    tests = list(recipe["test"].values())
    return sum(t["avg"] for t in tests) / len(tests) if tests else float("-inf")


def scores_cell(values: list[float]) -> str:
    mean, sd = common.mean_sd(values)
    return f"{mean:.2f}" if len(values) < 2 else f"{mean:.2f} ± {sd:.2f}"


def typed_recipe(entry: dict[str, Any]) -> Recipe:
    """A recipe's fields of a cell record or of a :func:`recipe_rows` entry as a
    :class:`~sts_core.search.cells.Recipe`."""
    named = settings_of(entry.get("settings") or {})
    return Recipe(entry["method"], named, entry["epochs"], entry["learning_rate"])


def label_of(entry: dict[str, Any] | Recipe) -> str:
    """The table's name of a recipe's method and named settings: the method's label (its
    key when it has none), then the settings."""
    recipe = entry if isinstance(entry, Recipe) else typed_recipe(entry)
    known = SEARCH_METHODS.get(recipe.method)
    label = known.label if known else recipe.method
    return f"{label} [{recipe.named}]" if recipe.settings else label


def grid_table(recipes: dict[str, dict]) -> tuple[list, list]:
    header = ["method", "epochs", "lr", "dev per seed", "dev mean", "test avg (seeds)"]
    rows = []
    for key in sorted(
        recipes,
        key=lambda k: (recipes[k]["variant"], recipes[k]["epochs"], recipes[k]["learning_rate"]),
    ):
        recipe = recipes[key]
        devs = ", ".join(f"{seed}: {score:.2f}" for seed, score in sorted(recipe["dev"].items()))
        mean = sum(recipe["dev"].values()) / len(recipe["dev"])
        tests = seed_test_averages(recipe)
        test = f"{scores_cell(tests)} ({len(tests)})" if tests else "–"
        rows.append(
            [
                label_of(recipe),
                f"{recipe['epochs']:g}",
                f"{recipe['learning_rate']:g}",
                devs,
                f"{mean:.2f}",
                test,
            ]
        )
    return header, rows


def headline(best: dict[str, dict], soups: dict[str, dict]) -> list[str]:
    """Our pick, by dev alone (among our dev-selected recipes, dev averaged over every seed
    trained, and their soups), against every peer row (each peer variant's dev-selected
    recipe: with or without the teacher, distilling or not); the target is the strongest
    peer row's test average + 0.5. Our rows with a teacher that no scored peer row was given
    are not candidates (the peer gets every teacher ours get)."""
    peers = [
        (label_of(r), r, seed_test_averages(r))
        for r in best.values()
        if r["method"].startswith("st-") and r["test"]
    ]
    given = {p[1]["settings"].get("teacher_model") for p in peers} | {None}
    ours, left_out = _our_candidates(best, soups, given)
    if not ours or not peers:
        return []
    dev, label, recipe, test, score = max(ours, key=lambda c: c[0])
    peers.sort(key=lambda p: -sum(p[2]) / len(p[2]))
    runs = seed_test_averages(recipe)
    of_runs = f" (its runs: {scores_cell(runs)})" if label.startswith("soup") else ""
    lines = [
        "## Headline: our pick by STS-B dev against every peer row",
        "",
        f"- ours: {label}, {recipe['epochs']:g} epoch(s), lr {recipe['learning_rate']:g} — "
        f"dev {dev:.2f}, test Avg. {test}{of_runs}",
        *_left_out_line(left_out),
        "",
        "| peer row (its dev-selected recipe) | epochs | lr | test Avg. | ours − peer |",
        "|---|---|---|---|---|",
    ]
    for peer_label, peer, tests in peers:
        gap = score - sum(tests) / len(tests)
        lines.append(
            f"| {peer_label} | {peer['epochs']:g} | {peer['learning_rate']:g} | "
            f"{scores_cell(tests)} | {gap:+.2f} |"
        )
    strongest = sum(peers[0][2]) / len(peers[0][2])
    gap = score - strongest
    verdict = "reached" if gap >= 0.5 else "not reached"
    lines += [
        "",
        f"Ours − the strongest peer row ({peers[0][0]}) on the 7-task Avg.: {gap:+.2f} "
        f"(target ≥ +0.50: {verdict}); the mean of our pick's runs − it: "
        f"{sum(runs) / len(runs) - strongest:+.2f}.",
        "",
    ]
    return lines


def _our_candidates(
    best: dict[str, dict], soups: dict[str, dict], given: set[str | None]
) -> tuple[list[tuple], set[str]]:
    """Our scored recipes and their soups as (dev, label, recipe, test text, test avg), but
    not those with a teacher outside ``given``; and the teachers so left out."""
    ours, left_out = [], set()
    for recipe in best.values():
        if not recipe["method"].startswith("ours-") or not recipe["test"]:
            continue
        if recipe["settings"].get("teacher_model") not in given:
            left_out.add(recipe["settings"]["teacher_model"])
            continue
        tests = seed_test_averages(recipe)
        dev = sum(recipe["dev"].values()) / len(recipe["dev"])
        ours.append((dev, label_of(recipe), recipe, scores_cell(tests), sum(tests) / len(tests)))
        soup = soups.get(recipe_key_of(recipe))
        if soup:
            label = f"soup of {label_of(recipe)}"
            ours.append(
                (soup["dev"], label, recipe, f"{soup['test']['avg']:.2f}", soup["test"]["avg"])
            )
    return ours, left_out


def _left_out_line(teachers: set[str]) -> list[str]:
    if not teachers:
        return []
    names = ", ".join(f"`{t}`" for t in sorted(teachers))
    return [f"- not candidates: our rows with a teacher no peer row was given ({names})"]


def lever_lines(recipes: dict[str, dict], soups: dict[str, dict]) -> list[str]:
    """Each lever's test average on and off (mean over the seeds scored, their count) and the
    difference; a lever whose recipes are not both scored says so."""
    lines = [
        "## Levers: each on and off",
        "",
        "| lever | on: recipe | test Avg. on (seeds) | off: recipe | test Avg. off (seeds) "
        "| on − off |",
        "|---|---|---|---|---|---|",
    ]
    for lever in levers.LEVERS:
        off = seed_test_averages(recipes.get(lever.off.key))
        on = (
            _soup_scored(soups.get(lever.on.key))
            if lever.soup
            else seed_test_averages(recipes.get(lever.on.key))
        )
        difference = f"{sum(on) / len(on) - sum(off) / len(off):+.2f}" if on and off else "–"
        on_name = ("soup of " if lever.soup else "") + _recipe_text(lever.on)
        lines.append(
            f"| {lever.name} | {on_name} | {_scores_text(on)} | {_recipe_text(lever.off)} | "
            f"{_scores_text(off)} | {difference} |"
        )
    return [*lines, ""]


def _recipe_text(recipe: Recipe) -> str:
    """A recipe for a table cell: its label, epochs and learning rate, no ``|``."""
    return f"{label_of(recipe)}, {recipe.budget}"


def seed_test_averages(recipe: dict | None) -> list[float]:
    """A recipe's seven-task test average per scored seed ([] for no recipe)."""
    return [t["avg"] for t in recipe["test"].values()] if recipe else []


def _soup_scored(soup: dict | None) -> list[float]:
    return [soup["test"]["avg"]] if soup else []


def _scores_text(scores: list[float]) -> str:
    return f"{scores_cell(scores)} ({len(scores)})" if scores else "not measured"


def teacher_text(name: str) -> str:
    seconds = teacher_seconds({"teacher_model": name})
    if seconds is None:
        return "its training not recorded (no seconds given for its rows)"
    if seconds == 0:
        return "used as released (no training)"
    return f"{seconds:,.0f} s of training"


def teacher_note(best: dict[str, dict]) -> str:
    """Which teachers the rows used and what training each took (its seconds are in the
    rows' cost)."""
    teachers = sorted(
        {r["settings"]["teacher_model"] for r in best.values() if "teacher_model" in r["settings"]}
    )
    parts = [f"`{t}`: {teacher_text(t)}" for t in teachers]
    return ("Teachers: " + "; ".join(parts) + ".") if parts else ""


def recipe_key_of(recipe: dict) -> str:
    """The key of a :func:`recipe_rows` entry's recipe (:attr:`Recipe.key`)."""
    return typed_recipe(recipe).key


def soups_of(cells: dict[str, dict]) -> dict[str, dict]:
    """The soups' records by their recipe's key (a soup's record holds its first seed's
    cell's fields)."""
    return {Cell.from_record(r).recipe.key: r for r in cells.values() if "soup_of" in r}


def report_markdown(cells: dict[str, dict], args: argparse.Namespace, info: dict) -> str:
    recipes = recipe_rows(cells)
    best = selected_recipes(recipes, args.select_seeds)
    soups = soups_of(cells)
    tested, unidentified = split_unidentified(
        {variant: recipe for variant, recipe in best.items() if recipe["test"]}
    )
    header, rows = summary_table(tested, soups)
    old_header, old_rows = summary_table(unidentified, soups)
    dev_only = {variant: recipe for variant, recipe in best.items() if not recipe["test"]}
    dev_header, dev_rows = summary_table(dev_only, {})
    grid_header, grid_rows = grid_table(recipes)
    steps = "epochs as listed" if args.max_steps < 0 else f"{args.max_steps} steps"
    lines = [
        "# Quality: equal-budget recipe search, selected on STS-B dev",
        "",
        f"Mode `{args.mode}`: {args.model}; filtered STS-B + SICK-R train; batch "
        f"{args.batch_size}, {steps}, weight decay 0.01, 10 % warm-up, mean pooling; every "
        f"method on the same grid of epochs × learning rates; selection: best mean STS-B dev "
        f"Spearman over seeds {args.select_seeds}; the selected recipe is then trained on "
        f"seeds {args.seeds} and scored on the seven test tasks (SentEval protocol, 'all', "
        f"Spearman × 100). Tables hold every cell of `{Path(args.cells).name}` (searches run "
        "at different times add up).",
        "",
        common.sts_scored_by_line() + " STS-B dev selection: the same cosine.",
        "",
        common.machine_markdown(info),
        "",
        *headline(best, soups),
        *lever_lines(recipes, soups),
        "## Best dev-selected recipe per method",
        "",
        common.markdown_table(header, rows),
        "",
        *_unidentified_lines(old_header, old_rows),
        "Searched on dev only (`--grid-only`; no test score yet, so not in the headline):",
        "",
        common.markdown_table(dev_header[:4] + dev_header[-3:], [r[:4] + r[-3:] for r in dev_rows]),
        "",
        "Mean ± sd over seeds. A soup row is one model: the uniform average of the selected "
        "recipe's seed runs (`sts-soup`), selected by nothing but its recipe. A peer row with "
        "`teacher_model` trains on the pairs the same teacher relabels and adds, made with "
        "sentence-transformers' own API (`sts_core.search.peer_teacher`), or distils the "
        "teacher's embeddings (`EmbedDistillLoss`).",
        "",
        "Cost, on this machine: *seconds* is the wall time of the whole recipe for one model "
        "(a soup: for all its seeds) — the teacher's training once (recorded by "
        "`quality_teacher.py` in the teacher's folder), plus each model's training in its own "
        "process (model loading, the teacher's encoding of the training sentences, the "
        "optimizer steps; not the data loading or the scoring); *steps*: optimizer steps of "
        "one model; *peak MiB*: the training process's peak resident memory; – where not "
        "recorded (cells trained before the script recorded their cost, a teacher whose "
        "training was not recorded). " + teacher_note(best),
        "",
        "## Every cell (STS-B dev; test only where a recipe was selected)",
        "",
        common.markdown_table(grid_header, grid_rows),
    ]
    return "\n".join(lines)


def _unidentified_lines(header: list, rows: list) -> list[str]:
    if not rows:
        return []
    return [
        "Trained with a teacher before the cells recorded its weights' id and the cost (its "
        "folder is gone; no peer row had it, so not candidates; no cost can be measured):",
        "",
        common.markdown_table(header[:-3], [row[:-3] for row in rows]),
        "",
    ]
