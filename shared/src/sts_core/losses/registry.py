"""Losses by name: a trainer picks its loss from the registry, so a new loss is one module
and one ``@register_loss("name")``.

A registered loss is an ``nn.Module`` (:class:`EmbeddingLoss`) called as
``loss(embeddings, labels)`` with the batch's embeddings by column
(``{"sentence1": (N, d), "sentence2": (N, d), ...}``) and its labels; it returns a scalar,
or a dict of named scalars with the total under ``"loss"`` (the parts are logged). It never
touches the model or the tokenizer. ``from_config(config, model)`` builds it from a
method's config (the fields it reads are listed in its docstring); ``model`` is there for
losses that score with a module saved beside the encoder (a classifier head).

A loss that trains such a module (SBERT's classifier, a regression head) is a
:class:`HeadLoss`: :meth:`EmbeddingLoss.prepare_model`, which the trainer calls before
building the loss, adds its head to the model (or checks the one a reloaded model has), so
the head is trained with the encoder, saved beside it and rebuilt by ``from_pretrained``.
"""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor, nn

from sts_core.losses.catalogue import LOSS_PACKAGES

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig


class EmbeddingLoss(nn.Module, ABC):
    """Base class of registered losses.

    Class attributes a loss sets:
        columns: the text columns whose embeddings it reads (checked against the data).
        label_kind: ``"score"`` (any number), ``"binary"`` (0/1), ``"class"`` (integer
            classes ``0 … num_labels − 1``) or ``None`` (no labels).
        citation: BibTeX of the paper that defines it.
        title: what it is, in one line (the model card, ``--loss``'s help); e.g.
            ``"CoSENT (eq. 10)"``.
        text_id_columns: text columns whose identities it needs (which rows of the batch
            hold the same text); it is then called as ``loss(embeddings, labels,
            text_ids={column: (N,) int64})`` (equal texts, equal ids).
        reads_pooled: ``True`` for a loss that reads the pooled embeddings as they come out
            of the pooling, before the encoder's L2 normalisation (a head fit to the label
            values, whose input scale matters). The trainer then turns the encoder's
            ``normalize`` off for the training forward (:func:`pooled_embeddings`); the
            other parts of a loss sum still get unit vectors.
    """

    columns: ClassVar[tuple[str, ...]] = ("sentence1", "sentence2")
    text_id_columns: ClassVar[tuple[str, ...]] = ()
    reads_pooled: ClassVar[bool] = False
    label_kind: ClassVar[str | None] = "score"
    citation: ClassVar[str] = ""
    title: ClassVar[str] = ""
    registered_name: ClassVar[str] = ""  # set by register_loss

    def __init__(self) -> None:
        super().__init__()
        self._degenerate: list[tuple[str, Tensor | bool]] = []

    @classmethod
    def from_config(cls, config: BaseConfig | None, model: Any = None) -> EmbeddingLoss:
        """The loss with each ``__init__`` argument read from the config field of the same
        name (:func:`config_settings`: a field the config lacks keeps the argument's
        default). A loss whose arguments are named otherwise overrides this."""

        names = [
            name
            for name, parameter in inspect.signature(cls.__init__).parameters.items()
            if name != "self"
            and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
        ]
        return cls(**config_settings(config, **{name: name for name in names}))

    @classmethod
    def display_name(cls) -> str:
        """The registered name, else the class name."""
        return cls.registered_name or cls.__name__

    @classmethod
    def describe(cls) -> str:
        """:attr:`title`, else the registered name."""
        return cls.title or cls.display_name()

    @classmethod
    def prepare_model(cls, model: Any, config: BaseConfig | None) -> None:
        """Called by the trainer before :meth:`from_config`: add what the loss needs to the
        model (a head). Nothing by default."""

    @classmethod
    def check_saved_heads(
        cls, heads: Mapping[str, Any], config: BaseConfig | None, dimension: int
    ) -> None:
        """Before the weights load: ValueError when the heads a saved model records
        (``sts_heads.json``'s entries, by name) cannot serve this loss under ``config``.
        Nothing to check by default."""

    @classmethod
    def required_label_kind(cls, config: BaseConfig | None) -> str | None:
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


class HeadLoss(EmbeddingLoss):
    """A loss that scores pairs with a head trained beside the encoder.

    The head is a registered head (:mod:`sts_core.heads`) that the model holds as
    ``head_name``: :meth:`prepare_model` adds :meth:`build_head`'s head when the model has
    none, and keeps the model's own when it has one of the same type and settings (a
    second stage starting from a saved model, whose heads ``from_pretrained`` rebuilt); a
    head of other settings is an error naming both. Saved with the encoder
    (``sts_heads.json``), so a run resumes with it and its predictions can be inspected.
    Subclasses set ``head_name``, implement :meth:`build_head` and build themselves with
    :meth:`head_of` in ``from_config``.
    """

    head_name: ClassVar[str]

    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        self.head = head

    @classmethod
    @abstractmethod
    def build_head(cls, config: BaseConfig | None, dimension: int) -> nn.Module:
        """A new head for embeddings of width ``dimension``, as ``config`` asks."""

    @classmethod
    def prepare_model(cls, model: Any, config: BaseConfig | None) -> None:
        from sts_core.heads import head_entry

        existing = model.heads.get(cls.head_name)
        if existing is None:
            model.add_head(cls.head_name, cls.build_head(config, model.dimension))
            return
        cls.check_saved_heads({cls.head_name: head_entry(existing)}, config, model.dimension)

    @classmethod
    def check_saved_heads(
        cls, heads: Mapping[str, Any], config: BaseConfig | None, dimension: int
    ) -> None:
        """The model's head of this loss's name, if it has one, must be the head
        :meth:`build_head` would make (same type and settings)."""
        from sts_core.heads import head_entry

        have = heads.get(cls.head_name)
        if have is None:
            return
        want = head_entry(cls.build_head(config, dimension))
        if (have.get("type"), have.get("config")) != (want["type"], want["config"]):
            raise ValueError(
                f"the model already has a {cls.head_name!r} head ({have.get('type')} "
                f"{have.get('config')}), but loss {cls.display_name()} with these settings "
                f"needs {want['type']} {want['config']}: match the settings, or start from a "
                "model without that head"
            )

    @classmethod
    def head_of(cls, model: Any) -> nn.Module:
        """The model's head for this loss (ValueError when it has none)."""
        heads = getattr(model, "heads", {})
        if cls.head_name not in heads:
            raise ValueError(
                f"loss {cls.display_name()} needs the model's {cls.head_name!r} head "
                "(the trainer adds it with prepare_model)"
            )
        return heads[cls.head_name]


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


ENTRY_POINT_GROUP = "sts_core.methods"  # a method's declaration imports its losses


def loss_and_parts(
    loss: EmbeddingLoss,
    embeddings: Mapping[str, Tensor],
    labels: Tensor | None,
    text_ids: Mapping[str, Tensor] | None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Call a loss that is part of another (a ``loss_weights`` sum, Matryoshka): with the
    batch's text ids when it reads them; its total and its own logged parts (none for a
    scalar)."""
    if loss.text_id_columns:
        output = loss(embeddings, labels, text_ids=text_ids or {})
    else:
        output = loss(embeddings, labels)
    if isinstance(output, dict):
        return output["loss"], {k: v for k, v in output.items() if k != "loss"}
    return output, {}


@dataclass(frozen=True)
class BrokenLossPackage:
    """An entry point of ``sts_core.methods`` whose module failed to import."""

    entry_point: str
    module: str
    package: str | None  # the distribution that declares it, when known
    error: str

    def describe(self) -> str:
        owner = f"package {self.package} is installed but its " if self.package else ""
        return (
            f"{owner}entry point {self.entry_point!r} ({self.module}, group "
            f"{ENTRY_POINT_GROUP}) failed to import: {self.error}"
        )


def installed_loss_entry_points() -> list[Any]:
    """The entry points of group ``sts_core.methods``: one per installed method package."""

    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def load_installed_losses() -> list[BrokenLossPackage]:
    """Import the loss module of every installed method package (entry-point group
    ``sts_core.methods``), so a recipe can name, e.g. in ``loss_weights``, a loss of another
    package than its own. A module that fails to import is skipped and returned, so that a
    broken package stops only a run that names one of its losses (and the error names it)."""
    broken = []
    for entry_point in installed_loss_entry_points():
        try:
            entry_point.load()
        except Exception as error:  # noqa: BLE001 - any failure of a package's import
            broken.append(broken_package(entry_point, error))
    return broken


def broken_package(entry_point: Any, error: BaseException) -> BrokenLossPackage:
    message = " ".join(f"{type(error).__name__}: {error}".split())
    return BrokenLossPackage(entry_point.name, entry_point.value, package_of(entry_point), message)


def package_of(entry_point: Any) -> str | None:
    """The name of the distribution that declares ``entry_point`` (None when unknown)."""
    return getattr(getattr(entry_point, "dist", None), "name", None)


def loss_class(name: str) -> type[EmbeddingLoss]:
    if name not in LOSSES:
        broken = load_installed_losses()
        if name not in LOSSES:
            raise ValueError(unknown_loss_message(name, broken))
    return LOSSES[name]


def unknown_loss_message(name: str, broken: list[BrokenLossPackage]) -> str:
    """Why loss ``name`` is not registered: its package failed to import (naming the
    entry point and the error), is not installed (naming it), or the name is unknown."""
    package = LOSS_PACKAGES.get(name)
    causes = [b for b in broken if _same_package(b.package, package) or b.entry_point == name]
    if causes:
        return f"loss {name!r} could not be loaded: {causes[0].describe()}"
    installed = {_canonical(package_of(e) or "") for e in installed_loss_entry_points()}
    if package and _canonical(package) not in installed:
        folder = package.removeprefix("sts-")
        return (
            f"unknown loss {name!r}: it is provided by the {package} package "
            f"(pip install {package} / ./packages/{folder})"
        )
    message = f"unknown loss {name!r}; registered: {', '.join(sorted(LOSSES))}"
    if broken:
        message += "; not loaded: " + "; ".join(b.describe() for b in broken)
    return message


def _same_package(found: str | None, wanted: str | None) -> bool:
    if not found or not wanted:
        return False
    return _canonical(found) == _canonical(wanted)


def _canonical(package: str) -> str:
    """A distribution name as pip compares them (sts_bsc, STS-Bsc: sts-bsc)."""
    return re.sub(r"[-_.]+", "-", package).lower()


def build_loss(name: str, config: BaseConfig | None, model: Any = None) -> EmbeddingLoss:
    """The registered loss ``name`` built from ``config`` (and ``model`` for heads)."""
    return loss_class(name).from_config(config, model)


def check_labels(
    loss: str | type[EmbeddingLoss], labels: list[Any], num_labels: int | None = None
) -> str | None:
    """What is wrong with ``labels`` for ``loss`` (a registered name or a loss class; None
    when they fit its label kind)."""
    kind = (loss_class(loss) if isinstance(loss, str) else loss).label_kind
    if kind == "binary":
        wrong = sorted({value for value in labels if value not in (0, 1)})
        return f"needs binary labels 0/1, found {wrong[:5]}" if wrong else None
    if kind == "class":
        allowed = set(range(num_labels or 0))
        wrong = sorted({v for v in labels if v not in allowed or v != int(v)})
        if wrong:
            return f"needs class labels 0 … {(num_labels or 0) - 1}, found {wrong[:5]}"
    return None


def config_settings(config: BaseConfig | None, **fields: str) -> dict[str, Any]:
    """A loss's keyword arguments from a method's config: ``{argument: config.<field>}`` for
    each ``argument=field`` the config has. A field the config lacks (the loss is a part of
    another method's ``loss_weights``, or ``config`` is None) is left out, so the loss's own
    default applies: each default is written once, in the loss's signature."""
    return {name: getattr(config, key) for name, key in fields.items() if hasattr(config, key)}


@contextmanager
def pooled_embeddings(encoder: Any) -> Iterator[Any]:
    """Within the block, ``encoder`` gives its pooled embeddings without its L2
    normalisation (``normalize`` off), as a loss with ``reads_pooled`` reads them; the
    setting is restored afterwards (the saved folder, ``encode`` and the cosine keep it)."""
    normalize = getattr(encoder, "normalize", None)
    if not normalize:
        yield encoder
        return
    encoder.normalize = False
    try:
        yield encoder
    finally:
        encoder.normalize = normalize


def zero_loss(reference: Tensor) -> Tensor:
    """A zero that stays on the autograd graph (DDP expects a gradient for every parameter),
    not the NaN of a mean over no rows."""
    return reference.sum() * 0.0


def compute_dtype(tensor: Tensor) -> torch.dtype:
    """float32 for half/integer inputs; float64 stays float64."""
    return torch.promote_types(tensor.dtype, torch.float32)
