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

The optimizer settings (``adam_epsilon`` 1e-3, weight decay 0.1) are
``sts_core.testing.PlainLoop``'s, which says why they are pinned.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoTokenizer, TrainerCallback

from sts_core.testing import PlainLoop, ValueCheck, mean_pooled, read_stsb_pairs
from sts_core.training.run import TrainingRun

pytestmark = pytest.mark.usefixtures("torch_one_thread")

LOOP = PlainLoop(batch=16)  # the whole training file
CHECK = ValueCheck(__file__, LOOP)
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
    """``main`` on the recipe; the step log lines, the saved weights (the backbone read with
    ``AutoModel``, the head from the extra-weights file) and the head's starting weights."""
    recorder = HeadAtStart()
    monkeypatch.setattr(TrainingRun, "build_callbacks", lambda self: [recorder])
    logged, saved = CHECK.run_main(
        tmp_path,
        "Smooth K2 on a fresh regression head, two full-batch steps",
        model,
        loss="smooth_k2",
        k=str(K),
        x0=str(X0),
        label_range="[0, 5]",
        clamp_predictions="low",
        pooling="mean",
        layer_lr_decay=str(LAYER_DECAY),
    )
    assert recorder.weights is not None
    return logged, saved, recorder.weights


def plain_loop(
    folder: Path,
    head_start: dict[str, torch.Tensor],
    layer_decay: float = LAYER_DECAY,
    k: float = K,
    x0: float = X0,
):
    """The recipe in plain torch: per-step losses, pre-clipping gradient norms, final state
    (``backbone.*`` and the head, ``regression.*``)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bert = AutoModel.from_pretrained(folder)
    bert.train()
    head = torch.nn.Linear(3 * bert.config.hidden_size, 1)
    head.load_state_dict(head_start)
    first, second, labels = read_stsb_pairs(CHECK.files.train)
    assert len(labels) == LOOP.batch
    named = [(f"backbone.{n}", p) for n, p in bert.named_parameters()]
    named += [(f"regression.{n}", p) for n, p in head.named_parameters()]
    layers = bert.config.num_hidden_layers

    def rate_factor(name: str) -> float:
        parts = name.split(".")
        if parts[1:3] == ["encoder", "layer"]:
            return layer_decay ** (layers - 1 - int(parts[3]))
        return 1.0

    optimizer = LOOP.optimizer(named, rate_factor=rate_factor)
    steps, norms = [], []
    for step in range(1, LOOP.steps + 1):
        u, v = mean_pooled(bert, tokenizer, first), mean_pooled(bert, tokenizer, second)
        prediction = head(torch.cat([u, v, (u - v).abs()], dim=-1)).reshape(-1)
        if step == 1:  # the clamp is exercised both ways
            assert (prediction < 0).any() and (prediction >= 0).any(), prediction
        prediction = prediction * (prediction >= 0)  # negatives to 0, without gradient
        x = (prediction - labels).abs()
        loss = torch.where(x >= x0, k * (x - x0) ** 2, torch.zeros_like(x)).mean()
        optimizer.zero_grad()
        loss.backward()
        steps.append({"loss": loss.item()})
        norms.append(optimizer.step(step))
    state = {f"backbone.{n}": t for n, t in bert.state_dict().items()}
    state.update({f"regression.{n}": t for n, t in head.state_dict().items()})
    return steps, norms, state


# the log shows one parameter group's rate (the layer-wise decay makes several)
TestSmoothK2Value = CHECK.test_class(run_main, plain_loop, learning_rates=False)
