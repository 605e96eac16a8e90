"""Where ``sts-search`` runs: the core's command on any platform the core runs on. The
peak resident memory needs POSIX's ``resource`` module (absent on Windows: reported as
unknown), and the peer rows need sentence-transformers only through the ``peers`` extra,
imported on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import tomllib

from sts_core.search import worker

SHARED = Path(__file__).resolve().parents[1]


def test_without_the_resource_module_the_peak_memory_is_unknown(monkeypatch) -> None:
    """The worker imports where ``resource`` is missing (``sys.modules`` entry None makes
    its import fail, as on Windows), and a cell's peak resident memory is then None (the
    report shows "–"), not an error."""
    assert worker.peak_rss_mib() > 0  # here (POSIX) it is measured
    monkeypatch.setitem(sys.modules, "resource", None)
    try:
        without = importlib.reload(worker)
        assert without.resource is None
        assert without.peak_rss_mib() is None
        assert without.peak_memory()["peak_rss_mib"] is None
    finally:
        monkeypatch.undo()
        importlib.reload(worker)
    assert worker.resource is not None


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
