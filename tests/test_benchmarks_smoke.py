"""The three benchmark scripts run end to end in ``--quick`` mode (a smoke test, not a
timed test: no speed is asserted; a few minutes each here) and write their markdown, JSON
and PNG; what is checked are the results that must hold whatever the machine: identical
embeddings, identical training when packing is off, and a complete quality table.
``BENCHMARK_TEST_MODE=smoke`` runs the seconds-sized ``--smoke`` mode instead."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from launch_support import REPO, subprocess_env

pytestmark = [pytest.mark.real_data, pytest.mark.real_model, pytest.mark.slow]
MODE = os.environ.get("BENCHMARK_TEST_MODE", "quick")


def run_script(name: str, *arguments: str) -> None:
    command = [sys.executable, str(REPO / "benchmarks" / f"{name}.py"), *arguments]
    result = subprocess.run(
        command, cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=1200
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]


def run_benchmark(name: str, output_dir: Path) -> dict:
    run_script(name, f"--{MODE}", "--output-dir", str(output_dir))
    for suffix in (".md", ".json", ".png"):
        assert (output_dir / f"{name}_{MODE}{suffix}").stat().st_size > 0
    return json.loads((output_dir / f"{name}_{MODE}.json").read_text(encoding="utf-8"))


@pytest.fixture
def benchmark_env(sts_data_dir: Path, minilm_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STS_DATA_DIR", str(sts_data_dir))
    monkeypatch.setenv("STS_MODELS_DIR", str(minilm_dir.parent))


@pytest.mark.usefixtures("benchmark_env")
def test_encode_benchmark_runs(tmp_path: Path) -> None:
    result = run_benchmark("encode", tmp_path)
    (model,) = result["models"]
    assert model["max_abs_diff"] < 1e-5  # the same embeddings as sentence-transformers
    assert model["settings_match"]
    assert model["throughput"]["ours_median"] > 0 and model["throughput"]["peer_median"] > 0
    assert "ours (library encode)" in model["ablation"]["variants"]


@pytest.mark.usefixtures("benchmark_env")
def test_train_benchmark_runs(tmp_path: Path) -> None:
    result = run_benchmark("train", tmp_path)
    summary = result["summary"]
    assert summary["throughput"]["ours_median"] > 0 and summary["throughput"]["peer_median"] > 0
    # without packing, our trainer takes the peer's steps: the same loss at every step
    assert summary["padded_vs_peer_max_loss_diff"] < 1e-4
    losses = result["runs"]["ours"][0]["losses"]
    assert losses and all(math.isfinite(loss) for _, loss in losses)


@pytest.mark.usefixtures("benchmark_env")
def test_quality_benchmark_runs(tmp_path: Path) -> None:
    result = run_benchmark("quality", tmp_path)
    rows = {row["method"]: row for row in result["rows"]}
    assert len(rows) >= 3 and any(name.startswith("ours") for name in rows)
    for row in rows.values():
        for average in ("avg", "avg_wmean"):
            mean, _ = row["summary"][average]
            assert 0 < mean <= 100, (row["method"], average, mean)
    # --render rebuilds the markdown and chart from the JSON alone
    saved = tmp_path / f"quality_{MODE}.json"
    for suffix in (".md", ".png"):
        saved.with_suffix(suffix).unlink()
    run_script("quality", "--render", str(saved))
    assert "| Avg. (wmean) |" in saved.with_suffix(".md").read_text(encoding="utf-8")
    assert saved.with_suffix(".png").stat().st_size > 0
