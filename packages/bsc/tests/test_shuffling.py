"""§3.2's batch construction: every shuffle is a permutation (nothing lost or repeated),
deterministic under a seed; example-based groups are nearest neighbours and the order is
reversed; shingle groups hold one shingle and at most ``s`` rows; the trainer rebuilds the
batches at every epoch from the current model."""

from __future__ import annotations

import numpy as np
import pytest

from sts_bsc.shuffling import (
    SHUFFLES,
    chunk,
    example_based_order,
    group_by_shingles,
    nearest_neighbours,
    shuffle_order,
    word_shingles,
)

WORDS = "apple river guitar planet violin desert harbor engine garden marble".split()


def clustered(groups: int = 6, size: int = 4, d: int = 8, seed: int = 0) -> np.ndarray:
    """``groups`` tight clusters of ``size`` points, far apart: row r is in cluster r // size."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=100.0, size=(groups, d))
    return np.repeat(centres, size, axis=0) + rng.normal(scale=0.01, size=(groups * size, d))


def texts(n: int) -> list[str]:
    """Sentences sharing one content word in groups of 3 (the rest stop-words)."""
    return [f"the {WORDS[i // 3 % len(WORDS)]} is in it {i}" for i in range(n)]


#: BscConfig's defaults, but for the group size, candidates and clusters of these tests
SETTINGS = {
    "group_size": 4,
    "candidates": 10,
    "shingle_size": 1,
    "num_clusters": 6,
    "shingle_neighbours": 5,
    "reverse": True,
}


def order_of(method: str, seed: int, n: int = 24) -> np.ndarray:
    return shuffle_order(
        method, texts(n), clustered(), np.random.default_rng(seed), **SETTINGS, seed=seed
    )


@pytest.mark.parametrize("method", SHUFFLES)
def test_every_shuffle_is_a_permutation_and_deterministic_under_a_seed(method: str) -> None:
    first = order_of(method, seed=1)
    assert sorted(first.tolist()) == list(range(24))
    assert np.array_equal(first, order_of(method, seed=1))
    if method != "original":
        assert any(not np.array_equal(first, order_of(method, s)) for s in (2, 3, 4))


def test_nearest_neighbours_never_return_the_row_itself_even_for_equal_rows() -> None:
    vectors = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [5.0, 5.0]])
    found = nearest_neighbours(vectors, 2)
    for row in range(4):
        assert row not in found[row]
    assert set(found[0]) == {1, 2}


def test_example_based_groups_are_neighbours_and_the_order_is_reversed() -> None:
    vectors = clustered(groups=6, size=4)
    forward = example_based_order(vectors, 4, 10, np.random.default_rng(7), reverse=False)
    groups = forward.reshape(6, 4)  # every cluster is a group of 4, found by k-NN
    assert all(len(set((g // 4).tolist())) == 1 for g in groups)
    reversed_ = example_based_order(vectors, 4, 10, np.random.default_rng(7), reverse=True)
    assert np.array_equal(reversed_, forward[::-1])


def test_example_based_is_a_permutation_when_candidates_run_out() -> None:
    """With n = 1 candidate an example whose one neighbour is taken forms a group alone."""
    order = example_based_order(clustered(2, 3), 3, 1, np.random.default_rng(0), reverse=False)
    assert sorted(order.tolist()) == list(range(6))


def test_shingle_groups_hold_one_shingle_and_at_most_s_rows() -> None:
    shingles = [("a",)] * 7 + [("b",)] * 2 + [("c",)] * 3
    order = group_by_shingles(shingles, 3, np.random.default_rng(0))
    assert sorted(order.tolist()) == list(range(12))
    runs = []  # maximal runs of one shingle in the order
    for row in order:
        if runs and shingles[runs[-1][-1]] == shingles[row]:
            runs[-1].append(row)
        else:
            runs.append([row])
    sizes = sorted(len(run) for run in runs)
    # 'a' (7 rows) → groups 3, 3, 1; groups of one shingle may sit side by side
    assert sum(sizes) == 12 and all(shingles[r[0]] == shingles[r[-1]] for r in runs)
    assert sizes.count(2) >= 1


def test_word_shingles_skip_stop_words() -> None:
    (shingle,) = word_shingles(["The guitar is on the table"], 1, np.random.default_rng(0))
    assert shingle[0] in {"guitar", "table"}


def test_words_shuffle_puts_rows_sharing_their_content_word_together() -> None:
    sentences = [f"the {WORDS[i // 3]} and it" for i in range(9)]
    settings = {**SETTINGS, "group_size": 3}
    order = shuffle_order("words", sentences, None, np.random.default_rng(0), **settings, seed=0)
    assert all(len({sentences[r] for r in g}) == 1 for g in order.reshape(3, 3).tolist())


def test_cluster_shuffle_groups_within_clusters() -> None:
    vectors = clustered(groups=4, size=3)
    settings = {**SETTINGS, "group_size": 3, "num_clusters": 4}
    order = shuffle_order(
        "clusters", ["x"] * 12, vectors, np.random.default_rng(0), **settings, seed=0
    )
    assert all(len(set((g // 3).tolist())) == 1 for g in order.reshape(4, 3))


def test_shuffles_that_embed_need_vectors() -> None:
    with pytest.raises(ValueError, match="needs one vector per row"):
        shuffle_order("example", ["a", "b"], None, np.random.default_rng(0), **SETTINGS, seed=0)


def test_chunk_keeps_a_short_last_batch() -> None:
    assert chunk(np.arange(7), 3) == [[0, 1, 2], [3, 4, 5], [6]]
