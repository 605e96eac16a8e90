"""Parameter groups at their edges, each against a value written here: layer decay of 1
and of 2, the warning for a backbone without numbered layers, a parameter the model does
not name, which parameters move to a group of their own, the log line of a mapping, and
the messages for a pattern that matches nothing or only frozen parameters. Found by the
mutation pass (``tools/mutation.py``)."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from sts_core.training import ConfigError
from sts_core.training.optimization import (
    SHOWN_NAMES,
    _some,
    layer_rate_factors,
    regroup_parameters,
)

LOGGER = "sts_core.training.optimization"


def test_layer_decay_of_one_changes_nothing_and_of_two_doubles_per_layer() -> None:
    names = ["backbone.layer.0.w", "backbone.layer.1.w", "backbone.layer.2.w", "head.w"]
    assert layer_rate_factors(names, 1.0) == {}
    assert layer_rate_factors(names, None) == {}
    assert layer_rate_factors(names, 2.0) == {
        "backbone.layer.0.w": 4.0,
        "backbone.layer.1.w": 2.0,
        "backbone.layer.2.w": 1.0,
    }


def test_layer_decay_without_numbered_layers_warns(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert layer_rate_factors(["backbone.w", "head.w"], 0.9) == {}
    assert caplog.messages == [
        "layer_lr_decay 0.9: no numbered layer (layer.N., layers.N., h.N., block.N.) among "
        "the backbone's parameters: every parameter keeps the base learning rate"
    ]


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(2, 2)
        self.headX = nn.Linear(2, 1)
        self.frozen = nn.Linear(2, 2).requires_grad_(False)
        self.scale = nn.Parameter(torch.tensor(2.0))


def optimizer_of(parameters, weight_decay: float = 0.01) -> torch.optim.AdamW:
    return torch.optim.AdamW(parameters, lr=1e-3, weight_decay=weight_decay)


def layout(optimizer) -> list[tuple[float, float, int]]:
    return [(g["lr"], g["weight_decay"], len(g["params"])) for g in optimizer.param_groups]


def test_a_parameter_the_model_does_not_name_keeps_its_group(caplog) -> None:
    """An extra parameter in the optimizer (not among the model's names) matches no
    pattern; the mapped head moves to its rate; the scalar leaves weight decay; the log
    names what each pattern took."""
    model, unnamed = Model(), nn.Parameter(torch.zeros(3))
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = optimizer_of([*trained, unnamed])
    with caplog.at_level(logging.INFO, logger=LOGGER):
        regroup_parameters(optimizer, model.named_parameters(), {"X": 0.1})
    assert layout(optimizer) == [(1e-3, 0.01, 3), (1e-3, 0.0, 1), (0.1, 0.01, 2)]
    assert any(p is unnamed for p in optimizer.param_groups[0]["params"])
    assert caplog.messages == [
        "learning_rate_mapping 'X' (lr 0.1): 2 parameter(s): headX.weight, headX.bias"
    ]


def test_without_weight_decay_nothing_moves() -> None:
    model = Model()
    optimizer = optimizer_of([p for p in model.parameters() if p.requires_grad], 0.0)
    regroup_parameters(optimizer, model.named_parameters(), None)
    assert layout(optimizer) == [(1e-3, 0.0, 5)]


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (
            "frozen",
            "learning_rate_mapping: 'frozen' matches only parameters that are not trained "
            "(frozen.weight, frozen.bias), so its rate would apply to nothing",
        ),
        (
            "nothing",
            "learning_rate_mapping: 'nothing' matches no trained parameter (re.search on "
            "names such as scale, body.weight, body.bias, … (5 in all))",  # heads first,
        ),
    ],
)
def test_a_pattern_that_trains_nothing_is_refused(pattern: str, message: str) -> None:
    model = Model()
    optimizer = optimizer_of([p for p in model.parameters() if p.requires_grad])
    with pytest.raises(ConfigError) as error:
        regroup_parameters(optimizer, model.named_parameters(), {pattern: 0.1})
    assert str(error.value) == message


def test_some_names_are_shown_then_counted() -> None:
    names = [f"p{i}" for i in range(SHOWN_NAMES + 1)]
    assert _some(names[:SHOWN_NAMES]) == ", ".join(names[:SHOWN_NAMES])
    assert _some(names) == ", ".join(names[:SHOWN_NAMES]) + f", … ({SHOWN_NAMES + 1} in all)"
