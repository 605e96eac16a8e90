"""A process's own peak resident memory, as the benchmarks and ``sts-search`` report it."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

resource: ModuleType | None
try:  # POSIX only: where it is missing (Windows) the peak is unknown
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None

STATUS = Path("/proc/self/status")


def peak_rss_mib() -> float | None:
    """This process's peak resident memory in MiB. On Linux the high-water mark of its own
    memory (``VmHWM`` of ``/proc/self/status``): ``ru_maxrss`` is kept across the fork and
    exec that start a process, so a worker started by a large parent would report at least
    the parent's size. Elsewhere ``ru_maxrss`` (KiB on Linux, bytes on macOS); None where
    the ``resource`` module is missing."""
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 1024), 1)
