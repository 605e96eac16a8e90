"""The three benchmark scripts run end to end in ``--quick`` mode (a smoke test, not a
timed test: no speed is asserted; a few minutes each here) and write their markdown, JSON
and PNG; what is checked are the results that must hold whatever the machine: identical
embeddings, identical training when packing is off, and a complete quality table; every
derived number in the JSON (pairs, throughputs, medians, ratios, averages, the untrained
model's scores) is recomputed here from what it is derived from.
``BENCHMARK_TEST_MODE=smoke`` runs the seconds-sized ``--smoke`` mode instead."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from benchmark_support import load_benchmark_script
from launch_support import REPO, subprocess_env
from scipy.stats import spearmanr

from sts_core.command_files import LEDGER_NAME, set_command, write_text

MODE = os.environ.get("BENCHMARK_TEST_MODE", "quick")
STS_TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")


def needs_benchmark_data(test: Callable) -> Callable:
    """A benchmark run: the real data and models (``benchmark_env``), and minutes. (The
    pair count of train.py, tested alone, needs neither.)"""
    for mark in (pytest.mark.real_data, pytest.mark.real_model, pytest.mark.slow):
        test = mark(test)
    return pytest.mark.usefixtures("benchmark_env", "torch_one_thread")(test)


def run_script(name: str, *arguments: str) -> str:
    """``benchmarks/<name>.py ARGUMENTS`` in the environment a launched script gets (one
    thread, no hub), its ``main`` called in this process: its standard output. What is
    checked is what the script writes and prints, not its process (a start is ~20 s); the
    scripts that train or measure in processes of their own still start those."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        for key, value in subprocess_env().items():
            patch.setenv(key, value)
        status = load_benchmark_script(name).main(list(arguments))
    assert status == 0, out.getvalue()[-3000:]
    return out.getvalue()


def render(name: str, result: Path) -> None:
    """``benchmarks/<name>.py --render RESULT``: the script's ``main`` called here (what is
    checked is the report it writes from the JSON alone; a process start is ~20 s)."""
    assert load_benchmark_script(name).main(["--render", str(result)]) == 0


def run_benchmark(name: str, output_dir: Path) -> dict:
    run_script(name, f"--{MODE}", "--output-dir", str(output_dir))
    for suffix in (".md", ".json", ".png"):
        assert (output_dir / f"{name}_{MODE}{suffix}").stat().st_size > 0
    return json.loads((output_dir / f"{name}_{MODE}.json").read_text(encoding="utf-8"))


def rate(count: float, seconds: float) -> object:
    """``count / seconds`` as the JSON holds it: seconds rounded to 3 digits, the rate to 2."""
    return pytest.approx(count / seconds, abs=count * 5e-4 / (seconds - 5e-4) ** 2 + 0.006)


def check_comparison(comparison: dict, ours: list[float], peer: list[float]) -> None:
    """A ``Comparison.to_dict()``: the rounds' values, their medians and the ratios."""
    assert comparison["ours"] == ours and comparison["peer"] == peer
    assert comparison["ours_median"] == pytest.approx(statistics.median(ours))
    assert comparison["peer_median"] == pytest.approx(statistics.median(peer))
    ratios = [a / b for a, b in zip(ours, peer, strict=True)]
    assert comparison["ratio_per_round"] == pytest.approx(ratios, abs=5e-4)
    assert comparison["ratio_median"] == pytest.approx(statistics.median(ratios))


@pytest.mark.parametrize(
    "steps,expected",
    [(1, 16), (337, 5392), (338, 5398), (339, 5414), (676, 10796), (680, 10796 + 64)],
)
def test_train_benchmark_counts_the_last_partial_batch(steps: int, expected: int) -> None:
    """5,398 pairs in batches of 16: 337 full batches and one of 6 an epoch."""
    assert load_benchmark_script("train").pairs_trained(steps, 16, 5398) == expected


def test_the_compiled_side_takes_its_backend_mode_and_multiple(tmp_path: Path) -> None:
    from sts_core.training import BaseConfig
    from sts_core.training.config import ModelArguments

    train = load_benchmark_script("train")
    options = ["--compiled", "--pack-multiple", "64", "--compile-backend", "aot_eager"]
    args = train.parse_args([*options, "--compile-mode", "reduce-overhead"])
    args.model_path = tmp_path
    spec = json.loads(json.dumps(train.worker_spec(args)))  # as a worker reads it
    training, model = train.compile_options(spec, compiled=True)
    config = BaseConfig(output_dir=str(tmp_path), use_cpu=True, **training)
    assert config.torch_compile and config.torch_compile_backend == "aot_eager"
    assert config.torch_compile_mode == "reduce-overhead"
    assert ModelArguments(model_name_or_path="m", **model).pack_to_multiple_of == 64
    assert train.compile_options(spec, compiled=False) == ({}, {})  # the other sides


@pytest.fixture
def benchmark_env(
    sts_data_dir: Path, benchmark_minilm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STS_DATA_DIR", str(sts_data_dir))
    monkeypatch.setenv("STS_MODELS_DIR", str(benchmark_minilm_dir.parent))


@pytest.fixture(scope="session")
def benchmark_minilm_dir(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The all-MiniLM-L6-v2 the benchmark scripts train and score in these tests. In smoke
    mode its first two of six layers (``first_layers_copy``: the same tokenizer, pooling
    and maximum length, so every row, table and identity the tests check, at about half
    the time), in a models folder of its own under the model's name, so the scripts'
    defaults find it, beside links to the other real models; in quick mode the whole
    model. (The GPU call's smoke run, whose reports the speed tests read, keeps it whole.)"""
    if MODE != "smoke":
        return minilm_dir
    from sts_core.testing import first_layers_copy

    models = tmp_path_factory.mktemp("smoke-models")
    for other in minilm_dir.parent.iterdir():
        if other.name != minilm_dir.name:
            (models / other.name).symlink_to(other)
    return first_layers_copy(minilm_dir, models / minilm_dir.name, layers=2)


@pytest.fixture(scope="module")
def gpu_check_dir(
    tmp_path_factory: pytest.TempPathFactory, sts_data_dir: Path, minilm_dir: Path
) -> Path:
    """``gpu_check.py --device cpu --smoke`` run once: its train and encode steps are those
    benchmarks' smoke runs, which their tests below read (smoke mode only). When
    ``STS_GPU_CHECK_DIR`` names the reports of CI's run of the prepared GPU call
    (``benchmarks/gpu_call_smoke.sh``: the GPU machine's versions, the project from its
    wheels), those are read instead of a second run here."""
    given = os.environ.get("STS_GPU_CHECK_DIR")
    if given and (Path(given) / "gpu_check_smoke.json").is_file():
        return Path(given)
    output_dir = tmp_path_factory.mktemp("gpu-check")
    env = {"STS_DATA_DIR": str(sts_data_dir), "STS_MODELS_DIR": str(minilm_dir.parent)}
    script = REPO / "benchmarks" / "gpu_check.py"
    command = [sys.executable, str(script), "--device", "cpu", "--smoke", "--output-dir"]
    done = subprocess.run(
        [*command, str(output_dir)],
        cwd=REPO,
        env={**subprocess_env(), **env},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "padding_free auto should take: padded" in done.stdout
    return output_dir


def speed_benchmark(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict:
    """A speed benchmark's results: in smoke mode those of the GPU check's CPU run-through
    (which runs it with ``--smoke``), else a run of its own in ``MODE``."""
    if MODE != "smoke":
        return run_benchmark(name, tmp_path)
    output_dir = request.getfixturevalue("gpu_check_dir")
    for suffix in (".md", ".json", ".png"):
        assert (output_dir / f"{name}_{MODE}{suffix}").stat().st_size > 0
    shutil.copy(output_dir / f"{name}_{MODE}.md", tmp_path)
    return json.loads((output_dir / f"{name}_{MODE}.json").read_text(encoding="utf-8"))


@needs_benchmark_data
def test_gpu_check_runs_each_step_and_says_why_one_is_skipped(request) -> None:
    if MODE != "smoke":
        pytest.skip("on a CPU the GPU check runs only in --smoke mode")
    output_dir = request.getfixturevalue("gpu_check_dir")
    report = json.loads((output_dir / "gpu_check_smoke.json").read_text(encoding="utf-8"))
    steps = report["steps"]
    # the checks (at once), then the speed rows (the GPU check's budget may cut the last)
    assert list(steps) == [
        "lora-bf16",
        "qlora-4bit",
        "faiss-gpu",
        "cuda-tests",
        "train",
        "encode",
        "train-512",
        "train-decoder",
        "encode-decoder",
        "train-compiled",
    ]
    assert {name: step["status"] for name, step in steps.items()} == {
        "cuda-tests": "skipped",  # marked tests exist, and skip without a GPU
        "train": "passed",
        "encode": "passed",
        "lora-bf16": "passed",  # on a CPU in float32: the script path, not bf16
        "qlora-4bit": "skipped",
        "faiss-gpu": "skipped",
        "train-512": "skipped",  # the GPU rows: the train and encode steps run the scripts
        "train-decoder": "skipped",
        "encode-decoder": "skipped",
        "train-compiled": "skipped",
    }
    assert "run-through" in steps["train-512"]["reason"]
    assert "test_attention_paths.py" in steps["cuda-tests"]["command"]
    assert "CUDA" in steps["qlora-4bit"]["reason"] and "faiss" in steps["faiss-gpu"]["reason"]
    assert math.isfinite(steps["lora-bf16"]["train_loss"])
    # auto's path from the train step's padded and packed sides (block mask on a CPU)
    summary = steps["train"]["summary"]
    auto = report["auto"]
    assert auto["packed_path"] == summary["packed_path"][0] == "block_mask"
    assert auto["take"] == "padded"  # only a varlen kernel would be taken
    packed, padded = summary["packed_throughput"], summary["padded_throughput"]
    assert auto["ratio"] == pytest.approx(packed["ours_median"] / padded["ours_median"], abs=1e-3)
    markdown = (output_dir / "gpu_check_smoke.md").read_text(encoding="utf-8")
    assert "should take: **padded**" in markdown and "[train_smoke.md](train_smoke.md)" in markdown


def test_gpu_check_takes_varlen_only_when_the_packed_run_used_it_and_was_faster() -> None:
    check = load_benchmark_script("gpu_check")

    def train(path: str, packed: float, padded: float) -> dict:
        return {
            "summary": {
                "packed_path": [path, "why"],
                "packed_throughput": {"ours_median": packed},
                "padded_throughput": {"ours_median": padded},
            }
        }

    assert check.auto_path(train("varlen", 120.0, 100.0))["take"] == "varlen"
    assert check.auto_path(train("varlen", 104.0, 100.0))["take"] == "padded"  # within 5 %
    assert check.auto_path(train("block_mask", 300.0, 100.0))["take"] == "padded"
    assert check.auto_path({"status": "failed"})["take"] is None
    # on a GPU the train step runs no separate padded side while ``auto`` pads there
    alone = train("varlen", 120.0, 100.0)
    alone["summary"]["throughput"] = alone["summary"].pop("padded_throughput")
    assert check.auto_path(alone)["take"] is None  # ours' path unknown: not taken as padded
    alone["summary"]["ours_path"] = ["padded", "padding_free: auto pads on cuda"]
    assert check.auto_path(alone) == {
        "take": "varlen",
        "ratio": 1.2,
        "packed_path": "varlen",
        "why": "packed (varlen) 120.0 vs padded 100.0 pairs/s",
    }
    alone["summary"]["ours_path"] = ["varlen", "auto took varlen"]
    assert check.auto_path(alone)["take"] is None
    skipped = {"status": "passed", "output_tail": 'log\n{"skipped": "no GPU"}'}
    assert check.faiss_result(skipped)["status"] == "skipped"
    agreed = {"status": "passed", "output_tail": '{"agreement": 1.0, "gpu_search_seconds": 0.1}'}
    assert check.faiss_result(agreed)["status"] == "passed"
    differs = {"status": "passed", "output_tail": '{"agreement": 0.9, "gpu_search_seconds": 0.1}'}
    assert check.faiss_result(differs)["status"] == "failed"


@needs_benchmark_data
def test_encode_benchmark_runs(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    result = speed_benchmark("encode", tmp_path, request)
    (model,) = result["models"]
    assert model["max_abs_diff"] < 1e-5  # the same embeddings as sentence-transformers
    assert model["settings_match"]
    # throughput: sentences / the fastest pass of each round; then medians and ratios
    throughputs = {}
    for side in ("ours", "peer"):
        for run in model["runs"][side]:
            assert run["seconds"] == min(run["pass_seconds"]) > 0
            assert run["throughput"] == rate(run["sentences"], run["seconds"])
        throughputs[side] = [run["throughput"] for run in model["runs"][side]]
    check_comparison(model["throughput"], throughputs["ours"], throughputs["peer"])
    assert "ours (library encode)" in model["ablation"]["variants"]
    # real tokens per second: the tokens each side encodes (ours: each distinct sentence
    # once) over its passes' seconds; no MFU nor GPU memory on a CPU
    for side in ("ours", "peer"):
        side_runs, efficiency = model["runs"][side], model["efficiency"]["sides"][side]
        tokens = side_runs[0]["tokens"]["encoded"]
        rates = [tokens / run["seconds"] for run in side_runs]
        assert efficiency["tokens_per_second"] == pytest.approx(statistics.median(rates), 0.01)
        assert efficiency["mfu_percent"] is None and efficiency["peak_gpu_memory_mb"] is None
    ours_tokens, peer_tokens = (model["runs"][s][0]["tokens"]["encoded"] for s in ("ours", "peer"))
    assert ours_tokens < peer_tokens  # the test sets repeat sentences: ours encodes fewer


@needs_benchmark_data
def test_train_benchmark_runs(
    tmp_path: Path, sts_data_dir: Path, request: pytest.FixtureRequest
) -> None:
    from sts_core.data import load_filtered_stsb_sick

    result = speed_benchmark("train", tmp_path, request)
    settings, summary, runs = result["settings"], result["summary"], result["runs"]
    # pairs: the training set's own length, the last batch of an epoch partial
    size = len(load_filtered_stsb_sick(sts_data_dir)[0])
    assert settings["train_pairs"] == size
    steps, batch = settings["max_steps"], settings["batch_size"]
    per_epoch = -(-size // batch)

    def pairs_of(count: int) -> int:
        return (count // per_epoch) * size + min((count % per_epoch) * batch, size)

    pairs = pairs_of(steps)
    # round 1 profiles its last steps (the GPU check's run-through: 1, then 1 with stacks):
    # its throughput counts the steps before them
    profiled = settings["profile_steps"]
    assert profiled == (1 if MODE == "smoke" else 0)
    for side, side_runs in runs.items():
        for index, run in enumerate(side_runs):
            timed = steps - (profiled + 1 if profiled and index == 0 else 0)
            assert run["steps"] == steps and run["timed_steps"] == timed, side
            assert run["pairs"] == pairs_of(timed), side
            assert run["throughput"] == rate(pairs_of(timed), run["seconds"]), side
            assert [step for step, _ in run["losses"]] == list(range(1, steps + 1)), side
            assert all(math.isfinite(loss) for _, loss in run["losses"]), side
            assert ("profile" in run) == (profiled > 0 and index == 0), side
    markdown = (tmp_path / f"train_{MODE}.md").read_text(encoding="utf-8")
    assert f"({size:,} pairs), {steps} steps of batch {batch} ({pairs:,} pairs)" in markdown
    if profiled:
        check_profiles(summary["profile"], runs, profiled, markdown)
    throughput = {side: [run["throughput"] for run in runs[side]] for side in runs}
    check_comparison(summary["throughput"], throughput["ours"], throughput["peer"])
    # without packing, our trainer takes the peer's steps: the same loss at every step
    peer = dict(map(tuple, runs["peer"][0]["losses"]))
    padded = runs["ours-padded"][0]["losses"]
    largest = max(abs(loss - peer[step]) for step, loss in padded)
    assert summary["padded_vs_peer_max_loss_diff"] == pytest.approx(largest, abs=1e-12)
    assert largest < 1e-4
    # the run-through goes through the compiled side (dynamo's aot_eager backend there)
    assert ("ours-compiled" in runs) == (MODE == "smoke")
    if "ours-compiled" in runs:
        assert settings["compile_backend"] == "aot_eager" and settings["pack_multiple"] == 512
        assert summary["compiled"]["path"][0] == "block_mask"  # a CPU: filling is varlen's
        shown = "Ours with `torch_compile: true` (aot_eager, mode default) and `pack_to_"
        assert shown + "multiple_of: 512`" in markdown
    # the path each side of ours took, as the encoder reports it (a CPU: packed rows)
    sides = summary["efficiency"]["sides"]
    assert sides["ours"]["packing_path"][0] == "block_mask"
    assert sides["ours-padded"]["packing_path"] == ["padded", "padding_free: false"]
    per_pair = settings["tokens"]["tokens_per_pair"]
    for side, values in sides.items():
        assert values["tokens_per_second"] == pytest.approx(
            statistics.median(throughput[side]) * per_pair, abs=0.1
        )


def check_profiles(profiles: dict, runs: dict, profiled: int, markdown: str) -> None:
    """The profiled steps of each side on a CPU: times, no device numbers, the scalar reads
    and where they happen, by Python line (also with the GPU machine's torch 2.11, which
    records the frames only with ``_profile.with_stacks``' verbose option): ours reads no
    loss on the host (transformers' NaN filter is off), the peer reads it twice a step
    (isnan, isinf)."""
    assert set(profiles) == set(runs)
    for side, profile in profiles.items():
        assert profile == runs[side][0]["profile"]
        step = profile["step"]
        assert profile["steps"] == profiled and len(profile["wall_ms_by_step"]) == profiled
        assert step["wall_ms"] > 0 and step["host_ops_ms"] > 0, side
        assert step["device_ms"] is None and step["cuda_syncs"] is None, side
        assert profile["logging"]["phases"] == profiled - 1
        at = profile["scalar_reads_at"]
        assert all(isinstance(n, int) and n > 0 for n in at.values()), at
        assert not all(where.startswith("[") for where in at), f"{side}: no Python frame: {at}"
        nan_filter = [where for where in at if "transformers/trainer.py" in where]
        assert (at[nan_filter[0]] if nan_filter else 0) == (2 if side == "peer" else 0), at
    assert "Profiled steps (`torch.profiler`: 1 step(s) at the end of round 1" in markdown
    assert "| scalar reads (`.item()`, `bool(t)` …) |" in markdown


def test_the_profile_summary_counts_scalar_reads_apart_from_the_log_line() -> None:
    from torch.profiler import profile, record_function

    profiling = load_benchmark_script("_profile")
    values = torch.ones(3)

    def check(t: torch.Tensor) -> bool:
        return bool(t.sum() > 0)

    def step(stacks: bool) -> Any:
        with profile(**(profiling.with_stacks() if stacks else {})) as profiled:
            for _ in range(2):  # two steps of two reads, each followed by a log phase of one
                check(values)
                float(values.mean())
                with record_function(profiling.LOG_RANGE):
                    values.sum().item()
        return profiled.events()

    summary = profiling.summarize(step(False), 2, 0.5, "cpu")
    assert summary["step"]["scalar_reads"] == 2 and summary["step"]["wall_ms"] == 250
    assert summary["step"]["device_ms"] is None and summary["step"]["host_ops_ms"] > 0
    assert summary["logging"]["phases"] == 2 and summary["logging"]["scalar_reads"] == 1
    at = profiling.scalar_reads_at(step(True))  # the log phases' reads are not listed
    assert sorted(at.values()) == [2, 2], at
    by_operator = {where.rsplit(" [", 1)[-1]: where for where in at}
    assert by_operator["aten::is_nonzero]"].split(" [")[0].endswith(": check")


def test_gpu_options_flops_peak_and_refusals() -> None:
    gpu = load_benchmark_script("_gpu")
    minilm = {"hidden": 384, "layers": 6, "intermediate": 1536}
    # per layer 2 × (4 × 384² + 2 × 384 × 1536) + 4 × 12 × 384; × 6 layers; × 3 training
    per_layer = 2 * (4 * 384**2 + 2 * 384 * 1536) + 4 * 12 * 384
    assert gpu.flops_per_token(minilm, 12, training=False) == 6 * per_layer
    assert gpu.flops_per_token(minilm, 12, training=True) == 18 * per_layer
    # a decoder: grouped-query attention (k, v of 3 heads × 64) and a gated feed-forward
    smollm = {"hidden": 576, "layers": 30, "intermediate": 1536, "kv_width": 192}
    smollm["mlp_matrices"] = 3
    per_layer = 2 * (2 * 576**2 + 2 * 576 * 192 + 3 * 576 * 1536) + 4 * 12 * 576
    assert gpu.flops_per_token(smollm, 12, training=False) == 30 * per_layer
    assert gpu.peak_tflops("NVIDIA H100 80GB HBM3", None) == 989.4
    assert gpu.peak_tflops("NVIDIA H100 PCIe", None) == 756.0
    assert gpu.peak_tflops("Some GPU", None) is None and gpu.peak_tflops(None, 500.0) == 500.0
    assert gpu.mfu(1e6, 1e8, 100.0) == 100.0  # 1e14 FLOP/s of a 100 TFLOP/s peak
    assert gpu.stem_name("train", "cuda") == "gpu_train"
    assert gpu.stem_name("train", "cpu") == "train"
    import argparse

    if not torch.cuda.is_available():
        for argv in (["--device", "cuda"], ["--dtype", "bf16"]):
            parser = argparse.ArgumentParser()
            gpu.add_gpu_arguments(parser)
            with pytest.raises(SystemExit, match="error: --"):
                gpu.check_device(parser.parse_args(argv))


def scipy_sts_scores(model: Path, data_dir: Path, eval_pairs: int) -> dict[str, float]:
    """The untrained model's row of quality.py, recomputed: the library's encoder and data
    loader, then cosines, Spearman ('all' and per subset), 'wmean' and the two averages
    with numpy and scipy."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.evaluation.sts import load_task_pairs

    encoder = SentenceEncoder.from_pretrained(model, pooling="mean")
    scores, wmeans = {}, []
    for task in STS_TASKS:
        pairs = load_task_pairs(task, "senteval", "senteval", data_dir)
        if eval_pairs and len(pairs) > eval_pairs:  # every k-th pair, as quality.py takes
            pairs = pairs.select(range(0, len(pairs), math.ceil(len(pairs) / eval_pairs)))
        first, second = list(pairs["sentence1"]), list(pairs["sentence2"])
        vectors = encoder.encode(first + second, batch_size=64, show_progress_bar=False)
        u, v = vectors[: len(first)].astype(np.float64), vectors[len(first) :].astype(np.float64)
        cosine = (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
        gold = np.asarray(pairs["score"], dtype=np.float64)
        scores[task] = 100 * spearmanr(cosine, gold).statistic
        subsets = np.asarray(
            pairs["subset"] if "subset" in pairs.column_names else [""] * len(gold)
        )
        names = list(dict.fromkeys(subsets))
        sizes = [int((subsets == name).sum()) for name in names]
        per_subset = [
            100 * spearmanr(cosine[subsets == name], gold[subsets == name]).statistic
            for name in names
        ]
        wmeans.append(np.dot(per_subset, sizes) / sum(sizes))
    scores["avg"] = float(np.mean([scores[task] for task in STS_TASKS]))
    scores["avg_wmean"] = float(np.mean(wmeans))
    return scores


@needs_benchmark_data
def test_quality_benchmark_runs(
    tmp_path: Path, sts_data_dir: Path, benchmark_minilm_dir: Path
) -> None:
    from sts_core.data import load_filtered_stsb_sick

    result = run_benchmark("quality", tmp_path)
    size = len(load_filtered_stsb_sick(sts_data_dir)[0])  # the training set's own length
    cap = result["settings"].get("train_pairs_cap")  # smoke mode: the first 64 pairs
    size = min(size, cap) if cap else size
    assert result["settings"]["train_pairs"] == size
    markdown = (tmp_path / f"quality_{MODE}.md").read_text(encoding="utf-8")
    assert f"filtered STS-B + SICK-R train ({size:,} pairs)" in markdown
    rows = {row["method"]: row for row in result["rows"]}
    assert len(rows) >= 3 and any(name.startswith("ours") for name in rows)
    averages = ("avg", "avg_wmean")
    for name, row in rows.items():
        for seed, scores in row["seeds"].items():
            # the headline: the plain mean of the seven tasks' 'all' Spearman
            expected = np.mean([scores[task] for task in STS_TASKS])
            assert scores["avg"] == pytest.approx(expected, abs=1e-9), (name, seed)
            assert 0 < scores["avg_wmean"] <= 100, (name, seed)  # per-subset scores not saved
        for key in (*STS_TASKS, *averages):  # mean ± sd over seeds
            values = [scores[key] for scores in row["seeds"].values()]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            assert row["summary"][key] == pytest.approx([statistics.fmean(values), sd]), key
    # the model before training: every number recomputed from the model and the data
    assert rows["base"]["pooling"] == "mean"
    (base,) = rows["base"]["seeds"].values()
    eval_pairs = result["settings"]["eval_pairs"]
    expected = scipy_sts_scores(benchmark_minilm_dir, sts_data_dir, eval_pairs)
    for key, value in expected.items():
        assert base[key] == pytest.approx(value, abs=1e-4), key
    # --render rebuilds the markdown and chart from the JSON alone
    saved = tmp_path / f"quality_{MODE}.json"
    for suffix in (".md", ".png"):
        saved.with_suffix(suffix).unlink()
    render("quality", saved)
    rendered = saved.with_suffix(".md").read_text(encoding="utf-8")
    assert "| Avg. (wmean) |" in rendered
    assert rendered == markdown  # the same report from the JSON alone
    assert "\n\nScored by: cosine similarity of the embeddings, every row (" in rendered
    assert f"![quality chart]({saved.stem}.png)" in rendered
    assert saved.with_suffix(".png").stat().st_size > 0


@pytest.mark.real_data
@pytest.mark.slow
def test_recipes_benchmark_runs_a_recipe_in_variants(
    tmp_path: Path,
    sts_data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``recipes.py --smoke``: a tiny model on the fixture pairs, two variants of the
    regression recipe (seconds); each row's average is the mean of its tasks' 'all'. Run
    again with the same ``--keep-runs``, the finished runs are read, not rerun; a run whose
    record names another command is rerun."""
    monkeypatch.setenv("STS_DATA_DIR", str(sts_data_dir))
    keep = ["--keep-runs", str(tmp_path / "runs")]
    arguments = ["--smoke", "--output-dir", str(tmp_path), *keep]
    first_output = run_script("recipes", *arguments)  # each variant: a train.py process
    assert "read, not rerun" not in first_output
    result = json.loads((tmp_path / "recipes_smoke.json").read_text(encoding="utf-8"))
    labels = [row["label"] for row in result["rows"]]
    assert labels == ["before training", "smooth_k2", "l1"]
    for row in result["rows"]:
        for scores in row["seeds"].values():
            tasks = [scores[task] for task in ("sts12", "stsb")]
            assert scores["avg"] == pytest.approx(np.mean(tasks), abs=1e-9)
        assert row["summary"]["avg"][0] == pytest.approx(
            statistics.fmean(s["avg"] for s in row["seeds"].values())
        )
    markdown = (tmp_path / "recipes_smoke.md").read_text(encoding="utf-8")
    assert "| smooth_k2 |" in markdown and "`--loss l1`" in markdown
    # every table says what scored it: the regression head is never the STS scorer
    assert "Scored by: cosine similarity of the embeddings" in markdown
    assert {row["scorer"] for row in result["rows"]} == {"cosine similarity of the embeddings"}

    record_path = tmp_path / "runs" / "variant1-seed0" / "recipe-run.json"
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record["command"].append("--changed")
    # as a run with another command recorded it (through sts-core's writer: a record edited
    # by hand is no longer sts-core's, and the rerun into its folder would refuse it)
    write_text(record_path, json.dumps(record))
    second_output = run_script("recipes", *arguments)
    assert second_output.count("read, not rerun") == 1  # variant 0 read, variant 1 rerun
    again = json.loads((tmp_path / "recipes_smoke.json").read_text(encoding="utf-8"))
    assert again["rows"][1]["seeds"] == result["rows"][1]["seeds"]


@needs_benchmark_data
def test_pair_tasks_benchmark_runs(
    tmp_path: Path, sts_data_dir: Path, benchmark_minilm_dir: Path
) -> None:
    """``pair_tasks.py --smoke`` on MRPC (classification) and WikiQA (ranking): a complete
    table, each summary the mean of its seeds, and the untrained model's scores recomputed
    here from the model, the data and the metric functions."""
    from sts_core.data import load_pairs
    from sts_core.encoder import SentenceEncoder
    from sts_core.evaluation.metrics import (
        group_by_query,
        pair_classification_metrics,
        ranking_metrics,
    )

    methods = ["base", "ours-bsc", "st-mnsrl"]
    run_script(
        "pair_tasks", "--smoke", "--tasks", "mrpc", "wikiqa", "--methods", *methods,
        "--output-dir", str(tmp_path),
    )  # fmt: skip
    result = json.loads((tmp_path / "pair_tasks_smoke.json").read_text(encoding="utf-8"))
    rows = {(row["task"], row["method"]): row for row in result["rows"]}
    assert sorted(rows) == sorted((t, m) for t in ("mrpc", "wikiqa") for m in methods)
    for row in rows.values():
        for key, (mean, _) in row["summary"].items():
            assert mean == pytest.approx(statistics.fmean(s[key] for s in row["seeds"].values()))
    encoder = SentenceEncoder.from_pretrained(benchmark_minilm_dir)
    limit = result["settings"]["test_pairs"]

    def cosines(data):
        u = encoder.encode(list(data["sentence1"]), show_progress_bar=False).astype(np.float64)
        v = encoder.encode(list(data["sentence2"]), show_progress_bar=False).astype(np.float64)
        return (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)

    test = load_pairs("mrpc", "test", sts_data_dir).select(range(limit))
    train = load_pairs("mrpc", "train", sts_data_dir).select(range(limit))
    expected = pair_classification_metrics(
        cosines(train), train["label"], cosines(test), test["label"]
    )
    (base,) = rows[("mrpc", "base")]["seeds"].values()
    assert base["f1"] == pytest.approx(100 * expected["f1"], abs=1e-6)
    assert base["accuracy"] == pytest.approx(100 * expected["accuracy"], abs=1e-6)
    wikiqa = load_pairs("wikiqa", "test", sts_data_dir)
    ids = wikiqa["query_id"]
    end = limit
    while end < len(wikiqa) and ids[end] == ids[end - 1]:  # whole questions
        end += 1
    wikiqa = wikiqa.select(range(end))
    grouped = group_by_query(wikiqa["query_id"], cosines(wikiqa), wikiqa["label"])
    expected = ranking_metrics(*grouped, ks=(1, 5))
    (base,) = rows[("wikiqa", "base")]["seeds"].values()
    for key in ("map", "mrr", "p@1", "has_positive@5"):
        assert base[key] == pytest.approx(100 * expected[key], abs=1e-6), key
    markdown = (tmp_path / "pair_tasks_smoke.md").read_text(encoding="utf-8")
    assert "## mrpc (mrpc:train → mrpc:test, classification)" in markdown
    assert "\n\nScored by: cosine similarity of the embeddings, every row (" in markdown
    (tmp_path / "pair_tasks_smoke.md").unlink()
    render("pair_tasks", tmp_path / "pair_tasks_smoke.json")
    assert (tmp_path / "pair_tasks_smoke.md").read_text(encoding="utf-8") == markdown


def test_a_model_with_a_pair_scorer_head_is_refused_where_tables_say_cosine() -> None:
    from types import SimpleNamespace

    common = load_benchmark_script("_common")
    common.refuse_pair_scorer_head(SimpleNamespace(), "mrpc: base")  # no head: nothing to say
    with pytest.raises(common.BenchmarkError) as error:
        common.refuse_pair_scorer_head(SimpleNamespace(pair_scorer="regression"), "mrpc: ours")
    assert str(error.value) == (
        "mrpc: ours: the model has a pair_scorer head ('regression'); this benchmark compares "
        "embeddings by their cosine"
    )


@needs_benchmark_data
def test_quality_search_selects_on_dev_and_reuses_its_cells(tmp_path: Path) -> None:
    arguments = [
        "--smoke",
        "--output-dir",
        str(tmp_path),
        "--weights-dir",
        str(tmp_path / "weights"),
        "--learning-rate",
        "1e-5",
        "3e-5",
        "--methods",
        "ours-cosine_mse",
        "st-cosine",
        "--set",
        "weight_averaging=uniform",
        "--soup",
        "--in-process",  # the cells in the script's process: no interpreter start per cell
    ]
    first = run_script("quality_search", *arguments)
    # sts-search trains both: 2 methods × (2 recipes on seed 0 + seed 1 of one)
    assert first.count("  training ") == 6 and "  train " not in first
    cells = json.loads((tmp_path / "quality_search_smoke_cells.json").read_text("utf-8"))
    cells = cells["cells"]
    searches = {
        name: json.loads((tmp_path / "weights" / cell["search_cell"]).parents[1].joinpath(
            "search.json").read_text("utf-8"))
        for name, cell in cells.items()
    }  # fmt: skip
    assert len(searches) == 8  # every trained cell and soup is sts-search's
    for identity in searches.values():  # the benchmark's inputs, as a user gives them
        assert identity["train"] == [{"reference": "stsb"}, {"reference": "sickr"}]
        assert identity["dev"] == {"reference": "stsb:dev"} and identity["eval_pairs"] == 40
        assert identity["settings"]["filter_test_overlap"] is True
        assert identity["settings"]["max_train_samples"] == 64
    for method in ("ours-cosine_mse [weight_averaging=uniform]", "st-cosine"):
        grid = {lr: cells[f"{method} | epochs 1 | lr {lr} | seed 0"] for lr in ("1e-05", "3e-05")}
        chosen = max(grid, key=lambda lr: grid[lr]["dev"])
        other = next(lr for lr in grid if lr != chosen)
        assert "test" not in grid[other]  # test scores only for the dev-selected recipe
        for seed in (0, 1):
            test = cells[f"{method} | epochs 1 | lr {chosen} | seed {seed}"]["test"]
            assert test["avg"] == pytest.approx(np.mean([test[t] for t in STS_TASKS]))
        soup = cells[f"soup of 2 seeds | {method} | epochs 1 | lr {chosen}"]
        assert soup["soup_of"] == [0, 1] and 0 < soup["test"]["avg"] <= 100
    markdown = (tmp_path / "quality_search_smoke.md").read_text(encoding="utf-8")
    assert "## Headline: our pick by STS-B dev against every peer row" in markdown
    assert "| seconds | steps | peak MiB |" in markdown
    assert "weight_averaging=uniform" in markdown
    again = run_script("quality_search", *arguments)  # every cell is kept: nothing trains
    assert "  train" not in again and "sts-search:" not in again


@needs_benchmark_data
def test_quality_search_scores_a_method_with_a_head_from_its_saved_weights(tmp_path: Path) -> None:
    from sts_core.encoder import SentenceEncoder

    weights = tmp_path / "weights"
    arguments = ["--smoke", "--output-dir", str(tmp_path), "--weights-dir", str(weights)]
    run_script("quality_search", *arguments, "--methods", "ours-smooth_k2", "--soup",
        "--in-process",
    )  # fmt: skip
    cells = json.loads((tmp_path / "quality_search_smoke_cells.json").read_text("utf-8"))
    soup = cells["cells"]["soup of 2 seeds | ours-smooth_k2 | epochs 1 | lr 2e-05"]
    assert 0 < soup["test"]["avg"] <= 100  # the seeds' models reloaded, averaged, scored
    runs = [cells["cells"][f"ours-smooth_k2 | epochs 1 | lr 2e-05 | seed {s}"] for s in (0, 1)]
    states = []
    for run in runs:  # the regression head saved with each model
        saved = SentenceEncoder.from_pretrained(str(weights / run["search_cell"] / "model"))
        states.append(saved.state_dict())
        assert [k for k in states[-1] if k.startswith("regression.")]
    souped = SentenceEncoder.from_pretrained(str(weights / soup["search_cell"] / "model"))
    state = souped.state_dict()
    assert not [k for k in state if k.startswith("regression.")]  # left out of the soup
    for key, value in state.items():  # the mean of the seeds' weights
        if value.is_floating_point():
            torch.testing.assert_close(value, (states[0][key] + states[1][key]) / 2)


@needs_benchmark_data
def test_a_fine_tuned_teacher_feeds_a_search_with_neighbour_pairs(tmp_path: Path) -> None:
    teacher = tmp_path / "teacher"
    made = run_script(
        "quality_teacher", "--smoke", "--model", "all-MiniLM-L6-v2", "--output", str(teacher)
    )
    assert "STS-B dev Spearman" in made and (teacher / "config.json").is_file()
    searched = run_script(
        "quality_search",
        "--smoke",
        "--grid-only",
        "--methods",  # each cell in a worker process: its peak memory its own
        "ours-cosine_mse",
        "st-cosine",
        "st-embed-distill",
        "st-mse-distill",
        "--output-dir",
        str(tmp_path),
        "--weights-dir",
        str(tmp_path / "weights"),
        "--set",
        f"teacher_model={teacher}",
        "--set",
        "teacher_neighbours=1",
        "--set",
        'loss_weights={"cosine_mse":1,"pearson":0.5}',  # ours alone
    )
    assert searched.count("'neighbour_pairs': ") == 2  # ours and the peer's, printed
    cost = json.loads((teacher / "sts_teacher_cost.json").read_text("utf-8"))
    assert cost["steps"] == 2 and cost["train_seconds"] > 0
    cells = json.loads((tmp_path / "quality_search_smoke_cells.json").read_text("utf-8"))
    cells = {c["method"]: c for c in cells["cells"].values()}  # --grid-only: seed 0, dev only
    assert sorted(cells) == ["ours-cosine_mse", "st-cosine", "st-embed-distill", "st-mse-distill"]
    for method, cell in cells.items():
        assert cell["settings"]["teacher_model"] == str(teacher) and "test" not in cell
        assert ("loss_weights" in cell["settings"]) == method.startswith("ours-")
        assert cell["steps"] == 2 and cell["train_seconds"] > 0 and cell["peak_rss_mb"] > 100
    assert len({len(cell["teacher_id"]) for cell in cells.values()} | {12}) == 1  # recorded
    assert len({cell["teacher_id"] for cell in cells.values()}) == 1  # the one teacher's
    # the same teacher step on both sides: the same pairs (test_search_peer_teacher_step.py)
    assert (
        cells["st-cosine"]["teacher"]["neighbour_pairs"]
        == (cells["ours-cosine_mse"]["teacher"]["neighbour_pairs"])
    )


@needs_benchmark_data
def test_matryoshka_rows_score_each_width_and_ours_records_its_dims(tmp_path: Path) -> None:
    rows = ["ours-cosent-matryoshka", "st-cosent-matryoshka"]
    run_script(
        "matryoshka",
        "--smoke",
        "--rows",
        *rows,
        "--dims",
        "384",
        "64",
        "--output-dir",
        str(tmp_path),
    )
    result = json.loads((tmp_path / "matryoshka_smoke.json").read_text("utf-8"))
    assert sorted(result["summary"]) == sorted(rows)
    for row in rows:
        run = result["runs"][row]["0"]
        assert sorted(run["scores"], key=int) == ["64", "128", "384"]
        averages = [run["scores"][w]["avg"] for w in ("384", "128", "64")]
        assert all(0 < a <= 100 for a in averages) and len(set(averages)) == 3  # truncated
        assert result["summary"][row]["64"][0] == pytest.approx(averages[2])
    assert result["runs"]["ours-cosent-matryoshka"]["0"]["saved_matryoshka_dims"] == [384, 64]
    table = [line for line in (tmp_path / "matryoshka_smoke.md").read_text("utf-8").splitlines()]
    assert sum(line.startswith("|") and line.count(" ± ") == 3 for line in table) == 2


@needs_benchmark_data
def test_a_cross_encoder_teacher_feeds_ours_and_the_peer_the_same_pairs(tmp_path: Path) -> None:
    teacher = tmp_path / "cross-encoder"
    made = run_script(
        "quality_teacher",
        "--cross-encoder",
        "--smoke",
        "--model",
        "all-MiniLM-L6-v2",
        "--output",
        str(teacher),
    )
    assert "STS-B dev Spearman" in made
    settings = json.loads((teacher / "config_sentence_transformers.json").read_text("utf-8"))
    assert settings["model_type"] == "CrossEncoder"  # the peer's folder: sigmoid scores
    run_script(
        "quality_search",
        "--smoke",
        "--grid-only",
        "--in-process",
        "--methods",
        "ours-cosine_mse",
        "st-cosine",
        "--output-dir",
        str(tmp_path),
        "--weights-dir",
        str(tmp_path / "weights"),
        "--set",
        f"teacher_model={teacher}",
        "--set",
        "teacher_neighbours=1",
        "--set",
        "teacher_weight=0.5",
    )
    cells = json.loads((tmp_path / "quality_search_smoke_cells.json").read_text("utf-8"))
    cells = {c["method"]: c for c in cells["cells"].values()}
    ours, peer = cells["ours-cosine_mse"]["teacher"], cells["st-cosine"]["teacher"]
    assert ours["teacher_kind"] == "cross-encoder" and ours["teacher_weight"] == 0.5
    assert ours["neighbour_pairs"] == peer["neighbour_pairs"] > 0  # the student proposed them


@needs_benchmark_data
def test_quality_search_trains_two_stages_and_measures_the_cost_of_an_old_cell(
    tmp_path: Path,
) -> None:
    """``stage1_*`` trains two stages (their steps added); ``--measure-cost`` trains a cell
    whose record lacks the cost again and copies the cost, its dev reproduced (the refusal
    of a dev that differs: ``test_quality_search_report.py``)."""
    arguments = [
        "--smoke", "--grid-only", "--in-process", "--seeds", "0",
        "--output-dir", str(tmp_path), "--weights-dir", str(tmp_path / "weights"),
        "--methods", "ours-pcc_pearson",
        "--set", "stage1_loss=cosine_mse", "--set", "stage1_epochs=1",
    ]  # fmt: skip
    run_script("quality_search", *arguments)
    path = tmp_path / "quality_search_smoke_cells.json"
    key = (
        "ours-pcc_pearson [stage1_epochs=1, stage1_loss=cosine_mse] | epochs 1 | lr 2e-05 | seed 0"
    )
    cells = json.loads(path.read_text("utf-8"))
    trained = dict(cells["cells"][key])
    assert trained["steps"] == 4  # 2 steps of cosine MSE, then 2 of the Pearson loss
    for name in ("train_seconds", "steps", "peak_rss_mb"):  # as a cell from before costs
        del cells["cells"][key][name]
    # as the benchmark writes it (a cells file edited by hand is no longer sts-core's, and
    # the next search would refuse to replace it)
    set_command("quality_search.py")
    write_text(path, json.dumps(cells))
    measured = run_script("quality_search", *arguments, "--measure-cost")
    assert measured.count("  training ") == 1
    record = json.loads(path.read_text("utf-8"))["cells"][key]
    assert record["dev"] == trained["dev"] and record["steps"] == 4
    assert record["cost_measured_by"].endswith(f"(its dev reproduced: {trained['dev']:.4f})")


@needs_benchmark_data
def test_mining_benchmark_writes_the_same_triplets_as_the_peer(tmp_path: Path) -> None:
    """``mine.py --smoke``: both sides in fresh processes on the same NLI pairs and
    candidates; the report compares their peak memory and says the triplets are the same."""
    run_script("mine", "--smoke", "--output-dir", str(tmp_path))
    result = json.loads((tmp_path / "mine_smoke.json").read_text(encoding="utf-8"))
    ours, peer = result["results"]["ours"], result["results"]["peer"]
    assert ours["corpus"] == peer["corpus"] == 300 and result["spec"]["pairs"] == 100
    assert ours["triplets"] == 300 and ours["triplets_sha256"] == peer["triplets_sha256"]
    assert ours["peak_rss_mb"] > 100 and peer["peak_rss_mb"] > 100
    markdown = (tmp_path / "mine_smoke.md").read_text(encoding="utf-8")
    assert "The same triplets on both sides: **yes**" in markdown
    assert not list(tmp_path.glob("*_inputs.json*"))  # the scratch files are removed
    assert result["spec"]["difference"] == {"rows_differ": 0, "ties": 0, "lengths": [300, 300]}


@needs_benchmark_data
def test_data_scale_benchmark_checks_a_table_of_a_million_rows(tmp_path: Path) -> None:
    """``data_scale.py --smoke``: the floor and our ``--check_only`` on a table of 1,000,000
    rows, both trainers (and ours streaming the table in ten files) 5 steps on 1,000 rows,
    each side in a fresh process; every number
    measured, the check passed, and each target of the report consistent with them."""
    run_script("data_scale", "--smoke", "--output-dir", str(tmp_path))
    result = json.loads((tmp_path / "data_scale_smoke.json").read_text(encoding="utf-8"))
    results = result["results"]
    assert set(results) == {"1000", "1000000"}
    assert set(results["1000000"]) == {"floor", "ours_check"}
    assert set(results["1000"]) == {"ours_train", "ours_stream", "peer_train"}
    for sides in results.values():
        for measured in sides.values():
            assert measured["wall_seconds"] > 0 and measured["peak_rss_mb"] > 0
    floor, check = results["1000000"]["floor"], results["1000000"]["ours_check"]
    assert floor["rows"] == 1_000_000 and 0 <= floor["score_min"] < floor["score_max"] <= 5
    assert check["passed"] and "training data: 1000000 pairs" in check["summary"]
    for name in ("ours_train", "peer_train"):
        trained = results["1000"][name]
        assert trained["global_step"] == 5 and trained["train_pairs"] == 1000
        assert trained["train_steps_per_second"] > 0
    stream = results["1000"]["ours_stream"]  # ten shards of 100 rows
    assert stream["global_step"] == 5 and stream["train_pairs"] is None
    assert stream["streaming"]["shards"] == 10 and stream["streaming"]["first_shard"]["rows"] == 100
    peer = results["1000"]["peer_train"]
    assert 0 < peer["ready_seconds"] < peer["wall_seconds"]
    assert 0 < peer["ready_peak_rss_mb"] <= peer["peak_rss_mb"]
    targets = {target["target"]: target["result"] for target in result["targets"]}
    met = check["wall_seconds"] <= 20
    assert (targets["1,000,000 rows: check ≤ 20 s"] == "met") == met
    assert targets["10,000,000 rows: check ≤ 120 s"] == "not measured in this mode"
    ours_memory = results["1000"]["ours_train"]["peak_rss_mb"]
    met = ours_memory <= peer["peak_rss_mb"]
    assert (targets["1,000 rows: training peak RSS ≤ the peer's"] == "met") == met
    markdown = (tmp_path / "data_scale_smoke.md").read_text(encoding="utf-8")
    assert "## Targets" in markdown and "| 1,000,000 | " in markdown
    assert "`uv run python benchmarks/data_scale.py --smoke --output-dir " in markdown
    written = {path.name for path in tmp_path.iterdir()}
    assert written == {"data_scale_smoke.json", "data_scale_smoke.md", LEDGER_NAME}
