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

Pinned in the recipe: ``adam_epsilon`` 1e-3 (not 1e-8): the training forward packs the
sentences (``padding_free: auto`` on a CPU) and the package sums in another order, so a
gradient differs from the plain loop's by float32 rounding, which Adam's ``m / (√v + ε)``
amplifies up to ~lr for a gradient element near 0 when ε is tiny. Weight decay 0.1 so that
decaying the wrong parameters moves them by more than the tolerance.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

from sts_core.testing import (
    clipped_adamw_step,
    decays_like_transformers,
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

STEPS, BATCH = 2, 8
LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM = 1e-3, 0.1, 1.0
BETAS, EPS = (0.9, 0.999), 1e-3
TEMPERATURE, TEMPERATURE_RATE = 0.1, 0.05
MU, THRESHOLD, TOP_SCORE = 0.1, 0.6, 5.0


def run_main(model: Path, tmp_path: Path) -> tuple[list[dict], dict[str, torch.Tensor]]:
    """``main`` on the recipe; the step log lines and the saved weights (``backbone.*`` read
    with ``AutoModel``, ``alpha`` from the extra-weights file)."""
    output_dir = tmp_path / "out"
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml",
        "BSC combo, two batches in the file's order",
        model,
        TRAIN,
        DEV,
        output_dir,
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
        **optimizer_recipe(STEPS, BATCH, LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM, EPS),
    )
    assert main(["--config", str(recipe)]) == 0
    logged = step_log(output_dir, STEPS)
    saved = {
        f"backbone.{k}": v for k, v in AutoModel.from_pretrained(output_dir).state_dict().items()
    }
    (alpha,) = load_file(output_dir / "sts_extra_modules.safetensors").values()
    saved["alpha"] = alpha
    return logged, saved


def plain_loop(
    folder: Path,
    learning_rate: float = LEARNING_RATE,
    temperature_rate: float = TEMPERATURE_RATE,
    weight_decay: float = WEIGHT_DECAY,
    mu: float = MU,
    threshold: float = THRESHOLD,
):
    """The recipe in plain torch: each step's loss parts (``loss``, ``l0``, ``l1``, ``mse``,
    ``temperature``), pre-clipping gradient norms, and the final weights."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bert = AutoModel.from_pretrained(folder)
    bert.train()
    alpha = torch.nn.Parameter(torch.tensor(1 / TEMPERATURE))  # α = 1/τ
    first, second, scores = read_stsb_pairs(TRAIN)
    labels = scores / TOP_SCORE  # score_range [0, 5] → [0, 1]
    named = [(f"backbone.{n}", p) for n, p in bert.named_parameters()] + [("alpha", alpha)]
    moments = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in named}

    def mean_pooled(texts: list[str]) -> torch.Tensor:
        batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
        states = bert(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return (states * mask).sum(1) / mask.sum(1)

    steps, norms = [], []
    for step in range(1, STEPS + 1):
        rows = list(range((step - 1) * BATCH, step * BATCH))  # the file's order
        texts = [first[i] for i in rows]
        q = torch.nn.functional.normalize(mean_pooled(texts), dim=1)
        a = torch.nn.functional.normalize(mean_pooled([second[i] for i in rows]), dim=1)
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
        bert.zero_grad(set_to_none=True)
        alpha.grad = None
        loss.backward()
        schedule = (STEPS - (step - 1)) / STEPS  # linear decay, no warm-up
        norms.append(
            clipped_adamw_step(
                named,
                moments,
                step,
                learning_rate * schedule,
                weight_decay,
                MAX_GRAD_NORM,
                BETAS,
                EPS,
                decays=lambda name: decays_like_transformers(name) and name != "alpha",
                rate_factor=lambda name: temperature_rate / learning_rate if name == "alpha" else 1,
            )
        )
    state = {f"backbone.{n}": t for n, t in bert.state_dict().items()}
    state["alpha"] = alpha.detach()
    return steps, norms, state


def test_every_batch_has_an_anchor_with_a_positive_and_a_labelled_negative() -> None:
    first, _, scores = read_stsb_pairs(TRAIN)
    for step in range(STEPS):
        rows = range(step * BATCH, (step + 1) * BATCH)
        positive = {first[i] for i in rows if scores[i] / TOP_SCORE > THRESHOLD}
        negative = {first[i] for i in rows if scores[i] / TOP_SCORE <= THRESHOLD}
        assert positive & negative


def test_two_steps_of_main_equal_a_plain_torch_loop(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    logged, trained = run_main(tiny_bert_nodropout_dir, tmp_path)
    steps, norms, expected = plain_loop(tiny_bert_nodropout_dir)

    for name in ("loss", "bsc_l0", "bsc_l1", "mse", "temperature"):
        assert [e[name] for e in logged] == pytest.approx([s[name] for s in steps], rel=1e-5)
    assert [e["grad_norm"] for e in logged] == pytest.approx(norms, rel=1e-5)
    assert max(norms) > MAX_GRAD_NORM  # the clipping is exercised
    assert [e["learning_rate"] for e in logged] == pytest.approx([LEARNING_RATE, LEARNING_RATE / 2])
    assert set(trained) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(trained[name], value, rtol=1e-5, atol=1e-6, msg=name)
