"""Heads (sts_core.heads): the registry, LinearHead, pair scoring, and the round trip of a
head through save_pretrained / from_pretrained / load_weights.

References are computed independently: pair features and cosine similarity by hand
(numpy), head outputs with torch.nn.functional.linear on the saved weights."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from sts_core.encoder import EXTRA_WEIGHTS_NAME, SentenceEncoder
from sts_core.heads import (
    HEAD_TYPES,
    HEADS_CONFIG_NAME,
    PAIR_FEATURES,
    Head,
    LinearHead,
    build_head,
    can_score_pairs,
    head_type_of,
    pair_features,
    register_head,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SENTENCES = ["a man is playing a guitar", "the dog", "a girl plays the piano", "two men"]
OTHERS = ["a man plays the guitar", "a cat", "someone is slicing an onion", "two women"]


@register_head("test-scaled-cosine")
class ScaledCosine(Head):
    """A head with a parameter and a buffer: score = scale · cos(u, v) + shift."""

    def __init__(self, shift: float = 0.0) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.0))
        self.register_buffer("shift", torch.tensor(float(shift)))

    def head_config(self) -> dict[str, Any]:
        return {"shift": float(self.shift)}

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.scale * nn.functional.cosine_similarity(u, v, dim=-1) + self.shift

    def score(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self(u, v)


def _encoder(folder: Path) -> SentenceEncoder:
    return SentenceEncoder.from_pretrained(folder, padding_free=False)


def _pairs(encoder: SentenceEncoder) -> tuple[torch.Tensor, torch.Tensor]:
    u = torch.from_numpy(encoder.encode(SENTENCES, show_progress_bar=False))
    v = torch.from_numpy(encoder.encode(OTHERS, show_progress_bar=False))
    return u, v


def _randomise(module: nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))


# ----------------------------------------------------------------- registry
def test_register_head_checks_the_class_and_the_name() -> None:
    assert HEAD_TYPES["linear"] is LinearHead and LinearHead.head_type == "linear"
    assert head_type_of(LinearHead(4, 1)) == "linear"
    with pytest.raises(ValueError, match="already registered"):

        @register_head("linear")
        class Other(LinearHead):
            pass

    with pytest.raises(TypeError, match="nn.Module class with head_config"):

        @register_head("test-not-a-module")
        class NotAModule:
            def head_config(self) -> dict:
                return {}

            @classmethod
            def from_head_config(cls, config: dict) -> NotAModule:
                return cls()

    with pytest.raises(ValueError, match="non-empty"):
        register_head("")
    with pytest.raises(TypeError, match="not a registered head type"):
        head_type_of(nn.Linear(4, 1))
    assert "test-not-a-module" not in HEAD_TYPES


def test_build_head_imports_the_module_that_registers_the_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = "sts_test_heads_plugin_xyz"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            """
            from sts_core.heads import LinearHead, register_head

            @register_head("test-plugin-linear")
            class PluginHead(LinearHead):
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    entry = {"type": "test-plugin-linear", "config": {"in_features": 6}, "module": module}
    try:
        head = build_head(entry)
        assert type(head).__module__ == module and head.in_features == 6
        assert head.out_features == 1
    finally:
        HEAD_TYPES.pop("test-plugin-linear", None)
        sys.modules.pop(module, None)
    with pytest.raises(ValueError, match="'test-unknown' is not registered.*no_such_module_xyz"):
        build_head({"type": "test-unknown", "config": {}, "module": "no_such_module_xyz"})


# ----------------------------------------------------------------- pair features, LinearHead
@pytest.mark.parametrize("kind", list(PAIR_FEATURES))
def test_pair_features_and_linear_head_shapes(kind: str) -> None:
    u, v = torch.randn(5, 8), torch.randn(5, 8)
    parts = {
        "u": u.numpy(),
        "v": v.numpy(),
        "|u-v|": np.abs(u.numpy() - v.numpy()),
        "u*v": u.numpy() * v.numpy(),
    }
    expected = np.concatenate([parts[name] for name in kind.split(",")], axis=1)
    np.testing.assert_array_equal(pair_features(u, v, kind).numpy(), expected)

    head = LinearHead.for_pairs(8, 3, pair_features=kind)
    assert head.in_features == PAIR_FEATURES[kind] * 8 and head.out_features == 3
    out = head(u, v)
    assert out.shape == (5, 3)
    reference = torch.from_numpy(expected) @ head.weight.detach().T + head.bias.detach()
    torch.testing.assert_close(out.detach(), reference)
    # the features given already concatenated: the plain layer
    torch.testing.assert_close(head(torch.from_numpy(expected)), out)


def test_linear_head_options_and_errors() -> None:
    u, v = torch.randn(4, 6), torch.randn(4, 6)
    relu = LinearHead.for_pairs(6, 1, pair_features="|u-v|", bias=False, activation="relu")
    assert relu.bias is None
    assert relu.head_config() == {
        "in_features": 6,
        "out_features": 1,
        "bias": False,
        "pair_features": "|u-v|",
        "activation": "relu",
    }
    expected = torch.relu((u - v).abs() @ relu.weight.detach().T).squeeze(-1)
    torch.testing.assert_close(relu.score(u, v).detach(), expected)
    assert (relu.score(u, v) >= 0).all()
    tanh = LinearHead(6, 6, activation="tanh")  # SimCSE's MLP over one embedding
    torch.testing.assert_close(
        tanh(u).detach(), torch.tanh(u @ tanh.weight.detach().T + tanh.bias.detach())
    )
    with pytest.raises(ValueError, match="reads one embedding"):
        tanh(u, v)
    classifier = LinearHead.for_pairs(6, 3)
    assert can_score_pairs(relu) and not can_score_pairs(classifier) and not can_score_pairs(tanh)
    with pytest.raises(ValueError, match="gives no pair score"):
        classifier.score(u, v)
    with pytest.raises(ValueError, match="not a multiple"):
        LinearHead(7, 1, pair_features="u,v")
    with pytest.raises(ValueError, match="choose one of"):
        LinearHead.for_pairs(6, 1, pair_features="u-v")
    with pytest.raises(ValueError, match="activation 'gelu'"):
        LinearHead(6, 1, activation="gelu")
    with pytest.raises(ValueError, match="one shape"):
        pair_features(u, v[:, :3])
    rebuilt = LinearHead.from_head_config(relu.head_config())
    assert rebuilt.head_config() == relu.head_config()


# ----------------------------------------------------------------- the encoder's heads
def test_add_head_and_score_pairs(tiny_bert_dir: Path) -> None:
    encoder = _encoder(tiny_bert_dir)
    u, v = _pairs(encoder)
    # default: cosine similarity, computed here by hand
    cosine = (u.numpy() * v.numpy()).sum(1) / (
        np.linalg.norm(u.numpy(), axis=1) * np.linalg.norm(v.numpy(), axis=1)
    )
    np.testing.assert_allclose(encoder.score_pairs(u, v).numpy(), cosine, rtol=1e-6)
    np.testing.assert_allclose(encoder.score_pairs(u.numpy(), v.numpy()).numpy(), cosine, rtol=1e-6)

    classifier = encoder.add_head("classifier", LinearHead.for_pairs(encoder.dimension, 3))
    assert encoder.heads == {"classifier": classifier} and encoder.classifier is classifier
    assert "classifier.weight" in encoder.state_dict()
    with pytest.raises(ValueError, match="no score"):
        encoder.pair_scorer = "classifier"
    with pytest.raises(ValueError, match="not a head"):
        encoder.pair_scorer = "regressor"
    regressor = LinearHead.for_pairs(encoder.dimension, 1, pair_features="u,v")
    encoder.add_head("regressor", regressor, pair_scorer=True)
    assert encoder.pair_scorer == "regressor"
    torch.testing.assert_close(encoder.score_pairs(u, v), regressor(u, v).squeeze(-1))
    encoder.pair_scorer = None
    np.testing.assert_allclose(encoder.score_pairs(u, v).numpy(), cosine, rtol=1e-6)

    with pytest.raises(TypeError, match="not a registered head type"):
        encoder.add_head("plain", nn.Linear(3, 1))
    for bad in ("backbone", "tokenizer", "encode", "not a name"):
        with pytest.raises(ValueError, match="head name"):
            encoder.add_head(bad, LinearHead(3, 1))
    encoder.pair_scorer = "regressor"
    assert encoder.remove_head("regressor") is regressor
    assert encoder.pair_scorer is None and list(encoder.heads) == ["classifier"]
    assert not hasattr(encoder, "regressor")


def test_heads_round_trip_bit_for_bit(tiny_bert_dir: Path, tmp_path: Path) -> None:
    encoder = _encoder(tiny_bert_dir)
    dim = encoder.dimension
    encoder.add_head("softmax_classifier", LinearHead.for_pairs(dim, 3))
    encoder.add_head(
        "regression",
        LinearHead.for_pairs(dim, 1, pair_features="|u-v|", activation="tanh"),
        pair_scorer=True,
    )
    encoder.add_head("scaled", ScaledCosine(shift=0.25))
    for seed, head in enumerate(encoder.heads.values()):
        _randomise(head, seed)
    u, v = _pairs(encoder)
    with torch.no_grad():
        expected = {name: head(u, v) for name, head in encoder.heads.items()}
        expected_scores = encoder.score_pairs(u, v)
    encoder.save_pretrained(tmp_path)

    listing = json.loads((tmp_path / HEADS_CONFIG_NAME).read_text())
    assert listing["pair_scorer"] == "regression"
    assert {name: entry["type"] for name, entry in listing["heads"].items()} == {
        "softmax_classifier": "linear",
        "regression": "linear",
        "scaled": "test-scaled-cosine",
    }
    assert listing["heads"]["regression"]["config"]["pair_features"] == "|u-v|"
    saved = load_file(tmp_path / EXTRA_WEIGHTS_NAME)
    assert set(saved) == {
        "softmax_classifier.weight",
        "softmax_classifier.bias",
        "regression.weight",
        "regression.bias",
        "scaled.scale",
        "scaled.shift",
    }

    reloaded = SentenceEncoder.from_pretrained(tmp_path, padding_free=False)
    assert list(reloaded.heads) == ["softmax_classifier", "regression", "scaled"]
    assert reloaded.pair_scorer == "regression"
    for name, head in reloaded.heads.items():
        assert type(head) is type(encoder.heads[name])
        assert head.head_config() == encoder.heads[name].head_config()
    # the reference: the saved weights applied by hand
    reference = nn.functional.linear(
        pair_features(u, v), saved["softmax_classifier.weight"], saved["softmax_classifier.bias"]
    )
    u2, v2 = _pairs(reloaded)
    assert torch.equal(u2, u) and torch.equal(v2, v)
    with torch.no_grad():
        for name, head in reloaded.heads.items():
            assert torch.equal(head(u2, v2), expected[name]), name
        assert torch.equal(reloaded.heads["softmax_classifier"](u2, v2), reference)
        assert torch.equal(reloaded.score_pairs(u2, v2), expected_scores)
    assert expected_scores.unique().numel() == len(u)  # a real score, not a constant

    # saving again without heads removes the listing
    reloaded.remove_head("softmax_classifier")
    reloaded.remove_head("regression")
    reloaded.remove_head("scaled")
    reloaded.save_pretrained(tmp_path)
    assert not (tmp_path / HEADS_CONFIG_NAME).exists()
    assert not (tmp_path / EXTRA_WEIGHTS_NAME).exists()
    assert SentenceEncoder.from_pretrained(tmp_path).heads == {}


def test_load_weights_with_heads_is_strict(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """Resuming: the trainer's encoder has its heads already; load_weights fills them."""
    encoder = _encoder(tiny_bert_dir)
    encoder.add_head("regression", LinearHead.for_pairs(encoder.dimension), pair_scorer=True)
    _randomise(encoder.regression, 0)
    encoder.save_pretrained(tmp_path)

    resumed = _encoder(tiny_bert_dir)
    resumed.add_head("regression", LinearHead.for_pairs(resumed.dimension), pair_scorer=True)
    _randomise(resumed.regression, 1)
    assert not torch.equal(resumed.regression.weight, encoder.regression.weight)
    resumed.load_weights(tmp_path)
    for key, value in encoder.state_dict().items():
        assert torch.equal(resumed.state_dict()[key], value), key

    headless = _encoder(tiny_bert_dir)
    with pytest.raises(OSError, match="regression"):
        headless.load_weights(tmp_path)  # unexpected keys: strict


def test_head_of_an_unregistered_type_is_an_error_naming_it(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder = _encoder(tiny_bert_dir)
    encoder.add_head("scaled", ScaledCosine())
    encoder.save_pretrained(tmp_path)
    monkeypatch.delitem(HEAD_TYPES, "test-scaled-cosine")
    # the listing names the test module: make its import fail
    listing = json.loads((tmp_path / HEADS_CONFIG_NAME).read_text())
    assert listing["heads"]["scaled"]["module"] == __name__
    monkeypatch.setitem(sys.modules, __name__, None)
    with pytest.raises(OSError, match="head 'scaled'.*'test-scaled-cosine' is not registered"):
        SentenceEncoder.from_pretrained(tmp_path)


def test_extra_modules_without_a_heads_listing_still_load(
    tiny_bert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A module added with add_module (cosent's softmax classifier today) is saved in the
    extra weights, not listed: the folder loads with a warning, and add_module +
    load_weights (strict) restores it."""
    encoder = _encoder(tiny_bert_dir)
    encoder.add_module("softmax_classifier", nn.Linear(3 * encoder.dimension, 3))
    encoder.save_pretrained(tmp_path)
    assert (tmp_path / EXTRA_WEIGHTS_NAME).is_file()
    assert not (tmp_path / HEADS_CONFIG_NAME).exists()
    with caplog.at_level(logging.WARNING, logger="sts_core.encoder"):
        plain = SentenceEncoder.from_pretrained(tmp_path, padding_free=False)
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("softmax_classifier" in m and "ignored" in m for m in messages), messages
    assert plain.heads == {} and not hasattr(plain, "softmax_classifier")
    np.testing.assert_array_equal(
        plain.encode(SENTENCES, show_progress_bar=False),
        encoder.encode(SENTENCES, show_progress_bar=False),
    )
    plain.add_module("softmax_classifier", nn.Linear(3 * plain.dimension, 3))
    plain.load_weights(tmp_path)
    assert torch.equal(plain.softmax_classifier.weight, encoder.softmax_classifier.weight)
