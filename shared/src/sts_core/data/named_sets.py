"""Named datasets: where each lives under the data folder, and how to read it.

The data folder is the ``data_dir`` argument, else the ``STS_DATA_DIR`` environment
variable (the layout of ``../shared/data``, see its README). Without either, the
datasets that have a hub id are fetched from the Hugging Face hub, unless
``HF_HUB_OFFLINE`` is set.

``variant`` picks a layout for datasets that have several: ``"senteval"`` (the
default; SentEval's tokenized files) or ``"raw"`` (the official releases) for
sts12-16, stsb, sickr and snli; ``"senteval"`` / ``"sentence-level"`` for sst2;
``"wiki1m"`` / ``"wikisplit"`` for wiki. Datasets with one layout ignore the
default variant. Split names: ``train``, ``dev``, ``test`` (``valid``,
``validation`` and ``trial`` are accepted for ``dev``); mnli has ``dev_matched``
and ``dev_mismatched``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset

from . import hub as _hub
from ._io import PathLike, ScoreRange, logger
from .errors import DataConfigError, DataFileNotFoundError, DataFormatError
from .formats import TABLE_FORMATS, read_path
from .hub import HubSource, hub_offline, load_from_hub
from .nli import read_nli_csv, read_nli_senteval, read_nli_triplets
from .readers import (
    read_cosent_tsv,
    read_mrpc,
    read_quora,
    read_sentences,
    read_senteval_sts,
    read_sick,
    read_sst,
    read_stsb_csv,
    read_wikiqa,
)
from .tables import READ, TableReading, is_saved_dataset, load_hub_table, looks_like_hub_id

__all__ = [
    "DEFAULT_VARIANT",
    "DatasetSpec",
    "Layout",
    "data_location",
    "get_spec",
    "list_datasets",
    "load_named",
    "load_pairs",
    "resolve_data_dir",
]

ENV_VAR = "STS_DATA_DIR"
DEFAULT_VARIANT = "senteval"
SPLIT_ALIASES = {"valid": "dev", "validation": "dev", "trial": "dev"}
_NO_DATA_DIR = f"no data folder: set {ENV_VAR} or pass --data-dir (data_dir=...)"


@dataclass(frozen=True)
class Layout:
    """One on-disk layout of a dataset: a reader and, per split, a path under the data folder."""

    reader: Callable[..., Dataset]
    paths: Mapping[str, str]
    split_kwargs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def read(self, root: Path, split: str) -> Dataset:
        """Read ``split`` from the data folder ``root``."""
        return self.reader(root / self.paths[split], **self.split_kwargs.get(split, {}))


@dataclass(frozen=True)
class DatasetSpec:
    """A registry entry.

    Attributes:
        name: registry name (``"stsb"``).
        description: one line saying what it is.
        splits: splits available in the default variant's layout.
        variants: layout names; the first is the default.
        hub_id: Hugging Face dataset id used when no data folder is configured.
        layouts: variant -> :class:`Layout`.
        hub: how to map the hub dataset onto our columns.
    """

    name: str
    description: str
    splits: tuple[str, ...]
    variants: tuple[str, ...]
    hub_id: str | None = None
    layouts: Mapping[str, Layout] = field(default_factory=dict, repr=False)
    hub: HubSource | None = field(default=None, repr=False)


def _spec(
    name: str, description: str, layouts: dict[str, Layout], hub: HubSource | None = None
) -> DatasetSpec:
    """Build a spec, deriving splits and variants from the layouts."""
    first = next(iter(layouts.values()))
    hub_id = hub.repo_id if hub else None
    return DatasetSpec(name, description, tuple(first.paths), tuple(layouts), hub_id, layouts, hub)


def _sts_year(year: int, raw_dir: str) -> DatasetSpec:
    """STS12-16: test split only, SentEval and raw layouts, MTEB hub copy."""
    layouts = {
        "senteval": Layout(read_senteval_sts, {"test": f"senteval/STS/STS{year}-en-test"}),
        "raw": Layout(read_senteval_sts, {"test": f"raw/sts12-16/{raw_dir}"}),
    }
    hub = HubSource(f"mteb/sts{year}-sts", {"test": "test"})
    return _spec(f"sts{year}", f"SemEval STS 20{year} English test (0-5)", layouts, hub)


def _split_files(pattern: str, splits: Mapping[str, str]) -> dict[str, str]:
    """``{split: pattern.format(name)}`` for each split's file name part."""
    return {split: pattern.format(part) for split, part in splits.items()}


_TDT = {"train": "train", "dev": "dev", "test": "test"}
_SICK = {"train": "train", "dev": "trial", "test": "test_annotated"}
_DT = {"dev": "valid", "test": "test"}
_NLI_COLUMNS = {"premise": "sentence1", "hypothesis": "sentence2"}
_MNLI = {"dev_matched": "matched", "dev_mismatched": "mismatched"}
_HUB_VALIDATION = {"train": "train", "dev": "validation", "test": "test"}


def _chinese(
    name: str,
    folder: str,
    description: str,
    score_range: ScoreRange,
    splits: Mapping[str, str] = _DT,
    hub: HubSource | None = None,
) -> DatasetSpec:
    """A CoSENT-format Chinese dataset."""
    reader = functools.partial(read_cosent_tsv, score_range=score_range)
    paths = _split_files(f"chinese/{folder}/{folder}.{{}}.data", splits)
    return _spec(name, description, {"default": Layout(reader, paths)}, hub)


def _single(
    name: str,
    description: str,
    reader: Callable[..., Dataset],
    paths: dict[str, str],
    hub: HubSource | None = None,
) -> DatasetSpec:
    """A dataset with a single layout."""
    return _spec(name, description, {"default": Layout(reader, paths)}, hub)


def _two_layouts(
    name: str,
    description: str,
    reader: Callable[..., Dataset],
    senteval: str,
    raw: str,
    splits: Mapping[str, str],
    hub: HubSource | None = None,
) -> DatasetSpec:
    """A dataset with SentEval and raw layouts read by the same reader."""
    layouts = {
        "senteval": Layout(reader, _split_files(senteval, splits)),
        "raw": Layout(reader, _split_files(raw, splits)),
    }
    return _spec(name, description, layouts, hub)


def _snli() -> DatasetSpec:
    """SNLI dev/test: SentEval's s1/s2/labels files or the official CSV."""
    layouts = {
        "senteval": Layout(
            read_nli_senteval,
            {"dev": "nli/snli-devtest", "test": "nli/snli-devtest"},
            {"dev": {"split": "dev"}, "test": {"split": "test"}},
        ),
        "raw": Layout(
            read_nli_csv,
            _split_files("nli/snli-devtest-raw/snli_1.0_{}.csv", {"dev": "dev", "test": "test"}),
        ),
    }
    hub = HubSource(
        "stanfordnlp/snli", {"dev": "validation", "test": "test"}, columns=_NLI_COLUMNS, nli=True
    )
    description = "SNLI dev/test (entailment 2.0 > neutral 1.0 > contradiction 0.0)"
    return _spec("snli", description, layouts, hub)


def _mnli() -> DatasetSpec:
    """MultiNLI dev, matched and mismatched."""
    paths = _split_files("nli/mnli-dev/multinli_1.0_dev_{}.goldonly.csv", _MNLI)
    hub_splits = {"dev_matched": "validation_matched", "dev_mismatched": "validation_mismatched"}
    hub = HubSource("nyu-mll/multi_nli", hub_splits, columns=_NLI_COLUMNS, nli=True)
    description = "MultiNLI dev, matched and mismatched (gold-labelled rows)"
    return _single("mnli", description, read_nli_csv, paths, hub)


def _english_sts() -> list[DatasetSpec]:
    """STS12-16, STS-B and SICK-R."""
    years = {12: "2012-en-test-gold", 13: "2013-en-test-gs", 14: "2014-en-test-gs"}
    years |= {15: "2015-en-test-gs", 16: "2016-en-test-gs"}
    specs = [_sts_year(year, f"STS{raw}") for year, raw in years.items()]
    stsb_hub = HubSource("sentence-transformers/stsb", _HUB_VALIDATION, score_scale=5.0)
    specs.append(
        _two_layouts(
            "stsb",
            "STS Benchmark (0-5)",
            read_stsb_csv,
            "senteval/STS/STSBenchmark/sts-{}.csv",
            "raw/stsbenchmark/sts-{}.csv",
            _TDT,
            stsb_hub,
        )
    )
    specs.append(
        _two_layouts(
            "sickr",
            "SICK relatedness (1-5) with entailment labels",
            read_sick,
            "senteval/SICK/SICK_{}.txt",
            "raw/SICK/SICK_{}.txt",
            _SICK,
            HubSource("mteb/sickr-sts", {"test": "test"}),
        )
    )
    return specs


def _chinese_specs() -> list[DatasetSpec]:
    """CoSENT's Chinese sets."""
    binary = (0.0, 1.0)
    stsb_zh_hub = HubSource("C-MTEB/STSB", _HUB_VALIDATION)
    return [
        _chinese("atec", "ATEC", "ATEC (Chinese, 0/1)", binary),
        _chinese("bq", "BQ", "BQ corpus (Chinese, 0/1)", binary),
        _chinese("lcqmc", "LCQMC", "LCQMC (Chinese, 0/1)", binary),
        _chinese("pawsx", "PAWSX", "PAWS-X Chinese (0/1)", binary),
        _chinese(
            "stsb-zh",
            "STS-B",
            "STS-B Chinese (0-5)",
            (0.0, 5.0),
            {"train": "train", **_DT},
            stsb_zh_hub,
        ),
    ]


def _other_specs() -> list[DatasetSpec]:
    """Pair classification, sentiment and unlabelled sentences."""
    sst = {
        "senteval": Layout(read_sst, _split_files("sst/binary/sentiment-{}", _TDT)),
        "sentence-level": Layout(read_sst, _split_files("sst/sentence-level/stsa.binary.{}", _TDT)),
    }
    wiki = {
        "wiki1m": Layout(read_sentences, {"train": "wiki/wiki1m_first11914.txt"}),
        "wikisplit": Layout(read_sentences, {"train": "wiki/wikisplit_sentences.txt"}),
    }
    mrpc = _split_files("pairwise/mrpc/msr_paraphrase_{}.txt", {"train": "train", "test": "test"})
    quora = _split_files("pairwise/quora-devtest/{}.txt", {"dev": "dev", "test": "test"})
    return [
        _single(
            "nli-triplets",
            "SimCSE supervised triplets (premise, entailed, contradicting)",
            read_nli_triplets,
            {"train": "nli/triplets/nli_triplets.csv"},
        ),
        _single("mrpc", "Microsoft Research paraphrase corpus (0/1)", read_mrpc, mrpc),
        _single(
            "wikiqa",
            "WikiQA answer selection (0/1, query_id groups)",
            read_wikiqa,
            _split_files("pairwise/wikiqa/{}.txt", _TDT),
        ),
        _single("quora", "Quora question pairs, BiMPM split (0/1)", read_quora, quora),
        _spec("sst2", "Stanford Sentiment Treebank, binary (sentence, label)", sst),
        _spec("wiki", "Unlabelled Wikipedia sentences (sentence)", wiki),
    ]


def _build_registry() -> dict[str, DatasetSpec]:
    """All registry entries, by name."""
    specs = [*_english_sts(), _snli(), _mnli(), *_chinese_specs(), *_other_specs()]
    return {spec.name: spec for spec in specs}


REGISTRY: dict[str, DatasetSpec] = _build_registry()


def list_datasets() -> list[DatasetSpec]:
    """Every registry entry, in registry order."""
    return list(REGISTRY.values())


def get_spec(name: str) -> DatasetSpec:
    """The registry entry ``name``; an unknown name is an error listing the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(REGISTRY)
        raise DataConfigError(f"unknown dataset {name!r}; known datasets: {known}") from None


def resolve_data_dir(data_dir: PathLike | None = None) -> Path:
    """The data folder: ``data_dir``, else ``$STS_DATA_DIR``; an error when neither is
    given or the folder does not exist."""
    path = _optional_data_dir(data_dir)
    if path is None:
        raise DataConfigError(_NO_DATA_DIR)
    return path


def _optional_data_dir(data_dir: PathLike | None) -> Path | None:
    """Like :func:`resolve_data_dir` but ``None`` when no folder is configured at all."""
    raw = os.fspath(data_dir) if data_dir is not None else os.environ.get(ENV_VAR, "")
    if not raw:
        return None
    path = Path(raw).expanduser()
    origin = "data_dir" if data_dir is not None else ENV_VAR
    if path.exists() and not path.is_dir():
        raise DataFormatError(path, f"data folder given by {origin} is not a folder")
    if not path.is_dir():
        raise DataFileNotFoundError(path, f"data folder given by {origin} does not exist")
    return path


def _resolve_variant(spec: DatasetSpec, variant: str) -> str:
    """The layout to use; the default variant falls back to a dataset's own default."""
    if variant in spec.variants:
        return variant
    if variant == DEFAULT_VARIANT:
        return spec.variants[0]
    known = ", ".join(spec.variants)
    raise DataConfigError(f"dataset {spec.name!r} has no variant {variant!r}; variants: {known}")


def _resolve_split(spec: DatasetSpec, layout: Layout, split: str) -> str:
    """The split name, with aliases (valid/validation/trial -> dev)."""
    if split not in layout.paths and SPLIT_ALIASES.get(split) in layout.paths:
        split = SPLIT_ALIASES[split]
    if split not in layout.paths:
        known = ", ".join(layout.paths)
        raise DataConfigError(f"dataset {spec.name!r} has no split {split!r}; splits: {known}")
    return split


def _load_hub(spec: DatasetSpec, split: str) -> Dataset:
    """The hub fallback, or an error saying how to point at local data."""
    if spec.hub is None or split not in spec.hub.splits:
        raise DataConfigError(f"{spec.name} ({split}) has no hub copy: {_NO_DATA_DIR}")
    if hub_offline():
        raise DataConfigError(f"{spec.name}: {_NO_DATA_DIR} (HF_HUB_OFFLINE is set)")
    if not _hub.hub_reachable():
        host, port = _hub.hub_address()
        raise DataConfigError(
            f"{spec.name}: {_NO_DATA_DIR} (the Hugging Face hub, {host}:{port}, cannot be reached)"
        )
    logger.info("%s (%s): no data folder, loading %s from the hub", spec.name, split, spec.hub_id)
    try:
        return load_from_hub(spec.hub, split)
    except Exception as error:  # network, hub and cache errors of datasets/huggingface_hub
        why = " ".join(f"{type(error).__name__}: {error}".split())
        raise DataConfigError(
            f"{spec.name}: loading {spec.hub_id} from the hub failed ({why}); {_NO_DATA_DIR}"
        ) from error


def data_location(
    name: str, split: str = "test", data_dir: PathLike | None = None, variant: str = DEFAULT_VARIANT
) -> str:
    """Where :func:`load_named` reads ``name``/``split`` from: the file or folder path, or
    ``"hub <id>"`` when no data folder is configured. Raises what :func:`load_named` raises
    for an unknown name, split or variant or a bad data folder."""
    spec = get_spec(name)
    layout = spec.layouts[_resolve_variant(spec, variant)]
    split = _resolve_split(spec, layout, split)
    root = _optional_data_dir(data_dir)
    if root is None:
        return f"hub {spec.hub_id}" if spec.hub_id else "no data folder"
    return str(root / layout.paths[split])


def load_named(
    name: str, split: str = "test", data_dir: PathLike | None = None, variant: str = DEFAULT_VARIANT
) -> Dataset:
    """Load split ``split`` of the registry dataset ``name``.

    Reads from the data folder (``data_dir`` or ``$STS_DATA_DIR``); without one, falls
    back to the hub copy when online. Raises :class:`DataConfigError` for an unknown
    name, split or variant, or when no data folder is set and the hub cannot be used.
    """
    spec = get_spec(name)
    layout = spec.layouts[_resolve_variant(spec, variant)]
    split = _resolve_split(spec, layout, split)
    root = _optional_data_dir(data_dir)
    if root is None:
        return _load_hub(spec, split)
    return layout.read(root, split)


#: the formats a hub dataset id may be read in (None: guessed, a table)
HUB_FORMATS = (None, *TABLE_FORMATS)


def load_pairs(
    name_or_path: PathLike,
    split: str = "train",
    data_dir: PathLike | None = None,
    fmt: str | None = None,
    columns: Mapping[str, str] | None = None,
    score_range: ScoreRange | None = None,
    reading: TableReading = READ,
) -> Dataset:
    """Load training/evaluation data named by a recipe: a registry name, a path or a hub id.

    A registry name goes through :func:`load_named` (default variant). Otherwise the
    value is a file or folder; a relative path that does not exist is also looked up
    under the data folder. The format is ``fmt`` (see :data:`~sts_core.data.formats.FORMATS`)
    or guessed from the name, extension or first line; ``split`` picks the file in
    folders holding several splits (SentEval NLI, STS-B, SICK) and the split of a
    ``DatasetDict`` folder (``folder:split`` names one). A value that is no local path
    but has the form ``owner/name`` (``owner/name:split``) is a hub dataset id, read when
    the hub can be reached (:func:`~sts_core.data.tables.load_hub_table`). ``columns``,
    ``score_range`` and ``reading`` are for tables (:mod:`~sts_core.data.tables`).
    """
    key = os.fspath(name_or_path)
    if key in REGISTRY and not Path(key).exists():
        if fmt is not None or columns:
            option = f"fmt={fmt!r}" if fmt is not None else reading.option
            raise DataConfigError(f"{option} is for files and folders; {key!r} is a dataset name")
        return load_named(key, split=split, data_dir=data_dir)
    path = _local_path(key, data_dir)
    if path is None:
        base, sep, named_split = key.rpartition(":")
        folder = _local_path(base, data_dir) if sep and base and named_split else None
        if folder is not None and is_saved_dataset(folder):
            path, split = folder, named_split
        elif looks_like_hub_id(base if sep and named_split else key) and fmt in HUB_FORMATS:
            repo_id, hub_split = (base, named_split) if sep and named_split else (key, split)
            reading = reading.for_format(fmt)
            return load_hub_table(repo_id, hub_split, columns, score_range, reading)
        else:
            known = ", ".join(REGISTRY)
            problem = f"neither a file/folder nor a registered dataset (known: {known})"
            raise DataFileNotFoundError(Path(key).expanduser(), problem)
    return read_path(path, split, fmt, columns, score_range, reading)


def _local_path(key: str, data_dir: PathLike | None) -> Path | None:
    """``key`` as an existing path, or under the data folder when relative; None if neither."""
    path = Path(key).expanduser()
    if path.exists():
        return path
    if not path.is_absolute():
        root = _optional_data_dir(data_dir)
        if root is not None and (root / path).exists():
            return root / path
    return None
