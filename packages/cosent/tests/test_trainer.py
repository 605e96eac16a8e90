"""CoSENT on the core's Trainer and a tiny BERT (no downloads): training, the logged
loss against an independent recomputation, best-checkpoint selection, saving and reloading,
the baselines, the config's checks and CoSENT over the batch of two processes.

The tiny BERT is copied with dropout 0, so a training step is a deterministic function of the
seed and the model gives the same embeddings in train and eval mode.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from datasets import Dataset
from torch import nn
from transformers import AutoModel

import sts_cosent.loss as loss_module
from sts_core.encoder import EXTRA_WEIGHTS_NAME, SentenceEncoder
from sts_core.losses import SOFTMAX_HEAD
from sts_core.testing import (
    TOY_PROBES,
    TOY_STS_PAIRS,
    assert_best_checkpoint_selected,
    checkpoint_selection_fixture,
    embed_pairs,
    free_port,
    quick_training_args,
    trainer_step_losses,
)
from sts_core.training import BaseTrainer
from sts_cosent import CoSENTConfig
from sts_cosent.loss import (
    contrastive_threshold_loss,
    cosent_loss,
    cosine_mse_loss,
    in_batch_infonce_loss,
    pairwise_cosine,
    softmax_classifier_loss,
)
from sts_cosent.method import METHOD

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures"

#: (sentence1, sentence2, STS score 0–5, binary label: score ≥ 3, NLI class: 2 entailment for
#: a score ≥ 4, 1 neutral from 1, 0 contradiction below)
ROWS = [(a, b, s, int(s >= 3), 2 if s >= 4 else 1 if s >= 1 else 0) for a, b, s in TOY_STS_PAIRS]
PROBES = TOY_PROBES


def dataset(label: str = "score", column: str = "score", rows: int = len(ROWS)) -> Dataset:
    """The pairs with labels from ``label`` (score, score01, binary or nli) in ``column``."""
    values = {
        "score": [r[2] for r in ROWS],
        "score01": [r[2] / 5 for r in ROWS],
        "binary": [r[3] for r in ROWS],
        "nli": [r[4] for r in ROWS],
    }[label]
    return Dataset.from_dict(
        {
            "sentence1": [r[0] for r in ROWS[:rows]],
            "sentence2": [r[1] for r in ROWS[:rows]],
            column: values[:rows],
        }
    )


def make_args(output_dir: Path, **overrides: Any) -> CoSENTConfig:
    return quick_training_args(
        CoSENTConfig, output_dir, **{"per_device_train_batch_size": len(ROWS), **overrides}
    )


def backbone_parameters(encoder: SentenceEncoder) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in encoder.backbone.named_parameters()}


# --------------------------------------------------------------------------- CoSENT training


@pytest.fixture(scope="module")
def cosent_run(
    tiny_bert_nodropout_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """8 full-batch steps of CoSENT on 0–5 scores, and the loss recomputed before step 1."""
    data = dataset()
    u, v = embed_pairs(SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir), data)
    expected = cosent_loss(pairwise_cosine(u, v), torch.tensor(data["score"]), 20.0)
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    before = backbone_parameters(encoder)
    args = make_args(tmp_path_factory.mktemp("cosent"), max_steps=8, lr_scheduler_type="constant")
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=data)
    output = trainer.train()
    return {
        "trainer": trainer,
        "encoder": encoder,
        "before": before,
        "expected_first_loss": float(expected),
        "output": output,
    }


def test_cosent_loss_is_finite_and_decreases(cosent_run: dict[str, Any]) -> None:
    losses_by_step = trainer_step_losses(cosent_run["trainer"])
    assert sorted(losses_by_step) == list(range(1, 9))
    values = list(losses_by_step.values())
    assert all(math.isfinite(v) and v > 0 for v in values)
    assert all(b < a for a, b in zip(values, values[1:], strict=False)), values
    assert values[-1] < 0.7 * values[0], values
    assert math.isfinite(cosent_run["output"].training_loss)


def test_cosent_training_changes_the_parameters(cosent_run: dict[str, Any]) -> None:
    encoder, before = cosent_run["encoder"], cosent_run["before"]
    changed = [k for k, v in encoder.backbone.named_parameters() if not torch.equal(v, before[k])]
    assert "encoder.layer.0.attention.self.query.weight" in changed
    assert "encoder.layer.1.output.dense.weight" in changed
    assert len(changed) > len(before) // 2


def test_logged_loss_is_cosent_of_the_pair_cosines(cosent_run: dict[str, Any]) -> None:
    """Step 1 (full batch, initial weights) logs cosent(cos(u, v), scores, λ = 20)."""
    logged = trainer_step_losses(cosent_run["trainer"])[1]
    assert logged == pytest.approx(cosent_run["expected_first_loss"], rel=1e-5)
    # the λ matters: another scale gives another value, so the match above is not an accident
    assert cosent_run["expected_first_loss"] > 1.0


# --------------------------------------------------------------------------- best checkpoint


#: 4 steps, evaluated and saved every step; the dev score is best at step 2
selected_run = checkpoint_selection_fixture(METHOD, dataset)


def test_best_checkpoint_is_chosen_on_the_dev_metric(selected_run: dict[str, Any]) -> None:
    assert_best_checkpoint_selected(selected_run)


def test_final_weights_are_the_best_checkpoint(selected_run: dict[str, Any]) -> None:
    output_dir, encoder = selected_run["output_dir"], selected_run["encoder"]
    live = encoder.backbone.state_dict()
    best = AutoModel.from_pretrained(output_dir / "checkpoint-2").state_dict()
    last = AutoModel.from_pretrained(output_dir / "checkpoint-4").state_dict()
    assert set(best) == set(live)
    for key, value in best.items():
        torch.testing.assert_close(live[key], value, rtol=0, atol=0, msg=key)
    assert any(not torch.equal(last[k], best[k]) for k in last), "steps 3-4 changed nothing"


def test_saved_folder_reloads_with_the_same_embeddings(selected_run: dict[str, Any]) -> None:
    final_dir, encoder = selected_run["final_dir"], selected_run["encoder"]
    expected = encoder.encode(PROBES, batch_size=2, show_progress_bar=False)
    reloaded = SentenceEncoder.from_pretrained(final_dir)
    assert reloaded.settings() == encoder.settings()
    ours = reloaded.encode(PROBES, batch_size=2, show_progress_bar=False)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-5)

    sentence_transformers = pytest.importorskip("sentence_transformers")
    model = sentence_transformers.SentenceTransformer(str(final_dir), device="cpu")
    theirs = model.encode(PROBES, batch_size=2, convert_to_numpy=True)
    np.testing.assert_allclose(theirs, expected, rtol=0, atol=1e-5)


def test_model_card_names_cosent_and_its_citation(selected_run: dict[str, Any]) -> None:
    card = (selected_run["final_dir"] / "README.md").read_text(encoding="utf-8")
    assert "`cosent` method" in card and "CoSENT" in card
    assert "@article{huang2024cosent" in card
    assert "CoSENT: Consistent Sentence Embedding via Similarity Ranking" in card
    assert "tiny-bert" in card and "toy pairs" in card
    assert "eval_fake_spearman 50" in card


# --------------------------------------------------------------------------- baselines


def reference_loss(
    name: str, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor, args: CoSENTConfig, head
) -> torch.Tensor:
    """Each loss of sts_cosent.loss called directly on the batch's embeddings."""
    if name == "cosent":
        return cosent_loss(pairwise_cosine(u, v), labels, args.cosent_scale)
    if name == "cosine_mse":
        return cosine_mse_loss(u, v, labels)
    if name == "contrastive":
        return contrastive_threshold_loss(u, v, labels, margin=args.contrastive_margin)
    if name == "softmax":
        return softmax_classifier_loss(u, v, labels.long(), head)
    keep = labels >= args.positive_threshold
    assert 2 <= int(keep.sum()) < len(labels)  # the threshold does select some pairs
    return in_batch_infonce_loss(u[keep], v[keep], temperature=args.infonce_temperature)


BASELINES = {
    # id: (loss, labels, label column, options)
    "cosine_mse": ("cosine_mse", "score01", "score", {}),
    "contrastive": ("contrastive", "binary", "score", {"contrastive_margin": 0.95}),
    "softmax": ("softmax", "nli", "label", {}),
    "infonce": (
        "infonce",
        "score",
        "score",
        {"positive_threshold": 3.5, "infonce_temperature": 0.1},
    ),
    "cosent_binary": ("cosent", "binary", "score", {"cosent_scale": 10.0}),
    "cosent_nli_classes": ("cosent", "nli", "score", {}),
}


@pytest.mark.parametrize("case", sorted(BASELINES))
def test_every_loss_trains_and_logs_its_own_value(
    case: str, tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    name, labels, column, options = BASELINES[case]
    data = dataset(labels, column)
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    before = backbone_parameters(encoder)
    args = make_args(tmp_path, loss=name, max_steps=2, **options)
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=data)
    head = getattr(encoder, SOFTMAX_HEAD, None)
    assert (head is not None) == (name == "softmax")
    head_before = None if head is None else head.weight.detach().clone()
    reference_encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    u, v = embed_pairs(reference_encoder, data)
    with torch.no_grad():
        expected = reference_loss(name, u, v, torch.tensor(data[column]).float(), args, head)

    trainer.train()

    logged = trainer_step_losses(trainer)
    assert sorted(logged) == [1, 2] and all(math.isfinite(x) for x in logged.values())
    assert logged[1] == pytest.approx(float(expected), rel=1e-5, abs=1e-7)
    changed = [k for k, p in encoder.backbone.named_parameters() if not torch.equal(p, before[k])]
    assert len(changed) > len(before) // 2
    if head is not None:
        assert not torch.equal(head.weight, head_before)


def test_softmax_head_is_saved_and_reloads(tiny_bert_nodropout_dir: Path, tmp_path: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = make_args(tmp_path, loss="softmax", max_steps=1, num_labels=3)
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=dataset("nli", "label"))
    assert args.label_column == "label"
    trainer.train()
    trainer.save_model(str(tmp_path / "final"))
    assert (tmp_path / "final" / EXTRA_WEIGHTS_NAME).is_file()

    reloaded = SentenceEncoder.from_pretrained(tmp_path / "final")
    reloaded.add_module(SOFTMAX_HEAD, nn.Linear(3 * reloaded.dimension, 3))
    reloaded.load_weights(tmp_path / "final")
    for key, value in encoder.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[key], value, rtol=0, atol=0, msg=key)
    assert "softmax_classifier.weight" in encoder.state_dict()


def test_infonce_batch_without_a_positive_gives_a_zero_loss(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """With positive_threshold no pair of a batch may qualify: nothing to contrast, loss 0."""
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = make_args(tmp_path, loss="infonce", positive_threshold=4.9)
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=dataset())
    batch = trainer.data_collator([dataset()[i] for i in range(4)])  # scores below 4.9
    loss = trainer.compute_loss(encoder, batch)
    assert loss.item() == 0.0  # not NaN
    loss.backward()  # still on the graph (DDP needs every parameter in it)
    grads = [p.grad for p in encoder.parameters() if p.grad is not None]
    assert grads and all(torch.count_nonzero(g) == 0 for g in grads)


# --------------------------------------------------------------------------- config


def test_config_rejects_an_unknown_loss_or_architecture(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"loss 'cosent2' is not one of cosent, cosine_mse"):
        make_args(tmp_path, loss="cosent2")
    with pytest.raises(ValueError, match=r"architecture 'siamese' is not one of bi-encoder"):
        make_args(tmp_path, architecture="siamese")
    assert make_args(tmp_path, loss="infonce").loss == "infonce"


# --------------------------------------------------------------------------- across processes


def test_gather_in_one_process_is_exactly_the_local_loss(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = make_args(tmp_path, gather_across_processes=True)
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=dataset())
    batch = trainer.data_collator([dataset()[i] for i in range(8)])
    results = {}
    for gather in (True, False):
        trainer.args.gather_across_processes = gather
        encoder.zero_grad()
        loss = trainer.compute_loss(encoder, batch)
        loss.backward()
        grads = {k: p.grad.clone() for k, p in encoder.named_parameters() if p.grad is not None}
        results[gather] = (loss.detach(), grads)
    (gathered, gathered_grads), (local, local_grads) = results[True], results[False]
    assert float(local) > 0 and torch.equal(gathered, local)
    assert gathered_grads.keys() == local_grads.keys() and gathered_grads
    for key, value in local_grads.items():
        assert torch.equal(gathered_grads[key], value), key


CASES = [[4, 4], [5, 3], [1, 6]]  # pairs on rank 0 and rank 1; the last batches differ


def test_two_processes_rank_over_the_whole_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CoSENT over the all-gathered scores (gradient scaled by gathered_loss_scale(), then
    averaged over two gloo processes as DDP does) = one process over the whole batch: same
    loss value, same gradients of the linear layer before the cosine."""
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    monkeypatch.syspath_prepend(str(FIXTURES))  # spawned children get the parent's sys.path
    import cosent_gather_worker

    paths = {"loss": loss_module.__file__}
    mp.spawn(
        cosent_gather_worker.worker,
        args=(2, free_port(), CASES, paths, str(tmp_path)),
        nprocs=2,
        join=True,
    )
    for index, sizes in enumerate(CASES):
        layer, left, right, labels = cosent_gather_worker.make_problem(sum(sizes))
        assert len(set(labels.tolist())) > 1
        reference = cosent_loss(
            pairwise_cosine(layer(left), layer(right)), labels, cosent_gather_worker.SCALE
        )
        reference.backward()
        for rank in range(2):
            result = torch.load(tmp_path / f"case{index}_rank{rank}.pt")
            assert int(result["world_size"]) == 2 and float(result["scale"]) == 2.0
            torch.testing.assert_close(
                result["loss"], reference.detach(), rtol=1e-5, atol=1e-6, msg=f"{sizes} loss"
            )
            for name in ("weight", "bias"):
                torch.testing.assert_close(
                    result[name],
                    getattr(layer, name).grad,
                    rtol=1e-4,
                    atol=1e-6,
                    msg=f"{sizes} {name}",
                )
