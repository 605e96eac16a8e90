"""One call that measures the GPU paths: run it on a GPU machine and commit what it writes.

Each step runs in its own process with its own time limit (``STEP_LIMITS``) inside the
check's budget (``--budget``: 360 s on a GPU, so the call and a rerun fit the 15-minute
window) and is recorded as passed, failed or skipped (with the reason), so one broken or
slow path does not hide the others. The four checks of a path come first and run at the
same time (:data:`CONCURRENT_STEPS`: about 30 s together, none of them timed); then the
speed rows, which keep every run they finished when the budget cuts them:

1. ``lora-bf16``: two steps of a LoRA adapter on a Llama-architecture decoder (a tiny one
   built from a config, or ``--decoder`` under ``STS_MODELS_DIR``), bf16 on a GPU, through a
   package's ``train.py``;
2. ``qlora-4bit``: the same with ``load_in_4bit`` (needs CUDA and bitsandbytes);
3. ``faiss-gpu``: an exact inner-product k-NN on the GPU against faiss on the CPU (needs a
   faiss with GPU support: ``pip install 'sts-core[faiss-gpu]'``);
4. ``cuda-tests``: the tests marked ``cuda`` (``pytest -m cuda``: the CUDA-only kernels,
   e.g. torch's varlen attention against the reference), skipped on a CPU;
5. ``train``: ``benchmarks/train.py`` — ours with ``padding_free`` auto and packed (varlen
   where the backbone allows) side by side with sentence-transformers (on a GPU ``auto``
   pads this BERT: torch's varlen kernel has no attention dropout, so ours is the padded
   side; the CPU run-through adds a separate padded side);
6. ``encode``: ``benchmarks/encode.py``, ours (its default token budget) against
   sentence-transformers;
7. ``train-512``: ``train.py`` at batch 512 (ours ``auto`` against sentence-transformers,
   one round);
8. ``train-decoder``: ``train.py`` on a random-weight decoder of SmolLM2-135M's config
   beside the BERT-base rows (``--model-config smollm2-135m``, batch 64, one round);
9. ``encode-decoder``: ``encode.py`` on that decoder, one round;
10. ``train-compiled``: ``train.py`` with a fourth side, ours packed under
    ``torch_compile`` with rows filled to 512 tokens (``--compiled``), beside the packed
    side without them (compilation on and off), one round.

Steps 7–10 are optional (:data:`OPTIONAL_STEPS`): each runs only when its whole limit is
left of the budget, else it is skipped saying so, which in the default check they always
are: ``--only train-512 train-decoder encode-decoder`` (270 s) and ``--only
train-compiled`` run them in calls of their own. The CPU run-through skips them (its
``train`` and ``encode`` steps run the same scripts).

Every train row profiles its last steps in round 1 (``--profile-steps``: host and device
time per step, scalar reads and CUDA syncs, the log line apart; see ``_profile.py``).

It writes ``gpu_check.{json,md}`` after every step (a step that runs out of time keeps
its output so far; the steps not reached are listed as such) and the train and encode
reports (``gpu_train``, ``gpu_encode``) into ``--output-dir``, and prints which
``padding_free`` path ``auto`` should take on this GPU: ``varlen`` when the packed run
took the varlen kernel and beat the padded one by more than 5 %, else ``padded``.

Commands (from the repository root; STS_MODELS_DIR must name the offline models,
STS_DATA_DIR the data). On the lent GPU machine, where nothing can be installed from a
registry, ``benchmarks/gpu_check.sh`` runs it after installing the carried wheels
(``benchmarks/gpu_call.py prepare`` builds them and prints the call)::

    uv run python benchmarks/gpu_check.py    # a GPU machine with the project installed
    uv run python benchmarks/gpu_check.py --device cpu --smoke --output-dir /tmp/gpu  # CI
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import _common as common
import _gpu as gpu

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
#: how much faster the packed (varlen) run must train than the padded one for ``auto``
#: to take it
VARLEN_MARGIN = 1.05
#: seconds each step may take on a GPU, in the order the steps run. Sized from the H200
#: calls of 2026-11-27: lora-bf16 took 26.5–28.1 s, qlora-4bit 24.0–29.9, cuda-tests
#: 21.9–24.7 (run at once, the four take their longest); train (a parent and 3 sides × 2
#: rounds of 100 steps) took 225.0 s, of which about 22 s a process is not training
#: (imports, CUDA, data), and its sides trained 8–23 s: at 60 steps about 190 s; encode (a
#: parent and 2 sides × 2 rounds) took 117.9 s. The required steps: 35 + 200 + 125 = 360.
#: The optional rows are estimates, not yet measured: a row of n sides in one round is
#: about 22 + n × (22 + its training), plus compiling for the compiled side.
STEP_LIMITS = {
    "lora-bf16": 35,
    "qlora-4bit": 35,
    "faiss-gpu": 15,
    "cuda-tests": 35,
    "train": 200,
    "encode": 125,
    "train-512": 100,  # 12 steps of 512 (6,144 pairs, ~12 s at the batch-64 rate) a side
    "train-decoder": 100,  # 40 steps of 64 on a 30-layer decoder, ~10 s a side
    "encode-decoder": 70,  # a parent and 2 sides, one round
    "train-compiled": 190,  # 4 sides of 40 steps, one round, and ~50 s of compiling
}
#: the checks that run at the same time (each its own process, within its own limit)
CONCURRENT_STEPS = ("lora-bf16", "qlora-4bit", "faiss-gpu", "cuda-tests")
#: steps that run only when their whole limit is left of the budget (so they never cut the
#: check short); skipped in the CPU run-through
OPTIONAL_STEPS = ("train-512", "train-decoder", "encode-decoder", "train-compiled")
#: each train row's steps profiled at the end of round 1 (then one more with Python stacks),
#: on a GPU and in the run-through, where a run takes 4 steps (2 timed) instead of 3
PROFILE_STEPS = {"full": 5, "smoke": 1}
SMOKE_TRAIN_STEPS = 4
SMOKE_STEP_LIMIT = 600  # seconds a step may take in the CPU run-through (a loaded CI machine)
BUDGET = {"full": 360, "smoke": 1800}  # seconds the whole check may take (--budget)
#: a step is skipped when less than this is left of the budget
MIN_STEP_SECONDS = 5
# the line a run logs once: which training forward it took, and why
TRAINING_FORWARD = re.compile(r"training forward: (\w+ \(.*\))")


# ----------------------------------------------------------------------------- steps
def cuda_test_files() -> dict[Path, list[str]]:
    """The test files with a test marked ``cuda``, by test folder (each folder is its own
    pytest run, as in CI: the packages' test modules share names)."""
    roots = [REPO / "shared" / "tests", REPO / "tests", *sorted(REPO.glob("packages/*/tests"))]
    found: dict[Path, list[str]] = {}
    for root in roots:
        for path in sorted(root.rglob("test_*.py")):
            if "pytest.mark.cuda" in path.read_text(encoding="utf-8"):
                found.setdefault(root, []).append(str(path.relative_to(REPO)))
    return found


def cuda_tests_step(args: argparse.Namespace) -> dict[str, Any]:
    """``pytest -m cuda`` on each folder's marked files; passed only if some test ran and
    none failed, skipped when every one skipped (no GPU)."""
    files = cuda_test_files()
    if not files:
        return {"status": "failed", "reason": "no test is marked cuda", "seconds": 0.0}
    results = []
    for paths in files.values():
        command = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider"]
        results.append(run([*command, *paths], args))
    tails = "\n".join(r["output_tail"] for r in results)
    merged = {
        "command": " ; ".join(r["command"] for r in results),
        "seconds": round(sum(r["seconds"] for r in results), 1),
        "output_tail": tails,
        "status": "failed" if any(r["status"] == "failed" for r in results) else "passed",
    }
    if merged["status"] == "passed" and " passed" not in tails:
        return {**merged, "status": "skipped", "reason": "every cuda test skipped (no GPU)"}
    return merged


#: the steps that run a speed benchmark, which writes its report beside the check's, by
#: the report's name before the device prefix and the mode
SPEED_STEPS = {
    "train": "train",
    "encode": "encode",
    "train-512": "train_b512",
    "train-decoder": "train_smollm2",
    "encode-decoder": "encode_smollm2",
    "train-compiled": "train_compiled",
}
#: the decoder whose config (and tokenizer) the train-decoder row builds its model from
DECODER = gpu.DECODER_CONFIGS["smollm2-135m"]


def train_step(args: argparse.Namespace) -> dict[str, Any]:
    # on a GPU ``auto`` pads this BERT, so ours is the padded side: no separate one
    full = ["--batch-size", "64", "--max-steps", "60", "--repeats", "2", "--no-ablation"]
    # the run-through also goes through the compiled side (the train-compiled row's), with
    # dynamo's aot_eager backend: inductor's C++ compiling would take minutes on a CPU
    compiled = ["--compiled", "--compile-backend", "aot_eager"] if args.smoke else []
    return train_row(args, "train", ["--packed", *compiled, *benchmark_size(args, full)])


def train_512_step(args: argparse.Namespace) -> dict[str, Any]:
    full = ["--batch-size", "512", "--max-steps", "12", "--repeats", "1", "--no-ablation"]
    return train_row(args, "train-512", [*benchmark_size(args, full), "--tag", "b512"])


def train_decoder_step(args: argparse.Namespace) -> dict[str, Any]:
    missing = decoder_missing()
    if missing:
        return missing
    full = ["--batch-size", "64", "--max-steps", "40", "--repeats", "1", "--no-ablation"]
    size = benchmark_size(args, full, model_config="smollm2-135m")
    return train_row(args, "train-decoder", [*size, "--tag", "smollm2"])


def train_compiled_step(args: argparse.Namespace) -> dict[str, Any]:
    full = ["--batch-size", "64", "--max-steps", "40", "--repeats", "1", "--no-ablation"]
    options = ["--packed", "--compiled", "--pack-multiple", "512"]
    size = benchmark_size(args, full)
    return train_row(args, "train-compiled", [*options, *size, "--tag", "compiled"])


def decoder_missing() -> dict[str, Any] | None:
    """The skipped result of a decoder row when SmolLM2's folder is not there, else None."""
    if (common.models_dir() / DECODER / "config.json").is_file():
        return None
    why = f"{DECODER} (its config and tokenizer) is not under STS_MODELS_DIR"
    return {"status": "skipped", "reason": why, "seconds": 0.0}


def train_row(args: argparse.Namespace, step: str, options: list[str]) -> dict[str, Any]:
    """A row of ``train.py`` with ``options``, its last steps of round 1 profiled: the
    step's result with the report's summary."""
    profile = ["--profile-steps", str(PROFILE_STEPS[args.mode])]
    if args.smoke:
        profile += ["--max-steps", str(SMOKE_TRAIN_STEPS)]
    command = [sys.executable, str(BENCHMARKS / "train.py"), *options, *profile]
    result = run_keeping_runs(command, args)
    report = args.out / (gpu.stem_name(SPEED_STEPS[step], args.device) + suffix(args))
    if result["status"] == "passed":
        result["summary"] = json.loads(report.with_suffix(".json").read_text())["summary"]
        result["report"] = report.name + ".md"
    return result


def encode_step(args: argparse.Namespace) -> dict[str, Any]:
    size = benchmark_size(args, ["--batch-size", "128", "--repeats", "2"])
    return encode_row(args, "encode", size)


def encode_decoder_step(args: argparse.Namespace) -> dict[str, Any]:
    missing = decoder_missing()
    if missing:
        return missing
    full = ["--batch-size", "128", "--repeats", "1"]
    size = benchmark_size(args, full, model_config="smollm2-135m")
    return encode_row(args, "encode-decoder", [*size, "--tag", "smollm2"])


def encode_row(args: argparse.Namespace, step: str, options: list[str]) -> dict[str, Any]:
    """A row of ``encode.py`` with ``options``: the step's result, naming its report."""
    result = run_keeping_runs([sys.executable, str(BENCHMARKS / "encode.py"), *options], args)
    if result["status"] == "passed":
        result["report"] = gpu.stem_name(SPEED_STEPS[step], args.device) + suffix(args) + ".md"
    return result


def lora_step(args: argparse.Namespace, four_bit: bool = False) -> dict[str, Any]:
    if four_bit:
        missing = qlora_missing(args.device)
        if missing:
            return {"status": "skipped", "reason": missing, "seconds": 0.0}
    with tempfile.TemporaryDirectory(prefix="sts-gpu-check-") as scratch:
        recipe = decoder_recipe(args, Path(scratch), four_bit)
        command = [sys.executable, str(REPO / "packages" / "cosent" / "train.py")]
        result = run([*command, "--config", str(recipe)], args)
        metrics = Path(scratch) / "out" / "metrics.json"
        if result["status"] == "passed":
            trained = json.loads(metrics.read_text(encoding="utf-8"))["train"]
            result["train_loss"] = trained.get("train_loss")
    found = TRAINING_FORWARD.search(result.get("output_tail", ""))
    if found:
        result["path"] = found.group(1)  # the path ``padding_free: auto`` took, and why
    return result


def faiss_step(args: argparse.Namespace) -> dict[str, Any]:
    return run([sys.executable, str(Path(__file__)), "--worker", "faiss"], args)


# ----------------------------------------------------------------------------- helpers
def benchmark_size(
    args: argparse.Namespace, full: list[str], model_config: str = "bert-base"
) -> list[str]:
    """A speed benchmark's size and device: a random-weight model (BERT-base) in bf16 on a
    GPU; the benchmark's own smoke mode on a CPU."""
    where = ["--device", args.device, "--output-dir", str(args.out)]
    if args.smoke:
        return [*where, "--smoke"]
    return [*where, "--dtype", "bf16", "--model-config", model_config, *full]


def suffix(args: argparse.Namespace) -> str:
    return "_smoke" if args.smoke else ""


def qlora_missing(device: str) -> str | None:
    """Why a 4-bit step cannot run here, or None."""
    import importlib.util

    if device != "cuda":
        return "4-bit weights (bitsandbytes) need a CUDA GPU"
    if importlib.util.find_spec("bitsandbytes") is None:
        return "bitsandbytes is not installed: pip install 'sts-core[bitsandbytes]'"
    return None


def decoder_recipe(args: argparse.Namespace, scratch: Path, four_bit: bool) -> Path:
    """Two optimizer steps of CoSENT with a LoRA adapter on a decoder (last-token pooling)."""
    from sts_core.testing import make_tiny_llama, write_fixture_recipe

    model = common.model_path(args.decoder) if args.decoder else make_tiny_llama(scratch / "m")
    fixtures = REPO / "shared" / "tests" / "fixtures" / "training"
    settings = {"use_lora": "true", "pooling": "last_token", "max_steps": "2"}
    settings |= {"bf16": "true"} if args.device == "cuda" else {"use_cpu": "true"}
    settings |= {"load_in_4bit": "true"} if four_bit else {}
    return write_fixture_recipe(
        scratch / "recipe.yaml",
        "the GPU check's decoder step",
        model,
        fixtures / "sts-train.csv",
        fixtures / "sts-dev.csv",
        scratch / "out",
        loss="cosent",
        score_range="[0, 5]",
        **settings,
    )


def run(command: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Run one step's command from the repository root within ``args.limit`` seconds; its
    status, seconds and output tail (what it printed before a timeout too)."""
    start = time.perf_counter()
    shown = " ".join(Path(c).name if c == sys.executable else c for c in command)
    # one stream, so the tail keeps the order things happened in; a session of its own, so
    # a step cut off takes its workers with it (they would go on using the GPU)
    process = subprocess.Popen(
        command,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, _ = process.communicate(timeout=args.limit)
        status = "passed" if process.returncode == 0 else "failed"
        output = stdout.strip().splitlines()
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, _ = process.communicate()
        status = "failed"
        output = [*printed(stdout), f"timed out after {args.limit} s"]
    return {
        "command": shown.replace(str(REPO) + "/", ""),
        "status": status,
        "seconds": round(time.perf_counter() - start, 1),
        "output_tail": "\n".join(output[-12:]),
    }


def run_keeping_runs(command: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """:func:`run` for a speed benchmark, which saves each of its runs as it ends: the step
    keeps their summaries (``runs``), also when it is cut off at its limit."""
    with tempfile.TemporaryDirectory(prefix="sts-gpu-check-runs-") as scratch:
        runs_file = Path(scratch) / "runs.json"
        result = run([*command, "--runs-file", str(runs_file)], args)
        if runs_file.is_file():  # written whole or not at all (common.save_runs_so_far)
            result["runs"] = json.loads(runs_file.read_text(encoding="utf-8"))
    result["command"] = result["command"].replace(f" --runs-file {runs_file}", "")
    return result


def printed(*streams: bytes | str | None) -> list[str]:
    """The lines a timed-out process printed (``TimeoutExpired`` may hold bytes)."""
    text = "".join(
        s.decode("utf-8", "replace") if isinstance(s, bytes) else s or "" for s in streams
    )
    return text.strip().splitlines()


def faiss_worker() -> dict[str, Any]:
    """faiss on the GPU against faiss on the CPU: exact inner product, 5 neighbours of
    1,000 queries among 20,000 random 384-d vectors; the neighbour lists must agree."""
    import numpy as np

    try:
        import faiss
    except ImportError:
        return {"skipped": "faiss is not installed: pip install 'sts-core[faiss-gpu]'"}
    if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
        return {"skipped": "this faiss has no GPU support or sees no GPU (faiss-cpu)"}
    rng = np.random.default_rng(0)
    base = rng.standard_normal((20_000, 384), dtype=np.float32)
    queries = rng.standard_normal((1_000, 384), dtype=np.float32)
    cpu_index = faiss.IndexFlatIP(384)
    cpu_index.add(base)
    gpu_index = faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, faiss.IndexFlatIP(384))
    gpu_index.add(base)
    start = time.perf_counter()
    _, gpu_ids = gpu_index.search(queries, 5)
    seconds = time.perf_counter() - start
    _, cpu_ids = cpu_index.search(queries, 5)
    agreement = float((gpu_ids == cpu_ids).mean())
    return {"agreement": agreement, "gpu_search_seconds": round(seconds, 4)}


def faiss_result(result: dict[str, Any]) -> dict[str, Any]:
    """The faiss step's status from the worker's result line."""
    if result["status"] != "passed":
        return result
    line = [ln for ln in result["output_tail"].splitlines() if ln.startswith("{")][-1]
    found = json.loads(line)
    if "skipped" in found:
        return {**result, "status": "skipped", "reason": found["skipped"]}
    status = "passed" if found["agreement"] >= 0.999 else "failed"
    return {**result, **found, "status": status}


def auto_path(train: dict[str, Any]) -> dict[str, Any]:
    """Which path ``padding_free: auto`` should take, from the train step's summary."""
    summary = train.get("summary") or {}
    packed, padded = summary.get("packed_throughput"), summary.get("padded_throughput")
    if not padded and (summary.get("ours_path") or [None])[0] == "padded":
        padded = summary.get("throughput")  # ``auto`` took the padded path: ours is that side
    if not packed or not padded:
        return {"take": None, "why": "the train step did not run both sides"}
    path = (summary.get("packed_path") or ["?"])[0]
    ratio = packed["ours_median"] / padded["ours_median"]
    why = (
        f"packed ({path}) {packed['ours_median']:.1f} vs padded {padded['ours_median']:.1f} pairs/s"
    )
    take = "varlen" if path == "varlen" and ratio > VARLEN_MARGIN else "padded"
    return {"take": take, "ratio": round(ratio, 3), "packed_path": path, "why": why}


# ----------------------------------------------------------------------------- report
def report_markdown(steps: dict[str, dict], auto: dict[str, Any], info: dict) -> str:
    rows = [
        [name, step["status"], step.get("seconds", 0.0), step.get("reason", ""),
         f"`{step['command']}`" if step.get("command") else ""]
        for name, step in steps.items()
    ]  # fmt: skip
    from sts_core.encoder.packing import AUTO_TAKES_VARLEN

    now = (
        "varlen (where its kernel applies the attention dropout)" if AUTO_TAKES_VARLEN else "padded"
    )
    return "\n".join(
        [
            "# GPU check",
            "",
            common.machine_markdown(info),
            "",
            common.markdown_table(["step", "status", "seconds", "why skipped", "command"], rows),
            "",
            f"`padding_free: auto` on this GPU should take: **{auto['take']}** "
            f"({auto['why']}); the code takes {now} now (`AUTO_TAKES_VARLEN`).",
            "",
            "Reports of the speed steps: "
            + ", ".join(f"[{s['report']}]({s['report']})" for s in steps.values() if "report" in s),
            *runs_markdown(steps),
            *paths_markdown(steps),
        ]
    )


def paths_markdown(steps: dict[str, dict]) -> list[str]:
    """The training forward each decoder step took (as its run logged it)."""
    lines = [f"- {name}: {step['path']}" for name, step in steps.items() if step.get("path")]
    if not lines:
        return []
    return ["", "Training forward of the decoder steps (`padding_free: auto`):", *lines]


def runs_markdown(steps: dict[str, dict]) -> list[str]:
    """Each speed step's runs (throughput per side, in the order they ran): the numbers a
    step cut off at its limit still measured."""
    lines = []
    for name, step in steps.items():
        for key, sides in step.get("runs", {}).items():
            shown = "; ".join(
                f"{side} {', '.join(str(r.get('throughput')) for r in runs)}"
                for side, runs in sides.items()
            )
            lines.append(f"- {name} ({key}, {step['status']}): throughput per run: {shown}")
    return ["", "Runs measured (per second, round by round):", *lines] if lines else []


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.benchmark_parser(__doc__, smoke="a CPU run-through (CI): each step tiny")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--decoder", help="a decoder under STS_MODELS_DIR for the LoRA steps")
    parser.add_argument("--output-dir", help="default: benchmarks/results")
    parser.add_argument(
        "--budget",
        type=common.POSITIVE_NUMBER,
        help="seconds the whole check may take (360; --smoke 1800)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(PLAN),
        help="run these steps alone (a rerun of the ones that failed); the others: not run",
    )
    parser.add_argument("--worker", choices=["faiss"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.mode = "smoke" if args.smoke else "full"
    args.budget = args.budget or BUDGET[args.mode]
    if args.device == "cpu" and not args.smoke:
        parser.error("--device cpu measures nothing of a GPU: add --smoke (a run-through)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(faiss_worker()), flush=True)
        return 0
    gpu.check_device(argparse.Namespace(device=args.device, dtype="fp32"))
    stem = check_files(args)  # every input and output checked before the steps' minutes
    info = {**common.machine_info(), **gpu.gpu_info(), "budget_seconds": args.budget}
    steps = run_steps(args, lambda done: write_report(stem, done, info))
    auto = auto_path(steps.get("train", {}))
    print(f"padding_free auto should take: {auto['take']} ({auto['why']})")
    print(f"wrote {stem}.md/.json")
    return 1 if any(s["status"] == "failed" for s in steps.values()) else 0


def check_files(args: argparse.Namespace) -> Path:
    """Declare and check what the check reads (the data, MiniLM, ``--decoder``) and writes
    in ``--output-dir`` (its own report and the train and encode steps' reports), before
    any step; ``args.out`` is the checked folder. The stem of ``gpu_check.*``."""
    files, stem = common.result_files("gpu_check.py", "gpu_check", args, models=[common.MINILM])
    if args.decoder:
        files.model(args.decoder, "--decoder")
    if (common.models_dir() / DECODER / "config.json").is_file():  # else its row is skipped
        files.model(DECODER)
    args.out = stem.parent
    for name in SPEED_STEPS.values():
        report = args.out / (gpu.stem_name(name, args.device) + suffix(args))
        files.results(report, common.REPORT_AND_CHART)
    files.check()
    return stem


PLAN: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "lora-bf16": lora_step,
    "qlora-4bit": lambda a: lora_step(a, four_bit=True),
    "faiss-gpu": lambda a: faiss_result(faiss_step(a)),
    "cuda-tests": cuda_tests_step,
    "train": train_step,
    "encode": encode_step,
    "train-512": train_512_step,
    "train-decoder": train_decoder_step,
    "encode-decoder": encode_decoder_step,
    "train-compiled": train_compiled_step,
}


def run_steps(
    args: argparse.Namespace, written: Callable[[dict[str, dict]], None]
) -> dict[str, dict]:
    """Each step of ``PLAN`` in order (the :data:`CONCURRENT_STEPS` at the same time), each
    within its limit and what is left of the budget (a step is skipped once less than
    ``MIN_STEP_SECONDS`` is left); ``written`` gets the steps so far after each step, so a
    cut-off check keeps what it measured."""
    deadline = time.monotonic() + args.budget
    steps: dict[str, dict] = {}
    for name in PLAN:
        if name in steps:  # ran with its group
            continue
        together = [member for member in CONCURRENT_STEPS if member in PLAN]
        group = together if name in together else [name]
        left = deadline - time.monotonic()
        print(f"::: {' + '.join(group)} …", flush=True)
        skipped = {member: skip_reason(args, member, left) for member in group}
        runnable = [member for member in group if skipped[member] is None]
        results = run_at_once(runnable, args, left)
        for member in group:
            reason = skipped[member]
            steps[member] = (
                results[member]
                if reason is None
                else {"status": "skipped", "seconds": 0.0, "reason": reason}
            )
            print(f"    {member}: {steps[member]['status']} ({steps[member].get('seconds', 0)} s) "
                  f"{steps[member].get('reason', '')}", flush=True)  # fmt: skip
            written(steps)
    return steps


def skip_reason(args: argparse.Namespace, name: str, left: float) -> str | None:
    """Why step ``name`` does not run with ``left`` seconds of the budget, or None."""
    if getattr(args, "only", None) and name not in args.only:
        return f"--only {' '.join(args.only)}"
    if left < MIN_STEP_SECONDS:
        return f"the check's budget of {args.budget:g} s was spent"
    if name in OPTIONAL_STEPS and (args.smoke or left < STEP_LIMITS[name]):
        return optional_why(args, name, left)
    return None


def run_at_once(
    names: list[str], args: argparse.Namespace, left: float
) -> dict[str, dict[str, Any]]:
    """The steps ``names`` run at the same time (one thread each, waiting on its own
    process), each with its own limit (``args.limit``) under ``left`` seconds."""

    def one(name: str) -> dict[str, Any]:
        limit = SMOKE_STEP_LIMIT if args.smoke else STEP_LIMITS[name]
        return PLAN[name](
            argparse.Namespace(**{**vars(args), "limit": max(1, int(min(limit, left)))})
        )

    if len(names) == 1:
        return {names[0]: one(names[0])}
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        return dict(zip(names, pool.map(one, names), strict=True))


def optional_why(args: argparse.Namespace, name: str, left: float) -> str:
    """Why an optional step does not run: a run-through, or too little of the budget."""
    if args.smoke:
        return "a GPU row: the CPU run-through's train and encode steps run the same scripts"
    return (
        f"an optional row: it needs {STEP_LIMITS[name]} s, {left:.0f} s of the budget was "
        f"left (run it alone: --only {name})"
    )


def write_report(stem: Path, steps: dict[str, dict], info: dict) -> None:
    """``gpu_check.{json,md}`` with the steps run so far; the others listed as not run."""
    waiting = {"status": "not run yet", "seconds": 0.0}
    shown = {name: steps.get(name, waiting) for name in PLAN}  # in the order they run
    auto = auto_path(steps.get("train", {}))
    common.write_json(stem, {"machine": info, "steps": shown, "auto": auto})
    common.write_markdown(stem, report_markdown(shown, auto, info))


if __name__ == "__main__":
    common.main_guard(main)
