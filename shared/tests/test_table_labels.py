"""Tables read the way the ecosystem reads them (issue 61, item 3), in the data layer: a
``score`` or ``label`` column is the label as it stands (sentence-transformers'
convention), NLI classes only where the data say so; numbers are parsed strictly; a column
of numbers is never a text; every column error names the option that fixes it."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest
from datasets import ClassLabel, Dataset, Features, Value

from sts_core.data import (
    DataConfigError,
    DataFormatError,
    TableReading,
    from_dataset,
    load_pairs,
    load_reference,
    read_table,
)
from sts_core.data.formats import read_path

FIXTURES = Path(__file__).parent / "fixtures" / "data"
TEXTS = {"sentence1": ["a b", "c d", "e f"], "sentence2": ["g h", "i j", "k l"]}


def csv_file(path: Path, columns: dict[str, list]) -> Path:
    pd.DataFrame(columns).to_csv(path, index=False)
    return path


def message(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text
    return text


# --------------------------------------------------------------------------- the label


@pytest.mark.parametrize(
    "labels",
    [[0, 1, 2], [2, 0, 1], [-1, 0, 1]],
    ids=["graded-0-1-2", "graded-2-first", "minus-one-to-one"],
)
def test_a_label_column_of_integers_is_the_score_as_it_stands(tmp_path, labels):
    """Before: read as NLI classes when a 2 or a -1 was among them (scores inverted, the
    -1 rows dropped)."""
    path = csv_file(tmp_path / "graded.csv", {**TEXTS, "label": labels})
    for read in (load_pairs(path), load_reference(str(path), "test")[1]):
        assert read["score"] == [float(x) for x in labels] and read["label"] == labels


def test_nli_classes_where_the_data_say_so_class_names_in_any_table(tmp_path, caplog):
    """Class names in a JSON Lines file, a Parquet file or a Dataset in memory are NLI
    classes (entailment 2 > neutral 1 > contradiction 0), rows without a gold label
    skipped and counted in the log (before: 'entailment' is not a number)."""
    columns = {
        "sentence1": ["a", "b", "c", "d"],
        "sentence2": ["e", "f", "g", "h"],
        "label": ["Entailment", "-", "contradiction", "neutral"],
    }
    jsonl = tmp_path / "nli.jsonl"
    pd.DataFrame(columns).to_json(jsonl, orient="records", lines=True)
    parquet = tmp_path / "nli.parquet"
    pd.DataFrame(columns).to_parquet(parquet, index=False)
    expected = {
        "sentence1": ["a", "c", "d"],
        "sentence2": ["e", "g", "h"],
        "score": [2.0, 0.0, 1.0],
        "label": [0, 2, 1],
    }
    with caplog.at_level(logging.INFO, logger="sts_core.data"):
        for read in (
            read_table(jsonl),
            read_table(parquet),
            from_dataset(Dataset.from_dict(columns)),
        ):
            assert read.to_dict() == expected
    assert "skipped 1 of 4 rows (no gold label: '-' or -1)" in caplog.text


def test_nli_classes_where_the_data_say_so_a_class_label_of_nli_names():
    """A ``ClassLabel`` feature whose names are NLI classes (the hub's SNLI, any order):
    its ids go by its names (before: the ids were the scores, entailment 0 the lowest)."""
    features = Features(
        {
            "premise": Value("string"),
            "hypothesis": Value("string"),
            "label": ClassLabel(names=["contradiction", "entailment", "neutral"]),
        }
    )
    hub_like = Dataset.from_dict(
        {"premise": ["a", "b", "c"], "hypothesis": ["d", "e", "f"], "label": [1, 0, -1]},
        features=features,
    )
    read = from_dataset(hub_like)
    assert read["label"] == [0, 2] and read["score"] == [2.0, 0.0]
    other = Dataset.from_dict(
        {"q": ["a", "b"], "d": ["c", "d"], "label": [1, 0]},
        features=Features(
            {"q": Value("string"), "d": Value("string"), "label": ClassLabel(names=["no", "yes"])}
        ),
    )
    assert from_dataset(other)["score"] == [1.0, 0.0]  # other classes: as they stand


def test_train_format_nli_reads_integer_classes(tmp_path, caplog):
    """``fmt="nli"`` (``train_format: nli``): 0 entailment, 1 neutral, 2 contradiction, -1
    no gold label (skipped, counted); ``gold_label`` is its label column too."""
    path = csv_file(tmp_path / "snli.csv", {**TEXTS, "label": [0, 2, -1]})
    with caplog.at_level(logging.INFO, logger="sts_core.data"):
        read = read_path(path, fmt="nli")
    assert read["score"] == [2.0, 0.0] and read["label"] == [0, 2]
    assert "snli.csv: skipped 1 of 3 rows" in caplog.text
    gold = csv_file(tmp_path / "gold.csv", {"premise": ["a"], "hypo": ["b"], "gold_label": ["-"]})
    with pytest.raises(DataFormatError, match="no data rows left"):
        load_reference(str(gold), "train", fmt="nli")
    gold.write_text("premise,hypo,gold_label\na,b,neutral\n", encoding="utf-8")
    assert load_reference(str(gold), "train", fmt="nli")[1]["score"] == [1.0]
    in_memory = Dataset.from_dict({**TEXTS, "label": [0, 1, 2]})
    assert load_reference(in_memory, "train", fmt="nli")[1]["score"] == [2.0, 1.0, 0.0]


def test_an_nli_table_refuses_a_value_that_is_no_class_and_a_missing_label_column(tmp_path):
    path = csv_file(tmp_path / "bad.csv", {**TEXTS, "label": ["entailment", "maybe", "neutral"]})
    with pytest.raises(DataFormatError) as caught:
        read_table(path)
    assert message(caught) == (
        f"{path}: row 2, column 'label': unknown NLI label 'maybe' (expected entailment, "
        "neutral, contradiction, '-')"
    )
    numbers = csv_file(tmp_path / "three.csv", {**TEXTS, "label": [0, 3, 1]})
    with pytest.raises(DataFormatError, match="row 2, column 'label': unknown NLI label '3'"):
        read_path(numbers, fmt="nli")
    unlabelled = csv_file(tmp_path / "pairs.csv", TEXTS)
    with pytest.raises(DataFormatError) as caught:
        read_path(unlabelled, fmt="nli")
    assert message(caught) == (
        f"{unlabelled}: no label column of NLI classes (its columns: sentence1, sentence2): "
        "name it with columns, e.g. {label: y}"
    )


@pytest.mark.parametrize(
    ("labels", "score", "hint", "warned"),
    [
        ([0, 1, 2], False, "set train_format: nli", True),
        ([2, 1, 0, -1], False, "set train_format: nli", True),
        ([0, 1, 2], False, None, False),  # the loss reads no scores: no warning
        ([0, 1, 2], True, "set train_format: nli", False),  # a score column beside
        ([0, 1, 1], False, "set train_format: nli", False),  # binary
        ([0, 1, 2, 3], False, "set train_format: nli", False),  # graded 0-3: not NLI-like
    ],
    ids=["0-1-2", "with-minus-one", "no-hint", "score-beside", "binary", "to-three"],
)
def test_integer_labels_that_may_be_nli_classes_are_named_in_one_warning(
    tmp_path, caplog, labels, score, hint, warned
):
    rows = len(labels)
    columns = {"sentence1": ["a"] * rows, "sentence2": ["b"] * rows, "label": labels}
    if score:
        columns["score"] = [1.5] * rows
    path = csv_file(tmp_path / "t.csv", columns)
    with caplog.at_level(logging.WARNING, logger="sts_core.data"):
        read = read_table(path, reading=TableReading(nli_hint=hint))
    assert read["label"] == labels  # read as they stand either way
    notes = [r.getMessage() for r in caplog.records if "NLI classes" in r.getMessage()]
    if not warned:
        assert notes == []
        return
    listed = ", ".join(str(x) for x in sorted(set(labels)))
    assert notes == [
        f"{path}: column 'label' holds the integers {listed}: read as scores as they stand, "
        "as sentence-transformers reads a label column (2 the most similar); if they are NLI "
        "classes (0 entailment, 1 neutral, 2 contradiction), set train_format: nli"
    ]


# --------------------------------------------------------------------------- numbers


REFUSED = {
    "1_000": "'1_000' is not a number (a number is written as digits 0-9",
    "1,000": "'1,000' is not a number (a number is written as digits 0-9",
    "0,5": "'0,5' is not a number (a number is written as digits 0-9",
    "١٢": "'١٢' is not a number (a number is written as digits 0-9",
    "0x10": "'0x10' is not a number (a number is written",
    "1e": "'1e' is not a number (a number",
    "--1": "'--1' is not a number (a number",
    "4.5.1": "'4.5.1' is not a number (a number",
    "inf": "'inf' is not a finite number",
    "-Infinity": "'-Infinity' is not a finite number",
    "nan": "'nan' is not a finite number",
    "1e999": "'1e999' is not a finite number",
    "high": "'high' is not a number",
}


@pytest.mark.parametrize("text", list(REFUSED))
def test_a_number_is_a_decimal_number_and_nothing_else(tmp_path, text):
    """Before: Python's ``float`` took ``1_000`` and other scripts' digits."""
    path = tmp_path / "t.csv"
    path.write_text(f'sentence1,sentence2,score\na,b,1\nc,d,"{text}"\n', encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        read_table(path)
    assert message(caught).startswith(f"{path}: row 2, column 'score': {REFUSED[text]}")
    if text == "high":
        assert message(caught) == f"{path}: row 2, column 'score': 'high' is not a number"


@pytest.mark.parametrize(
    ("text", "value"),
    [("4", 4.0), ("-0.5", -0.5), (".5", 0.5), ("5.", 5.0), ("1e-3", 1e-3), ("+3", 3.0),
     (" 2.5 ", 2.5), ("1E2", 100.0)],
)  # fmt: skip
def test_a_decimal_number_is_read(tmp_path, text, value):
    path = tmp_path / "t.csv"
    path.write_text(f'sentence1,sentence2,score\na,b,"{text}"\n', encoding="utf-8")
    assert read_table(path)["score"] == [value]


def test_the_benchmark_readers_take_numbers_by_the_same_rule(tmp_path):
    headerless = tmp_path / "pairs.tsv"
    headerless.write_text("a b\tc d\t1\ne f\tg h\t1_0\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        load_pairs(headerless)
    assert message(caught).startswith(f"{headerless}:2: score '1_0' is not a number (a number")


# --------------------------------------------------------------------------- numbers, texts


def test_a_column_of_numbers_is_never_a_text_it_is_the_score(tmp_path):
    """``question,candidate,similarity``: before, similarity became a hard-negative text."""
    path = csv_file(
        tmp_path / "qa.csv",
        {"question": ["a b", "c d"], "candidate": ["e f", "g h"], "similarity": [0.6, 0.1]},
    )
    assert read_table(path).to_dict() == {
        "sentence1": ["a b", "c d"],
        "sentence2": ["e f", "g h"],
        "score": [0.6, 0.1],
    }
    ranked = csv_file(
        tmp_path / "ranked.csv",
        {"q": ["a", "c"], "d": ["b", "d"], "pid": ["7", "8"], "score": [1, 0]},
    )
    assert read_table(ranked).column_names == ["sentence1", "sentence2", "score"]


def test_a_column_of_numbers_the_reader_does_not_read_is_refused_naming_the_option(tmp_path):
    path = csv_file(
        tmp_path / "qa.csv",
        {"question": ["a b", "c d"], "candidate": ["e f", "g h"], "similarity": [0.6, 0.1]},
    )
    with pytest.raises(DataFormatError) as caught:
        read_table(path, reading=TableReading("--columns", "named"))
    assert message(caught) == (
        f"{path}: column 'similarity' holds numbers, so it is no text, and a score is read "
        "here only from a column named score or label: map it with --columns (e.g. "
        "--columns: {score: similarity}), or leave the column out"
    )
    two = csv_file(tmp_path / "two.csv", {"id": [1, 2], "q": ["a", "b"], "d": ["c", "d"],
                                          "sim": ["1.5", "2"]})  # fmt: skip
    with pytest.raises(DataFormatError) as caught:
        read_table(two, reading=TableReading("eval_columns"))
    assert message(caught) == (
        f"{two}: the columns 'id', 'sim' hold numbers, so none is a text, and no column is "
        "named score or label: name the score column with eval_columns, e.g. eval_columns: "
        "{score: id}"
    )
    mapped = read_table(path, {"score": "similarity"}, reading=TableReading("--columns", "named"))
    assert mapped["score"] == [0.6, 0.1]


# --------------------------------------------------------------------------- the option


@pytest.mark.parametrize(
    ("columns", "table", "mapping", "words"),
    [
        (
            {"q": ["a"], "d": ["b"]},
            "dev.csv",
            None,
            "no score or label column (its columns: q, d): the pairs are scored against one; "
            "name it with eval_columns, e.g. eval_columns: {score: similarity}",
        ),
        (
            {"q": ["a"], "d": ["b"], "sim": [1]},
            "dev.csv",
            {"sentence1": "q", "sentence2": "doc"},
            "eval_columns maps sentence2 to 'doc', which is not a column here",
        ),
        (
            {"a": ["a"], "b": ["b"], "c": ["c"], "d": ["d"]},
            "dev.csv",
            None,
            "or name them with eval_columns, e.g. {sentence1: text_a",
        ),
        (
            {"sentence1": ["a"], "score": [1]},
            "dev.csv",
            None,
            "no column 'sentence2' (its columns: sentence1, score); expected two text columns "
            "and a score or label column",
        ),
    ],
    ids=["no-score", "mapped-absent", "unrecognisable", "half-named"],
)
def test_a_column_error_names_the_option_that_fixes_it(tmp_path, columns, table, mapping, words):
    path = csv_file(tmp_path / table, columns)
    reading = TableReading("eval_columns", "needed")
    with pytest.raises(DataFormatError) as caught:
        read_table(path, mapping, reading=reading)
    assert words in message(caught) and "eval_columns" in message(caught)


def test_a_mapping_where_none_applies_names_the_option():
    reading = TableReading("--eval-columns")
    with pytest.raises(DataConfigError, match=r"^--eval-columns: stsb is a registry dataset"):
        load_reference(
            "stsb:dev", "dev", data_dir=FIXTURES, columns={"score": "x"}, reading=reading
        )
    stsb = FIXTURES / "senteval/STS/STSBenchmark/sts-dev.csv"
    with pytest.raises(DataConfigError, match="--eval-columns is for tables with a header"):
        load_reference(str(stsb), "dev", columns={"score": "x"}, reading=reading)
    with pytest.raises(DataConfigError, match="--eval-columns: 'txt' is not one of the proj"):
        load_reference(Dataset.from_dict(TEXTS), "dev", columns={"txt": "x"}, reading=reading)
    with pytest.raises(ValueError, match="labels must be one of needed, read, named"):
        TableReading(labels="some")


def test_an_nli_label_beside_a_score_and_the_score_range_of_nli_scores(tmp_path):
    """A SICK-like table: ``score`` the relatedness, ``label`` the class names (ids). With
    ``score_range``, the NLI scores (2/1/0) are checked by the file's row, skipped rows
    counted (row 3 here, not row 2 of what is kept)."""
    path = csv_file(
        tmp_path / "sick.csv",
        {**TEXTS, "score": [4.5, 1.0, 3.0], "label": ["entailment", "contradiction", "neutral"]},
    )
    assert read_table(path).to_dict() == {**TEXTS, "score": [4.5, 1.0, 3.0], "label": [0, 2, 1]}
    nli = csv_file(tmp_path / "nli.csv", {**TEXTS, "label": ["-", "neutral", "entailment"]})
    with pytest.raises(DataFormatError) as caught:
        read_table(nli, score_range=(0.0, 1.0))
    assert message(caught) == (
        f"{nli}: row 3, column 'label': score 2 is outside score_range [0, 1] (1 of 3 rows are)"
    )


def test_columns_of_numbers_beside_named_texts_are_not_read():
    """The triplets ``sts-mine --scores`` writes: texts by name, two columns of cosines
    that are neither texts nor a label."""
    from sts_core.data import find_columns

    names = ["anchor", "positive", "negative", "positive_score", "negative_score"]

    def numbers(columns):
        return {"positive_score", "negative_score"} & set(columns)

    found = find_columns(names, None, "mined.csv", numbers=numbers)
    assert found == {"sentence1": "anchor", "sentence2": "positive", "hard_negative": "negative"}


@pytest.mark.real_data
def test_the_real_snli_and_multinli_csvs_read_by_path_as_their_registry_readers(sts_data_dir):
    """The shared data's SNLI dev (a label of class names and '-') and MultiNLI dev CSVs,
    given by path, are tables whose class names are NLI classes: the rows, classes and
    scores of the NLI reader the registry uses."""
    from sts_core.data import read_nli_csv

    for relative in (
        "nli/snli-devtest-raw/snli_1.0_dev.csv",
        "nli/mnli-dev/multinli_1.0_dev_matched.goldonly.csv",
    ):
        path = sts_data_dir / relative
        by_path = load_pairs(path)
        assert by_path.to_dict() == read_nli_csv(path).to_dict(), relative
        assert len(by_path) > 9000
