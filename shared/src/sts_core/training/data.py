"""Build the training set and the dev evaluator from ``DataArguments``."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from datasets import Dataset

from sts_core.data import (
    DataConfigError,
    check_score_range,
    filter_test_overlap,
    load_test_sets,
    map_labels,
    merge_datasets,
    registry_names,
    rescale_scores,
    resolve_label_mapping,
    split_reference,
)
from sts_core.data import load_reference as _load_reference
from sts_core.training.config import DataArguments

logger = logging.getLogger(__name__)


def load_reference(
    reference: str, default_split: str, data_args: DataArguments
) -> tuple[str, Dataset]:
    """Load a recipe's dataset reference with ``data_args``' data folder, variant and SICK
    rescaling (see :func:`sts_core.data.load_reference`); ``train_format`` and ``columns``
    apply to the training sets (``default_split`` train), ``eval_columns`` to the others
    (a dev or test file's format is guessed from its name). A column mapping is for
    tables: registry names do not take it. ``score_range`` is checked in the tables of the
    training sets (unless ``label_mapping`` maps them first) and of the dev set, naming
    the file's column."""
    training = default_split == "train"
    columns = data_args.columns if training else data_args.eval_columns
    name, _ = split_reference(reference, default_split)
    if name in registry_names():
        columns = None
    checks_scores = (training and not data_args.label_mapping) or default_split == "dev"
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
    )


def build_train_dataset(
    data_args: DataArguments, seed: int = 42, label_column: str = "score"
) -> tuple[Dataset, dict[str, Any]]:
    """Load, merge, filter, map the labels of (``label_mapping`` on ``label_column``) and
    rescale the training sets; return them and a summary."""
    loaded = source_names(
        data_args.train_datasets,
        [load_reference(ref, "train", data_args) for ref in data_args.train_datasets],
    )
    summary: dict[str, Any] = {"sources": {name: len(ds) for name, ds in loaded}}
    if data_args.score_range:  # each file's rows, before the sets are merged and filtered
        check_train_scores(data_args, [ds for _, ds in loaded], label_column)
    if len(loaded) == 1:
        train = loaded[0][1]
    else:
        common = [
            c for c in loaded[0][1].column_names if all(c in ds.column_names for _, ds in loaded)
        ]
        train = merge_datasets(
            *(ds for _, ds in loaded), names=[n for n, _ in loaded], columns=common
        )
    if not {"sentence1", "sentence2"} <= set(train.column_names):
        logger.info("test-pair filter: not applied (the training set is not sentence pairs)")
        summary["filter"] = {"applied": False, "reason": "the training set is not pairs"}
    elif data_args.filter_test_overlap:
        train, report = filter_test_overlap(
            train, load_test_sets(data_args.data_dir, data_args.data_variant)
        )
        summary["filter"] = report.to_dict()
    else:
        overlap = count_test_overlap(train, data_args)
        if overlap is not None:
            summary["test_overlap"] = overlap
    if data_args.label_mapping:
        train, _ = map_labels(train, label_column, data_args.label_mapping)
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
        counts = value_counts(train[label_column])
        summary["label_mapping"] = {"column": label_column, "rows_per_value": counts}
        logger.info("label_mapping on %s: rows per new value %s", label_column, counts)
    summary["train_pairs"] = len(train)
    return train, summary


def check_train_scores(data_args: DataArguments, loaded: list[Dataset], label_column: str) -> None:
    """``score_range`` holds every training score it will rescale: each training set's
    scores (DataFormatError naming the file or dataset, the row and the column), or with
    ``label_mapping`` on the score column the values it maps to (DataConfigError)."""
    low, high = _score_range(data_args.score_range)
    if data_args.label_mapping and label_column == "score":  # every score becomes one of these
        resolved = resolve_label_mapping(data_args.label_mapping, label_column)
        outside = [f"{k:g} → {v:g}" for k, v in resolved.items() if not low <= v <= high]
        if outside:
            raise DataConfigError(
                f"label_mapping maps {', '.join(outside)}: outside score_range "
                f"[{low:g}, {high:g}], which the mapped scores are rescaled from"
            )
        return
    for reference, dataset in zip(data_args.train_datasets, loaded, strict=True):
        check_score_range(dataset, (low, high), reference)


def count_test_overlap(train: Dataset, data_args: DataArguments) -> dict[str, Any] | None:
    """With the test-pair filter off: how many training pairs also occur (either order) in
    the seven STS test sets, by test set (logged as a warning when any do). None when the
    training set has no pairs or the test sets cannot be read (logged)."""
    if not {"sentence1", "sentence2"} <= set(train.column_names):
        return None
    try:
        test_sets = load_test_sets(data_args.data_dir, data_args.data_variant)
    except (OSError, ValueError) as error:  # no benchmark folder: training from hub ids
        logger.info("test-pair overlap not counted (the test sets cannot be read: %s)", error)
        return None
    _, report = filter_test_overlap(train, test_sets, log=False)
    counted = {
        "pairs": report.removed,
        "of": report.total,
        "by_test_set": {k: v for k, v in report.removed_by_source.items() if v},
    }
    if report.removed:
        by_set = ", ".join(f"{k}: {v}" for k, v in counted["by_test_set"].items())
        logger.warning(
            "filter_test_overlap is off: %d of %d training pairs also occur in the STS test "
            "sets (%s); scores on those sets are then not on unseen pairs",
            report.removed,
            report.total,
            by_set,
        )
    return counted


def value_counts(values: list[float]) -> dict[str, int]:
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


def build_dev_set(data_args: DataArguments) -> tuple[str, Dataset] | None:
    """The dev set for model selection, or None when ``eval_dataset`` is empty/none."""
    reference = data_args.eval_dataset
    if not reference or reference.lower() == "none":
        return None
    name, dataset = load_reference(reference, "dev", data_args)
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
