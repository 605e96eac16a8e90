"""Issue 31: two steps of ``train.py``'s ``main`` with Pcc-tuning's stage-2 recipe (1 − Pearson,
eq. 9) on the fixture files equal an independent plain-torch loop of the same recipe, step
for step: the logged loss, gradient norm and learning rate of each step, and every weight
of the saved model (read back with ``AutoModel``).

The recipe is the decoder one of the CPU and paper recipes (cpu_smollm2_stage2_sts.yaml,
llama2_stage2_sts.yaml) without LoRA: the tiny Llama decoder (no dropout; its weights
scaled so that its cosines differ from pair to pair, ``WEIGHT_SCALE``), the PromptSTH
template (``This sentence : "[X]" means something``, the paper's Figure 2), the last
token's state, left padding, the Pearson correlation over the batch gathered across
processes (one process here), gradient caching (``gradient_cache_batch_size`` 8: two
mini-batches of the batch of 16, whose gradient must be the whole batch's), the raw 0–5
scores (Pearson does not depend on their scale).

The plain loop uses none of the package: ``transformers.AutoModel`` and ``AutoTokenizer``
(the EOS as pad token, padding on the left), the template filled in by hand, the last
position's hidden state, r = cov(X, Y) / (σ_X σ_Y) of the cosines X and the scores Y and
the loss 1 − r by the paper's formula, gradient clipping at 1.0, and AdamW written out
(β 0.9/0.999, weight decay except on the RMSNorm weights, the rate decaying linearly from
1e-3 over the two steps, no warm-up) on the whole batch at once.

Pinned in the recipe: ``adam_epsilon`` 1e-3 (not 1e-8): the package sums in another order
(and embeds the batch twice, in mini-batches), so a gradient differs from the plain loop's
by float32 rounding, which Adam's ``m / (√v + ε)`` amplifies up to ~lr for a gradient
element near 0 when ε is tiny. Weight decay 0.1 so that decaying the wrong parameters moves
them by more than the tolerance.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

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

STEPS, PAIRS, MINI_BATCH = 2, 16, 8
LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM = 1e-3, 0.1, 1.0
BETAS, EPS = (0.9, 0.999), 1e-3
TEMPLATE = 'This sentence : "{}" means something'  # PromptSTH
#: the tiny Llama's attention and MLP weights (``*_proj``) are scaled by this: its last-token
#: states are otherwise nearly the template's last token alone (cosines 0.979 to 0.998,
#: std 0.005), and a float32 Pearson of such cosines is good to ~1e-5 only; scaled, the
#: cosines spread from 0.62 to 0.97 (std 0.11)
WEIGHT_SCALE = 5.0


@pytest.fixture(scope="module")
def llama_dir(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama (no dropout) with its ``*_proj`` weights times ``WEIGHT_SCALE``."""
    config = AutoConfig.from_pretrained(tiny_llama_dir)
    assert config.model_type == "llama" and config.attention_dropout == 0  # deterministic
    folder = tmp_path_factory.mktemp("llama-scaled")
    decoder = AutoModel.from_pretrained(tiny_llama_dir)
    with torch.no_grad():
        for name, parameter in decoder.named_parameters():
            if name.endswith("_proj.weight"):
                parameter.mul_(WEIGHT_SCALE)
    decoder.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_llama_dir).save_pretrained(folder)
    return folder


def run_main(model: Path, tmp_path: Path) -> tuple[list[dict], dict[str, torch.Tensor]]:
    """``main`` on the recipe; the step log lines and the saved model's weights."""
    output_dir = tmp_path / "out"
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml",
        "Pcc-tuning stage 2 on a decoder, two full-batch steps",
        model,
        TRAIN,
        DEV,
        output_dir,
        loss="pearson",
        prompt="promptsth",
        pooling="last_token",
        padding_side="left",
        gather_across_processes="true",
        gradient_cache_batch_size=str(MINI_BATCH),
        **optimizer_recipe(STEPS, PAIRS, LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM, EPS),
    )
    assert main(["--config", str(recipe)]) == 0
    logged = step_log(output_dir, STEPS)
    return logged, AutoModel.from_pretrained(output_dir).state_dict()


def plain_loop(
    folder: Path,
    learning_rate: float = LEARNING_RATE,
    weight_decay: float = WEIGHT_DECAY,
    template: str = TEMPLATE,
) -> tuple[list[float], list[float], dict[str, torch.Tensor]]:
    """The recipe in plain torch: per-step losses, pre-clipping gradient norms, final state."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.pad_token, tokenizer.padding_side = tokenizer.eos_token, "left"
    decoder = AutoModel.from_pretrained(folder)
    decoder.train()
    first, second, scores = read_stsb_pairs(TRAIN)
    assert len(scores) == PAIRS
    named = list(decoder.named_parameters())
    moments = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in named}

    def last_token(texts: list[str]) -> torch.Tensor:
        prompted = [template.format(text) for text in texts]
        batch = tokenizer(prompted, padding=True, truncation=True, return_tensors="pt")
        return decoder(**batch).last_hidden_state[:, -1]  # left padding: the last column

    losses, norms = [], []
    for step in range(1, STEPS + 1):
        u, v = last_token(first), last_token(second)
        x = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))  # cosines X
        y = scores
        covariance = ((x - x.mean()) * (y - y.mean())).mean()
        r = covariance / (x.std(correction=0) * y.std(correction=0))  # eq. 9
        loss = 1 - r
        decoder.zero_grad(set_to_none=True)
        loss.backward()
        losses.append(loss.item())
        rate = learning_rate * (STEPS - (step - 1)) / STEPS  # linear decay, no warm-up
        norms.append(
            clipped_adamw_step(
                named,
                moments,
                step,
                rate,
                weight_decay,
                MAX_GRAD_NORM,
                BETAS,
                EPS,
                decays=lambda name: not (name.endswith("bias") or "norm" in name),  # RMSNorm
            )
        )
    return losses, norms, decoder.state_dict()


def test_two_steps_of_main_equal_a_plain_torch_loop(llama_dir: Path, tmp_path: Path) -> None:
    logged, trained = run_main(llama_dir, tmp_path)
    losses, norms, expected = plain_loop(llama_dir)

    assert [e["loss"] for e in logged] == pytest.approx(losses, rel=1e-5)
    assert [e["grad_norm"] for e in logged] == pytest.approx(norms, rel=1e-5)
    assert max(norms) > MAX_GRAD_NORM  # the clipping is exercised
    assert [e["learning_rate"] for e in logged] == pytest.approx([LEARNING_RATE, LEARNING_RATE / 2])
    assert set(trained) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(trained[name], value, rtol=1e-5, atol=1e-6, msg=name)
