"""Issue 31: two steps of ``train.py``'s ``main`` (a recipe on the fixture files, the tiny BERT
without dropout) equal an independent plain-torch loop of the same recipe, step for step:
the logged loss, gradient norm and learning rate of each step, and every weight of the saved
model (read back with ``AutoModel``).

The plain loop uses none of the package: ``transformers.AutoModel`` and ``AutoTokenizer`` on
the same folder, mean pooling with the attention mask by hand, CoSENT by its formula (eq. 10
of Huang et al. 2024: log(1 + Σ_{label_ij > label_kl} exp(λ (cos_kl − cos_ij))), λ = 20, on
the raw 0–5 scores), gradient clipping at the Trainer's default 1.0 (the first step's norm
is above it), and AdamW written out (β 0.9/0.999, weight decay except on biases and
LayerNorm weights, the learning rate decaying linearly from 1e-3 over the two steps, no
warm-up). The batch is the whole training file (16 pairs): the Trainer's shuffling changes
nothing the loss sees.

The optimizer settings (``adam_epsilon`` 1e-3, weight decay 0.1) are
``sts_core.testing.PlainLoop``'s, which says why they are pinned.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from sts_core.testing import PlainLoop, ValueCheck, mean_pooled, read_stsb_pairs

pytestmark = pytest.mark.usefixtures("torch_one_thread")

LOOP = PlainLoop(batch=16)  # the whole training file
CHECK = ValueCheck(__file__, LOOP)
SCALE = 20.0  # λ


def run_main(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``main`` on the recipe; the step log lines (loss, grad_norm, learning rate) and the
    saved model's weights."""
    logged, saved = CHECK.run_main(
        tmp_path,
        "CoSENT, two full-batch steps",
        model,
        loss="cosent",
        cosent_scale=str(SCALE),
        pooling="mean",
    )
    return logged, saved, None  # nothing drawn by the run itself


def plain_loop(folder: Path, start: None, scale: float = SCALE):
    """The recipe in plain torch: per-step losses, pre-clipping gradient norms, final state."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bert = AutoModel.from_pretrained(folder)
    bert.train()
    first, second, labels = read_stsb_pairs(CHECK.files.train)
    assert len(labels) == LOOP.batch
    optimizer = LOOP.optimizer([(f"backbone.{n}", p) for n, p in bert.named_parameters()])

    steps, norms = [], []
    for step in range(1, LOOP.steps + 1):
        u, v = mean_pooled(bert, tokenizer, first), mean_pooled(bert, tokenizer, second)
        cos = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))
        # term (a, b) for label_a > label_b: λ (cos_b − cos_a)
        ordered = labels[:, None] > labels[None, :]
        exponents = scale * (cos[None, :] - cos[:, None])
        loss = torch.log(1 + torch.exp(exponents[ordered]).sum())
        optimizer.zero_grad()
        loss.backward()
        steps.append({"loss": loss.item()})
        norms.append(optimizer.step(step))
    return steps, norms, {f"backbone.{n}": t for n, t in bert.state_dict().items()}


TestCoSENTValue = CHECK.test_class(run_main, plain_loop)
