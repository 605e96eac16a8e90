"""A package's training recipe, in variants and seeds: the seven-task table of each.

Each run is ``python packages/<method>/train.py --config <recipe> <variant's flags> --seed S``
in a fresh process, into its own output folder; its ``metrics.json`` gives the final STS
table (SentEval protocol, 'all', Spearman × 100, all test pairs) and the dev score. A row is
a variant, mean ± sd over seeds; the first row is the model before training (``--base``).
This is how the packages' READMEs compare their losses and stages on a CPU recipe.

Commands (from the repository root; STS_DATA_DIR and STS_MODELS_DIR must be set)::

    uv run python benchmarks/recipes.py --name regression_nli \\
        --recipe packages/regression/configs/cpu_minilm_nli.yaml --base all-MiniLM-L6-v2 \\
        --variant "Smooth K2 (k 2, x0 0.25)=" \\
        --variant "Translated ReLU (k 2.5, x0 0.25)=--loss translated_relu --k 2.5" \\
        --seeds 0 1 2
    uv run python benchmarks/recipes.py --smoke --output-dir /tmp/bench   # for tests

A variant is ``label=flags``: the flags go after ``--config`` (``--config other.yaml`` among
them replaces the recipe). Results: ``benchmarks/results/<name>.{md,json}`` (or
``--output-dir``); each run's folder is removed unless ``--keep-runs DIR`` keeps them there.
With ``--keep-runs``, a run whose folder already holds its ``metrics.json`` and a
``recipe-run.json`` naming the same command, trained on the same content (the recipe, the
script and every file the recipe or the flags name, recorded there; the model and tables
the run recorded in its ``metrics.json``), is read, not rerun (an interrupted benchmark);
a run whose command or inputs differ is rerun, saying why.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as common

from sts_core.command_files import changed_identity, content_identity, write_text
from sts_core.names import STS_TASKS

REPO = Path(__file__).resolve().parents[1]
TITLES = common.STS_TITLES
SMOKE_SETTINGS = [  # seconds: a tiny model built here, the fixture pairs, 40 pairs per task
    "--max_steps",
    "2",
    "--per_device_train_batch_size",
    "4",
    "--eval_strategy",
    "no",
    "--save_strategy",
    "no",
    "--load_best_model_at_end",
    "false",
    "--eval_dataset",
    "none",
    "--max_train_samples",
    "8",
]


def parse_variant(text: str) -> tuple[str, list[str]]:
    label, separator, flags = text.partition("=")
    if not separator or not label.strip():
        raise common.BenchmarkError(f"--variant {text!r}: write label=flags (flags may be empty)")
    return label.strip(), shlex.split(flags)


def train_script(recipe: Path) -> Path:
    """``packages/<method>/train.py`` of the package the recipe belongs to."""
    script = recipe.resolve().parent.parent / "train.py"
    if not script.is_file():
        raise common.BenchmarkError(f"{recipe}: no train.py beside its configs/ folder ({script})")
    return script


RUN_RECORD = "recipe-run.json"  # the command and wall time of a finished run, in its folder


def run_once(
    script: Path,
    recipe: Path,
    flags: list[str],
    seed: int,
    output_dir: Path,
    extra: list[str],
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train one variant with one seed in a fresh process; its scores and wall time. A run
    already finished in ``output_dir`` with the same command on the same ``inputs`` (their
    content identities: :func:`run_identities`) is read instead."""
    command = [
        sys.executable,
        str(script),
        "--config",
        str(recipe),
        *flags,
        *extra,
        "--seed",
        str(seed),
        "--output_dir",
        str(output_dir),
        "--overwrite_output_dir",
        "true",
    ]
    inputs = inputs or {}
    finished = finished_run(output_dir, command, inputs)
    if finished is not None:
        print(f"    read, not rerun: {output_dir / RUN_RECORD}", flush=True)
        return finished
    start = time.perf_counter()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise common.BenchmarkError(
            f"{' '.join(command)} failed (exit {result.returncode}): "
            + " ".join(result.stderr.strip().splitlines()[-3:])
        )
    record = {"command": command[1:], "seconds": round(seconds, 1), "inputs": inputs}
    # recorded in the run folder's ledger: a later run into the folder
    # (--overwrite_output_dir) removes it as a file sts-core wrote
    write_text(output_dir / RUN_RECORD, json.dumps(record, indent=2))
    metrics_path = output_dir / "metrics.json"
    if not metrics_path.is_file():
        raise common.BenchmarkError(f"{' '.join(command)} wrote no {metrics_path}")
    return scores_of_run(record, json.loads(metrics_path.read_text(encoding="utf-8")))


def finished_run(
    output_dir: Path, command: list[str], inputs: dict[str, Any]
) -> dict[str, Any] | None:
    """The scores of a run finished in ``output_dir`` by ``command`` (the interpreter aside)
    on ``inputs`` as they are now (:func:`rerun_reason`), or None when there is none (a
    run to do again, printed with the reason)."""
    record_path, metrics_path = output_dir / RUN_RECORD, output_dir / "metrics.json"
    if not (record_path.is_file() and metrics_path.is_file()):
        return None
    record = json.loads(record_path.read_text(encoding="utf-8"))
    metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    reason = rerun_reason(record, metrics, command, inputs)
    if reason is not None:
        print(f"    rerun, {reason}: {output_dir}", flush=True)
        return None
    return scores_of_run(record, metrics)


def scores_of_run(record: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """A run's scores from its record (:data:`RUN_RECORD`) and its ``metrics.json``."""
    return scores_of(metrics["sts"], record["seconds"], metrics.get("dev", {}))


def rerun_reason(
    record: dict[str, Any], metrics: dict[str, Any], command: list[str], inputs: dict[str, Any]
) -> str | None:
    """Why a finished run (its record and ``metrics.json``) is no run of ``command`` on
    ``inputs``: another command, a record without inputs (an older one), an input of the
    record or of the run's own (``metrics.json``'s ``inputs``: the model, the tables it
    read) whose content changed since; None when it is one."""
    if record.get("command") != command[1:]:
        return "its command differs"
    if "inputs" not in record:
        return "its record names no inputs (an older run)"
    recorded = {**record["inputs"], **(metrics.get("inputs") or {})}
    for name, identity in recorded.items():
        how = changed_identity(identity, inputs.get(name) or current_identity(identity))
        if how:
            return f"its input {name} changed since ({how})"
    return None


def current_identity(recorded: dict[str, Any]) -> dict[str, Any]:
    """The content identity now of what ``recorded`` (an identity) is of: a path or a hub id."""
    return content_identity(recorded.get("path") or recorded.get("hub") or "")


def scores_of(report: dict[str, Any], seconds: float, dev: dict[str, Any]) -> dict[str, Any]:
    scores = {task: report["tasks"][task]["spearman"]["all"] for task in report["tasks"]}
    scores["scorer"] = scorer_of(report)
    scores["avg"] = report["average"]["spearman_all"]
    scores["avg_wmean"] = report["average"].get("spearman_wmean", float("nan"))
    scores["seconds"] = round(seconds, 1)
    primary = [key for key in dev if key.endswith("_spearman")]
    if primary:
        scores["dev_spearman"] = dev[primary[0]]
    return scores


def base_scores(model: str, tasks: list[str]) -> dict[str, Any]:
    """The model before training, scored as the runs' final evaluation scores it."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.evaluation import STSEvaluator

    start = time.perf_counter()
    encoder = SentenceEncoder.from_pretrained(model)
    report = STSEvaluator(
        data_dir=common.data_dir(), tasks=tasks, show_progress_bar=False
    ).evaluate(encoder, model_name=model)
    return scores_of(report.to_dict(), time.perf_counter() - start, {})


def summarise(label: str, runs: dict[int, dict[str, Any]], tasks: list[str]) -> dict[str, Any]:
    keys = [*tasks, "avg", "avg_wmean", "dev_spearman", "seconds"]
    summary = {
        key: common.mean_sd([run[key] for run in runs.values()])
        for key in keys
        if all(key in run for run in runs.values())
    }
    scorers = sorted({run.get("scorer", UNRECORDED_SCORER) for run in runs.values()})
    return {"label": label, "seeds": runs, "summary": summary, "scorer": ", ".join(scorers)}


#: a run whose metrics.json was written before STS reports recorded their scorer
UNRECORDED_SCORER = "not recorded"


def scorer_of(report: dict[str, Any]) -> str:
    """What scored a run's STS table (``STSReport.scored_by``: the cosine of the embeddings,
    or a pair-scoring head), from its ``scorer`` field; ``UNRECORDED_SCORER`` for a report
    written before the field existed."""
    from sts_core.evaluation.sts import describe_scorer

    scorer = report.get("scorer")
    if not scorer:
        return UNRECORDED_SCORER
    described = describe_scorer(scorer)
    unused = report.get("unused_pair_scorer")
    return described + (f" (the model's pair_scorer head {unused!r} is not used)" if unused else "")


def scored_by_line(rows: list[dict[str, Any]]) -> str:
    """The table's ``Scored by`` line: one scorer for every row, or each row's."""
    scorers = {row.get("scorer", UNRECORDED_SCORER) for row in rows}
    source = "each run's metrics.json, `sts.scorer`"
    if len(scorers) == 1:
        return f"Scored by: {scorers.pop()} ({source})."
    each = "; ".join(f"{row['label']}: {row.get('scorer', UNRECORDED_SCORER)}" for row in rows)
    return f"Scored by ({source}): {each}."


def report_markdown(rows: list[dict[str, Any]], args: argparse.Namespace, info: dict) -> str:
    tasks = args.tasks
    base = next((row for row in rows if row.get("base")), None)
    header = ["", *(TITLES[STS_TASKS.index(t)] for t in tasks), "Avg.", "Avg. (wmean)"]
    header += ["Δ avg vs before", "STS-B dev", "seeds", "s / run"]
    lines = []
    for row in rows:
        seeds = len(row["seeds"])
        cell = lambda key, row=row, seeds=seeds: _cell(row["summary"].get(key), seeds)  # noqa: E731
        delta = (
            row["summary"]["avg"][0] - base["summary"]["avg"][0]
            if base and not row.get("base")
            else 0.0
        )
        lines.append(
            [
                row["label"],
                *(cell(task) for task in tasks),
                cell("avg"),
                cell("avg_wmean"),
                f"{delta:+.2f}",
                cell("dev_spearman"),
                seeds,
                f"{row['summary']['seconds'][0]:.0f}",
            ]
        )
    variants = "; ".join(f"`{label}`: `{flags}`" for label, flags in args.variant_texts)
    return "\n".join(
        [
            f"# {args.name}: `{args.recipe}`, {len(args.seeds)} seed(s) {args.seeds}",
            "",
            f"Each run: `python {shown_path(args.script)} --config {args.recipe} <flags> "
            "--seed S` in a "
            "fresh process; the final STS table of its metrics.json (SentEval protocol, 'all', "
            "Spearman × 100, all test pairs). Variants (flags after the recipe): " + variants + ".",
            "",
            common.machine_markdown(info),
            "",
            scored_by_line(rows),
            "",
            common.markdown_table(header, lines),
            "",
            "Mean ± sd over seeds. *Avg.* is the mean of the seven 'all' numbers; *Avg. "
            "(wmean)* the same with SentEval's 'wmean'. *STS-B dev*: the selected model's dev "
            "Spearman (cosine). *s / run*: wall seconds of one run (training, selection, final "
            "evaluation, loading).",
        ]
    )


def shown_path(path: str) -> str:
    """``path`` relative to the repository when it lies inside it."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else path


def _cell(value: tuple[float, float] | None, seeds: int) -> str:
    if value is None:
        return ""
    mean, sd = value
    return f"{mean:.2f}" if seeds < 2 else f"{mean:.2f} ± {sd:.2f}"


def smoke_setup(args: argparse.Namespace, folder: Path) -> list[str]:
    """A tiny model and fixture recipe for ``--smoke`` (the regression package's train.py);
    the flags that make runs take seconds."""
    from sts_core.testing import make_tiny_bert, write_fixture_recipe

    model = make_tiny_bert(folder / "tiny-bert")
    fixtures = REPO / "shared" / "tests" / "fixtures" / "training"
    args.script = str(REPO / "packages" / "regression" / "train.py")
    recipe = write_fixture_recipe(
        folder / "smoke-recipe.yaml",
        "smoke",
        model,
        fixtures / "sts-train.csv",
        fixtures / "sts-dev.csv",
        folder / "unused",
        final_sts_tasks="[sts12, stsb]",
    )
    args.recipe, args.base, args.tasks = str(recipe), str(model), ["sts12", "stsb"]
    args.variant = args.variant or ["smooth_k2=--loss smooth_k2", "l1=--loss l1"]
    args.seeds = args.seeds or [0]
    return [*SMOKE_SETTINGS, "--final_sts_tasks", "sts12", "stsb"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.benchmark_parser(__doc__)
    parser.add_argument("--name", default="recipes", help="result file name")
    parser.add_argument("--recipe", help="the package recipe (YAML) every variant starts from")
    parser.add_argument("--variant", action="append", help="label=flags (repeatable)")
    parser.add_argument("--seeds", nargs="+", type=common.NON_NEGATIVE_INT)
    parser.add_argument("--base", help="model scored before training (name or folder)")
    parser.add_argument("--tasks", nargs="+", default=list(STS_TASKS), choices=STS_TASKS)
    parser.add_argument("--script", help="the train.py to run (default: the recipe's package's)")
    parser.add_argument("--keep-runs", help="keep every run's output folder under this folder")
    parser.add_argument("--output-dir", help="default: benchmarks/results")
    parser.add_argument("--smoke", action="store_true", help="seconds: tiny model, fixtures")
    args = parser.parse_args(argv)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sts-bench-recipes-") as scratch:
        runs_root = Path(args.keep_runs).expanduser() if args.keep_runs else Path(scratch) / "runs"
        stem = common.output_folder(args.output_dir) / (
            f"{args.name}_smoke" if args.smoke else args.name
        )
        extra = []
        if args.smoke:  # the tiny model and recipe beside kept runs (a rerun names the same
            # paths), written once the folders are checked
            folder_files(args, runs_root, stem).check()
            setup = runs_root / "smoke-setup" if args.keep_runs else Path(scratch)
            extra = smoke_setup(args, setup)
        if not args.recipe or not args.variant:
            raise common.BenchmarkError("--recipe and at least one --variant are needed")
        check_files(args)
        common.check_environment([args.base] if args.base and not args.smoke else [])
        args.script = str(args.script or train_script(Path(args.recipe)))
        args.seeds = args.seeds or [0, 1, 2]
        args.variant_texts = [
            (label, shlex.join(flags)) for label, flags in map(parse_variant, args.variant)
        ]
        recipes_files(args, runs_root, extra, stem).check()
        rows = run_all(args, runs_root, extra)
    info = common.machine_info()
    settings = {k: v for k, v in vars(args).items() if k != "variant"}
    common.write_json(stem, {"settings": settings, "machine": info, "rows": rows})
    common.write_markdown(stem, report_markdown(rows, args, info))
    for row in rows:
        mean, sd = row["summary"]["avg"]
        print(f"{row['label']}: avg {mean:.2f} ± {sd:.2f} (scored by: {row['scorer']})")
    print(f"wrote {stem}.md/.json")
    return 0


def check_files(args: argparse.Namespace) -> None:
    """``--recipe`` and ``--script`` are files, before any run (BenchmarkError)."""
    for flag, path in (("--recipe", args.recipe), ("--script", args.script)):
        if path and not Path(path).expanduser().is_file():
            raise common.BenchmarkError(f"{flag} {path}: no such file")


def run_folder(runs_root: Path, index: int, seed: int) -> Path:
    """The output folder of variant ``index`` with ``seed`` (its run may replace it)."""
    return runs_root / f"variant{index}-seed{seed}"


def folder_files(args: argparse.Namespace, runs_root: Path, stem: Path) -> common.ScriptFiles:
    """The folders the benchmark writes (``--keep-runs``, the result ``stem``'s) and the data
    folder when set, checked before ``--smoke`` writes its model and recipe under
    ``--keep-runs``."""
    files = common.ScriptFiles("recipes.py", data=False)
    files.reads("STS_DATA_DIR", os.environ.get("STS_DATA_DIR"))
    if args.keep_runs:
        files.folder("--keep-runs", runs_root)
        files.writes("--keep-runs", runs_root, kind="run")
    files.results(stem)
    return files


def recipes_files(
    args: argparse.Namespace, runs_root: Path, extra: list[str], stem: Path
) -> common.ScriptFiles:
    """What the runs read (:func:`input_paths`, and the data folder when set) and write:
    each run's folder, which its run empties (``--overwrite_output_dir``), so no input may
    lie in one; ``--keep-runs`` (made once the outputs are checked) and the result
    ``stem``'s files."""
    files = common.ScriptFiles("recipes.py", data=False)
    files.reads("STS_DATA_DIR", os.environ.get("STS_DATA_DIR"))
    for option, path in input_paths(args, extra):
        files.reads(option, path)
    if args.keep_runs:
        files.folder("--keep-runs", runs_root)
    for index in range(len(args.variant)):
        for seed in args.seeds:
            files.writes("--keep-runs", run_folder(runs_root, index, seed), kind="run")
    files.results(stem)
    return files


#: the recipe's keys that name what a run writes, not what it reads
OUTPUT_KEYS = ("output_dir", "logging_dir")


def run_identities(args: argparse.Namespace, extra: list[str]) -> dict[str, Any]:
    """``"<option> <path>"`` → content identity of every input the runs read
    (:func:`input_paths`: the recipe, the script, what the recipe and the flags name; not
    ``--base``, which no run reads, nor the recipe's output folders), recorded with each
    run: a kept run whose inputs changed since is rerun."""
    skipped = {"--base", *(f"--recipe's {key}" for key in OUTPUT_KEYS)}
    return {
        f"{option} {path.resolve()}": content_identity(path)
        for option, path in input_paths(args, extra)
        if option not in skipped
    }


def input_paths(args: argparse.Namespace, extra: list[str]) -> list[tuple[str, Path]]:
    """Every existing path the runs read, with what names it: the recipe, the script, the
    base model, the recipe's values and the flags' values that name a file or folder (a
    relative one from the repository, where the runs start)."""
    from sts_core.training.parser import ConfigError, read_recipe

    try:
        recipe = read_recipe(args.recipe)
    except ConfigError as error:
        raise common.BenchmarkError(f"--recipe: {error}") from error
    named = [("--recipe", args.recipe), ("--script", args.script)]
    named += [("--smoke", text) for text in extra]
    named += [("--base", str(common.model_path(args.base, "--base")))] if args.base else []
    for key, value in recipe.items():
        named += [(f"--recipe's {key}", str(v)) for v in _as_list(value)]
    for label, flags in map(parse_variant, args.variant):
        named += [(f"--variant {label}", token) for token in flags]
    found = [(option, REPO / Path(text).expanduser()) for option, text in named if text]
    return [(option, path) for option, path in found if _exists(path)]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a text too long to be a path
        return False


def run_all(args: argparse.Namespace, runs_root: Path, extra: list[str]) -> list[dict[str, Any]]:
    rows = []
    recipe, script = Path(args.recipe), Path(args.script)
    inputs = run_identities(args, extra)
    if args.base:
        base = base_scores(str(common.model_path(args.base)), args.tasks)
        rows.append({**summarise("before training", {0: base}, args.tasks), "base": True})
    for index, (label, flags) in enumerate(map(parse_variant, args.variant)):
        runs = {}
        for seed in args.seeds:
            print(f"  {label} (seed {seed}) …", flush=True)
            output_dir = run_folder(runs_root, index, seed)
            runs[seed] = run_once(script, recipe, flags, seed, output_dir, extra, inputs)
            print(f"    avg {runs[seed]['avg']:.2f} ({runs[seed]['seconds']:.0f} s)", flush=True)
        rows.append(summarise(label, runs, args.tasks))
    return rows


if __name__ == "__main__":
    common.main_guard(main)
