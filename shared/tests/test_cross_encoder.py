"""``sts_core.cross_encoder``'s loading, collator and batched scoring, each setting against
what it must pass on (a tokenizer and model that record their calls) or count."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
import transformers

from sts_core.cross_encoder import (
    CrossEncoderScorer,
    PairCrossCollator,
    cross_encoder_activation,
    load_cross_encoder,
    predict_pair_scores,
)

EOS_ID = 2


class RecordingTokenizer:
    """Stands in for ``AutoTokenizer``: records what it is loaded with."""

    loaded_with: dict[str, Any] = {}

    def __init__(self, pad_token: str | None, model_max_length: Any) -> None:
        self.pad_token = pad_token
        self.eos_token = "</s>"
        if model_max_length != "absent":
            self.model_max_length = model_max_length

    @property
    def pad_token_id(self) -> int | None:
        return {"</s>": EOS_ID, "[PAD]": 0}.get(self.pad_token)


class RecordingModel:
    loaded_with: dict[str, Any] = {}

    def __init__(self) -> None:
        self.config = SimpleNamespace(pad_token_id="as saved")


def fake_loaders(monkeypatch: pytest.MonkeyPatch, pad_token=None, model_max_length=10**30):
    seen: dict[str, Any] = {}

    def tokenizer(location, **options):
        seen["tokenizer"] = options
        return RecordingTokenizer(pad_token, model_max_length)

    def model(location, **options):
        seen["model"] = options
        return RecordingModel()

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", tokenizer)
    monkeypatch.setattr(transformers.AutoModelForSequenceClassification, "from_pretrained", model)
    return seen


def test_loading_runs_shipped_code_only_when_asked(
    tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = fake_loaders(monkeypatch)
    load_cross_encoder(tiny_bert_dir)
    assert seen == {"tokenizer": {}, "model": {"num_labels": 1, "dtype": torch.float32}}
    load_cross_encoder(tiny_bert_dir, trust_remote_code=True)
    assert seen == {
        "tokenizer": {"trust_remote_code": True},
        "model": {"num_labels": 1, "dtype": torch.float32, "trust_remote_code": True},
    }


def test_a_tokenizer_without_padding_pads_with_its_end_token(
    tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_loaders(monkeypatch, pad_token=None)
    model, tokenizer, _ = load_cross_encoder(tiny_bert_dir)
    assert (tokenizer.pad_token, model.config.pad_token_id) == ("</s>", EOS_ID)
    fake_loaders(monkeypatch, pad_token="[PAD]")
    model, tokenizer, _ = load_cross_encoder(tiny_bert_dir)
    assert (tokenizer.pad_token, model.config.pad_token_id) == ("[PAD]", "as saved")


@pytest.mark.parametrize(
    ("declared", "asked", "expected"),
    [
        (10**30, None, 512),  # transformers' "no limit" is capped at 512
        (128, None, 128),  # the tokenizer's own limit when lower
        ("absent", None, 512),
        (None, None, 512),
        (128, 40, 40),  # the caller's wins
        (128, 1000, 1000),
    ],
)
def test_the_max_length_is_the_callers_else_the_tokenizers_at_most_512(
    tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch, declared, asked, expected
) -> None:
    fake_loaders(monkeypatch, model_max_length=declared)
    assert load_cross_encoder(tiny_bert_dir, max_length=asked)[2] == expected


def test_a_real_model_saved_in_bfloat16_loads_in_float32(tiny_bert_dir: Path, tmp_path) -> None:
    model, tokenizer, _ = load_cross_encoder(tiny_bert_dir)
    model.to(torch.bfloat16).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "bfloat16"
    reloaded, _, _ = load_cross_encoder(tmp_path)
    assert {parameter.dtype for parameter in reloaded.parameters()} == {torch.float32}


@pytest.fixture(scope="module")
def tokenizer(tiny_bert_dir: Path) -> Any:
    return transformers.AutoTokenizer.from_pretrained(tiny_bert_dir)


def test_the_collator_takes_labels_from_the_score_column_by_default(tokenizer) -> None:
    rows = [
        {"sentence1": "a cat sat", "sentence2": "a dog sat", "score": 0.25},
        {"sentence1": "the sun", "sentence2": "a star", "score": 1},
    ]
    batch = PairCrossCollator(tokenizer, 32)(rows)
    assert batch["labels"].tolist() == [0.25, 1.0]
    no_score = {key: value for key, value in rows[0].items() if key != "score"}
    unlabelled = PairCrossCollator(tokenizer, 32)([no_score])
    assert "labels" not in unlabelled
    renamed = PairCrossCollator(tokenizer, 32, "gold")([{**rows[0], "gold": 0.5}])
    assert renamed["labels"].tolist() == [0.5]
    assert batch["input_ids"].shape[1] > 6
    assert PairCrossCollator(tokenizer, 6)(rows)["input_ids"].shape == (2, 6)


class CountingModel(torch.nn.Module):
    """A 'cross-encoder' whose logit is the pair's token count; records each forward pass."""

    def __init__(self, device: str = "cpu") -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1, device=device))
        self.passes: list[tuple[tuple[int, ...], str]] = []

    def forward(self, input_ids, attention_mask, **_):
        self.passes.append((tuple(input_ids.shape), input_ids.device.type))
        if input_ids.device.type == "meta":
            return SimpleNamespace(logits=torch.zeros(input_ids.shape[0], 1))
        return SimpleNamespace(logits=attention_mask.sum(dim=1, keepdim=True).float())


def test_pairs_are_scored_64_a_pass_in_order_up_to_512_tokens(tokenizer) -> None:
    first = [" ".join(["word"] * n) for n in range(1, 65)] + [" ".join(["long"] * 600)]
    second = ["x"] * 65
    model = CountingModel().train()
    scores = predict_pair_scores(model, tokenizer, first, second)
    assert [shape[0] for shape, _ in model.passes] == [64, 1]
    expected = [n + 4 for n in range(1, 65)] + [512]  # [CLS] … [SEP] x [SEP]
    assert scores.dtype == np.float64
    np.testing.assert_array_equal(scores, expected)
    assert model.training  # put back as it was
    model.passes.clear()
    scorer = CrossEncoderScorer(model, tokenizer, 512, "identity")
    np.testing.assert_array_equal(scorer.score_pairs(first, second), expected)
    assert [shape[0] for shape, _ in model.passes] == [64, 1]


def test_the_batch_goes_to_the_models_device(tokenizer) -> None:
    model = CountingModel(device="meta")
    predict_pair_scores(model, tokenizer, ["a b"], ["c"])
    assert model.passes == [((1, 6), "meta")]


def test_no_pairs_score_to_an_empty_array_and_unequal_sides_are_refused(tokenizer) -> None:
    model = CountingModel()
    empty = predict_pair_scores(model, tokenizer, [], [])
    assert (empty.shape, empty.dtype, model.passes) == ((0,), np.float64, [])
    with pytest.raises(ValueError, match="^2 first sentences but 1 second sentences: a cross"):
        predict_pair_scores(model, tokenizer, ["a", "b"], ["c"])


def test_a_config_is_read_as_utf8_json(tmp_path: Path) -> None:
    config = {
        "architectures": ["BertForSequenceClassification"],
        "id2label": {"0": "ähnlich"},
        "sbert_ce_default_activation_function": "torch.nn.modules.activation.Tanh",
    }
    (tmp_path / "config.json").write_bytes(json.dumps(config, ensure_ascii=False).encode())
    assert cross_encoder_activation(tmp_path) == "tanh"
