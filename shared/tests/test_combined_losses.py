"""``loss_weights``: a weighted sum of registered losses, its value against the parts
computed alone, its checks, and a trainer that trains on it and logs every part."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from transformers import TrainerCallback

from sts_core.encoder import SentenceEncoder
from sts_core.losses import (
    EmbeddingLoss,
    build_loss,
    cosine_mse_loss,
    parse_loss_weights,
    register_loss,
    weighted_loss_class,
)
from sts_core.testing import quick_training_args
from sts_core.training import BaseConfig, BaseTrainer

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@register_loss("test_mean_distance")
class MeanDistanceLoss(EmbeddingLoss):
    """A label-free test loss: the mean squared distance of the two sides."""

    label_kind = None

    def forward(self, embeddings, labels):
        self.note_degenerate("never", False)
        return ((embeddings["sentence1"] - embeddings["sentence2"]) ** 2).sum(1).mean()


@register_loss("test_binary")
class BinaryLoss(EmbeddingLoss):
    label_kind = "binary"

    def forward(self, embeddings, labels):
        return embeddings["sentence1"].sum() * 0


def batch(seed: int = 0) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    u, v = (torch.randn(6, 4, generator=generator, dtype=torch.float64) for _ in "uv")
    return {"sentence1": u, "sentence2": v}, torch.rand(6, generator=generator).double()


def test_the_sum_is_the_weighted_parts_and_logs_each_part_unweighted() -> None:
    weights = {"cosine_mse": 1.0, "test_mean_distance": 0.25}
    config = BaseConfig(output_dir="unused", report_to="none", loss_weights=weights)
    loss = weighted_loss_class(config.loss_weights).from_config(config)
    embeddings, labels = batch()
    mse = cosine_mse_loss(embeddings["sentence1"], embeddings["sentence2"], labels)
    distance = ((embeddings["sentence1"] - embeddings["sentence2"]) ** 2).sum(1).mean()
    output = loss(embeddings, labels)
    torch.testing.assert_close(output["loss"], mse + 0.25 * distance)
    torch.testing.assert_close(output["loss_cosine_mse"], mse)
    torch.testing.assert_close(output["loss_test_mean_distance"], distance)
    assert [r for r, _ in loss.pop_degenerate()] == ["test_mean_distance: never"]
    assert type(loss).label_kind == "score"  # the parts' one kind; label-free parts agree
    assert type(loss).display_name() == "1·cosine_mse + 0.25·test_mean_distance"


def test_gradients_of_the_sum_are_the_weighted_gradients() -> None:
    embeddings, labels = batch(1)
    u = embeddings["sentence1"].requires_grad_()
    loss = weighted_loss_class({"cosine_mse": 2.0}).from_config(None)
    (summed,) = torch.autograd.grad(loss(embeddings, labels)["loss"], u)
    alone = build_loss("cosine_mse", None)(embeddings, labels)
    (single,) = torch.autograd.grad(alone, u)
    torch.testing.assert_close(summed, 2 * single)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"cosine_mse": -1}', "finite and ≥ 0"),
        ({"cosine_mse": "x"}, "is not a number"),
        ({"cosine_mse": 0, "test_mean_distance": 0}, "every weight is 0"),
        ("[1, 2]", "must be a mapping"),
        ("{cosine_mse: 1", "not a JSON mapping"),
    ],
)
def test_bad_weights_are_refused(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_loss_weights(value)


def test_weights_from_json_text_and_the_checks_of_the_config() -> None:
    assert parse_loss_weights('{"cosine_mse": 1, "infonce": 0.5}') == {
        "cosine_mse": 1.0,
        "infonce": 0.5,
    }
    with pytest.raises(ValueError, match="unknown loss 'nope'"):
        BaseConfig(output_dir="unused", report_to="none", loss_weights={"nope": 1})
    with pytest.raises(ValueError, match="different labels"):
        BaseConfig(
            output_dir="unused", report_to="none", loss_weights={"cosine_mse": 1, "test_binary": 1}
        )

    @dataclass
    class MethodConfig(BaseConfig):
        loss: str = field(default="cosine_mse")

    with pytest.raises(ValueError, match="must include the method's loss 'cosine_mse'"):
        MethodConfig(output_dir="unused", report_to="none", loss_weights={"infonce": 1})


class KeepLogs(TrainerCallback):
    def __init__(self) -> None:
        self.logs: list[dict] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs or {}))


def test_a_trainer_trains_on_the_sum_and_logs_the_parts(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    data = Dataset.from_dict(
        {
            "sentence1": ["a man plays", "the dog runs", "a cat eats", "the boy sits"] * 2,
            "sentence2": ["a man plays a guitar", "a dog runs", "a cat", "the girl sits"] * 2,
            "score": [0.9, 0.8, 0.5, 0.2] * 2,
        }
    )
    args = quick_training_args(
        BaseConfig,
        tmp_path,
        max_steps=2,
        logging_steps=1,
        loss_weights='{"cosine_mse": 1.0, "test_mean_distance": 0.1}',
    )
    BaseTrainer.check_train_dataset(data, args)
    logs = KeepLogs()
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=data, callbacks=[logs])
    trainer.train()
    steps = [entry for entry in logs.logs if "loss" in entry]
    assert len(steps) == 2
    for entry in steps:
        expected = entry["loss_cosine_mse"] + 0.1 * entry["loss_test_mean_distance"]
        assert entry["loss"] == pytest.approx(expected, rel=1e-4)
    assert "1·cosine_mse + 0.1·test_mean_distance" in trainer.model_card_data["loss_module"]
    with pytest.raises(ValueError, match="no label column 'score'"):
        BaseTrainer.check_train_dataset(data.remove_columns("score"), args)
