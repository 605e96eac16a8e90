"""Issue 31: Pcc-tuning's losses as the trainer runs them, against values computed here from
the paper (Zhang and Li, EMNLP 2024) on the model's own embeddings:

* stage 2 (eq. 9): the first step's logged loss is 1 − r, the sample Pearson correlation
  of the initial model's cosines with the gold scores (one batch of every pair, so the
  data order does not matter), and ``train_loss`` the mean of the steps' losses;
* stage 1 (eq. 8): ``infonce_temperature`` off its default, the hard negatives in every
  denominator; ``positive_threshold`` keeping only the pairs at or above it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset

from sts_core.encoder import SentenceEncoder
from sts_core.testing import embed_pairs, quick_training_args, trainer_step_losses
from sts_core.training import BaseTrainer
from sts_pcctuning import PccConfig

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TRAIN = Path(__file__).parent / "fixtures" / "sts-train.csv"  # STS-B layout, scores 0–5


def scored_pairs() -> Dataset:
    rows = [line.split("\t") for line in TRAIN.read_text(encoding="utf-8").splitlines()]
    return Dataset.from_dict(
        {
            "sentence1": [r[5] for r in rows],
            "sentence2": [r[6] for r in rows],
            "score": [float(r[4]) for r in rows],
        }
    )


def triplets() -> Dataset:
    return Dataset.from_dict(
        {
            "sentence1": ["a man plays a guitar", "a dog runs in the park", "two boys play soccer"],
            "sentence2": ["a man plays music", "a dog is running", "children are playing soccer"],
            "hard_negative": ["a woman eats food", "a cat sits on the car", "a girl rides a bike"],
            "score": [4.5, 2.0, 3.5],
        }
    )


def numpy_cosines(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``cos(x_i, y_j)`` for every i, j."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    y = y / np.linalg.norm(y, axis=1, keepdims=True)
    return x @ y.T


def one_minus_pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Eq. 9: 1 − Σ(x − x̄)(y − ȳ) / √(Σ(x − x̄)² Σ(y − ȳ)²)."""
    xc, yc = x - x.mean(), y - y.mean()
    return float(1 - (xc @ yc) / np.sqrt((xc @ xc) * (yc @ yc)))


def eq_8(a: np.ndarray, p: np.ndarray, n: np.ndarray | None, tau: float) -> float:
    """−(1/N) Σ_i log e^{cos(a_i,p_i)/τ} / Σ_j (e^{cos(a_i,p_j)/τ} + e^{cos(a_i,n_j)/τ})."""
    positive = numpy_cosines(a, p) / tau
    negative = np.zeros((len(a), 0)) if n is None else numpy_cosines(a, n) / tau
    rows = np.concatenate([positive, negative], axis=1)
    return float(np.mean(np.log(np.exp(rows).sum(1)) - np.diag(positive)))


def test_stage_two_logs_one_minus_pearson_of_the_initial_model(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    data = scored_pairs()
    u, v = (t.double().numpy() for t in embed_pairs(encoder, data))
    cosine = np.diag(numpy_cosines(u, v))
    expected = one_minus_pearson(cosine, np.array(data["score"]))
    args = quick_training_args(
        PccConfig,
        tmp_path,
        loss="pearson",
        per_device_train_batch_size=len(data),  # one batch of every pair: no order
        max_steps=2,
        learning_rate=1e-2,
    )
    trainer = BaseTrainer(encoder, args, train_dataset=data)
    output = trainer.train()
    losses = trainer_step_losses(trainer)
    assert losses[1] == pytest.approx(expected, rel=1e-5)
    # the correlation with Bessel's correction in one of the two places is another number
    assert losses[1] != pytest.approx(1 - (1 - expected) * 15 / 16, rel=1e-3)
    assert losses[2] < losses[1]  # the step moved the model (lr 1e-2)
    assert output.training_loss == pytest.approx((losses[1] + losses[2]) / 2, rel=1e-6)


def test_stage_one_reads_the_temperature_with_the_hard_negatives(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """τ = 0.1 (default 0.05); every hard negative in every row's denominator."""
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    data = triplets()
    args = quick_training_args(PccConfig, tmp_path, loss="infonce", infonce_temperature=0.1)
    trainer = BaseTrainer(encoder, args)
    a, p, n = (embedded(encoder, data[c]) for c in ("sentence1", "sentence2", "hard_negative"))
    batch = trainer.data_collator([data[i] for i in range(len(data))])
    with torch.no_grad():
        got = float(trainer.compute_loss(encoder, batch))
    assert got == pytest.approx(eq_8(a, p, n, 0.1), rel=1e-5)
    assert eq_8(a, p, n, 0.05) != pytest.approx(got, rel=1e-3)  # the default τ: 0.8 % off


def test_stage_one_positive_threshold_keeps_the_pairs_at_or_above_it(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """positive_threshold 3.5: rows 0 and 2 (4.5, 3.5 ≥ 3.5) are the batch of eq. 8, the
    1st row (2.0) is out, its hard negative too."""
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    data = triplets()
    args = quick_training_args(
        PccConfig, tmp_path, loss="infonce", infonce_temperature=0.1, positive_threshold=3.5
    )
    trainer = BaseTrainer(encoder, args)
    a, p, n = (embedded(encoder, data[c]) for c in ("sentence1", "sentence2", "hard_negative"))
    batch = trainer.data_collator([data[i] for i in range(len(data))])
    with torch.no_grad():
        got = float(trainer.compute_loss(encoder, batch))
    kept = [0, 2]
    assert got == pytest.approx(eq_8(a[kept], p[kept], n[kept], 0.1), rel=1e-5)
    assert eq_8(a, p, n, 0.1) != pytest.approx(got, rel=1e-3)


def embedded(encoder: SentenceEncoder, texts: list[str]) -> np.ndarray:
    encoder.eval()
    with torch.no_grad():
        return encoder(**encoder.tokenize(list(texts))).double().numpy()
