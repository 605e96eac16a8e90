"""The BSC loss against a numpy reference written from the paper's equations (both
directions, labeled negatives, repeated anchors, hard negatives, each normalisation), the
combo with MSE, degenerate batches, the trainable temperature, and the gathered loss on two
processes."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

from sts_bsc import BscConfig, BSCLoss, bsc_loss
from sts_bsc import loss as bsc_loss_module
from sts_core.losses import build_loss
from sts_core.testing import free_port

FIXTURES = Path(__file__).parent / "fixtures"


def normalize_np(x: np.ndarray, mode: str) -> np.ndarray:
    if mode == "l2":
        return x / np.linalg.norm(x, axis=1, keepdims=True)
    if mode == "coordinates_l2":
        return x / np.linalg.norm(x, axis=0, keepdims=True)
    if mode == "coordinates_minmax":
        return (x - x.min(0)) / (x.max(0) - x.min(0))
    if mode == "coordinates_range":
        return x / (x.max(0) - x.min(0))
    return x


def reference(q, a, tau, positive=None, ids=None, hard=None, mode="l2", symmetric=True):
    """Eq. 1–5 with loops, float64: L0 over rows q_i (softmax over a_j and the hard
    negatives), L1 over rows a_i (softmax over q_j), numerators averaged over the rows of a
    repeated anchor (eq. 3–4), only positive rows counted, divided by the batch size."""
    m = len(q)
    positive = np.ones(m, bool) if positive is None else positive
    ids = np.arange(m) if ids is None else ids
    qn, an = normalize_np(q, mode), normalize_np(a, mode)
    s = qn @ an.T / tau
    extra = None if hard is None else qn @ normalize_np(hard, mode).T / tau
    l0 = l1 = 0.0
    for i in range(m):
        if not positive[i]:
            continue
        row = s[i] if extra is None else np.concatenate([s[i], extra[i]])
        partners = [j for j in range(m) if ids[j] == ids[i] and (positive[j] or j == i)]
        l0 += np.log(np.exp(row).sum()) - np.mean([s[i, j] for j in partners])
        same = [j for j in range(m) if ids[j] == ids[i]]
        l1 += np.log(np.exp(s[:, i]).sum()) - np.mean([s[j, i] for j in same])
    return l0 / m, (l1 / m if symmetric else 0.0)


def batch(m=6, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(m, d)), rng.normal(size=(m, d)), rng.normal(size=(m, d))


MODES = ("l2", "coordinates_l2", "coordinates_minmax", "coordinates_range", "none")


@pytest.mark.parametrize(
    "mode,symmetric,labeled,repeated,hard",
    [
        (mode, *flags)
        for mode in MODES
        for flags in itertools.product([True, False], repeat=4)
        if mode == "l2" or flags == (True, True, True, True)
    ],
)
def test_bsc_equals_the_reference(mode, symmetric, labeled, repeated, hard) -> None:
    q, a, h = batch()
    tau = 0.1 if mode in ("l2", "coordinates_l2") else 1.5
    positive = np.array([True, False, True, True, False, True]) if labeled else None
    ids = np.array([0, 1, 0, 2, 0, 3]) if repeated else None
    l0, l1 = reference(q, a, tau, positive, ids, h if hard else None, mode, symmetric)
    got = bsc_loss(
        torch.tensor(q),
        torch.tensor(a),
        tau,
        positive=None if positive is None else torch.tensor(positive),
        anchor_ids=None if ids is None else torch.tensor(ids),
        hard_negatives=torch.tensor(h) if hard else None,
        normalization=mode,
        symmetric=symmetric,
    )
    assert float(got["l0"]) == pytest.approx(l0, rel=1e-10)
    assert float(got["l1"]) == pytest.approx(l1, rel=1e-10, abs=1e-12)
    assert float(got["bsc"]) == pytest.approx(l0 + l1, rel=1e-10)


def test_one_direction_is_cross_entropy_over_the_cosine_matrix() -> None:
    """Without labels or repeats, L0 is SimCSE's in-batch InfoNCE (cross-entropy with the
    diagonal as targets) and L1 the same on the transposed matrix."""
    q, a, _ = (torch.tensor(x) for x in batch(seed=1))
    logits = F.normalize(q, dim=1) @ F.normalize(a, dim=1).T / 0.05
    targets = torch.arange(len(q))
    got = bsc_loss(q, a, 0.05)
    torch.testing.assert_close(got["l0"], F.cross_entropy(logits, targets))
    torch.testing.assert_close(got["l1"], F.cross_entropy(logits.T, targets))


def test_repeated_anchors_with_identical_embeddings_change_nothing() -> None:
    """Eq. 3–4: when the rows of a repeated anchor have the same embedding, averaging the
    numerators gives the plain loss back; with dropout (different embeddings) it differs."""
    q, a, _ = (torch.tensor(x) for x in batch(seed=2))
    ids = torch.tensor([0, 0, 1, 0, 2, 2])
    same_q = q.clone()
    same_q[[1, 3]] = q[0]
    same_q[5] = q[4]
    plain = bsc_loss(same_q, a, 0.1)["bsc"]
    assert float(bsc_loss(same_q, a, 0.1, anchor_ids=ids)["bsc"]) == pytest.approx(float(plain))
    assert float(bsc_loss(q, a, 0.1, anchor_ids=ids)["bsc"]) != pytest.approx(
        float(bsc_loss(q, a, 0.1)["bsc"])
    )


class Config:
    bsc_temperature = 0.1
    trainable_temperature = False
    bsc_normalization = "l2"
    bsc_symmetric = True
    label_threshold = 0.6
    repeated_anchors = True
    mu = 0.1
    gather_across_processes = False


def test_registered_combo_weights_bsc_and_mse_and_logs_each_part() -> None:
    q, a, _ = (torch.tensor(x) for x in batch(seed=3))
    labels = torch.tensor([0.8, 0.2, 0.6, 1.0, 0.4, 0.7], dtype=torch.float64)
    loss = build_loss("bsc", Config())
    assert isinstance(loss, BSCLoss) and loss.text_id_columns == ("sentence1",)
    ids = torch.tensor([5, 6, 7, 8, 9, 10])
    out = loss({"sentence1": q, "sentence2": a}, labels, text_ids={"sentence1": ids})
    positive = (labels > 0.6).numpy()  # strict: 0.6 itself is a negative
    l0, l1 = reference(q.numpy(), a.numpy(), 0.1, positive)
    cosine = F.cosine_similarity(q, a).numpy()
    mse = np.mean((cosine - labels.numpy()) ** 2)
    assert float(out["mse"]) == pytest.approx(mse, rel=1e-10)
    assert float(out["bsc"]) == pytest.approx(l0 + l1, rel=1e-10)
    assert float(out["loss"]) == pytest.approx(0.1 * (l0 + l1) + 0.9 * mse, rel=1e-10)
    assert set(out) == {"loss", "bsc", "bsc_l0", "bsc_l1", "mse"}


def test_a_batch_without_a_positive_pair_is_counted_and_gives_zero() -> None:
    q, a, _ = (torch.tensor(x, requires_grad=True) for x in batch(seed=4))
    config = Config()
    config.mu = 1.0
    loss = build_loss("bsc", config)
    out = loss({"sentence1": q, "sentence2": a}, torch.full((6,), 0.2, dtype=torch.float64))
    assert float(out["loss"].detach()) == 0.0
    out["loss"].backward()  # on the graph: DDP sees every parameter
    assert not q.grad.any()
    ((reason, happened),) = loss.pop_degenerate()
    assert reason == "no positive pair" and bool(happened)


def test_labels_are_required_for_a_threshold() -> None:
    q, a, _ = (torch.tensor(x) for x in batch())
    with pytest.raises(ValueError, match="needs labels"):
        build_loss("bsc", Config())({"sentence1": q, "sentence2": a}, None)


def test_trainable_temperature_is_a_parameter_with_a_gradient() -> None:
    loss = BSCLoss(temperature=0.2, trainable_temperature=True)
    assert loss.inverse_temperature.item() == pytest.approx(5.0)
    q, a, _ = (torch.tensor(x, dtype=torch.float32) for x in batch(seed=5))
    out = loss({"sentence1": q, "sentence2": a}, None)
    out["loss"].backward()
    # ∂L/∂α: central differences (h = 1e-4) of the float64 reference of eq. 1 in α = 1/τ
    q64, a64, h = q.double().numpy(), a.double().numpy(), 1e-4
    up, down = (sum(reference(q64, a64, 1 / alpha)) for alpha in (5.0 + h, 5.0 - h))
    assert float(loss.inverse_temperature.grad) == pytest.approx((up - down) / (2 * h), rel=1e-4)
    assert float(out["temperature"]) == pytest.approx(0.2)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"bsc_temperature": 0}, "bsc_temperature must be finite and > 0"),
        ({"mu": 1.5}, "mu must be in"),
        ({"bsc_normalization": "l1"}, "bsc_normalization 'l1' is not one of"),
        ({"shuffle": "sorted"}, "shuffle 'sorted' is not one of"),
        ({"shuffle_by": "hard_negative"}, "shuffle_by"),
        ({"group_size": 0}, "group_size must be at least 1"),
        ({"loss": "cosent"}, "loss 'cosent' is not one of"),
    ],
)
def test_config_refuses_bad_values(overrides, message, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        BscConfig(output_dir=str(tmp_path), **overrides)


def test_trainable_temperature_gets_its_own_learning_rate(tmp_path: Path) -> None:
    config = BscConfig(
        output_dir=str(tmp_path), trainable_temperature=True, temperature_learning_rate=0.005
    )
    assert config.learning_rate_mapping == {r"^sts_loss\.inverse_temperature$": 0.005}


def test_gathered_loss_on_two_processes_equals_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two gloo processes (uneven parts, gradients averaged as DDP does) = one process over
    the whole batch, for the embeddings' layer and for the trainable temperature (whose
    gradient is computed in full by each process and must not be scaled)."""
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    monkeypatch.syspath_prepend(str(FIXTURES))  # spawned children get the parent's sys.path
    import bsc_gather_worker as w

    mp.spawn(
        w.worker,
        args=(2, free_port(), bsc_loss_module.__file__, str(tmp_path)),
        nprocs=2,
        join=True,
    )
    layer, loss, left, right, labels, ids = w.make_problem()
    out = loss({"sentence1": layer(left), "sentence2": layer(right)}, labels, {"sentence1": ids})
    out["loss"].backward()
    for rank in range(2):
        result = torch.load(tmp_path / f"rank{rank}.pt")
        torch.testing.assert_close(result["loss"], out["loss"].detach())
        torch.testing.assert_close(result["layer"], layer.weight.grad, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(
            result["alpha"], loss.inverse_temperature.grad, rtol=1e-4, atol=1e-6
        )
