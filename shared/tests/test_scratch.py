"""Tables read batch by batch from their Arrow files (``sts_core.data.scratch``), the
process's scratch folder for those files, and the Arrow checks over several batches: the
same rows, values and messages as one piece or row by row, the checked table a file of its
own, every folder removed when its process ends."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from datasets import Dataset, concatenate_datasets

from sts_core.data import scratch, tables
from sts_core.data.errors import DataFormatError
from sts_core.data.filtering import filter_test_overlap
from sts_core.data.scratch import has_own_files, record_batches, scratch_folder
from sts_core.data.tables import normalise_table, read_table


def arrow_file(path: Path, columns: dict[str, list[Any]], rows_per_batch: int) -> Dataset:
    """``columns`` written as an Arrow stream of small batches (as ``datasets`` writes a
    table it reads, 1,000 rows each), memory-mapped by ``Dataset.from_file``."""
    table = pa.table(columns)
    with pa.ipc.new_stream(str(path), table.schema) as writer:
        for batch in table.to_batches(max_chunksize=rows_per_batch):
            writer.write_batch(batch)
    return Dataset.from_file(str(path))


COLUMNS = {
    "sentence1": [f" first {n}" for n in range(23)],
    "sentence2": [f"second {n} " for n in range(23)],
    "score": [f"{n % 6}" for n in range(23)],
}


@pytest.mark.parametrize("rows", [1, 4, 5, 23, 100])
def test_batches_from_the_files_are_the_rows_in_order_and_of_the_size_asked(
    tmp_path: Path, rows: int
) -> None:
    table = arrow_file(tmp_path / "t.arrow", COLUMNS, rows_per_batch=3)
    assert has_own_files(table)
    batches = list(islice(record_batches(table, ["score", "sentence1"], rows), 200))
    assert [b.num_rows for b in batches[:-1]] == [rows] * (len(batches) - 1)
    assert 0 < batches[-1].num_rows <= rows
    read = pa.Table.from_batches(batches).to_pydict()
    assert read == {"score": COLUMNS["score"], "sentence1": COLUMNS["sentence1"]}


def test_a_table_that_is_not_exactly_its_files_is_sliced(tmp_path: Path) -> None:
    table = arrow_file(tmp_path / "t.arrow", COLUMNS, rows_per_batch=3)
    others = {
        "rows selected": table.select([5, 2, 9]),
        "every row, in another order": table.select(range(22, -1, -1)),
        "a slice": Dataset(table.data.slice(4, 7)),
        "renamed": table.rename_column("score", "s").rename_column("s", "score"),
        "in memory": Dataset.from_dict(COLUMNS),
    }
    for name, other in others.items():
        assert not has_own_files(other), name
        read = pa.Table.from_batches(list(record_batches(other, ["sentence1"], 2)))
        assert read.column("sentence1").to_pylist() == other["sentence1"][:], name
    chosen = table.select_columns(["score"])  # a choice of columns keeps its file
    assert has_own_files(chosen)
    twice = concatenate_datasets([table, table])
    assert has_own_files(twice)
    read = pa.Table.from_batches(list(record_batches(twice, ["score"], 4)))
    assert read.column("score").to_pylist() == COLUMNS["score"] * 2


def test_a_table_from_a_file_is_checked_batch_by_batch_into_a_file_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = normalise_table(Dataset.from_dict(COLUMNS), "t.csv", score_range=(0.0, 5.0))
    assert not expected.cache_files  # a table in memory gives a table in memory
    monkeypatch.setattr(scratch, "BATCH_ROWS", 4)
    table = arrow_file(tmp_path / "t.arrow", COLUMNS, rows_per_batch=3)
    checked = normalise_table(table, "t.csv", score_range=(0.0, 5.0))
    assert checked.to_dict() == expected.to_dict()
    assert checked.features == expected.features
    (file,) = checked.cache_files
    assert Path(file["filename"]).is_relative_to(scratch_folder())


def test_a_bad_value_in_a_later_batch_is_named_by_its_row_in_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scratch, "BATCH_ROWS", 4)
    monkeypatch.setattr(tables, "read_row_by_row", not_read_row_by_row)
    before = set(scratch_folder().glob("checked-*"))
    bad = {**COLUMNS, "score": [*COLUMNS["score"][:17], "x", *COLUMNS["score"][18:]]}
    table = arrow_file(tmp_path / "t.arrow", bad, rows_per_batch=3)
    with pytest.raises(DataFormatError, match=r"row 18, column 'score'"):
        normalise_table(table, "t.csv")
    outside = {**COLUMNS, "score": [*COLUMNS["score"][:13], "9", *COLUMNS["score"][14:]]}
    table = arrow_file(tmp_path / "u.arrow", outside, rows_per_batch=3)
    with pytest.raises(DataFormatError, match=r"row 14, column 'score': score 9 is outside"):
        normalise_table(table, "t.csv", score_range=(0.0, 5.0))
    assert set(scratch_folder().glob("checked-*")) == before  # no checked file of a failure


def not_read_row_by_row(*args: Any) -> None:
    raise AssertionError("the whole table was read row by row to name a bad row")


def test_the_first_bad_row_is_named_where_two_rows_hold_bad_values_in_other_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first row with a bad value, in the order of the rows (here an empty text in
    row 10 comes after a bad score in row 3 of the same batch)."""
    monkeypatch.setattr(tables, "read_row_by_row", not_read_row_by_row)
    bad = {
        "sentence1": [*COLUMNS["sentence1"][:9], " ", *COLUMNS["sentence1"][10:]],
        "sentence2": COLUMNS["sentence2"],
        "score": [*COLUMNS["score"][:2], "1,5", *COLUMNS["score"][3:]],
    }
    table = arrow_file(tmp_path / "t.arrow", bad, rows_per_batch=3)
    with pytest.raises(DataFormatError, match=r"row 3, column 'score'"):
        normalise_table(table, "t.csv")
    with pytest.raises(DataFormatError, match=r"row 3, column 'score'"):
        normalise_table(Dataset.from_dict(bad), "t.csv")  # a table in memory too


def test_a_label_column_is_the_class_only_when_every_batch_holds_integers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scratch, "BATCH_ROWS", 4)
    texts = {"sentence1": COLUMNS["sentence1"], "sentence2": COLUMNS["sentence2"]}
    integers = [n % 3 for n in range(23)]
    late_half = [*integers[:20], 1.5, *integers[21:]]
    for labels, classes in ((integers, integers), (late_half, None)):
        table = arrow_file(tmp_path / f"{classes is None}.arrow", {**texts, "label": labels}, 3)
        checked = normalise_table(table, "t.csv")
        in_memory = normalise_table(Dataset.from_dict({**texts, "label": labels}), "t.csv")
        assert checked.to_dict() == in_memory.to_dict()
        assert checked["score"][:] == [float(label) for label in labels]
        assert ("label" in checked.column_names) == (classes is not None)
        if classes is not None:
            assert checked["label"][:] == classes


def test_the_test_pair_filter_reads_a_table_batch_by_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scratch, "BATCH_ROWS", 4)
    pairs = {"sentence1": [f"a{n}" for n in range(11)], "sentence2": [f"b{n}" for n in range(11)]}
    train = arrow_file(tmp_path / "t.arrow", {**pairs, "score": [1.0] * 11}, rows_per_batch=3)
    test = Dataset.from_dict({"sentence1": ["b9", "a2", "x"], "sentence2": ["a9", "b2", "y"]})
    kept, report = filter_test_overlap(train, {"sts12": test}, log=False)
    assert report.removed == 2 and report.removed_by_source == {"sts12": 2}
    assert kept["sentence1"][:] == [f"a{n}" for n in range(11) if n not in (2, 9)]


def test_reading_a_table_file_leaves_only_its_checked_file(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("sentence1,sentence2,score\na,b,1\nc,d,2\n", encoding="utf-8")
    bad.write_text("sentence1,sentence2,score\na,b,1\nc,d,x\n", encoding="utf-8")
    before = set(scratch_folder().iterdir())
    table = read_table(good)
    with pytest.raises(DataFormatError, match="row 2"):
        read_table(bad)
    (made,) = set(scratch_folder().iterdir()) - before
    assert made.name.startswith("checked-")
    assert [Path(f["filename"]).parent for f in table.cache_files] == [made]


def _folder_of_a_child(queue: Any) -> None:
    queue.put(str(scratch_folder()))


def test_the_scratch_folder_is_removed_when_its_process_ends() -> None:
    code = "from sts_core.data.scratch import scratch_folder; print(scratch_folder())"
    printed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    folder = Path(printed.stdout.strip())
    assert folder.name.startswith("sts-tables-") and not folder.exists()
    ours = scratch_folder()
    assert ours.name.startswith("sts-tables-") and ours.parent == Path(tempfile.gettempdir())
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_folder_of_a_child, args=(queue,))
    child.start()
    childs = Path(queue.get(timeout=60))
    child.join(60)
    assert childs != ours and not childs.exists()  # a child's own folder, removed with it
    assert ours.is_dir()  # not the parent's


def test_ctrl_c_while_a_table_loads_is_an_interrupt_not_a_malformed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pandas' C reader turns a Ctrl-C during its read into a ParserError; the read stops
    with KeyboardInterrupt (the commands' one-line "interrupted"), not "cannot be read"."""
    import datasets

    def interrupted_read(*args: Any, **kwargs: Any) -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the signal's handler raises here
        except KeyboardInterrupt:
            pass  # as pandas' C reader does with it
        raise ValueError("Error tokenizing data. C error: Calling read(nbytes) on source failed")

    table = tmp_path / "pairs.csv"
    table.write_text("sentence1,sentence2,score\na,b,1\n", encoding="utf-8")
    monkeypatch.setattr(datasets, "load_dataset", interrupted_read)
    # Ctrl-C as in a terminal (KeyboardInterrupt), whatever handler an earlier test in this
    # process left (a library's launcher may install its own)
    earlier_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            read_table(table)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    finally:
        signal.signal(signal.SIGINT, earlier_handler)
    monkeypatch.setattr(
        datasets, "load_dataset", lambda *a, **k: (_ for _ in ()).throw(ValueError("bad"))
    )
    with pytest.raises(DataFormatError, match="cannot be read as CSV: ValueError: bad"):
        read_table(table)
