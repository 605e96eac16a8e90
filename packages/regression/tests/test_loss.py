"""The regression losses against their formulas (eq. 1, eq. 2, L1, MSE) computed in numpy,
their gradients (zero inside the band, constant resp. linear outside), the parameter
checks, clamping (§3.3 and the authors' ``prediction * (prediction >= 0)``) and the head
each concatenation builds."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sts_core.heads import LinearHead
from sts_regression.loss import (
    L1RegressionLoss,
    MSERegressionLoss,
    SmoothK2Loss,
    TranslatedReLULoss,
    check_band,
    clamp_predictions,
    regression_loss,
    smooth_k2,
    translated_relu,
)

X = np.linspace(0.0, 3.0, 61)  # includes x0 = 0.25 and 0.5 exactly
SETTINGS = [(0.5, 0.0), (2.0, 0.25), (2.5, 0.25), (3.5, 0.2), (1.0, 0.5)]


def numpy_translated_relu(x: np.ndarray, k: float, x0: float) -> np.ndarray:
    """Eq. 1 case by case: 0 for x < x0, k(x − x0) for x ≥ x0."""
    return np.where(x < x0, 0.0, k * (x - x0))


def numpy_smooth_k2(x: np.ndarray, k: float, x0: float) -> np.ndarray:
    """Eq. 2 as printed: 0 for x < x0, k(x² − 2·x0·x + x0²) for x ≥ x0."""
    return np.where(x < x0, 0.0, k * (x**2 - 2 * x0 * x + x0**2))


@pytest.mark.parametrize(("k", "x0"), SETTINGS)
def test_translated_relu_and_smooth_k2_follow_their_equations(k: float, x0: float) -> None:
    x = torch.tensor(X, dtype=torch.float64)
    np.testing.assert_allclose(translated_relu(x, k, x0).numpy(), numpy_translated_relu(X, k, x0))
    np.testing.assert_allclose(
        smooth_k2(x, k, x0).numpy(), numpy_smooth_k2(X, k, x0), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize(("k", "x0"), SETTINGS)
def test_gradients_are_zero_inside_the_band_and_k_or_2k_outside(k: float, x0: float) -> None:
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    (relu_grad,) = torch.autograd.grad(translated_relu(x, k, x0).sum(), x)
    (k2_grad,) = torch.autograd.grad(smooth_k2(x, k, x0).sum(), x)
    inside, outside = np.less(X, x0), np.greater(X, x0)
    assert (relu_grad.numpy()[inside] == 0).all() and (k2_grad.numpy()[inside] == 0).all()
    np.testing.assert_allclose(relu_grad.numpy()[outside], k)  # linear: constant slope k
    np.testing.assert_allclose(k2_grad.numpy()[outside], 2 * k * (X[outside] - x0))  # quadratic
    # Smooth K2 is continuous in value and gradient at x0; Translated ReLU has a kink there
    assert float(smooth_k2(torch.tensor(x0 + 1e-9), k, x0)) == pytest.approx(0.0, abs=1e-12)


PENALTIES = {
    "l1": lambda x, k, x0: x,
    "mse": lambda x, k, x0: x**2,
    "translated_relu": numpy_translated_relu,
    "smooth_k2": numpy_smooth_k2,
}


@pytest.mark.parametrize("penalty", sorted(PENALTIES))
def test_batch_loss_is_the_mean_penalty_of_the_absolute_error(penalty: str) -> None:
    rng = np.random.default_rng(0)
    predictions = rng.uniform(-1.0, 6.0, 32)
    labels = rng.integers(0, 6, 32).astype(np.float64)
    got = regression_loss(
        torch.tensor(predictions).reshape(-1, 1), torch.tensor(labels), penalty, k=3.0, x0=0.2
    )
    expected = PENALTIES[penalty](np.abs(predictions - labels), 3.0, 0.2).mean()
    assert float(got) == pytest.approx(expected, rel=1e-12)
    assert got.dtype == torch.float64


@pytest.mark.parametrize("penalty", sorted(PENALTIES))
def test_gradient_against_finite_differences(penalty: str) -> None:
    # predictions well away from the kinks |p − y| ∈ {0, x0}
    predictions = torch.tensor([0.9, 2.6, -0.7, 4.1, 1.05], dtype=torch.float64)
    labels = torch.tensor([2.0, 2.0, 0.0, 5.0, 1.5], dtype=torch.float64)
    predictions.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda p: regression_loss(p, labels, penalty, k=2.0, x0=0.25), (predictions,)
    )


def test_the_authors_smooth_k2_and_translated_relu_give_the_same_values() -> None:
    """The official loss.py's formulas (mask form), rewritten here in numpy."""
    rng = np.random.default_rng(1)
    predictions, labels = rng.uniform(-0.5, 2.5, 64), rng.integers(0, 3, 64).astype(float)
    x = np.abs(predictions - labels)
    authors_k2 = (2 * (x**2 - 2 * 0.25 * x + 0.25**2) * (x >= 0.25)).mean()
    authors_relu = 2.5 * np.clip(x - 0.25, 0.0, None).mean()
    p, y = torch.tensor(predictions), torch.tensor(labels)
    assert float(regression_loss(p, y, "smooth_k2", 2.0, 0.25)) == pytest.approx(authors_k2)
    assert float(regression_loss(p, y, "translated_relu", 2.5, 0.25)) == pytest.approx(authors_relu)


def test_band_parameters_are_validated() -> None:
    check_band(2.0, 0.5, 1.0)  # x0 = d/2 is allowed
    check_band(2.0, 0.0)
    for k, x0, spacing, words in [
        (0.0, 0.25, 1.0, "k must be above 0"),
        (-1.0, 0.25, 1.0, "k must be above 0"),
        (2.0, -0.1, 1.0, r"x0 must lie in \[0, d/2\]"),
        (2.0, 0.6, 1.0, r"\[0, 0.5\]"),
        (2.0, 0.3, 0.5, r"\[0, 0.25\]"),
        (2.0, 0.1, 0.0, "label_spacing"),
    ]:
        with pytest.raises(ValueError, match=words):
            check_band(k, x0, spacing)


def test_clamping_low_is_the_authors_zeroing_of_negative_predictions() -> None:
    raw = torch.tensor([-0.8, -0.1, 0.0, 0.4, 1.7, 2.6], dtype=torch.float64)
    labels = torch.tensor([0.0, 1.0, 2.0, 0.0, 2.0, 2.0], dtype=torch.float64)
    ours = raw.clone().requires_grad_(True)
    theirs = raw.clone().requires_grad_(True)
    loss_ours = regression_loss(ours, labels, "smooth_k2", 2.0, 0.25, "low", (0.0, 2.0))
    mask = (theirs >= 0).to(theirs.dtype)
    loss_theirs = regression_loss(theirs * mask, labels, "smooth_k2", 2.0, 0.25)
    loss_ours.backward()
    loss_theirs.backward()
    assert loss_ours.item() == pytest.approx(loss_theirs.item(), rel=1e-12)
    torch.testing.assert_close(ours.grad, theirs.grad)
    assert (ours.grad[:2] == 0).all()  # raised predictions get no gradient


def test_clamping_both_ends_forgives_predictions_past_the_top_label() -> None:
    """§3.3's example: 3.57 for the top label 3 (grid 0…3, d/2 = 0.5) costs nothing."""
    prediction = torch.tensor([3.57], requires_grad=True)
    label = torch.tensor([3.0])
    clamped = regression_loss(prediction, label, "translated_relu", 1.0, 0.25, "both", (0, 3))
    clamped.backward()
    assert clamped.item() == 0.0 and float(prediction.grad) == 0.0
    unclamped = regression_loss(prediction, label, "translated_relu", 1.0, 0.25)
    assert unclamped.item() == pytest.approx(0.32)
    low_only = regression_loss(prediction, label, "translated_relu", 1.0, 0.25, "low", (0, 3))
    assert low_only.item() == pytest.approx(0.32)  # "low" leaves the top end alone
    np.testing.assert_allclose(
        clamp_predictions(torch.tensor([-1.0, 1.0, 9.0]), "both", (0.0, 3.0)).numpy(),
        [0.0, 1.0, 3.0],
    )


def test_clamping_needs_a_mode_it_knows_and_the_label_range() -> None:
    with pytest.raises(ValueError, match="needs the label range"):
        clamp_predictions(torch.zeros(2), "low")
    with pytest.raises(ValueError, match="clamp mode 'top'"):
        clamp_predictions(torch.zeros(2), "top", (0.0, 1.0))
    with pytest.raises(ValueError, match="unknown penalty"):
        regression_loss(torch.zeros(2), torch.zeros(2), "huber")
    with pytest.raises(ValueError, match="one prediction per label"):
        regression_loss(torch.zeros(3), torch.zeros(2))


@pytest.mark.parametrize(("features", "widths"), [("u,v,|u-v|", 3), ("u,v", 2), ("|u-v|", 1)])
def test_the_head_reads_each_concatenation(features: str, widths: int) -> None:
    config = SimpleNamespace(pair_features=features, k=2.0, x0=0.25)
    head = SmoothK2Loss.build_head(config, dimension=8)
    assert isinstance(head, LinearHead)
    assert (head.in_features, head.out_features) == (widths * 8, 1)
    model = SimpleNamespace(heads={"regression": head})
    loss = SmoothK2Loss.from_config(config, model)
    u, v = torch.randn(5, 8), torch.randn(5, 8)
    parts = {"u,v,|u-v|": [u, v, (u - v).abs()], "u,v": [u, v], "|u-v|": [(u - v).abs()]}
    expected_predictions = torch.cat(parts[features], dim=1) @ head.weight.T + head.bias
    torch.testing.assert_close(loss.predict(u, v), expected_predictions.reshape(-1))
    labels = torch.tensor([0.0, 1.0, 2.0, 1.0, 0.0])
    expected = regression_loss(expected_predictions.reshape(-1), labels, "smooth_k2", 2.0, 0.25)
    torch.testing.assert_close(loss({"sentence1": u, "sentence2": v}, labels), expected)


@pytest.mark.parametrize(
    ("cls", "penalty"),
    [
        (L1RegressionLoss, "l1"),
        (MSERegressionLoss, "mse"),
        (TranslatedReLULoss, "translated_relu"),
        (SmoothK2Loss, "smooth_k2"),
    ],
)
def test_each_registered_loss_applies_its_penalty(cls, penalty: str) -> None:
    torch.manual_seed(0)
    head = LinearHead.for_pairs(4, 1)
    loss = cls(head, k=1.5, x0=0.2)
    u, v, labels = torch.randn(6, 4), torch.randn(6, 4), torch.arange(6.0) % 3
    expected = regression_loss(head(u, v).reshape(-1), labels, penalty, 1.5, 0.2)
    torch.testing.assert_close(loss({"sentence1": u, "sentence2": v}, labels), expected)
    settings = loss.config_dict()
    assert settings["penalty"] == penalty
    assert ("k" in settings) == (penalty in ("translated_relu", "smooth_k2"))
    with pytest.raises(ValueError, match="needs labels"):
        loss({"sentence1": u, "sentence2": v}, None)


def test_half_precision_embeddings_give_a_float32_loss() -> None:
    head = LinearHead.for_pairs(4, 1)
    loss = SmoothK2Loss(head, k=2.0, x0=0.25)
    u = torch.randn(3, 4, dtype=torch.bfloat16)
    value = loss({"sentence1": u, "sentence2": u.flip(0)}, torch.tensor([0.0, 1.0, 2.0]))
    assert value.dtype == torch.float32 and torch.isfinite(value)
