"""Issue 31: two steps of ``train.py``'s ``main`` (a recipe on the fixture files, the tiny BERT
without dropout, a fresh regression head) equal an independent plain-torch loop of the same
recipe, step for step: the logged loss, gradient norm and learning rate of each step, every
backbone weight of the saved model (read back with ``AutoModel``) and the saved head.

The plain loop uses none of the package: ``transformers.AutoModel`` and ``AutoTokenizer`` on
the same folder, mean pooling with the attention mask by hand, an ``nn.Linear(3d, 1)`` over
``(u, v, |u − v|)`` starting from the weights the run's head had when training began (read
by a callback: the head is drawn when the trainer is built; its bias is lowered there so
that some first predictions are negative), negative predictions set to 0 (the authors'
clamp, ``clamp_predictions: low``), Smooth K2 by its formula (eq. 2 of Zhang and Li 2024:
k (x − x0)² for x = |prediction − label| ≥ x0, else 0; k 3, x0 0.2 as cpu_minilm_sts.yaml,
on the raw 0–5 scores), gradient clipping at 1.0, and AdamW written out with the authors'
layer-wise decay of the learning rate (``layer_lr_decay``: the top layer at the rate, layer
i of L at rate · decay^(L−1−i), embeddings and the head at the rate; 0.5 here so that it
shows), weight decay except on biases and LayerNorm weights, the rate decaying linearly over
the two steps, no warm-up. The batch is the whole training file (16 pairs).

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
from transformers import AutoModel, AutoTokenizer, TrainerCallback

from sts_core.testing import (
    clipped_adamw_step,
    load_train_script,
    optimizer_recipe,
    read_stsb_pairs,
    step_log,
    write_fixture_recipe,
)
from sts_core.training.run import TrainingRun

pytestmark = pytest.mark.usefixtures("torch_one_thread")

PACKAGE = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
TRAIN, DEV = FIXTURES / "sts-train.csv", FIXTURES / "sts-dev.csv"

main = load_train_script(PACKAGE).main

STEPS, PAIRS = 2, 16
LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM = 1e-3, 0.1, 1.0
BETAS, EPS = (0.9, 0.999), 1e-3
LAYER_DECAY = 0.5
K, X0 = 3.0, 0.2
#: taken off the fresh head's bias when training begins (in the run; the plain loop starts
#: from the weights after it): the tiny BERT's first predictions, 0.27 to 0.54, then lie on
#: both sides of 0, so the clamp of the negatives is exercised (asserted in the plain loop)
BIAS_SHIFT = 0.4


class HeadAtStart(TrainerCallback):
    """The regression head's weights when training begins (``regression.*`` of the model),
    its bias first lowered by ``BIAS_SHIFT``."""

    weights: dict[str, torch.Tensor] | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        with torch.no_grad():
            model.regression.bias -= BIAS_SHIFT
        self.weights = {
            name.removeprefix("regression."): p.detach().clone()
            for name, p in model.named_parameters()
            if name.startswith("regression.")
        }


def run_main(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``main`` on the recipe; the step log lines, the head's starting weights, the saved
    backbone (``AutoModel``) and the saved head (the extra-weights file)."""
    recorder = HeadAtStart()
    monkeypatch.setattr(TrainingRun, "build_callbacks", lambda self: [recorder])
    output_dir = tmp_path / "out"
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml",
        "Smooth K2 on a fresh regression head, two full-batch steps",
        model,
        TRAIN,
        DEV,
        output_dir,
        loss="smooth_k2",
        k=str(K),
        x0=str(X0),
        label_range="[0, 5]",
        clamp_predictions="low",
        pooling="mean",
        layer_lr_decay=str(LAYER_DECAY),
        **optimizer_recipe(STEPS, PAIRS, LEARNING_RATE, WEIGHT_DECAY, MAX_GRAD_NORM, EPS),
    )
    assert main(["--config", str(recipe)]) == 0
    logged = step_log(output_dir, STEPS)
    head = load_file(output_dir / "sts_extra_modules.safetensors")
    saved = {
        f"backbone.{k}": v for k, v in AutoModel.from_pretrained(output_dir).state_dict().items()
    }
    saved.update({f"head.{k.removeprefix('regression.')}": v for k, v in head.items()})
    assert recorder.weights is not None
    return logged, recorder.weights, saved


def plain_loop(
    folder: Path,
    head_start: dict[str, torch.Tensor],
    learning_rate: float = LEARNING_RATE,
    layer_decay: float = LAYER_DECAY,
    weight_decay: float = WEIGHT_DECAY,
    k: float = K,
    x0: float = X0,
) -> tuple[list[float], list[float], dict[str, torch.Tensor]]:
    """The recipe in plain torch: per-step losses, pre-clipping gradient norms, final state
    (``backbone.*`` and ``head.*``)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bert = AutoModel.from_pretrained(folder)
    bert.train()
    head = torch.nn.Linear(3 * bert.config.hidden_size, 1)
    head.load_state_dict(head_start)
    first, second, labels = read_stsb_pairs(TRAIN)
    assert len(labels) == PAIRS
    named = [(f"backbone.{n}", p) for n, p in bert.named_parameters()]
    named += [(f"head.{n}", p) for n, p in head.named_parameters()]
    moments = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in named}
    layers = bert.config.num_hidden_layers

    def rate_factor(name: str) -> float:
        parts = name.split(".")
        if parts[1:3] == ["encoder", "layer"]:
            return layer_decay ** (layers - 1 - int(parts[3]))
        return 1.0

    def mean_pooled(texts: list[str]) -> torch.Tensor:
        batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
        states = bert(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return (states * mask).sum(1) / mask.sum(1)

    losses, norms = [], []
    for step in range(1, STEPS + 1):
        u, v = mean_pooled(first), mean_pooled(second)
        prediction = head(torch.cat([u, v, (u - v).abs()], dim=-1)).reshape(-1)
        if step == 1:  # the clamp is exercised both ways
            assert (prediction < 0).any() and (prediction >= 0).any(), prediction
        prediction = prediction * (prediction >= 0)  # negatives to 0, without gradient
        x = (prediction - labels).abs()
        loss = torch.where(x >= x0, k * (x - x0) ** 2, torch.zeros_like(x)).mean()
        bert.zero_grad(set_to_none=True)
        head.zero_grad(set_to_none=True)
        loss.backward()
        losses.append(loss.item())
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
                rate_factor=rate_factor,
            )
        )
    state = {f"backbone.{n}": t for n, t in bert.state_dict().items()}
    state.update({f"head.{n}": t for n, t in head.state_dict().items()})
    return losses, norms, state


def test_two_steps_of_main_equal_a_plain_torch_loop(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logged, head_start, trained = run_main(tiny_bert_nodropout_dir, tmp_path, monkeypatch)
    losses, norms, expected = plain_loop(tiny_bert_nodropout_dir, head_start)

    assert [e["loss"] for e in logged] == pytest.approx(losses, rel=1e-5)
    assert [e["grad_norm"] for e in logged] == pytest.approx(norms, rel=1e-5)
    assert max(norms) > MAX_GRAD_NORM  # the clipping is exercised
    assert set(trained) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(trained[name], value, rtol=1e-5, atol=1e-6, msg=name)
