"""Parameter groups: learning rates by parameter name, no weight decay on scalars.

The Trainer builds two AdamW groups (with and without weight decay) over the model's
parameters. :func:`regroup_parameters` then moves a parameter whose name matches a pattern
of ``learning_rate_mapping`` (``re.search``, first match wins) into a group with that
learning rate, and every scalar parameter (a trainable temperature, a loss weight) into a
group without weight decay. The scheduler, created afterwards, scales every group's rate
alike (warm-up, decay). This is sentence-transformers' ``learning_rate_mapping``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import torch


def regroup_parameters(
    optimizer: torch.optim.Optimizer,
    named_parameters: Iterable[tuple[str, torch.nn.Parameter]],
    learning_rate_mapping: dict[str, float] | None,
) -> None:
    """Split the optimizer's groups in place (before the first step) as described above."""
    names = {id(parameter): name for name, parameter in named_parameters}
    patterns = [(re.compile(p), rate) for p, rate in (learning_rate_mapping or {}).items()]
    moved: dict[tuple[float, float], dict[str, Any]] = {}
    for group in optimizer.param_groups:
        kept = []
        for parameter in group["params"]:
            rate = _mapped_rate(names.get(id(parameter), ""), patterns)
            scalar = parameter.dim() == 0
            if rate is None and not (scalar and group["weight_decay"]):
                kept.append(parameter)
                continue
            key = (group["lr"] if rate is None else rate, 0.0 if scalar else group["weight_decay"])
            target = moved.setdefault(key, {**group, "params": [], "lr": key[0]})
            target["weight_decay"] = key[1]
            target["params"].append(parameter)
        group["params"] = kept
    optimizer.param_groups[:] = [g for g in optimizer.param_groups if g["params"]]
    for group in moved.values():
        optimizer.add_param_group(group)


def _mapped_rate(name: str, patterns: list[tuple[re.Pattern[str], float]]) -> float | None:
    return next((rate for pattern, rate in patterns if pattern.search(name)), None)
