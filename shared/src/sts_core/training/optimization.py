"""Parameter groups: learning rates by parameter name or layer, no weight decay on scalars.

The Trainer builds two AdamW groups (with and without weight decay) over the model's
parameters. :func:`regroup_parameters` then moves a parameter whose name matches a pattern
of ``learning_rate_mapping`` (``re.search``, first match wins) into a group with that
learning rate; with ``layer_lr_decay`` the other parameters of the backbone's numbered
layers get the group's rate times ``decay^(L−1−i)`` (layer ``i`` of ``L``: the top layer
keeps the rate; embeddings, heads and loss parameters keep it too, as in the regression
paper's code); every scalar parameter (a trainable temperature, a loss weight) goes into a
group without weight decay. The scheduler, created afterwards, scales every group's rate
alike (warm-up, decay). ``learning_rate_mapping`` is sentence-transformers'; layer-wise
decay is ELECTRA's / the regression paper's (``RATE_DECAY_FACTOR = 0.95``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

import torch

# ``encoder.layer.3.`` (BERT, MPNet), ``layers.3.`` (Llama, Mistral, Nomic), ``h.3.``
# (GPT-2), ``block.3.`` (T5: the first number, not its sub-layer's ``layer.0.``)
LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block)\.(\d+)\.")
logger = logging.getLogger(__name__)


def layer_index(name: str) -> int | None:
    """The index of the numbered transformer layer a backbone parameter belongs to."""
    if not name.startswith("backbone."):
        return None
    match = LAYER_INDEX.search(name)
    return int(match.group(1)) if match else None


def layer_rate_factors(names: Iterable[str], decay: float | None) -> dict[str, float]:
    """``{name: decay^(L−1−i)}`` for every parameter of layer ``i`` (``L`` layers)."""
    if decay is None or decay == 1:
        return {}
    names = list(names)
    indices = {name: index for name in names if (index := layer_index(name)) is not None}
    if not indices:
        logger.warning(
            "layer_lr_decay %s: no numbered layer (layer.N., layers.N., h.N., block.N.) among "
            "the backbone's parameters: every parameter keeps the base learning rate",
            decay,
        )
        return {}
    top = max(indices.values())
    return {name: decay ** (top - index) for name, index in indices.items()}


def regroup_parameters(
    optimizer: torch.optim.Optimizer,
    named_parameters: Iterable[tuple[str, torch.nn.Parameter]],
    learning_rate_mapping: dict[str, float] | None,
    layer_lr_decay: float | None = None,
) -> None:
    """Split the optimizer's groups in place (before the first step) as described above."""
    names = {id(parameter): name for name, parameter in named_parameters}
    patterns = [(re.compile(p), rate) for p, rate in (learning_rate_mapping or {}).items()]
    factors = layer_rate_factors(names.values(), layer_lr_decay)
    moved: dict[tuple[float, float], dict[str, Any]] = {}
    for group in optimizer.param_groups:
        kept = []
        for parameter in group["params"]:
            name = names.get(id(parameter), "")
            rate = _mapped_rate(name, patterns)
            if rate is None and name in factors:
                rate = group["lr"] * factors[name]
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
