"""Two training stages in one cell (``--set stage1_loss=cosine_mse --set stage1_epochs=1``):
Pcc-tuning's schedule on the search's own data. A first stage trains the row's method with
another of its losses, ``stage1_loss``, for ``stage1_epochs`` epochs on the same pairs (same
seed, learning rate and other settings, a teacher's relabelling included); then the row's
own loss trains for the recipe's epochs starting from the first stage's model (a fresh
optimizer and warm-up, as Pcc-tuning's two runs). The paper's first stage is contrastive
on NLI, data a search is not given.

The stage keys are recipe keys of the search (a cell's settings and key show them), never
``sts-train`` config fields: :func:`without_stages` takes them out of a recipe, and the
first stage's ``sts-train`` run gets :meth:`FirstStage.recipe`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: the recipe keys of a first stage: its loss (one of the row's method's) and its epochs
STAGE_KEYS = ("stage1_loss", "stage1_epochs")


class StageError(ValueError):
    """The stage keys of a recipe do not make a first stage (the message names no option:
    the caller says where the keys were given)."""


@dataclass(frozen=True)
class FirstStage:
    """A cell's first stage: the loss it trains and for how many epochs."""

    loss: str
    epochs: float

    def settings(self) -> dict[str, Any]:
        """The first stage's ``sts-train`` settings over the cell's recipe: its loss and
        epochs in place of the row's."""
        return {"loss": self.loss, "num_train_epochs": self.epochs}

    def recipe(self, recipe: Mapping[str, Any], output_dir: str) -> dict[str, Any]:
        """The first stage's ``sts-train`` recipe: the cell's ``recipe`` (its seed, rate,
        data, teacher, …) with the stage's loss and epochs, into ``output_dir``."""
        return {**recipe, **self.settings(), "output_dir": output_dir}


def first_stage(settings: Mapping[str, Any]) -> FirstStage | None:
    """The first stage ``settings`` (a recipe's keys) name, or None when they name none;
    StageError unless both keys are given, the loss a name and the epochs a number > 0
    (whether the loss is one of the method's is ``sts-train``'s check)."""
    loss, epochs = settings.get("stage1_loss"), settings.get("stage1_epochs")
    if loss is None and epochs is None:
        return None
    if loss is None or epochs is None:
        raise StageError("a first stage needs both stage1_loss and stage1_epochs")
    if not isinstance(loss, str) or not loss:
        raise StageError("stage1_loss is the name of a loss of the method")
    if isinstance(epochs, bool) or not isinstance(epochs, int | float) or not epochs > 0:
        raise StageError("stage1_epochs is a number of epochs > 0")
    return FirstStage(loss, float(epochs))


def without_stages(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` without the stage keys: what ``sts-train``'s config gets."""
    return {key: value for key, value in settings.items() if key not in STAGE_KEYS}


def stage_keys_text(
    settings: Mapping[str, Any], option: Callable[[str], str] = lambda key: "--set"
) -> str:
    """The stage keys ``settings`` hold as the options that gave them:
    ``--set stage1_loss=cosine_mse --set stage1_epochs=1`` (``option``: key → its option)."""
    return " ".join(
        f"{option(key)} {key}={_text(settings[key])}" for key in STAGE_KEYS if key in settings
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
