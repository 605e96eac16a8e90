"""BaseTrainer on a tiny BERT (no downloads): loss, evaluation, best checkpoint, saving, resume.

The tiny BERT is copied with dropout set to 0 so runs are deterministic given the seed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from datasets import Dataset
from scipy.stats import spearmanr
from transformers import AutoModel, TrainerCallback

from sts_core.encoder import SentenceEncoder
from sts_core.evaluation import PairEvaluator
from sts_core.testing import (
    TOY_PROBES,
    assert_best_checkpoint_selected,
    checkpoint_selection_fixture,
    quick_training_args,
    trainer_step_losses,
)
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training.method_registry import CORE_METHOD

pytestmark = pytest.mark.usefixtures("torch_one_thread")

PAIRS = [
    ("a man is playing the guitar", "a man plays the guitar", 0.95),
    ("a man is playing the guitar", "a woman is slicing an onion", 0.05),
    ("a dog runs in the park", "a dog is running in the park", 0.9),
    ("a dog runs in the park", "a girl is eating food", 0.1),
    ("two boys play soccer", "two children are playing soccer", 0.8),
    ("two boys play soccer", "a cat sits on the car", 0.0),
    ("a woman is riding a horse", "someone rides a horse", 0.75),
    ("a woman is riding a horse", "the man is swimming in the water", 0.15),
    ("a small white cat", "a small black cat", 0.6),
    ("a small white cat", "people are standing on the beach", 0.05),
    ("the child plays piano", "a child is playing the piano", 0.9),
    ("the child plays piano", "a big car on the street", 0.0),
    ("three men are sitting", "three people sit", 0.7),
    ("three men are sitting", "a boy is cutting a tomato", 0.1),
    ("this sentence means one thing", "this sentence means something different", 0.4),
    ("a person rides a bike", "a man is riding a bike", 0.85),
]
PROBES = TOY_PROBES


def toy_dataset() -> Dataset:
    first, second, score = zip(*PAIRS, strict=True)
    return Dataset.from_dict(
        {"sentence1": list(first), "sentence2": list(second), "score": list(score)}
    )


def make_args(output_dir: Path, **overrides: Any) -> BaseConfig:
    return quick_training_args(
        BaseConfig, output_dir, **{"per_device_train_batch_size": 16, **overrides}
    )


def backbone_state(folder: Path) -> dict[str, torch.Tensor]:
    return AutoModel.from_pretrained(folder).state_dict()


def embed(encoder: SentenceEncoder) -> np.ndarray:
    return encoder.encode(PROBES, batch_size=2, show_progress_bar=False)


class PartsTrainer(BaseTrainer):
    """Logs a named loss part, as methods do."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        self.log_loss_parts({"cos_mse": loss, "twice": 2 * loss})
        return loss


# --------------------------------------------------------------------------- training


def test_loss_decreases_parameters_change_and_evaluation_runs(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    before = {k: v.detach().clone() for k, v in encoder.named_parameters()}
    dataset = toy_dataset()
    evaluator = PairEvaluator(dataset, name="toy")
    args = make_args(
        tmp_path, num_train_epochs=6, eval_strategy="epoch", metric_for_best_model="toy_spearman"
    )
    trainer = PartsTrainer(model=encoder, args=args, train_dataset=dataset, evaluator=evaluator)
    output = trainer.train()

    losses = trainer_step_losses(trainer)
    assert sorted(losses) == [1, 2, 3, 4, 5, 6]  # full batch: one step per epoch
    assert all(math.isfinite(v) for v in losses.values())
    assert losses[6] < losses[1] * 0.8, losses
    assert math.isfinite(output.training_loss)

    changed = [k for k, v in encoder.named_parameters() if not torch.equal(v, before[k])]
    assert "backbone.encoder.layer.0.attention.self.query.weight" in changed
    assert len(changed) > len(before) // 2

    # loss parts are averaged into the log line of the step they belong to
    logged = [e for e in trainer.state.log_history if "loss" in e]
    for entry in logged:
        assert entry["cos_mse"] == pytest.approx(entry["loss"], rel=1e-5)
        assert entry["twice"] == pytest.approx(2 * entry["loss"], rel=1e-5)

    evaluations = [e for e in trainer.state.log_history if "eval_toy_spearman" in e]
    assert len(evaluations) == 6
    assert trainer.state.best_metric == max(e["eval_toy_spearman"] for e in evaluations)
    metrics = trainer.evaluate()
    assert set(metrics) - {"epoch"} == {"eval_toy_spearman", "eval_toy_pearson", "eval_runtime"}
    direct = evaluator(encoder)
    assert metrics["eval_toy_spearman"] == pytest.approx(direct["toy_spearman"])
    first, second, gold = zip(*PAIRS, strict=True)  # the dev pairs, encoded afresh
    u = encoder.encode(list(first), show_progress_bar=False).astype(np.float64)
    v = encoder.encode(list(second), show_progress_bar=False).astype(np.float64)
    cosine = (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
    dev_spearman = 100 * spearmanr(cosine, gold).statistic
    assert metrics["eval_toy_spearman"] == pytest.approx(dev_spearman, abs=1e-6)
    assert trainer.evaluate(metric_key_prefix="dev")["dev_toy_pearson"] == pytest.approx(
        direct["toy_pearson"]
    )
    assert trainer.state.log_history[-2]["eval_toy_spearman"] == metrics["eval_toy_spearman"]
    assert "dev_toy_spearman" in trainer.state.log_history[-1]


def test_without_evaluator_evaluate_returns_nothing(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    trainer = BaseTrainer(model=encoder, args=make_args(tmp_path), train_dataset=toy_dataset())
    assert trainer.evaluate() == {}


# --------------------------------------------------------------------------- best checkpoint


#: 4 steps, evaluated and saved every step; the dev score is best at step 2
selected_run = checkpoint_selection_fixture(CORE_METHOD, toy_dataset)


def test_best_checkpoint_is_chosen_on_the_dev_metric(selected_run: dict[str, Any]) -> None:
    assert_best_checkpoint_selected(selected_run)
    output_dir = selected_run["output_dir"]
    # save_total_limit 2 keeps the best checkpoint and the latest one
    kept = sorted(p.name for p in output_dir.glob("checkpoint-*"))
    assert kept == ["checkpoint-2", "checkpoint-4"]


def test_final_model_has_the_best_checkpoint_weights(selected_run: dict[str, Any]) -> None:
    output_dir, encoder = selected_run["output_dir"], selected_run["encoder"]
    live = {k[len("backbone.") :]: v for k, v in encoder.state_dict().items()}
    best = backbone_state(output_dir / "checkpoint-2")
    last = backbone_state(output_dir / "checkpoint-4")
    assert set(best) == set(live)
    for key, value in best.items():
        torch.testing.assert_close(live[key], value, rtol=0, atol=0, msg=key)
    differs = [k for k in last if not torch.equal(last[k], best[k])]
    assert differs, "checkpoints 2 and 4 should differ after two more steps"


def test_saved_folder_reloads_with_the_same_embeddings(selected_run: dict[str, Any]) -> None:
    final_dir, encoder = selected_run["final_dir"], selected_run["encoder"]
    expected = embed(encoder)
    reloaded = SentenceEncoder.from_pretrained(final_dir)
    assert reloaded.settings() == encoder.settings()
    np.testing.assert_allclose(embed(reloaded), expected, rtol=0, atol=1e-6)

    backbone = AutoModel.from_pretrained(final_dir)
    for key, value in backbone.state_dict().items():
        torch.testing.assert_close(value, encoder.backbone.state_dict()[key], msg=key)


def test_saved_folder_loads_with_sentence_transformers(selected_run: dict[str, Any]) -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    final_dir, encoder = selected_run["final_dir"], selected_run["encoder"]
    model = sentence_transformers.SentenceTransformer(str(final_dir), device="cpu")
    theirs = model.encode(PROBES, batch_size=2, convert_to_numpy=True)
    np.testing.assert_allclose(theirs, embed(encoder), rtol=0, atol=1e-5)


def test_checkpoints_and_final_folder_have_a_model_card(selected_run: dict[str, Any]) -> None:
    card = (selected_run["final_dir"] / "README.md").read_text(encoding="utf-8")
    assert "`BaseTrainer`" in card
    assert "CosineSimilarityLoss" in card
    assert "@inproceedings{reimers-2019-sentence-bert" in card
    assert "tiny-bert" in card and "toy pairs" in card
    assert "eval_fake_spearman 50" in card  # the dev scores so far
    checkpoint_card = selected_run["output_dir"] / "checkpoint-2" / "README.md"
    assert "BaseTrainer" in checkpoint_card.read_text(encoding="utf-8")
    assert (selected_run["final_dir"] / "training_args.bin").is_file()


# --------------------------------------------------------------------------- resume


class StopAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True
        return control


def test_resume_from_checkpoint_continues_with_the_same_losses(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    dataset = toy_dataset()
    settings = {
        "max_steps": 4,
        "per_device_train_batch_size": 4,  # 4 batches an epoch: resume in mid-epoch
        "save_strategy": "steps",
        "save_steps": 2,
        "save_total_limit": None,
    }

    straight = BaseTrainer(
        model=SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir),
        args=make_args(tmp_path / "straight", **settings),
        train_dataset=dataset,
    )
    straight.train()
    expected = trainer_step_losses(straight)
    assert sorted(expected) == [1, 2, 3, 4]

    interrupted = BaseTrainer(
        model=SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir),
        args=make_args(tmp_path / "resumed", **settings),
        train_dataset=dataset,
        callbacks=[StopAt(2)],
    )
    interrupted.train()
    checkpoint = tmp_path / "resumed" / "checkpoint-2"
    assert interrupted.state.global_step == 2 and checkpoint.is_dir()
    assert not (tmp_path / "resumed" / "checkpoint-4").exists()

    fresh = SentenceEncoder.from_pretrained(
        tiny_bert_nodropout_dir
    )  # weights come from the checkpoint
    resumed = BaseTrainer(
        model=fresh, args=make_args(tmp_path / "resumed", **settings), train_dataset=dataset
    )
    resumed.train(resume_from_checkpoint=str(checkpoint))
    got = trainer_step_losses(resumed)
    assert resumed.state.global_step == 4
    for step in (1, 2):
        assert got[step] == pytest.approx(expected[step], rel=1e-6)  # history from the state
    for step in (3, 4):
        assert got[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-7), (got, expected)
    for key, value in straight.model.state_dict().items():
        torch.testing.assert_close(fresh.state_dict()[key], value, rtol=1e-5, atol=1e-6)


def test_gradient_accumulation_matches_one_big_batch(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """2 × 4 pairs accumulated = one batch of 8 (the per-batch mean loss is scaled by GA)."""
    runs = {}
    for name, batch, accumulate in (("big", 8, 1), ("accumulated", 4, 2)):
        encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
        args = make_args(
            tmp_path / name,
            max_steps=2,
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=accumulate,
        )
        trainer = BaseTrainer(model=encoder, args=args, train_dataset=toy_dataset())
        trainer.train()
        runs[name] = (trainer_step_losses(trainer), encoder.state_dict())
    (big_losses, big_state), (acc_losses, acc_state) = runs["big"], runs["accumulated"]
    assert acc_losses == pytest.approx(big_losses, rel=1e-5)
    for key, value in big_state.items():
        torch.testing.assert_close(acc_state[key], value, rtol=1e-4, atol=1e-6, msg=key)
