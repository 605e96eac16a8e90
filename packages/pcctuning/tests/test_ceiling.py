"""The contrastive ceiling: the closed form (eq. 7) and the exact optimum of a two-level
predictor against brute force, ties included; the command."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from sts_core.testing import write_stsb_file
from sts_pcctuning import ceiling as ceiling_module
from sts_pcctuning.ceiling import closed_form_ceiling, contrastive_ceiling, main


def brute_force(gold: np.ndarray) -> tuple[float, float]:
    """Best Spearman (average ranks) over every two-level predictor, and over those that
    are a threshold on the gold score."""
    n = gold.size
    best_any = -1.0
    for mask in itertools.product((0, 1), repeat=n):
        if 0 < sum(mask) < n:
            best_any = max(best_any, spearmanr(gold, mask).statistic)
    best_cut = max(
        spearmanr(gold, (gold > cut).astype(int)).statistic for cut in np.unique(gold)[:-1]
    )
    return float(best_any), float(best_cut)


@pytest.mark.parametrize(
    "gold",
    [
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        [3.2, 0.4, 4.8, 2.2, 1.0, 4.1, 2.9],
        [5.0, 5.0, 5.0, 1.0, 2.0],
        [0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 3.0, 3.0],
        [1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 3.0, 4.0, 4.0],
    ],
)
def test_the_exact_ceiling_equals_brute_force(gold: list[float]) -> None:
    scores = np.asarray(gold)
    best_any, best_cut = brute_force(scores)
    ceiling = contrastive_ceiling(scores)
    assert ceiling.best_two_level == pytest.approx(best_any, abs=1e-12)
    assert ceiling.best_threshold == pytest.approx(best_cut, abs=1e-12)
    assert ceiling.best_two_level >= ceiling.best_threshold


def test_closed_form_is_eq_7_and_tends_to_seven_eighths() -> None:
    assert closed_form_ceiling(2) == pytest.approx((28 - 4) / 24)
    assert closed_form_ceiling(10) == pytest.approx((700 - 4) / (8 * 99))
    assert closed_form_ceiling(10**6) == pytest.approx(0.875, abs=1e-9)


def test_without_ties_the_exact_ceiling_is_below_the_closed_form() -> None:
    """Eq. 7 uses 1 − 6Σd²/(n(n² − 1)), exact only without ties; with the predictor's ties
    ranked as averages (scipy, SentEval) the optimum tends to √3/2."""
    ceiling = contrastive_ceiling(np.arange(2000.0))
    assert ceiling.best_two_level == pytest.approx(np.sqrt(3) / 2, abs=1e-4)
    assert ceiling.threshold_positives == 1000
    assert ceiling.closed_form > ceiling.best_two_level


def test_gold_without_two_scores_is_refused() -> None:
    with pytest.raises(ValueError, match="two pairs with different gold scores"):
        contrastive_ceiling([3.0, 3.0, 3.0])
    with pytest.raises(ValueError, match="at least 2 pairs"):
        closed_form_ceiling(1)


@pytest.mark.real_data
def test_the_command_prints_every_test_set(sts_data_dir: Path, tmp_path: Path, capsys) -> None:
    output = tmp_path / "ceilings.json"
    assert main(["--data-dir", str(sts_data_dir), "--json", str(output)]) == 0
    table = capsys.readouterr().out
    saved = json.loads(output.read_text(encoding="utf-8"))
    assert list(saved) == ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"]
    for task, ceiling in saved.items():
        assert f"| {task} |" in table
        assert 0.8 < ceiling["best_threshold"] <= ceiling["best_two_level"] < 0.9
        assert ceiling["closed_form"] == pytest.approx(closed_form_ceiling(ceiling["pairs"]))


def one_line(err: str) -> str:
    """The single line ``sts-pcc-ceiling: error: …`` on stderr (no traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sts-pcc-ceiling: error: "), err
    return lines[0]


def stsb_folder(root: Path) -> Path:
    """A data folder with a tiny STS-B test set (SentEval layout)."""
    write_stsb_file(root / "senteval" / "STS" / "STSBenchmark" / "sts-test.csv", [0, 1, 2, 3])
    return root


def data_of(tmp_path: Path) -> str:
    """A data folder with a tiny STS-B test set beside (not around) the outputs of a test:
    an output inside the data folder is refused."""
    return str(stsb_folder(tmp_path / "data"))


def test_a_missing_data_folder_is_one_line(tmp_path: Path, capsys) -> None:
    absent = tmp_path / "absent"
    assert main(["--data-dir", str(absent), "--tasks", "stsb"]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(absent) in line and "does not exist" in line


def test_a_missing_task_folder_is_one_line(tmp_path: Path, capsys) -> None:
    data = stsb_folder(tmp_path / "data")
    assert main(["--data-dir", str(data), "--tasks", "stsb", "sts12"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "STS12-en-test" in line and "no such folder" in line


def forbid_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make computing the ceilings fail the test: an output problem must stop it first."""

    def no_work(*args, **kwargs):
        pytest.fail("the ceilings were computed before the output was checked")

    monkeypatch.setattr(ceiling_module, "ceilings_of_tasks", no_work)


def test_a_json_that_is_a_folder_fails_before_any_work(tmp_path: Path, capsys, monkeypatch) -> None:
    forbid_work(monkeypatch)
    folder = tmp_path / "out"
    folder.mkdir()
    argv = ["--data-dir", data_of(tmp_path), "--tasks", "stsb", "--json", str(folder)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert f"--json {folder}" in line and "is a folder" in line
    assert captured.out == ""


def test_a_json_under_a_file_fails_before_any_work(tmp_path: Path, capsys, monkeypatch) -> None:
    forbid_work(monkeypatch)
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    target = blocker / "ceilings.json"
    argv = ["--data-dir", data_of(tmp_path), "--tasks", "stsb", "--json", str(target)]
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert f"--json {target}" in line and "is not a folder" in line


def test_a_json_in_a_missing_folder_is_written(tmp_path: Path, capsys) -> None:
    target = tmp_path / "new" / "deeper" / "ceilings.json"
    argv = ["--data-dir", data_of(tmp_path), "--tasks", "stsb", "--json", str(target)]
    assert main(argv) == 0
    saved = json.loads(target.read_text(encoding="utf-8"))
    assert list(saved) == ["stsb"] and saved["stsb"]["pairs"] == 4
    assert "| stsb | 4 |" in capsys.readouterr().out


def test_a_json_it_wrote_is_replaced_only_with_overwrite(tmp_path: Path, capsys) -> None:
    """``--json`` goes through the one door for a command's files: an earlier ceiling file
    is replaced with ``--overwrite`` only; a file sts-core did not write, never."""
    target = tmp_path / "out" / "ceilings.json"
    argv = ["--data-dir", data_of(tmp_path), "--tasks", "stsb", "--json", str(target)]
    assert main(argv) == 0
    written = target.read_bytes()
    capsys.readouterr()
    assert main(argv) == 2
    assert "pass --overwrite to replace it" in one_line(capsys.readouterr().err)
    assert main([*argv, "--overwrite"]) == 0 and target.read_bytes() == written
    target.write_text("the user's own notes", encoding="utf-8")
    capsys.readouterr()
    assert main([*argv, "--overwrite"]) == 2
    assert "was not written by sts-core" in one_line(capsys.readouterr().err)
    assert target.read_text(encoding="utf-8") == "the user's own notes"
