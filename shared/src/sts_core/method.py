"""A method, declared once: ``METHOD = Method(...)`` in a package's ``method.py``.

Everything that describes a method reads this one object: ``train.py`` and the package's
console script (:meth:`Method.main`), ``sts-launch``'s checks (they run ``main`` with
``check_only``), the losses a recipe may name (:attr:`Method.losses`), the model card
(:attr:`Method.title`, :attr:`Method.citation`, each loss's ``title``), the rows of
``benchmarks/quality.py`` (:attr:`Method.quality_rows`) and the method table of the
documents (:func:`method_table`). A package registers it under the entry-point group
``sts_core.methods``::

    [project.entry-points."sts_core.methods"]
    mymethod = "sts_mymethod.method:METHOD"

The steps a run takes before the Trainer exists are the method's, one override point each
(a subclass of :class:`Method` replaces the one it needs): :meth:`Method.trainer_for`,
:meth:`Method.build_model`, :meth:`Method.build_evaluator`,
:meth:`Method.prepare_train_dataset`, :meth:`Method.check_train_dataset`. The Trainer
(``BaseTrainer`` or the method's subclass) is only the training loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from importlib import metadata
from typing import Any

from sts_core.losses import EmbeddingLoss, check_labels
from sts_core.losses.classification import DEFAULT_NUM_LABELS
from sts_core.losses.combined import weighted_loss_class
from sts_core.losses.registry import loss_class
from sts_core.training.config import BaseConfig
from sts_core.training.parser import ConfigError
from sts_core.training.trainer import BaseTrainer

ENTRY_POINT_GROUP = "sts_core.methods"


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
class Method:
    """One method: its config class, the losses a recipe may name, its Trainer, and what
    the model card and the benchmarks say of it.

    Args:
        name: the package's short name (``cosent``); the entry point's name.
        title: one line for the model card and the method table.
        config: the config class (``BaseConfig`` and the method's own fields); it is bound
            to this method (``config.method``), so a config knows its method.
        losses: the registered loss classes ``loss:`` may name; the default is the
            config's ``loss`` field's, or the first when the config has no such field.
        citation: BibTeX of the paper (default: the first loss's).
        trainer: the Trainer class (default ``BaseTrainer``: the loss alone is the method).
        description: the ``--help`` line of the training command.
        quality_rows: the method's rows in ``benchmarks/quality.py``.
        readme: the package README, relative to the repository (the method table links it).
    """

    name: str
    title: str
    config: type[BaseConfig]
    losses: tuple[type[EmbeddingLoss], ...]
    citation: str = ""
    trainer: type[BaseTrainer] = BaseTrainer
    description: str = ""
    quality_rows: tuple[QualityRow, ...] = ()
    readme: str = ""

    def __post_init__(self) -> None:
        if not self.losses:
            raise ValueError(f"method {self.name!r} declares no loss")
        unregistered = [loss.__name__ for loss in self.losses if not loss.registered_name]
        if unregistered:
            raise ValueError(
                f"method {self.name!r}: {', '.join(unregistered)} is not a registered loss "
                "(decorate it with @register_loss)"
            )
        bound = vars(self.config).get("method")
        if bound is not None and bound.name != self.name:
            raise ValueError(
                f"{self.config.__name__} is the config of method {bound.name!r} already; "
                f"method {self.name!r} needs a config class of its own"
            )
        self.config.method = self
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

    def check_loss(self, name: str) -> None:
        """ValueError unless ``name`` is one of :attr:`loss_names`."""
        if name not in self.loss_names:
            raise ValueError(f"loss {name!r} is not one of {', '.join(self.loss_names)}")

    def loss_help(self) -> str:
        """The ``--loss`` help: each loss with its title, and the default."""
        listed = "; ".join(f"{loss.registered_name}: {loss.describe()}" for loss in self.losses)
        return f"{listed} (default: {self.default_loss})"

    def loss_name(self, config: Any) -> str:
        """The loss this run trains with: ``config.loss``, else the default."""
        return getattr(config, "loss", None) or self.default_loss

    def loss_class(self, config: Any) -> type[EmbeddingLoss]:
        """The class of the loss this run trains with, or with ``loss_weights`` the
        weighted sum of those losses (:mod:`sts_core.losses.combined`)."""
        weights = getattr(config, "loss_weights", None)
        return weighted_loss_class(weights) if weights else loss_class(self.loss_name(config))

    def label_column(self, config: Any) -> str:
        """The dataset column the loss reads as labels: ``label_column``, except that a loss
        over class labels (``label_kind: class``) reads ``label`` when it is left at
        ``score``."""
        from sts_core.training.multi_dataset import loss_label_column

        return loss_label_column(config, self.loss_class(config))

    # ------------------------------------------------------------------ the steps of a run
    def trainer_for(self, config: Any) -> type[BaseTrainer]:
        """The Trainer class of a run under ``config`` (:attr:`trainer` by default)."""
        return self.trainer

    def build_model(self, model_args: Any, config: Any) -> Any:
        """The model to train: a SentenceEncoder as ``model_args`` describe it."""
        from sts_core.training.model import build_encoder

        return build_encoder(model_args)

    def build_evaluator(self, name: str, dataset: Any, config: Any) -> Any:
        """The dev evaluator: Spearman/Pearson (``<name>_spearman``) of the bi-encoder's pair
        scores (cosine similarity, or the model's ``score_pairs``)."""
        from sts_core.evaluation.pairs import PairEvaluator, cosine_scorer

        return PairEvaluator(
            dataset, name=name, scorer=cosine_scorer, batch_size=config.per_device_eval_batch_size
        )

    def build_final_evaluators(self, data_args: Any, config: Any) -> dict[str, Any]:
        """An evaluator per ``final_eval_datasets`` reference: ``sts``, the dev evaluator
        (:meth:`build_evaluator`); ``classification``, a
        :class:`~sts_core.evaluation.pair_tasks.PairClassificationEvaluator` with the
        thresholds of ``threshold_dataset``; ``ranking``, a
        :class:`~sts_core.evaluation.pair_tasks.RankingEvaluator`. Built (and so checked)
        before training as well."""
        from sts_core.data import split_reference
        from sts_core.evaluation.pair_tasks import PairClassificationEvaluator, RankingEvaluator

        task = getattr(data_args, "final_eval_task", "sts")
        batch = config.per_device_eval_batch_size
        thresholds = None
        if task == "classification" and data_args.threshold_dataset:
            thresholds = _load_pairs(data_args.threshold_dataset, data_args)
        evaluators = {}
        for reference in data_args.final_eval_datasets:
            dataset = _load_pairs(reference, data_args)
            label = "_".join(split_reference(reference, "test")).replace("-", "_").replace("/", "_")
            if task == "classification":
                evaluator = PairClassificationEvaluator(
                    dataset, thresholds, name=label, batch_size=batch, source=reference
                )
            elif task == "ranking":
                evaluator = RankingEvaluator(
                    dataset, name=label, batch_size=batch, source=reference
                )
            else:
                evaluator = self.build_evaluator(label, dataset, config)
            evaluators[reference] = evaluator
        return evaluators

    def prepare_train_dataset(self, dataset: Any, config: Any) -> tuple[Any, dict[str, Any]]:
        """Before :meth:`check_train_dataset`: turn the loaded, filtered training set into
        what the loss reads (SIFTER builds its positives here) and return it with a summary
        of what was done (it joins the run's data summary; empty: nothing). The identity
        by default."""
        return dataset, {}

    def check_train_dataset(self, dataset: Any, config: Any) -> None:
        """Before the model is loaded: the columns and labels the loss needs are in the
        training set (ValueError naming what is missing). Methods extend it."""
        check_dataset_for_loss(
            dataset,
            self.loss_class(config),
            self.label_column(config),
            config,
            self.trainer_for(config).__name__,
        )

    # ------------------------------------------------------------------ the command
    def parser(self) -> Any:
        """The recipe and flag parser of the training command."""
        from sts_core.training.parser import ConfigParser

        return ConfigParser(self.config, description=self.description or None)

    def run(self, argv: Sequence[str] | None = None) -> dict[str, Any]:
        """Train as the recipe and flags say (a :class:`~sts_core.training.TrainingRun`);
        return the metrics."""
        from sts_core.training.run import TrainingRun

        return TrainingRun(argv, method=self).run()

    def main(self, argv: Sequence[str] | None = None) -> int:
        """``main()`` of ``train.py`` and of the package's console script: exit status 2
        with a one-line error for a bad input (before training), 1 for a diverged run."""
        from sts_core.training.run import cli_main

        return cli_main(self, argv)

    def paper(self) -> dict[str, str]:
        """What the model card says of the method."""
        return {"name": self.title, "citation": self.citation}


def check_dataset_for_loss(
    dataset: Any, loss_type: Any, label: str, config: Any, trainer_name: str = "BaseTrainer"
) -> None:
    """ValueError naming what is missing when ``dataset`` lacks a text column ``loss_type``
    reads (but ``hard_negative``, which is optional), or the label column ``label`` its
    label kind needs, or holds labels of another kind."""
    columns = set(dataset.column_names)
    needed = [c for c in loss_type.columns if c != "hard_negative"]
    texts = [c for c in needed if c not in columns]
    if texts:
        raise ValueError(
            f"the training set has no column {', '.join(texts)} (it has "
            f"{', '.join(sorted(columns))}): {trainer_name} trains "
            "on sentence pairs"
        )
    if loss_type.required_label_kind(config) is None:
        return
    if label not in columns:
        raise ValueError(
            f"the training set has no label column {label!r} (it has "
            f"{', '.join(sorted(columns))}): set label_column"
        )
    classes = getattr(config, "num_labels", DEFAULT_NUM_LABELS)  # the softmax loss's default
    problem = check_labels(loss_type, dataset[label], classes)
    if problem:
        raise ValueError(f"loss {loss_type.display_name()} {problem} in column {label!r}")


def _load_pairs(reference: str, data_args: Any) -> Any:
    """The pair set a reference names (its test split by default), as the data options
    read it (``train_format`` is for the training sets: not applied)."""
    from sts_core.training.data import load_reference

    return load_reference(reference, "test", data_args)[1]


def method_of(config: Any) -> Method:
    """The method ``config``'s class belongs to (the core's cosine-MSE method for a plain
    ``BaseConfig``)."""
    bound = getattr(type(config), "method", None)
    return bound if bound is not None else CORE_METHOD


class MethodDeclarationError(ConfigError):
    """An installed method cannot be used as declared: two distributions declare its name,
    or its entry point is not a :class:`Method` of that name (one line, exit status 2)."""


#: ``core``, sts-core's own method, as :func:`declared_by` names it
CORE_DECLARATION = "sts-core (built in: sts_core.method:CORE_METHOD)"


def method_entry_points() -> list[metadata.EntryPoint]:
    """The entry points of group ``sts_core.methods`` of every installed distribution
    (importlib lists a distribution found twice on the path once); nothing is imported."""
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def declared_by(entry_point: metadata.EntryPoint) -> str:
    """``<distribution> (<name> = <module:attribute>)``: who declares a method, and where."""
    dist = getattr(entry_point, "dist", None)
    owner = dist.name if dist is not None else "an unknown distribution"
    return f"{owner} ({entry_point.name} = {entry_point.value})"


def check_unique(name: str, entry_points: Sequence[metadata.EntryPoint]) -> None:
    """:class:`MethodDeclarationError` naming every declaration when more than one installed
    distribution declares the method ``name`` (``core`` is sts-core's own): the last one
    found would otherwise win, silently, and train under the other's name."""
    declarations = [declared_by(ep) for ep in entry_points if ep.name == name]
    if name == CORE_METHOD.name and declarations:
        declarations.insert(0, CORE_DECLARATION)
    if len(declarations) > 1:
        raise MethodDeclarationError(
            f"method {name!r} is declared by {len(declarations)} installed distributions: "
            f"{' and '.join(declarations)}; uninstall all but one (pip uninstall <name>) so "
            "that the name means one method"
        )


def load_method(entry_point: metadata.EntryPoint) -> Method:
    """The :class:`Method` an entry point declares; :class:`MethodDeclarationError` when it
    fails to import, is something else or is a method of another name."""
    try:
        method = entry_point.load()
    except ImportError as error:
        raise MethodDeclarationError(
            f"method {entry_point.name!r} cannot be imported: entry point "
            f"{declared_by(entry_point)} fails with {type(error).__name__}: {error}"
        ) from error
    if not isinstance(method, Method):
        raise MethodDeclarationError(
            f"entry point {declared_by(entry_point)}, group {ENTRY_POINT_GROUP}, is a "
            f"{type(method).__name__}, not a Method"
        )
    if method.name != entry_point.name:
        raise MethodDeclarationError(
            f"entry point {declared_by(entry_point)}, group {ENTRY_POINT_GROUP}, declares "
            f"method {method.name!r}: the entry point's name must be the method's"
        )
    return method


def installed_method_names() -> list[str]:
    """The names a run may ask for (``core`` first, then the installed methods), without
    importing any method package."""
    names = {ep.name for ep in method_entry_points()} - {CORE_METHOD.name}
    return [CORE_METHOD.name, *sorted(names)]


def load_methods() -> dict[str, Method]:
    """Every installed method package's declaration (entry-point group
    ``sts_core.methods``), by name; :class:`MethodDeclarationError` when two distributions
    declare one name (any name: this is the list the benchmarks and documents read)."""
    entry_points = method_entry_points()
    for entry_point in entry_points:
        check_unique(entry_point.name, entry_points)
    methods = {ep.name: load_method(ep) for ep in entry_points}
    return dict(sorted(methods.items()))


def installed_method(name: str) -> Method | None:
    """The method named ``name``: the core's or an installed one; None when there is none.
    :class:`MethodDeclarationError` when two distributions declare ``name`` (a duplicate of
    another name does not matter here: only ``name``'s package is imported)."""
    entry_points = method_entry_points()
    check_unique(name, entry_points)
    if name == CORE_METHOD.name:
        return CORE_METHOD
    declaring = [ep for ep in entry_points if ep.name == name]
    return load_method(declaring[0]) if declaring else None


def quality_rows() -> dict[str, tuple[Method, QualityRow]]:
    """The rows of ``benchmarks/quality.py`` every installed method declares, by key
    ``ours-<row name>``."""
    return {
        f"ours-{row.name}": (method, row)
        for method in load_methods().values()
        for row in method.quality_rows
    }


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


def _core_method() -> Method:
    from sts_core.losses.similarity import CosineMSELoss

    return Method(
        name="core",
        title="Cosine-similarity MSE (sentence-transformers CosineSimilarityLoss)",
        config=BaseConfig,
        losses=(CosineMSELoss,),
        description="Train a sentence encoder with cosine MSE.",
    )


#: ``sts-train``: the core's own method (cosine MSE on scored pairs)
CORE_METHOD = _core_method()
