"""Losses by name: a trainer picks its loss from the registry, so a new loss is one module
and one ``@register_loss("name")``.

A registered loss is an ``nn.Module`` (:class:`EmbeddingLoss`) called as
``loss(embeddings, labels)`` with the batch's embeddings by column
(``{"sentence1": (N, d), "sentence2": (N, d), ...}``) and its labels; it returns a scalar,
or a dict of named scalars with the total under ``"loss"`` (the parts are logged). It never
touches the model or the tokenizer. ``from_config(config, model)`` builds it from a
method's config (the fields it reads are listed in its docstring); ``model`` is there for
losses that score with a module saved beside the encoder (a classifier head).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor, nn


class EmbeddingLoss(nn.Module, ABC):
    """Base class of registered losses.

    Class attributes a loss sets:
        columns: the text columns whose embeddings it reads (checked against the data).
        label_kind: ``"score"`` (any number), ``"binary"`` (0/1), ``"class"`` (integer
            classes ``0 … num_labels − 1``) or ``None`` (no labels).
        citation: BibTeX of the paper that defines it.
    """

    columns: ClassVar[tuple[str, ...]] = ("sentence1", "sentence2")
    label_kind: ClassVar[str | None] = "score"
    citation: ClassVar[str] = ""

    def __init__(self) -> None:
        super().__init__()
        self._degenerate: list[tuple[str, Tensor | bool]] = []

    @classmethod
    def from_config(cls, config: Any, model: Any = None) -> EmbeddingLoss:
        return cls()

    @classmethod
    def required_label_kind(cls, config: Any) -> str | None:
        """The label kind this loss needs under ``config`` (default: ``label_kind``)."""
        return cls.label_kind

    def config_dict(self) -> dict[str, Any]:
        """The loss's settings (for the model card and logs)."""
        return {}

    def note_degenerate(self, reason: str, happened: Tensor | bool = True) -> None:
        """Record that this batch gave the loss nothing to learn from (``happened`` may be a
        boolean tensor: no GPU sync); the trainer collects it with :meth:`pop_degenerate`."""
        self._degenerate.append((reason, happened))

    def pop_degenerate(self) -> list[tuple[str, Tensor | bool]]:
        events, self._degenerate = self._degenerate, []
        return events

    @abstractmethod
    def forward(
        self, embeddings: Mapping[str, Tensor], labels: Tensor | None
    ) -> Tensor | dict[str, Tensor]:
        """The loss of a batch: a scalar, or named parts with the total under ``"loss"``."""


LOSSES: dict[str, type[EmbeddingLoss]] = {}


def register_loss(name: str) -> Callable[[type[EmbeddingLoss]], type[EmbeddingLoss]]:
    """Class decorator: make the loss available as ``loss: <name>`` in recipes."""

    def register(cls: type[EmbeddingLoss]) -> type[EmbeddingLoss]:
        if name in LOSSES and LOSSES[name] is not cls:
            raise ValueError(f"loss {name!r} is already registered by {LOSSES[name].__name__}")
        LOSSES[name] = cls
        cls.registered_name = name
        return cls

    return register


def loss_class(name: str) -> type[EmbeddingLoss]:
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; registered: {', '.join(sorted(LOSSES))}")
    return LOSSES[name]


def build_loss(name: str, config: Any, model: Any = None) -> EmbeddingLoss:
    """The registered loss ``name`` built from ``config`` (and ``model`` for heads)."""
    return loss_class(name).from_config(config, model)


def check_labels(name: str, labels: list[Any], num_labels: int | None = None) -> str | None:
    """What is wrong with ``labels`` for loss ``name`` (None when they fit its label kind)."""
    kind = loss_class(name).label_kind
    if kind == "binary":
        wrong = sorted({value for value in labels if value not in (0, 1)})
        return f"needs binary labels 0/1, found {wrong[:5]}" if wrong else None
    if kind == "class":
        allowed = set(range(num_labels or 0))
        wrong = sorted({v for v in labels if v not in allowed or v != int(v)})
        if wrong:
            return f"needs class labels 0 … {(num_labels or 0) - 1}, found {wrong[:5]}"
    return None


def zero_loss(reference: Tensor) -> Tensor:
    """A zero that stays on the autograd graph (DDP expects a gradient for every parameter),
    not the NaN of a mean over no rows."""
    return reference.sum() * 0.0


def compute_dtype(tensor: Tensor) -> torch.dtype:
    """float32 for half/integer inputs; float64 stays float64."""
    return torch.promote_types(tensor.dtype, torch.float32)
