"""Batch construction for the BSC loss (§3.2): orders of the training pairs whose
consecutive chunks are the batches, so each batch holds groups of similar pairs (hard
negatives for each other).

Every function returns a permutation of ``range(n)`` (nothing lost or repeated) and is
deterministic for a given ``numpy.random.Generator`` state.

* :func:`example_based_order` — Algorithm 1: k-NN over the current model's embeddings of
  the first (or second) elements (faiss ``IndexFlatL2``), the top-``n`` candidates of each
  example, groups of the example and its ``s − 1`` nearest unused candidates, visited in a
  random order; the sequence is reversed so that the 1-element groups left at the end
  (simple batches) come first, as in curriculum learning.
* :func:`group_by_shingles` — Algorithm 2's grouping: sort by shingle, a new group at each
  new shingle and when a group reaches ``s`` members, groups in a random order. Its
  shingles: :func:`word_shingles` (a random subset of ``t`` non-stop-words),
  :func:`cluster_shingles` (the k-means cluster, faiss), :func:`neighbour_shingles` (a
  random subset of ``t`` of the positions of the example's ``k`` nearest neighbours).
* :func:`random_order` and :func:`original_order` for comparison.

faiss-cpu is used (sts-core's ``faiss`` extra); with faiss-gpu installed and a GPU visible
the k-NN search and k-means run on the GPUs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from sts_core.extras import require

logger = logging.getLogger(__name__)

SHUFFLES = ("example", "words", "clusters", "neighbours", "random", "original")
#: the shuffles that embed the data with the current model at every epoch
NEEDS_EMBEDDINGS = ("example", "clusters", "neighbours")
#: the shuffles that search with faiss (k-NN, k-means): sts-core's ``faiss`` extra
NEEDS_FAISS = ("example", "clusters", "neighbours")
WORD = re.compile(r"\w+")


def _faiss() -> Any:  # the faiss module (no type information)
    return require("faiss", feature="BSC's example-based, cluster and neighbour shuffling")


def check_shuffle_dependencies(method: str) -> None:
    """Before any weights load: ValueError (one line, naming sts-core's ``faiss`` extra)
    when shuffle ``method`` searches with faiss and faiss cannot be imported here."""
    if method not in NEEDS_FAISS:
        return
    try:
        _faiss()
    except ImportError as error:
        cause = error.__cause__ or error
        raise ValueError(
            f"shuffle {method!r} needs faiss, which cannot be imported here ({cause}): "
            "pip install 'sts-core[faiss]' (faiss-cpu, a dependency of sts-bsc), or use a "
            "shuffle without faiss (words, random, original)"
        ) from error


def _flat_index(vectors: np.ndarray) -> Any:
    """A faiss ``IndexFlatL2`` over ``vectors`` (on every GPU when faiss-gpu has one)."""
    faiss = _faiss()
    index = faiss.IndexFlatL2(vectors.shape[1])
    if hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0:
        index = faiss.index_cpu_to_all_gpus(index)
    index.add(vectors)
    return index


def nearest_neighbours(vectors: np.ndarray, k: int) -> np.ndarray:
    """``(n, min(k, n − 1))`` indices of each row's nearest other rows (L2), nearest first.
    Rows with identical vectors are neighbours at distance 0; a row is never its own."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n = vectors.shape[0]
    k = min(k, n - 1)
    if k <= 0:
        return np.empty((n, 0), dtype=np.int64)
    _, found = _flat_index(vectors).search(vectors, k + 1)
    result = np.empty((n, k), dtype=np.int64)
    for row in range(n):  # drop the row itself (not always first when rows are equal)
        others = found[row][(found[row] != row) & (found[row] >= 0)]
        result[row] = others[:k]
    return result


def example_based_order(
    vectors: np.ndarray,
    group_size: int,
    candidates: int,
    rng: np.random.Generator,
    reverse: bool,
) -> np.ndarray:
    """Algorithm 1 over ``vectors`` (one per pair): see the module docstring."""
    n = len(vectors)
    neighbours = nearest_neighbours(vectors, candidates)
    used = np.zeros(n, dtype=bool)
    order: list[int] = []
    for example in rng.permutation(n):
        if used[example]:
            continue
        row = neighbours[example]
        group = [int(example), *row[~used[row]][: group_size - 1].tolist()]
        used[group] = True
        order.extend(group)
    result = np.asarray(order, dtype=np.int64)
    return result[::-1].copy() if reverse else result


def group_by_shingles(
    shingles: Sequence[Hashable], group_size: int, rng: np.random.Generator
) -> np.ndarray:
    """Algorithm 2's grouping: rows (visited in a random order) sorted by shingle; a new
    group starts at each new shingle and when the current one has ``group_size`` rows;
    the groups are then put in a random order (the paper's random uint64 group ids,
    without collisions). The paper's pseudo-code resets the size counter only when a group
    is full; here a new shingle starts a new count too, so every group is one shingle."""
    n = len(shingles)
    visit = rng.permutation(n)
    keys = [shingles[i] for i in visit]
    by_shingle = visit[sorted(range(n), key=lambda i: keys[i])]
    group_of = np.empty(n, dtype=np.int64)
    group, size, previous = -1, 0, object()  # the first row starts a group
    for row in by_shingle:
        if size >= group_size or shingles[row] != previous:
            group, size = group + 1, 0
        group_of[row] = group
        size += 1
        previous = shingles[row]
    rank = rng.permutation(group + 1)
    return by_shingle[np.argsort(rank[group_of[by_shingle]], kind="stable")]


def _random_subset(items: Sequence[Hashable], size: int, rng: np.random.Generator) -> tuple:
    """A random subset of ``size`` of ``items`` (all when fewer), sorted: the shingle."""
    if len(items) <= size:
        return tuple(sorted(items))
    chosen = rng.choice(len(items), size=size, replace=False)
    return tuple(sorted(items[i] for i in chosen))


def word_shingles(
    texts: Sequence[str], shingle_size: int, rng: np.random.Generator
) -> list[tuple[str, ...]]:
    """Per text: a random subset of ``shingle_size`` of its distinct lower-cased words that
    are not English stop-words (scikit-learn's list); all its words when it has none
    other."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    shingles = []
    for text in texts:
        words = sorted(set(WORD.findall(text.lower())))
        content = [w for w in words if w not in ENGLISH_STOP_WORDS] or words
        shingles.append(_random_subset(content, shingle_size, rng))
    return shingles


def cluster_shingles(vectors: np.ndarray, num_clusters: int, seed: int) -> list[tuple[int]]:
    """Per row: its k-means cluster (faiss, ``min(num_clusters, n)`` centroids, 20
    iterations), as a one-word shingle."""
    faiss = _faiss()
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    k = max(1, min(num_clusters, len(vectors)))
    kmeans = faiss.Kmeans(
        vectors.shape[1], k, niter=20, seed=seed, gpu=faiss.get_num_gpus() > 0, verbose=False
    )
    kmeans.cp.min_points_per_centroid = 1  # small data: no warning, no subsampling
    kmeans.train(vectors)
    _, assigned = kmeans.index.search(vectors, 1)
    return [(int(cluster),) for cluster in assigned[:, 0]]


def neighbour_shingles(
    vectors: np.ndarray, neighbours: int, shingle_size: int, rng: np.random.Generator
) -> list[tuple[int, ...]]:
    """Per row: a random subset of ``shingle_size`` of the positions of the row and its
    ``neighbours`` nearest rows (its "sentence" of neighbour positions)."""
    found = nearest_neighbours(vectors, neighbours)
    return [
        _random_subset([row, *found[row].tolist()], shingle_size, rng) for row in range(len(found))
    ]


def random_order(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.permutation(n).astype(np.int64)


def original_order(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int64)


def shuffle_order(
    method: str,
    texts: Sequence[str],
    vectors: np.ndarray | None,
    rng: np.random.Generator,
    *,
    group_size: int,
    candidates: int,
    shingle_size: int,
    num_clusters: int,
    shingle_neighbours: int,
    reverse: bool,
    seed: int,
) -> np.ndarray:
    """The order of ``method`` (one of :data:`SHUFFLES`) for rows with these texts (and,
    for :data:`NEEDS_EMBEDDINGS`, these vectors). The settings are ``BscConfig``'s fields
    (``candidates`` is ``shuffle_candidates``, ``reverse`` is ``reverse_groups``; ``seed``
    seeds k-means); the ones a method does not use are ignored."""
    n = len(texts)
    if method in NEEDS_EMBEDDINGS and (vectors is None or len(vectors) != n):
        raise ValueError(f"shuffle {method} needs one vector per row ({n})")
    if method == "example":
        assert vectors is not None  # checked above, as for every method that embeds
        return example_based_order(vectors, group_size, candidates, rng, reverse)
    if method == "words":
        return group_by_shingles(word_shingles(texts, shingle_size, rng), group_size, rng)
    if method == "clusters":
        assert vectors is not None
        return group_by_shingles(cluster_shingles(vectors, num_clusters, seed), group_size, rng)
    if method == "neighbours":
        assert vectors is not None
        shingles = neighbour_shingles(vectors, shingle_neighbours, shingle_size, rng)
        return group_by_shingles(shingles, group_size, rng)
    if method == "random":
        return random_order(n, rng)
    if method == "original":
        return original_order(n)
    raise ValueError(f"shuffle {method!r} is not one of {', '.join(SHUFFLES)}")


def chunk(order: np.ndarray, batch_size: int) -> list[list[int]]:
    """Consecutive chunks of ``batch_size`` (the last one shorter): the batches."""
    return [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]
