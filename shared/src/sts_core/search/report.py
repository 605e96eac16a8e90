"""What a search's folder says of it: ``results.json`` (every cell, the picks, the
headline, the soups, the untrained model's scores), ``search.md`` (the same as tables, the
untrained model a row of the picks' and the cells' tables, and the command that trains the
pick again), ``search.png`` (the chart) and ``pick.yaml`` (the pick's recipe for
``sts-train``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from sts_core.command_files import write_json, write_text, writing
from sts_core.recipe_yaml import load_yaml
from sts_core.search.cells import RECIPE_FILE
from sts_core.search.peers import PEER_METHOD, loss_label
from sts_core.search.select import format_score, recipes_of, seed_summary, seeds_text
from sts_core.search.stages import first_stage

RESULTS_FILE = "results.json"
REPORT_FILE = "search.md"
CHART_FILE = "search.png"
PICK_FILE = "pick.yaml"

_CELL_COLUMNS = ("dev", "seconds", "steps", "peak_rss_mib", "peak_gpu_mib")


def pick_recipe(record: dict[str, Any]) -> dict[str, Any]:
    """The pick's recipe: its cell's, without the cell's output folder (the command line
    gives it)."""
    recipe, _ = load_yaml((Path(record["folder"]) / RECIPE_FILE).read_text(encoding="utf-8"))
    recipe.pop("output_dir", None)
    return recipe


def retrain_command(record: dict[str, Any], folder: Path) -> str:
    """The command that trains the pick again (for a peer row, what to train it with)."""
    if record["method_name"] == PEER_METHOD:
        return (
            f"# sentence-transformers' {loss_label(record['settings'])}: "
            f"SentenceTransformerTrainer with the training arguments of {folder / PICK_FILE}"
        )
    train = f"sts-train --method {record['method_name']} --config {folder / PICK_FILE} "
    train += f"--seed {record['seed']}"
    first = first_stage(record["settings"])
    if first is None:
        return f"{train} --output_dir <your model folder>"
    return (  # the two stages (sts_core.search.stages)
        f"{train} {' '.join(f'--{k} {v}' for k, v in first.settings().items())} "
        "--output_dir <stage 1 folder>\n"
        f"{train} --model_name_or_path <stage 1 folder> --output_dir <your model folder>"
    )


def cell_rows(
    records: Sequence[dict[str, Any]], untrained: dict[str, Any] | None = None
) -> list[str]:
    """Every cell's row, the untrained model's first (its seconds: the scoring's)."""
    header = "| cell | " + " | ".join(_CELL_COLUMNS) + " | test | note |"
    lines = [header, "|" + "---|" * (len(_CELL_COLUMNS) + 3)]
    for record in ([untrained] if untrained else []) + list(records):
        values = [_value(record.get(column)) for column in _CELL_COLUMNS]
        test, note = _value(record.get("test")), _escaped(record.get("error", ""))
        cells = " | ".join(values)
        lines.append(f"| {_escaped(record['key'])} | {cells} | {test} | {note} |")
    return lines


def _escaped(text: str) -> str:
    """A key's ``|`` inside a Markdown table cell."""
    return text.replace("|", "\\|")


def _value(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def pick_rows(
    records: Sequence[dict[str, Any]],
    picks: dict[str, str],
    best: str | None,
    seeds: list[int],
    untrained: dict[str, Any] | None = None,
) -> list[str]:
    """Each method's pick (mean ± sd over its seeds), and last the untrained model's
    scores, what the picks are read against."""
    runs = recipes_of(records)
    lines = [
        "| method | pick (by dev) | seeds | dev | test |",
        "|---|---|---|---|---|",
    ]
    for method, key in picks.items():
        summary = seed_summary(runs[key], seeds)
        mark = " **(overall pick)**" if key == best else ""
        lines.append(
            f"| {method}{mark} | {_escaped(key)} | {summary['seeds']} | "
            f"{format_score(summary.get('dev'))} | {format_score(summary.get('test'))} |"
        )
    if untrained:
        note = f" ({_escaped(untrained['error'])})" if untrained.get("error") else ""
        lines.append(
            f"| {untrained['key']} | `{_escaped(untrained['model'])}`, not trained{note} | – | "
            f"{_value(untrained.get('dev'))} | {_value(untrained.get('test'))} |"
        )
    return lines


def soup_rows(records: Sequence[dict[str, Any]], soups: Sequence[dict[str, Any]]) -> list[str]:
    """Each soup (one model) beside its runs (mean ± sd over the same seeds)."""
    runs = recipes_of(records)
    lines = [
        "| soup | dev | test | its runs: dev | its runs: test | note |",
        "|---|---|---|---|---|---|",
    ]
    for soup in soups:
        summary = seed_summary(runs.get(soup["recipe"], []), soup["seeds"])
        lines.append(
            f"| {_escaped(soup['key'])} (seeds {soup['seeds']}) | {_value(soup['dev'])} | "
            f"{_value(soup.get('test'))} | {format_score(summary.get('dev'))} | "
            f"{format_score(summary.get('test'))} | {_escaped(soup.get('error', ''))} |"
        )
    return lines


def write_chart(records: Sequence[dict[str, Any]], best: str | None, path: Path) -> bool:
    """Each scored cell's dev score as a bar (the overall pick's recipe in blue); False
    without matplotlib (``sts-core[plots]``) or without a scored cell."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    records = [r for r in records if r["dev"] is not None]
    if not records:
        return False
    labels = [r["key"] for r in records]
    figure, axes = plt.subplots(figsize=(9, 0.35 * len(labels) + 1.5))
    colours = ["tab:blue" if r["recipe"] == best else "tab:gray" for r in records]
    axes.barh(range(len(labels)), [r["dev"] for r in records], color=colours)
    axes.set_yticks(range(len(labels)), labels, fontsize=7)
    axes.invert_yaxis()
    low = min(r["dev"] for r in records)
    axes.set_xlim(left=low - max(1.0, 0.05 * abs(low)))
    axes.set_xlabel("dev score (the overall pick's recipe in blue)")
    figure.tight_layout()
    with writing(path, record=False) as temporary:
        figure.savefig(temporary, dpi=120, format="png")
    plt.close(figure)
    return True


def write_report(folder: Path, summary: dict[str, Any]) -> None:
    """``results.json``, ``search.md``, ``search.png`` and ``pick.yaml``."""
    records = summary["cells"]
    untrained = summary.get("untrained")
    best_record = summary.get("best_record")
    if best_record is not None:
        write_text(
            folder / PICK_FILE, yaml.safe_dump(pick_recipe(best_record), sort_keys=False), False
        )
    chart = bool(records) and write_chart(records, summary.get("best"), folder / CHART_FILE)
    write_json(
        folder / RESULTS_FILE, {k: v for k, v in summary.items() if k != "best_record"}, False
    )
    lines = [f"# sts-search: {folder}", "", summary["headline"], ""]
    if best_record is not None:
        lines += [
            "Train the pick again:",
            "",
            "```bash",
            retrain_command(best_record, folder),
            "```",
            "",
        ]
    lines += [
        f"Scorer: {summary['task']} {summary['metric']} on {summary['dev']} (selection, at "
        f"{seeds_text(summary.get('selection_seeds') or summary['selection_seed'])}); test: "
        f"{summary.get('test') or 'none'} (never used to choose).",
        "",
        "## The picks",
        "",
        *pick_rows(records, summary["picks"], summary.get("best"), summary["seeds"], untrained),
        "",
        "## Every cell",
        "",
        *cell_rows(records, untrained),
        "",
    ]
    if summary.get("soups"):
        lines += [
            "## Soups",
            "",
            "Each one model: the uniform average of its recipe's runs' embedding weights "
            "(heads left out), in `soups/`; chosen by nothing (the pick is made before).",
            "",
            *soup_rows(records, summary["soups"]),
            "",
        ]
    if chart:
        lines += [f"![dev score of every cell]({CHART_FILE})", ""]
    else:
        lines += [
            "No chart: no cell has a dev score, or matplotlib is not installed "
            "(`pip install sts-core[plots]`).",
            "",
        ]
    for title, items in (
        ("Not run (started again, the search trains them)", summary["not_run"]),
        ("Failed", summary["failures"]),
    ):
        if items:
            lines += [f"## {title}", "", *(f"- {item}" for item in items), ""]
    write_text(folder / REPORT_FILE, "\n".join(lines), record=False)
