"""Test-overlap filtering, rescaling and merging (regression paper, Appendix A)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from datasets import Dataset

from sts_core.data import (
    FilterReport,
    filter_test_overlap,
    load_filtered_stsb_sick,
    load_test_sets,
    merge_datasets,
    rescale_scores,
    sick_to_sts,
)
from sts_core.names import STS_TASKS

FIXTURES = Path(__file__).parent / "fixtures" / "data"


def pairs(*rows: tuple[str, str, float]) -> Dataset:
    """A small pair dataset."""
    s1, s2, score = zip(*rows, strict=True)
    return Dataset.from_dict({"sentence1": list(s1), "sentence2": list(s2), "score": list(score)})


@pytest.fixture
def real_data_dir() -> Path:
    """The real benchmark folder, or skip."""
    data_dir = os.environ.get("STS_DATA_DIR") or pytest.skip(
        "STS_DATA_DIR not set: point it at the benchmark data folder (../shared/data)"
    )
    return Path(data_dir)


# --------------------------------------------------------------------------- filter


def test_filter_hand_made_example(caplog):
    test_sets = {
        "sts12": pairs(("a", "b", 5.0), ("c", "d", 1.0)),
        "stsb": pairs(("d", "c", 2.0), ("e", "f", 3.0)),  # (c, d) is also here, swapped
        "sickr": pairs(("g", "h", 4.0)),
    }
    train = pairs(
        ("a", "b", 0.0),  # same order as sts12, different score: removed (sts12)
        ("b", "a", 4.0),  # swapped order: removed (sts12)
        ("c", "d", 3.0),  # in sts12 and (swapped) in stsb: removed once, counted under both
        ("a", "h", 2.0),  # sentences occur, but not as a pair: kept
        ("h", "g", 1.0),  # swapped sickr pair: removed (sickr)
        ("x", "y", 2.5),  # kept
        ("a", "b", 1.0),  # duplicate training row: removed too
    )
    with caplog.at_level(logging.INFO, logger="sts_core.data"):
        kept, report = filter_test_overlap(train, test_sets)
    assert kept.to_dict() == {
        "sentence1": ["a", "x"],
        "sentence2": ["h", "y"],
        "score": [2.0, 2.5],
    }
    assert report == FilterReport(
        kept=2, removed=5, removed_by_source={"sts12": 4, "stsb": 1, "sickr": 1}
    )
    assert report.total == 7
    assert report.to_dict() == {
        "kept": 2,
        "removed": 5,
        "removed_by_source": {"sts12": 4, "stsb": 1, "sickr": 1},
        "total": 7,
    }
    assert str(report) == (
        "kept 2 of 7 training pairs, removed 5 found in test sets (sts12: 4, stsb: 1, sickr: 1)"
    )
    assert "test-overlap filter: kept 2 of 7" in caplog.text


def test_pairs_whose_texts_hold_the_key_joining_character_are_matched_pair_by_pair():
    """The filter matches pairs by Arrow over keys joining a pair's two texts with a NUL;
    where a text holds a NUL, two different pairs could make one key, so those tables are
    matched pair by pair: ("a\\0b", "c") is not the test pair ("a", "b\\0c")."""
    test_sets = {"sts12": pairs(("a", "b\x00c", 1.0), ("x", "y", 2.0))}
    train = pairs(("a\x00b", "c", 0.0), ("y", "x", 1.0), ("a", "b\x00c", 3.0))
    kept, report = filter_test_overlap(train, test_sets)
    assert kept["sentence1"] == ["a\x00b"]
    assert report == FilterReport(kept=1, removed=2, removed_by_source={"sts12": 2})


def test_the_filter_reads_a_selection_of_rows_in_its_order():
    train = pairs(("a", "b", 0.0), ("c", "d", 1.0), ("e", "f", 2.0)).select([2, 1, 0])
    kept, report = filter_test_overlap(train, {"sts12": pairs(("d", "c", 1.0))})
    assert kept["sentence1"] == ["e", "a"] and report.removed_by_source == {"sts12": 1}


def test_filter_nothing_to_remove():
    train = pairs(("a", "b", 1.0))
    kept, report = filter_test_overlap(train, {"sts12": pairs(("a", "c", 1.0))})
    assert len(kept) == 1
    assert report.removed == 0
    assert report.removed_by_source == {"sts12": 0}


def test_filtered_stsb_sick_on_fixtures():
    kept, report = load_filtered_stsb_sick(FIXTURES)
    # stsb #1 = sts12 pair; stsb #3 = stsb test pair swapped; sick #1 = sickr test pair
    # swapped and an sts14 pair; sick #3 is an unscored (empty gold) sts16 pair: kept
    assert report.to_dict() == {
        "kept": 4,
        "removed": 3,
        "removed_by_source": {
            "sts12": 1, "sts13": 0, "sts14": 1, "sts15": 0, "sts16": 0, "stsb": 1, "sickr": 1,
        },
        "total": 7,
    }  # fmt: skip
    assert kept["source"] == ["stsb", "stsb", "sickr", "sickr"]
    assert kept["score"] == [3.0, 3.5, 4.75, 2.5]  # SICK 4.8 and 3.0 on the 0-5 scale
    assert kept["sentence1"][3] == "Nobody is riding a bike"


def test_load_test_sets_fixtures():
    test_sets = load_test_sets(FIXTURES, "raw")
    assert tuple(test_sets) == STS_TASKS
    assert [len(ds) for ds in test_sets.values()] == [3, 3, 3, 2, 2, 2, 2]


# --------------------------------------------------------------------------- rescaling, merging


def test_rescale_scores_linear_keeps_columns():
    ds = Dataset.from_dict({"sentence1": ["a", "b"], "score": [0.0, 5.0], "label": [1, 2]})
    out = rescale_scores(ds, (0.0, 5.0))
    assert out.column_names == ["sentence1", "score", "label"]
    assert out["score"] == [0.0, 1.0]
    assert out.features["score"].dtype == "float64"
    assert rescale_scores(ds, (0, 5), (-1, 1))["score"] == [-1.0, 1.0]


def test_rescale_scores_errors():
    ds = pairs(("a", "b", 6.0))
    with pytest.raises(ValueError, match="row 0: score 6 outside source range"):
        rescale_scores(ds, (0.0, 5.0))
    with pytest.raises(ValueError, match="is empty"):
        rescale_scores(ds, (5.0, 5.0))


def test_sick_to_sts():
    ds = pairs(("a", "b", 1.0), ("c", "d", 3.0), ("e", "f", 4.2), ("g", "h", 5.0))
    assert sick_to_sts(ds)["score"] == pytest.approx([0.0, 2.5, 4.0, 5.0])


def test_merge_datasets_common_columns_and_source():
    stsb = Dataset.from_dict(
        {"sentence1": ["a"], "sentence2": ["b"], "score": [4.0], "genre": ["news"]}
    )
    sick = Dataset.from_dict({"sentence1": ["c"], "sentence2": ["d"], "score": [2], "label": [1]})
    merged = merge_datasets(stsb, sick, names=["stsb", "sickr"])
    assert merged.to_dict() == {
        "sentence1": ["a", "c"],
        "sentence2": ["b", "d"],
        "score": [4.0, 2.0],
        "source": ["stsb", "sickr"],
    }
    assert merged.features["score"].dtype == "float64"
    assert merge_datasets(stsb, sick)["source"] == ["0", "1"]
    assert merge_datasets(merged, stsb, names=["x", "y"])["source"] == ["stsb", "sickr", "y"]


def test_merge_datasets_errors():
    ds = pairs(("a", "b", 1.0))
    with pytest.raises(ValueError, match="2 datasets but 1 names"):
        merge_datasets(ds, ds, names=["one"])
    with pytest.raises(ValueError, match="lacks column"):
        merge_datasets(ds.remove_columns("score"), names=["x"])


# --------------------------------------------------------------------------- real data


@pytest.mark.real_data
@pytest.mark.parametrize("variant", ["senteval", "raw"])
def test_real_filter_keeps_5398(real_data_dir, variant):
    kept, report = load_filtered_stsb_sick(real_data_dir, variant)
    assert len(kept) == report.kept == 5398
    assert report.total == 5749 + 4500
    assert set(kept["source"]) == {"stsb", "sickr"}
    assert min(kept["score"]) >= 0.0
    assert max(kept["score"]) <= 5.0


def test_column_list_reads_a_column_in_order_through_a_selection() -> None:
    """The values of a column as a list, in the dataset's order: after a selection (rows
    reordered, an indices mapping over the table), and from a mapping of lists."""
    from datasets import Dataset

    from sts_core.data.columns import column_list

    table = Dataset.from_dict({"s": [f"s{i}" for i in range(10)], "x": [i / 2 for i in range(10)]})
    picked = table.select([7, 2, 2, 9])
    assert column_list(picked, "s") == ["s7", "s2", "s2", "s9"]
    assert column_list(picked, "x") == [3.5, 1.0, 1.0, 4.5]
    assert column_list({"s": ["a", "b"]}, "s") == ["a", "b"]


def test_column_array_reads_numbers_as_column_list_does_through_a_selection() -> None:
    """The numbers of a column as float64, read from Arrow: the same values, in the same
    order, as the list (a selection's order; ints; a missing value as nan)."""
    import numpy as np
    from datasets import Dataset

    from sts_core.data.columns import column_array, column_list

    data = Dataset.from_dict({"score": [0.5, None, 2.25, 4.0], "label": [3, 1, 2, 0]})
    selected = data.select([3, 0, 2, 1])
    for dataset in (data, selected, {"score": [0.5, None], "label": [1, 2]}):
        for name in ("score", "label"):
            array = column_array(dataset, name)
            expected = np.asarray(column_list(dataset, name), dtype=np.float64)
            assert array.dtype == np.float64
            np.testing.assert_array_equal(array, expected)
    assert column_array(selected, "label").tolist() == [0.0, 3.0, 2.0, 1.0]
