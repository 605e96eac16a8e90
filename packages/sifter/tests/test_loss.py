"""SIFTER's eq. 2 and SimCSE's eq. 1 against a numpy reference; the MLP in training only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sts_sifter.loss import SifterLoss, SimCSELoss, sifter_loss


def reference_infonce(anchors: np.ndarray, positives: np.ndarray, tau: float) -> float:
    """−(1/N) Σ_i log softmax_j(cos(a_i, p_j)/τ)[i], written out in numpy."""
    a = anchors / np.linalg.norm(anchors, axis=1, keepdims=True)
    p = positives / np.linalg.norm(positives, axis=1, keepdims=True)
    logits = a @ p.T / tau
    total = 0.0
    for i in range(len(a)):
        row = logits[i] - logits[i].max()
        total -= row[i] - np.log(np.exp(row).sum())
    return total / len(a)


@pytest.fixture
def xyz() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(5, 8, generator=generator, dtype=torch.float64) for _ in range(3))


def test_sifter_loss_is_the_weighted_sum_of_three_infonce_terms(xyz) -> None:
    x, y, z = xyz
    weights = {"xy": 0.5, "xz": 1.0, "yz": 2.0}
    out = sifter_loss(x, y, z, temperature=0.05, weights=weights)
    n = [t.numpy() for t in xyz]
    expected = {
        "xy": reference_infonce(n[0], n[1], 0.05),
        "xz": reference_infonce(n[0], n[2], 0.05),
        "yz": reference_infonce(n[1], n[2], 0.05),
    }
    for name, value in expected.items():
        assert out[name].item() == pytest.approx(value, rel=1e-9)
    total = sum(weights[k] * v for k, v in expected.items())
    assert out["loss"].item() == pytest.approx(total, rel=1e-9)


def test_a_zero_weight_drops_its_term(xyz) -> None:
    out = sifter_loss(*xyz, weights={"xy": 0.0, "yz": 0.0})
    assert set(out) == {"loss", "xz"}
    assert out["loss"].item() == pytest.approx(out["xz"].item())
    with pytest.raises(ValueError, match="no term"):
        sifter_loss(*xyz, weights={"xy": 0, "xz": 0, "yz": 0})


class Config:
    infonce_temperature = 0.05
    lambda_xy, lambda_xz, lambda_yz = 1.0, 1.0, 1.0
    use_mlp = True
    gather_across_processes = False


class Model:
    """What HeadLoss.prepare_model needs of a SentenceEncoder."""

    dimension = 8

    def __init__(self) -> None:
        self.heads: dict[str, torch.nn.Module] = {}

    def add_head(self, name: str, head: torch.nn.Module) -> None:
        self.heads[name] = head


def test_the_mlp_projects_in_training_and_gets_gradients(xyz) -> None:
    model, config = Model(), Config()
    SifterLoss.prepare_model(model, config)
    loss = SifterLoss.from_config(config, model)
    x, y, z = (t.float().requires_grad_() for t in xyz)
    embeddings = {"sentence": x, "with_backbone": y, "without_function_words": z}
    out = loss(embeddings, None)
    head = model.heads["mlp"]
    projected = [head(t) for t in (x, y, z)]
    assert out["loss"].item() == pytest.approx(sifter_loss(*projected)["loss"].item(), rel=1e-6)
    out["loss"].backward()
    assert head.weight.grad is not None and head.weight.grad.abs().sum() > 0
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_without_the_mlp_the_embeddings_are_used_as_they_are(xyz) -> None:
    model, config = Model(), Config()
    config.use_mlp = False
    SifterLoss.prepare_model(model, config)
    assert model.heads == {}
    loss = SifterLoss.from_config(config, model)
    x, y, z = xyz
    out = loss({"sentence": x, "with_backbone": y, "without_function_words": z}, None)
    assert out["loss"].item() == pytest.approx(sifter_loss(x, y, z)["loss"].item())


def test_simcse_is_infonce_of_the_two_dropout_views(xyz) -> None:
    config = Config()
    config.use_mlp = False
    loss = SimCSELoss.from_config(config, Model())
    x, y, _ = xyz
    value = loss({"sentence1": x, "sentence2": y}, None)
    assert value.item() == pytest.approx(reference_infonce(x.numpy(), y.numpy(), 0.05))
