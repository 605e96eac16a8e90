"""The Arrow checks of a table (``sts_core.data.arrow_checks``) against the row-by-row
reading they stand in for: every good table comes out the same (values, types, order);
every table with a bad value, or of a kind they do not cover, is left to the row reading,
which names the row, the column and the value."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from datasets import Dataset, Features, Value

from sts_core.data.arrow_checks import vectorised_table
from sts_core.data.errors import DataFormatError
from sts_core.data.tables import (
    READ,
    find_columns,
    normalise_table,
    number_columns,
    read_row_by_row,
    scored_reading,
)

TEXTS = {"sentence1": ["a man", " a dog\u3000", "\x1cthe cat\t"], "sentence2": ["b", "c ", "d"]}


def strings(columns: dict[str, list[Any]]) -> Dataset:
    """A table as a CSV reads: every column text."""
    return Dataset.from_dict(columns, features=Features({n: Value("string") for n in columns}))


GOOD = {
    "text scores, every form of number": strings({**TEXTS, "score": ["+3", " 5. ", ".5e1"]}),
    "more number forms": strings({**TEXTS, "score": ["-0", "004", "1E+0"]}),
    "float scores": Dataset.from_dict({**TEXTS, "score": [0.5, 4.25, 3.0]}),
    "integer scores": Dataset.from_dict({**TEXTS, "score": [0, 5, 3]}),
    "an integer label only": Dataset.from_dict({**TEXTS, "label": [0, 4, 2]}),
    "a float label only": Dataset.from_dict({**TEXTS, "label": [0.5, 4.0, 2.0]}),
    "an integral float label only": Dataset.from_dict({**TEXTS, "label": [1.0, 4.0, 2.0]}),
    "text labels only": strings({**TEXTS, "label": ["1", "0", "1"]}),
    "text scores and labels": strings(
        {**TEXTS, "score": ["0.5", "1", "2"], "label": ["1", "0", "1"]}
    ),
    "integer scores and a label": Dataset.from_dict(
        {**TEXTS, "score": [1, 4, 2], "label": [0, 1, 1]}
    ),
    "a score and a label": Dataset.from_dict(
        {**TEXTS, "score": [0.1, 0.9, 0.5], "label": [0, 1, 1]}
    ),
    "a triplet": strings(
        {"anchor": ["a", "b", "c"], "positive": ["d", "e", "f"], "negative": [" g", "h ", "i"]}
    ),
    "single sentences": Dataset.from_dict({"sentence": ["x", "y", "z"], "label": [1, 0, 1]}),
    "texts in order": strings({"q": ["a", "b", "c"], "p": ["d", "e", "f"], "s": ["1", "2", "3"]}),
}


def found_columns(table: Dataset, reading: Any = READ) -> dict[str, str]:
    return find_columns(
        table.column_names, None, "t.csv", reading, lambda names: number_columns(table, names)
    )


def both_readings(
    table: Dataset, score_range: Any = None, reading: Any = READ
) -> tuple[Dataset | None, Dataset]:
    found = found_columns(table, reading)
    fast = vectorised_table(table, found, "t.csv", score_range, lambda out: None)
    return fast, read_row_by_row(table, found, "t.csv", score_range, reading)


@pytest.mark.parametrize("name", list(GOOD))
def test_the_arrow_checks_read_a_good_table_as_the_row_reading_does(name: str) -> None:
    fast, rows = both_readings(GOOD[name], score_range=(-1.0, 5.0))
    assert fast is not None, "the Arrow checks left a good table to the row reading"
    assert fast.features == rows.features
    assert fast.info.description == rows.info.description == ""
    assert fast.to_dict() == rows.to_dict()
    assert normalise_table(GOOD[name], "t.csv").to_dict() == rows.to_dict()


BAD = {
    "a missing text": (strings({**TEXTS, "sentence2": ["b", None, "d"], "score": ["1"] * 3}), 2),
    "a blank text": (strings({**TEXTS, "sentence2": ["b", "c", " \u3000"], "score": ["1"] * 3}), 3),
    "a text that is a number": (
        Dataset.from_dict({"sentence1": ["a", "b", "c"], "sentence2": [1, 2, 3], "score": [1] * 3}),
        None,
    ),
    "a decimal comma": (strings({**TEXTS, "score": ["1", "1,5", "2"]}), 2),
    "nan": (strings({**TEXTS, "score": ["1", "2", "nan"]}), 3),
    "an overflowing number": (strings({**TEXTS, "score": ["1e999", "2", "3"]}), 1),
    "a missing number": (strings({**TEXTS, "score": ["1", "", "3"]}), 2),
    "a NaN float": (Dataset.from_dict({**TEXTS, "score": [1.0, float("nan"), 3.0]}), 2),
    "a missing label beside the score": (
        Dataset.from_dict({**TEXTS, "score": [0.1, 0.2, 0.3], "label": [0, None, 1]}),
        2,
    ),
    "a label alone that is no number": (strings({**TEXTS, "label": ["1", "x", "0"]}), 2),
    "a missing label alone": (strings({**TEXTS, "label": ["1", None, "0"]}), 2),
    "a label beside the score that is no integer": (
        Dataset.from_dict({**TEXTS, "score": [0.1, 0.2, 0.3], "label": [0, 1.5, 1]}),
        2,
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_value_is_left_to_the_row_reading_which_names_it(name: str) -> None:
    table, row = BAD[name]
    found = found_columns(table) if row is not None else {"sentence1": "sentence1"}
    if row is not None:
        assert vectorised_table(table, found, "t.csv", None, lambda out: None) is None
        with pytest.raises(DataFormatError) as error:
            normalise_table(table, "t.csv")
        assert f"row {row}, column" in str(error.value)
        with pytest.raises(DataFormatError) as by_rows:
            read_row_by_row(table, found, "t.csv", None, READ)
        assert str(by_rows.value) == str(error.value)
    else:  # a column of numbers is not found as a text: the table is refused before
        with pytest.raises(DataFormatError):
            normalise_table(
                table, "t.csv", columns={"sentence1": "sentence1", "sentence2": "sentence2"}
            )


def test_tables_the_arrow_checks_do_not_cover_are_read_row_by_row() -> None:
    """NLI classes, a ranking set's query ids, an integer beyond 2**53 as a score, and a
    dataset with an indices mapping (a selection of rows) are read row by row, the same."""
    big = Dataset.from_dict({**TEXTS, "score": [2**60, 1, 2]})
    found = found_columns(big)
    assert vectorised_table(big, found, "t.csv", None, lambda out: None) is None
    assert normalise_table(big, "t.csv")["score"] == [float(2**60), 1.0, 2.0]
    selected = Dataset.from_dict({**TEXTS, "score": [1.0, 2.0, 3.0]}).select([2, 0])
    found = found_columns(selected)
    assert vectorised_table(selected, found, "t.csv", None, lambda out: None) is None
    assert normalise_table(selected, "t.csv")["score"] == [3.0, 1.0]
    ranked = strings({**TEXTS, "score": ["1", "0", "1"], "query_id": ["q1", "q1", "q2"]})
    assert vectorised_table(ranked, found_columns(ranked), "t.csv", None, lambda out: None) is None
    assert normalise_table(ranked, "t.csv")["query_id"] == [0, 0, 1]


def test_a_score_outside_the_range_is_named_as_the_row_reading_names_it() -> None:
    table = Dataset.from_dict({**TEXTS, "score": [1.0, 7.5, 9.0]})
    found = found_columns(table)
    with pytest.raises(DataFormatError) as fast:
        vectorised_table(table, found, "t.csv", (0.0, 5.0), lambda out: None)
    with pytest.raises(DataFormatError) as rows:
        read_row_by_row(table, found, "t.csv", (0.0, 5.0), READ)
    assert str(fast.value) == str(rows.value)
    assert "row 2, column 'score': score 7.5 is outside score_range [0, 5] (2 of 3 rows are)" in (
        str(fast.value)
    )


def test_integer_labels_like_nli_classes_are_named_in_one_warning(caplog) -> None:
    table = Dataset.from_dict({**TEXTS, "label": [0, 1, 2]})
    with caplog.at_level(logging.WARNING, logger="sts_core.data"):
        read = normalise_table(table, "t.csv", reading=scored_reading("eval_columns"))
    assert read["label"] == [0, 1, 2] and read["score"] == [0.0, 1.0, 2.0]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "holds the integers 0, 1, 2" in warnings[0]


FORMS = ["1.", "+.5", "1E5", "-0", "1e-3", " 7 ", ".", "-", "+", "1e", "1e+", "0x1", "1d"]
FORMS += ["1f", "1 2", "1.2.3", "Infinity", "inf", "-inf", "nan", "NaN", "-.e1", ".e1", "1e5.5"]
FORMS += ["1_000", "1,000", "0,5", "\u0663", "1e999", "", " ", "\u00bd", "+-1", "--1", "1e--1"]


@pytest.mark.parametrize("form", FORMS)
def test_the_arrow_checks_take_a_number_exactly_when_the_one_rule_does(form: str) -> None:
    """A text score is taken by the Arrow checks exactly when ``parse_number`` reads it,
    as the same value."""
    from sts_core.data._io import is_number, parse_number

    table = strings({**TEXTS, "score": ["1", form, "2"]})
    fast = vectorised_table(table, found_columns(table), "t.csv", None, lambda out: None)
    assert (fast is not None) == is_number(form)
    if fast is not None:
        assert fast["score"][1] == parse_number(form)
