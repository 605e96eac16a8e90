"""The teacher, given to the peer: sentence-transformers' own API, re-exported from the core
for the benchmark's own trainer.

It lives in :mod:`sts_core.search.peer_teacher`, where ``sts-search``'s peer rows with a
teacher use it too; ``grid_search/search.py`` imports it from here."""

from __future__ import annotations

from sts_core.search.peer_teacher import (
    TEACHER_KEYS,
    distinct_sentences,
    embedding_targets,
    is_cross_encoder,
    load_peer_cross_encoder,
    load_peer_teacher,
    relabelled_pairs,
    teacher_width,
    with_neighbour_pairs,
)

__all__ = [
    "TEACHER_KEYS",
    "distinct_sentences",
    "embedding_targets",
    "is_cross_encoder",
    "load_peer_cross_encoder",
    "load_peer_teacher",
    "relabelled_pairs",
    "teacher_width",
    "with_neighbour_pairs",
]
