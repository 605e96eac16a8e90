"""SentenceCollator and split_features on the tiny BERT."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sts_core.encoder import SentenceEncoder
from sts_core.training import SentenceCollator, split_features


@pytest.fixture(scope="module")
def encoder(tiny_bert_dir: Path) -> SentenceEncoder:
    return SentenceEncoder.from_pretrained(tiny_bert_dir)


def lengths(encoder: SentenceEncoder, sentences: list[str]) -> list[int]:
    return [len(ids) for ids in encoder.tokenize(sentences, padding=False)["input_ids"]]


def test_pairs_padded_to_the_batch_longest(encoder: SentenceEncoder) -> None:
    rows = [
        {"sentence1": "a man", "sentence2": "a man is playing the guitar in the park", "score": 4},
        {"sentence1": "a dog runs on the beach", "sentence2": "a cat", "score": 0.5},
    ]
    batch = SentenceCollator(encoder)(rows)
    assert set(batch) == {
        "sentence1_input_ids",
        "sentence1_attention_mask",
        "sentence1_token_type_ids",
        "sentence2_input_ids",
        "sentence2_attention_mask",
        "sentence2_token_type_ids",
        "labels",
    }
    for column in ("sentence1", "sentence2"):
        expected = lengths(encoder, [row[column] for row in rows])
        ids, mask = batch[f"{column}_input_ids"], batch[f"{column}_attention_mask"]
        assert ids.shape == (2, max(expected))  # padded to this batch's longest, not max_length
        assert mask.sum(dim=1).tolist() == expected
        assert ids[mask == 0].eq(encoder.tokenizer.pad_token_id).all()
    assert batch["sentence1_input_ids"].shape[1] != batch["sentence2_input_ids"].shape[1]
    assert batch["labels"].dtype == torch.float32
    assert batch["labels"].tolist() == [4.0, 0.5]


def test_triplets_and_no_labels(encoder: SentenceEncoder) -> None:
    rows = [
        {"sentence1": "a man eats", "sentence2": "a man eats food", "hard_negative": "a dog"},
        {"sentence1": "two girls", "sentence2": "children", "hard_negative": "the big black car"},
    ]
    batch = SentenceCollator(encoder)(rows)
    assert "labels" not in batch
    for column in ("sentence1", "sentence2", "hard_negative"):
        expected = lengths(encoder, [row[column] for row in rows])
        assert batch[f"{column}_input_ids"].shape == (2, max(expected))


def test_label_column_and_single_sentences(encoder: SentenceEncoder) -> None:
    rows = [{"sentence": "a b c", "label": 1}, {"sentence": "a", "label": 0}]
    batch = SentenceCollator(encoder, label_column="label")(rows)
    assert batch["labels"].dtype == torch.float32 and batch["labels"].tolist() == [1.0, 0.0]
    assert batch["sentence_input_ids"].shape[0] == 2
    assert "labels" not in SentenceCollator(encoder)(rows)  # default column "score" is absent


def test_truncation_to_max_length(tiny_bert_dir: Path) -> None:
    short = SentenceEncoder.from_pretrained(tiny_bert_dir, max_length=6)
    rows = [{"sentence1": "a man is playing the big black guitar", "sentence2": "a"}]
    batch = SentenceCollator(short)(rows)
    assert batch["sentence1_input_ids"].shape == (1, 6)


def test_split_features_regroups_per_column(encoder: SentenceEncoder) -> None:
    rows = [
        {"sentence1": "a man", "sentence2": "a woman", "hard_negative": "a dog", "score": 1.0},
        {"sentence1": "a cat sits", "sentence2": "the cat", "hard_negative": "b", "score": 0.0},
    ]
    batch = SentenceCollator(encoder)(rows)
    groups = split_features(batch)
    assert set(groups) == {"sentence1", "sentence2", "hard_negative"}
    for column, features in groups.items():
        assert set(features) == {"input_ids", "attention_mask", "token_type_ids"}
        assert features["input_ids"] is batch[f"{column}_input_ids"]
    # each group embeds like the same sentences tokenized on their own
    encoder.eval()
    with torch.no_grad():
        grouped = encoder(**groups["sentence1"])
        alone = encoder(**encoder.tokenize([row["sentence1"] for row in rows]))
    torch.testing.assert_close(grouped, alone)


def test_split_features_keeps_sentence_and_sentence1_apart() -> None:
    inputs = {
        "sentence_input_ids": torch.ones(1, 2),
        "sentence1_input_ids": torch.zeros(1, 3),
        "labels": torch.ones(1),
    }
    groups = split_features(inputs)
    assert set(groups) == {"sentence", "sentence1"}
    assert groups["sentence"]["input_ids"].shape == (1, 2)
    assert groups["sentence1"]["input_ids"].shape == (1, 3)


def test_text_ids_mark_equal_texts_and_stay_out_of_the_model_features(
    encoder: SentenceEncoder,
) -> None:
    """A loss that asks for text identities (BSC's repeated anchors) gets a 64-bit id per
    row, equal for equal texts and the same in every process (not Python's salted hash)."""
    from sts_core.training.collator import batch_text_ids, text_ids

    rows = [
        {"sentence1": "a man", "sentence2": "a dog", "score": 1.0},
        {"sentence1": "a cat", "sentence2": "a dog", "score": 0.0},
        {"sentence1": "a man", "sentence2": "a boy", "score": 0.5},
    ]
    batch = SentenceCollator(encoder, text_id_columns=("sentence1", "hard_negative"))(rows)
    ids = batch["text_ids_sentence1"]
    assert ids.dtype == torch.int64 and ids[0] == ids[2] != ids[1]
    assert "text_ids_hard_negative" not in batch  # no such column in the rows
    assert text_ids(["a man"]).item() == ids[0] == -1540954078076776390  # BLAKE2b, fixed
    assert set(batch_text_ids(batch)) == {"sentence1"}
    assert set(split_features(batch)) == {"sentence1", "sentence2"}
    assert "text_ids" not in str(sorted(split_features(batch)["sentence1"]))
