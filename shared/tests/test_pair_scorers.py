"""The pair evaluator and its scorers at their edges, each against a value written here:
the whole message of each refused set (naming the set and its file), the scores a model's
``encode`` or head gives (float32 inputs widened, the head's dtype), the cross-encoder's
tokenizer and length as read at call time, and the representations. Found by the mutation
pass (``tools/mutation.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sts_core.data.errors import DataContentError
from sts_core.evaluation import pairs as pairs_module
from sts_core.evaluation.pairs import (
    CrossEncoderScorer,
    PairEvaluator,
    check_scored_pairs,
    cosine_scorer,
    cosine_scores,
    cross_encoder_scorer,
    encode_sentences,
    head_scorer,
)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"sentence1": ["a", "b"], "score": [1.0, 2.0]},
            "dev (d.tsv): no column(s) ['sentence2']; found ['sentence1', 'score']",
        ),
        (
            {
                "sentence1": ["a", "b", "c"],
                "sentence2": ["x", "y", "z"],
                "score": [1.0, np.nan, np.inf],
            },
            "dev (d.tsv): 2 gold score(s) are NaN or infinite",
        ),
        (
            {"sentence1": ["a", "b"], "sentence2": ["x", "y"], "score": [2.5, 2.5]},
            "dev (d.tsv): all 2 gold scores are equal (2.5); the correlation is undefined",
        ),
    ],
)
def test_a_set_that_cannot_be_scored_is_refused_naming_it(data, message) -> None:
    with pytest.raises(DataContentError) as error:
        check_scored_pairs(data, "dev", "d.tsv")
    assert str(error.value) == message
    with pytest.raises(DataContentError) as error:
        check_scored_pairs(None, "dev", "d.tsv")
    assert (
        str(error.value)
        == "dev (d.tsv): no column(s) ['sentence1', 'sentence2', 'score']; found []"
    )


class Encoder:
    """float32 vectors from a table, recording how ``encode`` was called."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table, self.calls = table, []

    def encode(self, sentences, batch_size, show_progress_bar):
        self.calls.append((list(sentences), batch_size, show_progress_bar))
        return np.asarray([self.table[s] for s in sentences], dtype=np.float32)


TABLE = {"a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.0, 1.0], "d": [1.0, 1e-8]}


def test_the_cosine_scorer_encodes_both_sides_once_quietly_and_widens() -> None:
    encoder = Encoder(TABLE)
    scores = cosine_scorer(encoder, ["a", "a"], ["b", "d"])
    assert encoder.calls == [(["a", "a", "b", "d"], 64, False)]
    assert scores.dtype == np.float64
    b = np.float32(0.6), np.float32(0.8)  # what encode gave, widened exactly
    expected = float(np.float64(b[0]) / np.hypot(np.float64(b[0]), np.float64(b[1])))
    assert scores[0] == pytest.approx(expected, abs=1e-15)
    assert cosine_scores(np.float32([[3, 4]]), np.float32([[4, 3]])).dtype == np.float64
    assert encode_sentences(lambda s: np.ones((len(s), 2)), ["x"], 8).shape == (1, 2)
    with pytest.raises(TypeError) as error:
        encode_sentences(object(), ["x"], 8)
    assert str(error.value) == (
        "a bi-encoder scorer needs an object with encode(sentences) or a callable"
    )


class ScoredEncoder(Encoder):
    def score_pairs(self, left, right):
        self.pair_dtypes = (left.dtype, right.dtype)
        return torch.as_tensor((left * right).sum(1) * 2).reshape(-1, 1)


def test_a_models_own_pair_scores_come_back_flat_in_float64() -> None:
    encoder = ScoredEncoder(TABLE)
    scores = cosine_scorer(encoder, ["a", "b"], ["b", "c"])
    assert encoder.pair_dtypes == (np.float64, np.float64)
    assert scores.dtype == np.float64 and scores.shape == (2,)
    assert scores.tolist() == pytest.approx([1.2, 1.6])


class Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1, dtype=torch.float64))

    def score(self, u, v):
        self.seen = (u.dtype, v.dtype)
        # no_grad, not inference_mode: a ZeRO-3 head's gathered parameters stay trainable
        self.modes = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
        return (u * v).sum(-1, keepdim=True) * self.weight


def test_a_head_scores_in_its_own_dtype_and_comes_back_flat() -> None:
    encoder = Encoder(TABLE)
    encoder.heads = {"pair": Head()}
    scores = head_scorer("pair")(encoder, ["a", "b"], ["b", "c"])
    assert encoder.heads["pair"].seen == (torch.float64, torch.float64)
    assert encoder.heads["pair"].modes == (False, False)
    assert scores.shape == (2,) and scores.tolist() == pytest.approx([0.6, 0.8])
    assert encoder.calls[0][1] == 64
    with pytest.raises(ValueError) as error:
        head_scorer("pair")(Encoder(TABLE), ["a"], ["b"])
    assert str(error.value) == "the model has no head 'pair' (heads: [])"


def test_the_cross_encoder_reads_the_models_tokenizer_and_length_when_called(monkeypatch) -> None:
    seen = []

    def predict(model, tokenizer, first, second, batch_size, max_length):
        seen.append((tokenizer, batch_size, max_length))
        return np.zeros(len(first))

    monkeypatch.setattr("sts_core.cross_encoder.predict_pair_scores", predict)
    model = type("M", (), {"sts_tokenizer": "model tokenizer"})()
    scorer = cross_encoder_scorer()
    assert repr(scorer) == "CrossEncoderScorer(tokenizer=model's, max_length=None)"
    scorer(model, ["a"], ["b"], 4)
    model.sts_max_length = 77
    scorer(model, ["a"], ["b"], 4)
    given = cross_encoder_scorer("own tokenizer", 9)
    assert repr(given) == "CrossEncoderScorer(tokenizer=str, max_length=9)"
    given(model, ["a"], ["b"], 2)
    assert seen == [
        ("model tokenizer", 4, 512),
        ("model tokenizer", 4, 77),
        ("own tokenizer", 2, 9),
    ]
    with pytest.raises(RuntimeError) as error:
        CrossEncoderScorer()(object(), ["a"], ["b"], 1)
    assert str(error.value) == (
        "cross-encoder scorer: no tokenizer; pass one or set the model's sts_tokenizer "
        "(the CoSENT method's build_model does)"
    )


def test_the_pair_evaluator_defaults_and_flat_scores() -> None:
    data = {"sentence1": ["a", "b", "a"], "sentence2": ["b", "c", "c"], "score": [3, 1, 0]}
    evaluator = PairEvaluator(data, scorer=lambda m, s1, s2, b: np.asarray([[b], [2.0], [1.0]]))
    assert evaluator.gold.dtype == np.float64
    assert evaluator.predict(None).tolist() == [64.0, 2.0, 1.0]
    assert evaluator.primary_metric == "stsb_dev_spearman"
    assert repr(evaluator).startswith("PairEvaluator(name='stsb_dev', pairs=3, scorer=")
    named = PairEvaluator(data, scorer=head_scorer("pair"))
    assert repr(named) == "PairEvaluator(name='stsb_dev', pairs=3, scorer=\"head_scorer('pair')\")"
    assert pairs_module.DEFAULT_CROSS_MAX_LENGTH == 512

    class Unnamed:  # a callable object has no __name__: its repr stands in
        def __call__(self, model, first, second, batch_size):
            return np.zeros(len(first))

        def __repr__(self) -> str:
            return "Unnamed()"

    assert repr(PairEvaluator(data, scorer=Unnamed())).endswith(", scorer=Unnamed())")
