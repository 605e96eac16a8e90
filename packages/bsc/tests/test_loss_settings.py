"""``BSCLoss``'s settings and edges, each against a value computed here: every config field
read by ``from_config`` (and the loss's defaults equal to ``BscConfig``'s), the settings the
module passes on to :func:`bsc_loss`, the gathered batch (a stand-in gather, one process),
float32 computation of bf16 inputs, tensors that stay on their device (the meta device
stands in for a GPU), and the whole message of each refusal. Found by the mutation pass
(``tools/mutation.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from sts_bsc import BscConfig, BSCLoss, bsc_loss
from sts_bsc import loss as bsc_module
from sts_bsc.loss import normalize_embeddings, pair_mse

#: one value off the default for every field BSCLoss reads
NON_DEFAULT = {
    "bsc_temperature": 0.3,
    "trainable_temperature": True,
    "bsc_normalization": "coordinates_minmax",
    "bsc_symmetric": False,
    "label_threshold": 0.5,
    "repeated_anchors": False,
    "mu": 0.25,
    "gather_across_processes": True,
}
#: the paper's settings (§4), BSCLoss's and BscConfig's defaults
PAPER = {
    "temperature": 0.1,
    "trainable_temperature": False,
    "normalization": "l2",
    "symmetric": True,
    "label_threshold": None,
    "repeated_anchors": True,
    "mu": 1.0,
    "gather": False,
}


def embeddings(m: int = 6, d: int = 5, seed: int = 0, dtype=torch.float64) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(m, d, generator=generator, dtype=dtype) for _ in range(3)]


def test_from_config_reads_every_field() -> None:
    loss = BSCLoss.from_config(SimpleNamespace(**NON_DEFAULT))
    assert loss.config_dict() == {
        "temperature": 0.3,
        "trainable_temperature": True,
        "normalization": "coordinates_minmax",
        "symmetric": False,
        "label_threshold": 0.5,
        "repeated_anchors": False,
        "mu": 0.25,
        "gather": True,
    }


def test_the_losss_defaults_are_the_configs_and_the_papers() -> None:
    """A config without BSC's fields (BSC inside another method's loss_weights) gets the
    loss's defaults, which are BscConfig's."""
    config = BscConfig(output_dir="unused", report_to="none")
    assert BSCLoss().config_dict() == PAPER
    assert BSCLoss.from_config(config).config_dict() == PAPER
    assert BSCLoss.from_config(SimpleNamespace()).config_dict() == PAPER
    assert BSCLoss.from_config(None).config_dict() == PAPER
    q, a, _ = embeddings()
    torch.testing.assert_close(bsc_loss(q, a)["bsc"], bsc_loss(q, a, 0.1)["bsc"])


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({}, None),
        ({"label_threshold": None, "mu": 1.0}, None),
        ({"label_threshold": 0.5}, "score"),
        ({"label_threshold": 0.0}, "score"),
        ({"mu": 0.5}, "score"),
        ({"mu": 0.0}, "score"),
    ],
)
def test_labels_are_needed_for_a_threshold_or_the_combo(fields: dict, kind: str | None) -> None:
    assert BSCLoss.required_label_kind(SimpleNamespace(**fields)) == kind


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"temperature": 0.0}, "temperature must be positive, got 0.0"),
        ({"mu": 1.5}, "mu must be in [0, 1], got 1.5"),
        ({"mu": -0.5}, "mu must be in [0, 1], got -0.5"),
        (
            {"normalization": "l1"},
            "normalization 'l1' is not one of l2, coordinates_l2, coordinates_minmax, "
            "coordinates_range, none",
        ),
    ],
)
def test_bad_settings_are_refused_with_their_whole_message(settings: dict, message: str) -> None:
    with pytest.raises(ValueError) as error:
        BSCLoss(**settings)
    assert str(error.value) == message


def test_the_bounds_of_mu_are_accepted() -> None:
    assert BSCLoss(mu=0.0).mu == 0.0 and BSCLoss(mu=1.0).mu == 1.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda q, a: bsc_loss(q[None], a[None]),
            "expected two (m, d) embedding tensors of the same shape, got (1, 6, 5) and (1, 6, 5)",
        ),
        (
            lambda q, a: bsc_loss(q, a[:4]),
            "expected two (m, d) embedding tensors of the same shape, got (6, 5) and (4, 5)",
        ),
        (
            lambda q, a: bsc_loss(q, a, positive=torch.ones(4, dtype=torch.bool)),
            "positive must be (6,), got (4,)",
        ),
        (
            lambda q, a: normalize_embeddings(q, "l1"),
            "normalization 'l1' is not one of l2, coordinates_l2, coordinates_minmax, "
            "coordinates_range, none",
        ),
        (
            lambda q, a: BSCLoss(mu=0.5)({"sentence1": q, "sentence2": a}, None),
            "loss bsc with label_threshold or mu < 1 needs labels; the batch has none",
        ),
    ],
)
def test_bad_inputs_are_refused_with_their_whole_message(call, message: str) -> None:
    q, a, _ = embeddings()
    with pytest.raises(ValueError) as error:
        call(q, a)
    assert str(error.value) == message


def test_a_mask_of_numbers_selects_the_same_positives_as_booleans() -> None:
    q, a, _ = embeddings(seed=1)
    flags = [1, 0, 1, 1, 0, 1]
    as_numbers = bsc_loss(q, a, positive=torch.tensor(flags, dtype=torch.float64))["bsc"]
    as_bools = bsc_loss(q, a, positive=torch.tensor(flags, dtype=torch.bool))["bsc"]
    torch.testing.assert_close(as_numbers, as_bools)


def test_no_positive_row_in_one_direction_gives_zero_not_nan() -> None:
    q, a, _ = embeddings(seed=2)
    parts = bsc_loss(q, a, positive=torch.zeros(6, dtype=torch.bool), symmetric=False)
    assert float(parts["l0"]) == 0.0 and float(parts["l1"]) == 0.0


def test_bf16_inputs_are_computed_in_float32() -> None:
    """The same value as the float32 computation of the bf16 numbers (bf16 arithmetic on
    these scores would be off by ~1e-2)."""
    q, a, h = (x.to(torch.bfloat16) for x in embeddings(seed=3, dtype=torch.float32))
    got = bsc_loss(q, a, 0.05, hard_negatives=h)
    want = bsc_loss(q.float(), a.float(), 0.05, hard_negatives=h.float())
    assert got["bsc"].dtype == torch.float32
    torch.testing.assert_close(got["bsc"], want["bsc"], rtol=1e-6, atol=1e-6)
    labels = torch.tensor([0.1, 0.9, 0.4, 0.3, 0.8, 0.5], dtype=torch.float64)
    mse = pair_mse(q, a, labels, "l2")
    assert mse.dtype == torch.float32
    torch.testing.assert_close(mse, pair_mse(q.float(), a.float(), labels.float(), "l2"))


def test_tensors_stay_on_the_device_of_the_embeddings() -> None:
    """On the meta device (a stand-in for a GPU): every tensor bsc_loss makes is made
    there, or mixing devices fails."""
    q, a, h = (torch.empty(6, 5, device="meta") for _ in range(3))
    ids = torch.empty(6, dtype=torch.long, device="meta")
    for positive in (None, torch.empty(6, dtype=torch.bool, device="meta")):
        parts = bsc_loss(q, a, 0.1, positive=positive, anchor_ids=ids, hard_negatives=h)
        assert parts["bsc"].device.type == "meta"
        assert bsc_loss(q, a, 0.1)["bsc"].device.type == "meta"


def test_the_module_passes_each_setting_on() -> None:
    """BSCLoss(...) on a batch equals bsc_loss with the same settings, computed here."""
    q, a, h = embeddings(seed=4)
    labels = torch.tensor([0.9, 0.2, 0.7, 0.6, 0.1, 0.8], dtype=torch.float64)
    ids = torch.tensor([0, 1, 0, 2, 3, 2])  # rows 0, 2 and 3, 5: positives sharing an anchor
    batch = {"sentence1": q, "sentence2": a, "hard_negative": h}
    loss = BSCLoss(
        temperature=0.3,
        normalization="coordinates_minmax",
        symmetric=False,
        label_threshold=0.5,
        repeated_anchors=False,
    )
    out = loss(batch, labels, text_ids={"sentence1": ids})
    want = bsc_loss(
        q,
        a,
        0.3,
        positive=labels > 0.5,
        hard_negatives=h,
        normalization="coordinates_minmax",
        symmetric=False,
    )
    torch.testing.assert_close(out["loss"], want["bsc"])
    ((reason, happened),) = loss.pop_degenerate()
    assert reason == "no positive pair" and not bool(happened)
    with_anchors = BSCLoss(temperature=0.3)(batch, labels, text_ids={"sentence1": ids})
    torch.testing.assert_close(
        with_anchors["loss"], bsc_loss(q, a, 0.3, anchor_ids=ids, hard_negatives=h)["bsc"]
    )


def test_gather_concatenates_every_tensor_of_the_batch(monkeypatch) -> None:
    """With gather, the loss is bsc_loss over the gathered tensors (a stand-in gather that
    appends a second process's rows); without it, over the local ones."""
    gathered: list[str] = []

    def fake_gather(tensor: torch.Tensor) -> torch.Tensor:
        gathered.append(tuple(tensor.shape))
        return torch.cat([tensor, tensor.flip(0) + 1])

    monkeypatch.setattr(bsc_module, "all_gather_with_grad", fake_gather)
    q, a, h = embeddings(seed=5)
    labels = torch.tensor([0.9, 0.2, 0.7, 0.6, 0.1, 0.8], dtype=torch.float64)
    ids = torch.tensor([0, 0, 1, 2, 2, 3])
    batch = {"sentence1": q, "sentence2": a, "hard_negative": h}
    local = BSCLoss(label_threshold=0.5)(batch, labels, text_ids={"sentence1": ids})
    assert gathered == []
    torch.testing.assert_close(
        local["loss"],
        bsc_loss(q, a, positive=labels > 0.5, anchor_ids=ids, hard_negatives=h)["bsc"],
    )
    loss = BSCLoss(label_threshold=0.5, gather=True)
    out = loss(batch, labels, text_ids={"sentence1": ids})
    assert len(gathered) == 5  # queries, answers, hard negatives, labels, anchor ids
    both = {name: fake_gather(x) for name, x in {"q": q, "a": a, "h": h}.items()}
    all_labels, all_ids = fake_gather(labels), fake_gather(ids)
    want = bsc_loss(
        both["q"],
        both["a"],
        positive=all_labels > 0.5,
        anchor_ids=all_ids,
        hard_negatives=both["h"],
    )
    torch.testing.assert_close(out["loss"], want["bsc"])
    without_extras = BSCLoss(gather=True)({"sentence1": q, "sentence2": a}, None)
    torch.testing.assert_close(
        without_extras["loss"], bsc_loss(fake_gather(q), fake_gather(a))["bsc"]
    )
