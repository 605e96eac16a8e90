"""§3.2's batch construction against references written here from the paper's algorithms
(same random draws, so the orders must be equal element for element): Algorithm 1
(example-based groups), Algorithm 2's grouping by shingles, the random subsets that make
shingles, brute-force k-NN, and faiss k-means with the documented settings; the dtypes and
shapes returned, and the messages when faiss is missing. Found by the mutation pass
(``tools/mutation.py``)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from sts_bsc import shuffling
from sts_bsc.shuffling import (
    _random_subset,
    check_shuffle_dependencies,
    cluster_shingles,
    example_based_order,
    group_by_shingles,
    nearest_neighbours,
    original_order,
    random_order,
    shuffle_order,
)


def brute_force_neighbours(vectors: np.ndarray, k: int) -> np.ndarray:
    """Each row's k nearest other rows by L2 distance (distinct distances here)."""
    distances = ((vectors[:, None, :] - vectors[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(distances, np.inf)
    return np.argsort(distances, axis=1, kind="stable")[:, :k]


def algorithm_1(vectors, group_size, candidates, rng, reverse) -> list[int]:
    """Visit the examples in a random order; an unused example and its group_size − 1
    nearest unused candidates (of its `candidates` nearest) form a group."""
    n = len(vectors)
    near = brute_force_neighbours(vectors, min(candidates, n - 1))
    used, order = set(), []
    for example in rng.permutation(n):
        if example in used:
            continue
        group = [int(example)] + [int(j) for j in near[example] if j not in used][: group_size - 1]
        used.update(group)
        order += group
    return order[::-1] if reverse else order


def algorithm_2_grouping(shingles, group_size, rng) -> list[int]:
    """Rows in a random order, sorted by shingle (stable); a new group at each new shingle
    and after group_size rows; the groups in a random order, rows kept in their order."""
    n = len(shingles)
    visit = list(rng.permutation(n))
    rows = sorted(visit, key=lambda row: shingles[row])  # stable: visit order within a key
    groups: list[list[int]] = []
    for row in rows:
        if not groups or len(groups[-1]) == group_size or shingles[groups[-1][-1]] != shingles[row]:
            groups.append([])
        groups[-1].append(int(row))
    rank = rng.permutation(len(groups))
    return [row for g in sorted(range(len(groups)), key=lambda g: rank[g]) for row in groups[g]]


@pytest.mark.parametrize("group_size", [1, 2, 3, 8])
@pytest.mark.parametrize("seed", [0, 5])
def test_grouping_by_shingles_is_algorithm_2(group_size: int, seed: int) -> None:
    draw = np.random.default_rng(100 + seed)
    shingles = [(str(w),) for w in draw.integers(0, 6, size=200)]  # runs longer than s
    got = group_by_shingles(shingles, group_size, np.random.default_rng(seed))
    expected = algorithm_2_grouping(shingles, group_size, np.random.default_rng(seed))
    assert got.tolist() == expected and got.dtype == np.int64


@pytest.mark.parametrize("reverse", [True, False])
def test_example_based_order_is_algorithm_1(reverse: bool) -> None:
    vectors = np.random.default_rng(1).normal(size=(40, 6))
    got = example_based_order(vectors, 4, 7, np.random.default_rng(3), reverse=reverse)
    assert got.tolist() == algorithm_1(vectors, 4, 7, np.random.default_rng(3), reverse)
    assert got.dtype == np.int64


@pytest.mark.parametrize("k", [1, 3, 29, 40])
def test_nearest_neighbours_are_the_brute_force_ones(k: int) -> None:
    vectors = np.random.default_rng(2).normal(size=(30, 5))  # float64: converted for faiss
    found = nearest_neighbours(vectors, k)
    assert found.dtype == np.int64 and found.shape == (30, min(k, 29))
    assert found.tolist() == brute_force_neighbours(vectors, min(k, 29)).tolist()


@pytest.mark.parametrize(("n", "k"), [(30, 0), (1, 5)])
def test_no_neighbour_to_find_gives_an_empty_int_array(n: int, k: int) -> None:
    found = nearest_neighbours(np.ones((n, 3)), k)
    assert found.shape == (n, 0) and found.dtype == np.int64


def test_a_random_subset_draws_only_when_it_must() -> None:
    """All items (sorted) without a draw when there are no more than asked; else the
    sorted items at rng.choice(len, size, replace=False)."""
    items = ["d", "b", "a", "c"]
    rng = np.random.default_rng(4)
    assert _random_subset(items, 4, rng) == ("a", "b", "c", "d")
    assert rng.random() == np.random.default_rng(4).random()  # nothing drawn
    chosen = np.random.default_rng(9).choice(4, size=3, replace=False)
    assert _random_subset(items, 3, np.random.default_rng(9)) == tuple(
        sorted(items[i] for i in chosen)
    )
    for seed in range(20):  # never a repeated item
        assert len(set(_random_subset(items, 3, np.random.default_rng(seed)))) == 3


def test_clusters_are_faiss_kmeans_with_the_documented_settings(capfd) -> None:
    """20 iterations, min(num_clusters, n) centroids, the seed, one point per centroid is
    enough (no warning on small data), quiet; float64 input converted."""
    faiss = pytest.importorskip("faiss")
    vectors = np.random.default_rng(5).normal(size=(1000, 2))  # not converged by 20
    got = cluster_shingles(vectors, 100, seed=11)
    data = np.ascontiguousarray(vectors, dtype=np.float32)
    kmeans = faiss.Kmeans(2, 100, niter=20, seed=11, verbose=False)
    kmeans.cp.min_points_per_centroid = 1
    kmeans.train(data)
    _, assigned = kmeans.index.search(data, 1)
    assert got == [(int(c),) for c in assigned[:, 0]]
    assert cluster_shingles(vectors[:1], 7, seed=11) == [(0,)]
    assert len(set(cluster_shingles(vectors[:15], 10, seed=11))) == 10  # 1.5 points a centroid
    assert capfd.readouterr() == ("", "")  # no progress, no "please provide … points"


def test_random_and_original_orders() -> None:
    got = random_order(9, np.random.default_rng(6))
    assert got.tolist() == np.random.default_rng(6).permutation(9).tolist()
    assert got.dtype == np.int64
    assert original_order(4).tolist() == [0, 1, 2, 3] and original_order(4).dtype == np.int64


SETTINGS = {
    "group_size": 2,
    "candidates": 3,
    "shingle_size": 1,
    "num_clusters": 2,
    "shingle_neighbours": 1,
    "reverse": True,
    "seed": 0,
}


@pytest.mark.parametrize(
    ("method", "vectors", "message"),
    [
        (
            "sorted",
            None,
            "shuffle 'sorted' is not one of example, words, clusters, neighbours, random, original",
        ),
        ("clusters", np.ones((2, 3)), "shuffle clusters needs one vector per row (3)"),
    ],
)
def test_a_bad_shuffle_is_refused_with_its_whole_message(method, vectors, message) -> None:
    with pytest.raises(ValueError) as error:
        shuffle_order(method, ["a", "b", "c"], vectors, np.random.default_rng(0), **SETTINGS)
    assert str(error.value) == message


@pytest.mark.parametrize("reverse", [True, False])
def test_shuffle_order_passes_reverse_on(reverse: bool) -> None:
    vectors = np.random.default_rng(7).normal(size=(12, 3))
    settings = {**SETTINGS, "reverse": reverse}
    got = shuffle_order("example", ["x"] * 12, vectors, np.random.default_rng(1), **settings)
    assert got.tolist() == algorithm_1(vectors, 2, 3, np.random.default_rng(1), reverse)


@pytest.fixture
def faiss_missing(monkeypatch):
    real = importlib.import_module

    def import_module(name, *args, **kwargs):
        if name == "faiss":
            raise ImportError("No module named 'faiss'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr("sts_core.extras.importlib.import_module", import_module)


def test_without_faiss_the_searches_name_the_extra(faiss_missing) -> None:
    with pytest.raises(ImportError) as error:
        nearest_neighbours(np.ones((3, 2)), 1)
    assert str(error.value) == (
        "BSC's example-based, cluster and neighbour shuffling needs the optional package "
        "'faiss': install it with `pip install 'sts-core[faiss]'` (or `uv sync --extra faiss`)"
    )


@pytest.mark.parametrize("method", shuffling.NEEDS_FAISS)
def test_without_faiss_a_shuffle_that_needs_it_is_refused_early(faiss_missing, method) -> None:
    with pytest.raises(ValueError) as error:
        check_shuffle_dependencies(method)
    assert str(error.value) == (
        f"shuffle {method!r} needs faiss, which cannot be imported here (No module named "
        "'faiss'): pip install 'sts-core[faiss]' (faiss-cpu, a dependency of sts-bsc), or use "
        "a shuffle without faiss (words, random, original)"
    )


@pytest.mark.parametrize("method", ["words", "random", "original"])
def test_without_faiss_the_other_shuffles_pass(faiss_missing, method) -> None:
    check_shuffle_dependencies(method)
