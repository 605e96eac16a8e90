"""Names spelled out once: the seven STS tasks and the pooling modes.

Dependency-free (no torch, no datasets), so the command-line tools can build their
``--help`` from it without a heavy import. Every other module imports these.
"""

from __future__ import annotations

#: the seven STS tasks of the SentEval protocol, in the papers' table order
STS_TASKS: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")

#: the pooling modes of :func:`sts_core.pooling.pool`
POOLING_MODES: tuple[str, ...] = ("mean", "cls", "max", "first_last_avg", "last_token")

__all__ = ["POOLING_MODES", "STS_TASKS"]
