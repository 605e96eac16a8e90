"""The core's losses and registry at their edges, each against a value computed here: the
classifier's label checks and inputs (plain ``nn.Linear`` or a pair head, bf16), the cosine
MSE's and InfoNCE's settings, messages, dtypes and device placement (the meta device
stands in for a GPU), InfoNCE's positives, hard negatives and gathered batch (a stand-in
gather, one process), registration, the messages for losses that cannot be loaded, the
label checks before training, and ``config_settings``. Found by the mutation pass
(``tools/mutation.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sts_core.heads import head_entry
from sts_core.losses import (
    LOSSES,
    EmbeddingLoss,
    InfoNCELoss,
    build_loss,
    check_labels,
    config_settings,
    cosine_mse_loss,
    in_batch_infonce_loss,
    register_loss,
)
from sts_core.losses import registry as registry_module
from sts_core.losses import similarity as similarity_module
from sts_core.losses.classification import SoftmaxClassifierLoss, softmax_classifier_loss
from sts_core.losses.registry import (
    BrokenLossPackage,
    _canonical,
    _same_package,
    broken_package,
    package_of,
    unknown_loss_message,
)


def pairs(n: int = 4, d: int = 6, seed: int = 0, dtype=torch.float32) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(n, d, generator=generator, dtype=dtype) for _ in range(3)]


def whole_message(call) -> str:
    with pytest.raises(ValueError) as error:
        call()
    return str(error.value)


# ------------------------------------------------------------------------- the classifier
def test_the_classifier_reads_u_v_and_their_distance_through_a_plain_linear_layer() -> None:
    u, v, _ = pairs()
    torch.manual_seed(1)
    linear = nn.Linear(18, 3)
    labels = torch.tensor([2.0, 1.0, 0.0, 1.0])  # the NLI readers' integral floats
    want = F.cross_entropy(linear(torch.cat([u, v, (u - v).abs()], dim=1)), labels.long())
    torch.testing.assert_close(softmax_classifier_loss(u, v, labels, linear), want)


def test_bf16_embeddings_and_a_bf16_classifier_give_a_float32_loss() -> None:
    u, v, _ = pairs(seed=1)
    torch.manual_seed(2)
    linear = nn.Linear(18, 3)
    labels = torch.tensor([0, 1, 2, 1])
    on_bf16 = softmax_classifier_loss(u.bfloat16(), v.bfloat16(), labels, linear)
    features = torch.cat([u.bfloat16(), v.bfloat16(), (u.bfloat16() - v.bfloat16()).abs()], 1)
    torch.testing.assert_close(on_bf16, F.cross_entropy(linear(features.float()), labels))
    half = linear.to(torch.bfloat16)
    loss = softmax_classifier_loss(u, v, labels, half)
    assert loss.dtype == torch.float32
    logits = half(torch.cat([u, v, (u - v).abs()], 1).bfloat16()).float()
    torch.testing.assert_close(loss, F.cross_entropy(logits, labels))


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ([True, False, True, True], "the classifier needs integer class labels, got bool"),
        ([0.0, 1.5, 2.0, 1.0], "the classifier needs integer class labels"),
        ([0, 1, 3, 1], "class labels must lie in [0, 3)"),
        ([0, -1, 2, 1], "class labels must lie in [0, 3)"),
    ],
)
def test_class_labels_are_refused_with_their_whole_message(labels, message: str) -> None:
    u, v, _ = pairs()
    assert (
        whole_message(lambda: softmax_classifier_loss(u, v, torch.tensor(labels), nn.Linear(18, 3)))
        == message
    )


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (
            ((1, 4, 6), (1, 4, 6), 4),
            "expected two (N, d) embedding tensors of the same shape, got (1, 4, 6) and (1, 4, 6)",
        ),
        (((4, 6), (4, 6), 3), "expected 4 labels (one per pair), got 3"),
        (
            ((4, 5), (4, 5), 4),
            "classifier takes 18 features, the pair features 'u,v,|u-v|' of 5-wide embeddings "
            "are 15",
        ),
    ],
)
def test_classifier_inputs_are_refused_with_their_whole_message(shapes, message: str) -> None:
    first, second, n = shapes
    linear = nn.Linear(18, 3)
    call = lambda: softmax_classifier_loss(  # noqa: E731
        torch.zeros(first), torch.zeros(second), torch.zeros(n, dtype=torch.long), linear
    )
    assert whole_message(call) == message


# ------------------------------------------------------------------- cosine MSE, InfoNCE
def test_cosine_mse_of_float64_labels_is_float32_and_its_messages() -> None:
    u, v, _ = pairs()
    labels = torch.tensor([0.1, 0.9, 0.4, 0.5], dtype=torch.float64)
    loss = cosine_mse_loss(u, v, labels)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ((F.cosine_similarity(u, v) - labels.float()) ** 2).mean())
    assert whole_message(lambda: cosine_mse_loss(u, v[:3], labels)) == (
        "shapes do not match: (4, 6), (3, 6), (4,)"
    )
    assert whole_message(lambda: cosine_mse_loss(u, v, labels[:3])) == (
        "shapes do not match: (4, 6), (4, 6), (3,)"
    )


def test_infonce_defaults_and_bf16() -> None:
    u, v, h = pairs(seed=3)
    torch.testing.assert_close(in_batch_infonce_loss(u, v), in_batch_infonce_loss(u, v, 0.05))
    got = in_batch_infonce_loss(u.bfloat16(), v.bfloat16(), 0.05, h.bfloat16())
    assert got.dtype == torch.float32
    want = in_batch_infonce_loss(
        u.bfloat16().float(), v.bfloat16().float(), 0.05, h.bfloat16().float()
    )
    torch.testing.assert_close(got, want)


def test_infonce_targets_are_made_on_the_embeddings_device() -> None:
    u, v = (torch.empty(4, 6, device="meta") for _ in "uv")
    assert in_batch_infonce_loss(u, v).device.type == "meta"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda u, v, h: in_batch_infonce_loss(u[None], v[None]),
            "expected two (N, d) embedding tensors of the same shape, got (1, 4, 6) and (1, 4, 6)",
        ),
        (
            lambda u, v, h: in_batch_infonce_loss(u, v, 0.05, h[:3]),
            "hard_negatives must be (4, 6)",
        ),
        (lambda u, v, h: in_batch_infonce_loss(u, v, 0.0), "temperature must be positive, got 0.0"),
        (lambda u, v, h: InfoNCELoss(temperature=0.0), "temperature must be positive, got 0.0"),
        (
            lambda u, v, h: InfoNCELoss(positive_threshold=0.5)(
                {"sentence1": u, "sentence2": v}, None
            ),
            "positive_threshold is set but the batch has no labels",
        ),
    ],
)
def test_infonce_refusals_have_their_whole_message(call, message: str) -> None:
    u, v, h = pairs()
    assert whole_message(lambda: call(u, v, h)) == message


def test_infonce_reads_its_settings_from_the_config_or_takes_its_defaults() -> None:
    config = SimpleNamespace(
        infonce_temperature=0.2, positive_threshold=0.5, gather_across_processes=True
    )
    assert InfoNCELoss.from_config(config).config_dict() == {
        "temperature": 0.2,
        "positive_threshold": 0.5,
        "gather": True,
    }
    defaults = {"temperature": 0.05, "positive_threshold": None, "gather": False}
    for source in (SimpleNamespace(), None):
        assert InfoNCELoss.from_config(source).config_dict() == defaults
    assert InfoNCELoss().config_dict() == defaults
    assert InfoNCELoss.required_label_kind(config) == "score"
    assert InfoNCELoss.required_label_kind(SimpleNamespace()) is None


def test_infonce_keeps_the_positive_rows_with_their_hard_negatives() -> None:
    u, v, h = pairs(n=6, seed=4)
    labels = torch.tensor([0.9, 0.1, 0.5, 0.7, 0.2, 0.6])
    loss = InfoNCELoss(temperature=0.1, positive_threshold=0.5)
    got = loss({"sentence1": u, "sentence2": v, "hard_negative": h}, labels)
    keep = labels >= 0.5
    torch.testing.assert_close(got, in_batch_infonce_loss(u[keep], v[keep], 0.1, h[keep]))


def test_infonce_gathers_every_column_and_scales_only_then(monkeypatch) -> None:
    calls: list[str] = []

    def fake_gather(tensor: torch.Tensor) -> torch.Tensor:
        calls.append("gather")
        return torch.cat([tensor, tensor.flip(0) * 0.5 + 0.1])

    def fake_scale(tensor: torch.Tensor) -> torch.Tensor:
        calls.append("scale")
        return tensor * 1.0

    monkeypatch.setattr(similarity_module, "all_gather_with_grad", fake_gather)
    monkeypatch.setattr(similarity_module, "scale_gathered_gradient", fake_scale)
    u, v, h = pairs(seed=5)
    batch = {"sentence1": u, "sentence2": v, "hard_negative": h}
    local = InfoNCELoss(temperature=0.1)(batch, None)
    assert calls == []
    torch.testing.assert_close(local, in_batch_infonce_loss(u, v, 0.1, h))
    got = InfoNCELoss(temperature=0.1, gather=True)(batch, None)
    assert calls == ["gather"] * 3 + ["scale"]
    want = in_batch_infonce_loss(fake_gather(u), fake_gather(v), 0.1, fake_gather(h))
    torch.testing.assert_close(got, want)
    calls.clear()
    InfoNCELoss(temperature=0.1, gather=True)({"sentence1": u, "sentence2": v}, None)
    assert calls == ["gather"] * 2 + ["scale"]


# ------------------------------------------------------------------------------ registry
class Constant(EmbeddingLoss):
    label_kind = None

    def forward(self, embeddings, labels):
        return torch.tensor(1.0)


def test_registering_names_the_class_and_refuses_a_second_class(monkeypatch) -> None:
    monkeypatch.delitem(LOSSES, "test_edge_constant", raising=False)
    register_loss("test_edge_constant")(Constant)
    monkeypatch.setitem(LOSSES, "test_edge_constant", Constant)  # removed after the test
    assert LOSSES["test_edge_constant"] is Constant
    assert Constant.registered_name == "test_edge_constant"
    assert register_loss("test_edge_constant")(Constant) is Constant  # the same class: fine

    class Other(Constant):
        pass

    assert whole_message(lambda: register_loss("test_edge_constant")(Other)) == (
        "loss 'test_edge_constant' is already registered by Constant"
    )


def test_a_degenerate_note_happened_unless_told_otherwise() -> None:
    loss = Constant()
    loss.note_degenerate("always")
    loss.note_degenerate("never", False)
    assert loss.pop_degenerate() == [("always", True), ("never", False)]


def test_head_checks_and_missing_heads_have_their_whole_message() -> None:
    saved = {"softmax_classifier": head_entry(SoftmaxClassifierLoss.build_head(None, 4))}
    message = whole_message(
        lambda: SoftmaxClassifierLoss.check_saved_heads(saved, SimpleNamespace(num_labels=2), 4)
    )
    have, want = (
        saved["softmax_classifier"],
        head_entry(SoftmaxClassifierLoss.build_head(SimpleNamespace(num_labels=2), 4)),
    )
    assert message == (
        f"the model already has a 'softmax_classifier' head ({have['type']} {have['config']}), "
        f"but loss softmax with these settings needs {want['type']} {want['config']}: match "
        "the settings, or start from a model without that head"
    )
    assert whole_message(lambda: SoftmaxClassifierLoss.head_of(object())) == (
        "loss softmax needs the model's 'softmax_classifier' head (the trainer adds it with "
        "prepare_model)"
    )


def test_build_loss_hands_the_config_and_the_model_to_the_loss() -> None:
    assert build_loss("infonce", SimpleNamespace(infonce_temperature=0.3)).temperature == 0.3
    head = SoftmaxClassifierLoss.build_head(None, 4)
    loss = build_loss("softmax", None, SimpleNamespace(heads={"softmax_classifier": head}))
    assert loss.head is head


def entry_point(name: str, value: str, package: str | None):
    dist = None if package is None else SimpleNamespace(name=package)
    return SimpleNamespace(name=name, value=value, dist=dist)


def test_a_broken_package_is_described_with_and_without_its_distribution() -> None:
    broken = broken_package(
        entry_point("bsc", "sts_bsc.loss", "sts-bsc"), ImportError("No  module\n named 'x'")
    )
    assert broken == BrokenLossPackage(
        "bsc", "sts_bsc.loss", "sts-bsc", "ImportError: No module named 'x'"
    )
    assert broken.describe() == (
        "package sts-bsc is installed but its entry point 'bsc' (sts_bsc.loss, group "
        "sts_core.methods) failed to import: ImportError: No module named 'x'"
    )
    orphan = BrokenLossPackage("bsc", "sts_bsc.loss", None, "ImportError: x")
    assert orphan.describe() == (
        "entry point 'bsc' (sts_bsc.loss, group sts_core.methods) failed to import: ImportError: x"
    )
    assert package_of(SimpleNamespace(name="bsc")) is None


def test_package_names_compare_as_pip_does() -> None:
    assert _same_package("STS_Bsc", "sts-bsc") and _same_package("sts.bsc", "sts-bsc")
    assert not _same_package("sts-bsc", "sts-cosent")
    assert not _same_package(None, "sts-bsc") and not _same_package("sts-bsc", None)
    assert _canonical("STS_Bsc..x") == "sts-bsc-x"  # PEP 503's normalised name


def test_a_broken_package_is_matched_by_its_name_when_its_entry_point_is_named_otherwise(
    monkeypatch,
) -> None:
    monkeypatch.setattr(registry_module, "installed_loss_entry_points", lambda: [])
    renamed = BrokenLossPackage("bsc_v2", "sts_bsc.loss", "STS_Bsc", "ImportError: x")
    assert unknown_loss_message("bsc", [renamed]) == (
        f"loss 'bsc' could not be loaded: {renamed.describe()}"
    )


def test_why_a_loss_is_not_registered(monkeypatch) -> None:
    """Its package failed to import (matched by package or by entry point name), its
    package is not installed, or the name is unknown (the broken packages listed)."""
    installed = [entry_point("bsc", "sts_bsc.loss", "STS_BSC")]  # compared canonically
    monkeypatch.setattr(registry_module, "installed_loss_entry_points", lambda: installed)
    broken_bsc = BrokenLossPackage("bsc", "sts_bsc.loss", "sts_bsc", "ImportError: x")
    assert unknown_loss_message("bsc", [broken_bsc]) == (
        f"loss 'bsc' could not be loaded: {broken_bsc.describe()}"
    )
    by_name = BrokenLossPackage("mine", "my.loss", None, "ImportError: y")
    assert unknown_loss_message("mine", [broken_bsc, by_name]) == (
        f"loss 'mine' could not be loaded: {by_name.describe()}"
    )
    assert unknown_loss_message("cosent", []) == (
        "unknown loss 'cosent': it is provided by the sts-cosent package "
        "(pip install sts-cosent / ./packages/cosent)"
    )
    assert unknown_loss_message("bsc", []).startswith("unknown loss 'bsc'; registered: ")
    registered = ", ".join(sorted(LOSSES))
    other = BrokenLossPackage("other", "other.loss", "other-pkg", "ImportError: z")
    assert unknown_loss_message("nope", [by_name, other]) == (
        f"unknown loss 'nope'; registered: {registered}; not loaded: {by_name.describe()}; "
        f"{other.describe()}"
    )


@pytest.mark.parametrize(
    ("loss", "labels", "num_labels", "problem"),
    [
        ("cosine_mse", [0.2, 7.0], None, None),
        ("contrastive", [0, 1, 1.0, 0.0], None, None),
        ("contrastive", [0, 2, 0.5, 1, 2], None, "needs binary labels 0/1, found [0.5, 2]"),
        (
            "contrastive",
            [2, 3, 4, 5, 6, 7, 8],
            None,
            "needs binary labels 0/1, found [2, 3, 4, 5, 6]",
        ),
        ("softmax", [0, 2, 1.0], 3, None),
        ("softmax", [0, 3, 1.5, -1, 1], 3, "needs class labels 0 … 2, found [-1, 1.5, 3]"),
        (
            "softmax",
            [3, 4, 5, 6, 7, 8, 9],
            3,
            "needs class labels 0 … 2, found [3, 4, 5, 6, 7]",
        ),
        ("softmax", [0], None, "needs class labels 0 … -1, found [0]"),
    ],
)
def test_labels_are_checked_against_the_losss_kind(loss, labels, num_labels, problem) -> None:
    pytest.importorskip("sts_cosent") if loss == "contrastive" else None
    assert check_labels(loss, labels, num_labels) == problem


def test_config_settings_reads_the_fields_the_config_has() -> None:
    config = SimpleNamespace(alpha=1, beta=None)
    assert config_settings(config, a="alpha", b="beta", c="gamma") == {"a": 1, "b": None}
    assert config_settings(None, a="alpha") == {}
