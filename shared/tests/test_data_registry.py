"""Registry of named datasets: fixture data folder, errors, hub fallback, real data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from datasets import ClassLabel, Dataset, Features, Value

import sts_core.data.hub as hub
from sts_core.data import (
    DataConfigError,
    DataFileNotFoundError,
    DataFormatError,
    DatasetSpec,
    list_datasets,
    load_named,
    load_pairs,
    resolve_data_dir,
)

FIXTURES = Path(__file__).parent / "fixtures" / "data"

NAMES = [
    "sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "snli", "mnli", "atec", "bq",
    "lcqmc", "pawsx", "stsb-zh", "nli-triplets", "mrpc", "wikiqa", "quora", "sst2", "wiki",
]  # fmt: skip

# (name, variant) -> {split: rows}, for the fixture tree and for the real data (README counts)
FIXTURE_COUNTS = {
    ("sts12", "senteval"): {"test": 3}, ("sts12", "raw"): {"test": 3},
    ("sts13", "senteval"): {"test": 3}, ("sts13", "raw"): {"test": 3},
    ("sts14", "senteval"): {"test": 3}, ("sts14", "raw"): {"test": 3},
    ("sts15", "senteval"): {"test": 2}, ("sts15", "raw"): {"test": 2},
    ("sts16", "senteval"): {"test": 2}, ("sts16", "raw"): {"test": 2},
    ("stsb", "senteval"): {"train": 4, "dev": 2, "test": 2},
    ("stsb", "raw"): {"train": 4, "dev": 2, "test": 2},
    ("sickr", "senteval"): {"train": 3, "dev": 1, "test": 2},
    ("sickr", "raw"): {"train": 3, "dev": 1, "test": 2},
    ("snli", "senteval"): {"dev": 3, "test": 2}, ("snli", "raw"): {"dev": 3, "test": 2},
    ("mnli", "default"): {"dev_matched": 2, "dev_mismatched": 1},
    ("nli-triplets", "default"): {"train": 2},
    ("atec", "default"): {"dev": 2, "test": 1},
    ("bq", "default"): {"dev": 1, "test": 2},
    ("lcqmc", "default"): {"dev": 1, "test": 1},
    ("pawsx", "default"): {"dev": 1, "test": 1},
    ("stsb-zh", "default"): {"train": 2, "dev": 1, "test": 1},
    ("mrpc", "default"): {"train": 2, "test": 1},
    ("wikiqa", "default"): {"train": 4, "dev": 1, "test": 2},
    ("quora", "default"): {"dev": 2, "test": 1},
    ("sst2", "senteval"): {"train": 3, "dev": 1, "test": 2},
    ("sst2", "sentence-level"): {"train": 2, "dev": 1, "test": 1},
    ("wiki", "wiki1m"): {"train": 3}, ("wiki", "wikisplit"): {"train": 2},
}  # fmt: skip
REAL_COUNTS = {
    ("sts12", "senteval"): {"test": 3108}, ("sts12", "raw"): {"test": 3108},
    ("sts13", "senteval"): {"test": 1500}, ("sts13", "raw"): {"test": 1500},
    ("sts14", "senteval"): {"test": 3750}, ("sts14", "raw"): {"test": 3750},
    ("sts15", "senteval"): {"test": 3000}, ("sts15", "raw"): {"test": 3000},
    ("sts16", "senteval"): {"test": 1186}, ("sts16", "raw"): {"test": 1186},
    ("stsb", "senteval"): {"train": 5749, "dev": 1500, "test": 1379},
    ("stsb", "raw"): {"train": 5749, "dev": 1500, "test": 1379},
    ("sickr", "senteval"): {"train": 4500, "dev": 500, "test": 4927},
    ("sickr", "raw"): {"train": 4500, "dev": 500, "test": 4927},
    # SNLI: 10000 rows each, minus 158 / 176 without gold label
    ("snli", "senteval"): {"dev": 9842, "test": 9824}, ("snli", "raw"): {"dev": 9842, "test": 9824},
    ("mnli", "default"): {"dev_matched": 9815, "dev_mismatched": 9832},
    ("nli-triplets", "default"): {"train": 11789},
    ("atec", "default"): {"dev": 20000, "test": 20000},
    ("bq", "default"): {"dev": 10000, "test": 10000},
    ("lcqmc", "default"): {"dev": 8802, "test": 12500},
    ("pawsx", "default"): {"dev": 2000, "test": 2000},
    ("stsb-zh", "default"): {"train": 5231, "dev": 1458, "test": 1361},
    ("mrpc", "default"): {"train": 4076, "test": 1725},
    ("wikiqa", "default"): {"train": 20360, "dev": 2733, "test": 6165},
    ("quora", "default"): {"dev": 10000, "test": 10000},
    ("sst2", "senteval"): {"train": 67349, "dev": 872, "test": 1821},
    ("sst2", "sentence-level"): {"train": 6920, "dev": 872, "test": 1821},
    ("wiki", "wiki1m"): {"train": 11914}, ("wiki", "wikisplit"): {"train": 15000},
}  # fmt: skip

PAIR_COLUMNS = {"sentence1": "string", "sentence2": "string", "score": "float64"}


def _cases(counts):
    return [
        (name, variant, split, n) for (name, variant), s in counts.items() for split, n in s.items()
    ]


@pytest.fixture
def real_data_dir() -> Path:
    """The real benchmark folder, or skip."""
    data_dir = os.environ.get("STS_DATA_DIR") or pytest.skip(
        "STS_DATA_DIR not set: point it at the benchmark data folder (../shared/data)"
    )
    return Path(data_dir)


@pytest.fixture
def no_data_dir(monkeypatch):
    """No data folder configured and the hub considered online (no network needed)."""
    for name in ("STS_DATA_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hub, "_probe", lambda host, port, timeout: True)
    hub.reset_hub_reachable()
    yield
    hub.reset_hub_reachable()


def check_columns(ds: Dataset, name: str) -> None:
    """Pair datasets carry the shared columns; single-sentence ones ``sentence``."""
    types = {column: feature.dtype for column, feature in ds.features.items()}
    if name in ("sst2", "wiki"):
        assert types["sentence"] == "string"
    else:
        assert {k: types[k] for k in PAIR_COLUMNS} == PAIR_COLUMNS
    if "label" in types:
        assert types["label"] == "int64"


# --------------------------------------------------------------------------- listing


def test_list_datasets_covers_every_name():
    specs = list_datasets()
    assert [spec.name for spec in specs] == NAMES
    assert all(isinstance(spec, DatasetSpec) for spec in specs)
    assert {(s.name, v) for s in specs for v in s.variants} == set(FIXTURE_COUNTS)
    stsb = next(spec for spec in specs if spec.name == "stsb")
    assert stsb.splits == ("train", "dev", "test")
    assert stsb.variants == ("senteval", "raw")
    assert stsb.hub_id == "sentence-transformers/stsb"
    assert next(s for s in specs if s.name == "sts12").hub_id == "mteb/sts12-sts"
    assert next(s for s in specs if s.name == "sickr").splits == ("train", "dev", "test")


# --------------------------------------------------------------------------- fixture folder


@pytest.mark.parametrize("name,variant,split,rows", _cases(FIXTURE_COUNTS))
def test_every_entry_loads_from_fixture_folder(name, variant, split, rows):
    ds = load_named(name, split, FIXTURES, variant)
    assert len(ds) == rows
    check_columns(ds, name)


def test_data_dir_from_environment(monkeypatch):
    monkeypatch.setenv("STS_DATA_DIR", str(FIXTURES))
    assert resolve_data_dir() == FIXTURES
    assert len(load_named("sickr", "dev")) == 1


def test_split_aliases_and_default_variant():
    assert (
        load_named("sickr", "trial", FIXTURES).to_list()
        == load_named("sickr", "dev", FIXTURES).to_list()
    )
    assert len(load_named("atec", "valid", FIXTURES)) == 2
    assert len(load_named("stsb", "validation", FIXTURES)) == 2
    # single-layout datasets accept the default variant
    assert len(load_named("mrpc", "train", FIXTURES, variant="senteval")) == 2
    assert load_named("stsb", "test", FIXTURES, "raw")["sentence1"][0] == "A man plays guitar ."


def test_unknown_name_split_variant():
    with pytest.raises(DataConfigError, match="unknown dataset 'stsx'; known datasets: sts12, "):
        load_named("stsx", "test", FIXTURES)
    with pytest.raises(DataConfigError, match="'sts12' has no split 'train'; splits: test"):
        load_named("sts12", "train", FIXTURES)
    with pytest.raises(DataConfigError, match="'stsb' has no split 'xx'; splits: train, dev, test"):
        load_named("stsb", "xx", FIXTURES)
    with pytest.raises(DataConfigError, match="no variant 'tokenized'; variants: senteval, raw"):
        load_named("stsb", "test", FIXTURES, "tokenized")


def test_resolve_data_dir_errors(monkeypatch, tmp_path, no_data_dir):
    with pytest.raises(DataConfigError, match="STS_DATA_DIR.*--data-dir"):
        resolve_data_dir()
    with pytest.raises(DataFileNotFoundError) as info:
        resolve_data_dir(tmp_path / "absent")
    assert str(info.value).startswith(f"{tmp_path / 'absent'}: ")
    monkeypatch.setenv("STS_DATA_DIR", str(tmp_path / "gone"))
    with pytest.raises(DataFileNotFoundError, match="given by STS_DATA_DIR does not exist"):
        resolve_data_dir()
    assert resolve_data_dir(tmp_path) == tmp_path


def test_data_dir_that_is_a_file_says_not_a_folder(monkeypatch, tmp_path, no_data_dir):
    afile = tmp_path / "data.txt"
    afile.write_text("not a folder\n")
    with pytest.raises(DataFormatError, match="given by data_dir is not a folder") as info:
        load_named("stsb", "test", afile)
    assert not isinstance(info.value, FileNotFoundError)
    assert "does not exist" not in str(info.value)
    monkeypatch.setenv("STS_DATA_DIR", str(afile))
    with pytest.raises(DataFormatError, match=f"{afile}: data folder given by STS_DATA_DIR is not"):
        resolve_data_dir()


def test_missing_file_in_data_folder(tmp_path):
    with pytest.raises(DataFileNotFoundError) as info:
        load_named("stsb", "test", tmp_path)
    assert str(info.value).startswith(f"{tmp_path}/senteval/STS/STSBenchmark/sts-test.csv: ")


# --------------------------------------------------------------------------- hub fallback


def test_offline_without_data_dir_names_env_and_option(monkeypatch, no_data_dir):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataConfigError, match="STS_DATA_DIR or pass --data-dir"):
        load_named("stsb", "test")


def test_no_hub_copy_names_env_and_option(no_data_dir):
    with pytest.raises(DataConfigError, match="no hub copy: .*STS_DATA_DIR or pass --data-dir"):
        load_named("wiki", "train")


def test_hub_unreachable_fails_at_once_naming_env(monkeypatch, no_data_dir):
    probes = []
    monkeypatch.setattr(hub, "_probe", lambda *a: probes.append(a) or False)

    def never(source, split):
        raise AssertionError("the hub must not be tried when it cannot be reached")

    monkeypatch.setattr(hub, "_load_raw", never)
    for _ in range(2):
        with pytest.raises(DataConfigError, match="set STS_DATA_DIR or pass --data-dir") as info:
            load_named("stsb", "test")
        assert "huggingface.co:443" in str(info.value) and "cannot be reached" in str(info.value)
    assert probes == [("huggingface.co", 443, 3.0)]  # probed once, the answer is kept


def test_hub_reachable_offline_endpoint_and_cache(monkeypatch, no_data_dir):
    probes = []
    monkeypatch.setattr(hub, "_probe", lambda *a: probes.append(a) or True)
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example:8080/")
    for name in ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert hub.hub_reachable(timeout=0.5) is True
    assert hub.hub_reachable() is True
    assert probes == [("mirror.example", 8080, 0.5)]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.hub_reachable() is False  # offline wins over the cached answer, without a probe
    assert len(probes) == 1
    monkeypatch.delenv("HF_HUB_OFFLINE")
    hub.reset_hub_reachable()
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example")
    assert hub.hub_address() == ("hub.example", 443)
    assert hub.hub_reachable() is True and probes[-1] == ("hub.example", 443, 3.0)


def test_probe_gives_up_after_its_timeout(monkeypatch):
    import socket
    import threading
    import time

    release = threading.Event()

    def hanging_connect(*args, **kwargs):  # a name lookup that hangs
        release.wait(10)
        raise OSError("late")

    monkeypatch.setattr(socket, "create_connection", hanging_connect)
    start = time.perf_counter()
    try:
        assert hub._probe("huggingface.co", 443, 0.2) is False
        assert time.perf_counter() - start < 2
    finally:
        release.set()


def test_probe_connects_to_a_local_listener():
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert hub._probe("127.0.0.1", port, 2.0) is True
    assert hub._probe("127.0.0.1", port, 2.0) is False


def test_hub_failure_is_a_data_error_naming_env(monkeypatch, no_data_dir):
    def broken(source, split):
        raise ConnectionError("Max retries exceeded")

    monkeypatch.setattr(hub, "_load_raw", broken)
    with pytest.raises(DataConfigError, match="Max retries exceeded.*STS_DATA_DIR") as info:
        load_named("stsb", "test")
    assert "sentence-transformers/stsb" in str(info.value)


def test_hub_fallback_maps_columns(monkeypatch, no_data_dir):
    calls = []

    def fake(source, split):
        calls.append((source.repo_id, source.splits[split]))
        return Dataset.from_dict(
            {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [0.2, 1.0]}
        )

    monkeypatch.setattr(hub, "_load_raw", fake)
    ds = load_named("stsb", "dev")
    assert calls == [("sentence-transformers/stsb", "validation")]
    assert ds.to_dict() == {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [1.0, 5.0]}
    assert ds.features["score"].dtype == "float64"


def test_hub_fallback_nli(monkeypatch, no_data_dir):
    features = Features(
        {
            "premise": Value("string"),
            "hypothesis": Value("string"),
            "label": ClassLabel(names=["entailment", "neutral", "contradiction"]),
        }
    )
    data = {"premise": ["p", "q", "r"], "hypothesis": ["h", "i", "j"], "label": [0, -1, 2]}
    monkeypatch.setattr(hub, "_load_raw", lambda s, split: Dataset.from_dict(data, features))
    ds = load_named("snli", "test")
    assert ds.to_dict() == {
        "sentence1": ["p", "r"],
        "sentence2": ["h", "j"],
        "score": [2.0, 0.0],
        "label": [0, 2],
    }


# --------------------------------------------------------------------------- load_pairs


def test_load_pairs_registry_name_and_relative_path(monkeypatch):
    assert len(load_pairs("stsb", data_dir=FIXTURES)) == 4
    assert len(load_pairs("sickr", "test", data_dir=FIXTURES)) == 2
    monkeypatch.setenv("STS_DATA_DIR", str(FIXTURES))
    assert len(load_pairs("nli/triplets/nli_triplets.csv")) == 2


@pytest.mark.parametrize(
    "relative,split,rows,column",
    [
        ("senteval/STS/STS12-en-test", "test", 3, "subset"),
        ("senteval/STS/STSBenchmark", "dev", 2, "genre"),
        ("senteval/STS/STSBenchmark/sts-train.csv", "train", 4, "genre"),
        ("senteval/SICK", "test", 2, "label"),
        ("raw/SICK/SICK_train.txt", "train", 3, "label"),
        ("nli/snli-devtest", "test", 2, "label"),
        ("nli/snli-devtest-raw/snli_1.0_dev.csv", "train", 3, "label"),
        ("nli/snli-jsonl/snli_1.0_dev.jsonl", "train", 3, "label"),
        ("nli/triplets/nli_triplets.csv", "train", 2, "hard_negative"),
        ("chinese/STS-B/STS-B.train.data", "train", 2, "label"),
        ("pairwise/mrpc/msr_paraphrase_test.txt", "train", 1, "label"),
        ("pairwise/wikiqa/train.txt", "train", 4, "query_id"),
        ("pairwise/quora-devtest/test.txt", "train", 1, "label"),
        ("sst/sentence-level/stsa.binary.dev", "train", 1, "sentence"),
        ("wiki/wiki1m_first11914.txt", "train", 3, "sentence"),
    ],
)
def test_load_pairs_guesses_format(relative, split, rows, column):
    ds = load_pairs(FIXTURES / relative, split)
    assert len(ds) == rows
    assert column in ds.column_names


def test_load_pairs_explicit_format_and_errors(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_text("a ?\tb ?\t1\n", encoding="utf-8")
    with pytest.raises(
        DataConfigError, match="cannot guess the data format; pass fmt= one of: sts,"
    ):
        load_pairs(path)
    assert load_pairs(path, fmt="quora")["label"] == [1]
    with pytest.raises(DataConfigError, match="unknown data format 'tsv'"):
        load_pairs(path, fmt="tsv")
    with pytest.raises(DataConfigError, match="fmt='stsb' is for files and folders"):
        load_pairs("stsb", fmt="stsb")
    with pytest.raises(DataFileNotFoundError, match="known: sts12, sts13"):
        load_pairs(tmp_path / "nope.csv")
    with pytest.raises(DataFileNotFoundError, match="neither a file/folder nor a registered"):
        load_pairs("stsbenchmark")


# --------------------------------------------------------------------------- real data


@pytest.mark.real_data
@pytest.mark.parametrize("name,variant,split,rows", _cases(REAL_COUNTS))
def test_real_data_counts(real_data_dir, name, variant, split, rows):
    ds = load_named(name, split, real_data_dir, variant)
    assert len(ds) == rows
    check_columns(ds, name)


@pytest.mark.real_data
def test_real_sts_subsets(real_data_dir):
    sts16 = load_named("sts16", "test", real_data_dir, "raw")
    assert sorted(set(sts16["subset"])) == [
        "answer-answer",
        "headlines",
        "plagiarism",
        "postediting",
        "question-question",
    ]
    assert set(load_named("sts13", "test", real_data_dir)["subset"]) == {
        "FNWN",
        "OnWN",
        "headlines",
    }
