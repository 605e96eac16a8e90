"""Issue 31: the "stage 2 alone, a new head" row against an independent plain-torch loop.

all-MiniLM-L6-v2's folder records L2 normalisation (sentence-transformers' ``Normalize``),
so the encoder's forward gave the regression head unit vectors, where the paper's Figure 1
and the authors' code feed it the mean-pooled ones. A head over unit vectors cannot reach
the 0–5 labels at the encoder's learning rate, and the encoder collapsed to lower the loss
(seven-task average 29.4, where the issue's plain loop gave 65.3; seed 0 once fixed: 69.97,
a plain loop of the same settings 69.09). Here, on a tiny BERT loaded with
``normalize=True``: the trainer's per-step losses and weights equal those of a plain loop
over the mean-pooled embeddings (mean pooling, a ``Linear(3d, 1)`` over (u, v, |u − v|),
negatives set to 0, Smooth K2, AdamW), the regression head's dev scores read the same
embeddings, and everything else (``encode``, the saved folder) keeps the normalisation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset
from scipy.stats import pearsonr, spearmanr
from transformers import AutoModel, AutoTokenizer

from sts_core.encoder import SentenceEncoder
from sts_core.testing import TOY_STS_PAIRS, quick_training_args, trainer_step_losses
from sts_core.training import BaseTrainer
from sts_regression import METHOD, RegressionConfig, RegressionTrainer

pytestmark = pytest.mark.usefixtures("torch_one_thread")

ROWS = TOY_STS_PAIRS
STEPS = 3
LEARNING_RATE = 1e-3
K, X0 = 3.0, 0.2
#: the fresh head's bias, set in both runs: predictions start above 0, so the clamp of the
#: negatives does not hide the head's input from the loss (nn.Linear's own bias is ~0)
START_BIAS = 2.5


def dataset() -> Dataset:
    columns = list(zip(*ROWS, strict=True))
    return Dataset.from_dict(
        {"sentence1": list(columns[0]), "sentence2": list(columns[1]), "score": list(columns[2])}
    )


def fresh_head_at(trainer: BaseTrainer) -> dict[str, torch.Tensor]:
    """The trainer's new regression head with its bias at ``START_BIAS``; its weights."""
    head = trainer.model.heads["regression"]
    with torch.no_grad():
        head.bias.fill_(START_BIAS)
    return {k: v.detach().clone() for k, v in head.state_dict().items()}


def normalizing_encoder(folder: Path) -> SentenceEncoder:
    """The tiny BERT as all-MiniLM-L6-v2 loads: mean pooling, then L2 normalisation (padded
    forward, as the plain loop runs it)."""
    encoder = SentenceEncoder.from_pretrained(folder, normalize=True, padding_free=False)
    assert encoder.normalize and encoder.pooling == "mean"
    return encoder


def stage_two_args(output_dir: Path, **overrides) -> RegressionConfig:
    """cpu_minilm_sts.yaml's loss settings; one batch of every row, constant learning rate
    (the plain loop needs no schedule), clipping at the Trainer's default 1.0."""
    settings = {
        "loss": "smooth_k2",
        "k": K,
        "x0": X0,
        "clamp_predictions": "low",
        "label_range": [0.0, 5.0],
        "per_device_train_batch_size": len(ROWS),
        "max_steps": STEPS,
        "learning_rate": LEARNING_RATE,
        "lr_scheduler_type": "constant",
        "weight_decay": 0.01,
        "max_grad_norm": 1.0,
        **overrides,
    }
    return quick_training_args(RegressionConfig, output_dir, **settings)


def plain_loop(folder: Path, head_state: dict[str, torch.Tensor]) -> tuple[list[float], dict]:
    """The recipe in plain torch: AutoModel, mean pooling (no normalisation), a Linear(3d, 1)
    head from ``head_state``, negatives set to 0, Smooth K2, AdamW (weight decay 0.01 except
    biases and LayerNorm), clipping 1.0. Returns the per-step losses and the final weights
    (named as the encoder's parameters)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bert = AutoModel.from_pretrained(folder)
    head = torch.nn.Linear(3 * bert.config.hidden_size, 1)
    head.load_state_dict(head_state)
    bert.train()
    named = [(f"backbone.{n}", p) for n, p in bert.named_parameters()]
    named += [(f"regression.{n}", p) for n, p in head.named_parameters()]
    no_decay = [p for n, p in named if n.endswith("bias") or "LayerNorm" in n]
    decay = [p for n, p in named if not (n.endswith("bias") or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LEARNING_RATE,
    )

    def mean_pooled(texts: list[str]) -> torch.Tensor:
        batch = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
        states = bert(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
        return (states * mask).sum(1) / mask.sum(1)

    labels = torch.tensor([r[2] for r in ROWS])
    losses = []
    for _ in range(STEPS):
        u = mean_pooled([r[0] for r in ROWS])
        v = mean_pooled([r[1] for r in ROWS])
        prediction = head(torch.cat([u, v, (u - v).abs()], dim=-1)).reshape(-1)
        prediction = prediction * (prediction >= 0).to(prediction.dtype)  # the authors' clamp
        x = (prediction - labels).abs()
        loss = (K * (x - X0).clamp(min=0).pow(2)).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in named], 1.0)
        optimizer.step()
        losses.append(loss.item())
    return losses, {n: p.detach().clone() for n, p in named}


def test_stage_two_with_a_normalizing_encoder_equals_a_plain_loop_step_for_step(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    encoder = normalizing_encoder(tiny_bert_nodropout_dir)
    trainer = RegressionTrainer(
        model=encoder, args=stage_two_args(tmp_path), train_dataset=dataset()
    )
    assert trainer.loss_module.head is encoder.heads["regression"]
    initial_head = fresh_head_at(trainer)
    initial = {name: p.detach().clone() for name, p in encoder.named_parameters()}

    trainer.train()

    logged = trainer_step_losses(trainer)
    expected, weights = plain_loop(tiny_bert_nodropout_dir, initial_head)
    assert [logged[step] for step in range(1, STEPS + 1)] == pytest.approx(expected, rel=1e-5)
    trained = {name: p.detach() for name, p in encoder.named_parameters()}
    assert set(weights) == set(trained)
    # each tensor's update over the steps, the trainer's against the loop's: equal up to
    # float noise (the Trainer shuffles the rows of the batch, so sums run in another
    # order). The attention keys' bias is left out: the softmax ignores it, so its exact
    # gradient is 0 and AdamW scales float noise alone into its steps.
    errors = {}
    for name, value in weights.items():
        if name.endswith("attention.self.key.bias"):
            continue
        start = initial[name]
        ours, theirs = trained[name] - start, value - start
        error = torch.linalg.vector_norm(ours - theirs).item()
        errors[name] = error / (torch.linalg.vector_norm(theirs).item() + 1e-2 * LEARNING_RATE)
    assert max(errors.values()) < 1e-4, sorted(errors.items(), key=lambda kv: -kv[1])[:3]


@pytest.mark.parametrize(
    ("trainer_class", "weight"), [(RegressionTrainer, None), (BaseTrainer, 2.0)]
)
def test_the_head_starts_from_the_pooled_not_the_unit_vectors(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, trainer_class: type, weight: float | None
) -> None:
    """The first step's loss is the head's on the mean-pooled embeddings, and differs from
    its loss on the unit vectors (what the trainer computed before the fix). Also for
    ``loss_weights: {smooth_k2: 2}`` under the core's trainer, as another method combining
    the loss gets it: the loss itself asks for the pooled embeddings (``reads_pooled``)."""
    torch.manual_seed(0)  # the fresh head's weights
    encoder = normalizing_encoder(tiny_bert_nodropout_dir)
    overrides = {"loss_weights": {"smooth_k2": weight}} if weight else {}
    trainer = trainer_class(
        model=encoder,
        args=stage_two_args(tmp_path, max_steps=1, **overrides),
        train_dataset=dataset(),
    )
    loss_module = trainer.loss_module.parts["smooth_k2"] if weight else trainer.loss_module
    fresh_head_at(trainer)
    pooled = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir, normalize=False)
    labels = torch.tensor(dataset()["score"])
    with torch.no_grad():
        u = pooled(**pooled.tokenize([r[0] for r in ROWS]))
        v = pooled(**pooled.tokenize([r[1] for r in ROWS]))
        on_pooled = loss_module({"sentence1": u, "sentence2": v}, labels).item()
        unit = {"sentence1": torch.nn.functional.normalize(u, dim=-1)}
        unit["sentence2"] = torch.nn.functional.normalize(v, dim=-1)
        on_unit = loss_module(unit, labels).item()
    assert on_pooled != pytest.approx(on_unit, rel=1e-3)

    trainer.train()

    assert trainer_step_losses(trainer)[1] == pytest.approx((weight or 1) * on_pooled, rel=1e-5)


def test_the_encoder_keeps_its_normalisation_outside_the_head(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """Training does not change what the model gives (``encode``, the saved folder): unit
    vectors, whose cosine the STS tables score."""
    encoder = normalizing_encoder(tiny_bert_nodropout_dir)
    trainer = RegressionTrainer(
        model=encoder, args=stage_two_args(tmp_path), train_dataset=dataset()
    )
    trainer.train()
    assert encoder.normalize
    vectors = encoder.encode([r[0] for r in ROWS], show_progress_bar=False)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    trainer.save_model(str(tmp_path / "final"))
    assert SentenceEncoder.from_pretrained(tmp_path / "final").normalize


def test_the_head_dev_scores_read_the_embeddings_the_head_trained_on(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """``metrics.json``'s ``head`` scores: the head's predictions over the mean-pooled
    embeddings, as in training; the encoder's normalisation is back on afterwards."""
    encoder = normalizing_encoder(tiny_bert_nodropout_dir)
    args = stage_two_args(tmp_path)
    evaluator = METHOD.build_evaluator("dev", dataset(), args)
    trainer = RegressionTrainer(
        model=encoder, args=args, train_dataset=dataset(), evaluator=evaluator
    )
    trainer.train()

    scores = trainer.head_dev_scores(encoder)

    assert encoder.normalize
    head = encoder.heads["regression"]
    encoder.normalize = False
    try:
        u = torch.as_tensor(encoder.encode([r[0] for r in ROWS], show_progress_bar=False))
        v = torch.as_tensor(encoder.encode([r[1] for r in ROWS], show_progress_bar=False))
    finally:
        encoder.normalize = True
    with torch.no_grad():
        predictions = head.score(u, v).double().numpy()
    gold = [r[2] for r in ROWS]
    assert scores["dev_head_spearman"] == pytest.approx(100 * spearmanr(predictions, gold)[0])
    assert scores["dev_head_pearson"] == pytest.approx(100 * pearsonr(predictions, gold)[0])
