"""CoSENTCrossEncoderTrainer (eq. 11) on a tiny BertForSequenceClassification built from the
tiny BERT folder (no downloads): training, the logged loss, evaluation against scipy, best
checkpoint, saving and reloading as a plain sequence classifier."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from datasets import Dataset
from scipy.stats import spearmanr
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from sts_core.cross_encoder import predict_pair_scores
from sts_core.evaluation import PairEvaluator, cross_encoder_scorer
from sts_core.testing import (
    EVERY_STEP_SELECTION_ARGS,
    TOY_STS_PAIRS,
    ScriptedEvaluator,
    quick_training_args,
    train_and_save,
    trainer_step_losses,
)
from sts_core.training import ModelArguments
from sts_cosent import METHOD, CoSENTConfig, CoSENTCrossEncoderTrainer
from sts_cosent.loss import cosent_loss

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TRAIN = TOY_STS_PAIRS
DEV = [
    ("a woman plays the piano", "a woman is playing the piano", 4.8),
    ("a woman plays the piano", "two dogs are running", 0.4),
    ("a boy is eating food", "a child eats food", 4.0),
    ("a boy is eating food", "a man rides a horse", 1.0),
    ("people sit on the beach", "three people are sitting at the beach", 3.2),
    ("people sit on the beach", "a cat is cutting an onion", 0.0),
    ("the black dog is swimming", "a white dog is in the water", 2.4),
    ("a girl plays soccer", "a girl is riding a bike", 1.6),
]


def pairs(rows: list[tuple[str, str, float]]) -> Dataset:
    first, second, score = zip(*rows, strict=True)
    return Dataset.from_dict(
        {"sentence1": list(first), "sentence2": list(second), "score": list(score)}
    )


def make_args(output_dir: Path, **overrides: Any) -> CoSENTConfig:
    return quick_training_args(
        CoSENTConfig,
        output_dir,
        **{
            "architecture": "cross-encoder",
            "lr_scheduler_type": "constant",
            "per_device_train_batch_size": len(TRAIN),
            **overrides,
        },
    )


def build(tiny_bert_nodropout_dir: Path, config: CoSENTConfig) -> Any:
    torch.manual_seed(0)  # the new one-output head is initialised at random
    return METHOD.build_model(
        ModelArguments(model_name_or_path=str(tiny_bert_nodropout_dir)), config
    )


def scores_of(model: Any, tokenizer: Any, rows: list[tuple[str, str, float]]) -> np.ndarray:
    return predict_pair_scores(
        model, tokenizer, [r[0] for r in rows], [r[1] for r in rows], batch_size=3
    )


@pytest.fixture(scope="module")
def cross_run(
    tiny_bert_nodropout_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """8 full-batch CoSENT steps on the cross-encoder's scores; the loss before step 1."""
    output_dir = tmp_path_factory.mktemp("cross")
    config = make_args(output_dir, max_steps=8, learning_rate=5e-3)
    reference = build(tiny_bert_nodropout_dir, config)
    logits = torch.from_numpy(scores_of(reference, reference.sts_tokenizer, TRAIN))
    expected = cosent_loss(logits, torch.tensor([r[2] for r in TRAIN]), 20.0)
    model = build(tiny_bert_nodropout_dir, config)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    evaluator = PairEvaluator(pairs(DEV), "toy", cross_encoder_scorer(), batch_size=3)
    trainer = CoSENTCrossEncoderTrainer(
        model=model, args=config, train_dataset=pairs(TRAIN), evaluator=evaluator
    )
    final_dir = train_and_save(trainer, output_dir)
    return {
        "trainer": trainer,
        "model": model,
        "before": before,
        "expected_first_loss": float(expected),
        "final_dir": final_dir,
    }


def test_model_is_a_one_output_sequence_classifier(cross_run: dict[str, Any]) -> None:
    model = cross_run["model"]
    assert type(model).__name__ == "BertForSequenceClassification"
    assert model.config.num_labels == 1


def test_cross_encoder_loss_is_finite_and_decreases(cross_run: dict[str, Any]) -> None:
    values = list(trainer_step_losses(cross_run["trainer"]).values())
    assert len(values) == 8 and all(math.isfinite(v) and v > 0 for v in values)
    assert values[-1] < 0.7 * values[0], values
    model, before = cross_run["model"], cross_run["before"]
    changed = [k for k, v in model.named_parameters() if not torch.equal(v, before[k])]
    assert "classifier.weight" in changed
    assert "bert.encoder.layer.0.attention.self.query.weight" in changed


def test_logged_loss_is_cosent_of_the_pair_scores(cross_run: dict[str, Any]) -> None:
    """Step 1 (full batch, initial weights) logs cosent(f(i, j), scores, λ = 20), eq. 11."""
    logged = trainer_step_losses(cross_run["trainer"])[1]
    assert logged == pytest.approx(cross_run["expected_first_loss"], rel=1e-5)


def test_evaluation_is_the_spearman_of_the_predicted_scores(cross_run: dict[str, Any]) -> None:
    trainer, model = cross_run["trainer"], cross_run["model"]
    metrics = trainer.evaluate()
    assert {"eval_toy_spearman", "eval_toy_pearson"} <= set(metrics)
    predicted = scores_of(model, model.sts_tokenizer, DEV)
    assert np.unique(predicted).size == len(DEV)  # no ties: the ranks are the model's
    expected = 100 * spearmanr(predicted, [r[2] for r in DEV]).statistic
    assert metrics["eval_toy_spearman"] == pytest.approx(expected, abs=1e-6)


def test_saved_folder_reloads_as_a_sequence_classifier(cross_run: dict[str, Any]) -> None:
    final_dir, model = cross_run["final_dir"], cross_run["model"]
    reloaded = AutoModelForSequenceClassification.from_pretrained(final_dir)
    tokenizer = AutoTokenizer.from_pretrained(final_dir)
    assert reloaded.config.num_labels == 1
    np.testing.assert_allclose(
        scores_of(reloaded, tokenizer, DEV + TRAIN),
        scores_of(model, model.sts_tokenizer, DEV + TRAIN),
        rtol=0,
        atol=1e-5,
    )
    card = (final_dir / "README.md").read_text(encoding="utf-8")
    assert "CoSENT" in card and "@article{huang2024cosent" in card
    assert "tiny-bert" in card and "toy pairs" in card


def test_best_checkpoint_is_chosen_on_the_dev_metric(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    config = make_args(
        tmp_path,
        max_steps=3,
        per_device_train_batch_size=8,
        **EVERY_STEP_SELECTION_ARGS,
    )
    model = build(tiny_bert_nodropout_dir, config)
    trainer = CoSENTCrossEncoderTrainer(
        model=model,
        args=config,
        train_dataset=pairs(TRAIN),
        evaluator=ScriptedEvaluator([10.0, 50.0, 20.0]),
    )
    trainer.train()
    assert Path(trainer.state.best_model_checkpoint) == tmp_path / "checkpoint-2"
    best = AutoModelForSequenceClassification.from_pretrained(tmp_path / "checkpoint-2")
    last = AutoModelForSequenceClassification.from_pretrained(tmp_path / "checkpoint-3")
    live = model.state_dict()
    for key, value in best.state_dict().items():
        torch.testing.assert_close(live[key], value, rtol=0, atol=0, msg=key)
    assert any(not torch.equal(v, best.state_dict()[k]) for k, v in last.state_dict().items())


def test_config_rejects_the_cross_encoder_with_another_loss(tmp_path: Path) -> None:
    for loss in ("cosine_mse", "contrastive", "softmax", "infonce"):
        with pytest.raises(ValueError, match="cross-encoder .* loss: cosent"):
            make_args(tmp_path, loss=loss)
    assert make_args(tmp_path, loss="cosent").architecture == "cross-encoder"
