"""sts-search's choice by dev alone (sts_core.search.select), checked on made-up cells in
which the seeds rank the recipes differently and the dev pick is not the test-best."""

from __future__ import annotations

import random
import statistics

import pytest

from sts_core.search.select import (
    format_score,
    headline,
    method_picks,
    overall_pick,
    pick_dev,
    seed_summary,
)

# method -> recipe -> seed -> (dev, test). At seed 0 (the selection seed) A's best recipe is
# a2 and B's is b1, b1 being best overall; at seed 1 a1 beats a2 and b2 beats b1, and on the
# test table a1 and b2 are the best: a search that looked at seed 1 or at the test table
# would pick otherwise.
TABLE = {
    "A": {
        "a1": {0: (80.0, 79.5), 1: (83.0, 80.9)},
        "a2": {0: (81.0, 77.0), 1: (78.0, 76.2)},
    },
    "B": {
        "b1": {0: (82.0, 75.0), 1: (79.0, 74.4)},
        "b2": {0: (79.0, 81.0), 1: (84.0, 82.0)},
    },
}


def records(with_test: bool = True) -> list[dict]:
    rows = []
    for method, recipes in TABLE.items():
        for recipe, seeds in recipes.items():
            for seed, (dev, test) in seeds.items():
                row = {"method": method, "recipe": recipe, "seed": seed, "dev": dev}
                if with_test:
                    row["test"] = test
                rows.append(row)
    return rows


def by_hand_pick(seed: int) -> tuple[dict[str, str], str]:
    """Each method's argmax of dev at ``seed``, and the argmax over those, written out."""
    picks = {}
    for method, recipes in TABLE.items():
        picks[method] = max(recipes, key=lambda recipe: recipes[recipe][seed][0])
    best = max(picks.values(), key=lambda r: TABLE[r[0].upper()][r][seed][0])
    return picks, best


def test_each_method_and_the_overall_pick_are_the_dev_argmax_at_the_selection_seed() -> None:
    picks = method_picks(records(), selection_seed=0)
    assert picks == by_hand_pick(0)[0] == {"A": "a2", "B": "b1"}
    assert overall_pick(records(), picks, 0) == by_hand_pick(0)[1] == "b1"
    # the other seed ranks them otherwise: selecting there gives other picks
    assert method_picks(records(), 1) == by_hand_pick(1)[0] == {"A": "a1", "B": "b2"}


def test_the_test_table_never_changes_a_pick() -> None:
    without = method_picks(records(with_test=False), 0)
    assert method_picks(records(), 0) == without
    rng = random.Random(0)
    for _ in range(20):  # any test scores at all
        shuffled = [{**r, "test": rng.uniform(-100, 100)} for r in records()]
        picks = method_picks(shuffled, 0)
        assert picks == without
        assert overall_pick(shuffled, picks, 0) == "b1"


def test_several_selection_seeds_pick_by_the_mean_dev_of_recipes_trained_on_all() -> None:
    means = {
        recipe: statistics.fmean(dev for dev, _ in seeds.values())
        for recipes in TABLE.values()
        for recipe, seeds in recipes.items()
    }
    assert means == {"a1": 81.5, "a2": 79.5, "b1": 80.5, "b2": 81.5}
    picks = method_picks(records(), [0, 1])
    assert picks == {"A": "a1", "B": "b2"}
    assert overall_pick(records(), picks, [0, 1]) == "a1"  # tied at 81.5: A is listed first
    assert overall_pick(records(), {"B": "b2", "A": "a1"}, (0, 1)) == "b2"
    # a recipe lacking one of the seeds is no candidate
    partial = [r for r in records() if (r["recipe"], r["seed"]) != ("a1", 1)]
    assert method_picks(partial, [0, 1]) == {"A": "a2", "B": "b2"}
    assert method_picks(records(), [0]) == method_picks(records(), 0)
    assert method_picks(records(), []) == {}


def test_a_tie_goes_to_the_recipe_first_in_the_grid() -> None:
    tied = [
        {"method": "A", "recipe": "first", "seed": 0, "dev": 70.0},
        {"method": "A", "recipe": "second", "seed": 0, "dev": 70.0},
        {"method": "B", "recipe": "third", "seed": 0, "dev": 70.0},
    ]
    picks = method_picks(tied, 0)
    assert picks == {"A": "first", "B": "third"}
    assert overall_pick(tied, picks, 0) == "first"


def test_a_method_without_a_cell_at_the_selection_seed_has_no_pick() -> None:
    rows = [r for r in records() if not (r["method"] == "B" and r["seed"] == 0)]
    assert method_picks(rows, 0) == {"A": "a2"}


def test_the_seed_summary_is_the_mean_and_sample_sd_of_the_runs() -> None:
    runs = [r for r in records() if r["recipe"] == "b1"]
    summary = seed_summary(runs, [0, 1, 2])
    assert summary["seeds"] == [0, 1]
    assert summary["missing_seeds"] == [2]
    assert summary["dev"][0] == pytest.approx((82.0 + 79.0) / 2)
    assert summary["dev"][1] == pytest.approx(statistics.stdev([82.0, 79.0]))
    assert summary["test"][0] == pytest.approx((75.0 + 74.4) / 2)
    # a run without a test score: no test summary rather than a mean of some runs
    assert "test" not in seed_summary([runs[0], {**runs[1], "test": None}], [0, 1])
    assert format_score((81.234, None)) == "81.23"
    assert format_score((81.234, 0.456)) == "81.23 ± 0.46"


def test_the_headline_names_the_pick_its_seeds_and_the_margin_over_the_runner_up() -> None:
    text = headline(records(), 0, [0, 1], "spearman")
    dev_mean, dev_sd = 80.5, statistics.stdev([82.0, 79.0])
    test_mean, test_sd = 74.7, statistics.stdev([75.0, 74.4])
    assert text == (
        "Pick (by dev spearman at seed 0): b1 — dev 82.00; over seeds [0, 1]: "
        f"dev {dev_mean:.2f} ± {dev_sd:.2f}, test {test_mean:.2f} ± {test_sd:.2f}. "
        "Runner-up: a2 — dev 81.00 (+1.00)."
    )
    assert headline([], 0, [0], "spearman").startswith("No cell has a dev score")


def test_a_run_without_a_dev_score_is_never_picked_and_is_counted_apart() -> None:
    """A diverged run (or one whose embeddings the scorer cannot score) is a finished cell
    with ``dev`` None: the next recipe is picked, and the seeds say which run failed."""
    rows = [*records(), {"method": "B", "recipe": "b3", "seed": 0, "dev": None}]
    assert method_picks(rows, 0) == {"A": "a2", "B": "b1"}
    only_failed = [{"method": "C", "recipe": "c1", "seed": 0, "dev": None}]
    assert method_picks(only_failed, 0) == {}
    runs = [r for r in records() if r["recipe"] == "b1"]
    summary = seed_summary(
        [*runs, {"method": "B", "recipe": "b1", "seed": 2, "dev": None}], [0, 1, 2]
    )
    assert summary["seeds"] == [0, 1] and summary["failed_seeds"] == [2]
    assert summary["missing_seeds"] == []
    assert summary["dev"][0] == pytest.approx(80.5)


def test_found_by_mutation_single_runs_late_seeds_and_the_runner_up_among_ties() -> None:
    # one run: its mean and no sd (a sample sd of one value does not exist)
    one = seed_summary([{"method": "A", "recipe": "a", "seed": 0, "dev": 70.0}], [0])
    assert one["dev"] == (70.0, None)
    assert format_score(None) == "–"
    # a recipe without a run at the selection seed, met first, does not end the search
    rows = [
        {"method": "A", "recipe": "late", "seed": 1, "dev": 99.0},
        {"method": "A", "recipe": "early", "seed": 0, "dev": 50.0},
    ]
    assert method_picks(rows, 0) == {"A": "early"}
    # the runner-up is the best other pick by dev; a tie goes to the method listed first
    tied = [
        *records(),
        {"method": "C", "recipe": "c9", "seed": 0, "dev": 81.0},
        {"method": "D", "recipe": "d0", "seed": 0, "dev": 60.0},
    ]
    assert headline(tied, 0, [0], "spearman").endswith("Runner-up: a2 — dev 81.00 (+1.00).")


def test_a_pick_has_its_selection_dev_and_a_recipe_without_one_is_refused() -> None:
    runs = [
        {"recipe": "r", "method": "m", "seed": 0, "dev": 80.0},
        {"recipe": "r", "method": "m", "seed": 1, "dev": None},
    ]
    assert pick_dev(runs, 0) == 80.0
    with pytest.raises(ValueError, match="r: no dev score at seeds"):
        pick_dev(runs, [0, 1])
