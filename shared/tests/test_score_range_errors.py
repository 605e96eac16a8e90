"""``score_range`` checked against the scores it rescales (issue 44): a score outside it stops
the run with one line naming the file (or dataset), the row and the column, exit status 2,
under ``--check_only`` and without it, before any weights load."""

from __future__ import annotations

from pathlib import Path

import pytest
from datasets import Dataset

from sts_core.data import DataConfigError, DataFormatError
from sts_core.testing import write_fixture_recipe
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
DEV = FIXTURES / "sts-dev.csv"


def pairs_file(path: Path, rows: int, bad_row: int | None = None, bad: float = 7.5) -> Path:
    """CoSENT's ``sentence1 \\t sentence2 \\t score`` (no header: row N is line N); the
    1-based ``bad_row`` scored ``bad``, the others in [0, 5]."""
    lines = [
        f"A sentence number {i}.\tAnother sentence, {i}.\t{bad if i == bad_row else (i % 6) * 0.8}"
        for i in range(1, rows + 1)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("check_only", ["true", "false"])
def test_a_training_score_outside_score_range_names_its_file_row_and_column(
    tiny_bert_nodropout_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    check_only: str,
) -> None:
    """The second of two training files holds 7.5 on its 40th line: the line names that
    file and row 40 (not the merged set's row 59, nor no file at all)."""
    good = pairs_file(tmp_path / "good.tsv", 20)
    bad = pairs_file(tmp_path / "bad.tsv", 45, bad_row=40)
    recipe = write_fixture_recipe(
        tmp_path / "r.yaml", "score_range", tiny_bert_nodropout_dir, good, DEV,
        tmp_path / "out", train_datasets=f"[{good}, {bad}]", score_range="[0, 5]",
        check_only=check_only,
    )  # fmt: skip
    assert main(["--config", str(recipe)]) == 2
    line = one_line_error(capsys)
    assert line == (
        f"error: {bad}: row 40, column 'score': score 7.5 is outside score_range [0, 5] "
        "(1 of 45 rows are)"
    )
    assert not (tmp_path / "out").exists()  # stopped before the output folder


def test_a_dev_score_outside_score_range_names_the_dev_file(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = pairs_file(tmp_path / "train.tsv", 10)
    dev = pairs_file(tmp_path / "dev.tsv", 12, bad_row=3, bad=-1.0)
    recipe = write_fixture_recipe(
        tmp_path / "r.yaml", "score_range", tiny_bert_nodropout_dir, train, dev,
        tmp_path / "out", score_range="[0, 5]", check_only="true",
    )  # fmt: skip
    assert main(["--config", str(recipe)]) == 2
    assert f"error: {dev}: row 3, column 'score': score -1 is outside" in one_line_error(capsys)


def test_a_label_mapping_onto_scores_outside_score_range_is_one_line(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``label_mapping`` on the score column every score becomes a mapped value: one
    outside ``score_range`` is named with the mapping."""
    train = tmp_path / "train.tsv"
    train.write_text("".join(f"first {i}\tsecond {i}\t{i % 2}\n" for i in range(10)), "utf-8")
    recipe = write_fixture_recipe(
        tmp_path / "r.yaml", "score_range", tiny_bert_nodropout_dir, train, DEV,
        tmp_path / "out", score_range="[0, 5]", label_mapping="{0: 0, 1: 7.5}",
        check_only="true",
    )  # fmt: skip
    assert main(["--config", str(recipe)]) == 2
    line = one_line_error(capsys)
    assert "label_mapping maps 1 → 7.5: outside score_range [0, 5]" in line


def test_check_score_range_counts_the_rows_read_and_needs_a_score_column() -> None:
    from sts_core.data import check_score_range  # (new: imported here, so the other tests
    # of this file run against code without it)

    scores = Dataset.from_dict({"sentence1": ["a"] * 4, "sentence2": ["b"] * 4,
                                "score": [0.0, 5.0, 5.5, -2.0]})  # fmt: skip
    check_score_range(scores.select(range(2)), (0.0, 5.0), "f.tsv")  # bounds inclusive
    with pytest.raises(DataFormatError) as error:
        check_score_range(scores, (0.0, 5.0), "f.tsv")
    assert str(error.value) == (
        "f.tsv: row 3, column 'score': score 5.5 is outside score_range [0, 5] (2 of 4 rows are)"
    )
    triplets = Dataset.from_dict({"sent0": ["a"], "sent1": ["b"], "hard_neg": ["c"]})
    with pytest.raises(DataConfigError, match="score_range: t.csv has no score column"):
        check_score_range(triplets, (0.0, 5.0), "t.csv")
