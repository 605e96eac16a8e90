"""Loss math against independent references: CoSENT (eq. 10/11) and the paper's baselines.

The CoSENT references loop over explicit pairs of pairs in plain Python (float64 via ``math``),
or build the loss from explicit torch sums so autograd gives a reference gradient.
"""

from __future__ import annotations

import doctest
import math
import random

import pytest
import torch
from torch import nn

import sts_cosent.loss as loss_module
from sts_cosent.loss import (
    CoSENTLoss,
    contrastive_threshold_loss,
    cosent_loss,
    cosine_mse_loss,
    in_batch_infonce_loss,
    pairwise_cosine,
    softmax_classifier_loss,
)

# ---------------------------------------------------------------------------------------------
# Brute-force CoSENT references
# ---------------------------------------------------------------------------------------------


def _ordered_terms(
    scores: list[float], labels: list[float], scale: float, strict: bool = True
) -> list[tuple[int, int, float]]:
    """(a, b, λ(s_b − s_a)) for every ordered pair of pairs a ≠ b with label_a > label_b."""
    terms = []
    for a in range(len(scores)):
        for b in range(len(scores)):
            if a == b:
                continue
            if labels[a] > labels[b] or (not strict and labels[a] == labels[b]):
                terms.append((a, b, scale * (scores[b] - scores[a])))
    return terms


def brute_cosent(
    scores: list[float], labels: list[float], scale: float = 20.0, strict: bool = True
) -> float:
    """log(1 + Σ exp(t)), shifted by the largest exponent so that λΔ ≈ 2000 stays finite."""
    exponents = [0.0] + [t for _, _, t in _ordered_terms(scores, labels, scale, strict)]
    top = max(exponents)
    return top + math.log(sum(math.exp(t - top) for t in exponents))


def brute_cosent_grad(scores: list[float], labels: list[float], scale: float = 20.0) -> list[float]:
    """dL/ds_m = Σ_(a,b) softmax weight of term (a,b) · λ · ([m = b] − [m = a])."""
    terms = _ordered_terms(scores, labels, scale)
    top = max([0.0] + [t for _, _, t in terms])
    norm = math.exp(-top) + sum(math.exp(t - top) for _, _, t in terms)
    grad = [0.0] * len(scores)
    for a, b, t in terms:
        weight = math.exp(t - top) / norm
        grad[b] += weight * scale
        grad[a] -= weight * scale
    return grad


def torch_sum_reference(scores: torch.Tensor, labels: list[float], scale: float) -> torch.Tensor:
    """The loss built term by term from torch scalars (float64), for an autograd gradient."""
    total = torch.ones((), dtype=torch.float64)
    for a in range(len(labels)):
        for b in range(len(labels)):
            if labels[a] > labels[b]:
                total = total + torch.exp(scale * (scores[b] - scores[a]))
    return torch.log(total)


def _labels(kind: str, n: int, rng: random.Random) -> list[float]:
    if kind == "sts":  # 0–5 in steps of 0.25 plus forced ties
        values = [rng.randrange(0, 21) / 4 for _ in range(n)]
        values[-1] = values[0]
        return values
    if kind == "binary":
        return [float(i % 2) for i in range(n)]
    if kind == "nli":  # entailment 2 > neutral 1 > contradiction 0
        return [float(i % 3) for i in range(n)]
    raise AssertionError(kind)


def _scores(n: int, rng: random.Random, spread: float = 1.0) -> list[float]:
    return [rng.uniform(-spread, spread) for _ in range(n)]


# ---------------------------------------------------------------------------------------------
# CoSENT: values and gradients
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sts", "binary", "nli"])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("scale", [1.0, 20.0])
def test_cosent_matches_brute_force(kind: str, seed: int, scale: float) -> None:
    rng = random.Random(seed)
    scores, labels = _scores(9, rng), _labels(kind, 9, rng)
    expected = brute_cosent(scores, labels, scale)
    got64 = cosent_loss(torch.tensor(scores, dtype=torch.float64), torch.tensor(labels), scale)
    got32 = cosent_loss(torch.tensor(scores, dtype=torch.float32), torch.tensor(labels), scale)
    assert got64.dtype == torch.float64 and got32.dtype == torch.float32
    assert got64.dim() == 0
    assert got64.item() == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert got32.item() == pytest.approx(expected, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("kind", ["sts", "binary", "nli"])
@pytest.mark.parametrize("seed", [0, 1])
def test_cosent_gradient_matches_references(kind: str, seed: int) -> None:
    rng = random.Random(100 + seed)
    scale = 20.0
    values, labels = _scores(8, rng), _labels(kind, 8, rng)

    scores = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    cosent_loss(scores, torch.tensor(labels), scale).backward()

    reference = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    ref_loss = torch_sum_reference(reference, labels, scale)
    ref_loss.backward()

    assert ref_loss.item() == pytest.approx(brute_cosent(values, labels, scale), rel=1e-12)
    torch.testing.assert_close(scores.grad, reference.grad, rtol=1e-10, atol=1e-12)
    analytic = torch.tensor(brute_cosent_grad(values, labels, scale), dtype=torch.float64)
    torch.testing.assert_close(scores.grad, analytic, rtol=1e-10, atol=1e-12)
    assert scores.grad.abs().sum() > 0


def test_cosent_gradcheck() -> None:
    gen = torch.Generator().manual_seed(0)
    scores = torch.rand(7, dtype=torch.float64, generator=gen).mul(2).sub(1).requires_grad_()
    labels = torch.tensor([0.0, 1.5, 1.5, 3.0, 5.0, 2.0, 0.0])
    assert torch.autograd.gradcheck(lambda s: cosent_loss(s, labels, 5.0), (scores,))


def test_cosent_through_pairwise_cosine_gradcheck() -> None:
    """Eq. 10 end to end: embeddings → cosine → CoSENT, differentiable in u and v."""
    gen = torch.Generator().manual_seed(1)
    u = torch.randn(5, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    v = torch.randn(5, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    labels = torch.tensor([4.0, 0.5, 2.0, 2.0, 3.2])
    assert torch.autograd.gradcheck(
        lambda a, b: cosent_loss(pairwise_cosine(a, b), labels, 3.0), (u, v)
    )
    cos = [
        sum(x * y for x, y in zip(a, b, strict=True))
        / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
        for a, b in zip(u.tolist(), v.tolist(), strict=True)
    ]
    got = cosent_loss(pairwise_cosine(u, v), labels, 3.0).item()
    assert got == pytest.approx(brute_cosent(cos, labels.tolist(), 3.0), rel=1e-12)


def test_cosent_invariant_to_batch_order() -> None:
    rng = random.Random(7)
    values, labels = _scores(10, rng), _labels("sts", 10, rng)
    scores = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    y = torch.tensor(labels)
    base = cosent_loss(scores, y)
    (base_grad,) = torch.autograd.grad(base, scores)
    for seed in range(3):
        perm = torch.randperm(10, generator=torch.Generator().manual_seed(seed))
        permuted = cosent_loss(scores[perm], y[perm])
        (grad,) = torch.autograd.grad(permuted, scores)
        assert permuted.item() == pytest.approx(base.item(), rel=1e-12)
        torch.testing.assert_close(grad, base_grad, rtol=1e-10, atol=1e-12)
    # Sanity: permuting the scores alone (breaking the score/label pairing) does change it.
    perm = torch.tensor([9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
    assert abs(cosent_loss(scores[perm], y).item() - base.item()) > 1e-4


def test_cosent_ties_contribute_nothing() -> None:
    scale = 20.0
    values = [0.9, 0.1, 0.5, -0.3, 0.7]
    labels = [5.0, 1.0, 3.0, 0.0, 4.0]
    tied_index = 2  # a new pair with label 3.0, tied with pair 2, scored far above it
    new_values, new_labels = [*values, 0.95], [*labels, labels[tied_index]]
    got = cosent_loss(torch.tensor(new_values, dtype=torch.float64), torch.tensor(new_labels))
    assert got.item() == pytest.approx(brute_cosent(new_values, new_labels, scale), rel=1e-12)
    # The test can tell: counting the tie (either direction) would give a larger loss.
    with_ties = brute_cosent(new_values, new_labels, scale, strict=False)
    assert with_ties > got.item() + 1.0

    # Explicitly: two tied pairs (a, b) above one pair c: only the two non-tied terms appear,
    # L = log(1 + e^{λ(s_c − s_a)} + e^{λ(s_c − s_b)}), whatever the order of s_a and s_b.
    s_a, s_b, s_c = 0.2, 0.8, 0.1
    expected = math.log(1 + math.exp(scale * (s_c - s_a)) + math.exp(scale * (s_c - s_b)))
    three = cosent_loss(torch.tensor([s_a, s_b, s_c], dtype=torch.float64), torch.tensor([2, 2, 1]))
    assert three.item() == pytest.approx(expected, rel=1e-12)


def test_cosent_one_pair_is_zero_with_grad() -> None:
    scores = torch.tensor([0.3], requires_grad=True)
    loss = cosent_loss(scores, torch.tensor([4.2]))
    assert loss.item() == 0.0
    assert loss.requires_grad and loss.grad_fn is not None
    loss.backward()
    assert scores.grad is not None
    torch.testing.assert_close(scores.grad, torch.zeros(1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cosent_all_labels_equal_is_zero_without_nan(dtype: torch.dtype) -> None:
    scores = torch.tensor([45.0, -50.0, 3.0, 0.5], dtype=dtype, requires_grad=True)
    loss = cosent_loss(scores, torch.full((4,), 2.0))
    assert loss.item() == 0.0
    assert loss.grad_fn is not None
    loss.backward()
    assert not torch.isnan(scores.grad).any()
    assert torch.count_nonzero(scores.grad) == 0


def test_cosent_large_exponents_are_finite() -> None:
    scale = 20.0
    values = [50.0, -50.0, 10.0, -10.0]  # λ·Δ up to 2000
    for labels in ([0.0, 3.0, 1.0, 2.0], [3.0, 0.0, 2.0, 1.0]):  # badly ranked, well ranked
        scores = torch.tensor(values, requires_grad=True)
        loss = cosent_loss(scores, torch.tensor(labels), scale)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(scores.grad).all()
        assert loss.item() == pytest.approx(brute_cosent(values, labels, scale), rel=1e-6)
        analytic = torch.tensor(brute_cosent_grad(values, labels, scale), dtype=torch.float32)
        torch.testing.assert_close(scores.grad, analytic, rtol=1e-5, atol=1e-5)
    assert brute_cosent(values, [0.0, 3.0, 1.0, 2.0], scale) > 1999  # really ≈ λΔ = 2000


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("spread", [1.0, 5.0])  # cosines, or cross-encoder logits (λΔ ≈ 200)
def test_cosent_half_precision_inputs(dtype: torch.dtype, spread: float) -> None:
    rng = random.Random(3)
    values, labels = _scores(12, rng, spread), _labels("sts", 12, rng)
    labels = [-v for v in labels]  # rank against the labels too, so exponents are large
    y = torch.tensor(labels)
    half = torch.tensor(values, dtype=dtype, requires_grad=True)
    full = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    loss_half, loss_full = cosent_loss(half, y), cosent_loss(full, y)
    assert loss_half.dtype == torch.float32
    assert torch.isfinite(loss_half)
    # Computed in float32 on the rounded inputs: equals the float32 loss of those values.
    rounded = half.detach().float().tolist()
    assert loss_half.item() == pytest.approx(brute_cosent(rounded, labels), rel=1e-5)
    # Close to the float32 loss; the difference is only the input rounding (× λ).
    assert loss_half.item() == pytest.approx(loss_full.item(), rel=0.02)
    loss_half.backward()
    loss_full.backward()
    assert half.grad.dtype == dtype and torch.isfinite(half.grad).all()
    torch.testing.assert_close(half.grad.float(), full.grad, rtol=0.1, atol=0.3)


def test_cosent_binary_labels_are_eq8() -> None:
    scale = 20.0
    values = [0.8, 0.1, 0.4, 0.6, -0.2, 0.3]
    binary = [1, 0, 1, 0, 0, 1]
    # Eq. 8: every positive (i, j) against every negative (k, l).
    pos = [s for s, y in zip(values, binary, strict=True) if y == 1]
    neg = [s for s, y in zip(values, binary, strict=True) if y == 0]
    expected = math.log(1 + sum(math.exp(scale * (n - p)) for p in pos for n in neg))
    scores = torch.tensor(values, dtype=torch.float64)
    for labels in (
        torch.tensor(binary),
        torch.tensor(binary, dtype=torch.float32),
        torch.tensor(binary, dtype=torch.bool),
    ):
        assert cosent_loss(scores, labels, scale).item() == pytest.approx(expected, rel=1e-12)


def test_cosent_nli_class_labels_use_only_their_order() -> None:
    scale = 20.0
    values = [0.7, 0.2, -0.1, 0.5, 0.4, 0.0]
    nli = [2.0, 1.0, 0.0, 2.0, 0.0, 1.0]  # entailment 2 > neutral 1 > contradiction 0
    scores = torch.tensor(values, dtype=torch.float64)
    got = cosent_loss(scores, torch.tensor(nli), scale).item()
    assert got == pytest.approx(brute_cosent(values, nli, scale), rel=1e-12)
    # 2·2 + 2·2 + 2·2 = 12 ordered pairs of pairs (entailment–neutral, -contradiction, ...).
    assert len(_ordered_terms(values, nli, scale)) == 12
    relabelled = torch.tensor([{2.0: 7, 1.0: 5, 0.0: -3}[y] for y in nli])  # same order
    assert cosent_loss(scores, relabelled, scale).item() == pytest.approx(got, rel=1e-12)
    integer = torch.tensor([int(y) for y in nli])
    assert cosent_loss(scores, integer, scale).item() == pytest.approx(got, rel=1e-12)


def test_cosent_cross_encoder_logits_column_and_module() -> None:
    logits = torch.tensor([[2.5], [-1.0], [0.3]], dtype=torch.float64)  # eq. 11: raw scores
    labels = torch.tensor([1.0, 0.0, 1.0])
    expected = brute_cosent([2.5, -1.0, 0.3], [1.0, 0.0, 1.0], 2.0)
    assert cosent_loss(logits, labels, 2.0).item() == pytest.approx(expected, rel=1e-12)
    module = CoSENTLoss(scale=2.0)
    assert module(logits.view(-1), labels).item() == pytest.approx(expected, rel=1e-12)
    assert "scale=2.0" in repr(module)


def test_cosent_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="one score per label"):
        cosent_loss(torch.zeros(4, 3), torch.zeros(4))


def test_docstring_examples_run() -> None:
    result = doctest.testmod(loss_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_pairwise_cosine_hand_values() -> None:
    u = torch.tensor([[1.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
    v = torch.tensor([[0.0, 2.0], [6.0, 8.0], [-2.0, -2.0]])
    # cos: orthogonal 0; same direction 1; opposite −1.
    torch.testing.assert_close(pairwise_cosine(u, v), torch.tensor([0.0, 1.0, -1.0]))
    assert pairwise_cosine(u.half(), v.half()).dtype == torch.float32
    with pytest.raises(ValueError):
        pairwise_cosine(u, v[:2])


# ---------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------


def test_contrastive_threshold_hand_values() -> None:
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    v = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 1.0]])
    labels = torch.tensor([1, 1, 0, 0])
    # pair 1: y=1, cos=1        → ½·(1 − 1)²              = 0
    # pair 2: y=1, cos=0        → ½·(1 − 0)²              = 0.5
    # pair 3: y=0, cos=1/√2     → ½·max(0.5, 0.7071)²     = ½·0.5  = 0.25
    # pair 4: y=0, cos=−1/√2    → ½·max(0.5, −0.7071)²    = ½·0.25 = 0.125
    # mean = (0 + 0.5 + 0.25 + 0.125) / 4 = 0.21875
    got = contrastive_threshold_loss(u, v, labels, margin=0.5)
    assert got.item() == pytest.approx(0.21875, rel=1e-6)
    bools = contrastive_threshold_loss(u, v, labels.bool(), margin=0.5)
    assert bools.item() == pytest.approx(0.21875, rel=1e-6)


def test_contrastive_threshold_no_gradient_below_margin() -> None:
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]], requires_grad=True)
    v = torch.tensor([[-1.0, 1.0], [1.0, 1.0]], requires_grad=True)  # cos −0.707, +0.707
    contrastive_threshold_loss(u, v, torch.tensor([0.0, 0.0]), margin=0.5).backward()
    assert torch.count_nonzero(u.grad[0]) == 0 and torch.count_nonzero(v.grad[0]) == 0
    assert u.grad[1].abs().sum() > 0 and v.grad[1].abs().sum() > 0


def test_contrastive_threshold_gradcheck() -> None:
    gen = torch.Generator().manual_seed(2)
    u = torch.randn(6, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    v = torch.randn(6, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    cos = pairwise_cosine(u, v).detach()
    assert ((cos - 0.1).abs() > 1e-3).all()  # away from the kink of max(ε, ·)
    assert torch.autograd.gradcheck(
        lambda a, b: contrastive_threshold_loss(a, b, labels, margin=0.1), (u, v)
    )


@pytest.mark.parametrize("bad", [[0.0, 2.0], [0.5, 1.0], [-1, 0]])
def test_contrastive_threshold_rejects_non_binary_labels(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="binary"):
        contrastive_threshold_loss(torch.ones(2, 2), torch.ones(2, 2), torch.tensor(bad))


def _tiny_classifier(dtype: torch.dtype = torch.float32) -> nn.Linear:
    classifier = nn.Linear(3, 2).to(dtype)
    with torch.no_grad():
        classifier.weight.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]))
        classifier.bias.copy_(torch.tensor([0.0, 0.5]))
    return classifier


def test_softmax_classifier_hand_values() -> None:
    u = torch.tensor([[1.0], [2.0]])
    v = torch.tensor([[3.0], [1.0]])
    # features [u, v, |u − v|]: [1, 3, 2] and [2, 1, 1]
    # logits W·f + b: row 1 [1, 3 + 2 + 0.5] = [1, 5.5]; row 2 [2, 1 + 1 + 0.5] = [2, 2.5]
    # CE(row 1, class 0) = log(1 + e^{5.5 − 1}) ; CE(row 2, class 1) = log(1 + e^{2 − 2.5})
    expected = (math.log(1 + math.exp(4.5)) + math.log(1 + math.exp(-0.5))) / 2
    classifier = _tiny_classifier()
    got = softmax_classifier_loss(u, v, torch.tensor([0, 1]), classifier)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    as_float = softmax_classifier_loss(u, v, torch.tensor([0.0, 1.0]), classifier)
    assert as_float.item() == pytest.approx(expected, rel=1e-6)


def test_softmax_classifier_gradcheck() -> None:
    gen = torch.Generator().manual_seed(3)
    u = torch.randn(4, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    v = torch.randn(4, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    torch.manual_seed(0)
    classifier = nn.Linear(6, 3).double()
    labels = torch.tensor([2, 0, 1, 2])
    assert torch.autograd.gradcheck(
        lambda a, b: softmax_classifier_loss(a, b, labels, classifier), (u, v)
    )
    softmax_classifier_loss(u, v, labels, classifier).backward()
    assert classifier.weight.grad is not None and classifier.weight.grad.abs().sum() > 0


def test_softmax_classifier_rejects_bad_inputs() -> None:
    u = v = torch.ones(2, 1)
    with pytest.raises(ValueError, match="integer"):
        softmax_classifier_loss(u, v, torch.tensor([0.5, 1.0]), _tiny_classifier())
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        softmax_classifier_loss(u, v, torch.tensor([0, 2]), _tiny_classifier())
    with pytest.raises(ValueError, match="features"):
        softmax_classifier_loss(
            torch.ones(2, 2), torch.ones(2, 2), torch.tensor([0, 1]), _tiny_classifier()
        )


def test_infonce_hand_values() -> None:
    u = torch.tensor([[2.0, 0.0], [0.0, 3.0]])  # norms ≠ 1: cosines, not dot products
    v = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    # cos matrix: [[1, 1/√2], [0, 1/√2]]; τ = 0.5 → logits [[2, √2], [0, √2]]
    # row 1: −log(e²/(e² + e^√2)) = log(1 + e^{√2 − 2}); row 2: log(1 + e^{−√2})
    r2 = math.sqrt(2)
    expected = (math.log(1 + math.exp(r2 - 2)) + math.log(1 + math.exp(-r2))) / 2
    assert in_batch_infonce_loss(u, v, temperature=0.5).item() == pytest.approx(expected, rel=1e-6)


def test_infonce_positives_on_the_diagonal() -> None:
    gen = torch.Generator().manual_seed(4)
    u = torch.randn(6, 5, dtype=torch.float64, generator=gen)
    v = torch.randn(6, 5, dtype=torch.float64, generator=gen)
    base = in_batch_infonce_loss(u, v).item()
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    assert in_batch_infonce_loss(u[perm], v[perm]).item() == pytest.approx(base, rel=1e-12)
    assert in_batch_infonce_loss(u, v[perm]).item() != pytest.approx(base, rel=1e-3)
    with pytest.raises(ValueError, match="temperature"):
        in_batch_infonce_loss(u, v, temperature=0.0)


def test_infonce_gradcheck() -> None:
    gen = torch.Generator().manual_seed(5)
    u = torch.randn(4, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    v = torch.randn(4, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: in_batch_infonce_loss(a, b, 0.2), (u, v))


def test_cosine_mse_is_the_core_function() -> None:
    from sts_core.losses import cosine_mse_loss as core

    assert cosine_mse_loss is core
