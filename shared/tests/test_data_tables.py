"""Tables with a header (issue 45, item 1): CSV, TSV, JSON, JSON Lines, Parquet, save_to_disk
folders, hub ids and Dataset objects, read by ``datasets``' loaders into the project's
columns by sentence-transformers' conventions or a ``columns`` mapping; every bad value is
one error naming the source, the row and the column; the benchmark formats read as before.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
from datasets import Dataset, DatasetDict, Value

from sts_core.data import (
    DataConfigError,
    DataFileNotFoundError,
    DataFormatError,
    from_dataset,
    hub,
    load_pairs,
    load_reference,
    read_table,
    tables,
)
from sts_core.data.formats import guess_format
from sts_core.data.nli import read_nli_csv

FIXTURES = Path(__file__).parent / "fixtures" / "data"
PAIRS = {
    "sentence1": ["A man plays.", " 007 ", "Two dogs run."],
    "sentence2": ["A man is playing.", "Bond", "A cat sleeps."],
    "score": [4.5, 2.0, 0.25],
}
READ = {
    "sentence1": ["A man plays.", "007", "Two dogs run."],
    "sentence2": ["A man is playing.", "Bond", "A cat sleeps."],
    "score": [4.5, 2.0, 0.25],
}
TYPES = {"sentence1": "string", "sentence2": "string", "score": "float64", "label": "int64"}


def write_table(path: Path, columns: dict[str, list]) -> Path:
    """``columns`` written as the table file ``path`` says (by its suffix), with a header."""
    frame = pd.DataFrame(columns)
    suffix = path.suffix
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".tsv":
        rows = ["\t".join(frame.columns)]
        rows += ["\t".join(str(v) for v in row) for row in frame.itertuples(index=False)]
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    elif suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    elif suffix == ".json":
        path.write_text(json.dumps(frame.to_dict(orient="records")), encoding="utf-8")
    elif suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        raise AssertionError(suffix)
    return path


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def types_of(dataset: Dataset) -> dict[str, str]:
    return {name: feature.dtype for name, feature in dataset.features.items()}


# --------------------------------------------------------------------------- every kind


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".json", ".jsonl", ".parquet"])
def test_each_file_kind_reads_into_the_project_columns(tmp_path, suffix):
    path = write_table(tmp_path / f"mine{suffix}", PAIRS)
    before = files_under(tmp_path)
    name, dataset = load_reference(str(path), "train")
    assert name == str(path)
    assert dataset.to_dict() == READ  # texts stripped, "007" kept as text
    assert types_of(dataset) == {k: TYPES[k] for k in READ}
    assert files_under(tmp_path) == before  # no cache written beside the data


def test_a_save_to_disk_folder_and_a_dataset_dict_folder(tmp_path):
    Dataset.from_dict(PAIRS).save_to_disk(tmp_path / "one")
    splits = DatasetDict(
        {
            "train": Dataset.from_dict(PAIRS),
            "validation": Dataset.from_dict({k: v[:2] for k, v in PAIRS.items()}),
        }
    )
    splits.save_to_disk(tmp_path / "dict")
    before = files_under(tmp_path)
    assert load_reference(str(tmp_path / "one"), "train")[1].to_dict() == READ
    assert load_reference(str(tmp_path / "dict"), "train")[1].to_dict() == READ
    dev = load_reference(str(tmp_path / "dict"), "dev")[1]  # dev is the validation split
    assert dev.to_dict() == {k: v[:2] for k, v in READ.items()}
    named = load_reference(f"{tmp_path / 'dict'}:validation", "train")[1]
    assert len(named) == 2
    with pytest.raises(DataConfigError, match=r"has no split 'test' \(its splits: train, valid"):
        load_reference(str(tmp_path / "dict"), "test")
    assert files_under(tmp_path) == before


def test_a_dataset_object_and_a_dataset_dict_object():
    dataset = Dataset.from_dict({"q": PAIRS["sentence1"], "d": PAIRS["sentence2"], "s": [1, 2, 3]})
    columns = {"sentence1": "q", "sentence2": "d", "score": "s"}
    name, read = load_reference(dataset, "train", columns=columns)
    assert name == "in-memory dataset"
    assert read["sentence1"] == READ["sentence1"] and read["score"] == [1.0, 2.0, 3.0]
    assert dataset.column_names == ["q", "d", "s"]  # the argument is not changed
    splits = DatasetDict({"train": Dataset.from_dict(PAIRS), "test": Dataset.from_dict(PAIRS)})
    assert from_dataset(splits, split="test").to_dict() == READ
    with pytest.raises(DataConfigError, match="in-memory dataset has no split 'dev'"):
        from_dataset(splits, split="dev")
    with pytest.raises(DataConfigError, match="fmt='stsb' is for files and folders"):
        load_reference(dataset, "train", fmt="stsb")
    # a table format is what a Dataset is (train_format reaches one given in memory)
    assert load_reference(dataset, "train", fmt="table", columns=columns)[1].to_dict() == (
        read.to_dict()
    )
    with pytest.raises(DataConfigError, match="expected a datasets.Dataset or DatasetDict"):
        from_dataset({"sentence": ["a"]})


# --------------------------------------------------------------------------- conventions


@pytest.mark.parametrize(
    "columns,expected",
    [
        (
            {"anchor": ["a"], "positive": ["b"], "negative": ["c"]},
            {"sentence1": ["a"], "sentence2": ["b"], "hard_negative": ["c"]},
        ),
        (  # sentence-transformers: any names, in order, and a label column
            {"premise": ["a", "b"], "hypothesis": ["c", "d"], "label": [0, 2]},
            {
                "sentence1": ["a", "b"],
                "sentence2": ["c", "d"],
                "score": [0.0, 2.0],
                "label": [0, 2],
            },
        ),
        (  # a label of fractions is a score only
            {"text1": ["a", "b"], "text2": ["c", "d"], "label": [0.5, 1]},
            {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [0.5, 1.0]},
        ),
        (  # both: score is the score, label the class
            {"sentence1": ["a"], "sentence2": ["b"], "score": [3.5], "label": [1]},
            {"sentence1": ["a"], "sentence2": ["b"], "score": [3.5], "label": [1]},
        ),
        (  # named columns win over order; the others are not read
            {"genre": ["news"], "sentence2": ["b"], "sentence1": ["a"], "score": [1]},
            {"sentence1": ["a"], "sentence2": ["b"], "score": [1.0]},
        ),
        ({"text": ["a", "b"]}, {"sentence": ["a", "b"]}),
        (
            {"sentence": ["a", "b"], "label": [1, 0]},
            {"sentence": ["a", "b"], "score": [1.0, 0.0], "label": [1, 0]},
        ),
        (  # three unnamed text columns: a triplet
            {"q": ["a"], "pos": ["b"], "neg": ["c"]},
            {"sentence1": ["a"], "sentence2": ["b"], "hard_negative": ["c"]},
        ),
        (  # two unnamed columns without a label: pairs for in-batch negatives
            {"query": ["a"], "document": ["b"]},
            {"sentence1": ["a"], "sentence2": ["b"]},
        ),
    ],
    ids=[
        "anchor-positive-negative",
        "ordered-with-int-label",
        "float-label",
        "score-and-label",
        "named-beat-order",
        "single",
        "single-labelled",
        "ordered-triplet",
        "ordered-pairs",
    ],
)
def test_columns_are_found_by_the_conventions(tmp_path, columns, expected):
    path = write_table(tmp_path / "t.jsonl", columns)
    dataset = read_table(path)
    assert dataset.to_dict() == expected
    assert all(TYPES.get(k, "string") == t for k, t in types_of(dataset).items())


def test_a_columns_mapping_names_them(tmp_path):
    path = write_table(
        tmp_path / "t.jsonl",
        {"id": [1, 2], "text_a": ["a", "b"], "text_b": ["c", "d"], "sim": ["4", 2.5]},
    )
    mapping = {"sentence1": "text_a", "sentence2": "text_b", "score": "sim"}
    expected = {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [4.0, 2.5]}
    assert read_table(path, mapping).to_dict() == expected
    # without it two columns of numbers: neither is a text, and which is the score?
    with pytest.raises(DataFormatError, match="the columns 'id', 'sim' hold numbers, so none"):
        read_table(path)
    # a mapping of the label alone: the texts by the conventions
    named = write_table(
        tmp_path / "n.csv", {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "sim": [1, 0]}
    )
    read = read_table(named, {"score": "sim"})
    assert read["score"] == [1.0, 0.0] and read["sentence2"] == ["c", "d"]
    # a mapping of the texts alone: score and label still by name
    scored = write_table(tmp_path / "s.csv", {"x": ["a", "b"], "y": ["c", "d"], "score": [1, 3]})
    assert read_table(scored, {"sentence1": "y", "sentence2": "x"}).to_dict() == {
        "sentence1": ["c", "d"],
        "sentence2": ["a", "b"],
        "score": [1.0, 3.0],  # a score column gives no label, even of integers
    }


@pytest.mark.parametrize(
    "mapping,words",
    [
        ({"sentence1": "text_a", "sentence2": "zzz"}, "columns maps sentence2 to 'zzz', which is"),
        ({"text": "text_a"}, "'text' is not one of the project's columns"),
        ({"sentence1": "text_a", "sentence2": "text_a"}, "names the column(s) text_a twice"),
        ({"sentence1": "text_a"}, "names the text columns sentence1: a table has sentence1"),
        ({"hard_negative": "text_a"}, "names the text columns hard_negative:"),
        ({"sentence1": "text_a", "sentence2": ""}, "sentence2: expected a column name"),
    ],
    ids=["absent", "unknown-key", "twice", "half-pair", "negative-alone", "empty-name"],
)
def test_a_bad_mapping_is_one_error(tmp_path, mapping, words):
    path = write_table(tmp_path / "t.csv", {"text_a": ["a"], "text_b": ["b"], "sim": [1]})
    with pytest.raises((DataFormatError, DataConfigError)) as caught:
        read_table(path, mapping)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_columns_option_is_parsed_and_checked_in_one_step():
    """``parse_columns_option``: what the config and the commands call for their columns
    options (the text of a recipe or a command line, or a mapping)."""
    from sts_core.data import parse_columns_option

    text = '{"sentence1": "text_a", "sentence2": "text_b"}'
    assert parse_columns_option(text, "--columns") == {"sentence1": "text_a", "sentence2": "text_b"}
    assert parse_columns_option(None, "eval_columns") is None
    with pytest.raises(DataConfigError, match="^--columns: 'text' is not one of the project's"):
        parse_columns_option({"text": "text_a"}, "--columns")
    with pytest.raises(ValueError, match="eval_columns"):
        parse_columns_option("{not json", "eval_columns")


def test_a_mapping_is_refused_for_a_registry_name_or_a_benchmark_file():
    with pytest.raises(DataConfigError, match="columns: stsb is a registry dataset"):
        load_reference("stsb:dev", "dev", data_dir=FIXTURES, columns={"score": "x"})
    stsb = FIXTURES / "senteval/STS/STSBenchmark/sts-dev.csv"
    with pytest.raises(DataConfigError, match="read as the stsb format"):
        load_reference(str(stsb), "dev", columns={"score": "x"})


# --------------------------------------------------------------------------- bad values


@pytest.mark.parametrize(
    "suffix,columns,options,message",
    [
        (
            ".csv",
            {"sentence1": ["a", "b", "c"], "sentence2": ["d", "e", "f"], "score": [1, "high", 2]},
            {},
            "row 2, column 'score': 'high' is not a number",
        ),
        (
            ".csv",
            {"sentence1": ["a", "b", "c"], "sentence2": ["d", "  ", "f"], "score": [1, 2, 3]},
            {},
            "row 2, column 'sentence2': empty text",
        ),
        (
            ".csv",
            {"sentence1": ["a", "b"], "sentence2": ["d", "e"], "score": [1, ""]},
            {},
            "row 2, column 'score': no value",
        ),
        (
            ".jsonl",
            {"q": ["a", "b", "c"], "d": ["d", "e", "f"], "sim": [1, 2, 7]},
            {
                "columns": {"sentence1": "q", "sentence2": "d", "score": "sim"},
                "score_range": (0, 5),
            },
            "row 3, column 'sim': score 7 is outside score_range [0, 5] (1 of 3 rows are)",
        ),
        (
            ".jsonl",
            {"sentence1": ["a", "b"], "sentence2": [None, "e"], "score": [1, 2]},
            {},
            "row 1, column 'sentence2': empty text (no value)",
        ),
        (
            ".jsonl",
            {"sentence1": ["a", "b"], "sentence2": ["c", "e"], "score": [1, "inf"]},
            {},
            "row 2, column 'score': 'inf' is not a finite number",
        ),
        (
            ".parquet",
            {"sentence1": ["a", "b"], "sentence2": [5, 6], "score": [1.0, 2.0]},
            {},
            "row 1, column 'sentence2': 5 is not a text (int)",
        ),
        (
            ".parquet",
            {"sentence1": ["a"], "sentence2": ["b"], "score": [1.0], "label": [0.5]},
            {},
            "row 1, column 'label': label 0.5 is not an integer",
        ),
        (
            ".csv",
            {"sentence1": ["a"], "score": [1.0]},
            {},
            "no column 'sentence2' (its columns: sentence1, score); expected two text columns",
        ),
        (
            ".csv",
            {"a": ["a"], "b": ["b"], "c": ["c"], "d": ["d"]},
            {},
            "no recognisable columns: found a, b, c, d; expected two text columns and a score "
            "or label column (sentence-transformers' convention), anchor/positive/negative, "
            "sentence1/sentence2 or sentence; or name them with columns",
        ),
        (".csv", {"sentence1": [], "sentence2": [], "score": []}, {}, "no data rows"),
    ],
    ids=[
        "text-score",
        "empty-text",
        "empty-score",
        "out-of-range",
        "null-text",
        "infinite",
        "number-as-text",
        "fractional-label",
        "half-named-pair",
        "unrecognisable",
        "header-only",
    ],
)
def test_a_bad_table_is_one_error_naming_file_row_and_column(
    tmp_path, suffix, columns, options, message
):
    path = write_table(tmp_path / f"bad{suffix}", columns)
    with pytest.raises(DataFormatError) as caught:
        read_table(path, **options)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_files_that_cannot_be_read_as_tables(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(DataFormatError, match="empty.csv: file is empty"):
        read_table(empty)
    twice = tmp_path / "twice.csv"
    twice.write_text("sentence1,sentence1,score\na,b,1\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"twice.csv:1: the header names 'sentence1' twice"):
        read_table(twice)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("sentence1,sentence2,score\na,b,1\nc,d,2,3\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"ragged.csv: cannot be read as CSV: .*line 3"):
        read_table(ragged)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"sentence1": "a", "sentence2": "b"}\n{"sentence1": \n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="broken.jsonl: cannot be read as JSON Lines: "):
        read_table(broken)
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(DataFormatError, match="not a folder written by Dataset.save_to_disk"):
        read_table(folder)


def test_a_tsv_is_unquoted_and_cells_of_a_csv_are_text(tmp_path):
    tsv = tmp_path / "q.tsv"
    tsv.write_text('sentence1\tsentence2\tscore\n"Hi" he said\tNA\t1\n', encoding="utf-8")
    assert read_table(tsv).to_dict() == {
        "sentence1": ['"Hi" he said'],
        "sentence2": ["NA"],  # not a missing value
        "score": [1.0],
    }


# --------------------------------------------------------------------------- which format


def test_the_benchmark_formats_read_as_before(tmp_path):
    headerless = tmp_path / "pairs.tsv"
    headerless.write_text("a b\tc d\t1\ne f\tg h\t0\n", encoding="utf-8")
    assert guess_format(headerless)[0] == "cosent"
    assert load_pairs(headerless).to_dict() == {
        "sentence1": ["a b", "e f"],
        "sentence2": ["c d", "g h"],
        "score": [1.0, 0.0],
        "label": [1, 0],
    }
    cases = {
        "nli/snli-devtest-raw/snli_1.0_dev.csv": "table",  # class names: NLI, read by tables
        "nli/snli-jsonl/snli_1.0_dev.jsonl": "nli-jsonl",
        "nli/triplets/nli_triplets.csv": "nli-triplets",
        "senteval/STS/STSBenchmark/sts-dev.csv": "stsb",
        "chinese/STS-B/STS-B.train.data": "cosent",
    }
    for relative, fmt in cases.items():
        assert guess_format(FIXTURES / relative)[0] == fmt, relative
    snli = FIXTURES / "nli/snli-devtest-raw/snli_1.0_dev.csv"
    assert load_pairs(snli).to_dict() == read_nli_csv(snli).to_dict()  # as the NLI reader


def test_a_csv_with_numeric_labels_is_a_table_and_with_class_names_nli(tmp_path):
    numbers = write_table(
        tmp_path / "n.csv", {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "label": [0, 1]}
    )
    assert guess_format(numbers)[0] == "table"
    assert load_pairs(numbers)["score"] == [0.0, 1.0]  # the label as it is
    names = write_table(
        tmp_path / "c.csv",
        {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "label": ["entailment", "-"]},
    )
    assert guess_format(names)[0] == "table"  # its class names say NLI to the table reader
    assert load_pairs(names)["score"] == [2.0]  # NLI: entailment 2, '-' skipped


def test_a_tsv_with_a_header_is_a_table_and_without_one_says_how_a_header_is_found(tmp_path):
    headed = write_table(tmp_path / "h.tsv", {"text_a": ["a"], "text_b": ["b"], "label": [1]})
    assert guess_format(headed)[0] == "table"
    unknown = write_table(tmp_path / "u.tsv", {"text_a": ["a"], "text_b": ["b"], "sim": [1]})
    assert guess_format(unknown)[0] == "cosent"
    with pytest.raises(DataFormatError) as caught:
        load_pairs(unknown)
    assert str(caught.value).startswith(f"{unknown}:1: score 'sim' is not a number; read as ")
    assert "or name the columns with columns" in str(caught.value)
    mapping = {"sentence1": "text_a", "sentence2": "text_b", "score": "sim"}
    assert load_pairs(unknown, columns=mapping)["score"] == [1.0]
    jsonl = write_table(tmp_path / "p.jsonl", {"sentence1": ["a"], "sentence2": ["b"]})
    assert guess_format(jsonl)[0] == "table"
    assert load_pairs(jsonl, fmt="table").num_rows == 1


# --------------------------------------------------------------------------- the hub


@pytest.fixture
def hub_online(monkeypatch):
    """The hub switched on and reachable, without the network."""
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hub, "_probe", lambda host, port, timeout: True)
    hub.reset_hub_reachable()
    yield
    hub.reset_hub_reachable()


@pytest.fixture
def fake_hub(monkeypatch, hub_online):
    """A hub dataset ``org/pairs`` with train and validation splits; the calls made."""
    calls: list[tuple[str, str]] = []
    splits = {
        "train": {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [0.1, 0.9]},
        "validation": {"sentence1": ["e", "f"], "sentence2": ["g", "h"], "score": [0.2, 0.3]},
    }

    def split_names(repo_id):
        if repo_id != "org/pairs":
            raise FileNotFoundError(f"Dataset '{repo_id}' doesn't exist on the Hub")
        return list(splits)

    def load_split(repo_id, split):
        calls.append((repo_id, split))
        return Dataset.from_dict(splits[split])

    monkeypatch.setattr(tables, "_hub_split_names", split_names)
    monkeypatch.setattr(tables, "_load_hub_split", load_split)
    return calls


def test_a_hub_id_is_read_through_the_hub_loader(fake_hub):
    assert load_reference("org/pairs", "train")[1]["score"] == [0.1, 0.9]
    assert load_reference("org/pairs", "dev")[1]["sentence1"] == ["e", "f"]
    assert load_reference("org/pairs:validation", "train")[1]["score"] == [0.2, 0.3]
    assert fake_hub == [
        ("org/pairs", "train"),
        ("org/pairs", "validation"),
        ("org/pairs", "validation"),
    ]
    with pytest.raises(DataConfigError, match=r"org/pairs has no split 'test'"):
        load_reference("org/pairs", "test")
    with pytest.raises(DataConfigError, match="org/nothing: loading it from the hub failed"):
        load_reference("org/nothing", "train")


@pytest.mark.parametrize("variable", ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_a_hub_id_offline_is_one_error(monkeypatch, fake_hub, variable):
    monkeypatch.setenv(variable, "1")
    with pytest.raises(DataConfigError) as caught:
        load_reference("org/pairs", "train")
    assert str(caught.value) == (
        "org/pairs is not a local file or folder, and as a hub dataset id it cannot be "
        "loaded: the Hugging Face hub is switched off (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE); "
        "give a local file or a save_to_disk folder"
    )
    assert fake_hub == []


def test_a_hub_id_with_the_hub_unreachable_is_one_error(monkeypatch, fake_hub):
    monkeypatch.setattr(hub, "_probe", lambda host, port, timeout: False)
    hub.reset_hub_reachable()
    with pytest.raises(
        DataConfigError, match=r"the Hugging Face hub \(huggingface.co:443\) cannot"
    ):
        load_reference("org/pairs", "train")
    assert fake_hub == []


def test_a_missing_file_is_not_taken_for_a_hub_id(tmp_path, fake_hub):
    with pytest.raises(DataFileNotFoundError, match="neither a file/folder nor a registered"):
        load_reference("data/mine.csv", "train")
    with pytest.raises(DataFileNotFoundError, match="neither a file/folder nor a registered"):
        load_reference(str(tmp_path / "a" / "b"), "train")
    assert fake_hub == []


def test_csv_written_by_the_csv_module_with_quotes_and_newlines(tmp_path):
    path = tmp_path / "quoted.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["anchor", "positive"])
        writer.writerow(['He said "hi", twice', "line one\nline two"])
    assert read_table(path).to_dict() == {
        "sentence1": ['He said "hi", twice'],
        "sentence2": ["line one\nline two"],
    }


# --------------------------------------------------------------------------- every guard


def test_guards_of_objects_and_mappings(tmp_path):
    with pytest.raises(DataFormatError, match="in-memory dataset: no data rows"):
        from_dataset(Dataset.from_dict({"sentence": []}))
    flags = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "score": [True]})
    with pytest.raises(DataFormatError, match="row 1, column 'score': True is not a number"):
        from_dataset(flags)
    with pytest.raises(DataConfigError, match=r"columns must be a mapping .*got \['a'\]"):
        from_dataset(flags, columns=["a"])
    numbers = flags.cast_column("score", Value("float64"))
    assert from_dataset(numbers, columns={})["score"] == [1.0]  # an empty mapping: none
    with pytest.raises(DataConfigError, match="columns is for files and folders; 'stsb' is a"):
        load_pairs("stsb", columns={"score": "x"})


def test_guards_of_files_and_folders(tmp_path):
    with pytest.raises(DataFileNotFoundError, match="nope.csv: no such file or folder"):
        read_table(tmp_path / "nope.csv")
    text = tmp_path / "pairs.txt"
    text.write_text("a\tb\t1\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"a table file ends in one of \.csv, \.tsv"):
        load_pairs(text, fmt="table")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "dataset_dict.json").write_text("{}", encoding="utf-8")
    with pytest.raises(DataFormatError, match="broken: cannot be read by load_from_disk: "):
        load_pairs(broken)
    # a headerless tsv failing after its first line: the reader's error, without the hint
    later = tmp_path / "later.tsv"
    later.write_text("a\tb\t1\nc\td\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        load_pairs(later)
    assert str(caught.value) == f"{later}:2: expected 3 tab-separated fields, found 2"


@pytest.mark.parametrize(
    "reference,is_id",
    [
        ("org/pairs", True),
        ("sentence-transformers/all-nli", True),
        ("org/pairs.v2", True),
        ("data/mine.csv", False),
        ("data/mine.jsonl", False),
        ("a/b/c", False),
        ("/abs", False),
        ("./x", False),
        ("stsb", False),
    ],
)
def test_what_is_taken_for_a_hub_id(reference, is_id):
    assert tables.looks_like_hub_id(reference) is is_id


def test_a_header_only_csv_with_a_label_column_is_a_table(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("sentence1,sentence2,label\n", encoding="utf-8")
    assert guess_format(path)[0] == "table"
    with pytest.raises(DataFormatError, match="h.csv: no data rows"):
        load_pairs(path)


def test_integer_labels_are_scores_as_they_stand_and_a_binary_one_too(tmp_path):
    """Issue 61: a ``label`` column of integers is the label as it stands, as
    sentence-transformers reads it (0/1/2 graded, 2 the most similar; -1 kept), never NLI
    classes by a guess (before: 0/2/-1 read as NLI, scores inverted, -1 rows dropped)."""
    graded = write_table(
        tmp_path / "graded.csv",
        {"sentence1": ["a", "b", "c"], "sentence2": ["d", "e", "f"], "label": [0, 2, -1]},
    )
    assert guess_format(graded)[0] == "table"
    read = load_pairs(graded)
    assert read["score"] == [0.0, 2.0, -1.0] and read["label"] == [0, 2, -1]
    binary = write_table(
        tmp_path / "paraphrase.csv",
        {"sentence1": ["a", "b", "c"], "sentence2": ["d", "e", "f"], "label": [0, 1, 1]},
    )
    assert guess_format(binary)[0] == "table"
    assert load_pairs(binary)["score"] == [0.0, 1.0, 1.0]


def test_a_csv_without_a_header_line_is_refused_when_its_first_row_holds_a_number(tmp_path):
    """A headerless ``s1,s2,4.6`` file would be read with its first row as the header and
    the score as a third text; the number in the header says what happened."""
    path = tmp_path / "mine.csv"
    path.write_text("a man plays,a person plays,4.6\na dog runs,a cat sleeps,0.4\n", "utf-8")
    with pytest.raises(DataFormatError) as caught:
        load_pairs(path)
    assert str(caught.value).startswith(f"{path}:1: the header names a column '4.6', a number")


def test_text_columns_taken_by_their_order_are_named_in_a_warning(tmp_path, caplog):
    path = write_table(tmp_path / "mine.csv", {"q": ["a b"], "d": ["c d"], "sim": [1.0]})
    with caplog.at_level("WARNING", logger="sts_core.data"):
        read = load_pairs(path, columns=None)
    assert read["sentence1"] == ["a b"]
    assert "text columns taken by their order: sentence1 ← 'q', sentence2 ← 'd'" in caplog.text
    named = write_table(tmp_path / "named.csv", {"sentence1": ["a"], "sentence2": ["b"]})
    caplog.clear()
    with caplog.at_level("WARNING", logger="sts_core.data"):
        load_pairs(named)
    assert "taken by their order" not in caplog.text


def test_spaces_around_the_header_names_of_a_csv_are_not_part_of_them(tmp_path):
    path = tmp_path / "spaced.csv"
    path.write_text("sentence1, sentence2, score\na b,c d,4.5\n", encoding="utf-8")
    read = load_pairs(path)
    assert read["sentence2"] == ["c d"] and read["score"] == [4.5]


def test_a_query_id_column_is_kept_as_group_numbers_for_ranking_sets(tmp_path):
    """A ranking set from a table: its query ids (any values) become 0, 1, … in order of
    first appearance, by name or by the columns mapping; an empty id names its row."""
    path = write_table(
        tmp_path / "r.csv",
        {
            "query_id": ["Q7", "Q7", "Q2", "Q7"],
            "sentence1": ["q", "q", "r", "q"],
            "sentence2": ["a", "b", "c", "d"],
            "label": [1, 0, 1, 0],
        },
    )
    table = read_table(path)
    assert table["query_id"] == [0, 0, 1, 0]
    assert table["label"] == [1, 0, 1, 0]
    renamed = write_table(
        tmp_path / "m.csv", {"qid": ["x", "y"], "sentence1": ["q", "r"], "sentence2": ["a", "b"]}
    )
    assert read_table(renamed, {"query_id": "qid"})["query_id"] == [0, 1]
    assert "query_id" not in read_table(renamed).column_names  # not named: not read
    empty = write_table(
        tmp_path / "e.csv",
        {"query_id": ["Q1", " "], "sentence1": ["q", "r"], "sentence2": ["a", "b"]},
    )
    with pytest.raises(DataFormatError, match="row 2.*query_id.*an empty query id"):
        read_table(empty)
