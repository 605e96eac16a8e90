"""The peer's teacher step (``sts_core.search.peer_teacher``, sentence-transformers' API) makes
the same training set as ours (``sts_core.training.distill.apply_teacher``): the same pairs,
in the same order, with the same labels — so a peer row given the teacher trains on exactly
what our row trains on. And the distillation targets are the teacher's embeddings."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from datasets import Dataset

from sts_core.search import peer_teacher
from sts_core.testing import TOY_STS_PAIRS
from sts_core.training.distill import apply_teacher, load_teacher

pytest.importorskip("sentence_transformers")


def unit_pairs() -> Dataset:
    first, second, scores = zip(*TOY_STS_PAIRS, strict=True)
    return Dataset.from_dict(
        {"sentence1": list(first), "sentence2": list(second), "score": [s / 5 for s in scores]}
    )


@pytest.mark.parametrize(("weight", "neighbours"), [(1.0, 0), (0.5, 1), (1.0, 2)])
def test_the_peer_gets_the_pairs_and_labels_our_teacher_step_makes(
    tiny_bert_dir, weight: float, neighbours: int
) -> None:
    data = unit_pairs()
    ours, summary = apply_teacher(
        data, load_teacher(str(tiny_bert_dir), "cpu"), "score", weight, 64, neighbours
    )
    theirs = peer_teacher.relabelled_pairs(
        peer_teacher.load_peer_teacher(str(tiny_bert_dir)), data, "score", weight, neighbours
    )
    assert summary.get("neighbour_pairs", 0) == len(ours) - len(data)
    if neighbours:
        assert len(ours) > len(data)  # the neighbours are exercised
    assert theirs["sentence1"] == ours["sentence1"]
    assert theirs["sentence2"] == ours["sentence2"]
    np.testing.assert_allclose(theirs["score"], ours["score"], rtol=0, atol=1e-5)
    gold = np.array(data["score"])
    assert not np.allclose(np.array(ours["score"][: len(data)]), gold)  # relabelled


def test_the_distillation_targets_are_the_teachers_embeddings(tiny_bert_dir) -> None:
    data = unit_pairs()
    teacher = peer_teacher.load_peer_teacher(str(tiny_bert_dir))
    targets = peer_teacher.embedding_targets(teacher, data)
    sentences = list(dict.fromkeys([*data["sentence1"], *data["sentence2"]]))
    assert targets["sentence"] == sentences
    expected = teacher.encode(sentences, convert_to_numpy=True)
    np.testing.assert_allclose(np.array(targets["label"]), expected, rtol=0, atol=1e-6)
    assert peer_teacher.teacher_width(teacher) == expected.shape[1]


@pytest.mark.parametrize(("weight", "neighbours"), [(1.0, 0), (0.5, 1), (1.0, 2)])
def test_the_peer_gets_a_cross_encoders_pairs_and_labels_as_ours(
    tiny_bert_dir, tmp_path, weight: float, neighbours: int
) -> None:
    from sentence_transformers import CrossEncoder

    from sts_core.testing import make_tiny_cross_encoder

    CrossEncoder(str(make_tiny_cross_encoder(tmp_path / "plain", seed=4))).save(
        str(tmp_path / "ce")
    )
    location = str(tmp_path / "ce")  # a sentence-transformers folder: sigmoid scores
    assert peer_teacher.is_cross_encoder(location)
    assert not peer_teacher.is_cross_encoder(str(tiny_bert_dir))
    data = unit_pairs()
    proposer = load_teacher(str(tiny_bert_dir), "cpu")  # the student as it starts
    ours, summary = apply_teacher(
        data, load_teacher(location, "cpu"), "score", weight, 64, neighbours, proposer
    )
    theirs = peer_teacher.relabelled_pairs(
        peer_teacher.load_peer_teacher(str(tiny_bert_dir)),
        data,
        "score",
        weight,
        neighbours,
        cross_encoder=peer_teacher.load_peer_cross_encoder(location),
    )
    assert summary["teacher_kind"] == "cross-encoder"
    if neighbours:
        assert len(ours) > len(data)
    assert theirs["sentence1"] == ours["sentence1"]
    assert theirs["sentence2"] == ours["sentence2"]
    np.testing.assert_allclose(theirs["score"], ours["score"], rtol=0, atol=1e-5)
    plain = peer_teacher.relabelled_pairs(  # the proposer's cosines instead: not the same
        peer_teacher.load_peer_teacher(str(tiny_bert_dir)), data, "score", weight, neighbours
    )
    assert not np.allclose(plain["score"], ours["score"], atol=1e-3)


def test_the_peer_loads_its_teachers_on_the_cpu_even_beside_a_gpu(
    tiny_bert_dir, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sentence-transformers puts a model on CUDA when it sees a GPU; the peer's teachers
    stay on the CPU (as ours do). A GPU is faked: moving to it would fail here."""
    import torch
    from sentence_transformers import CrossEncoder

    from sts_core.testing import make_tiny_cross_encoder

    CrossEncoder(str(make_tiny_cross_encoder(tmp_path / "plain", seed=4))).save(
        str(tmp_path / "ce")
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    teacher = peer_teacher.load_peer_teacher(str(tiny_bert_dir))
    assert teacher.device.type == "cpu"
    cross_encoder = peer_teacher.load_peer_cross_encoder(str(tmp_path / "ce"))
    assert cross_encoder.device.type == "cpu"


class Recording:
    """A teacher (or cross-encoder) that records the batch size of each ``encode`` and
    ``predict`` call and answers as the model it wraps."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.batches: list[tuple[str, int | None]] = []

    def encode(self, *args: Any, **kwargs: Any) -> Any:
        self.batches.append(("encode", kwargs.get("batch_size")))
        return self.model.encode(*args, **kwargs)

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        self.batches.append(("predict", kwargs.get("batch_size")))
        return self.model.predict(*args, **kwargs)


def test_by_default_the_labels_are_the_teachers_cosines_in_batches_of_64(tiny_bert_dir) -> None:
    data = unit_pairs()
    teacher = Recording(peer_teacher.load_peer_teacher(str(tiny_bert_dir)))
    relabelled = peer_teacher.relabelled_pairs(teacher, data, "score")
    assert teacher.batches == [("encode", 64)]
    assert relabelled["sentence1"] == data["sentence1"]  # no neighbour pairs
    assert relabelled["sentence2"] == data["sentence2"]
    first = teacher.model.encode(data["sentence1"], normalize_embeddings=True)
    second = teacher.model.encode(data["sentence2"], normalize_embeddings=True)
    cosines = (first * second).sum(axis=1)
    np.testing.assert_allclose(relabelled["score"], cosines, rtol=0, atol=1e-5)
    targets = peer_teacher.embedding_targets(teacher, data)
    assert teacher.batches[1:] == [("encode", 64)]
    peer_teacher.embedding_targets(teacher, data, batch_size=3)
    assert teacher.batches[2:] == [("encode", 3)]
    assert len(targets) == len(peer_teacher.distinct_sentences(data))


def test_a_cross_encoders_labels_are_mixed_with_the_gold_in_float64(
    tiny_bert_dir, tmp_path
) -> None:
    """``w · predict + (1 − w) · label`` computed in float64 (predict gives float32), each
    call in the batch size given (the gold pairs, then the neighbours)."""
    from sentence_transformers import CrossEncoder

    from sts_core.testing import make_tiny_cross_encoder

    CrossEncoder(str(make_tiny_cross_encoder(tmp_path / "plain", seed=4))).save(
        str(tmp_path / "ce")
    )
    cross_encoder = Recording(peer_teacher.load_peer_cross_encoder(str(tmp_path / "ce")))
    teacher = Recording(peer_teacher.load_peer_teacher(str(tiny_bert_dir)))
    data = unit_pairs()
    relabelled = peer_teacher.relabelled_pairs(
        teacher, data, "score", 0.3, 1, batch_size=5, cross_encoder=cross_encoder
    )
    assert teacher.batches == [("encode", 5)]
    assert cross_encoder.batches == [("predict", 5), ("predict", 5)]
    pairs = list(zip(data["sentence1"], data["sentence2"], strict=True))
    predicted = cross_encoder.model.predict(pairs, batch_size=5)
    assert predicted.dtype == np.float32
    expected = 0.3 * predicted.astype(np.float64) + 0.7 * np.array(data["score"])
    np.testing.assert_array_equal(np.array(relabelled["score"][: len(data)]), expected)
    assert len(relabelled) > len(data)


def neighbour_input(angles: list[float], gold: list[tuple[int, int]]) -> tuple[Any, ...]:
    """Sentences ``s0``, ``s1``, … at unit vectors of the given angles (degrees), and their
    gold pairs as a relabelled table (float32 scores: the new pairs take its types)."""
    import torch
    from datasets import Features, Value

    sentences = [f"s{i}" for i in range(len(angles))]
    radians = torch.tensor(angles, dtype=torch.float64).deg2rad()
    vectors = torch.stack([radians.cos(), radians.sin()], dim=1).float()
    features = Features(
        {"sentence1": Value("string"), "sentence2": Value("string"), "score": Value("float32")}
    )
    relabelled = Dataset.from_dict(
        {
            "sentence1": [sentences[a] for a, _ in gold],
            "sentence2": [sentences[b] for _, b in gold],
            "score": [0.5] * len(gold),
        },
        features=features,
    )
    gold_pairs = ([a for a, _ in gold], [b for _, b in gold])
    return relabelled, vectors, sentences, gold_pairs


def neighbours_of(angles: list[float], gold: list[tuple[int, int]], k: int) -> Any:
    """The new pairs ``with_neighbour_pairs`` adds (the table ahead of them kept as it was)."""
    relabelled, vectors, sentences, gold_pairs = neighbour_input(angles, gold)
    found = peer_teacher.with_neighbour_pairs(
        relabelled, vectors, sentences, gold_pairs, "score", k, None, 64
    )
    assert found.features == relabelled.features
    assert found[: len(gold)] == relabelled[:]
    return found[len(gold) :]  # the new pairs, column by column


def check_pairs(found: Any, angles: list[float], expected: list[tuple[int, int]]) -> None:
    """``found``'s pairs are ``expected`` (sentence indices), each labelled its cosine."""
    pairs = [
        (int(a[1:]), int(b[1:]))
        for a, b in zip(found["sentence1"], found["sentence2"], strict=True)
    ]
    assert pairs == expected
    cosines = [np.cos(np.deg2rad(angles[a] - angles[b])) for a, b in expected]
    np.testing.assert_allclose(found["score"], cosines, rtol=0, atol=1e-6)


def test_with_k_neighbours_each_sentence_looks_at_its_2k_plus_2_nearest_others() -> None:
    """Sentence 0's four nearest others (2k + 2 for k = 1) are its gold pairs: it gets no
    new pair, though sentence 5 (the fifth) is free; the others each take their nearest
    pair not taken yet, in order."""
    angles = [0.0, 10.0, -12.0, 23.0, -27.0, 45.0]
    gold = [(0, 1), (0, 2), (0, 3), (0, 4)]
    found = neighbours_of(angles, gold, 1)
    check_pairs(found, angles, [(1, 3), (2, 4), (3, 5), (4, 1), (5, 1)])


def test_a_sentence_may_pair_with_every_other_one() -> None:
    """k = 2 of three sentences: the window is every other sentence, the farthest too."""
    angles = [0.0, 10.0, 90.0]
    check_pairs(neighbours_of(angles, [], 2), angles, [(0, 1), (0, 2), (1, 2)])


def test_no_new_pair_leaves_the_table_as_it_was() -> None:
    assert neighbours_of([0.0, 10.0], [(0, 1)], 1)["sentence1"] == []


def test_gold_pairs_of_two_lengths_are_refused() -> None:
    relabelled, vectors, sentences, _ = neighbour_input([0.0, 10.0, 20.0], [(0, 1)])
    with pytest.raises(ValueError, match="zip"):
        peer_teacher.with_neighbour_pairs(
            relabelled, vectors, sentences, ([0, 1], [1]), "score", 1, None, 64
        )
