"""The peer's teacher step (``sts_core.search.peer_teacher``, sentence-transformers' API) makes
the same training set as ours (``sts_core.training.distill.apply_teacher``): the same pairs,
in the same order, with the same labels — so a peer row given the teacher trains on exactly
what our row trains on. And the distillation targets are the teacher's embeddings."""

from __future__ import annotations

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
