"""The Matryoshka wrapper around a made-up base loss that records what it is given: the
class it builds takes the base's columns, label kind and checks, passes the config and the
model on, normalises each row at each width, logs the widest width's own parts, and its
name, description, saved settings and messages read as written (found by the mutation
pass of commit 3651ea2, in the git history of ``benchmarks/results/mutation/``)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
import torch

from sts_core.losses import EmbeddingLoss, HeadLoss
from sts_core.losses.matryoshka import matryoshka_loss_class, parse_matryoshka, with_matryoshka


class RecordingLoss(EmbeddingLoss):
    """Its loss is the sum of the rows' norms (so it tells a per-row normalisation from any
    other), its logged part the width it saw; it records the calls of its class methods."""

    columns: ClassVar[tuple[str, ...]] = ("anchor", "positive", "negative")
    text_id_columns: ClassVar[tuple[str, ...]] = ("anchor",)
    label_kind: ClassVar[str | None] = "binary"
    title: ClassVar[str] = "a recording loss"
    calls: ClassVar[list[tuple]] = []

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = scale

    @classmethod
    def display_name(cls) -> str:
        return "recording"

    @classmethod
    def from_config(cls, config: Any, model: Any = None) -> RecordingLoss:
        cls.calls.append(("from_config", config, model))
        return cls(config.scale)

    @classmethod
    def prepare_model(cls, model: Any, config: Any) -> None:
        cls.calls.append(("prepare_model", model, config))

    @classmethod
    def check_saved_heads(cls, heads: Any, config: Any, dimension: int) -> None:
        cls.calls.append(("check_saved_heads", heads, config, dimension))

    @classmethod
    def required_label_kind(cls, config: Any) -> str | None:
        return config.kind

    def config_dict(self) -> dict[str, Any]:
        return {"scale": self.scale}

    def forward(self, embeddings, labels, text_ids=None):
        width = next(iter(embeddings.values())).shape[-1]
        norms = sum(e.norm(dim=-1).sum() for e in embeddings.values())
        return {"loss": self.scale * norms, "width_seen": torch.tensor(float(width))}


def wrapped(dims=(8, 4), weights=(1.0, 0.5)):
    RecordingLoss.calls = []
    return matryoshka_loss_class(RecordingLoss, dims, weights)


def test_the_class_takes_the_bases_attributes_and_its_name() -> None:
    cls = wrapped()
    assert cls.__name__ == "MatryoshkaLoss"
    assert cls.columns == ("anchor", "positive", "negative")
    assert cls.text_id_columns == ("anchor",)
    assert cls.label_kind == "binary" and cls.reads_pooled is False
    assert cls.title == "Matryoshka over a recording loss"
    assert cls.display_name() == "matryoshka(recording; 1·8, 0.5·4)"
    assert cls.describe() == "Matryoshka over a recording loss at widths [8, 4]"


def test_the_config_and_the_model_reach_the_base_and_its_checks() -> None:
    cls = wrapped()
    config, model = SimpleNamespace(scale=3.0, kind="class"), SimpleNamespace(dimension=8)
    loss = cls.from_config(config, model)
    assert RecordingLoss.calls == [("from_config", config, model)] and loss.base.scale == 3.0
    cls.prepare_model(model, config)
    cls.check_saved_heads({"h": 1}, config, 8)
    assert RecordingLoss.calls[1:] == [
        ("prepare_model", model, config),
        ("check_saved_heads", {"h": 1}, config, 8),
    ]
    assert cls.required_label_kind(config) == "class"
    assert loss.config_dict() == {
        "matryoshka_dims": [8, 4],
        "matryoshka_weights": [1.0, 0.5],
        "base": {"scale": 3.0},
    }


def test_a_width_short_of_the_models_is_warned_about_in_words(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="sts_core.losses.matryoshka"):
        wrapped().from_config(SimpleNamespace(scale=1.0), SimpleNamespace(dimension=16))
    assert caplog.messages == [
        "matryoshka_dims [8, 4] leave out the model's whole width (16): its full embedding "
        "is not trained, only its first 8 dimensions"
    ]


def test_each_row_is_normalised_at_each_width_and_the_widest_parts_are_logged() -> None:
    loss = wrapped()(RecordingLoss(scale=1.0))
    embeddings = {"anchor": torch.arange(1.0, 17.0).reshape(2, 8) * torch.tensor([[1.0], [5.0]])}
    output = loss(embeddings, None)
    # every row has norm 1 after the cut and normalisation: 2 rows, weights 1 and 0.5
    assert float(output["loss"]) == pytest.approx(1.0 * 2 + 0.5 * 2)
    assert float(output["width_seen"]) == 8.0  # the widest width's own part
    assert float(output["matryoshka_8"]) == pytest.approx(2.0)
    assert float(output["matryoshka_4"]) == pytest.approx(2.0)


def test_default_weights_are_one_each_and_messages_read_as_written() -> None:
    config = SimpleNamespace(matryoshka_dims=[8, 4])  # no matryoshka_weights field at all
    assert with_matryoshka(RecordingLoss, config).weights == (1.0, 1.0)
    config.matryoshka_weights = None
    assert with_matryoshka(RecordingLoss, config).weights == (1.0, 1.0)
    assert parse_matryoshka([1], None) == ((1,), (1.0,))  # a width of 1 is allowed
    with pytest.raises(ValueError, match="^matryoshka_weights needs matryoshka_dims$"):
        parse_matryoshka(None, [1.0])
    with pytest.raises(
        ValueError, match="^matryoshka_weights: every weight is 0, so nothing would train$"
    ):
        parse_matryoshka([8, 4], [0, 0])


def test_a_loss_with_a_head_is_refused_in_words() -> None:
    class Headed(HeadLoss):
        @classmethod
        def display_name(cls) -> str:
            return "headed"

    with pytest.raises(ValueError) as refused:
        matryoshka_loss_class(Headed, (8,), (1.0,))
    assert str(refused.value) == (
        "matryoshka_dims with loss headed, which reads the pooled embeddings with a head of "
        "the encoder's width: Matryoshka cuts the embeddings the loss compares, so it needs a "
        "loss over the embeddings alone"
    )


def test_a_degenerate_batch_is_noted_once_from_the_widest_width() -> None:
    class Degenerate(RecordingLoss):
        def forward(self, embeddings, labels, text_ids=None):
            width = next(iter(embeddings.values())).shape[-1]
            self.note_degenerate(f"no pair at width {width}")
            return super().forward(embeddings, labels, text_ids)

    loss = matryoshka_loss_class(Degenerate, (8, 4, 2), (1.0, 1.0, 1.0))(Degenerate())
    loss({"anchor": torch.ones(2, 8)}, None)
    assert loss.pop_degenerate() == [("no pair at width 8", True)]
