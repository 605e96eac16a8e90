"""``sts_core.losses``: every shared loss against an independent reference (value and
gradient), the registry, and loss parameters in their own optimizer group."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from sts_core.losses import (
    LOSSES,
    CosineMSELoss,
    EmbeddingLoss,
    InfoNCELoss,
    build_loss,
    check_labels,
    cosine_mse_loss,
    in_batch_infonce_loss,
    register_loss,
)
from sts_core.method import Method
from sts_core.testing import quick_training_args
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training.method_registry import CORE_METHOD
from sts_core.training.optimization import regroup_parameters

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def cosines(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))


def random_pairs(n: int = 5, d: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    u = torch.randn(n, d, generator=generator, dtype=torch.float64)
    v = torch.randn(n, d, generator=generator, dtype=torch.float64)
    return u, v


# ----------------------------------------------------------------- cosine MSE
def test_cosine_mse_value_against_numpy() -> None:
    u, v = random_pairs()
    labels = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0], dtype=torch.float64)
    expected = np.mean((cosines(u.numpy(), v.numpy()) - labels.numpy()) ** 2)
    assert cosine_mse_loss(u, v, labels).item() == pytest.approx(expected, rel=1e-6)
    # a wrong loss (3 × mean absolute error, the review's example) differs
    wrong = 3 * np.mean(np.abs(cosines(u.numpy(), v.numpy()) - labels.numpy()))
    assert not math.isclose(cosine_mse_loss(u, v, labels).item(), wrong, rel_tol=1e-3)


def test_cosine_mse_gradient_against_the_formula() -> None:
    """d/du_i (cos_i − y_i)²/N = 2(cos_i − y_i)/N · (v_i/(|u||v|) − cos_i u_i/|u|²)."""
    u, v = random_pairs()
    labels = torch.tensor([0.1, 0.9, 0.3, 0.2, 0.7], dtype=torch.float64)
    u.requires_grad_(True)
    cosine_mse_loss(u, v, labels).float().backward()
    un, vn = u.detach().numpy(), v.numpy()
    c = cosines(un, vn)
    nu, nv = np.linalg.norm(un, axis=1, keepdims=True), np.linalg.norm(vn, axis=1, keepdims=True)
    dcos = vn / (nu * nv) - c[:, None] * un / nu**2
    expected = (2 * (c - labels.numpy()) / len(c))[:, None] * dcos
    np.testing.assert_allclose(u.grad.numpy(), expected, rtol=1e-4, atol=1e-7)


# ----------------------------------------------------------------- InfoNCE
def infonce_reference(u, v, tau, negatives=None) -> float:
    """−mean_i log softmax_i over [cos(u_i, v_j)/τ]_j (+ [cos(u_i, c_j)/τ]_j), in numpy."""
    u, v = u.numpy(), v.numpy()
    normalize = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    logits = normalize(u) @ normalize(v).T / tau
    if negatives is not None:
        logits = np.concatenate([logits, normalize(u) @ normalize(negatives.numpy()).T / tau], 1)
    top = logits.max(1, keepdims=True)
    log_softmax = logits - top - np.log(np.exp(logits - top).sum(1, keepdims=True))
    return float(-np.mean(np.diag(log_softmax[:, : len(u)])))


@pytest.mark.parametrize("with_negatives", [False, True])
def test_infonce_value_and_gradient_against_numpy(with_negatives: bool) -> None:
    u, v = random_pairs(seed=1)
    negatives = random_pairs(seed=2)[0] if with_negatives else None
    got = in_batch_infonce_loss(u, v, 0.05, negatives)
    assert got.item() == pytest.approx(infonce_reference(u, v, 0.05, negatives), rel=1e-9)
    inputs = (u.clone().requires_grad_(True), v.clone().requires_grad_(True))
    assert torch.autograd.gradcheck(
        lambda a, b: in_batch_infonce_loss(a, b, 0.5, negatives), inputs
    )


def test_hard_negatives_enter_every_denominator() -> None:
    u, v = random_pairs(seed=3)
    near = u.clone()  # cosine 1 with its own anchor: the loss grows
    base = in_batch_infonce_loss(u, v, 0.1).item()
    assert in_batch_infonce_loss(u, v, 0.1, near).item() > base + 1.0


def test_infonce_module_selects_positives_and_counts_batches_without_one() -> None:
    u, v = random_pairs(seed=4)
    loss = InfoNCELoss(temperature=0.05, positive_threshold=4.0)
    labels = torch.tensor([5.0, 1.0, 4.5, 0.0, 4.0], dtype=torch.float64)
    keep = labels >= 4.0
    expected = infonce_reference(u[keep], v[keep], 0.05)
    got = loss({"sentence1": u, "sentence2": v}, labels)
    assert got.item() == pytest.approx(expected, rel=1e-9)
    assert loss.pop_degenerate() == []
    zero = loss({"sentence1": u, "sentence2": v}, torch.zeros(5, dtype=torch.float64))
    assert zero.item() == 0.0
    assert [reason for reason, _ in loss.pop_degenerate()] == ["no positive pair"]


# ----------------------------------------------------------------- registry
def test_registry_builds_losses_by_name_from_a_config() -> None:
    assert {"cosine_mse", "infonce"} <= set(LOSSES)
    config = BaseConfig(output_dir="unused", report_to="none")
    assert isinstance(build_loss("cosine_mse", config), CosineMSELoss)
    with pytest.raises(ValueError, match="unknown loss 'nope'"):
        build_loss("nope", config)
    u, v = random_pairs()
    labels = torch.rand(5, dtype=torch.float64)
    module = build_loss("cosine_mse", config)
    assert module({"sentence1": u, "sentence2": v}, labels).item() == pytest.approx(
        cosine_mse_loss(u, v, labels).item()
    )


def test_registering_a_second_loss_under_a_taken_name_fails() -> None:
    with pytest.raises(ValueError, match="already registered"):

        @register_loss("cosine_mse")
        class Other(EmbeddingLoss):
            pass


def test_label_checks_follow_the_label_kind() -> None:
    assert check_labels("cosine_mse", [0.2, 0.7]) is None
    assert check_labels("infonce", ["anything"]) is None


# ----------------------------------------------------------------- parameter groups
class ScaledCosineMSE(EmbeddingLoss):
    """A test loss with a trainable scalar: (s · cos − y)² — a temperature-like parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.0))

    def forward(self, embeddings, labels):
        cos = nn.functional.cosine_similarity(embeddings["sentence1"], embeddings["sentence2"])
        return ((self.scale * cos - labels) ** 2).mean()


register_loss("test_scaled_cosine_mse")(ScaledCosineMSE)


@dataclass
class ScaledConfig(BaseConfig):
    """The test method's config: the core's fields only."""


SCALED = Method(
    name="test_scaled",
    title="scaled cosine MSE (test)",
    config=ScaledConfig,
    losses=(ScaledCosineMSE,),
)


def test_regroup_gives_mapped_rates_and_no_decay_on_scalars() -> None:
    model = nn.Sequential(nn.Linear(3, 3))
    model.add_module("temperature", nn.Module())
    model.temperature.value = nn.Parameter(torch.tensor(0.05))
    optimizer = torch.optim.AdamW(
        [{"params": list(model.parameters()), "weight_decay": 0.01}], lr=1e-5
    )
    regroup_parameters(optimizer, model.named_parameters(), {r"^0\.bias$": 1e-3})
    by_name = {id(p): n for n, p in model.named_parameters()}
    groups = {
        tuple(sorted(by_name[id(p)] for p in g["params"])): (g["lr"], g["weight_decay"])
        for g in optimizer.param_groups
    }
    assert groups == {
        ("0.weight",): (1e-5, 0.01),
        ("0.bias",): (1e-3, 0.01),
        ("temperature.value",): (1e-5, 0.0),
    }


def test_loss_parameters_train_in_their_own_group(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    from datasets import Dataset

    from sts_core.encoder import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    data = Dataset.from_dict(
        {
            "sentence1": ["a man plays", "the dog runs", "a cat eats", "the boy sits"] * 2,
            "sentence2": ["a man plays a guitar", "a dog runs", "a cat", "the girl sits"] * 2,
            "score": [0.9, 0.8, 0.5, 0.2] * 2,
        }
    )
    args = quick_training_args(
        ScaledConfig, tmp_path, learning_rate_mapping={r"sts_loss\.": 0.05}, max_steps=2
    )
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=data, method=SCALED)
    before = float(trainer.loss_module.scale.detach())
    trainer.train()
    group = next(
        g
        for g in trainer.optimizer.param_groups
        if any(p is trainer.loss_module.scale for p in g["params"])
    )
    assert group["weight_decay"] == 0.0
    assert group["initial_lr"] == pytest.approx(0.05)
    assert len(group["params"]) == 1
    assert float(trainer.loss_module.scale.detach()) != before  # it was trained
    assert "sts_loss.scale" in dict(encoder.named_parameters())


def test_columns_and_labels_a_loss_needs_are_checked_from_the_registry() -> None:
    from types import SimpleNamespace

    from datasets import Dataset

    unlabelled = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"]})
    config = SimpleNamespace(loss="infonce", positive_threshold=None, label_column="score")
    CORE_METHOD.check_train_dataset(unlabelled, config)  # InfoNCE alone needs no labels
    config.positive_threshold = 4.0  # now it selects positives by label
    with pytest.raises(ValueError, match="no label column 'score'"):
        CORE_METHOD.check_train_dataset(unlabelled, config)
    with pytest.raises(ValueError, match="no column sentence2"):
        CORE_METHOD.check_train_dataset(Dataset.from_dict({"sentence1": ["a"]}), config)


def test_infonce_without_positives_anywhere_is_a_counted_zero() -> None:
    u, v = random_pairs(seed=5)
    loss = InfoNCELoss(positive_threshold=4.0, gather=True)  # one process: gathering is a no-op
    out = loss({"sentence1": u, "sentence2": v}, torch.zeros(5, dtype=torch.float64))
    assert out.item() == 0.0
    assert [reason for reason, _ in loss.pop_degenerate()] == ["no positive pair"]
