"""Heads: modules on top of the sentence vectors that are saved with the encoder and rebuilt
by ``SentenceEncoder.from_pretrained``.

A head is an ``nn.Module`` whose class is registered under a type name
(:func:`register_head`) and that describes itself with ``head_config() -> dict`` (JSON
values) and is rebuilt by the classmethod ``from_head_config(config)``. Subclassing
:class:`Head` gives ``from_head_config`` (``cls(**config)``) for free. A saved encoder lists
its heads in ``sts_heads.json`` (name → type, config, and the module that defines the type,
imported on load when the type is not registered yet); their weights are in
``sts_extra_modules.safetensors`` under ``<name>.<parameter>``.

A head with a ``score(u, v)`` method can score sentence pairs
(``SentenceEncoder.pair_scorer``); otherwise pairs are scored by cosine similarity.

:class:`LinearHead` covers SBERT's softmax classifier over (u, v, |u − v|), a regression
head (one output) over any of the pair concatenations of :data:`PAIR_FEATURES`, and a
SimCSE-style projection (``activation="tanh"``) over a single embedding.
"""

from __future__ import annotations

import importlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, TypeVar, cast

import torch
from torch import nn

HEADS_CONFIG_NAME = "sts_heads.json"
HEADS_FORMAT = 1

# How a pair (u, v) becomes one input vector, and how many embedding widths it has.
PAIR_FEATURES: dict[str, int] = {
    "u,v,|u-v|": 3,
    "u,v": 2,
    "|u-v|": 1,
    "u,v,|u-v|,u*v": 4,
}
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
}

HEAD_TYPES: dict[str, type[nn.Module]] = {}
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

H = TypeVar("H", bound=type[nn.Module])


class HeadMethods(Protocol):
    """What :func:`register_head` checks a head class for. A registered class need not
    subclass :class:`Head`, so "an ``nn.Module`` with these" has no single static type:
    where a head or its class is used for them, it is cast to this protocol."""

    def head_config(self) -> dict[str, Any]: ...

    def from_head_config(self, config: dict[str, Any]) -> nn.Module: ...


class PairScoringHead(Protocol):
    """A head that scores sentence pairs (:func:`can_score_pairs`)."""

    def score(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor: ...


def register_head(type_name: str) -> Callable[[H], H]:
    """Class decorator: register a head class under ``type_name`` (the name saved in
    ``sts_heads.json``). The class needs ``head_config()`` and ``from_head_config``."""
    if not isinstance(type_name, str) or not type_name.strip():
        raise ValueError(f"a head type name is a non-empty string, got {type_name!r}")

    def decorate(cls: H) -> H:
        missing = [
            name
            for name in ("head_config", "from_head_config")
            if not callable(getattr(cls, name, None))
        ]
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)) or missing:
            raise TypeError(
                f"register_head({type_name!r}): {cls!r} must be an nn.Module class with "
                "head_config() and the classmethod from_head_config(config)"
            )
        known = HEAD_TYPES.get(type_name)
        if known is not None and _qualified(known) != _qualified(cls):
            raise ValueError(
                f"head type {type_name!r} is already registered by {_qualified(known)}"
            )
        HEAD_TYPES[type_name] = cls
        # any nn.Module class may be registered: Head declares head_type, a class without
        # that base gets it here
        cls.head_type = type_name  # type: ignore[attr-defined]
        return cls

    return decorate


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def head_type_of(head: nn.Module) -> str:
    """The registered type name of ``head`` (TypeError when its class is not registered)."""
    for name, cls in HEAD_TYPES.items():
        if type(head) is cls:
            return name
    raise TypeError(
        f"{type(head).__name__} is not a registered head type: decorate its class with "
        "@sts_core.heads.register_head('<type>') and give it head_config() and "
        "from_head_config(config), so that from_pretrained can rebuild it"
    )


def head_entry(head: nn.Module) -> dict[str, Any]:
    """What ``sts_heads.json`` records of a head: type, config and the defining module."""
    return {
        "type": head_type_of(head),
        "config": dict(cast(HeadMethods, head).head_config()),  # registered: it has one
        "module": type(head).__module__,
    }


def build_head(entry: dict[str, Any]) -> nn.Module:
    """Rebuild a head from its ``sts_heads.json`` entry; the module that defined its type is
    imported first when the type is not registered yet (ValueError when it stays unknown)."""
    type_name = entry.get("type")
    module = entry.get("module")
    where = ""
    if (
        type_name not in HEAD_TYPES
        and isinstance(module, str)
        and _MODULE_NAME.match(module)
        and module != "__main__"
    ):
        try:
            importlib.import_module(module)
        except ImportError as error:
            where = f" (its module {module} could not be imported: {error})"
    if type_name not in HEAD_TYPES:
        raise ValueError(
            f"head type {type_name!r} is not registered{where}: import the package that "
            f"registers it before loading; registered: {', '.join(sorted(HEAD_TYPES)) or 'none'}"
        )
    head_class = cast(HeadMethods, HEAD_TYPES[type_name])  # register_head checked it
    return head_class.from_head_config(dict(entry.get("config") or {}))


def can_score_pairs(head: nn.Module) -> bool:
    """Whether ``head.score(u, v)`` gives a similarity score for sentence pairs."""
    if not callable(getattr(head, "score", None)):
        return False
    return bool(getattr(head, "scores_pairs", True))


def pair_features(u: torch.Tensor, v: torch.Tensor, kind: str = "u,v,|u-v|") -> torch.Tensor:
    """The concatenation ``kind`` (a key of :data:`PAIR_FEATURES`) of two ``(..., d)``
    embeddings, along the last dimension."""
    if kind not in PAIR_FEATURES:
        raise ValueError(f"pair features {kind!r}: choose one of {', '.join(PAIR_FEATURES)}")
    if u.shape != v.shape:
        raise ValueError(f"pair features need u and v of one shape, got {u.shape} and {v.shape}")
    parts = {"u": u, "v": v, "|u-v|": (u - v).abs(), "u*v": u * v}
    return torch.cat([parts[name] for name in kind.split(",")], dim=-1)


class Head(nn.Module, ABC):
    """Base class of heads: ``from_head_config(config)`` is ``cls(**config)``; a subclass
    implements ``head_config()`` (the constructor's arguments, JSON values) and is
    registered with :func:`register_head`."""

    head_type: ClassVar[str]

    @abstractmethod
    def head_config(self) -> dict[str, Any]:
        """The constructor's arguments (JSON values)."""

    @classmethod
    def from_head_config(cls, config: dict[str, Any]) -> Head:
        return cls(**config)


@register_head("linear")
class LinearHead(nn.Linear, Head):
    """A linear layer (weights ``weight`` and ``bias``, as ``nn.Linear``) over one embedding
    or over a pair's features.

    Args:
        in_features: the layer's input width: the embedding dimension d, or
            ``PAIR_FEATURES[pair_features] * d`` for a pair head (see :meth:`for_pairs`).
        out_features: outputs (1 for a regression head, K for a K-class classifier).
        bias: learn an additive bias.
        pair_features: what ``head(u, v)`` reads: ``"u,v,|u-v|"`` (SBERT), ``"u,v"``,
            ``"|u-v|"`` or ``"u,v,|u-v|,u*v"``; ``None``: a head over one embedding.
        activation: applied to the output: ``tanh`` (SimCSE's MLP), ``relu`` (predictions
            cut at 0), ``sigmoid``, or ``None``.

    ``head(x)`` applies the layer to ``x`` as it is (already concatenated features, or one
    embedding); ``head(u, v)`` to ``pair_features(u, v)``. ``score(u, v)`` (one output and
    pair features only) is the prediction as a similarity score.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int = 1,
        bias: bool = True,
        pair_features: str | None = None,
        activation: str | None = None,
    ) -> None:
        if pair_features is not None and pair_features not in PAIR_FEATURES:
            raise ValueError(
                f"pair_features {pair_features!r}: choose one of {', '.join(PAIR_FEATURES)}"
            )
        if pair_features is not None and in_features % PAIR_FEATURES[pair_features]:
            raise ValueError(
                f"in_features {in_features} is not a multiple of the "
                f"{PAIR_FEATURES[pair_features]} embeddings of pair features {pair_features!r}"
            )
        if activation is not None and activation not in ACTIVATIONS:
            raise ValueError(f"activation {activation!r}: choose one of {', '.join(ACTIVATIONS)}")
        super().__init__(in_features, out_features, bias=bias)
        self.pair_features = pair_features
        self.activation = activation

    @classmethod
    def for_pairs(
        cls,
        dimension: int,
        out_features: int = 1,
        pair_features: str = "u,v,|u-v|",
        bias: bool = True,
        activation: str | None = None,
    ) -> LinearHead:
        """A head over the pair features of two ``dimension``-wide embeddings."""
        if pair_features not in PAIR_FEATURES:
            raise ValueError(
                f"pair_features {pair_features!r}: choose one of {', '.join(PAIR_FEATURES)}"
            )
        return cls(
            PAIR_FEATURES[pair_features] * dimension,
            out_features,
            bias=bias,
            pair_features=pair_features,
            activation=activation,
        )

    def head_config(self) -> dict[str, Any]:
        return {
            "in_features": self.in_features,
            "out_features": self.out_features,
            "bias": self.bias is not None,
            "pair_features": self.pair_features,
            "activation": self.activation,
        }

    def forward(self, u: torch.Tensor, v: torch.Tensor | None = None) -> torch.Tensor:
        if v is not None:
            if self.pair_features is None:
                raise ValueError("this head reads one embedding (pair_features is None)")
            u = pair_features(u, v, self.pair_features)
        output = super().forward(u)
        if self.activation is not None:
            output = ACTIVATIONS[self.activation](output)
        return output

    @property
    def scores_pairs(self) -> bool:
        """A pair head with one output: its prediction is a similarity score."""
        return self.pair_features is not None and self.out_features == 1

    def score(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The prediction for each pair, shape ``u.shape[:-1]``."""
        if not self.scores_pairs:
            raise ValueError(
                f"a head with {self.out_features} outputs over pair features "
                f"{self.pair_features!r} gives no pair score (needs one output over a pair)"
            )
        return self(u, v).squeeze(-1)

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, pair_features={self.pair_features!r}, "
            f"activation={self.activation!r}"
        )
