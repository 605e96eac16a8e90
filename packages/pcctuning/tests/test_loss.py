"""Pcc-tuning's losses: 1 − Pearson (eq. 9) against scipy and finite differences, degenerate
batches, the gathered correlation over two processes; eq. 8 (the core's InfoNCE with a hard
negative) against a hand-computed reference."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from scipy.stats import pearsonr

import sts_core.training.grad_cache as grad_cache_module
import sts_pcctuning.loss as pcc_loss_module
from sts_core.losses import build_loss, in_batch_infonce_loss
from sts_core.testing import free_port
from sts_pcctuning.loss import (
    DEGENERATE_REASONS,
    PearsonLoss,
    pearson_correlation,
    pearson_loss,
)

FIXTURES = Path(__file__).parent / "fixtures"


def random_pairs(n: int, d: int = 6, seed: int = 0, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    u = torch.randn(n, d, generator=generator, dtype=dtype)
    v = torch.randn(n, d, generator=generator, dtype=dtype)
    labels = torch.randint(0, 6, (n,), generator=generator).to(dtype)
    return u, v, labels


def test_pearson_loss_is_one_minus_scipys_correlation() -> None:
    u, v, labels = random_pairs(12)
    cosine = F.cosine_similarity(u, v, dim=-1).numpy()
    expected = 1 - pearsonr(cosine, labels.numpy()).statistic
    assert float(pearson_loss(u, v, labels)) == pytest.approx(expected, abs=1e-12)
    # exact sample Pearson: not the authors' mean / unbiased-std mix, r·(n − 1)/n
    authors = 1 - pearsonr(cosine, labels.numpy()).statistic * 11 / 12
    assert float(pearson_loss(u, v, labels)) != pytest.approx(authors, abs=1e-3)


def test_pearson_correlation_is_invariant_to_scale_and_shift_of_the_scores() -> None:
    x = torch.tensor([0.1, 0.5, 0.3, 0.9], dtype=torch.float64)
    y = torch.tensor([1.0, 4.0, 2.0, 5.0], dtype=torch.float64)
    r = pearson_correlation(x, y)
    assert float(r) == pytest.approx(pearsonr(x.numpy(), y.numpy()).statistic, abs=1e-12)
    assert float(pearson_correlation(x, 3 * y - 7)) == pytest.approx(float(r), abs=1e-12)


def test_pearson_loss_gradient_matches_finite_differences() -> None:
    u, v, labels = random_pairs(7, d=4, seed=3)
    u.requires_grad_(True)
    v.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: pearson_loss(a, b, labels), (u, v))


def test_pearson_loss_float32_agrees_with_float64() -> None:
    u, v, labels = random_pairs(16, seed=5)
    exact = float(pearson_loss(u, v, labels))
    assert float(pearson_loss(u.float(), v.float(), labels.float())) == pytest.approx(
        exact, abs=1e-5
    )


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("one pair", DEGENERATE_REASONS[0]),
        ("equal gold", DEGENERATE_REASONS[1]),
        ("equal cosines", DEGENERATE_REASONS[2]),
    ],
)
def test_degenerate_batch_gives_zero_loss_no_gradient_and_is_counted(
    case: str, reason: str
) -> None:
    u, v, labels = random_pairs(5, seed=1)
    if case == "one pair":
        u, v, labels = u[:1], v[:1], labels[:1]
    elif case == "equal gold":
        labels = torch.full_like(labels, 3.0)
    else:
        v = u.clone()  # every cosine is 1
    u = u.clone().requires_grad_(True)
    loss_module = PearsonLoss()
    loss = loss_module({"sentence1": u, "sentence2": v}, labels)
    loss.backward()
    assert float(loss.detach()) == 0.0
    assert torch.equal(u.grad, torch.zeros_like(u))
    counted = {name: bool(flag) for name, flag in loss_module.pop_degenerate()}
    assert counted == {name: name == reason for name in DEGENERATE_REASONS}


def test_a_usable_batch_counts_nothing() -> None:
    u, v, labels = random_pairs(6)
    loss_module = PearsonLoss()
    loss_module({"sentence1": u, "sentence2": v}, labels)
    assert not any(bool(flag) for _, flag in loss_module.pop_degenerate())


def test_pearson_is_registered_and_reads_gather_from_the_config() -> None:
    class Config:
        gather_across_processes = True

    loss_module = build_loss("pearson", Config())
    assert isinstance(loss_module, PearsonLoss) and loss_module.gather
    assert loss_module.config_dict() == {"gather": True}


def infonce_reference(a: np.ndarray, p: np.ndarray, n: np.ndarray, tau: float) -> float:
    """Eq. 8 by hand: −1/N Σ_i log e^{s(a_i,p_i)/τ} / Σ_j (e^{s(a_i,p_j)/τ} + e^{s(a_i,n_j)/τ})."""

    def cos(x: np.ndarray, y: np.ndarray) -> float:
        return float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))

    total = 0.0
    for i in range(len(a)):
        denominator = sum(
            math.exp(cos(a[i], p[j]) / tau) + math.exp(cos(a[i], n[j]) / tau) for j in range(len(a))
        )
        total += -math.log(math.exp(cos(a[i], p[i]) / tau) / denominator)
    return total / len(a)


def test_stage_one_loss_is_eq_8_with_every_hard_negative_in_the_denominator() -> None:
    generator = torch.Generator().manual_seed(2)
    a, p, n = (torch.randn(5, 4, generator=generator, dtype=torch.float64) for _ in range(3))
    expected = infonce_reference(a.numpy(), p.numpy(), n.numpy(), 0.05)
    assert float(in_batch_infonce_loss(a, p, 0.05, n)) == pytest.approx(expected, rel=1e-10)

    class Config:
        infonce_temperature = 0.05

    registered = build_loss("infonce", Config())
    value = registered({"sentence1": a, "sentence2": p, "hard_negative": n}, None)
    assert float(value) == pytest.approx(expected, rel=1e-10)


def test_gathered_losses_on_two_processes_equal_one_process_over_the_whole_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two gloo processes (uneven parts, gradients averaged as DDP does) = one process over
    the whole batch: the gathered Pearson loss (eq. 9), and stage 1's gathered InfoNCE with
    a hard negative computed with gradient caching (mini-batches of 2)."""
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    monkeypatch.syspath_prepend(str(FIXTURES))  # spawned children get the parent's sys.path
    import pcc_gather_worker as w

    paths = {"loss": pcc_loss_module.__file__, "grad_cache": grad_cache_module.__file__}
    mp.spawn(w.worker, args=(2, free_port(), paths, str(tmp_path)), nprocs=2, join=True)

    layer, left, right, negative, labels = w.make_problem()
    embeddings = {"sentence1": layer(left), "sentence2": layer(right)}
    reference = pearson_loss(embeddings["sentence1"], embeddings["sentence2"], labels)
    reference.backward()
    expected = {"pearson": (reference.detach(), layer.weight.grad.clone())}
    layer.weight.grad = None
    encoder = w.ToyEncoder(layer)
    whole = {name: w.features(x) for name, x in w.columns(left, right, negative).items()}
    infonce = in_batch_infonce_loss(
        encoder(columns=whole)["sentence1"],
        encoder(columns=whole)["sentence2"],
        w.TAU,
        encoder(columns=whole)["hard_negative"],
    )
    infonce.backward()
    expected["cached_infonce"] = (infonce.detach(), layer.weight.grad.clone())
    for rank in range(2):
        result = torch.load(tmp_path / f"rank{rank}.pt")
        for name, (loss, grad) in expected.items():
            torch.testing.assert_close(result[name]["loss"], loss, msg=f"{name} loss")
            torch.testing.assert_close(
                result[name]["grad"], grad, rtol=1e-4, atol=1e-6, msg=f"{name} gradient"
            )
