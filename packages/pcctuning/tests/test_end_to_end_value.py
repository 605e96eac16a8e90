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

The optimizer settings (``adam_epsilon`` 1e-3, weight decay 0.1) are
``sts_core.testing.PlainLoop``'s, which says why they are pinned (here the package also
embeds the batch twice, in mini-batches).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from sts_core.testing import PlainLoop, ValueCheck, read_stsb_pairs

pytestmark = pytest.mark.usefixtures("torch_one_thread")

LOOP = PlainLoop(batch=16)  # the whole training file
CHECK = ValueCheck(__file__, LOOP)
MINI_BATCH = 8
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


def run_main(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``main`` on the recipe; the step log lines and the saved model's weights."""
    logged, saved = CHECK.run_main(
        tmp_path,
        "Pcc-tuning stage 2 on a decoder, two full-batch steps",
        model,
        loss="pearson",
        prompt="promptsth",
        pooling="last_token",
        padding_side="left",
        gather_across_processes="true",
        gradient_cache_batch_size=str(MINI_BATCH),
    )
    return logged, saved, None  # nothing drawn by the run itself


def plain_loop(folder: Path, start: None, template: str = TEMPLATE):
    """The recipe in plain torch: per-step losses, pre-clipping gradient norms, final state."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.pad_token, tokenizer.padding_side = tokenizer.eos_token, "left"
    decoder = AutoModel.from_pretrained(folder)
    decoder.train()
    first, second, scores = read_stsb_pairs(CHECK.files.train)
    assert len(scores) == LOOP.batch
    optimizer = LOOP.optimizer(
        [(f"backbone.{n}", p) for n, p in decoder.named_parameters()],
        decays=lambda name: not (name.endswith("bias") or "norm" in name),  # RMSNorm
    )

    def last_token(texts: list[str]) -> torch.Tensor:
        prompted = [template.format(text) for text in texts]
        batch = tokenizer(prompted, padding=True, truncation=True, return_tensors="pt")
        return decoder(**batch).last_hidden_state[:, -1]  # left padding: the last column

    steps, norms = [], []
    for step in range(1, LOOP.steps + 1):
        u, v = last_token(first), last_token(second)
        x = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))  # cosines X
        y = scores
        covariance = ((x - x.mean()) * (y - y.mean())).mean()
        r = covariance / (x.std(correction=0) * y.std(correction=0))  # eq. 9
        loss = 1 - r
        optimizer.zero_grad()
        loss.backward()
        steps.append({"loss": loss.item()})
        norms.append(optimizer.step(step))
    return steps, norms, {f"backbone.{n}": t for n, t in decoder.state_dict().items()}


TestPearsonValue = CHECK.test_class(run_main, plain_loop, model_fixture="llama_dir")
