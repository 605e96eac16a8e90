"""Issue 31: two steps of ``train.py``'s ``main`` (a recipe on the fixture files, the tiny BERT
without dropout) equal an independent plain-torch loop of the same recipe, step for step: the
logged loss and its parts (L0, L1, MSE), gradient norm, learning rate and temperature of each
step, every weight of the saved model (read back with ``AutoModel``) and the trained α = 1/τ.

The recipe is the paper's STS-B combo (Chernyavskiy et al. 2022, eq. 6: μ·(L0 + L1) +
(1 − μ)·MSE, μ 0.1; l2 normalisation, τ 0.1 made trainable, α with its own learning rate
and no weight decay) on the fixture's 16 pairs, scores rescaled from 0–5 to 0–1
(``score_range``), in batches of 8 in the file's order (``shuffle: original``: rows 0–7 at
step 1, rows 8–15 at step 2; the batch construction is then the data's, not a random draw).
Every first sentence occurs twice in its batch, mostly once in a positive pair and once
in a labelled negative under the paper's ``label_threshold`` 0.6 (eq. 5: the negative stays
in the denominators, and out of its anchor's numerator, eq. 3); the pair scored 3.0 (0.6
after rescaling) is not a positive (label > t).

The plain loop uses none of the package: ``transformers.AutoModel`` and ``AutoTokenizer``,
mean pooling with the attention mask by hand, the loss by the paper's formulas (eq. 1–6)
with the anchors found by text equality, gradient clipping at 1.0, and AdamW written out
(β 0.9/0.999, weight decay except on biases, LayerNorm weights and α, the learning rates
decaying linearly over the two steps, no warm-up).

The optimizer settings (``adam_epsilon`` 1e-3, weight decay 0.1) are
``sts_core.testing.PlainLoop``'s, which says why they are pinned.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from sts_core.testing import (
    PlainLoop,
    ValueCheck,
    decays_like_transformers,
    mean_pooled,
    read_stsb_pairs,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

LOOP = PlainLoop(batch=8)
CHECK = ValueCheck(__file__, LOOP)
BATCH, STEPS = LOOP.batch, LOOP.steps
TEMPERATURE, TEMPERATURE_RATE = 0.1, 0.05
MU, THRESHOLD, TOP_SCORE = 0.1, 0.6, 5.0
ALPHA = "sts_loss.inverse_temperature"  # α in the saved extra weights


def run_main(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``main`` on the recipe; the step log lines and the saved weights (``backbone.*`` read
    with ``AutoModel``, α from the extra-weights file)."""
    logged, saved = CHECK.run_main(
        tmp_path,
        "BSC combo, two batches in the file's order",
        model,
        loss="bsc",
        score_range="[0, 5]",
        mu=str(MU),
        label_threshold=str(THRESHOLD),
        bsc_temperature=str(TEMPERATURE),
        trainable_temperature="true",
        temperature_learning_rate=str(TEMPERATURE_RATE),
        bsc_normalization="l2",
        bsc_symmetric="true",
        repeated_anchors="true",
        shuffle="original",
        pooling="mean",
    )
    return logged, saved, None  # nothing drawn by the run itself


def plain_loop(
    folder: Path,
    start: None,
    temperature_rate: float = TEMPERATURE_RATE,
    mu: float = MU,
    threshold: float = THRESHOLD,
):
    """The recipe in plain torch: each step's loss parts (``loss``, ``l0``, ``l1``, ``mse``,
    ``temperature``), pre-clipping gradient norms, and the final weights."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bert = AutoModel.from_pretrained(folder)
    bert.train()
    alpha = torch.nn.Parameter(torch.tensor(1 / TEMPERATURE))  # α = 1/τ
    first, second, scores = read_stsb_pairs(CHECK.files.train)
    labels = scores / TOP_SCORE  # score_range [0, 5] → [0, 1]
    named = [(f"backbone.{n}", p) for n, p in bert.named_parameters()] + [(ALPHA, alpha)]
    optimizer = LOOP.optimizer(
        named,
        decays=lambda name: decays_like_transformers(name) and name != ALPHA,
        rate_factor=lambda name: temperature_rate / LOOP.learning_rate if name == ALPHA else 1,
    )

    steps, norms = [], []
    for step in range(1, STEPS + 1):
        rows = list(range((step - 1) * BATCH, step * BATCH))  # the file's order
        texts = [first[i] for i in rows]
        q = torch.nn.functional.normalize(mean_pooled(bert, tokenizer, texts), dim=1)
        a = mean_pooled(bert, tokenizer, [second[i] for i in rows])
        a = torch.nn.functional.normalize(a, dim=1)
        y = labels[rows]
        positive = (y > threshold).float()
        m = len(rows)
        dots = q @ a.T  # dots[i, j] = q_iᵀ a_j
        # eq. 3 (labeled negatives out): q_i against the answers of its anchor's positive rows
        same = torch.tensor([[texts[i] == texts[j] for j in range(m)] for i in range(m)])
        numerator_weights = same.float() * positive[None, :]
        numerator0 = (dots * numerator_weights).sum(1) / numerator_weights.sum(1).clamp(min=1)
        # eq. 5 with eq. 2 (L0) and its transpose (L1; eq. 4: its numerator is q_iᵀ a_i)
        l0 = (positive * (torch.log(torch.exp(alpha * dots).sum(1)) - alpha * numerator0)).sum() / m
        l1 = (
            positive * (torch.log(torch.exp(alpha * dots).sum(0)) - alpha * dots.diag())
        ).sum() / m
        mse = ((dots.diag() - y) ** 2).mean()
        loss = mu * (l0 + l1) + (1 - mu) * mse  # eq. 6
        parts = {"loss": loss, "bsc_l0": l0, "bsc_l1": l1, "mse": mse, "temperature": 1 / alpha}
        steps.append({k: v.item() for k, v in parts.items()})
        optimizer.zero_grad()
        loss.backward()
        norms.append(optimizer.step(step))
    state = {f"backbone.{n}": t for n, t in bert.state_dict().items()}
    state[ALPHA] = alpha.detach()
    return steps, norms, state


def test_every_batch_has_an_anchor_with_a_positive_and_a_labelled_negative() -> None:
    first, _, scores = read_stsb_pairs(CHECK.files.train)
    for step in range(STEPS):
        rows = range(step * BATCH, (step + 1) * BATCH)
        positive = {first[i] for i in rows if scores[i] / TOP_SCORE > THRESHOLD}
        negative = {first[i] for i in rows if scores[i] / TOP_SCORE <= THRESHOLD}
        assert positive & negative


TestBscValue = CHECK.test_class(run_main, plain_loop)
