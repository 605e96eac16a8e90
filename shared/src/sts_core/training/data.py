"""Build the training set and the dev evaluator from ``DataArguments``."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from datasets import Dataset, DatasetDict

from sts_core.data import (
    DataConfigError,
    TableReading,
    check_score_range,
    filter_test_overlap,
    load_test_sets,
    map_labels,
    merge_datasets,
    parse_columns_option,
    registry_names,
    rescale_scores,
    resolve_label_mapping,
    split_reference,
)
from sts_core.data import load_reference as _load_reference
from sts_core.data.columns import column_array
from sts_core.data.references import IN_MEMORY
from sts_core.data.tables import scored_reading
from sts_core.method import check_dataset_for_loss, loss_label_column
from sts_core.options import parse_json_mapping
from sts_core.training.collator import text_columns_with
from sts_core.training.config import DataArguments
from sts_core.training.multi_dataset import (
    TrainDatasets,
    TrainDatasetSpec,
    TrainSet,
    column_prompts,
    set_loss_class,
)

if TYPE_CHECKING:
    from sts_core.losses import EmbeddingLoss
    from sts_core.method import Method
    from sts_core.training.config import BaseConfig

logger = logging.getLogger(__name__)


#: the loss reads the score column, or the label column, or no labels (None)
Reads = str | None


def load_reference(
    reference: str | Dataset | DatasetDict,
    default_split: str,
    data_args: DataArguments,
    columns: dict[str, str] | None = None,
    reads: Reads = "score",
) -> tuple[str, Dataset]:
    """Load a recipe's dataset reference (or a Dataset / DatasetDict in memory, by the same
    path) with ``data_args``' data folder, variant and SICK rescaling (see
    :func:`sts_core.data.load_reference`); ``train_format`` and ``columns`` apply to the
    training sets (``default_split`` train), ``eval_columns`` to the others (a dev or test
    file's format is guessed from its name); ``columns`` given here (an entry of
    ``train_datasets`` as a mapping) replaces the recipe's. A column mapping is for tables:
    registry names do not take it. ``reads``: what the training set's loss reads (``score``,
    ``label`` or None), which decides how a table's label column is found
    (:func:`table_reading`); ``score_range`` is checked in the tables of the training sets
    whose loss reads the scores (unless ``label_mapping`` maps them first) and of the dev
    set, naming the file's column."""
    training = default_split == "train"
    if columns is None:
        columns = _table_columns(data_args, training)
    if isinstance(reference, str) and split_reference(reference, default_split)[0] in (
        registry_names()
    ):
        columns = None
    checks_scores = (training and not data_args.label_mapping and reads == "score") or (
        default_split == "dev"
    )
    score_range = data_args.score_range if checks_scores else None
    return _load_reference(
        reference,
        default_split,
        data_dir=data_args.data_dir,
        variant=data_args.data_variant,
        fmt=data_args.train_format if training else None,
        sick_to_sts_scale=data_args.sick_to_sts_scale,
        columns=columns,
        score_range=_score_range(score_range) if score_range else None,
        reading=table_reading(training, reads),
    )


# the mapping options as DataArguments.__post_init__ parsed them (parsing one again gives it
# back): the fields are typed for the parser, which reads their text
def _table_columns(data_args: DataArguments, training: bool) -> dict[str, str] | None:
    """``columns`` (the training tables') or ``eval_columns``."""
    option = "columns" if training else "eval_columns"
    given = data_args.columns if training else data_args.eval_columns
    return parse_columns_option(given, option)


def _label_mapping(data_args: DataArguments) -> dict[str, Any] | None:
    """``label_mapping`` (None: unset)."""
    return parse_json_mapping(data_args.label_mapping, "label_mapping")


def table_reading(training: bool, reads: Reads = "score") -> TableReading:
    """How a run reads its tables (:class:`~sts_core.data.TableReading`): a training table
    under ``columns``, its unnamed column of numbers the label when the loss reads one
    (else refused), integer labels that look like NLI classes named in a warning when the
    loss reads them as scores (choose ``train_format: nli``); a dev or test table under
    ``eval_columns``, scored against its labels (a table without them is refused)."""
    if not training:
        return scored_reading("eval_columns")
    hint = "set train_format: nli" if reads == "score" else None
    return TableReading("columns", "read" if reads else "named", nli_hint=hint)


def loss_reads(loss_type: type[EmbeddingLoss], label_column: str, config: BaseConfig) -> Reads:
    """What a loss reads of a training set: ``label_column`` (score or label) when its
    label kind needs labels, else None."""
    return label_column if loss_type.required_label_kind(config) is not None else None


def method_reads(method: Method, config: BaseConfig) -> tuple[str, Reads]:
    """The label column of the method's loss under ``config``, and what that loss reads of
    a training set (:func:`loss_reads`)."""
    label_column = method.label_column(config)
    return label_column, loss_reads(method.loss_class(config), label_column, config)


def is_pair_set(dataset: Any) -> bool:
    """Whether a training set is sentence pairs (it has ``sentence1`` and ``sentence2``),
    which the test-pair filter and count apply to."""
    return {"sentence1", "sentence2"} <= set(dataset.column_names)


def build_train_dataset(
    data_args: DataArguments,
    seed: int = 42,
    label_column: str = "score",
    reads: Reads = "score",
    given: Dataset | DatasetDict | None = None,
) -> tuple[Dataset, dict[str, Any]]:
    """Load, merge, filter, map the labels of (``label_mapping`` on ``label_column``) and
    rescale the training sets — or ``given``, a Dataset in memory instead of
    ``train_datasets``, by the same path — and return them and a summary. ``reads``: what
    the loss reads (:func:`load_reference`)."""
    references = data_args.train_datasets if given is None else [given]
    sources = [IN_MEMORY if given is not None else str(ref) for ref in references]
    loaded = source_names(
        sources, [load_reference(ref, "train", data_args, reads=reads) for ref in references]
    )
    summary: dict[str, Any] = {"sources": {name: len(ds) for name, ds in loaded}}
    if data_args.score_range:  # each file's rows, before the sets are merged and filtered
        bounds = _score_range(data_args.score_range)
        check_train_scores(data_args, bounds, [ds for _, ds in loaded], label_column, sources)
    if len(loaded) == 1:
        train = loaded[0][1]
    else:
        common = [
            c for c in loaded[0][1].column_names if all(c in ds.column_names for _, ds in loaded)
        ]
        train = merge_datasets(
            *(ds for _, ds in loaded), names=[n for n, _ in loaded], columns=common
        )
    if not is_pair_set(train):
        logger.info("test-pair filter: not applied (the training set is not sentence pairs)")
        summary["filter"] = {"applied": False, "reason": "the training set is not pairs"}
    else:
        train = filter_or_count_test_pairs(train, data_args, summary)
    if label_mapping := _label_mapping(data_args):
        train, _ = map_labels(train, label_column, label_mapping)
    if data_args.score_range:
        train = rescale_scores(train, _score_range(data_args.score_range))
    if data_args.max_train_samples is not None and data_args.max_train_samples < len(train):
        logger.info(
            "max_train_samples: keeping %d of %d training pairs",
            data_args.max_train_samples,
            len(train),
        )
        train = train.shuffle(seed=seed).select(range(data_args.max_train_samples))
    if data_args.label_mapping:  # counted on what trains (after max_train_samples)
        counts = value_counts(column_array(train, label_column))
        summary["label_mapping"] = {"column": label_column, "rows_per_value": counts}
        logger.info("label_mapping on %s: rows per new value %s", label_column, counts)
    summary["train_pairs"] = len(train)
    return train, summary


def check_train_scores(
    data_args: DataArguments,
    bounds: tuple[float, float],
    loaded: list[Dataset],
    label_column: str,
    sources: list[str] | None = None,
) -> None:
    """``score_range`` (``bounds``) holds every training score it will rescale: each
    training set's scores (DataFormatError naming the file or dataset — ``sources``,
    default the references of ``train_datasets`` —, the row and the column), or with
    ``label_mapping`` on the score column the values it maps to (DataConfigError)."""
    low, high = bounds
    label_mapping = _label_mapping(data_args)
    if label_mapping and label_column == "score":  # every score becomes one of these
        resolved = resolve_label_mapping(label_mapping, label_column)
        outside = [f"{k:g} → {v:g}" for k, v in resolved.items() if not low <= v <= high]
        if outside:
            raise DataConfigError(
                f"label_mapping maps {', '.join(outside)}: outside score_range "
                f"[{low:g}, {high:g}], which the mapped scores are rescaled from"
            )
        return
    for source, dataset in zip(sources or data_args.train_datasets, loaded, strict=True):
        check_score_range(dataset, (low, high), source)


def filter_or_count_test_pairs(
    pairs: Dataset, data_args: DataArguments, summary: dict[str, Any]
) -> Dataset:
    """With ``filter_test_overlap``: ``pairs`` without the STS test pairs (the report in
    ``summary["filter"]``); without: ``pairs`` as they are, the test pairs among them counted
    in ``summary["test_overlap"]`` (when the test sets can be read)."""
    if data_args.filter_test_overlap:
        pairs, report = filter_test_overlap(
            pairs, load_test_sets(data_args.data_dir, data_args.data_variant)
        )
        summary["filter"] = report.to_dict()
        return pairs
    overlap = count_test_overlap(pairs, data_args)
    if overlap is not None:
        summary["test_overlap"] = overlap
    return pairs


def count_test_overlap(train: Dataset, data_args: DataArguments) -> dict[str, Any] | None:
    """With the test-pair filter off: how many training pairs also occur (either order) in
    the seven STS test sets, by test set (logged as a warning when any do). None when the
    training set has no pairs or the test sets cannot be read (logged)."""
    if not is_pair_set(train):
        return None
    try:
        test_sets = load_test_sets(data_args.data_dir, data_args.data_variant)
    except (OSError, ValueError) as error:  # no benchmark folder: training from hub ids
        logger.info("test-pair overlap not counted (the test sets cannot be read: %s)", error)
        return None
    _, report = filter_test_overlap(train, test_sets, log=False)
    by_test_set = {k: v for k, v in report.removed_by_source.items() if v}
    counted = {"pairs": report.removed, "of": report.total, "by_test_set": by_test_set}
    if report.removed:
        by_set = ", ".join(f"{k}: {v}" for k, v in by_test_set.items())
        logger.warning(
            "filter_test_overlap is off: %d of %d training pairs also occur in the STS test "
            "sets (%s); scores on those sets are then not on unseen pairs",
            report.removed,
            report.total,
            by_set,
        )
    return counted


def value_counts(values: Sequence[float] | np.ndarray) -> dict[str, int]:
    """``{"<value>": rows}`` in increasing order of value."""
    array = np.asarray(values, dtype=np.float64)
    return {f"{value:g}": int((array == value).sum()) for value in np.unique(array)}


def source_names(
    references: list[str], loaded: list[tuple[str, Dataset]]
) -> list[tuple[str, Dataset]]:
    """Each training set under its dataset name, or under its reference where two share a
    name (``snli:dev`` and ``snli:test``), so the summary and ``source`` keep them apart."""
    names = [name for name, _ in loaded]
    return [
        (name if names.count(name) == 1 else reference, dataset)
        for reference, (name, dataset) in zip(references, loaded, strict=True)
    ]


def build_dev_set(
    data_args: DataArguments, given: Dataset | DatasetDict | None = None
) -> tuple[str, Dataset] | None:
    """The dev set for model selection, or None when ``eval_dataset`` is empty/none;
    ``given`` (a ``Dataset``/``DatasetDict`` in memory, read with ``eval_columns``) replaces
    ``eval_dataset`` and is named ``dev``."""
    reference = data_args.eval_dataset if given is None else IN_MEMORY
    if not reference or (given is None and reference.lower() == "none"):
        return None
    name, dataset = load_reference(reference if given is None else given, "dev", data_args)
    if data_args.score_range:
        check_score_range(dataset, _score_range(data_args.score_range), reference)
        dataset = rescale_scores(dataset, _score_range(data_args.score_range))
    if data_args.max_eval_samples is not None:
        dataset = dataset.select(range(min(data_args.max_eval_samples, len(dataset))))
    _, split = split_reference(reference, "dev")
    label = f"{name}_{split}" if name in registry_names() else "dev"
    return label.replace("-", "_"), dataset


def _score_range(values: list[float]) -> tuple[float, float]:
    """``score_range`` as a tuple (DataArguments has checked it is [low, high], low < high)."""
    return float(values[0]), float(values[1])


def build_train_sets(
    data_args: DataArguments,
    method: Method,
    config: BaseConfig,
    loss_classes: Mapping[str, type[EmbeddingLoss]] | None = None,
) -> tuple[TrainDatasets, dict[str, Any]]:
    """``train_datasets`` as a mapping: each set loaded, filtered, mapped, rescaled and
    checked against its own loss (as :func:`build_train_dataset` does the list's, set by
    set; ``max_train_samples`` keeps at most N rows of each set), before any weights load.
    A problem is a ConfigError / DataError naming the set. Returns the sets (each carrying
    its loss class to the Trainer) and a summary (``datasets``: each set's path, loss,
    weight, prompts and rows); the run checks first that its Trainer can train them
    (:func:`~sts_core.training.run.check_trainer_for_datasets`). ``loss_classes``: the
    run's :func:`set_loss_classes` (resolved here when not given)."""
    specs = data_args.train_specs or ()
    if loss_classes is None:
        loss_classes = set_loss_classes(method, config, specs)
    built = [
        _build_train_set(spec, loss_classes[spec.name], data_args, method, config) for spec in specs
    ]
    sets = [train_set for train_set, _ in built]
    summary: dict[str, Any] = {
        "sources": {s.name: len(s.dataset) for s in sets},
        "train_pairs": sum(len(s.dataset) for s in sets),
        "datasets": {train_set.name: info for train_set, info in built},
    }
    return TrainDatasets(sets), summary


def set_loss_classes(
    method: Method, config: BaseConfig, specs: Sequence[TrainDatasetSpec]
) -> dict[str, type[EmbeddingLoss]]:
    """The loss class of each training set of the mapping, by set name
    (:func:`~sts_core.training.multi_dataset.set_loss_class`), resolved once for the run:
    the run checks them before any set loads, and the sets are built with them and carry
    them to the Trainer. ConfigError naming the set for an unknown loss."""
    from sts_core.training.parser import ConfigError

    classes: dict[str, type[EmbeddingLoss]] = {}
    for spec in specs:
        try:
            classes[spec.name] = set_loss_class(method, config, spec.loss)
        except ValueError as error:
            raise ConfigError(f"train_datasets: {spec.name}: {error}") from error
    return classes


def _build_train_set(
    spec: TrainDatasetSpec,
    loss_type: type[EmbeddingLoss],
    data_args: DataArguments,
    method: Method,
    config: BaseConfig,
) -> tuple[TrainSet, dict[str, Any]]:
    """One entry of the mapping, trained on ``loss_type``, loaded and checked (errors name
    it)."""
    from sts_core.training.parser import ConfigError

    where = f"train_datasets: {spec.name}"
    loss_name = spec.loss or method.loss_name(config)
    label_column = loss_label_column(config, loss_type)
    if spec.columns and split_reference(spec.path, "train")[0] in registry_names():
        raise ConfigError(
            f"{where}: columns is for tables, and {spec.path!r} is a registry dataset "
            "(its columns are the project's): drop columns"
        )
    reads = loss_reads(loss_type, label_column, config)
    _, dataset = load_reference(spec.path, "train", data_args, columns=spec.columns, reads=reads)
    info: dict[str, Any] = {"path": spec.path, "loss": loss_name, "weight": spec.weight}
    info["read"] = len(dataset)
    dataset = _prepare_set(dataset, data_args, label_column, loss_type, config, info, where)
    try:
        if spec.loss is None or spec.loss == method.loss_name(config):
            dataset, prepared = method.prepare_train_dataset(dataset, config)
            info.update(prepared)
            if len(dataset) == 0:
                raise ValueError("the training set is empty (after filtering)")
            method.check_train_dataset(dataset, config)
        else:
            if len(dataset) == 0:
                raise ValueError("the training set is empty (after filtering)")
            check_dataset_for_loss(dataset, loss_type, label_column, config)
        texts = [c for c in text_columns_with(loss_type.columns) if c in dataset.column_names]
        prompts = column_prompts(spec.prompt, texts)
    except ValueError as error:
        raise ConfigError(f"{where}: {' '.join(str(error).split())}") from error
    info.update(rows=len(dataset), label_column=label_column)
    if prompts:
        info["prompts"] = prompts
    train_set = TrainSet(
        spec.name, dataset, loss_name, spec.weight, prompts, label_column, loss_class=loss_type
    )
    return train_set, info


def _prepare_set(
    dataset: Dataset,
    data_args: DataArguments,
    label_column: str,
    loss_type: type[EmbeddingLoss],
    config: BaseConfig,
    info: dict[str, Any],
    where: str,
) -> Dataset:
    """A set's test-pair filter (or overlap count), label mapping, score rescaling and
    ``max_train_samples``, as the list form applies them to the concatenation."""
    reference = info["path"]
    reads_labels = loss_type.required_label_kind(config) is not None
    scored = label_column == "score" and reads_labels and "score" in dataset.column_names
    if data_args.score_range and scored:
        check_score_range(dataset, _score_range(data_args.score_range), reference)
    if is_pair_set(dataset):
        dataset = filter_or_count_test_pairs(dataset, data_args, info)
    label_mapping = _label_mapping(data_args)
    if label_mapping and reads_labels:
        dataset, _ = map_labels(dataset, label_column, label_mapping)
        info["label_mapping"] = value_counts(column_array(dataset, label_column))
    if data_args.score_range and scored:
        dataset = rescale_scores(dataset, _score_range(data_args.score_range))
    limit = data_args.max_train_samples
    if limit is not None and limit < len(dataset):
        logger.info("%s: max_train_samples keeps %d of %d rows", where, limit, len(dataset))
        dataset = dataset.shuffle(seed=config.seed).select(range(limit))
    return dataset


def final_evaluators(
    method: Method, data_args: DataArguments, config: BaseConfig
) -> dict[str, Any]:
    """An evaluator per ``final_eval_datasets`` reference, named by
    :func:`pair_set_labels` (its metrics ``<name>_spearman``, …): ``sts``, the dev evaluator
    (the method's :meth:`~sts_core.method.Method.build_evaluator`); ``classification``, a
    :class:`~sts_core.evaluation.pair_tasks.PairClassificationEvaluator` with the
    thresholds of ``threshold_dataset``; ``ranking``, a
    :class:`~sts_core.evaluation.pair_tasks.RankingEvaluator`. Built (and so checked)
    before training as well."""
    from sts_core.evaluation.pair_tasks import PairClassificationEvaluator, RankingEvaluator

    task = getattr(data_args, "final_eval_task", "sts")
    batch = config.per_device_eval_batch_size
    thresholds = None
    if task == "classification" and data_args.threshold_dataset:
        thresholds = _test_pairs(data_args.threshold_dataset, data_args)
    evaluators: dict[str, Any] = {}
    labels = pair_set_labels(data_args.final_eval_datasets)
    for reference in data_args.final_eval_datasets:
        dataset = _test_pairs(reference, data_args)
        label = labels[reference]
        if task == "classification":
            evaluators[reference] = PairClassificationEvaluator(
                dataset, thresholds, name=label, batch_size=batch, source=reference
            )
        elif task == "ranking":
            evaluators[reference] = RankingEvaluator(
                dataset, name=label, batch_size=batch, source=reference
            )
        else:
            evaluators[reference] = method.build_evaluator(label, dataset, config)
    return evaluators


def pair_set_labels(references: Sequence[str]) -> dict[str, str]:
    """Each final pair set's name, the start of its metric keys (``<name>_spearman``): a
    registry set's name and split (``stsb_test``), a file's stem (``pairs_test`` for
    ``/data/pairs_test.jsonl``), a folder's or hub id's last part (with the split a
    reference names: ``owner/set:test`` → ``set_test``); letters, digits and ``_`` only.
    A name an earlier reference took gets ``_2``, ``_3``, … (two ``pairs_test`` files in
    two folders: ``pairs_test`` and ``pairs_test_2``, in the order given)."""
    labels: dict[str, str] = {}
    for reference in references:
        base = label = _pair_set_label(reference)
        number = 2
        while label in labels.values():
            label, number = f"{base}_{number}", number + 1
        labels[reference] = label
    return labels


def _pair_set_label(reference: str) -> str:
    name, split = split_reference(reference, "test")
    if name in registry_names():
        label = f"{name}_{split}"
    else:
        where, named_split = reference, ""
        head, sep, tail = reference.rpartition(":")
        if sep and head and tail and "/" not in tail and not Path(reference).exists():
            where, named_split = head, tail  # a folder's or hub id's split
        path = Path(where)
        label = path.name if path.is_dir() or not path.suffix else path.stem
        label = f"{label}_{named_split}" if named_split else label
    return re.sub(r"\W+", "_", label).strip("_") or "pairs"


def _test_pairs(reference: str, data_args: DataArguments) -> Dataset:
    """The pair set a reference names (its test split by default), as the data options
    read it (``train_format`` is for the training sets: not applied)."""
    return load_reference(reference, "test", data_args)[1]
