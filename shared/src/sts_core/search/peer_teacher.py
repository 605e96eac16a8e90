"""The teacher, given to the peer: sentence-transformers' own API, as its examples use it.

Our rows get a teacher through the run's ``teacher_model`` step
(``sts_core.training.distill``). The peer's rows (``sts-search``'s ``st:<row>`` with
``teacher_model``, :mod:`sts_core.search.peers`; the quality benchmark's peer rows) get the
same teacher the way a sentence-transformers user would wire it by hand, from its examples:

- **relabelled and augmented pairs** (Augmented SBERT, Thakur et al., 2021; the library's
  ``examples/sentence_transformer/training/data_augmentation``): the teacher, a
  ``SentenceTransformer``, embeds the distinct training sentences once; each gold pair's
  label becomes ``w · cos(t(s₁), t(s₂)) + (1 − w) · label`` (``teacher_weight`` w), and with
  ``teacher_neighbours`` k each sentence is paired with its k nearest other training
  sentences by ``util.semantic_search`` (a pair already in the set, or met before, is
  skipped), labelled by the teacher's cosine alone. Any loss over scores
  (``CosineSimilarityLoss``, ``CoSENTLoss``) then trains on them — the very pairs and
  labels our teacher step makes (checked by ``shared/tests/test_search_peer_teacher_step.py``).
- **a cross-encoder teacher** (Augmented SBERT's in-domain example with semantic-search
  sampling): a sentence-transformers ``CrossEncoder`` labels the gold pairs
  (``w · CrossEncoder.predict + (1 − w) · label``) and the silver pairs the bi-encoder
  proposes — here the student as it starts, found by the same semantic-search rule — as our
  run does with a cross-encoder ``teacher_model`` (the same test checks it).
- **embedding distillation** (``EmbedDistillLoss``, and ``MSELoss``'s metric through it):
  the distinct training sentences with the teacher's embeddings as labels; a student of
  another width (all-MiniLM-L6-v2: 384, an mpnet teacher: 768) learns through the loss's
  ``projection_dim`` layer, as its docstring shows for cross-dimensional distillation.

sentence-transformers (the optional ``sts-core[peers]`` extra) is imported by each function
that needs it, never by this module.
"""

from __future__ import annotations

from typing import Any

from sts_core.data.columns import column_array, column_list

#: the recipe keys of the teacher that the peer's rows take too (``--set`` / ``--grid``)
TEACHER_KEYS = ("teacher_model", "teacher_weight", "teacher_neighbours")


def load_peer_teacher(location: str) -> Any:
    """The teacher as the peer loads it: a sentence-transformers model on the CPU."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(location, device="cpu")


def distinct_sentences(data: Any) -> list[str]:
    """The sentences of the pairs, each once, in order of first occurrence (sentence1, then
    sentence2 — the order our teacher step reads them in)."""
    return list(dict.fromkeys([*column_list(data, "sentence1"), *column_list(data, "sentence2")]))


def is_cross_encoder(location: str) -> bool:
    """A folder a sentence-transformers user would load as a ``CrossEncoder`` (a sequence
    classifier with one output)."""
    from sts_core.cross_encoder import cross_encoder_activation

    return cross_encoder_activation(location) is not None


def load_peer_cross_encoder(location: str) -> Any:
    """The cross-encoder teacher as the peer loads it, on the CPU."""
    from sentence_transformers import CrossEncoder

    return CrossEncoder(location, device="cpu")


def relabelled_pairs(
    teacher: Any,
    data: Any,
    label_column: str,
    weight: float = 1.0,
    neighbours: int = 0,
    batch_size: int = 64,
    cross_encoder: Any = None,
) -> Any:
    """``data`` with labels ``weight · teacher cosine + (1 − weight) · label`` and, with
    ``neighbours`` k, each sentence's k nearest other sentences as new pairs labelled by the
    teacher alone (Augmented SBERT's semantic-search sampling). Given a ``cross_encoder``,
    its ``predict`` is the teacher's score and ``teacher`` (a bi-encoder) only proposes
    the neighbours."""
    import numpy as np

    sentences = distinct_sentences(data)
    index = {sentence: i for i, sentence in enumerate(sentences)}
    vectors = teacher.encode(
        sentences, batch_size=batch_size, normalize_embeddings=True, convert_to_tensor=True
    )
    left, right = column_list(data, "sentence1"), column_list(data, "sentence2")
    first = [index[s] for s in left]
    second = [index[s] for s in right]
    if cross_encoder is None:
        scores = (vectors[first] * vectors[second]).sum(dim=1).double().numpy()
    else:
        pairs = list(zip(left, right, strict=True))
        scores = np.asarray(cross_encoder.predict(pairs, batch_size=batch_size), np.float64)
    gold = column_array(data, label_column)
    relabelled = data.remove_columns(label_column).add_column(
        label_column, (weight * scores + (1 - weight) * gold).tolist()
    )
    if not neighbours:
        return relabelled
    return with_neighbour_pairs(
        relabelled,
        vectors,
        sentences,
        (first, second),
        label_column,
        neighbours,
        cross_encoder,
        batch_size,
    )


def with_neighbour_pairs(
    relabelled: Any,
    vectors: Any,
    sentences: list[str],
    gold_pairs: tuple[list[int], list[int]],
    label_column: str,
    neighbours: int,
    cross_encoder: Any,
    batch_size: int,
) -> Any:
    """``relabelled`` followed by each sentence's ``neighbours`` nearest other sentences by
    ``util.semantic_search`` (a gold pair, or a pair met before, skipped), labelled by their
    cosine or by the cross-encoder's ``predict``."""
    from datasets import Dataset, concatenate_datasets
    from sentence_transformers import util

    from sts_core.training.distill import PAIR_COLUMNS

    taken = {frozenset(pair) for pair in zip(*gold_pairs, strict=True)}
    pick = min(len(sentences) - 1, 2 * neighbours + 2) + 1  # the sentence itself comes first
    found_pairs: dict[str, list] = {PAIR_COLUMNS[0]: [], PAIR_COLUMNS[1]: [], label_column: []}
    for row, hits in enumerate(util.semantic_search(vectors, vectors, top_k=pick)):
        found = 0
        for hit in hits:
            other = int(hit["corpus_id"])
            key = frozenset((row, other))
            if found == neighbours or len(key) < 2 or key in taken:
                continue
            taken.add(key)
            found_pairs[PAIR_COLUMNS[0]].append(sentences[row])
            found_pairs[PAIR_COLUMNS[1]].append(sentences[other])
            found_pairs[label_column].append(float(hit["score"]))
            found += 1
    if cross_encoder is not None and found_pairs[label_column]:
        silver = list(zip(found_pairs[PAIR_COLUMNS[0]], found_pairs[PAIR_COLUMNS[1]], strict=True))
        found_pairs[label_column] = [
            float(score) for score in cross_encoder.predict(silver, batch_size=batch_size)
        ]
    extra = Dataset.from_dict(found_pairs, features=relabelled.features)
    return concatenate_datasets([relabelled, extra])


def embedding_targets(teacher: Any, data: Any, batch_size: int = 64) -> Any:
    """The distinct sentences of ``data``'s pairs, each with the teacher's embedding as its
    ``label`` (``EmbedDistillLoss``'s input: one text column, labels (n, teacher width))."""
    from datasets import Dataset

    sentences = distinct_sentences(data)
    vectors = teacher.encode(sentences, batch_size=batch_size, convert_to_numpy=True)
    return Dataset.from_dict({"sentence": sentences, "label": vectors.tolist()})


def teacher_width(teacher: Any) -> int:
    return int(teacher.get_embedding_dimension())
