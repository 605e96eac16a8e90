"""Several training sets in one run, as sentence-transformers' trainer takes a dict of
datasets and a dict of losses: ``train_datasets`` as a mapping

.. code-block:: yaml

    train_datasets:
      pairs: {path: data/pairs.tsv, loss: cosine_mse}
      nli: {path: data/nli.csv, loss: infonce, weight: 0.5, prompt: "query: "}

Each entry names a training set (``path``: a registry name, ``name:split`` or a file, as
in the list form), the registered loss trained on its batches (``loss``; default: the
method's, built as the run builds it), a multiplier of that loss (``weight``, default 1:
the set's batches train on ``weight · loss``; it does not change how often the set is
drawn, which is ``multi_dataset_sampler``'s), a prompt put before its texts (``prompt``:
one string for every text column, or ``{column: prompt}``) and a ``columns`` mapping
passed to the data loader. Every batch comes from one set
(:mod:`sts_core.training.batch_plan`).

This module parses the mapping once (:func:`read_train_datasets`, called by
``DataArguments``, which keeps the sets' typed specs as ``train_specs`` for the run) and
holds the loaded sets for the Trainer (:class:`TrainDatasets`:
one index space over the concatenated sets; each row carries its set's name under
:data:`DATASET_NAME_KEY`, which the collator passes on to ``compute_loss``).
"""

from __future__ import annotations

import difflib
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sts_core.losses import EmbeddingLoss
    from sts_core.method import Method
    from sts_core.training.config import BaseConfig

#: the keys of an entry of the mapping
SPEC_KEYS = ("path", "loss", "weight", "prompt", "columns")
#: the key of a row (and of a collated batch) holding its training set's name
DATASET_NAME_KEY = "dataset_name"


@dataclass(frozen=True)
class TrainDatasetSpec:
    """One entry of ``train_datasets`` as a mapping (see the module docstring)."""

    name: str
    path: str
    loss: str | None = None
    weight: float = 1.0
    prompt: str | dict[str, str] | None = None
    columns: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in SPEC_KEYS}


def parse_train_datasets(value: Any) -> list[str] | dict[str, dict[str, Any]]:
    """``train_datasets`` as the recipe or the command line gives it, as the option's value
    (:func:`read_train_datasets`'s first part): a list of references, or
    ``{name: {key: value}}`` with every key."""
    return read_train_datasets(value)[0]


def read_train_datasets(
    value: Any,
) -> tuple[list[str] | dict[str, dict[str, Any]], tuple[TrainDatasetSpec, ...] | None]:
    """``train_datasets`` as the recipe or the command line gives it — a list of
    references, or a mapping ``name: {path, loss, weight, prompt, columns}`` (a YAML
    mapping, or its JSON text on the command line; an entry may be a path alone) — parsed
    once into the option's value (the list kept as it is; the mapping as
    ``{name: {key: value}}`` with every key, what a checkpoint records) and the sets'
    specs (None for a list), which ``DataArguments`` keeps as ``train_specs`` for the run.
    ValueError naming the entry and the key."""
    mapping = _as_mapping(value)
    if mapping is None:
        return list(value), None
    if not mapping:
        raise ValueError("train_datasets is an empty mapping: name at least one training set")
    specs = tuple(_spec(str(name), entry) for name, entry in mapping.items())
    return {spec.name: spec.to_dict() for spec in specs}, specs


def _as_mapping(value: Any) -> dict[str, Any] | None:
    """The mapping ``value`` holds (argparse wraps a recipe's mapping in a list; a command
    line gives its JSON text), or None for a list of references."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, list | tuple) and len(value) == 1:
        item = value[0]
        if isinstance(item, Mapping):
            return dict(item)
        if isinstance(item, str) and item.lstrip().startswith("{"):
            try:
                parsed = json.loads(item)
            except ValueError as error:
                raise ValueError(f"train_datasets is not a JSON mapping: {error}") from error
            if isinstance(parsed, dict):
                return parsed
    if isinstance(value, list | tuple) and any(isinstance(v, Mapping) for v in value):
        raise ValueError(
            "train_datasets: give a list of references or one mapping name: {path, loss, "
            "weight, prompt, columns}, not a list of mappings"
        )
    return None


def _spec(name: str, entry: Any) -> TrainDatasetSpec:
    where = f"train_datasets: {name}"
    if not name.strip():
        raise ValueError("train_datasets: a training set's name is empty")
    if isinstance(entry, str):
        entry = {"path": entry}
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where}: expected a path or a mapping of {', '.join(SPEC_KEYS)}")
    unknown = [key for key in entry if key not in SPEC_KEYS]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), SPEC_KEYS, 1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"{where}: unknown key {unknown[0]!r}{hint}; an entry has {', '.join(SPEC_KEYS)}"
        )
    path = entry.get("path")
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"{where}: path is required (a registry name, name:split or a file)")
    loss = entry.get("loss")
    if loss is not None and (not isinstance(loss, str) or not loss.strip()):
        raise ValueError(f"{where}: loss must be a registered loss name, got {loss!r}")
    return TrainDatasetSpec(
        name=name,
        path=path,
        loss=loss,
        weight=_weight(where, entry.get("weight", 1.0)),
        prompt=_prompt(where, entry.get("prompt")),
        columns=_string_mapping(f"{where}: columns", entry.get("columns")),
    )


def _weight(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{where}: weight must be a number above 0, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where}: weight must be finite and > 0, got {value}")
    return float(value)


def _prompt(where: str, value: Any) -> str | dict[str, str] | None:
    if value is None or isinstance(value, str):
        return value or None
    return _string_mapping(f"{where}: prompt", value)


def _string_mapping(where: str, value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{where}: expected a mapping of column names to strings, got {value!r}")
    return dict(value)


def train_references(train_datasets: Any) -> list[str]:
    """The references (paths, registry names) ``train_datasets`` (parsed) names, in either
    form."""
    if isinstance(train_datasets, Mapping):
        return [entry["path"] for entry in train_datasets.values()]
    return list(train_datasets)


def column_prompts(
    prompt: str | Mapping[str, str] | None, text_columns: Sequence[str]
) -> dict[str, str]:
    """The prompt of each text column: one string for all of ``text_columns``, or the
    mapping's (ValueError for a column the set does not have)."""
    if prompt is None:
        return {}
    if isinstance(prompt, str):
        return dict.fromkeys(text_columns, prompt)
    missing = [column for column in prompt if column not in text_columns]
    if missing:
        raise ValueError(
            f"prompt names the column {missing[0]!r}, which is not a text column of the set "
            f"(it has {', '.join(text_columns)})"
        )
    return dict(prompt)


def set_loss_class(method: Method, config: BaseConfig, name: str | None) -> type[EmbeddingLoss]:
    """The loss class of a set whose entry names ``name``: the method's loss as the run
    builds it (with ``loss_weights`` when set) for None or the method's ``loss``, else the
    registered loss ``name`` (ValueError naming the registered ones when unknown); with
    ``matryoshka_dims``, Matryoshka over either."""
    from sts_core.losses import loss_class
    from sts_core.losses.matryoshka import with_matryoshka

    if name is None or name == method.loss_name(config):
        return method.loss_class(config)
    return with_matryoshka(loss_class(name), config)


@dataclass
class TrainSet:
    """A loaded training set of the mapping: its rows, the loss its batches train on (a
    registered name), the loss's multiplier, the prompt of each text column, the column
    its loss reads as labels and the loss's class as the run resolved it (None: the
    Trainer resolves ``loss`` itself, for a set built by hand)."""

    name: str
    dataset: Any
    loss: str
    weight: float = 1.0
    prompts: dict[str, str] = field(default_factory=dict)
    label_column: str = "score"
    loss_class: Any = None


def training_prompts(
    sets: Sequence[TrainSet], text_columns: Sequence[str]
) -> tuple[dict[str, str], str | None]:
    """The prompts of a run's sets as the saved folder records them (sentence-transformers'
    ``prompts`` and ``default_prompt_name``): a set whose text columns share one prompt
    gives ``{<set>: prompt}``, one with a prompt by column ``{<set>_<column>: prompt}``.
    The default is the one prompt every text column of every set was trained with; None
    when the sets or columns differ (``encode`` then takes ``prompt_name``).
    ``text_columns``: the columns the trainer reads as text."""
    prompts: dict[str, str] = {}
    every: set[str | None] = set()
    for train_set in sets:
        texts = [c for c in text_columns if c in train_set.dataset.column_names]
        values = [train_set.prompts.get(column) for column in texts]
        every.update(values)
        given = {column: p for column, p in train_set.prompts.items() if p}
        if len(set(given.values())) == 1 and len(given) == len(texts):
            prompts[train_set.name] = next(iter(given.values()))
        else:
            prompts.update({f"{train_set.name}_{c}": p for c, p in given.items()})
    if len(every) == 1 and None not in every and prompts:
        (text,) = every
        return prompts, next(name for name, p in prompts.items() if p == text)
    return prompts, None


class TrainDatasets:
    """The training sets of a mapping as one dataset for the Trainer: index ``i`` is row
    ``i − offset_k`` of set ``k`` (the sets concatenated in the recipe's order); a row is
    its set's row plus :data:`DATASET_NAME_KEY`."""

    def __init__(self, sets: Sequence[TrainSet]) -> None:
        if not sets:
            raise ValueError("TrainDatasets needs at least one training set")
        self.sets = list(sets)
        self.by_name = {train_set.name: train_set for train_set in self.sets}
        self.sizes = [len(train_set.dataset) for train_set in self.sets]
        self.starts = [sum(self.sizes[:k]) for k in range(len(self.sizes))]

    @property
    def names(self) -> list[str]:
        return [train_set.name for train_set in self.sets]

    def __len__(self) -> int:
        return sum(self.sizes)

    def locate(self, index: int) -> tuple[TrainSet, int]:
        """The set of a concatenated index and the row within it."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} rows")
        k = max(j for j, start in enumerate(self.starts) if start <= index)
        return self.sets[k], index - self.starts[k]

    def __getitem__(self, index: int | str) -> Any:
        if isinstance(index, str):  # a column: each set's values, concatenated
            return [value for train_set in self.sets for value in train_set.dataset[index]]
        train_set, row = self.locate(int(index))
        return {**train_set.dataset[row], DATASET_NAME_KEY: train_set.name}

    def __getitems__(self, indices: list[int]) -> list[dict[str, Any]]:
        """The rows of a batch (torch's fetcher asks for them at once): one read per set."""
        located = [self.locate(int(i)) for i in indices]
        rows: list[dict[str, Any]] = [{} for _ in indices]
        for train_set in {id(s): s for s, _ in located}.values():
            positions = [p for p, (s, _) in enumerate(located) if s is train_set]
            columns = train_set.dataset[[located[p][1] for p in positions]]
            for n, p in enumerate(positions):
                rows[p] = {key: values[n] for key, values in columns.items()}
                rows[p][DATASET_NAME_KEY] = train_set.name
        return rows

    @property
    def column_names(self) -> list[str]:
        """The columns of every set (what a row of any set has)."""
        columns = [set(s.dataset.column_names) for s in self.sets]
        return [c for c in self.sets[0].dataset.column_names if all(c in cs for cs in columns)]
