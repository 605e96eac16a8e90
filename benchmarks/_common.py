"""Helpers shared by the benchmark scripts: environment checks, A/B worker runs in fresh
subprocesses, medians and ratios, machine description and result files.

Each benchmark re-invokes its own script with ``--worker <side> --spec <json>``; the worker
prints one line ``RESULT <json>`` and exits, so every measured run (and its peak memory)
belongs to a process of its own.

Every script declares what it reads and writes to a :class:`ScriptFiles` before its work
(:mod:`sts_core.command_files`, the rule of every console script): no output on, in or
around an input, nor inside a model sts-core saved; an existing output replaced only when
a benchmark script wrote it (the folder's ledger vouches for it, unchanged since); every
result written atomically and recorded. A re-run of a benchmark replaces the results a
benchmark wrote before without a flag (they are regenerated, and committed under git); a
file another command wrote, a saved model's files or a file of the user's, never.

Every numeric option is checked when the command line is parsed (:func:`checked`, the
rule of :func:`sts_core.options.check_number`), before any data loads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from sts_core.cli import positive_int
from sts_core.command_files import (
    LEDGER_NAME,
    PARTIAL_PREFIX,
    SAVE_MARKER,
    CommandFiles,
    Declared,
    FilesError,
    OutputPathError,
    check_off_inputs,
    forms,
    ledger_matches,
    on_interrupt,
    read_ledger,
    write_text,
    writing,
    written_by_project,
)
from sts_core.options import NON_NEGATIVE, POSITIVE, UP_TO_ONE, check_number
from sts_core.process_memory import peak_rss_mib

RESULT_PREFIX = "RESULT "
BENCHMARKS_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCHMARKS_DIR / "results"
#: the writer ``tools/record_results.py`` names in the ledgers of the committed results
RESULTS_RECORDER = "tools/record_results.py (committed results)"
MINILM = "all-MiniLM-L6-v2"
MPNET = "all-mpnet-base-v2"
# the table titles of the seven STS tasks (sts_core.names.STS_TASKS, in its order)
STS_TITLES = ("STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R")


class BenchmarkError(RuntimeError):
    """A setup problem reported as one line (missing data, model or worker failure)."""


# ----------------------------------------------------------------------------- environment
def data_dir() -> Path:
    """``$STS_DATA_DIR``, checked."""
    return _env_folder("STS_DATA_DIR", "the benchmark data folder (see its README.md)")


def models_dir() -> Path:
    """``$STS_MODELS_DIR``, checked."""
    return _env_folder("STS_MODELS_DIR", "the folder of local pretrained models")


def model_path(name: str, what: str = "model") -> Path:
    """A model folder: a path as given, else ``$STS_MODELS_DIR/<name>``; BenchmarkError
    naming ``what`` (``model``, or the flag that gave it) when it is neither."""
    given = Path(name).expanduser()
    path = given if given.is_dir() else models_dir() / name
    if not (path / "config.json").is_file():
        raise BenchmarkError(f"{what} {name!r}: {path} is not a model folder (no config.json)")
    return path


def _env_folder(variable: str, what: str) -> Path:
    value = os.environ.get(variable)
    if not value:
        raise BenchmarkError(f"{variable} is not set: point it to {what}")
    path = Path(value).expanduser()
    if not path.is_dir():
        raise BenchmarkError(f"{variable}={value} is not a folder")
    return path


def check_environment(models: Iterable[str]) -> None:
    """Fail early, with one clear line, when the data or a model is missing."""
    data_dir()
    for name in models:
        model_path(name)


def main_guard(main: Callable[[], int], saved: Callable[[], str] | None = None) -> None:
    """Run ``main``; a ``BenchmarkError`` (or a write refused by
    :mod:`sts_core.command_files`) becomes ``error: …`` on stderr and exit status 2; Ctrl-C
    one line (``<script>: interrupted (Ctrl-C): …``, ``saved()`` saying what was kept) and
    exit status 130, no traceback (:func:`sts_core.command_files.on_interrupt`). Any other
    exception keeps its traceback: a bad option is refused when it is parsed."""
    script = Path(sys.argv[0]).name or "benchmark"
    try:
        sys.exit(on_interrupt(script, saved)(main)())
    except (BenchmarkError, FilesError, OutputPathError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)


def set_threads(threads: int) -> None:
    """The same intra-op thread count for torch, OpenMP and MKL in this process."""
    import torch

    torch.set_num_threads(threads)


# ----------------------------------------------------------------------------- subsets
def in_fraction(text: str, fraction: float) -> bool:
    """Stable pseudo-random membership by hash: keeps every occurrence of a kept sentence,
    so a subset has the duplicate structure of the whole."""
    if fraction >= 1.0:
        return True
    digest = hashlib.md5(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


# ----------------------------------------------------------------------------- memory
def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MiB): its own, not the parent's that
    started it (:func:`sts_core.process_memory.peak_rss_mib`); NaN where unknown."""
    peak = peak_rss_mib()
    return float("nan") if peak is None else peak


class AnonymousPeak:
    """The peak of the process's anonymous resident memory (``RssAnon`` of
    ``/proc/self/status``, Linux), sampled every :data:`SAMPLE_SECONDS` by a thread: the
    memory the process itself holds, without the pages of the files it memory-maps (the
    Arrow tables), which the peak RSS counts and the system reclaims when it needs to."""

    def __init__(self) -> None:
        self.peak_kib = 0
        self.status = Path("/proc/self/status")
        if self.status.exists():
            threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            self.now()
            time.sleep(SAMPLE_SECONDS)

    def now(self) -> float | None:
        """The peak so far (MiB), sampled once more; None where the system does not say."""
        if not self.status.exists():
            return None
        for line in self.status.read_text().splitlines():
            if line.startswith("RssAnon:"):
                self.peak_kib = max(self.peak_kib, int(line.split()[1]))
        return round(self.peak_kib / 1024, 1)


SAMPLE_SECONDS = 0.02


def current_rss_mb() -> float:
    """Resident memory of this process now (MiB)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return float("nan")
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def cpu_seconds() -> float:
    """User + system CPU time of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ----------------------------------------------------------------------------- workers
def emit_result(result: dict[str, Any]) -> None:
    """Worker side: print the one result line the parent reads."""
    result.setdefault("peak_rss_mb", round(peak_rss_mb(), 1))
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_worker(script: str, side: str, spec: dict[str, Any], timeout: float = 3600) -> dict:
    """Run ``script --worker side --spec <json>`` in a fresh interpreter; its result."""
    command = [sys.executable, script, "--worker", side, "--spec", json.dumps(spec)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise BenchmarkError(f"worker {side} failed (exit {done.returncode}):\n" + "\n".join(tail))
    result = json.loads(lines[-1][len(RESULT_PREFIX) :])
    result["process_seconds"] = round(time.perf_counter() - start, 2)
    return result


def alternate(
    sides: Sequence[str],
    repeats: int,
    run: Callable[[str, int], dict],
    runs_file: str | None = None,
    key: str = "runs",
) -> dict[str, list[dict]]:
    """Run the sides alternately (A B A B …), ``repeats`` rounds; results by side. With
    ``runs_file``, each run's summary (:data:`RUN_SUMMARY_KEYS`) is saved there under
    ``key`` as soon as it ends, so a benchmark stopped at a time limit keeps what it
    measured (the GPU check reads it back)."""
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for round_index in range(repeats):
        for side in sides:
            print(f"  round {round_index + 1}/{repeats}: {side} …", flush=True)
            result = run(side, round_index)
            results[side].append(result)
            print(f"    {summary_line(result)}", flush=True)
            if runs_file:
                save_runs_so_far(Path(runs_file), key, results)
    return results


#: what :func:`alternate` prints and saves of each run
RUN_SUMMARY_KEYS = ("throughput", "seconds", "process_seconds", "peak_rss_mb", "packing_path")


def summary_line(result: dict[str, Any]) -> str:
    return ", ".join(f"{k} {result[k]}" for k in RUN_SUMMARY_KEYS if result.get(k) is not None)


def save_runs_so_far(path: Path, key: str, results: dict[str, list[dict]]) -> None:
    """``path`` (JSON) with ``key`` set to each side's run summaries so far; other keys kept.
    Written atomically (a kill mid-write leaves the runs before it), never over a file
    sts-core did not write."""
    saved = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    saved[key] = {
        side: [{k: r[k] for k in RUN_SUMMARY_KEYS if k in r} for r in runs]
        for side, runs in results.items()
    }
    write_text(path, json.dumps(saved, indent=2) + "\n")


def add_runs_file_argument(parser: argparse.ArgumentParser) -> None:
    """``--runs-file``: where :func:`alternate` saves each run's summary as it ends."""
    parser.add_argument(
        "--runs-file", help="save each run's summary to this JSON as it ends (kept if cut off)"
    )


# ----------------------------------------------------------------------------- statistics
@dataclass
class Comparison:
    """Medians of one metric for ours and the peer, and the ratio in each round."""

    ours: list[float]
    peer: list[float]

    @property
    def ratios(self) -> list[float]:
        return [a / b for a, b in zip(self.ours, self.peer, strict=True) if b]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ours": self.ours,
            "peer": self.peer,
            "ours_median": median(self.ours),
            "peer_median": median(self.peer),
            "ratio_per_round": [round(r, 3) for r in self.ratios],
            "ratio_median": median(self.ratios),
        }


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return float(statistics.fmean(values)), float(sd)


# ----------------------------------------------------------------------------- machine
def machine_info() -> dict[str, Any]:
    """CPU, cores, memory, load and library versions of this run."""
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "memory_gib": _memory_gib(),
    }
    for dist in ("torch", "transformers", "sentence-transformers", "sts-core", "sts-cosent"):
        try:
            info[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            info[dist] = None
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def read_result(path: Path, script: str) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """(settings as a Namespace, rows, machine) of a result JSON that ``script`` wrote, for
    ``--render``; BenchmarkError naming the file when it is not one."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        return argparse.Namespace(**saved["settings"]), saved["rows"], saved["machine"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise BenchmarkError(f"{path}: not a {script} result ({error})") from error


def render_result(
    path: Path,
    script: str,
    write_report: Callable[[list, Any, dict, Path], list[Path]],
    suffixes: Sequence[str] = (".md",),
) -> int:
    """``--render``: the report of ``script`` written again from its saved result JSON
    ``path`` alone (e.g. after the report's wording changed), beside it;
    ``write_report(rows, args, machine, stem)`` returns the files it wrote (``suffixes``:
    declared before, with ``path`` as the input)."""
    files = ScriptFiles(script, data=False)
    files.reads("--render", path)
    files.results(path.with_suffix(""), suffixes, "--render")
    files.check()
    args, rows, info = read_result(path, script)
    written = write_report(rows, args, info, path.with_suffix(""))
    print("wrote " + " and ".join(str(file) for file in written))
    return 0


def sts_scored_by_line() -> str:
    """The ``Scored by`` line of a table of STS test scores from ``STSEvaluator``, which
    scores the STS tasks by the cosine of the embeddings only."""
    from sts_core.evaluation.sts import COSINE_SCORER, describe_scorer

    return (
        f"Scored by: {describe_scorer(COSINE_SCORER)}, every row (`STSEvaluator` scores the "
        "STS tasks by the cosine only; a model's pair_scorer head, such as the regression "
        "head, is not used)."
    )


def refuse_pair_scorer_head(model: Any, what: str) -> None:
    """BenchmarkError when ``model`` has a pair_scorer head: the tables of a benchmark that
    compares embeddings by their cosine say so, and a head would score pairs instead."""
    from sts_core.evaluation.sts import pair_scorer_of

    head = pair_scorer_of(model)
    if head is not None:
        raise BenchmarkError(
            f"{what}: the model has a pair_scorer head ({head!r}); this benchmark compares "
            "embeddings by their cosine"
        )


def machine_markdown(info: dict[str, Any]) -> str:
    return (
        f"Machine: {info['cpu']}, {info['logical_cpus']} logical CPUs, "
        f"{info.get('memory_gib')} GiB; Python {info['python']}, torch {info['torch']}, "
        f"transformers {info['transformers']}, sentence-transformers "
        f"{info['sentence-transformers']}; load average at start {info['load_average']}."
    )


# ----------------------------------------------------------------------------- output
def writable_folder(flag: str, path: str | os.PathLike[str]) -> Path:
    """``path`` as a folder this run can write into, checked before any work: created with
    its parents when missing, then a probe file written there and removed. BenchmarkError
    naming ``flag`` and the path otherwise (a regular file there or above it, no permission,
    a full disk)."""
    folder = refuse_blocked(flag, path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".sts-write-probe-", dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        why = error.strerror or str(error)
        raise BenchmarkError(f"{flag} {folder}: cannot write there ({why})") from None
    return folder


def refuse_blocked(flag: str, path: str | os.PathLike[str]) -> Path:
    """``path`` (a folder to write into), or BenchmarkError naming ``flag`` when a regular
    file is there or above it; nothing is made."""
    folder = Path(path).expanduser()
    blocker = next((p for p in (folder, *folder.parents) if p.exists() or p.is_symlink()), None)
    if blocker is not None and not blocker.is_dir():
        raise BenchmarkError(f"{flag} {folder}: cannot be a folder ({blocker} is a file)")
    return folder


def output_folder(output_dir: str | os.PathLike[str] | None) -> Path:
    """``--output-dir`` (default ``benchmarks/results``); made and probed by
    :meth:`ScriptFiles.check` (a result stem's folder), after the outputs are checked off
    the inputs, before the work, so that no result is lost after it."""
    return Path(output_dir or RESULTS_DIR).expanduser()


def output_stem(name: str, output_dir: str | os.PathLike[str] | None, mode: str) -> Path:
    """``<dir>/<name>[_quick|_smoke]`` (full results keep the bare name) in ``--output-dir``
    (:func:`output_folder`)."""
    return output_folder(output_dir) / (name if mode == "full" else f"{name}_{mode}")


def write_json(stem: Path, content: dict[str, Any]) -> Path:
    """``<stem>.json``, written atomically and recorded in its folder's ledger."""
    path = stem.with_suffix(".json")
    write_text(path, json.dumps(content, indent=2, default=str) + "\n")
    return path


def write_markdown(stem: Path, text: str) -> Path:
    """``<stem>.md``, written atomically and recorded in its folder's ledger."""
    path = stem.with_suffix(".md")
    write_text(path, text.rstrip() + "\n")
    return path


def save_figure(figure: Any, path: Path) -> Path:
    """A matplotlib figure as ``path`` (PNG, 120 dpi), written atomically and recorded;
    the figure is closed."""
    try:
        with writing(path) as temporary:
            figure.savefig(temporary, dpi=120, format=path.suffix.lstrip(".") or "png")
    finally:
        pyplot().close(figure)
    return path


# ----------------------------------------------------------------------------- declared files
#: the files of a result stem: its JSON, its markdown and, for the scripts that draw one,
#: its chart
REPORT = (".json", ".md")
REPORT_AND_CHART = (".json", ".md", ".png")


class ScriptFiles:
    """What one benchmark run reads and writes, declared before its work and checked at
    once by :meth:`check` (:class:`sts_core.command_files.CommandFiles`): no output is, holds
    or lies inside an input (as given and with symbolic links resolved), nor lies inside a
    model sts-core saved; an existing output is replaced only when a benchmark script wrote
    it (:func:`benchmark_wrote`: a re-run replaces the results, no flag); a file another
    command wrote, a saved model's or one sts-core did not write, never. The data folder
    (``$STS_DATA_DIR``) is an input of every script that reads it (``data``)."""

    def __init__(self, script: str, data: bool = True) -> None:
        self.declared = CommandFiles(script, replace_flag=None, replace=True)
        self.folders: dict[Path, str] = {}
        if data:
            self.reads("STS_DATA_DIR", data_dir())

    def reads(self, option: str, path: str | os.PathLike[str] | None) -> None:
        """An input (a path that exists; nothing otherwise)."""
        self.declared.reads(option, path)

    def model(self, name: str, option: str = "--model") -> Path:
        """A model input (:func:`model_path`, checked); its folder."""
        path = model_path(name, option)
        self.reads(option, path)
        return path

    def writes(self, option: str, path: str | os.PathLike[str], kind: str = "file") -> Path:
        """An output: a file, or a folder the script manages itself (``kind="run"``: a run's
        folder, a cache), which must only not be, hold or lie inside an input."""
        return self.declared.writes(option, path, kind)

    def folder(self, option: str, path: str | os.PathLike[str]) -> Path:
        """A folder the run writes into, made and probed (:func:`writable_folder`) once the
        outputs are checked, before the work."""
        folder = Path(path).expanduser()
        self.folders.setdefault(folder, option)
        return folder

    def results(
        self, stem: Path, suffixes: Sequence[str] = REPORT, option: str = "--output-dir"
    ) -> Path:
        """The files of the result ``stem`` (``<stem>.json``, …) in its folder, named by
        ``option``."""
        self.folder(option, stem.parent)
        for suffix in suffixes:
            self.writes(option, stem.with_suffix(suffix))
        return stem

    def check(self) -> None:
        """BenchmarkError (one line) for the first declared output that would overwrite an
        input, lie inside a saved model or replace a file no benchmark wrote, or a folder
        with a file in its way; then the folders made and probed, and the partial files of
        this script's killed writes there removed (:func:`remove_stale_partials`). Nothing
        is made before every refusal is past."""
        try:
            for output in self.declared.outputs:
                check_off_inputs(output, self.declared.inputs, self.declared.command)
                refuse_saved_model(output)
                refuse_other_writers(output)
            for folder, option in self.folders.items():
                refuse_blocked(option, folder)
            self.declared.check()  # a file sts-core did not write; the files' folders probed
            for folder, option in self.folders.items():
                writable_folder(option, folder)
        except (FilesError, OutputPathError) as error:
            raise BenchmarkError(str(error)) from None
        remove_stale_partials(self.declared.outputs)


def benchmark_writers() -> set[str]:
    """The writers whose files a benchmark replaces: the benchmark scripts (the command
    their ledger entries name) and the tool that recorded the committed results."""
    return {path.name for path in BENCHMARKS_DIR.glob("*.py")} | {RESULTS_RECORDER}


def benchmark_wrote(path: Path) -> bool:
    """Whether the ledger of ``path``'s folder records it as a benchmark's
    (:func:`benchmark_writers`), unchanged since."""
    entry = read_ledger(path.parent).get(path.name)
    if entry is None or entry.get("command") not in benchmark_writers() or path.is_symlink():
        return False
    return ledger_matches(path, entry)


def refuse_saved_model(output: Declared) -> None:
    """FilesError when ``output`` is or lies inside a model sts-core saved (a folder with a
    save marker), read by this run or not: a benchmark never writes there. A run's own
    folder (``kind="run"``) may be one: the model its earlier run saved, which the run
    replaces itself."""
    for form in forms(output.path):
        for folder in form.parents if output.kind == "run" else (form, *form.parents):
            if (folder / SAVE_MARKER).is_file():
                where = "is" if folder == form else f"lies inside {folder},"
                raise FilesError(
                    f"{output.option} {output.path} {where} a model saved by sts-core: a "
                    f"benchmark never writes into a saved model; choose another {output.option}"
                )


def refuse_other_writers(output: Declared) -> None:
    """FilesError when an existing output file (or an entry of a folder output) is one
    sts-core wrote but no benchmark (another command's, a saved model's): a benchmark
    replaces what a benchmark wrote, nothing else. A file sts-core did not write at all is
    refused by the core's check, with its own words."""
    path = output.path
    if output.kind == "run" or path.is_symlink() or not path.exists():
        return
    if output.kind == "folder":
        entries = sorted(path.iterdir()) if path.is_dir() else []
    elif path.is_dir():
        return  # a folder where a file goes: the core's check names it
    else:
        entries = [path]
    for entry in entries:
        ours = written_by_project(entry)
        if ours is not None and not _scratch(entry) and not benchmark_wrote(entry):
            raise FilesError(
                f"{output.option} {entry} exists ({ours}): a benchmark replaces only what a "
                "benchmark script wrote; nothing was replaced: choose a new name or move it"
            )


def _scratch(path: Path) -> bool:
    """A ledger or a partial file of an interrupted write (never a result)."""
    return path.name == LEDGER_NAME or path.name.startswith(PARTIAL_PREFIX)


#: a partial file of an atomic write: ``.sts-partial-<pid>-<8 hex>-<target name>``
PARTIAL_FILE = re.compile(rf"^{re.escape(PARTIAL_PREFIX)}-(\d+)-[0-9a-f]{{8}}-(.+)$")


def remove_stale_partials(outputs: Iterable[Declared]) -> list[Path]:
    """Remove the partial files that a killed write of one of ``outputs`` (or of its
    folder's ledger) left beside it, whose writer no longer runs; the files removed. A
    partial file of a process still running (a search beside this one), or of another
    file, stays."""
    names: dict[Path, set[str]] = {}
    for output in outputs:
        if output.kind == "file":
            names.setdefault(output.path.parent, {LEDGER_NAME}).add(output.path.name)
    removed = []
    for folder, targets in names.items():
        for entry in folder.iterdir() if folder.is_dir() else ():
            found = PARTIAL_FILE.match(entry.name)
            if found and found[2] in targets and _stale(entry, int(found[1])):
                entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed


def _stale(partial: Path, pid: int) -> bool:
    """Whether ``partial`` (a file, not a link) was left by a writer ``pid`` that no longer
    runs (one this user may not signal counts as running)."""
    if not partial.is_file() or partial.is_symlink():
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return True
    except PermissionError:
        return False
    return False


def result_files(
    script: str,
    name: str,
    args: Any,
    suffixes: Sequence[str] = REPORT,
    models: Sequence[str] = (),
) -> tuple[ScriptFiles, Path]:
    """The declaration most benchmark runs make: the data folder and ``models`` read; the
    result stem ``name`` in ``--output-dir`` (:func:`output_stem`, with ``suffixes``) and
    ``--runs-file`` (when the script has it and it is given) written. Not checked yet: the
    caller declares what else it reads or writes, then :meth:`check`."""
    files = ScriptFiles(script)
    for model in models:
        files.model(model)
    stem = files.results(output_stem(name, args.output_dir, args.mode), suffixes)
    if getattr(args, "runs_file", None):
        files.writes("--runs-file", args.runs_file)
    return files, stem


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt(value: float, digits: int = 1) -> str:
    return "n/a" if value != value else f"{value:.{digits}f}"  # NaN check


def fmt_or_na(value: float | None, digits: int = 0) -> str:
    """:func:`fmt`, or ``n/a`` for what was not measured (None: e.g. GPU memory on a CPU)."""
    return "n/a" if value is None else fmt(value, digits)


def percent_or_na(value: float | None) -> str:
    """``12.34 %``, or ``n/a`` for what was not computed (None: e.g. MFU without a peak)."""
    return "n/a" if value is None else f"{value:.2f} %"


def join_values(values: Sequence[float], digits: int = 1) -> str:
    """``1.0, 2.0``: one value a round."""
    return ", ".join(f"{v:.{digits}f}" for v in values)


def comparison_row(
    label: str, comparison: dict[str, Any], digits: int = 1, ratio: str = "{:.2f}×"
) -> tuple[str, str, str, str]:
    """A row of an ours-vs-peer table from :meth:`Comparison.to_dict`: ``label``, the two
    medians (``digits``) and the median ratio (``ratio``, a format)."""
    return (
        label,
        fmt(comparison["ours_median"], digits),
        fmt(comparison["peer_median"], digits),
        ratio.format(comparison["ratio_median"]),
    )


def rounds_row(label: str, comparison: dict[str, Any]) -> tuple[str, str, str, str]:
    """A row of an ours-vs-peer table from :meth:`Comparison.to_dict`: ``label``, each
    round's values and ratios."""
    return (
        label,
        join_values(comparison["ours"]),
        join_values(comparison["peer"]),
        join_values(comparison["ratio_per_round"], 2),
    )


def throughput_rows(
    label: str, rounds_label: str, throughput: dict[str, Any]
) -> list[tuple[str, str, str, str]]:
    """The headline rows of an ours-vs-peer table: the median throughputs and their ratio
    (in bold), then each round's."""
    return [
        comparison_row(label, throughput, ratio="**{:.2f}×**"),
        rounds_row(rounds_label, throughput),
    ]


def peak_rss_row(peak_rss: dict[str, Any]) -> tuple[str, str, str, str]:
    """The row of the two sides' peak resident memory (MiB, medians) and its ratio."""
    return comparison_row("peak RSS, MiB (median)", peak_rss, digits=0, ratio="{:.2f}")


def sides_row(label: str, ours: float, peer: float, digits: int = 1) -> tuple[str, str, str, str]:
    """A row of an ours-vs-peer table with the two sides' values (``digits``) and no ratio."""
    return (label, fmt(ours, digits), fmt(peer, digits), "")


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ----------------------------------------------------------------------------- arguments
def mode_of(args: Any) -> str:
    """``smoke``, ``quick`` or ``full`` from the parsed flags."""
    if getattr(args, "smoke", False):
        return "smoke"
    return "quick" if getattr(args, "quick", False) else "full"


class OneLineParser(argparse.ArgumentParser):
    """A benchmark's parser: a bad option stops it with one line, ``error: argument
    --pairs: must be an integer of at least 1, got 0``, and exit status 2, as every other
    refusal of a benchmark (no usage block: ``--help`` has it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


def checked(kind: type, **bounds: Any) -> Callable[[str], Any]:
    """An argparse type: the text read as ``kind`` (``int`` or ``float``), then within
    ``bounds`` by the rule of every numeric option (:func:`sts_core.options.check_number`:
    finite, in range); argparse names the option: ``error: argument --fraction: must be
    in (0, 1], got nan``."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        try:
            check_number("value", value, **bounds)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix("value ")) from None
        return value

    parse.__name__ = kind.__name__
    return parse


#: the types of the benchmarks' numeric options: a count (steps, rounds, pairs, threads, a
#: width), a seed or a cap where 0 means all, a rate, epochs or seconds, a share of a whole
COUNT = positive_int
NON_NEGATIVE_INT = checked(int, **NON_NEGATIVE)
POSITIVE_NUMBER = checked(float, **POSITIVE)
FRACTION = checked(float, **UP_TO_ONE)


def benchmark_parser(
    doc: str, quick: str | None = None, smoke: str | None = None
) -> argparse.ArgumentParser:
    """A benchmark's parser (:class:`OneLineParser`), described by the first paragraph of
    its docstring ``doc``; with ``quick`` and / or ``smoke`` (their help), the ``--quick``
    and ``--smoke`` modes, one at a time (:func:`apply_mode`)."""
    parser = OneLineParser(description=doc.split("\n\n")[0])
    if quick or smoke:
        size = parser.add_mutually_exclusive_group()
        if quick:
            size.add_argument("--quick", action="store_true", help=quick)
        if smoke:
            size.add_argument("--smoke", action="store_true", help=smoke)
    return parser


def add_side_arguments(parser: argparse.ArgumentParser, sides: Sequence[str]) -> None:
    """``--threads``, ``--output-dir``, and the hidden ``--worker SIDE --spec JSON`` with
    which a script runs one of its ``sides`` in a fresh process (:func:`run_worker`)."""
    parser.add_argument("--threads", type=COUNT, default=None)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--worker", choices=sides, help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)


def add_model_argument(parser: argparse.ArgumentParser, default: str = MINILM) -> None:
    """``--model``: a model name under ``$STS_MODELS_DIR`` or a path (:func:`model_path`)."""
    parser.add_argument("--model", default=default, help="name under STS_MODELS_DIR or a path")


def apply_mode(
    args: argparse.Namespace, modes: dict[str, dict[str, Any]], skip: Sequence[str] = ()
) -> argparse.Namespace:
    """``args.mode`` (:func:`mode_of`), and each setting of ``modes[args.mode]`` that the
    flags left unset (None), except those in ``skip``; returns ``args``."""
    args.mode = mode_of(args)
    for key, value in modes[args.mode].items():
        if key not in skip and getattr(args, key, None) is None:
            setattr(args, key, value)
    return args


def default_threads() -> int:
    """torch's intra-op thread count in this process (a default of ``--threads``)."""
    import torch

    return torch.get_num_threads()
