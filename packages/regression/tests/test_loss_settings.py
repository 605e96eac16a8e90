"""The regression losses' settings, edges and messages, each against a value computed here:
every config field ``from_config`` reads, the losses' defaults equal to
``RegressionConfig``'s (so Smooth K2 inside another method's ``loss_weights`` trains with
the paper's k and x0), the head a config without fields builds, the settings logged, the
band check's bounds, clamping at the exact end of the range, bf16 and device placement
(the meta device stands in for a GPU), and the whole message of each refusal. Found by the
mutation pass (``tools/mutation.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from sts_core.heads import LinearHead
from sts_regression import RegressionConfig
from sts_regression.loss import (
    REGRESSION_HEAD,
    SiameseRegressionLoss,
    SmoothK2Loss,
    TranslatedReLULoss,
    check_band,
    clamp_predictions,
    regression_loss,
)


def head(dimension: int = 4, features: str = "u,v,|u-v|", seed: int = 0) -> LinearHead:
    torch.manual_seed(seed)
    return LinearHead.for_pairs(dimension, pair_features=features)


def model_with(module: LinearHead) -> SimpleNamespace:
    return SimpleNamespace(heads={REGRESSION_HEAD: module})


def test_from_config_reads_every_field_and_logs_them() -> None:
    config = SimpleNamespace(k=3.0, x0=0.1, clamp_predictions="both", label_range=[0, 5])
    loss = SmoothK2Loss.from_config(config, model_with(head(features="u,v")))
    assert loss.config_dict() == {
        "penalty": "smooth_k2",
        "k": 3.0,
        "x0": 0.1,
        "features": "u,v",
        "clamp": "both",
        "label_range": [0.0, 5.0],
    }


def test_the_losses_defaults_are_the_configs() -> None:
    """k 2, x0 0.25, no clamping: from RegressionConfig, from a config without the fields
    (a part of another method's loss_weights) and from the signature; the head such a
    config builds reads (u, v, |u − v|) into one output."""
    config = RegressionConfig(output_dir="unused", report_to="none")
    expected = {"penalty": "translated_relu", "k": 2.0, "x0": 0.25, "features": "u,v,|u-v|"}
    for source in (config, SimpleNamespace(), None):
        built = TranslatedReLULoss.build_head(source, 4)
        assert (built.in_features, built.out_features) == (12, 1)
        assert built.pair_features == "u,v,|u-v|"
        loss = TranslatedReLULoss.from_config(source, model_with(built))
        assert loss.config_dict() == expected
    assert TranslatedReLULoss(head()).config_dict() == expected
    predictions, labels = torch.tensor([0.1, 2.7, 4.4]), torch.tensor([0.0, 3.0, 5.0])
    torch.testing.assert_close(
        regression_loss(predictions, labels),
        regression_loss(predictions, labels, "smooth_k2", config.k, config.x0),
    )


def test_clamping_defaults_to_none() -> None:
    predictions = torch.tensor([-1.0, 7.0])
    assert clamp_predictions(predictions) is predictions


def test_a_prediction_exactly_at_the_top_of_the_range_keeps_its_gradient() -> None:
    prediction = torch.tensor([5.0, 6.0], requires_grad=True)
    clamp_predictions(prediction, "both", (0.0, 5.0)).sum().backward()
    assert prediction.grad.tolist() == [1.0, 0.0]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((2.0, 0.2, 0.0), "label_spacing (d) must be above 0, got 0.0"),
        ((0.0, 0.2), "k must be above 0, got 0.0"),
        ((2.0, 0.6), "x0 must lie in [0, d/2] = [0, 0.5] (d = label_spacing 1), got 0.6"),
    ],
)
def test_the_band_check_refuses_with_its_whole_message(arguments, message: str) -> None:
    with pytest.raises(ValueError) as error:
        check_band(*arguments)
    assert str(error.value) == message


def test_the_band_checks_bounds_are_accepted() -> None:
    check_band(0.5, 0.5)  # k below 1, x0 = d/2 with the default d = 1
    check_band(2.0, 0.0, 1e-6)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: clamp_predictions(torch.zeros(2), "top"),
            "clamp mode 'top': choose one of none, low, both",
        ),
        (
            lambda: SmoothK2Loss(head(), clamp="top"),
            "clamp mode 'top': choose one of none, low, both",
        ),
        (
            lambda: SmoothK2Loss(head(), clamp="low"),
            "clamping predictions (low) needs the label range [low, high]",
        ),
        (
            lambda: SmoothK2Loss(head())({"sentence1": torch.ones(2, 4)}, None),
            "loss smooth_k2 needs labels",
        ),
    ],
)
def test_bad_settings_are_refused_with_their_whole_message(call, message: str) -> None:
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == message


def test_bf16_embeddings_and_float64_labels_give_a_float32_loss() -> None:
    """The head reads bf16 embeddings in its own float32; the loss is float32 with the
    labels' float64 values compared in float32."""
    generator = torch.Generator().manual_seed(1)
    u, v = (torch.randn(5, 4, generator=generator).to(torch.bfloat16) for _ in "uv")
    labels = torch.tensor([0.0, 1.5, 3.0, 4.5, 5.0], dtype=torch.float64)
    loss = SmoothK2Loss(head(), k=3.0, x0=0.2)
    got = loss({"sentence1": u, "sentence2": v}, labels)
    assert got.dtype == torch.float32
    predictions = loss.head(u.float(), v.float()).reshape(-1)
    want = regression_loss(predictions, labels.float(), "smooth_k2", 3.0, 0.2)
    torch.testing.assert_close(got, want)
    bf16 = regression_loss(predictions.to(torch.bfloat16), labels, "mse")
    assert bf16.dtype == torch.float32
    assert float(bf16) == pytest.approx(
        float(((predictions.to(torch.bfloat16).float() - labels.float()) ** 2).mean()), rel=1e-6
    )


def test_labels_follow_the_predictions_to_their_device() -> None:
    """Predictions on the meta device (a stand-in for a GPU), labels on the CPU."""
    out = regression_loss(torch.empty(3, device="meta"), torch.tensor([1.0, 2.0, 3.0]))
    assert out.device.type == "meta"


def test_a_plain_linear_head_logs_no_features() -> None:
    loss = SmoothK2Loss(torch.nn.Linear(12, 1))
    assert loss.config_dict() == {"penalty": "smooth_k2", "k": 2.0, "x0": 0.25, "features": None}


@pytest.mark.parametrize("penalty", ["l1", "mse"])
def test_the_baselines_log_no_band(penalty: str) -> None:
    loss_class = {"l1": "L1RegressionLoss", "mse": "MSERegressionLoss"}[penalty]
    from sts_regression import loss as regression_module

    loss: SiameseRegressionLoss = getattr(regression_module, loss_class)(head())
    assert loss.config_dict() == {"penalty": penalty, "features": "u,v,|u-v|"}
