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

Pinned in the recipe: ``adam_epsilon`` 1e-3, not 1e-8. The training forward packs the
sentences (``padding_free: auto`` on a CPU) and the package sums the loss in another order,
so a gradient differs from the plain loop's by float32 rounding (~1e-9 absolute); for a
gradient element near 0, Adam's ``m / (√v + ε)`` turns that into a weight difference of up
to ~lr (measured: 1e-4 with ε 1e-8, still 1.2× the tolerance with ε 1e-5). With ε 1e-3 the
worst weight is at 0.1 of the tolerance. Weight decay 0.1 (not 0.01) so that decaying the
wrong parameters moves them by more than the tolerance.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from sts_core.testing import (
    clipped_adamw_step,
    load_train_script,
    optimizer_recipe,
    read_stsb_pairs,
    step_log,
    write_fixture_recipe,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

PACKAGE = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
TRAIN, DEV = FIXTURES / "sts-train.csv", FIXTURES / "sts-dev.csv"

main = load_train_script(PACKAGE).main

STEPS, PAIRS = 2, 16
LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM = 1e-3, 0.1, 1.0
BETAS, EPS = (0.9, 0.999), 1e-3
SCALE = 20.0  # λ


def run_main(model: Path, tmp_path: Path) -> tuple[list[dict], dict[str, torch.Tensor]]:
    """``main`` on the recipe; the step log lines (loss, grad_norm, learning rate) and the
    saved model's weights, read back with ``AutoModel``."""
    output_dir = tmp_path / "out"
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml",
        "CoSENT, two full-batch steps",
        model,
        TRAIN,
        DEV,
        output_dir,
        loss="cosent",
        cosent_scale=str(SCALE),
        pooling="mean",
        **optimizer_recipe(STEPS, PAIRS, LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM, EPS),
    )
    assert main(["--config", str(recipe)]) == 0
    logged = step_log(output_dir, STEPS)
    return logged, AutoModel.from_pretrained(output_dir).state_dict()


def plain_loop(
    folder: Path,
    learning_rate: float = LEARNING_RATE,
    weight_decay: float = WEIGHT_DECAY,
    eps: float = EPS,
    scale: float = SCALE,
) -> tuple[list[float], list[float], dict[str, torch.Tensor]]:
    """The recipe in plain torch: per-step losses, pre-clipping gradient norms, final state."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bert = AutoModel.from_pretrained(folder)
    bert.train()
    first, second, labels = read_stsb_pairs(TRAIN)
    assert len(labels) == PAIRS
    named = list(bert.named_parameters())
    moments = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in named}

    def mean_pooled(texts: list[str]) -> torch.Tensor:
        batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
        states = bert(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return (states * mask).sum(1) / mask.sum(1)

    losses, norms = [], []
    for step in range(1, STEPS + 1):
        u, v = mean_pooled(first), mean_pooled(second)
        cos = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))
        # term (a, b) for label_a > label_b: λ (cos_b − cos_a)
        ordered = labels[:, None] > labels[None, :]
        exponents = scale * (cos[None, :] - cos[:, None])
        loss = torch.log(1 + torch.exp(exponents[ordered]).sum())
        bert.zero_grad(set_to_none=True)
        loss.backward()
        losses.append(loss.item())
        rate = learning_rate * (STEPS - (step - 1)) / STEPS  # linear decay, no warm-up
        norms.append(
            clipped_adamw_step(named, moments, step, rate, weight_decay, MAX_GRAD_NORM, BETAS, eps)
        )
    return losses, norms, bert.state_dict()


def test_two_steps_of_main_equal_a_plain_torch_loop(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    logged, trained = run_main(tiny_bert_nodropout_dir, tmp_path)
    losses, norms, expected = plain_loop(tiny_bert_nodropout_dir)

    assert [e["loss"] for e in logged] == pytest.approx(losses, rel=1e-5)
    assert [e["grad_norm"] for e in logged] == pytest.approx(norms, rel=1e-5)
    assert max(norms) > MAX_GRAD_NORM  # the clipping is exercised
    assert [e["learning_rate"] for e in logged] == pytest.approx(
        [LEARNING_RATE, LEARNING_RATE / 2]
    )  # the rate of each step
    assert set(trained) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(trained[name], value, rtol=1e-5, atol=1e-6, msg=name)
