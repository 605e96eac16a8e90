"""``sts-search``'s in-batch peer rows: ``st:mnsrl`` (sentence-transformers'
MultipleNegativesSymmetricRankingLoss on the pairs scored above 0.6 of the 0–1 scale, scale
10) and ``st:simcse`` (MultipleNegativesRankingLoss on each distinct sentence paired with
itself, scale 20): their settings, the data each trains on and its loss, against the
definitions written out here."""

from __future__ import annotations

import pytest
from datasets import Dataset

from sts_core.search.peers import in_batch_data, peer_loss, peer_settings
from sts_core.search.spec import SearchError

pytest.importorskip("sentence_transformers")

PAIRS = Dataset.from_dict(
    {
        "sentence1": ["a cat", "a dog", "a cat", "rain"],
        "sentence2": ["the cat", "a bird", "snow", "a dog"],
        "score": [0.9, 0.6, 0.61, 0.1],
    }
)


def test_mnsrl_takes_the_pairs_above_the_threshold_without_their_scores() -> None:
    settings = peer_settings("st:mnsrl", "mnsrl", [0.0, 5.0])
    assert settings["loss"] == "MultipleNegativesSymmetricRankingLoss"
    assert settings["score_range"] == [0.0, 5.0] and settings["positives_above"] == 0.6
    data = in_batch_data(settings, PAIRS)
    assert data.column_names == ["sentence1", "sentence2"]
    assert list(zip(data["sentence1"], data["sentence2"], strict=True)) == [
        ("a cat", "the cat"),
        ("a cat", "snow"),
    ]  # 0.6 itself is no positive
    with pytest.raises(SearchError, match="give --score-range LOW HIGH"):
        peer_settings("st:mnsrl", "mnsrl", None)  # a 0–1 threshold needs the scale


def test_simcse_takes_each_distinct_sentence_with_itself() -> None:
    settings = peer_settings("st:simcse", "simcse", None)
    assert settings["loss"] == "MultipleNegativesRankingLoss" and "score_range" not in settings
    data = in_batch_data(settings, PAIRS)
    sentences = ["a cat", "a dog", "rain", "the cat", "a bird", "snow"]
    assert data["anchor"] == sentences and data["positive"] == sentences


def test_the_in_batch_losses_take_their_scales(tiny_bert_dir) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_bert_dir))
    for row, scale in (("mnsrl", 10.0), ("simcse", 20.0)):
        loss = peer_loss(peer_settings(f"st:{row}", row, [0.0, 5.0]), model, None)
        assert type(loss).__name__ == peer_settings(f"st:{row}", row, [0, 5])["loss"]
        assert loss.scale == scale
    assert in_batch_data({"loss": "CoSENTLoss"}, PAIRS) is PAIRS  # the other rows: as given
