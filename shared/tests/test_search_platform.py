"""Where ``sts-search`` runs: the core's command on any platform the core runs on. The
peak resident memory needs POSIX's ``resource`` module (absent on Windows: reported as
unknown), and the peer rows need sentence-transformers only through the ``peers`` extra,
imported on first use."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from sts_core import process_memory
from sts_core.search import worker

SHARED = Path(__file__).resolve().parents[1]


def test_without_the_resource_module_the_peak_memory_is_unknown(monkeypatch) -> None:
    """The worker imports where ``resource`` is missing (``sys.modules`` entry None makes
    its import fail, as on Windows, which has no ``/proc`` either), and a cell's peak
    resident memory is then None (the report shows "–"), not an error."""
    assert worker.peak_rss_mib() > 0  # here (POSIX) it is measured
    monkeypatch.setitem(sys.modules, "resource", None)
    try:
        without = importlib.reload(process_memory)
        monkeypatch.setattr(without, "STATUS", Path("/no/such/status"))
        assert without.resource is None
        assert without.peak_rss_mib() is None
        monkeypatch.setattr(worker, "peak_rss_mib", without.peak_rss_mib)
        assert worker.peak_memory()["peak_rss_mib"] is None
    finally:
        monkeypatch.undo()
        importlib.reload(process_memory)
    assert process_memory.resource is not None


PEAK_OF_A_CHILD = """
import subprocess, sys
held = bytearray(400 * 2**20)
held[::4096] = b"x" * len(held[::4096])  # every page touched: resident
code = "from sts_core.process_memory import peak_rss_mib; print(peak_rss_mib())"
print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux's /proc only")
def test_a_process_started_by_a_large_one_reports_its_own_peak() -> None:
    """Linux keeps ``ru_maxrss`` across the fork and exec that start a process: a worker
    started by a parent holding 400 MiB would report at least that. Its own peak is far
    below."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK_OF_A_CHILD], capture_output=True, text=True, check=True
    )
    assert 0 < float(done.stdout) < 200, done.stdout


def test_the_search_loads_no_sentence_transformers_until_a_peer_row_trains() -> None:
    """``sts-search`` and its modules import without sentence-transformers (the peer rows
    import it on first use), which the ``peers`` extra installs."""
    code = (
        "import sys\n"
        "import sts_core.search, sts_core.search.worker, sts_core.search.peers\n"
        "import sts_core.search.peer_teacher\n"
        "print('sentence_transformers' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    project = tomllib.loads((SHARED / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    assert any(req.startswith("sentence-transformers") for req in extras["peers"])
    assert not any("sentence-transformers" in req for req in project["project"]["dependencies"])


def test_a_cell_forked_from_the_preloaded_server_equals_one_in_a_fresh_interpreter(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """``--worker-start preloaded`` (the default on Linux) forks each cell's process from a
    server that imported the training path once; the cell it trains is the one a fresh
    ``python -m sts_core.search.worker`` trains: the same dev score, steps and records."""
    from sts_core.search import schedule
    from sts_core.search.command import main as search

    table = tmp_path / "pairs.csv"
    rows = [f"a man plays {i},a dog runs {i},{i % 5}" for i in range(8)]
    table.write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n", encoding="utf-8")

    def searched(start: str) -> tuple[dict, str]:
        output = tmp_path / start
        argv = ["--train", str(table), "--dev", str(table), "--model", str(tiny_bert_dir)]
        argv += ["--methods", "core", "--max-steps", "2", "--batch-size", "4"]
        argv += ["--score-range", "0", "5", "--output-dir", str(output), "--worker-start", start]
        assert search(argv) == 0
        results = json.loads((output / "results.json").read_text(encoding="utf-8"))
        (log,) = output.glob("cells/*/log.txt")
        return results["cells"][0], log.read_text(encoding="utf-8").splitlines()[0]

    def not_this_start(*args: object) -> int:
        raise AssertionError("the other start ran the worker")

    run_child = schedule._run_child
    monkeypatch.setattr(schedule, "_run_child", not_this_start)
    preloaded, preloaded_log = searched("preloaded")
    monkeypatch.setattr(schedule, "_run_child", run_child)
    monkeypatch.setattr(schedule, "_run_preloaded", not_this_start)
    fresh, fresh_log = searched("fresh")
    assert preloaded_log.endswith("(preloaded)") and fresh_log.endswith("(fresh)")
    assert preloaded["dev"] == pytest.approx(fresh["dev"], abs=1e-9)
    assert preloaded["steps"] == fresh["steps"] == 2
    assert preloaded["peak_rss_mib"] > 0 and fresh["peak_rss_mib"] > 0


def test_a_worker_runs_every_action_on_its_slots_torch_threads(monkeypatch, tmp_path) -> None:
    """A worker's ``main`` (a fresh process's, and a preloaded one's, whose torch read
    OMP_NUM_THREADS before the slot was known) sets the slot's threads for each action."""
    import torch

    seen: dict[str, int] = {}

    def recorded(verb: str):
        def action(folder) -> int:
            seen[verb] = torch.get_num_threads()
            return 0

        return action

    for verb in worker.ACTIONS:
        monkeypatch.setitem(worker.ACTIONS, verb, recorded(verb))
    monkeypatch.setattr(worker, "end_with_parent", lambda *args: None)
    monkeypatch.setenv("STS_SEARCH_THREADS", "1")
    before = torch.get_num_threads()
    try:
        for verb in worker.ACTIONS:
            torch.set_num_threads(2)
            assert worker.main([verb, str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(before)
    assert seen == {"train": 1, "score": 1, "soup": 1, "untrained": 1}
