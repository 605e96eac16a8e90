"""Fallback to the Hugging Face hub when no local data folder is configured.

Used only when neither ``data_dir`` nor ``STS_DATA_DIR`` is given and the hub is
not switched off (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``). Hub columns are
mapped onto the project's (``sentence1``, ``sentence2``, ``score`` [, ``label``]).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

from datasets import Dataset, Features, Value

logger = logging.getLogger("sts_core.data")

_TRUE = {"1", "true", "yes", "on"}
DEFAULT_ENDPOINT = "https://huggingface.co"

#: (host, port) -> answer of the reachability probe, for the life of the process
_REACHABLE: dict[tuple[str, int], bool] = {}
_REACHABLE_LOCK = threading.Lock()


@dataclass(frozen=True)
class HubSource:
    """Where a registry dataset lives on the hub and how to map it onto our columns.

    Attributes:
        repo_id: hub dataset id, e.g. ``"mteb/sts12-sts"``.
        splits: our split name -> the hub's split name.
        config: hub configuration name, if any.
        columns: hub column -> our column (renames applied before anything else).
        score_scale: factor bringing the hub's score onto our range (STS-B on the hub
            ``sentence-transformers/stsb`` is 0-1, ours 0-5).
        nli: the hub ``label`` is an NLI class (0/1/2, -1 = no gold): rows with -1 are
            dropped (logged) and ``score`` is derived as 2.0/1.0/0.0.
    """

    repo_id: str
    splits: Mapping[str, str]
    config: str | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
    score_scale: float = 1.0
    nli: bool = False


def hub_offline() -> bool:
    """True when the environment switches the Hugging Face hub off."""
    names = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in names)


def hub_address() -> tuple[str, int]:
    """``(host, port)`` of the hub: ``HF_ENDPOINT``'s host (default huggingface.co), port
    443 (80 for an ``http://`` endpoint, or the endpoint's explicit port)."""
    endpoint = os.environ.get("HF_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
    parts = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    default_port = 80 if parts.scheme == "http" else 443
    try:
        port = parts.port or default_port
    except ValueError:  # a malformed port: let the probe fail on the default one
        port = default_port
    return parts.hostname or "huggingface.co", port


def _probe_target(host: str, port: int) -> tuple[str, int]:
    """Where a connection to the hub really goes: the HTTPS proxy when one applies."""
    proxy = urllib.request.getproxies().get("https")
    if not proxy or urllib.request.proxy_bypass(host):
        return host, port
    parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    try:
        return parts.hostname or host, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return host, port


def _probe(host: str, port: int, timeout: float) -> bool:
    """True when a TCP connection to ``host:port`` opens within ``timeout`` seconds.

    Name resolution can hang far longer than a socket timeout, so resolving and
    connecting run in a daemon thread that is abandoned after ``timeout``.
    """
    answer: list[bool] = []

    def attempt() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                answer.append(True)
        except (OSError, ValueError):
            answer.append(False)

    thread = threading.Thread(target=attempt, name="sts-hub-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(answer) and answer[0]


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub can be reached, answered within ``timeout`` seconds.

    False at once when the hub is switched off (:func:`hub_offline`); otherwise one TCP
    connection to the hub host (``HF_ENDPOINT``'s, default huggingface.co, port 443; via
    the HTTPS proxy when one is set) is tried. The answer is kept for the process (per
    host); :func:`reset_hub_reachable` forgets it.
    """
    if hub_offline():
        return False
    host, port = hub_address()
    with _REACHABLE_LOCK:
        if (host, port) not in _REACHABLE:
            target = _probe_target(host, port)
            _REACHABLE[host, port] = _probe(*target, timeout)
            if not _REACHABLE[host, port]:
                logger.info("hub %s:%d not reachable within %g s", *target, timeout)
        return _REACHABLE[host, port]


def reset_hub_reachable() -> None:
    """Forget the cached answer of :func:`hub_reachable` (for tests, or after a network change)."""
    with _REACHABLE_LOCK:
        _REACHABLE.clear()


def _load_raw(source: HubSource, split: str) -> Dataset:
    """Download (or read from the hub cache) one split; patched out in tests."""
    from datasets import load_dataset

    return load_dataset(source.repo_id, source.config, split=source.splits[split])


def _nli_rows(ds: Dataset, source: HubSource) -> Dataset:
    """Drop rows without gold label and add the ordered-class ``score``."""
    total = len(ds)
    ds = ds.filter(lambda label: label >= 0, input_columns="label")
    if len(ds) < total:
        logger.info(
            "%s: skipped %d of %d rows (no gold label)", source.repo_id, total - len(ds), total
        )
    return ds.map(lambda b: {"score": [2.0 - float(x) for x in b["label"]]}, batched=True)


def load_from_hub(source: HubSource, split: str) -> Dataset:
    """Load ``split`` of ``source`` and map it onto the project's columns and types."""
    ds = _load_raw(source, split)
    renames = {k: v for k, v in source.columns.items() if k in ds.column_names and k != v}
    ds = ds.rename_columns(renames)
    if source.nli:
        ds = _nli_rows(ds, source)
    elif source.score_scale != 1.0:
        scale = source.score_scale
        ds = ds.map(lambda b: {"score": [float(x) * scale for x in b["score"]]}, batched=True)
    keep = [c for c in ("sentence1", "sentence2", "score", "label") if c in ds.column_names]
    types = {"score": "float64", "label": "int64"}
    features = Features({c: Value(types.get(c, "string")) for c in keep})
    return ds.select_columns(keep).cast(features)
