"""The contrastive ceiling: the closed form (eq. 7) and the exact optimum of a two-level
predictor against brute force, ties included; the command."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

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
