"""Issue 31: the BSC options that change a number, each set to a non-default value and checked
against a computation written here from the paper (Chernyavskiy et al., 2022, eq. 1–2, 5–6)
and from AdamW's update rule, not from the package's code:

* ``bsc_temperature`` (τ of ``S = Q̂Âᵀ/τ``) read by ``from_config`` and by the trainer's loss;
* the trainable temperature: α = 1/τ in an optimizer group of its own with exactly
  ``temperature_learning_rate`` and no weight decay (alone and as the ``bsc`` part of a
  ``loss_weights`` sum), and the first step moving α by that learning rate in the direction
  of −∂L/∂α computed by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset

from sts_bsc import BscConfig, BscTrainer
from sts_core.encoder import SentenceEncoder
from sts_core.losses import build_loss
from sts_core.testing import embed_pairs, quick_training_args

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TRAIN = Path(__file__).parent / "fixtures" / "sts-train.csv"


def pairs() -> Dataset:
    """The 16 fixture pairs, scores scaled to [0, 1] (the paper's threshold 0.6 is on it)."""
    rows = [line.split("\t") for line in TRAIN.read_text(encoding="utf-8").splitlines()]
    return Dataset.from_dict(
        {
            "sentence1": [r[5] for r in rows],
            "sentence2": [r[6] for r in rows],
            "score": [float(r[4]) / 5 for r in rows],
        }
    )


def cosines(q: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``c_ij = cos(q_i, a_j)`` (§3.5's l2 normalisation: S·τ is the cosine)."""
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    return q @ a.T


def paper_bsc(
    q: np.ndarray, a: np.ndarray, tau: float, labels=None, threshold=None
) -> tuple[float, float]:
    """Eq. 1–2 with eq. 5's labelled negatives, float64, no repeated anchors:
    L0 = (1/m) Σ_i 1[y_i > t] (log Σ_j e^{S_ij} − S_ii), L1 the same over the columns."""
    s = cosines(q, a) / tau
    m = len(s)
    keep = np.ones(m) if threshold is None else (np.asarray(labels) > threshold).astype(float)
    l0 = sum(keep[i] * (np.log(np.exp(s[i]).sum()) - s[i, i]) for i in range(m)) / m
    l1 = sum(keep[i] * (np.log(np.exp(s[:, i]).sum()) - s[i, i]) for i in range(m)) / m
    return l0, l1


def paper_combo(q, a, labels, tau: float, mu: float, threshold: float) -> float:
    """Eq. 6: μ·(L0 + L1) + (1 − μ)·(1/m) Σ_i (cos(q_i, a_i) − y_i)²."""
    l0, l1 = paper_bsc(q, a, tau, labels, threshold)
    mse = np.mean((np.diag(cosines(q, a)) - np.asarray(labels)) ** 2)
    return mu * (l0 + l1) + (1 - mu) * mse


def paper_bsc_alpha_gradient(q: np.ndarray, a: np.ndarray, alpha: float) -> float:
    """∂(L0 + L1)/∂α for S = α·C (every row positive): each row's log-sum-exp gives its
    softmax-weighted mean cosine, each numerator −c_ii."""
    c = cosines(q, a)
    m = len(c)
    total = 0.0
    for i in range(m):
        for row in (c[i], c[:, i]):
            weights = np.exp(alpha * row - (alpha * row).max())
            total += (weights / weights.sum()) @ row - c[i, i]
    return total / m


def test_from_config_reads_the_temperature(tmp_path: Path) -> None:
    """τ = 0.05 (default 0.1), the combo and a threshold also off their defaults."""
    config = BscConfig(
        output_dir=str(tmp_path),
        bsc_temperature=0.05,
        mu=0.7,
        label_threshold=0.5,
        repeated_anchors=False,
    )
    rng = np.random.default_rng(7)
    q, a = rng.normal(size=(6, 5)), rng.normal(size=(6, 5))
    labels = np.array([0.9, 0.1, 0.7, 0.55, 0.3, 1.0])
    out = build_loss("bsc", config)(
        {"sentence1": torch.tensor(q), "sentence2": torch.tensor(a)}, torch.tensor(labels)
    )
    l0, l1 = paper_bsc(q, a, 0.05, labels, 0.5)
    assert float(out["bsc_l0"]) == pytest.approx(l0, rel=1e-10)
    assert float(out["bsc_l1"]) == pytest.approx(l1, rel=1e-10)
    assert float(out["loss"]) == pytest.approx(paper_combo(q, a, labels, 0.05, 0.7, 0.5), rel=1e-10)
    # the same loss at the default τ is far away: the check sees τ
    assert paper_combo(q, a, labels, 0.1, 0.7, 0.5) != pytest.approx(float(out["loss"]), rel=1e-2)


def test_the_trainers_loss_uses_the_configured_temperature(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """The trainer's loss on a batch of the 16 fixture pairs equals eq. 6 at τ = 0.05 on
    the model's own embeddings of those pairs."""
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = quick_training_args(
        BscConfig,
        tmp_path,
        bsc_temperature=0.05,
        mu=0.5,
        label_threshold=0.6,
        repeated_anchors=False,
        shuffle="original",
    )
    trainer = BscTrainer(encoder, args)
    data = pairs()
    u, v = (t.double().numpy() for t in embed_pairs(encoder, data))
    expected = paper_combo(u, v, data["score"], 0.05, 0.5, 0.6)
    batch = trainer.data_collator([data[i] for i in range(len(data))])
    with torch.no_grad():
        got = float(trainer.compute_loss(encoder, batch))
    assert got == pytest.approx(expected, rel=1e-5)
    assert paper_combo(u, v, data["score"], 0.1, 0.5, 0.6) != pytest.approx(got, rel=1e-2)


@pytest.mark.parametrize("weighted", [False, True], ids=["bsc", "loss_weights"])
def test_trainable_temperature_has_its_own_learning_rate_and_first_adamw_step(
    weighted: bool, tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """α = 1/τ (from τ = 0.1, so α = 10) is alone in a group with lr
    ``temperature_learning_rate`` = 0.05 (base lr 1e-3) and no weight decay (base 0.01);
    one step of AdamW then moves it by exactly that lr against the sign of ∂L/∂α: AdamW's
    first update is lr·m̂/(√v̂ + ε) = lr·g/(|g| + ε) (with g clipped or not)."""
    lr, temperature_lr = 1e-3, 0.05
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    data = pairs()
    u, v = (t.double().numpy() for t in embed_pairs(encoder, data))
    gradient = paper_bsc_alpha_gradient(u, v, 10.0)  # every row positive, mu = 1
    extra = {"loss_weights": {"bsc": 1.0, "cosine_mse": 0.3}} if weighted else {}
    args = quick_training_args(
        BscConfig,
        tmp_path,
        trainable_temperature=True,
        bsc_temperature=0.1,
        temperature_learning_rate=temperature_lr,
        learning_rate=lr,
        weight_decay=0.01,
        repeated_anchors=False,
        shuffle="original",
        per_device_train_batch_size=len(data),  # one batch: the whole set
        max_steps=1,
        **extra,
    )
    trainer = BscTrainer(encoder, args, train_dataset=data)
    bsc = trainer.loss_module.parts["bsc"] if weighted else trainer.loss_module
    alpha = bsc.inverse_temperature
    assert float(alpha.detach()) == pytest.approx(10.0)

    trainer.create_optimizer()
    groups = trainer.optimizer.param_groups
    (own,) = [g for g in groups if any(p is alpha for p in g["params"])]
    assert own["lr"] == temperature_lr and own["weight_decay"] == 0.0
    assert len(own["params"]) == 1  # the pattern takes α and nothing else
    assert all(g["lr"] == lr for g in groups if g is not own)  # and every other parameter

    trainer.train()
    step = 10.0 - float(alpha.detach())
    assert step == pytest.approx(temperature_lr * np.sign(gradient), rel=1e-5)
    assert float(bsc.current_temperature()) == pytest.approx(1 / (10.0 - step), rel=1e-6)
    (first,) = [e for e in trainer.state.log_history if "loss" in e]
    assert first["temperature" if not weighted else "bsc/temperature"] == pytest.approx(0.1)
