"""Matryoshka over a registered loss (``matryoshka_dims``): equal to sentence-transformers'
``MatryoshkaLoss`` over ``CosineSimilarityLoss`` on the same model and inputs, and to the
weighted sum of the base loss on cut, normalised embeddings written out here; the settings'
checks and the refusals (a loss with a head, a width wider than the model)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch
from datasets import Dataset

from sts_core.encoder import SentenceEncoder
from sts_core.losses import EmbeddingLoss, WeightedLossSum, loss_class, weighted_loss_class
from sts_core.losses.matryoshka import matryoshka_loss_class, parse_matryoshka, with_matryoshka
from sts_core.testing import quick_training_args
from sts_core.training import BaseConfig, BaseTrainer

SENTENCES_1 = ["a man plays a guitar", "the cat sleeps", "rain falls on the city", "kids run"]
SENTENCES_2 = ["someone plays music", "a dog barks loudly", "it is raining", "children play"]
LABELS = torch.tensor([0.8, 0.1, 0.9, 0.6])
DIMS, WEIGHTS = (32, 16, 8), (1.0, 0.5, 2.0)


def peer_and_embeddings(model_dir: Path) -> tuple[object, list[dict], dict[str, torch.Tensor]]:
    """A sentence-transformers model of the tiny BERT (dropout 0), its features of the pairs
    and the embeddings it gives them."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model = sentence_transformers.SentenceTransformer(str(model_dir), device="cpu")
    model.eval()
    features = [model.tokenize(SENTENCES_1), model.tokenize(SENTENCES_2)]
    with torch.no_grad():
        embeddings = {
            column: model(dict(feature))["sentence_embedding"]
            for column, feature in zip(("sentence1", "sentence2"), features, strict=True)
        }
    return model, features, embeddings


def test_matryoshka_cosine_mse_equals_the_peers_matryoshka_loss(
    tiny_bert_nodropout_dir: Path,
) -> None:
    from sentence_transformers.sentence_transformer.losses import (
        CosineSimilarityLoss,
        MatryoshkaLoss,
    )

    model, features, embeddings = peer_and_embeddings(tiny_bert_nodropout_dir)
    peer = MatryoshkaLoss(model, CosineSimilarityLoss(model), list(DIMS), list(WEIGHTS))
    with torch.no_grad():
        expected = float(peer([dict(f) for f in features], LABELS))
    ours_class = matryoshka_loss_class(loss_class("cosine_mse"), DIMS, WEIGHTS)
    ours = ours_class(loss_class("cosine_mse")())(embeddings, LABELS)
    assert float(ours["loss"]) == pytest.approx(expected, abs=1e-6)
    # a changed weight gives another value: the comparison can fail
    other = matryoshka_loss_class(loss_class("cosine_mse"), DIMS, (1.0, 0.5, 1.0))
    assert float(other(loss_class("cosine_mse")())(embeddings, LABELS)["loss"]) != pytest.approx(
        expected, abs=1e-6
    )


def test_matryoshka_is_the_weighted_sum_of_the_base_loss_on_cut_normalised_embeddings() -> None:
    generator = torch.Generator().manual_seed(0)
    u, v = torch.randn(4, 32, generator=generator), torch.randn(4, 32, generator=generator)
    expected = 0.0
    for dim, weight in zip(DIMS, WEIGHTS, strict=True):
        a, b = u[:, :dim], v[:, :dim]
        cosine = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
        expected += weight * float(((cosine - LABELS) ** 2).mean())
    ours = matryoshka_loss_class(loss_class("cosine_mse"), DIMS, WEIGHTS)(
        loss_class("cosine_mse")()
    )
    output = ours({"sentence1": u, "sentence2": v}, LABELS)
    assert float(output["loss"]) == pytest.approx(expected, abs=1e-6)
    assert sorted(output) == ["loss", "matryoshka_16", "matryoshka_32", "matryoshka_8"]
    a, b = u[:, :8], v[:, :8]
    width_8 = float(((torch.cosine_similarity(a, b) - LABELS) ** 2).mean())
    assert float(output["matryoshka_8"]) == pytest.approx(width_8, abs=1e-6)  # unweighted


def test_the_settings_are_checked_and_sorted_widest_first() -> None:
    assert parse_matryoshka([64, 384, 128], [1, 2, 0.5]) == ((384, 128, 64), (2.0, 0.5, 1.0))
    assert parse_matryoshka([8, 16], None) == ((16, 8), (1.0, 1.0))
    assert parse_matryoshka(None, None) is None
    refused = {
        "whole number": ([8.5], None),
        "at least 1": ([0], None),
        "names a width twice": ([8, 8], None),
        "2 weights for 1": ([8], [1, 1]),
        "finite and ≥ 0": ([8, 4], [1, -1]),
        "every weight is 0": ([8], [0]),
        "needs matryoshka_dims": (None, [1]),
    }
    for message, (dims, weights) in refused.items():
        with pytest.raises(ValueError, match=message):
            parse_matryoshka(dims, weights)
    config = BaseConfig(output_dir="/tmp/m", matryoshka_dims=[8, 32], matryoshka_weights=[3, 1])
    assert (config.matryoshka_dims, config.matryoshka_weights) == ([32, 8], [1.0, 3.0])
    with pytest.raises(ValueError, match="names a width twice"):
        BaseConfig(output_dir="/tmp/m", matryoshka_dims=[8, 8])


def test_a_loss_with_a_head_and_a_width_beyond_the_model_are_refused() -> None:
    with pytest.raises(ValueError, match="reads the pooled embeddings with a head"):
        matryoshka_loss_class(loss_class("softmax"), (8,), (1.0,))
    parts = {"cosine_mse": loss_class("cosine_mse"), "softmax": loss_class("softmax")}
    with_a_head = type("Sum", (WeightedLossSum,), {"part_classes": parts})  # a part's head
    with pytest.raises(ValueError, match="reads the pooled embeddings"):
        matryoshka_loss_class(with_a_head, (8,), (1.0,))
    matryoshka_loss_class(weighted_loss_class({"cosine_mse": 1, "infonce": 1}), (8,), (1.0,))
    wide = matryoshka_loss_class(loss_class("cosine_mse"), (64, 8), (1.0, 1.0))
    with pytest.raises(ValueError, match="64 is wider than the model's embeddings \\(32"):
        wide.from_config(BaseConfig(output_dir="/tmp/m"), SimpleNamespace(dimension=32))
    assert isinstance(wide.from_config(BaseConfig(output_dir="/tmp/m")).base, torch.nn.Module)


def test_the_method_and_every_training_set_get_the_matryoshka_loss() -> None:
    from sts_core.training.method_registry import CORE_METHOD
    from sts_core.training.multi_dataset import set_loss_class

    config = BaseConfig(output_dir="/tmp/m", matryoshka_dims=[16, 8])
    trained = CORE_METHOD.loss_class(config)
    assert (trained.base_class, trained.dims) == (loss_class("cosine_mse"), (16, 8))
    other = set_loss_class(CORE_METHOD, config, "infonce")
    assert (other.base_class, other.weights) == (loss_class("infonce"), (1.0, 1.0))
    plain = BaseConfig(output_dir="/tmp/m")
    assert CORE_METHOD.loss_class(plain) is loss_class("cosine_mse")
    assert with_matryoshka(loss_class("infonce"), plain) is loss_class("infonce")


PAIRS = Dataset.from_dict(
    {
        "sentence1": [f"a man plays a guitar {i}" for i in range(7)],
        "sentence2": [f"a man plays music {'and sings ' * (i % 3)}{i}" for i in range(7)],
        "score": [i / 6 for i in range(7)],
    }
)


def trainer_loss_and_gradients(model_dir: Path, tmp_path: Path, cache: int | None, **settings):
    encoder = SentenceEncoder.from_pretrained(model_dir)
    args = quick_training_args(
        BaseConfig, tmp_path / f"out-{cache}", gradient_cache_batch_size=cache, **settings
    )
    trainer = BaseTrainer(encoder, args, train_dataset=PAIRS)
    batch = trainer.data_collator([PAIRS[i] for i in range(len(PAIRS))])
    encoder.train()
    loss = trainer.compute_loss(encoder, batch)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
    return loss.detach(), grads


def test_the_trainer_trains_the_matryoshka_loss_also_under_the_gradient_cache(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """The trainer's loss is the Matryoshka sum (not the full width's loss alone), and
    mini-batches of 3 give the loss and gradients of the whole batch."""
    settings = {"matryoshka_dims": [32, 8], "matryoshka_weights": [1.0, 3.0]}
    whole_loss, whole = trainer_loss_and_gradients(
        tiny_bert_nodropout_dir, tmp_path, None, **settings
    )
    cached_loss, cached = trainer_loss_and_gradients(
        tiny_bert_nodropout_dir, tmp_path, 3, **settings
    )
    plain_loss, _ = trainer_loss_and_gradients(tiny_bert_nodropout_dir, tmp_path, None)
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)  # dropout 0
    u, v = (
        torch.from_numpy(encoder.encode(PAIRS[column], show_progress_bar=False))
        for column in ("sentence1", "sentence2")
    )
    labels = torch.tensor(PAIRS["score"])
    by_hand = sum(
        weight * ((torch.cosine_similarity(u[:, :dim], v[:, :dim]) - labels) ** 2).mean()
        for dim, weight in ((32, 1.0), (8, 3.0))
    )
    torch.testing.assert_close(whole_loss, by_hand.detach(), rtol=1e-4, atol=1e-5)
    assert float(plain_loss) != pytest.approx(float(whole_loss), abs=1e-4)
    torch.testing.assert_close(cached_loss, whole_loss, rtol=1e-5, atol=1e-6)
    assert cached.keys() == whole.keys() and len(whole) > 4
    for name, grad in whole.items():
        torch.testing.assert_close(cached[name], grad, rtol=1e-4, atol=1e-6, msg=name)


# ----------------------------------------------------------------- a smaller embedding
def test_encode_returns_the_first_dimensions_normalised_again_when_the_model_normalises(
    tiny_bert_nodropout_dir: Path,
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    full = encoder.encode(SENTENCES_1, show_progress_bar=False)
    cut = encoder.encode(SENTENCES_1, show_progress_bar=False, truncate_dim=8)
    assert cut.shape == (4, 8) and (cut == full[:, :8]).all()
    encoder.truncate_dim = 16  # the default of every encode() (the evaluators' too)
    assert encoder.encode(SENTENCES_1, show_progress_bar=False).shape == (4, 16)
    unit = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir, normalize=True)
    cut_unit = unit.encode(SENTENCES_1, show_progress_bar=False, truncate_dim=8)
    expected = full[:, :8] / (full[:, :8] ** 2).sum(-1, keepdims=True) ** 0.5
    assert abs(cut_unit - expected).max() < 1e-6
    for width, message in ((0, "outside 1 … 32"), (33, "outside 1 … 32"), (8.0, "whole")):
        with pytest.raises(ValueError, match=message):
            encoder.encode(SENTENCES_1, show_progress_bar=False, truncate_dim=width)


def test_a_matryoshka_run_records_its_widths_in_every_save(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = quick_training_args(BaseConfig, tmp_path / "out", matryoshka_dims=[8, 32])
    BaseTrainer(encoder, args, train_dataset=PAIRS)
    encoder.save_pretrained(tmp_path / "saved")
    assert SentenceEncoder.from_pretrained(tmp_path / "saved").matryoshka_dims == [32, 8]
    plain = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    plain.save_pretrained(tmp_path / "plain")
    config = (tmp_path / "plain" / "sts_encoder_config.json").read_text(encoding="utf-8")
    assert "matryoshka_dims" not in config
    assert SentenceEncoder.from_pretrained(tmp_path / "plain").matryoshka_dims is None


def test_sts_eval_scores_at_the_width_it_is_given(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scipy.stats import spearmanr

    from sts_core.cli import eval_main
    from sts_core.data import load_named

    fixtures = Path(__file__).parent / "fixtures" / "data"
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    encoder.matryoshka_dims = [32, 16]
    encoder.save_pretrained(tmp_path / "model")
    argv = ["--model", str(tmp_path / "model"), "--data-dir", str(fixtures), "--tasks", "stsb"]
    argv += ["--pairs", "stsb:dev", "--quiet"]
    assert eval_main([*argv, "--truncate-dim", "8", "--output", str(tmp_path / "r8")]) == 0
    assert "trained with matryoshka_dims [32, 16], not this width" in capsys.readouterr().err
    scored = json.loads((tmp_path / "r8.json").read_text(encoding="utf-8"))
    dev = load_named("stsb", "dev", fixtures)
    u, v = (
        torch.from_numpy(encoder.encode(dev[c], show_progress_bar=False, truncate_dim=8))
        for c in ("sentence1", "sentence2")
    )
    by_hand = spearmanr(torch.cosine_similarity(u, v).numpy(), dev["score"]).statistic * 100
    assert scored["pairs"]["stsb:dev"]["spearman"] == pytest.approx(by_hand, abs=1e-4)
    assert eval_main([*argv, "--truncate-dim", "16"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert eval_main([*argv, "--truncate-dim", "64"]) == 2
    assert "--truncate-dim 64: the model's embeddings have 32 dimensions" in capsys.readouterr().err


# ----------------------------------------------------------------- guards
class NotingLoss(EmbeddingLoss):
    """A stand-in base loss: notes every batch as degenerate, logs a part of its own and
    reads the text ids it is given."""

    text_id_columns = ("sentence1",)

    def forward(self, embeddings, labels, text_ids=None):
        self.note_degenerate("no two distinct labels")
        width = next(iter(embeddings.values())).shape[-1]
        self.seen_ids = text_ids
        return {"loss": torch.tensor(float(width)), "spread": torch.tensor(width * 10.0)}


def test_a_batch_is_degenerate_once_and_the_widest_widths_parts_are_logged() -> None:
    loss = matryoshka_loss_class(NotingLoss, (16, 8), (1.0, 1.0))(NotingLoss())
    ids = {"sentence1": torch.tensor([0, 1])}
    output = loss({"sentence1": torch.ones(2, 32), "sentence2": torch.ones(2, 32)}, None, ids)
    assert loss.pop_degenerate() == [("no two distinct labels", True)]  # not once per width
    assert float(output["spread"]) == 160.0  # the widest width's part
    assert float(output["loss"]) == 24.0 and loss.base.seen_ids is ids


@dataclass
class WithLoss(BaseConfig):
    """A method's config: one with a ``loss`` field."""

    declared_losses: ClassVar[tuple[str, ...]] = ("cosine_mse", "softmax", "infonce")
    loss: str = "cosine_mse"


def test_the_settings_refuse_bools_infinities_and_a_head_at_parse_time() -> None:
    with pytest.raises(ValueError, match="not a whole number"):
        parse_matryoshka([True], None)
    with pytest.raises(ValueError, match="not a whole number"):
        parse_matryoshka([float("inf")], None)
    with pytest.raises(ValueError, match="finite and ≥ 0"):
        parse_matryoshka([8], [float("inf")])
    with pytest.raises(ValueError, match="finite and ≥ 0"):
        parse_matryoshka([8], [float("nan")])
    with pytest.raises(ValueError, match="reads the pooled embeddings with a head"):
        WithLoss(output_dir="/tmp/m", loss="softmax", matryoshka_dims=[8])
    with pytest.raises(ValueError, match="reads the pooled embeddings with a head"):
        BaseConfig(output_dir="/tmp/m", loss_weights={"softmax": 1}, matryoshka_dims=[8])
    assert WithLoss(output_dir="/tmp/m", loss="infonce", matryoshka_dims=[8]).matryoshka_dims


def test_leaving_out_the_models_width_is_said(caplog: pytest.LogCaptureFixture) -> None:
    cut = matryoshka_loss_class(loss_class("cosine_mse"), (16, 8), (1.0, 1.0))
    with caplog.at_level("WARNING", logger="sts_core.losses.matryoshka"):
        cut.from_config(BaseConfig(output_dir="/tmp/m"), SimpleNamespace(dimension=32))
    assert "leave out the model's whole width (32)" in caplog.text
    caplog.clear()
    whole = matryoshka_loss_class(loss_class("cosine_mse"), (32, 8), (1.0, 1.0))
    with caplog.at_level("WARNING", logger="sts_core.losses.matryoshka"):
        whole.from_config(BaseConfig(output_dir="/tmp/m"), SimpleNamespace(dimension=32))
    assert caplog.text == ""
