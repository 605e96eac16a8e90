"""Training on a stream of table shards (``streaming: true``, or a folder of table files).

The training tables are read shard by shard — a shard is one table file: each file named
in ``train_datasets``, or each ``.csv``/``.tsv``/``.json``/``.jsonl``/``.parquet`` file of
a folder named there, in name order — through a ``datasets.IterableDataset``. Each shard is
read and checked as a table file is (:func:`~sts_core.training.data.load_reference`: the
column mapping, every value checked, the same messages naming the shard's file, row and
column), then filtered (``filter_test_overlap``), mapped (``label_mapping``) and rescaled
(``score_range``) as the whole table would be, checked by the method, and its rows handed
out; its checked copy is removed once its rows are read. So neither the table nor a copy
of it is held in memory or on disk, and training starts once the first shard is read.

The first shard is read before training, so that a bad layout, column or value there
stops the run before the weights load (``check_only`` reads only it); the others are
checked as training reaches them, and a bad row stops the run with its file, row and
column, nothing saved as complete. ``shuffle_buffer`` rows are shuffled in a buffer
filled from one shard at a time (``IterableDataset.shuffle``; the shards' order is
shuffled too, again at every pass),
seeded by ``data_seed`` (else ``seed``). A stream has no length: ``max_steps`` says how
long to train, and a pass that ends starts the next.

On several processes, accelerate splits the stream by rank: by shards when there are at
least as many as processes (each process reads its own files), else every process reads
the stream and trains on its slice of each global batch — the rows one process would train
on with the global batch. The run sets ``accelerator_config.dispatch_batches`` to false for
this (unless the recipe sets it), so that each process reads and checks its own rows.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset, IterableDataset

from sts_core.data import (
    filter_test_overlap,
    load_test_sets,
    map_labels,
    registry_names,
    rescale_scores,
    split_reference,
)
from sts_core.data.scratch import scratch_folder
from sts_core.data.tables import TABLE_SUFFIXES, is_saved_dataset
from sts_core.method import Method
from sts_core.training.data import (
    _label_mapping,
    _score_range,
    is_pair_set,
    load_reference,
    method_reads,
)
from sts_core.training.parser import ConfigError

if TYPE_CHECKING:
    from sts_core.training.config import BaseConfig, DataArguments

logger = logging.getLogger(__name__)

__all__ = ["StreamReading", "check_streaming", "streams", "stream_train_dataset", "table_shards"]


def is_shard_folder(reference: str) -> bool:
    """Whether a ``train_datasets`` entry is a local folder of table files (not a registry
    dataset, not a ``save_to_disk`` folder)."""
    if split_reference(reference, "train")[0] in registry_names():
        return False
    path = Path(reference).expanduser()
    return path.is_dir() and not is_saved_dataset(path)


def streams(data_args: DataArguments) -> bool:
    """Whether the run trains on a stream: ``streaming: true``, or a ``train_datasets``
    entry of the list form that is a folder of table files."""
    if data_args.streaming:
        return True
    return data_args.train_specs is None and any(
        is_shard_folder(str(reference)) for reference in data_args.train_datasets
    )


def table_shards(reference: str) -> list[Path]:
    """The shards of one ``train_datasets`` entry: the file itself, or the table files of
    the folder in name order (ConfigError naming the entry when it is neither, or the
    folder holds none)."""
    if split_reference(reference, "train")[0] in registry_names():
        raise ConfigError(
            f"streaming: {reference!r} is a registry dataset; streaming reads local table "
            "files and folders of them"
        )
    path = Path(reference).expanduser()
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ConfigError(
            f"streaming: {reference!r} is not a local file or folder; streaming reads local "
            "table files and folders of them (a hub dataset: download it first)"
        )
    if is_saved_dataset(path):
        raise ConfigError(
            f"streaming: {path} is a save_to_disk folder, which is read memory-mapped without "
            "streaming: drop streaming"
        )
    shards = sorted(p for p in path.iterdir() if p.is_file() and _is_table(p))
    if not shards:
        raise ConfigError(
            f"streaming: folder {path} holds no table file (ending in {', '.join(TABLE_SUFFIXES)})"
        )
    return shards


def _is_table(path: Path) -> bool:
    return path.suffix.lower() in TABLE_SUFFIXES


def check_streaming(
    method: Method, data_args: DataArguments, config: BaseConfig, given: Any = None
) -> None:
    """What a stream cannot do (ConfigError naming the option): it has no length, so
    ``max_steps`` must say how long to train; the options that need the whole training set
    at once are refused (several sets, ``max_train_samples``, ``batch_sampler:
    no_duplicates``, a teacher, a method that prepares the set as a whole or builds its own
    batches, a set given in memory)."""
    from sts_core.training.trainer import builds_own_batches

    why = "streaming (a folder of table files streams)" if not data_args.streaming else "streaming"
    refusals = {
        "train_datasets as a mapping of training sets": data_args.train_specs is not None,
        "a training set given in memory": given is not None,
        "max_train_samples": data_args.max_train_samples is not None,
        "batch_sampler no_duplicates": config.batch_sampler != "default",
        "teacher_model": bool(config.teacher_model),
        f"method {method.name}, which prepares its training set as a whole "
        "(prepare_train_dataset)": type(method).prepare_train_dataset
        is not Method.prepare_train_dataset,
        f"method {method.name}, which builds its own batches": builds_own_batches(method, config),
    }
    for what, refused in refusals.items():
        if refused:
            raise ConfigError(f"{why} trains on rows as they are read: not with {what}")
    if config.max_steps <= 0:
        raise ConfigError(
            f"{why}: a stream has no length, so set max_steps (the optimizer steps to train)"
        )


@dataclass
class StreamReading:
    """How the shards of a stream are read: as the run reads a training table, for the
    run's method and loss."""

    data_args: DataArguments
    config: BaseConfig
    method: Method
    label_column: str
    reads: str | None
    columns: list[str] = field(default_factory=list)  # the first shard's
    _test_sets: dict[str, Dataset] | None = None

    def read(self, shard: Path) -> Dataset:
        """One shard, read, checked, filtered, mapped and rescaled (DataError naming its
        file; ConfigError naming it when the method refuses it or its columns are not the
        first shard's)."""
        data_args = self.data_args
        _, dataset = load_reference(str(shard), "train", data_args, reads=self.reads)
        if data_args.filter_test_overlap and is_pair_set(dataset):
            dataset, _ = filter_test_overlap(dataset, self.test_sets())
        if label_mapping := _label_mapping(data_args):
            dataset, _ = map_labels(dataset, self.label_column, label_mapping)
        if data_args.score_range:
            dataset = rescale_scores(dataset, _score_range(data_args.score_range))
        if self.columns and dataset.column_names != self.columns:
            raise ConfigError(
                f"streaming: shard {shard} has the columns {dataset.column_names}, the first "
                f"shard {self.columns}: every shard needs the same columns"
            )
        if len(dataset):
            try:
                self.method.check_train_dataset(dataset, self.config)
            except ValueError as error:
                raise ConfigError(f"streaming: shard {shard}: {error}") from error
        return dataset

    def test_sets(self) -> dict[str, Dataset]:
        """The STS test sets the filter removes (read once)."""
        if self._test_sets is None:
            self._test_sets = load_test_sets(self.data_args.data_dir, self.data_args.data_variant)
        return self._test_sets

    def rows(self, shards: Sequence[str]) -> Iterator[dict[str, Any]]:
        """The rows of ``shards`` in order, each shard read as :meth:`read` reads it and
        its checked copy removed after its last row."""
        for shard in shards:
            dataset = self.read(Path(shard))
            try:
                yield from dataset
            finally:
                remove_scratch_files(dataset)


def remove_scratch_files(dataset: Dataset) -> None:
    """Remove the folders of this process's scratch folder that hold ``dataset``'s files
    (what the run wrote while it read the table; nothing else)."""
    scratch = scratch_folder().resolve()
    for cache in dataset.cache_files:
        folder = Path(cache["filename"]).resolve().parent
        if folder.parent == scratch:
            shutil.rmtree(folder, ignore_errors=True)


def stream_train_dataset(
    method: Method, data_args: DataArguments, config: BaseConfig
) -> tuple[IterableDataset, dict[str, Any]]:
    """The training stream (rows of every shard, shuffled in a buffer of
    ``shuffle_buffer`` rows) and its summary; the first shard read and checked now."""
    label_column, reads = method_reads(method, config)
    shards = [shard for ref in data_args.train_datasets for shard in table_shards(str(ref))]
    reading = StreamReading(data_args, config, method, label_column, reads)
    first = reading.read(shards[0])
    if len(first) == 0:
        raise ConfigError(f"streaming: the first shard {shards[0]} has no rows (after filtering)")
    reading.columns = first.column_names
    features = first.features
    remove_scratch_files(first)
    stream = IterableDataset.from_generator(
        reading.rows, gen_kwargs={"shards": [str(s) for s in shards]}, features=features
    )
    if data_args.shuffle_buffer:
        seed = config.data_seed if config.data_seed is not None else config.seed
        # one shard read at a time (datasets would fill the buffer from up to ten at once,
        # each of them read and checked whole before its first row)
        stream = stream.shuffle(
            seed=seed, buffer_size=data_args.shuffle_buffer, max_buffer_input_shards=1
        )
    summary: dict[str, Any] = {
        "sources": {str(ref): "stream" for ref in data_args.train_datasets},
        "train_pairs": None,
        "streaming": {
            "shards": len(shards),
            "first_shard": {"path": str(shards[0]), "rows": len(first)},
            "shuffle_buffer": data_args.shuffle_buffer,
        },
    }
    logger.info(
        "streaming: %d shard(s), the first (%s) %d rows; shuffle buffer %d rows",
        len(shards),
        shards[0],
        len(first),
        data_args.shuffle_buffer,
    )
    return stream, summary
