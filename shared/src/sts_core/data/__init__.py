"""Data layer: readers for each benchmark file format, tables with a header (CSV, TSV,
JSON, JSON Lines, Parquet, ``save_to_disk`` folders, hub ids, ``datasets.Dataset``
objects), a registry of named datasets, and test-overlap filtering / label rescaling and
mapping.

Column conventions: pair datasets have ``sentence1``, ``sentence2`` (str) and
``score`` (float64), plus ``label`` (int64) or ``hard_negative`` (str) where the
format has them; single-sentence datasets have ``sentence`` (+ ``label``).
Every malformed file raises :class:`DataFormatError` (``"<path>:<line>: <problem>"``).
"""

from .errors import (
    DataConfigError,
    DataContentError,
    DataError,
    DataFileNotFoundError,
    DataFormatError,
)
from .filtering import (
    FilterReport,
    check_score_range,
    filter_test_overlap,
    load_filtered_stsb_sick,
    load_test_sets,
    map_labels,
    merge_datasets,
    rescale_scores,
    resolve_label_mapping,
    sick_to_sts,
)
from .formats import FORMATS, guess_format, read_path
from .named_sets import (
    DatasetSpec,
    data_location,
    get_spec,
    list_datasets,
    load_named,
    load_pairs,
    resolve_data_dir,
)
from .nli import (
    NLI_LABELS,
    NLI_SCORES,
    read_nli_csv,
    read_nli_jsonl,
    read_nli_senteval,
    read_nli_triplets,
)
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
from .references import load_reference, registry_names, split_reference
from .tables import (
    PROJECT_COLUMNS,
    TableReading,
    check_columns_mapping,
    find_columns,
    from_dataset,
    load_hub_table,
    parse_columns_option,
    read_table,
)

__all__ = [
    "FORMATS",
    "PROJECT_COLUMNS",
    "DatasetSpec",
    "TableReading",
    "FilterReport",
    "check_columns_mapping",
    "parse_columns_option",
    "check_score_range",
    "data_location",
    "filter_test_overlap",
    "find_columns",
    "from_dataset",
    "get_spec",
    "guess_format",
    "list_datasets",
    "load_filtered_stsb_sick",
    "load_hub_table",
    "load_named",
    "load_pairs",
    "load_reference",
    "load_test_sets",
    "map_labels",
    "merge_datasets",
    "read_path",
    "read_table",
    "registry_names",
    "rescale_scores",
    "resolve_data_dir",
    "resolve_label_mapping",
    "sick_to_sts",
    "split_reference",
    "NLI_LABELS",
    "NLI_SCORES",
    "DataConfigError",
    "DataContentError",
    "DataError",
    "DataFileNotFoundError",
    "DataFormatError",
    "read_cosent_tsv",
    "read_mrpc",
    "read_nli_csv",
    "read_nli_jsonl",
    "read_nli_senteval",
    "read_nli_triplets",
    "read_quora",
    "read_senteval_sts",
    "read_sentences",
    "read_sick",
    "read_sst",
    "read_stsb_csv",
    "read_wikiqa",
]
