"""Parameter groups: learning rates by parameter name or layer, no weight decay on scalars.

The Trainer builds two AdamW groups (with and without weight decay) over the model's
parameters. :func:`regroup_parameters` then moves a parameter whose name matches a pattern
of ``learning_rate_mapping`` (``re.search``, first match wins) into a group with that
learning rate; with ``layer_lr_decay`` the other parameters of the backbone's numbered
layers get the group's rate times ``decay^(L−1−i)`` (layer ``i`` of ``L``: the top layer
keeps the rate; embeddings, heads and loss parameters keep it too, as in the regression
paper's code); every scalar parameter (a trainable temperature, a loss weight) goes into a
group without weight decay. The scheduler, created afterwards, scales every group's rate
alike (warm-up, decay). Layer-wise decay is ELECTRA's / the regression paper's
(``RATE_DECAY_FACTOR = 0.95``).

``learning_rate_mapping`` takes its name and form (``{regex: rate}``, ``re.search`` on
parameter names) from sentence-transformers' training argument, with these differences
(its trainer's ``get_optimizer_cls_and_kwargs``, 6.2): a parameter that several patterns
match gets the rate of the *first* of them here, of the *last* there (each pattern in turn
takes its matches out of every earlier group); the names differ, so a pattern does not
carry over unchanged — here the model's parameters are ``backbone.<transformers name>``
(``backbone.encoder.layer.0.…``) and heads' and losses' are their module's
(``sts_loss.…``), there the loss module's, ``model.0.model.<transformers name>``
(``model.0.model.encoder.layer.0.…``); and a pattern that matches only frozen parameters
is accepted there, a :class:`ConfigError` here (below).

A pattern that matches none of the trained parameters is a :class:`ConfigError` (a typo
would otherwise leave the part it meant at the base rate); the log says which parameters
each pattern took (their count and the first few names).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

import torch

from sts_core.training.parser import ConfigError

# ``encoder.layer.3.`` (BERT, MPNet), ``layers.3.`` (Llama, Mistral, Nomic), ``h.3.``
# (GPT-2), ``block.3.`` (T5: the first number, not its sub-layer's ``layer.0.``)
LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block)\.(\d+)\.")
logger = logging.getLogger(__name__)
#: parameter names a log line or an error message shows
SHOWN_NAMES = 3


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
    trained = [names.get(id(p), "") for group in optimizer.param_groups for p in group["params"]]
    report_mapping(patterns, trained, list(names.values()))
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


def report_mapping(
    patterns: list[tuple[re.Pattern[str], float]], trained: list[str], every: list[str]
) -> None:
    """Log the parameters each pattern takes (first match wins); ConfigError naming a
    pattern that matches none of the ``trained`` names (``every``: the model's, frozen ones
    included, for the message)."""
    taken: dict[str, list[str]] = {pattern.pattern: [] for pattern, _ in patterns}
    for name in trained:
        first = next((pattern for pattern, _ in patterns if pattern.search(name)), None)
        if first is not None:
            taken[first.pattern].append(name)
    for pattern, rate in patterns:
        if not any(pattern.search(name) for name in trained):
            raise ConfigError(_unmatched(pattern.pattern, trained, every))
        matched = taken[pattern.pattern]
        logger.info(
            "learning_rate_mapping %r (lr %g): %d parameter(s)%s",
            pattern.pattern,
            rate,
            len(matched),
            f": {_some(matched)}" if matched else " (every match taken by an earlier pattern)",
        )


def _unmatched(pattern: str, trained: list[str], every: list[str]) -> str:
    trained_names = set(trained)
    frozen = [name for name in every if name not in trained_names and re.search(pattern, name)]
    if frozen:
        return (
            f"learning_rate_mapping: {pattern!r} matches only parameters that are not trained "
            f"({_some(frozen)}), so its rate would apply to nothing"
        )
    # heads and loss parameters first: what a mapping usually names
    shown = sorted(trained, key=lambda name: name.startswith("backbone."))
    return (
        f"learning_rate_mapping: {pattern!r} matches no trained parameter (re.search on "
        f"names such as {_some(shown)})"
    )


def _some(names: list[str]) -> str:
    more = f", … ({len(names)} in all)" if len(names) > SHOWN_NAMES else ""
    return ", ".join(names[:SHOWN_NAMES]) + more


def _mapped_rate(name: str, patterns: list[tuple[re.Pattern[str], float]]) -> float | None:
    return next((rate for pattern, rate in patterns if pattern.search(name)), None)
