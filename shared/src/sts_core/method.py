"""A method, declared once: ``METHOD = Method(...)`` in a package's ``method.py``.

Everything that describes a method reads this one object: the run
(:class:`sts_core.training.TrainingRun`, ``train.py`` and the package's console script,
``main = command(METHOD)``), ``sts-launch``'s checks, the losses a recipe may name
(:attr:`Method.losses`), the model card (:attr:`Method.title`, :attr:`Method.citation`,
each loss's ``title``), the rows of ``benchmarks/quality.py`` (:attr:`Method.quality_rows`)
and the method table of the documents (:func:`method_table`). A package registers it under
the entry-point group ``sts_core.methods`` (:mod:`sts_core.training.method_registry` reads it)::

    [project.entry-points."sts_core.methods"]
    mymethod = "sts_mymethod.method:METHOD"

The steps a run takes before the Trainer exists are the method's, one override point each
(a subclass of :class:`Method` replaces the one it needs): :meth:`Method.trainer_for`,
:meth:`Method.build_model`, :meth:`Method.build_evaluator`,
:meth:`Method.prepare_train_dataset`, :meth:`Method.check_train_dataset`. The Trainer
(``BaseTrainer`` or the method's subclass) is only the training loop; the run hands it the
method.

This module is a declaration: it imports nothing from :mod:`sts_core.training` (the run
imports it, not the other way round), so the defaults that need the training code —
the Trainer class and the model — are ``None`` here, meaning "the core's"
(``BaseTrainer``; a ``SentenceEncoder`` built from the model arguments). A method names
its Trainer as ``"module:Class"`` (:attr:`Method.trainer`), imported only when a run
builds it: reading the declaration (``check_only``, ``--help``, the benchmarks' rows)
imports no ``transformers.Trainer``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from sts_core.losses import EmbeddingLoss, check_labels
from sts_core.losses.classification import DEFAULT_NUM_LABELS
from sts_core.losses.combined import weighted_loss_class
from sts_core.losses.matryoshka import with_matryoshka
from sts_core.losses.registry import loss_class

if TYPE_CHECKING:
    from datasets import Dataset
    from torch import nn

    from sts_core.training.config import BaseConfig, ModelArguments
    from sts_core.training.trainer import AnyModelTrainer

#: a method's config class: ``Method[CoSENTConfig]``'s steps take a ``CoSENTConfig``
ConfigT = TypeVar("ConfigT", bound="BaseConfig")


@dataclass(frozen=True)
class QualityRow:
    """A row of ``benchmarks/quality.py`` (key ``ours-<name>``): the method trained with
    ``settings`` (config fields) over the benchmark's budget; ``unit_labels``: on scores
    scaled to 0–1."""

    name: str
    label: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    unit_labels: bool = False


@dataclass(frozen=True, eq=False)
class Method(Generic[ConfigT]):
    """One method: its config class, the losses a recipe may name, its Trainer, and what
    the model card and the benchmarks say of it.

    Args:
        name: the package's short name (``cosent``); the entry point's name.
        title: one line for the model card and the method table.
        config: the config class (``BaseConfig`` and the method's own fields); the method
            gives it the names of its losses (``config.declared_losses``), which its
            ``loss`` field is checked against.
        losses: the registered loss classes ``loss:`` may name; the default is the
            config's ``loss`` field's, or the first when the config has no such field.
        citation: BibTeX of the paper (default: the first loss's).
        trainer: the Trainer class as ``"module:Class"`` (``"sts_bsc.trainer:BscTrainer"``),
            imported by :meth:`trainer_for` only when a run builds its Trainer, so that
            ``check_only`` and ``--help`` never import ``transformers.Trainer``; or the
            class itself (a method declared beside its Trainer, e.g. in a test); default
            ``None``: the core's ``BaseTrainer``, the loss alone is the method.
        description: the ``--help`` line of the training command.
        quality_rows: the method's rows in ``benchmarks/quality.py``.
        readme: the package README, relative to the repository (the method table links it).
    """

    name: str
    title: str
    config: type[ConfigT]
    losses: tuple[type[EmbeddingLoss], ...]
    citation: str = ""
    trainer: str | type[AnyModelTrainer] | None = None
    description: str = ""
    quality_rows: tuple[QualityRow, ...] = ()
    readme: str = ""

    def __post_init__(self) -> None:
        if not self.losses:
            raise ValueError(f"method {self.name!r} declares no loss")
        if isinstance(self.trainer, str) and not _is_reference(self.trainer):
            raise ValueError(
                f"method {self.name!r}: trainer {self.trainer!r} is not 'module:Class' "
                "(e.g. 'sts_bsc.trainer:BscTrainer')"
            )
        unregistered = [loss.__name__ for loss in self.losses if not loss.registered_name]
        if unregistered:
            raise ValueError(
                f"method {self.name!r}: {', '.join(unregistered)} is not a registered loss "
                "(decorate it with @register_loss)"
            )
        bound = vars(self.config).get("declaring_method")
        if bound is not None and bound != self.name:
            raise ValueError(
                f"{self.config.__name__} is the config of method {bound!r} already; "
                f"method {self.name!r} needs a config class of its own"
            )
        self.config.declaring_method = self.name
        self.config.declared_losses = self.loss_names
        if self.default_loss not in self.loss_names:
            raise ValueError(
                f"method {self.name!r}: {self.config.__name__}'s loss default "
                f"{self.default_loss!r} is not one of its losses ({', '.join(self.loss_names)})"
            )
        if not self.citation:
            object.__setattr__(self, "citation", self.losses[0].citation)

    # ------------------------------------------------------------------ the losses
    @property
    def loss_names(self) -> tuple[str, ...]:
        return tuple(loss.registered_name for loss in self.losses)

    @property
    def default_loss(self) -> str:
        """The config's ``loss`` default when it has that field, else the first loss."""
        declared = {f.name: f.default for f in fields(self.config)}.get("loss")
        return declared if isinstance(declared, str) else self.loss_names[0]

    def loss_help(self) -> str:
        """The ``--loss`` help: each loss with its title, and the default."""
        listed = "; ".join(f"{loss.registered_name}: {loss.describe()}" for loss in self.losses)
        return f"{listed} (default: {self.default_loss})"

    def loss_name(self, config: ConfigT) -> str:
        """The loss this run trains with: ``config.loss``, else the default."""
        return getattr(config, "loss", None) or self.default_loss

    def loss_class(self, config: ConfigT) -> type[EmbeddingLoss]:
        """The class of the loss this run trains with, or with ``loss_weights`` the
        weighted sum of those losses (:mod:`sts_core.losses.combined`); with
        ``matryoshka_dims``, Matryoshka over it (:mod:`sts_core.losses.matryoshka`)."""
        weights = getattr(config, "loss_weights", None)
        base = weighted_loss_class(weights) if weights else loss_class(self.loss_name(config))
        return with_matryoshka(base, config)

    def label_column(self, config: ConfigT) -> str:
        """The dataset column the loss reads as labels: ``label_column``, except that a loss
        over class labels (``label_kind: class``) reads ``label`` when it is left at
        ``score``."""
        return loss_label_column(config, self.loss_class(config))

    # ------------------------------------------------------------------ the steps of a run
    def trainer_for(self, config: ConfigT) -> type[AnyModelTrainer] | None:
        """The Trainer class of a run under ``config``: :attr:`trainer` by default, imported
        here when it is ``"module:Class"`` (None: the core's ``BaseTrainer``,
        :func:`sts_core.training.trainer_class`). Called when the run builds its Trainer
        (and by the checks of a mapping of training sets), not by the other checks; an
        override imports the class it returns inside the method."""
        return import_trainer(self.trainer)

    def build_model(self, model_args: ModelArguments, config: ConfigT) -> nn.Module | None:
        """The model to train; None (the default): the core's, a ``SentenceEncoder`` as
        ``model_args`` describe it (:func:`sts_core.training.build_encoder`)."""
        return None

    def build_evaluator(self, name: str, dataset: Dataset, config: ConfigT) -> Any:
        """The dev evaluator: Spearman/Pearson (``<name>_spearman``) of the bi-encoder's pair
        scores (cosine similarity, or the model's ``score_pairs``)."""
        from sts_core.evaluation.pairs import PairEvaluator, cosine_scorer

        return PairEvaluator(
            dataset, name=name, scorer=cosine_scorer, batch_size=config.per_device_eval_batch_size
        )

    def prepare_train_dataset(
        self, dataset: Dataset, config: ConfigT
    ) -> tuple[Dataset, dict[str, Any]]:
        """Before :meth:`check_train_dataset`: turn the loaded, filtered training set into
        what the loss reads (SIFTER builds its positives here) and return it with a summary
        of what was done (it joins the run's data summary; empty: nothing). The identity
        by default."""
        return dataset, {}

    def table_columns(self, loss: type[EmbeddingLoss]) -> tuple[str, ...]:
        """The text columns a training table gives ``loss`` under this method (docs/data.md's
        table of the columns each loss needs): the loss's own, unless
        :meth:`prepare_train_dataset` makes them from others (SIFTER's from ``sentence``)."""
        return loss.columns

    def check_train_dataset(self, dataset: Dataset, config: ConfigT) -> None:
        """Before the model is loaded: the columns and labels the loss needs are in the
        training set (ValueError naming what is missing). Methods extend it."""
        check_dataset_for_loss(
            dataset,
            self.loss_class(config),
            self.label_column(config),
            config,
            f"method {self.name}",
        )

    def paper(self) -> dict[str, str]:
        """What the model card says of the method."""
        return {"name": self.title, "citation": self.citation}


def _is_reference(text: str) -> bool:
    """``text`` is ``"module:Class"``: a dotted module path, a colon, a name."""
    module, colon, name = text.partition(":")
    parts = module.split(".")
    return bool(colon) and name.isidentifier() and all(part.isidentifier() for part in parts)


def import_trainer(
    trainer: str | type[AnyModelTrainer] | None,
) -> type[AnyModelTrainer] | None:
    """The class a :attr:`Method.trainer` names: ``"module:Class"`` imported (TypeError when
    it is not a class), a class as it is, None as it is."""
    if not isinstance(trainer, str):
        return trainer
    module, _, name = trainer.partition(":")
    found = getattr(importlib.import_module(module), name)
    if not isinstance(found, type):
        raise TypeError(f"trainer {trainer!r} is not a class")
    return cast("type[AnyModelTrainer]", found)


def loss_label_column(config: BaseConfig, loss_type: type[EmbeddingLoss]) -> str:
    """The column a loss reads as labels: ``label_column``, except that a loss over class
    labels (``label_kind: class``) reads ``label`` when it is left at ``score``."""
    column = getattr(config, "label_column", "score")
    return "label" if loss_type.label_kind == "class" and column == "score" else column


def check_dataset_for_loss(
    dataset: Dataset,
    loss_type: type[EmbeddingLoss],
    label: str,
    config: BaseConfig,
    trainer_name: str = "BaseTrainer",
) -> None:
    """ValueError naming what is missing when ``dataset`` lacks a text column ``loss_type``
    reads (but ``hard_negative``, which is optional), or the label column ``label`` its
    label kind needs, or holds labels of another kind. ``trainer_name``: what the message
    says trains on sentence pairs (:meth:`Method.check_train_dataset`: the method)."""
    columns = set(dataset.column_names)
    needed = [c for c in loss_type.columns if c != "hard_negative"]
    texts = [c for c in needed if c not in columns]
    if texts:
        raise ValueError(
            f"the training set has no column {', '.join(texts)} (it has "
            f"{', '.join(sorted(columns))}): {trainer_name} trains "
            "on sentence pairs; name a table's text columns with columns, e.g. columns: "
            "{sentence1: question, sentence2: answer}"
        )
    if loss_type.required_label_kind(config) is None:
        return
    if label not in columns:
        raise ValueError(
            f"the training set has no label column {label!r} (it has "
            f"{', '.join(sorted(columns))}): {missing_label_hint(label)}"
        )
    classes = getattr(config, "num_labels", DEFAULT_NUM_LABELS)  # the softmax loss's default
    problem = check_labels(loss_type, dataset[label], classes)
    if problem:
        raise ValueError(f"loss {loss_type.display_name()} {problem} in column {label!r}")


def missing_label_hint(label: str) -> str:
    """How to give a training table the label column ``label`` a loss reads: a table's
    column is named with ``columns`` (``label_column`` only chooses between the project's
    ``score`` and ``label``)."""
    if label in ("score", "label"):
        example = "similarity" if label == "score" else "gold"
        return f"name the table's {label} column with columns, e.g. columns: {{{label}: {example}}}"
    return (
        f"label_column {label!r} is none of the project's label columns (score, label); a "
        f"table's own column is named with columns, e.g. columns: {{score: {label}}}"
    )


def method_table(methods: Sequence[Method], link_prefix: str = "") -> str:
    """The documents' method table (markdown): package, what it trains, its losses;
    ``link_prefix`` goes before each README path (``../`` from ``docs/``)."""
    lines = ["| Package | Method | Losses (`loss:`, the default first) |", "|---|---|---|"]
    for method in methods:
        link = f"{link_prefix}{method.readme}"
        package = f"[`{method.name}`]({link})" if method.readme else f"`{method.name}`"
        names = [method.default_loss, *(n for n in method.loss_names if n != method.default_loss)]
        losses = ", ".join(f"`{name}`" for name in names)
        lines.append(f"| {package} | {method.title} | {losses} |")
    return "\n".join(lines)
