"""Large training tables: the wall time and peak memory of ``sts-train --check_only`` and of
a short training on tables of 10k to 10M rows, beside ``datasets.load_dataset`` alone (the
floor) and sentence-transformers' trainer on the same file (the peer).

Each table is a CSV with a header, ``sentence1,sentence2,score``: random pairs of
distinct STS-B sentences of ``STS_DATA_DIR`` (a seeded generator) with a score drawn
uniformly in [0, 5] (two decimals), written once per run into a scratch folder. On each
table, each side in a fresh process: the floor (``load_dataset("csv")`` into a fresh
cache, then the score column's minimum and maximum), ours ``--check_only`` (``sts-train
--method cosent``, its checks and the test-pair count), ours training ``--steps`` steps,
ours streaming the table split into :data:`STREAM_SHARDS` CSV files (a folder of table
files streams) as many steps, and the peer (``SentenceTransformerTrainer`` +
``CoSENTLoss``) training as many, with the same settings. Wall time is the whole process
(start, imports, work) as the parent measures it; peak memory the worker's own peak RSS;
steps per second the trainers' ``train_steps_per_second``. The report checks the targets
of issue 63.

    uv run python benchmarks/data_scale.py              # 10k, 100k, 1M and 10M rows
    uv run python benchmarks/data_scale.py --quick      # 10k, 100k and 1M rows
    uv run python benchmarks/data_scale.py --smoke      # check 1M rows, train on 1k (CI)
    uv run python benchmarks/data_scale.py --sizes 10000 10000000 \
        --sides ours_train ours_stream                   # training and streaming alone
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as common

MODES: dict[str, dict[str, Any]] = {
    "full": {"sizes": [10_000, 100_000, 1_000_000, 10_000_000], "steps": 50},
    "quick": {"sizes": [10_000, 100_000, 1_000_000], "steps": 50},
    # the smoke mode: a table of 1M rows checked; the training sides on a small one
    "smoke": {"sizes": [1_000_000], "train_sizes": [1_000], "steps": 5},
}
CHECK_SIDES = ("floor", "args_floor", "ours_check")
TRAIN_SIDES = ("ours_train", "ours_stream", "peer_train")
SIDES = CHECK_SIDES + TRAIN_SIDES
SEED = 0
CHUNK_ROWS = 1_000_000  # rows generated and written at a time
STREAM_SHARDS = 10  # the files a table is split into for the streaming side
#: the settings both trainers get (ours as ``--key value`` flags of ``sts-train``): no
#: evaluation, no checkpoint, no log line within the steps (transformers' default
#: ``logging_steps``, so neither draws a learning curve), no reporting, no progress bar
TRAINING: dict[str, Any] = {
    "learning_rate": 2e-5,
    "weight_decay": 0.01,
    "warmup_steps": 0.1,
    "seed": SEED,
    "logging_steps": 500,
    "eval_strategy": "no",
    "save_strategy": "no",
    "report_to": "none",
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
}
#: the issue's targets in its units (MB = 10^6 bytes, GB = 10^9), compared with MiB
MB = 1e6 / 2**20
#: our check's limits: (rows, seconds, MB, the limit as the issue writes it)
LIMITS = ((1_000_000, 20, 900, "900 MB"), (10_000_000, 120, 1500, "1.5 GB"))
#: a small table's check: (rows, seconds)
SMALL_CHECK = (10_000, 5)
#: no worse than the peer on the same table: (what, our side, its key, the peer's key, unit)
PEER_TARGETS = (
    (
        "check wall ≤ the peer's until its trainer is built",
        "ours_check",
        "wall_seconds",
        "ready_seconds",
        "s",
    ),
    (
        "check peak RSS ≤ the peer's until its trainer is built",
        "ours_check",
        "peak_rss_mb",
        "ready_peak_rss_mb",
        "MiB",
    ),
    ("training peak RSS ≤ the peer's", "ours_train", "peak_rss_mb", "peak_rss_mb", "MiB"),
)
NOISE = 0.10  # steps per second "the same within noise": within 10 %


# ----------------------------------------------------------------------------- tables
def sts_b_sentences(data: Path) -> list[str]:
    """The distinct sentences of STS-B (train, dev, test) in the data folder's official
    release, in file order."""
    found: dict[str, None] = {}
    for split in ("train", "dev", "test"):
        path = data / "raw" / "stsbenchmark" / f"sts-{split}.csv"
        for line in path.read_text(encoding="utf-8").splitlines():
            fields = line.split("\t")  # some lines have extra trailing fields
            for text in fields[5:7] if len(fields) >= 7 else ():
                if text.strip():
                    found.setdefault(text.strip())
    if len(found) < 2:
        raise common.BenchmarkError(f"{data}/raw/stsbenchmark: no STS-B sentences found")
    return list(found)


def write_table(path: Path, rows: int, texts: list[str], seed: int = SEED) -> None:
    """``rows`` random pairs of two different ``texts`` with a score uniform in [0, 5]
    (two decimals) as a CSV with the header ``sentence1,sentence2,score``, written in
    chunks of :data:`CHUNK_ROWS`."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    rng = np.random.default_rng(seed)
    pool = pa.array(texts, pa.string())
    schema = pa.schema(
        [("sentence1", pa.string()), ("sentence2", pa.string()), ("score", pa.float64())]
    )
    options = pa_csv.WriteOptions(quoting_style="needed")
    with pa_csv.CSVWriter(str(path), schema, write_options=options) as writer:
        for start in range(0, rows, CHUNK_ROWS):
            count = min(CHUNK_ROWS, rows - start)
            first = rng.integers(0, len(texts), count)
            second = (first + rng.integers(1, len(texts), count)) % len(texts)  # ≠ first
            scores = np.round(rng.uniform(0.0, 5.0, count), 2)
            columns = [pool.take(pa.array(first)), pool.take(pa.array(second)), pa.array(scores)]
            writer.write_batch(pa.record_batch(columns, schema=schema))


def split_table(path: Path, folder: Path, shards: int, rows: int) -> None:
    """The CSV ``path`` of ``rows`` rows split into ``shards`` CSV files of as many rows
    (the last fewer) in ``folder``, each with the header, the rows in order; read and
    written a block at a time, so that this process (whose peak memory a worker it starts
    inherits, on Linux) stays small."""
    import pyarrow.csv as pa_csv

    folder.mkdir()
    per_shard = -(-rows // shards)
    options = pa_csv.WriteOptions(quoting_style="needed")
    reader = pa_csv.open_csv(str(path))
    writer, left, index = None, 0, 0
    for batch in reader:
        while batch.num_rows:
            if left == 0:
                if writer is not None:
                    writer.close()
                name = str(folder / f"part-{index:02d}.csv")
                writer = pa_csv.CSVWriter(name, reader.schema, write_options=options)
                left, index = per_shard, index + 1
            part = batch.slice(0, left)
            writer.write_batch(part)
            left -= part.num_rows
            batch = batch.slice(part.num_rows)
    if writer is not None:
        writer.close()


# ----------------------------------------------------------------------------- workers


def worker(side: str, spec: dict[str, Any]) -> dict[str, Any]:
    anonymous = common.AnonymousPeak()
    if side == "floor":
        result = floor(spec)  # datasets and pyarrow alone: no torch in this process
    else:
        common.set_threads(spec["threads"])
        sides = {
            "ours_check": ours_check,
            "args_floor": args_floor,
            "ours_train": ours_train,
            "ours_stream": ours_train,  # its table is a folder of shards
            "peer_train": peer_train,
        }
        result = sides[side](spec, anonymous) if side == "peer_train" else sides[side](spec)
    return {**result, "peak_anon_mb": anonymous.now()}


def floor(spec: dict[str, Any]) -> dict[str, Any]:
    """What reading the file costs at least: ``datasets``' CSV loader into a fresh cache,
    then one pass over the score column."""
    import pyarrow.compute as pc
    from datasets import load_dataset

    table = load_dataset("csv", data_files=spec["table"], split="train", cache_dir=spec["cache"])
    low_high = pc.min_max(table.data.column("score"))
    return {
        "rows": table.num_rows,
        "score_min": low_high["min"].as_py(),
        "score_max": low_high["max"].as_py(),
    }


def args_floor(spec: dict[str, Any]) -> dict[str, Any]:
    """What any run of a Hugging Face Trainer costs before it reads a table: torch,
    ``datasets`` and a ``TrainingArguments`` (whose ``__post_init__`` imports transformers'
    integrations), which the training config of ``sts-train`` is."""
    import datasets  # noqa: F401  (what a check imports to read a table)
    from transformers import TrainingArguments

    TrainingArguments(output_dir=spec["output"], report_to="none")
    return {"passed": True}


def sts_train_argv(spec: dict[str, Any], *extra: str) -> list[str]:
    """``sts-train``'s arguments: CoSENT on the table, the training settings of
    :data:`TRAINING`, no dev set; ``extra`` after them."""
    argv = ["--method", "cosent", "--model_name_or_path", spec["model"]]
    argv += ["--train_datasets", spec["table"], "--output_dir", spec["output"]]
    argv += ["--max_steps", str(spec["steps"]), "--per_device_train_batch_size"]
    argv += [str(spec["batch_size"]), "--eval_dataset", "none"]
    for key, value in TRAINING.items():
        argv += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return [*argv, *extra]


def run_sts_train(argv: list[str]) -> list[str]:
    """``sts-train ARGV`` in this process (its console script's function); the lines it
    printed. A status other than 0 is a BenchmarkError with what it printed (its error
    line is on stderr, which the parent shows)."""
    from sts_core.training.run import main as sts_train

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = sts_train(argv)
    lines = printed.getvalue().splitlines()
    if status != 0:
        raise common.BenchmarkError(
            f"sts-train {shlex.join(argv)} exited with status {status}:\n" + "\n".join(lines[-15:])
        )
    return lines


def ours_check(spec: dict[str, Any]) -> dict[str, Any]:
    """``sts-train … --check_only true``: the training run's own checks of the table (and
    the count of its pairs that are test pairs), nothing loaded or trained."""
    lines = run_sts_train(sts_train_argv(spec, "--check_only", "true"))
    summary = next((line.strip() for line in lines if "training data:" in line), "")
    return {"passed": True, "check_lines": [line.strip() for line in lines], "summary": summary}


def ours_train(spec: dict[str, Any]) -> dict[str, Any]:
    """``sts-train`` for ``steps`` steps; its steps per second from its ``metrics.json``."""
    run_sts_train(sts_train_argv(spec))
    metrics = json.loads((Path(spec["output"]) / "metrics.json").read_text(encoding="utf-8"))
    train = metrics["train"]
    return {
        "train_steps_per_second": train["train_steps_per_second"],
        "global_step": train["global_step"],
        "train_pairs": metrics["data"]["train_pairs"],
        "streaming": metrics["data"].get("streaming"),
    }


def peer_train(spec: dict[str, Any], anonymous: common.AnonymousPeak) -> dict[str, Any]:
    """sentence-transformers' trainer on the same file: ``load_dataset("csv")`` into a
    fresh cache, ``CoSENTLoss``, the same settings; ``ready_seconds`` from the process's
    launch until the trainer is built (the table loaded, nothing checked), with the peak
    memory then."""
    from datasets import load_dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
        losses,
    )

    model = SentenceTransformer(spec["model"], device="cpu")
    table = load_dataset("csv", data_files=spec["table"], split="train", cache_dir=spec["cache"])
    arguments = SentenceTransformerTrainingArguments(
        output_dir=spec["output"],
        max_steps=spec["steps"],
        per_device_train_batch_size=spec["batch_size"],
        **TRAINING,
    )
    trainer = SentenceTransformerTrainer(
        model=model, args=arguments, train_dataset=table, loss=losses.CoSENTLoss(model)
    )
    ready = {
        "ready_seconds": round(time.time() - spec["launched_at"], 2),
        "ready_peak_rss_mb": round(common.peak_rss_mb(), 1),
        "ready_peak_anon_mb": anonymous.now(),
    }
    output = trainer.train()
    return {
        **ready,
        "train_steps_per_second": output.metrics["train_steps_per_second"],
        "global_step": trainer.state.global_step,
        "train_pairs": table.num_rows,
    }


# ----------------------------------------------------------------------------- the run
def run_sizes(args: argparse.Namespace, scratch: Path) -> tuple[dict, dict]:
    """Each table written, its sides run (each in a fresh process) and the table removed;
    the tables (rows, MiB, seconds to write) and the results by size and side."""
    texts = sts_b_sentences(common.data_dir())
    base = {
        "model": str(common.model_path(args.model)),
        "threads": args.threads or common.default_threads(),
        "steps": args.steps,
        "batch_size": args.batch_size,
    }
    tables: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, dict]] = {}
    for rows in sorted({*args.sizes, *args.train_sizes}):
        path = scratch / f"pairs-{rows}.csv"
        print(f"{rows:,} rows: writing {path.name} …", flush=True)
        start = time.perf_counter()
        write_table(path, rows, texts)
        tables[str(rows)] = {
            "rows": rows,
            "file_mib": round(path.stat().st_size / 2**20, 1),
            "write_seconds": round(time.perf_counter() - start, 2),
        }
        sides = [s for s in CHECK_SIDES if rows in args.sizes]
        if rows != SMALL_CHECK[0]:  # the floor of the small table's check only
            sides = [s for s in sides if s != "args_floor"]
        sides += [s for s in TRAIN_SIDES if rows in args.train_sizes]
        if args.no_peer:
            sides = [s for s in sides if s != "peer_train"]
        sides = [s for s in sides if s in args.sides]
        shards = scratch / f"shards-{rows}"
        if "ours_stream" in sides:
            split_table(path, shards, STREAM_SHARDS, rows)
        results[str(rows)] = {}
        for side in sides:
            work = scratch / f"{side}-{rows}"  # its output folder and cache, removed after
            table = shards if side == "ours_stream" else path
            spec = {**base, "table": str(table), "output": str(work / "out")}
            spec |= {"cache": str(work / "cache"), "launched_at": time.time()}
            print(f"  {side} …", flush=True)
            result = common.run_worker(__file__, side, spec)
            result["wall_seconds"] = result["process_seconds"]
            results[str(rows)][side] = result
            shutil.rmtree(work, ignore_errors=True)
            print(f"    wall {result['wall_seconds']} s, peak RSS {result['peak_rss_mb']} MiB")
        path.unlink()
        shutil.rmtree(shards, ignore_errors=True)
    return {"tables": tables, "settings": {**base, "training": TRAINING}}, results


# ----------------------------------------------------------------------------- targets
def side(results: dict, rows: int, name: str) -> dict[str, Any] | None:
    return results.get(str(rows), {}).get(name)


def at_most(label: str, value: float | None, limit: float, unit: str) -> dict[str, Any]:
    """A target ``value ≤ limit``: met, or missed by how much; not measured for None."""
    if value is None:
        return {"target": label, "measured": None, "result": "not measured in this mode"}
    over = value - limit
    result = "met" if over <= 0 else f"missed by {over:,.1f} {unit}"
    return {"target": label, "measured": f"{value:,.1f} {unit}", "result": result}


def no_worse(label: str, ours: float | None, peer: float | None, unit: str) -> dict[str, Any]:
    """A target ``ours ≤ peer`` (seconds or MiB)."""
    if ours is None or peer is None:
        return {"target": label, "measured": None, "result": "not measured in this mode"}
    measured = f"{ours:,.1f} vs {peer:,.1f} {unit}"
    over = ours - peer
    result = "met" if over <= 0 else f"missed by {over:,.1f} {unit}"
    return {"target": label, "measured": measured, "result": result}


def targets(results: dict) -> list[dict[str, Any]]:
    """The issue's targets, each from the measured numbers: met, missed by how much, or not
    measured in this mode."""

    def value(rows: int, name: str, key: str) -> float | None:
        found = side(results, rows, name)
        return None if found is None else found.get(key)

    rows, seconds = SMALL_CHECK
    wall, floor_wall = value(rows, "ours_check", "wall_seconds"), None
    if (args := side(results, rows, "args_floor")) is not None:
        floor_wall = args.get("wall_seconds")
    label = f"{rows:,} rows: check ≤ {seconds} s"
    if floor_wall is not None:
        label += f" (a TrainingArguments alone: {floor_wall:,.1f} s)"
    found = [at_most(label, wall, seconds, "s")]
    for rows, seconds, megabytes, written in LIMITS:
        wall = value(rows, "ours_check", "wall_seconds")
        found.append(at_most(f"{rows:,} rows: check ≤ {seconds} s", wall, seconds, "s"))
        label = f"{rows:,} rows: check peak RSS ≤ {written} ({megabytes * MB:,.0f} MiB)"
        memory = value(rows, "ours_check", "peak_rss_mb")
        found.append(at_most(label, memory, megabytes * MB, "MiB"))
    for name, what in (("ours_train", "training"), ("ours_stream", "streaming")):
        small = value(10_000, name, "peak_rss_mb")
        large = value(10_000_000, name, "peak_rss_mb")
        growth = None if small is None or large is None else large - small
        label = f"{what} peak RSS, 10,000,000 rows − 10,000 rows ≤ 300 MB ({300 * MB:,.0f} MiB)"
        found.append(at_most(label, growth, 300 * MB, "MiB"))
        small = value(10_000, name, "peak_anon_mb")
        large = value(10_000_000, name, "peak_anon_mb")
        growth = None if small is None or large is None else large - small
        label = "the same, anonymous memory only (not the issue's measure)"
        found.append(at_most(label, growth, 300 * MB, "MiB"))
        found.append(steps_target(results, name, what))
    for label, ours_side, ours_key, peer_key, unit in PEER_TARGETS:
        measured = [
            no_worse(f"{rows:,} rows: {label}", ours, peer, unit)
            for rows in sorted(int(rows) for rows in results)
            if (ours := value(rows, ours_side, ours_key)) is not None
            and (peer := value(rows, "peer_train", peer_key)) is not None
        ]
        found += measured or [no_worse(f"the same table: {label}", None, None, unit)]
    return found


def steps_target(results: dict, name: str = "ours_train", what: str = "training") -> dict[str, Any]:
    """Steps per second of side ``name`` on 10M rows the same as on 10k within
    :data:`NOISE`."""
    label = f"{what} steps/s, 10,000,000 rows = 10,000 rows within {NOISE * 100:.0f} %"
    small, large = side(results, 10_000, name), side(results, 10_000_000, name)
    if small is None or large is None:
        return {"target": label, "measured": None, "result": "not measured in this mode"}
    ratio = large["train_steps_per_second"] / small["train_steps_per_second"]
    measured = (
        f"{large['train_steps_per_second']:.3f} vs {small['train_steps_per_second']:.3f} "
        f"({ratio:.2f}×)"
    )
    apart = abs(ratio - 1) * 100
    result = "met" if apart <= NOISE * 100 else f"missed: {apart:.0f} % apart"
    return {"target": label, "measured": measured, "result": result}


# ----------------------------------------------------------------------------- report
def cell(result: dict[str, Any] | None, key: str, digits: int = 1) -> str:
    """A measured number, or ``—`` for a side not run on that table."""
    if result is None or result.get(key) is None:
        return "—"
    return f"{result[key]:,.{digits}f}"


def memory(result: dict[str, Any] | None, prefix: str = "") -> str:
    """Peak RSS and, after a slash, peak anonymous memory (MiB), or ``—``."""
    rss = cell(result, f"{prefix}peak_rss_mb", 0)
    anonymous = cell(result, f"{prefix}peak_anon_mb", 0)
    return rss if anonymous == "—" else f"{rss} / {anonymous}"


def report_markdown(saved: dict[str, Any]) -> str:
    spec, results, tables = saved["spec"], saved["results"], saved["tables"]
    settings = saved["settings"]
    sizes = sorted(int(rows) for rows in results)
    check_rows = [
        (
            f"{rows:,}",
            cell(tables[str(rows)], "file_mib"),
            cell(side(results, rows, "floor"), "wall_seconds"),
            memory(side(results, rows, "floor")),
            cell(side(results, rows, "args_floor"), "wall_seconds"),
            cell(side(results, rows, "ours_check"), "wall_seconds"),
            memory(side(results, rows, "ours_check")),
            cell(side(results, rows, "peer_train"), "ready_seconds"),
            memory(side(results, rows, "peer_train"), "ready_"),
        )
        for rows in sizes
    ]
    train_rows = [
        (
            f"{rows:,}",
            memory(side(results, rows, "ours_train")),
            cell(side(results, rows, "ours_train"), "train_steps_per_second", 3),
            cell(side(results, rows, "ours_train"), "wall_seconds"),
            memory(side(results, rows, "ours_stream")),
            cell(side(results, rows, "ours_stream"), "train_steps_per_second", 3),
            cell(side(results, rows, "ours_stream"), "wall_seconds"),
            memory(side(results, rows, "peer_train")),
            cell(side(results, rows, "peer_train"), "train_steps_per_second", 3),
            cell(side(results, rows, "peer_train"), "wall_seconds"),
        )
        for rows in sizes
        if any(side(results, rows, name) for name in TRAIN_SIDES)
    ]
    target_rows = [
        (
            t["target"],
            t["measured"] or "—",
            f"**{t['result']}**" if t["result"] == "met" else t["result"],
        )
        for t in saved["targets"]
    ]
    return "\n".join(
        [
            "# Large tables: `sts-train` beside `datasets` and sentence-transformers",
            "",
            f"Mode `{spec['mode']}`: `{spec['command']}`",
            "",
            "Tables: random pairs of distinct STS-B sentences with a score uniform in [0, 5] "
            f"(seed {SEED}), a CSV with a header `sentence1,sentence2,score`. "
            f"{spec['model_name']}, batch {settings['batch_size']}, {settings['steps']} "
            f"steps, {settings['threads']} thread(s), CPU; each side a fresh process. Wall: "
            "the whole process as the parent measured it (interpreter start, imports, the "
            "work); memory: the process's peak RSS (`VmHWM`, MiB) / its peak anonymous "
            "memory (`RssAnon`, sampled every 20 ms): RSS also counts the pages of the "
            "memory-mapped Arrow files a process has read, which the system reclaims when it "
            "needs the memory; the anonymous part is what the process holds itself. "
            "Steps/s: the trainers' own `train_steps_per_second` (steps over the whole "
            "`trainer.train()`).",
            "",
            common.machine_markdown(saved["machine"]),
            "",
            "## Reading and checking a table",
            "",
            'The floor: `datasets.load_dataset("csv")` into a fresh cache, then the score '
            "column's minimum and maximum (pyarrow). `TrainingArguments`: a process that "
            "imports `datasets` and builds a `TrainingArguments` (what a Trainer's run pays "
            "before it reads a table; our training config is one). Ours: `sts-train "
            "--method cosent … "
            "--check_only true` with the training run's flags (below), `STS_DATA_DIR` set "
            "(it counts the pairs that are test pairs). The peer: from its process's "
            "start until `SentenceTransformerTrainer` is built (the model and the table "
            "loaded into a fresh cache; it checks nothing).",
            "",
            common.markdown_table(
                [
                    "rows",
                    "file, MiB",
                    "floor, s",
                    "floor, RSS / anon MiB",
                    "TrainingArguments, s",
                    "ours check, s",
                    "ours check, RSS / anon MiB",
                    "peer ready, s",
                    "peer ready, RSS / anon MiB",
                ],
                check_rows,
            ),
            "",
            f"## {settings['steps']} training steps",
            "",
            "Both trainers: CoSENT, the same learning rate, weight decay, warm-up and seed; "
            "turned off on both: the dev set (`--eval_dataset none` for ours), evaluation "
            "and checkpoints (`eval_strategy`, `save_strategy` `no`), log lines within the "
            "steps (`logging_steps` 500, so no learning-curve chart either), reporting and "
            "the progress bar. Ours still saves the model and its `metrics.json` at the end, "
            "within its wall and peak RSS. Ours streaming: the same table split into "
            f"{STREAM_SHARDS} CSV files in a folder, which streams (the first shard read and "
            "checked before training, each read again as the stream reaches it; a shuffle "
            "buffer of 10,000 rows).",
            "",
            common.markdown_table(
                [
                    "rows",
                    "ours, RSS / anon MiB",
                    "ours, steps/s",
                    "ours, s",
                    "ours streaming, RSS / anon MiB",
                    "ours streaming, steps/s",
                    "ours streaming, s",
                    "peer, RSS / anon MiB",
                    "peer, steps/s",
                    "peer, s",
                ],
                train_rows,
            ),
            "",
            "## Targets",
            "",
            "Issue 63's targets, reported, not asserted; MB and GB as the issue writes them "
            f"(10^6 and 10^9 bytes), compared in MiB; steps/s within noise: within "
            f"{NOISE * 100:.0f} %.",
            "",
            common.markdown_table(["target", "measured", "result"], target_rows),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = common.benchmark_parser(
        __doc__, quick="10k, 100k and 1M rows", smoke="check 1M rows, train on 1k rows (CI)"
    )
    common.add_model_argument(parser)
    parser.add_argument(
        "--sizes", type=common.COUNT, nargs="+", default=None, help="table sizes, rows"
    )
    parser.add_argument(
        "--train-sizes",
        type=common.COUNT,
        nargs="+",
        default=None,
        help="the table sizes of the training sides (default: --sizes)",
    )
    parser.add_argument("--steps", type=common.COUNT, default=None, help="training steps")
    parser.add_argument("--batch-size", type=common.COUNT, default=32)
    parser.add_argument("--no-peer", action="store_true", help="without sentence-transformers")
    parser.add_argument(
        "--sides", nargs="+", choices=SIDES, default=list(SIDES), help="the sides to run"
    )
    common.add_side_arguments(parser, SIDES)
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(given)
    if args.worker:
        common.emit_result(worker(args.worker, json.loads(args.spec)))
        return 0
    args = common.apply_mode(args, MODES)
    if args.train_sizes is None:
        args.train_sizes = args.sizes
    files, stem = common.result_files("data_scale.py", "data_scale", args, models=[args.model])
    files.check()
    info = common.machine_info()
    with tempfile.TemporaryDirectory(prefix="sts-bench-data-scale-") as scratch:
        run, results = run_sizes(args, Path(scratch))
    spec = {
        "mode": args.mode,
        "command": shlex.join(["uv", "run", "python", "benchmarks/data_scale.py", *given]),
        "model_name": args.model,
        "sizes": sorted(args.sizes),
        "train_sizes": sorted(args.train_sizes),
        "peer": not args.no_peer,
    }
    saved = {"spec": spec, **run, "machine": info, "results": results}
    saved["targets"] = targets(results)
    common.write_json(stem, saved)
    path = common.write_markdown(stem, report_markdown(saved))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    common.main_guard(main)
