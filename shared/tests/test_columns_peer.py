"""Our reading of a table's columns (:func:`sts_core.data.from_dataset`) against
sentence-transformers' ``SentenceTransformerDataCollator`` (6.2), which takes the first of
its ``valid_label_columns`` (``label``, ``labels``, ``score``, ``scores``) it finds as the
label and feeds every other column, in the table's order, as the loss's positional inputs.

Equal: the peer's label equals our ``score`` (and ``label`` where ours has one), and its
positional inputs equal our ``sentence1``, ``sentence2``, ``hard_negative`` (or
``sentence``), for the tables of :data:`EQUAL`. Then each documented difference
(docs/data.md, "Columns against sentence-transformers"), both sides asserted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from datasets import Dataset

from sts_core.data import from_dataset
from sts_core.data.errors import DataFormatError

pytest.importorskip("sentence_transformers")

TEXTS = {
    "a": ["a man plays a guitar", "a dog runs", "two kids play"],
    "b": ["a person plays music", "a cat sleeps", "children play football"],
    "c": ["a woman sings", "a bird flies", "an old man reads"],
    "d": ["rain falls", "the sun sets", "a car drives"],
}
ORDER = ("sentence1", "sentence2", "hard_negative", "sentence")


def peer(table: Dataset) -> tuple[list[str], list[list[Any]], list[Any] | None]:
    """What the peer's collator makes of ``table``'s rows: the names of the columns it
    feeds as positional inputs, in order; their values; the label (None: no label)."""
    from sentence_transformers.sentence_transformer.data_collator import (
        SentenceTransformerDataCollator,
    )

    def preprocess(inputs: list[Any], prompt: str | None = None, task: str | None = None) -> dict:
        return {"values": list(inputs)}  # the texts themselves, in place of token ids

    batch = SentenceTransformerDataCollator(preprocess_fn=preprocess)(list(table))
    label = batch.pop("label", None)
    names = [key.removesuffix("_values") for key in batch]
    return (
        names,
        [batch[f"{name}_values"] for name in names],
        (None if label is None else label.tolist()),
    )


def ours(table: Dataset) -> tuple[list[str], list[list[Any]], Dataset]:
    """Our text columns, in the loss's order, their values, and the whole reading."""
    read = from_dataset(table)
    names = [name for name in ORDER if name in read.column_names]
    return names, [read[name] for name in names], read


#: tables both read alike: name → columns (a list of ints or floats is a label column)
EQUAL: dict[str, dict[str, list[Any]]] = {
    "premise, hypothesis, label (int)": {
        "premise": TEXTS["a"], "hypothesis": TEXTS["b"], "label": [0, 1, 2]
    },
    "t1, t2, score (float)": {"t1": TEXTS["a"], "t2": TEXTS["b"], "score": [4.6, 0.4, 4.2]},
    "score first": {"score": [4.6, 0.4, 4.2], "t1": TEXTS["a"], "t2": TEXTS["b"]},
    "t1, t2, scores": {"t1": TEXTS["a"], "t2": TEXTS["b"], "scores": [0.5, 0.25, 1.0]},
    "t1, t2, labels (int)": {"t1": TEXTS["a"], "t2": TEXTS["b"], "labels": [1, 0, 1]},
    "sentence1, sentence2, score": {
        "sentence1": TEXTS["a"], "sentence2": TEXTS["b"], "score": [1.0, 2.0, 3.0]
    },
    "anchor, positive, negative": {
        "anchor": TEXTS["a"], "positive": TEXTS["b"], "negative": TEXTS["c"]
    },
    "a, b, c: three texts": {"a": TEXTS["a"], "b": TEXTS["b"], "c": TEXTS["c"]},
    "two texts": {"query": TEXTS["a"], "answer": TEXTS["b"]},
    "s: one text": {"s": TEXTS["a"]},
}  # fmt: skip


@pytest.mark.parametrize("kind", list(EQUAL))
def test_the_peers_label_and_inputs_equal_our_columns(kind: str) -> None:
    table = Dataset.from_dict(EQUAL[kind])
    _, peer_inputs, peer_label = peer(table)
    names, inputs, read = ours(table)
    assert inputs == peer_inputs and len(names) == len(inputs) > 0
    assert names in (["sentence"], ["sentence1", "sentence2"], list(ORDER[:3]))
    if peer_label is None:
        assert not {"score", "label"} & set(read.column_names)
        return
    # the peer's label is a tensor: of floats, float32; ours float64, equal once rounded
    np.testing.assert_array_equal(np.float32(read["score"]), np.float32(peer_label))
    if all(isinstance(value, int) for value in peer_label):  # integers: the class too
        assert read["label"] == peer_label


def test_difference_score_and_label_both_present() -> None:
    """Ours: ``score`` is the score, ``label`` (integers) the class. The peer: ``label`` is
    the label (the first of its label names found) and ``score`` one more input."""
    table = Dataset.from_dict(
        {"t1": TEXTS["a"], "t2": TEXTS["b"], "score": [4.6, 0.4, 4.2], "label": [1, 0, 1]}
    )
    names, inputs, label = peer(table)
    assert label == [1, 0, 1] and names == ["t1", "t2", "score"]
    assert inputs[2] == [4.6, 0.4, 4.2]
    our_names, our_inputs, read = ours(table)
    assert our_inputs == inputs[:2]
    assert read["score"] == [4.6, 0.4, 4.2] and read["label"] == [1, 0, 1]


@pytest.mark.parametrize(
    "columns", [("genre", "sentence2", "sentence1", "score"), ("positive", "anchor", "score")]
)
def test_difference_named_text_columns_are_taken_by_name(columns: tuple[str, ...]) -> None:
    """Ours: ``sentence1``/``sentence2`` (``anchor``/``positive``…) by name, whatever their
    order, and the other text columns not read. The peer: every column but the label, in
    the table's order."""
    values = {"genre": TEXTS["c"], "sentence1": TEXTS["a"], "anchor": TEXTS["a"]}
    values |= {"sentence2": TEXTS["b"], "positive": TEXTS["b"], "score": [1.0, 2.0, 3.0]}
    table = Dataset.from_dict({name: values[name] for name in columns})
    names, inputs, label = peer(table)
    assert names == [name for name in columns if name != "score"] and label == [1, 2, 3]
    _, our_inputs, read = ours(table)
    assert our_inputs == [TEXTS["a"], TEXTS["b"]] and read["score"] == [1.0, 2.0, 3.0]
    assert our_inputs != inputs


def test_difference_a_column_of_numbers_is_never_a_text() -> None:
    """Ours: a column of numbers not named ``score``/``label`` is the label when no label
    column is named, else not read. The peer: only its label names are labels; such a
    column is one more input."""
    unnamed = Dataset.from_dict({"t1": TEXTS["a"], "t2": TEXTS["b"], "sim": [4.6, 0.4, 4.2]})
    names, inputs, label = peer(unnamed)
    assert label is None and names == ["t1", "t2", "sim"] and inputs[2] == [4.6, 0.4, 4.2]
    _, our_inputs, read = ours(unnamed)
    assert our_inputs == inputs[:2] and read["score"] == [4.6, 0.4, 4.2]

    beside = Dataset.from_dict(
        {"t1": TEXTS["a"], "t2": TEXTS["b"], "n": [7, 8, 9], "score": [1.0, 2.0, 3.0]}
    )
    names, inputs, label = peer(beside)
    assert label == [1.0, 2.0, 3.0] and names == ["t1", "t2", "n"]
    _, our_inputs, read = ours(beside)
    assert our_inputs == inputs[:2] and "n" not in read.column_names


def test_difference_more_than_three_text_columns_are_refused() -> None:
    """Ours: one, two or three text columns (four are refused, naming ``columns``). The
    peer: any number, every one an input."""
    table = Dataset.from_dict({name: TEXTS[name] for name in "abcd"})
    names, _, label = peer(table)
    assert names == ["a", "b", "c", "d"] and label is None
    with pytest.raises(DataFormatError, match=r"no recognisable columns.*columns"):
        from_dataset(table)


def test_difference_texts_are_stripped_and_a_query_id_groups() -> None:
    """Ours: texts stripped of surrounding spaces; ``query_id`` kept as the group of a
    ranking set's rows (ids 0, 1, …), not a text. The peer: texts as they stand, and
    ``query_id`` one more input."""
    table = Dataset.from_dict(
        {
            "t1": [" padded ", "b", "c"],
            "t2": TEXTS["b"],
            "score": [1.0, 2.0, 3.0],
            "query_id": ["q7", "q7", "q9"],
        }
    )
    names, inputs, _ = peer(table)
    assert inputs[0][0] == " padded " and names == ["t1", "t2", "query_id"]
    _, our_inputs, read = ours(table)
    assert our_inputs[0][0] == "padded" and read["query_id"] == [0, 0, 1]


def test_difference_nli_class_names_under_label() -> None:
    """Ours: class names under ``label`` are NLI classes (``label`` their id, ``score``
    entailment 2 > neutral 1 > contradiction 0). The peer's collator makes a tensor of the
    label as it stands, which names cannot be."""
    classes = ["entailment", "neutral", "contradiction"]
    table = Dataset.from_dict({"premise": TEXTS["a"], "hypothesis": TEXTS["b"], "label": classes})
    with pytest.raises((ValueError, TypeError)):
        peer(table)
    _, _, read = ours(table)
    assert read["label"] == [0, 1, 2] and read["score"] == [2.0, 1.0, 0.0]
