"""Pcc-tuning's Pearson loss: settings, edges and messages, each against a value computed
here — the config field ``from_config`` reads (and the default equal to ``PccConfig``'s),
the rounding-noise threshold that decides a flat batch (exact powers of two on either side
of it), the degenerate reasons, the gathered batch (a stand-in gather, one process), bf16
and device placement (the meta device stands in for a GPU), and the whole message of each
refusal. Found by the mutation pass (``tools/mutation.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from sts_pcctuning import PccConfig
from sts_pcctuning import loss as pcc_module
from sts_pcctuning.loss import (
    DEGENERATE_REASONS,
    PearsonLoss,
    degenerate_batch,
    pearson_correlation,
    pearson_loss,
)

THRESHOLD_STEP = 2.0**-16  # two float32 values this far apart sit exactly on the threshold


def pairs(n: int = 6, d: int = 4, seed: int = 0, dtype=torch.float64) -> tuple:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(n, d, generator=generator, dtype=dtype) for _ in "uv")


def test_from_config_reads_gathering_and_the_default_is_the_configs() -> None:
    assert PearsonLoss.from_config(SimpleNamespace(gather_across_processes=True)).gather
    config = PccConfig(output_dir="unused", report_to="none")
    for source in (config, SimpleNamespace(), None):
        assert PearsonLoss.from_config(source).config_dict() == {"gather": False}
    assert PearsonLoss().config_dict() == {"gather": False}


@pytest.mark.parametrize(
    ("gold", "defined"),
    [
        # Σ(y − ȳ)² against n·(64·ε·max(1, |y|))² with ε = 2⁻²³ (float32), n = 2:
        ([0.0, THRESHOLD_STEP], False),  # 2⁻³³ = the threshold: not above it
        ([0.0, THRESHOLD_STEP * (1 + 2.0**-7)], True),  # 1.6 % above (below 65·ε's)
        ([0.0, 2 * THRESHOLD_STEP], True),  # 4× the threshold (= a scale of 2's)
        ([4.0, 4.0 + THRESHOLD_STEP], False),  # |y| = 4: the threshold is 16× larger
        ([4.0, 4.0 + 8 * THRESHOLD_STEP], True),
    ],
)
def test_gold_scores_within_rounding_noise_count_as_equal(gold, defined: bool) -> None:
    """r of two cosines against two gold scores: ±1 when the scores differ by more than
    rounding noise, else undefined (0, and the batch is degenerate: 'gold scores all
    equal'). The float64 labels are judged in the cosines' float32."""
    cosines = torch.tensor([0.2, 0.7])
    y = torch.tensor(gold, dtype=torch.float64)
    assert float(pearson_correlation(cosines, y.float())) == pytest.approx(float(defined))
    reasons = degenerate_batch(cosines, y)
    assert bool(reasons["gold scores all equal"]) is not defined


def test_the_degenerate_reasons_of_a_batch() -> None:
    one = degenerate_batch(torch.tensor([0.5]), torch.tensor([1.0]))
    assert list(one) == list(DEGENERATE_REASONS)
    assert [bool(v) for v in one.values()] == [True, False, False]
    assert all(v.dtype == torch.bool and v.dim() == 0 for v in one.values())
    two = degenerate_batch(torch.tensor([0.5, 0.5]), torch.tensor([1.0, 2.0]))
    assert [bool(v) for v in two.values()] == [False, False, True]
    fine = degenerate_batch(torch.tensor([0.1, 0.5]), torch.tensor([1.0, 2.0]))
    assert [bool(v) for v in fine.values()] == [False, False, False]
    assert float(pearson_correlation(torch.tensor([0.1, 0.5]), torch.tensor([2.0, 1.0]))) == -1


def test_everything_stays_on_the_device_of_the_cosines() -> None:
    """On the meta device (a stand-in for a GPU), gold scores on the CPU."""
    for n in (1, 5):
        x = torch.empty(n, device="meta")
        reasons = degenerate_batch(x, torch.empty(n, device="meta"))
        assert {v.device.type for v in reasons.values()} == {"meta"}
        r = pearson_correlation(x, torch.arange(n, dtype=torch.float32))
        assert r.device.type == "meta"
        embeddings = {name: torch.empty(n, 3, device="meta") for name in ("sentence1", "sentence2")}
        loss = PearsonLoss()(embeddings, torch.arange(n, dtype=torch.float32))
        assert loss.device.type == "meta"


def test_bf16_inputs_are_correlated_in_float32() -> None:
    u, v = (x.to(torch.bfloat16) for x in pairs(seed=1, dtype=torch.float32))
    labels = torch.tensor([0.5, 4.0, 2.0, 3.0, 1.0, 2.5])
    got = pearson_loss(u, v, labels)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, pearson_loss(u.float(), v.float(), labels), rtol=0, atol=0)
    x = torch.tensor([0.1, 0.3, 0.35, 0.9], dtype=torch.bfloat16)
    r = pearson_correlation(x, x.flip(0))
    assert r.dtype == torch.float32
    torch.testing.assert_close(r, pearson_correlation(x.float(), x.flip(0).float()))
    module = PearsonLoss()({"sentence1": u, "sentence2": v}, labels.double())
    assert module.dtype == torch.float32
    torch.testing.assert_close(module, got)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: pearson_correlation(torch.ones(2, 3), torch.ones(2, 3)),
            "expected two (n,) vectors of the same length, got (2, 3) and (2, 3)",
        ),
        (
            lambda: pearson_correlation(torch.ones(3), torch.ones(4)),
            "expected two (n,) vectors of the same length, got (3,) and (4,)",
        ),
        (
            lambda: pearson_loss(torch.ones(3, 2), torch.ones(3, 2), torch.ones(4)),
            "shapes do not match: (3, 2), (3, 2), (4,)",
        ),
        (
            lambda: pearson_loss(torch.ones(3, 2), torch.ones(2, 3), torch.ones(3)),
            "shapes do not match: (3, 2), (2, 3), (3,)",
        ),
        (
            lambda: PearsonLoss()(
                {"sentence1": torch.ones(3, 2), "sentence2": torch.ones(3, 2)}, None
            ),
            "loss pearson needs gold scores (the label column)",
        ),
    ],
)
def test_bad_inputs_are_refused_with_their_whole_message(call, message: str) -> None:
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == message


def test_gather_correlates_every_processs_pairs(monkeypatch) -> None:
    """With gather: 1 − r over the gathered cosines and labels (a stand-in gather that
    appends a second process's rows, both in the cosines' dtype), through
    scale_gathered_gradient; without it, no gather and no scaling."""
    seen: list[torch.dtype] = []
    scaled: list[torch.Tensor] = []

    def fake_gather(tensor: torch.Tensor) -> torch.Tensor:
        seen.append(tensor.dtype)
        return torch.cat([tensor, tensor.flip(0) * 0.5])

    def fake_scale(tensor: torch.Tensor) -> torch.Tensor:
        scaled.append(tensor)
        return tensor

    monkeypatch.setattr(pcc_module, "all_gather_with_grad", fake_gather)
    monkeypatch.setattr(pcc_module, "scale_gathered_gradient", fake_scale)
    u, v = pairs(seed=2, dtype=torch.float32)
    labels = torch.tensor([0, 5, 2, 3, 1, 4])
    local = PearsonLoss()({"sentence1": u, "sentence2": v}, labels)
    assert seen == [] and scaled == []
    torch.testing.assert_close(local, pearson_loss(u, v, labels.float()))
    got = PearsonLoss(gather=True)({"sentence1": u, "sentence2": v}, labels)
    assert seen == [torch.float32, torch.float32] and len(scaled) == 1
    cosines = torch.nn.functional.cosine_similarity(u, v, dim=-1)
    r = pearson_correlation(fake_gather(cosines), fake_gather(labels.float()))
    torch.testing.assert_close(got, 1 - r)
