"""RegressionTrainer on a tiny BERT (no downloads): every loss trains and logs its own value,
the head is saved and reloads, a frozen backbone stays as loaded while the head learns, and a
second stage starts from the first stage's head.

The tiny BERT is copied with dropout 0, so a step is a deterministic function of the seed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file

from sts_core.encoder import EXTRA_WEIGHTS_NAME, SentenceEncoder
from sts_core.testing import embed_pairs, quick_training_args, trainer_step_losses
from sts_core.training import ModelArguments, build_encoder
from sts_regression import RegressionConfig, RegressionTrainer, regression_loss
from sts_regression.method import METHOD

pytestmark = pytest.mark.usefixtures("torch_one_thread")

# (sentence1, sentence2, STS score 0–5, NLI class for regression: 0 contradiction … 2 entailment)
ROWS = [
    ("a man is playing the guitar", "a man plays the guitar", 4.8, 2),
    ("a man is playing the guitar", "a woman is slicing an onion", 0.2, 0),
    ("a dog runs in the park", "a dog is running in the park", 4.5, 2),
    ("a dog runs in the park", "a girl is eating food", 0.5, 0),
    ("two boys play soccer", "two children are playing soccer", 4.0, 2),
    ("two boys play soccer", "a cat sits on the car", 0.0, 0),
    ("a woman is riding a horse", "someone rides a horse", 3.8, 1),
    ("a woman is riding a horse", "the man is swimming in the water", 0.8, 0),
    ("a small white cat", "a small black cat", 3.0, 1),
    ("a small white cat", "people are standing on the beach", 0.2, 0),
    ("the child plays piano", "a child is playing the piano", 4.6, 2),
    ("the child plays piano", "a big car on the street", 0.0, 0),
    ("three men are sitting", "three people sit", 3.4, 1),
    ("three men are sitting", "a boy is cutting a tomato", 1.0, 1),
    ("this sentence means one thing", "this sentence means something different", 2.0, 1),
    ("a person rides a bike", "a man is riding a bike", 4.2, 2),
]


def dataset() -> Dataset:
    return Dataset.from_dict(
        {
            "sentence1": [r[0] for r in ROWS],
            "sentence2": [r[1] for r in ROWS],
            "score": [r[2] for r in ROWS],
            "label": [r[3] for r in ROWS],
        }
    )


def make_args(output_dir: Path, **overrides: Any) -> RegressionConfig:
    return quick_training_args(
        RegressionConfig, output_dir, **{"per_device_train_batch_size": len(ROWS), **overrides}
    )


def backbone_state(encoder: SentenceEncoder) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in encoder.backbone.named_parameters()}


def head_state(head: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in head.state_dict().items()}


def reference_loss(name: str, head: dict[str, torch.Tensor], u, v, data, args) -> float:
    """The loss of the batch from the head's initial weights, in numpy."""
    u64, v64 = u.double().numpy(), v.double().numpy()
    features = np.concatenate([u64, v64, np.abs(u64 - v64)], axis=1)
    outputs = features @ head["weight"].double().numpy().T + head["bias"].double().numpy()
    if name == "softmax":
        labels = np.array(data["label"])
        shifted = outputs - outputs.max(axis=1, keepdims=True)
        log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        return float(-log_softmax[np.arange(len(labels)), labels].mean())
    x = np.abs(outputs[:, 0] - np.array(data["score"]))
    k, x0 = args.k, args.x0
    penalty = {
        "l1": x,
        "mse": x**2,
        "translated_relu": np.maximum(0.0, k * (x - x0)),
        "smooth_k2": np.where(x >= x0, k * (x - x0) ** 2, 0.0),
    }[name]
    return float(penalty.mean())


@pytest.mark.parametrize("name", ["smooth_k2", "translated_relu", "mse", "l1", "softmax"])
def test_every_loss_trains_and_logs_its_own_value(
    name: str, tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    data = dataset()
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    before = backbone_state(encoder)
    args = make_args(tmp_path, loss=name, max_steps=2, k=3.0, x0=0.2)
    trainer = RegressionTrainer(model=encoder, args=args, train_dataset=data)
    head_name = "softmax_classifier" if name == "softmax" else "regression"
    assert list(encoder.heads) == [head_name]
    head = encoder.heads[head_name]
    assert (head.in_features, head.out_features) == (
        3 * encoder.dimension,
        3 if name == "softmax" else 1,
    )
    initial_head = head_state(head)
    u, v = embed_pairs(SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir), data)
    expected = reference_loss(name, initial_head, u, v, data, args)

    trainer.train()

    logged = trainer_step_losses(trainer)
    assert sorted(logged) == [1, 2] and all(math.isfinite(x) for x in logged.values())
    assert logged[1] == pytest.approx(expected, rel=1e-5)
    changed = [k for k, p in encoder.backbone.named_parameters() if not torch.equal(p, before[k])]
    assert len(changed) > len(before) // 2
    assert not torch.equal(head.weight, initial_head["weight"])
    assert encoder.pair_scorer is None  # STS evaluation scores the cosine, not the head


def test_regression_head_is_saved_and_reloads_bit_for_bit(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = make_args(tmp_path, loss="smooth_k2", max_steps=1, pair_features="|u-v|")
    trainer = RegressionTrainer(model=encoder, args=args, train_dataset=dataset())
    trainer.train()
    trainer.save_model(str(tmp_path / "final"))
    assert (tmp_path / "final" / EXTRA_WEIGHTS_NAME).is_file()
    reloaded = SentenceEncoder.from_pretrained(tmp_path / "final")
    head, again = encoder.heads["regression"], reloaded.heads["regression"]
    assert again.pair_features == "|u-v|" and again.in_features == encoder.dimension
    for key, value in head.state_dict().items():
        assert torch.equal(again.state_dict()[key], value), key
    u, v = torch.randn(3, encoder.dimension), torch.randn(3, encoder.dimension)
    assert torch.equal(again.score(u, v), head.score(u, v))
    torch.testing.assert_close(reloaded.score_pairs(u, v), torch.cosine_similarity(u, v, dim=-1))


def test_a_frozen_backbone_stays_as_loaded_while_the_head_learns(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """Stage 1 of §4.2 (with dropout on, as the authors train it): the backbone's weights
    are bit for bit those of the folder; only the head moves."""
    encoder = build_encoder(
        ModelArguments(model_name_or_path=str(tiny_bert_dir), freeze_backbone=True)
    )
    loaded = load_file(tiny_bert_dir / "model.safetensors")
    args = make_args(tmp_path, loss="smooth_k2", max_steps=3, learning_rate=1e-2)
    trainer = RegressionTrainer(model=encoder, args=args, train_dataset=dataset())
    trainable = {name for name, p in encoder.named_parameters() if p.requires_grad}
    assert trainable == {"regression.weight", "regression.bias"}
    initial_head = head_state(encoder.heads["regression"])
    trainer.train()
    for name, value in encoder.backbone.state_dict().items():
        assert torch.equal(value, loaded[name]), name
    assert not torch.equal(encoder.heads["regression"].weight, initial_head["weight"])
    assert not torch.equal(encoder.heads["regression"].bias, initial_head["bias"])


def test_a_frozen_backbone_with_a_loss_without_head_has_nothing_to_train(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    from sts_core.training import BaseConfig, BaseTrainer

    encoder = build_encoder(
        ModelArguments(model_name_or_path=str(tiny_bert_dir), freeze_backbone=True)
    )
    args = quick_training_args(BaseConfig, tmp_path)  # cosine MSE: no head
    with pytest.raises(ValueError, match="nothing to train"):
        BaseTrainer(model=encoder, args=args, train_dataset=dataset())


def test_model_card_names_the_method_the_loss_and_the_citation(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = make_args(tmp_path, loss="translated_relu", max_steps=1, k=2.5, x0=0.25)
    trainer = RegressionTrainer(model=encoder, args=args, train_dataset=dataset(), method=METHOD)
    trainer.train()
    trainer.save_model(str(tmp_path / "final"))
    card = (tmp_path / "final" / "README.md").read_text(encoding="utf-8")
    assert "`RegressionTrainer`" in card and "Translated ReLU" in card
    assert "@inproceedings{zhang2024regression" in card
    assert "k 2.5" in card and "x0 0.25" in card


def test_the_loss_on_the_trainer_equals_the_function(tiny_bert_nodropout_dir: Path, tmp_path):
    """The registered module and :func:`regression_loss` agree on the trainer's own head."""
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = make_args(
        tmp_path, loss="smooth_k2", clamp_predictions="both", label_range=[0, 5], max_steps=1
    )
    trainer = RegressionTrainer(model=encoder, args=args, train_dataset=dataset())
    u, v = embed_pairs(encoder, dataset())
    labels = torch.tensor(dataset()["score"])
    head = encoder.heads["regression"]
    expected = regression_loss(head(u, v), labels, "smooth_k2", 2.0, 0.25, "both", (0.0, 5.0))
    got = trainer.loss_module({"sentence1": u, "sentence2": v}, labels)
    torch.testing.assert_close(got, expected)
