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
from sts_core.training.method_registry import CORE_METHOD

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
        ('{"cosine_mse": -1}', "loss_weights: cosine_mse must be finite and ≥ 0, got -1.0"),
        ({"cosine_mse": "x"}, "loss_weights: cosine_mse: 'x' is not a number"),
        (
            {"cosine_mse": 0, "test_mean_distance": 0},
            "loss_weights: every weight is 0, so nothing would train",
        ),
        ("[1, 2]", "loss_weights must be a mapping, got [1, 2]"),
        ("{cosine_mse: 1", "loss_weights is not a JSON mapping: Expecting property name"),
    ],
)
def test_bad_weights_are_refused(value: object, message: str) -> None:
    """The whole message: it names the option and the entry."""
    with pytest.raises(ValueError) as error:
        parse_loss_weights(value)
    assert str(error.value).startswith(message)


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
    CORE_METHOD.check_train_dataset(data, args)
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
        CORE_METHOD.check_train_dataset(data.remove_columns("score"), args)


# ------------------------------------------------- a part that reads the pooled embeddings
@register_loss("test_pooled_norm")
class PooledNormLoss(EmbeddingLoss):
    """The mean length of the first column's vectors, read before the L2 normalisation."""

    label_kind = None
    reads_pooled = True

    def forward(self, embeddings, labels):
        return embeddings["sentence1"].norm(dim=-1).mean()


@register_loss("test_norm")
class NormLoss(PooledNormLoss):
    """The same length, of the embeddings as the encoder gives them."""

    reads_pooled = False


@pytest.mark.parametrize("normalize", [True, False])
def test_a_part_that_reads_pooled_embeddings_gets_them_the_others_get_the_encoders(
    tiny_bert_dir: Path, tmp_path: Path, normalize: bool
) -> None:
    """1·test_pooled_norm + 3·test_norm through the trainer: the first part sees the
    vectors before the encoder's L2 normalisation (their lengths, computed here from an
    encoder without it), the second what the encoder gives (length 1 when it normalises);
    the encoder's setting is back afterwards."""
    data = Dataset.from_dict(
        {"sentence1": ["a man plays", "the dog runs"], "sentence2": ["a man", "a dog"]}
    )
    weights = {"test_pooled_norm": 1.0, "test_norm": 3.0}
    args = quick_training_args(BaseConfig, tmp_path, loss_weights=weights)
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir, normalize=normalize).eval()
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=data)
    assert type(trainer.loss_module).reads_pooled
    inputs = trainer.data_collator([data[i] for i in range(len(data))])
    with torch.no_grad():
        total = trainer.compute_loss(encoder, inputs)
    assert encoder.normalize is normalize

    pooled = SentenceEncoder.from_pretrained(tiny_bert_dir, normalize=False).eval()
    with torch.no_grad():
        lengths = torch.as_tensor(pooled.encode(data["sentence1"])).norm(dim=-1)
    assert not torch.allclose(lengths, torch.ones_like(lengths), atol=1e-2)  # not unit already
    seen_by_second = torch.ones_like(lengths) if normalize else lengths
    expected = lengths.mean() + 3.0 * seen_by_second.mean()
    torch.testing.assert_close(total, expected, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------- what the sum passes to its parts
@register_loss("test_text_ids_and_labels")
class TextIdsAndLabelsLoss(EmbeddingLoss):
    """Reads text ids and labels: Σ labels + Σ ids, and a named part of its own."""

    text_id_columns = ("sentence1",)

    def forward(self, embeddings, labels, text_ids):
        value = labels.sum() + text_ids["sentence1"].sum()
        return {"loss": value, "ids": text_ids["sentence1"].sum().float()}


@register_loss("test_other_columns")
class OtherColumnsLoss(MeanDistanceLoss):
    columns = ("sentence1", "sentence2", "hard_negative")
    label_kind = "binary"


def test_the_sum_builds_each_part_from_the_config_and_the_model(tiny_bert_dir: Path) -> None:
    """{softmax: 2, infonce: 0.5} with num_labels 4 and τ 0.5: the sum's prepare_model adds
    the classifier the config asks for, from_config hands the model's head and the config's
    τ to the parts, and the value is computed here from the parts' functions."""
    from types import SimpleNamespace

    from sts_core.losses import in_batch_infonce_loss
    from sts_core.losses.classification import SOFTMAX_HEAD, softmax_classifier_loss

    config = SimpleNamespace(num_labels=4, infonce_temperature=0.5)
    loss_type = weighted_loss_class({"softmax": 2.0, "infonce": 0.5})
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    loss_type.prepare_model(encoder, config)
    head = encoder.heads[SOFTMAX_HEAD]
    assert head.out_features == 4
    loss = loss_type.from_config(config, encoder)
    assert loss.parts["softmax"].head is head
    embeddings, _ = batch(2)
    embeddings = {k: v.float() for k, v in embeddings.items()}
    labels = torch.tensor([0, 1, 2, 3, 0, 1])
    u, v = embeddings["sentence1"].repeat(1, 8), embeddings["sentence2"].repeat(1, 8)
    embeddings = {"sentence1": u, "sentence2": v}  # the tiny BERT's width, 32
    expected = 2.0 * softmax_classifier_loss(u, v, labels, head)
    expected = expected + 0.5 * in_batch_infonce_loss(u, v, temperature=0.5)
    torch.testing.assert_close(loss(embeddings, labels)["loss"], expected)
    assert loss.config_dict() == {
        "softmax": {"weight": 2.0, "classes": 4},
        "infonce": {"weight": 0.5, **loss.parts["infonce"].config_dict()},
    }
    assert loss.parts["infonce"].config_dict()["temperature"] == 0.5


def test_a_part_that_reads_text_ids_gets_the_labels_too_and_its_named_parts_are_logged() -> None:
    loss = weighted_loss_class({"test_text_ids_and_labels": 1.0, "cosine_mse": 0.0})(
        {
            "test_text_ids_and_labels": TextIdsAndLabelsLoss(),
            "cosine_mse": build_loss("cosine_mse", None),
        }
    )
    embeddings, labels = batch(3)
    ids = torch.tensor([0, 0, 1, 2, 2, 2])
    output = loss(embeddings, labels, text_ids={"sentence1": ids})
    torch.testing.assert_close(output["loss"], labels.sum() + 7)
    assert set(output) == {
        "loss",
        "loss_test_text_ids_and_labels",
        "test_text_ids_and_labels/ids",
        "loss_cosine_mse",
    }
    assert float(output["test_text_ids_and_labels/ids"]) == 7.0


def test_the_sums_class_takes_its_columns_labels_and_name_from_the_parts() -> None:
    """The union of the parts' columns; the one label kind of the parts that read labels
    (None when none does, also under a config); the class is named WeightedLossSum."""
    mixed = weighted_loss_class({"test_other_columns": 1.0, "test_mean_distance": 1.0})
    assert mixed.columns == ("sentence1", "sentence2", "hard_negative")
    assert mixed.label_kind == "binary"
    assert mixed.__name__ == "WeightedLossSum"
    unlabelled = weighted_loss_class({"test_mean_distance": 1.0, "infonce": 1.0})
    assert unlabelled.label_kind is None
    assert unlabelled.required_label_kind(None) is None
    from types import SimpleNamespace

    # infonce reads scores when a positive_threshold selects the positives
    assert unlabelled.required_label_kind(SimpleNamespace(positive_threshold=0.5)) == "score"


def test_labels_of_two_kinds_are_refused_naming_each_part() -> None:
    with pytest.raises(ValueError) as error:
        weighted_loss_class({"cosine_mse": 1.0, "test_binary": 1.0})
    assert str(error.value) == (
        "loss_weights: the losses need different labels (cosine_mse reads score labels, "
        "test_binary reads binary labels)"
    )


def test_the_sum_checks_a_saved_head_against_the_settings_of_its_part() -> None:
    """A saved 3-class classifier with num_labels 4 in the config: refused by the sum as by
    the softmax part alone, before any weights load; the matching head passes."""
    from types import SimpleNamespace

    from sts_core.heads import head_entry
    from sts_core.losses.classification import SOFTMAX_HEAD, SoftmaxClassifierLoss

    loss_type = weighted_loss_class({"softmax": 1.0, "test_mean_distance": 1.0})
    saved = {SOFTMAX_HEAD: head_entry(SoftmaxClassifierLoss.build_head(None, 32))}  # 3 classes
    loss_type.check_saved_heads(saved, SimpleNamespace(num_labels=3), 32)
    with pytest.raises(ValueError, match="already has a 'softmax_classifier' head") as error:
        loss_type.check_saved_heads(saved, SimpleNamespace(num_labels=4), 32)
    with pytest.raises(ValueError) as alone:
        SoftmaxClassifierLoss.check_saved_heads(saved, SimpleNamespace(num_labels=4), 32)
    assert str(error.value) == str(alone.value)
    with pytest.raises(ValueError, match="already has a 'softmax_classifier' head"):
        loss_type.check_saved_heads(saved, SimpleNamespace(num_labels=3), 16)  # other width


def test_a_sum_built_without_a_model_leaves_the_embeddings_as_given() -> None:
    """No encoder, no normalisation to undo: both parts see the vectors passed in."""
    embeddings, _ = batch(4)
    lengths = embeddings["sentence1"].norm(dim=-1).mean()
    parts = {"test_pooled_norm": PooledNormLoss(), "test_norm": NormLoss()}
    direct = weighted_loss_class({"test_pooled_norm": 1.0, "test_norm": 1.0})(parts)
    torch.testing.assert_close(direct(embeddings, None)["loss"], 2 * lengths)
    built = weighted_loss_class({"test_pooled_norm": 1.0, "test_norm": 1.0}).from_config(None)
    torch.testing.assert_close(built(embeddings, None)["loss"], 2 * lengths)
