"""``PairEvaluator`` (one labelled pair set, any scorer), its scorers (bi-encoder cosine,
``score_pairs``, cross-encoder), the former evaluators as thin subclasses, the trainer's use
of it, dataset references in ``sts_core.data`` and the names defined once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from datasets import Dataset
from scipy.stats import pearsonr, spearmanr

from sts_core.data import DataError
from sts_core.evaluation import (
    CrossEncoderScorer,
    PairEvaluator,
    cosine_scorer,
    cross_encoder_scorer,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "data"
ROWS = [
    ("a man plays the guitar", "a man is playing a guitar", 4.8),
    ("a man plays the guitar", "a woman slices an onion", 0.2),
    ("a dog runs in the park", "a dog is running in a park", 4.5),
    ("a dog runs in the park", "a girl eats food", 0.5),
    ("two boys play soccer", "two children play soccer", 4.0),
    ("two boys play soccer", "a cat sits on a car", 0.0),
    ("a small white cat", "a small black cat", 3.0),
    ("people sit on the beach", "three people sit at the beach", 3.2),
]


def pairs(rows: list[tuple[str, str, float]] = ROWS) -> Dataset:
    first, second, score = zip(*rows, strict=True)
    return Dataset.from_dict(
        {"sentence1": list(first), "sentence2": list(second), "score": list(score)}
    )


def bag_of_words(sentences: list[str]) -> np.ndarray:
    """A deterministic sentence → vector function (hashed word counts)."""
    vectors = np.zeros((len(sentences), 32))
    for row, sentence in enumerate(sentences):
        for word in sentence.split():
            vectors[row, sum(map(ord, word)) % 32] += 1.0
    return vectors


def expected_metrics(name: str, predicted: np.ndarray, gold: list[float]) -> dict[str, float]:
    return {
        f"{name}_spearman": 100 * spearmanr(predicted, gold).statistic,
        f"{name}_pearson": 100 * pearsonr(predicted, gold).statistic,
    }


def cosine(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)


GOLD = [r[2] for r in ROWS]
FIRST, SECOND = [r[0] for r in ROWS], [r[1] for r in ROWS]


# --------------------------------------------------------------------------- the evaluator


def test_cosine_scorer_on_a_callable_is_scipy_cosine_correlation() -> None:
    evaluator = PairEvaluator(pairs(), name="toy", scorer=cosine_scorer, batch_size=4)
    assert evaluator.primary_metric == "toy_spearman"
    assert evaluator.greater_is_better is True
    metrics = evaluator(bag_of_words)
    predicted = cosine(bag_of_words(FIRST), bag_of_words(SECOND))
    expected = expected_metrics("toy", predicted, GOLD)
    assert set(metrics) == set(expected)
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value, abs=1e-9)


def test_any_scorer_is_called_with_the_model_the_sentences_and_the_batch_size() -> None:
    calls: list[tuple] = []
    # a score that does not rank like the gold: the correlation is the scorer's, not gold's
    fixed = np.array([3.0, 1.0, 2.0, 0.5, 4.0, 0.0, 1.5, 2.5])

    def scorer(model: Any, sentences1: list[str], sentences2: list[str], batch_size: int):
        calls.append((model, list(sentences1), list(sentences2), batch_size))
        return fixed.tolist()  # a list is accepted too

    evaluator = PairEvaluator(pairs(), name="custom", scorer=scorer, batch_size=5)
    model = object()
    metrics = evaluator(model)
    assert calls == [(model, FIRST, SECOND, 5)]
    assert metrics == pytest.approx(expected_metrics("custom", fixed, GOLD), abs=1e-9)


def test_a_scorer_giving_the_wrong_number_of_scores_is_an_error() -> None:
    evaluator = PairEvaluator(pairs(), name="toy", scorer=lambda m, a, b, n: np.zeros(3))
    with pytest.raises(ValueError, match="toy: the scorer gave 3 scores for 8 pairs"):
        evaluator(None)


class HeadModel(torch.nn.Module):
    """A bi-encoder whose pair score is its own (``score_pairs``), not the cosine."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 32))
        self.seen: list[tuple] = []

    def encode(self, sentences: list[str], batch_size: int, show_progress_bar: bool):
        return bag_of_words(sentences).astype(np.float32)

    def score_pairs(self, u: np.ndarray, v: np.ndarray) -> torch.Tensor:
        no_grad = not torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        self.seen.append((type(u), u.dtype, u.shape, v.shape, no_grad))
        u, v = torch.as_tensor(u, dtype=torch.float32), torch.as_tensor(v, dtype=torch.float32)
        return ((u - v).abs() * self.weight).sum(-1)


def test_cosine_scorer_uses_the_models_score_pairs_when_it_has_one() -> None:
    model = HeadModel()
    metrics = PairEvaluator(pairs(), name="head")(model)
    assert model.seen == [(np.ndarray, np.float64, (8, 32), (8, 32), True)]
    u, v = bag_of_words(FIRST), bag_of_words(SECOND)
    head = (np.abs(u - v) * np.linspace(-1.0, 1.0, 32)).sum(-1)
    assert not np.allclose(spearmanr(head, GOLD).statistic, spearmanr(cosine(u, v), GOLD).statistic)
    assert metrics == pytest.approx(expected_metrics("head", head, GOLD), abs=1e-4)


@pytest.mark.parametrize(
    "scores,problem",
    [([2.0, 2.0, 2.0], "all 3 gold scores are equal"), ([4.0], "1 scored pair(s)")],
    ids=["constant", "one row"],
)
@pytest.mark.parametrize("kind", ["cosine", "cross"])
def test_every_pair_evaluator_rejects_an_unusable_set_when_built(kind, scores, problem) -> None:
    n = len(scores)
    dev = Dataset.from_dict({"sentence1": ["a b"] * n, "sentence2": ["c d"] * n, "score": scores})
    scorer = {"cosine": cosine_scorer, "cross": CrossEncoderScorer()}[kind]

    def build(**kw):
        return PairEvaluator(dev, "my_dev", scorer, 8, **kw)

    with pytest.raises(DataError) as info:
        build(source="dev.tsv")
    assert str(info.value).startswith("my_dev (dev.tsv): ")
    assert problem in str(info.value)
    with pytest.raises(DataError, match="^my_dev: "):
        build()


# --------------------------------------------------------------------------- cross-encoder


@pytest.fixture(scope="module")
def cross_encoder(tiny_bert_dir: Path) -> Any:
    from sts_core.cross_encoder import load_cross_encoder

    torch.manual_seed(0)
    model, tokenizer, max_length = load_cross_encoder(tiny_bert_dir)
    model.sts_tokenizer, model.sts_max_length = tokenizer, max_length
    return model.eval()


def test_cross_encoder_scorer_reads_the_models_tokenizer_when_called(cross_encoder) -> None:
    from sts_core.cross_encoder import predict_pair_scores

    evaluator = PairEvaluator(pairs(), "toy", cross_encoder_scorer(), batch_size=3)  # no model yet
    metrics = evaluator(cross_encoder)
    predicted = predict_pair_scores(
        cross_encoder, cross_encoder.sts_tokenizer, FIRST, SECOND, batch_size=3
    )
    assert np.unique(predicted).size == len(ROWS)  # no ties: the ranks are the model's
    assert metrics == pytest.approx(expected_metrics("toy", predicted, GOLD), abs=1e-6)


def test_cross_encoder_scorer_truncates_at_the_models_max_length(cross_encoder) -> None:
    from sts_core.cross_encoder import predict_pair_scores

    scorer = cross_encoder_scorer()
    tokenizer = cross_encoder.sts_tokenizer
    full = scorer(cross_encoder, FIRST, SECOND, 4)
    np.testing.assert_allclose(full, predict_pair_scores(cross_encoder, tokenizer, FIRST, SECOND))
    cross_encoder.sts_max_length = 6
    try:
        short = scorer(cross_encoder, FIRST, SECOND, 4)
    finally:
        cross_encoder.sts_max_length = 512
    expected = predict_pair_scores(cross_encoder, tokenizer, FIRST, SECOND, max_length=6)
    np.testing.assert_allclose(short, expected)
    assert not np.allclose(short, full)
    # explicit settings win over the model's
    explicit = cross_encoder_scorer(tokenizer, max_length=6)(cross_encoder, FIRST, SECOND, 4)
    np.testing.assert_allclose(explicit, expected)


def test_cross_encoder_scorer_without_a_tokenizer_says_so(cross_encoder) -> None:
    del_tokenizer = cross_encoder.sts_tokenizer
    cross_encoder.sts_tokenizer = None
    try:
        with pytest.raises(RuntimeError, match="no tokenizer"):
            cross_encoder_scorer()(cross_encoder, FIRST, SECOND, 4)
    finally:
        cross_encoder.sts_tokenizer = del_tokenizer


# --------------------------------------------------------------------------- the trainer


def test_base_trainer_builds_a_cosine_pair_evaluator_and_scores_final_sets_with_it(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sts_core.data import load_reference
    from sts_core.encoder import SentenceEncoder
    from sts_core.method import Method
    from sts_core.testing import quick_training_args
    from sts_core.training import BaseConfig, BaseTrainer, DataArguments
    from sts_core.training.method_registry import CORE_METHOD

    config = quick_training_args(BaseConfig, tmp_path)
    evaluator = CORE_METHOD.build_evaluator("toy", pairs(), config)
    assert type(evaluator) is PairEvaluator and evaluator.scorer is cosine_scorer
    assert evaluator.batch_size == config.per_device_eval_batch_size

    built: list[PairEvaluator] = []
    original = Method.build_evaluator

    def recording(self: Method, name: str, dataset: Any, config: Any) -> Any:
        built.append(original(self, name, dataset, config))
        return built[-1]

    monkeypatch.setattr(Method, "build_evaluator", recording)
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    trainer = BaseTrainer(model=encoder, args=config, train_dataset=pairs())
    data_args = DataArguments(data_dir=str(FIXTURES), final_eval_datasets=["stsb:test"])
    scores = trainer._score_pair_sets(data_args)
    assert [e.name for e in built] == ["stsb_test"]
    _, test = load_reference("stsb:test", "test", data_dir=FIXTURES)
    u = encoder.encode(list(test["sentence1"]), show_progress_bar=False).astype(np.float64)
    v = encoder.encode(list(test["sentence2"]), show_progress_bar=False).astype(np.float64)
    expected = expected_metrics("stsb_test", cosine(u, v), list(test["score"]))
    assert scores["stsb:test"] == pytest.approx(expected, abs=1e-3)


# --------------------------------------------------------------------------- data references


def test_references_load_with_plain_arguments_and_the_training_wrapper_agrees() -> None:
    from sts_core import data
    from sts_core.training import DataArguments
    from sts_core.training import data as training_data

    assert training_data.split_reference is data.split_reference
    assert data.split_reference("stsb:dev", "test") == ("stsb", "dev")
    assert data.split_reference("stsb", "test") == ("stsb", "test")
    assert data.split_reference("some/file.tsv", "train") == ("some/file.tsv", "train")
    name, sick = data.load_reference("sickr:test", "dev", data_dir=FIXTURES)
    _, rescaled = data.load_reference(
        "sickr:test", "dev", data_dir=FIXTURES, sick_to_sts_scale=True
    )
    assert name == "sickr"
    np.testing.assert_allclose(rescaled["score"], 5 * (np.array(sick["score"]) - 1) / 4)
    data_args = DataArguments(data_dir=str(FIXTURES))  # sick_to_sts_scale: true by default
    _, wrapped = training_data.load_reference("sickr:test", "dev", data_args)
    assert wrapped["score"] == rescaled["score"]


# --------------------------------------------------------------------------- names


def test_task_and_pooling_names_are_defined_once() -> None:
    import sts_core
    import sts_core.cli as cli
    import sts_core.data as data
    import sts_core.names as names
    from sts_core import pooling
    from sts_core.evaluation import STS_TASKS

    assert names.STS_TASKS == ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")
    for alias in (STS_TASKS, sts_core.STS_TASKS):
        assert alias is names.STS_TASKS
    for alias in (pooling.POOLING_MODES, sts_core.POOLING_MODES):
        assert alias is names.POOLING_MODES
    for module, old in ((cli, "TASK_NAMES"), (cli, "POOLING_CHOICES"), (data, "TEST_SETS")):
        assert not hasattr(module, old)  # the old names are gone


def test_names_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, sts_core.names\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'numpy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
