"""Options that change a number, each set to a non-default value and checked against the
number computed here independently (issue 31): ``loss_weights`` with a part that reads text
ids, ``weight_averaging_every``, ``ema_decay``, the STS report's aggregates, and gradient
caching with dropout on. A test that would still pass with the option ignored is a defect."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset
from scipy.stats import pearsonr, spearmanr
from transformers import TrainerCallback

from sts_core.encoder import SentenceEncoder
from sts_core.evaluation.sts import STSEvaluator
from sts_core.losses import cosine_mse_loss
from sts_core.testing import quick_training_args
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training.collator import split_features

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def about(name: str):
    """``assert_close``'s message, prefixed with the parameter's name."""
    return lambda message: f"{name}: {message}"


PAIRS = {
    "sentence1": ["a man plays", "the dog runs", "a cat eats", "the boy sits"] * 4,
    "sentence2": ["a man plays a guitar", "a dog runs", "a cat", "the girl sits"] * 4,
    "score": [0.9, 0.8, 0.5, 0.2] * 4,
}


# ----------------------------------------------------------------- loss_weights and text ids
REPEATED_ANCHORS = {  # "a man plays" ×3 and "the dog runs" ×2: BSC's eq. 3–4 apply
    "sentence1": ["a man plays", "a man plays", "a man plays", "the dog runs"]
    + ["the dog runs", "a cat eats", "the boy sits", "a woman swimming"],
    "sentence2": ["a man plays a guitar", "a man is playing", "someone plays piano", "a dog"]
    + ["a dog runs in the park", "a cat", "the girl sits", "people on the beach"],
    "score": [0.9, 0.7, 0.4, 0.8, 0.6, 0.5, 0.2, 0.1],
}


def test_a_weighted_sum_passes_the_batch_text_ids_to_the_part_that_reads_them(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """0.5·bsc + 2·cosine_mse through the trainer's collator and loss equals the parts
    computed alone here, BSC given the anchors' identities. Dropout is ON: with identical
    embeddings for a repeated anchor, eq. 3–4 would not change BSC's value, with dropout's
    different ones they do (both sides draw the same masks from the same seed)."""
    from sts_bsc.loss import bsc_loss  # the BSC method package (installed in the workspace)

    data = Dataset.from_dict(REPEATED_ANCHORS)
    args = quick_training_args(BaseConfig, tmp_path, loss_weights={"bsc": 0.5, "cosine_mse": 2.0})
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir).train()
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=data)
    batch = trainer.data_collator([data[i] for i in range(len(data))])
    torch.manual_seed(3)
    with torch.no_grad():
        combined = trainer.compute_loss(encoder, batch)

    alone = SentenceEncoder.from_pretrained(tiny_bert_dir).train()
    torch.manual_seed(3)
    with torch.no_grad():
        embedded = alone(columns=split_features(batch, ("sentence1", "sentence2")))
    u, v = embedded["sentence1"], embedded["sentence2"]
    first = REPEATED_ANCHORS["sentence1"]
    anchors = torch.tensor([first.index(s) for s in first])  # equal texts, equal ids
    labels = torch.tensor(REPEATED_ANCHORS["score"])
    bsc_with_anchors = bsc_loss(u, v, 0.1, anchor_ids=anchors)["bsc"]
    bsc_without = bsc_loss(u, v, 0.1)["bsc"]
    assert abs(float(bsc_with_anchors - bsc_without)) > 1e-3  # the ids matter here
    expected = 0.5 * bsc_with_anchors + 2.0 * cosine_mse_loss(u, v, labels)
    torch.testing.assert_close(combined, expected, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------- weight averaging
class RecordWeights(TrainerCallback):
    """The trainable weights after every optimizer step (before the averager sees them)."""

    def __init__(self) -> None:
        self.by_step: dict[int, dict[str, torch.Tensor]] = {}

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.by_step[state.global_step] = {
            n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad
        }


def averaged_run(model_dir: Path, output: Path, max_steps: int, **settings) -> tuple:
    record = RecordWeights()
    args = quick_training_args(
        BaseConfig, output, max_steps=max_steps, per_device_train_batch_size=4, **settings
    )
    trainer = BaseTrainer(
        model=SentenceEncoder.from_pretrained(model_dir),
        args=args,
        train_dataset=Dataset.from_dict(PAIRS),
        callbacks=[record],
    )
    trainer.train()
    assert sorted(record.by_step) == list(range(1, max_steps + 1))
    final = {n: p.detach() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return final, record.by_step


def test_uniform_averaging_every_2nd_step_averages_steps_t0_t0_plus_2_and_so_on(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """7 steps, start 0.3 → t₀ = ⌈2.1⌉ = 3, every 2: the mean of steps 3, 5 and 7 only."""
    final, by_step = averaged_run(
        tiny_bert_nodropout_dir,
        tmp_path,
        7,
        weight_averaging="uniform",
        weight_averaging_start=0.3,
        weight_averaging_every=2,
    )
    assert math.ceil(0.3 * 7) == 3
    for name, value in final.items():
        expected = (by_step[3][name] + by_step[5][name] + by_step[7][name]) / 3
        torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-7, msg=about(name))
    name = "backbone.encoder.layer.0.attention.self.query.weight"
    every_step = sum(by_step[step][name] for step in range(3, 8)) / 5  # every 1's mean
    assert (final[name] - every_step).abs().max() > 1e-5  # so the period is checked


def test_ema_with_decay_one_half_is_the_moving_average_of_the_recorded_steps(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """W̄₁ = W₁, then W̄ ← 0.5·W̄ + 0.5·W after each of steps 2–4 (decay 0.5, not 0.999)."""
    final, by_step = averaged_run(
        tiny_bert_nodropout_dir,
        tmp_path,
        4,
        weight_averaging="ema",
        weight_averaging_start=0.0,
        ema_decay=0.5,
    )
    for name, value in final.items():
        expected = by_step[1][name].clone()
        for step in (2, 3, 4):
            expected = 0.5 * expected + 0.5 * by_step[step][name]
        torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-7, msg=about(name))


# ----------------------------------------------------------------- STS report aggregates
def toy_embedding(sentences: list[str], dim: int = 16) -> np.ndarray:
    """A deterministic embedding: the sum of a fixed random vector per word."""
    vectors = np.zeros((len(sentences), dim))
    for row, sentence in enumerate(sentences):
        for word in sentence.split():
            seed = sum(ord(c) * 31**i for i, c in enumerate(word)) % 2**32
            vectors[row] += np.random.default_rng(seed).normal(size=dim)
    return vectors


def subset_pairs(sizes: dict[str, int], seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    words = "a man dog cat plays runs eats guitar food ball park red big small the".split()
    n = sum(sizes.values())
    return Dataset.from_dict(
        {
            "sentence1": [" ".join(rng.choice(words, size=5)) for _ in range(n)],
            "sentence2": [" ".join(rng.choice(words, size=5)) for _ in range(n)],
            "score": rng.uniform(0, 5, n).tolist(),
            "subset": [name for name, size in sizes.items() for _ in range(size)],
        }
    )


def by_hand(data: Dataset) -> dict[str, dict[str, float]]:
    """{metric: {all, mean, wmean}} × 100 with scipy: each subset's correlation, their plain
    mean and their mean weighted by subset size."""
    left, right = toy_embedding(data["sentence1"]), toy_embedding(data["sentence2"])
    cosine = (left * right).sum(1) / np.linalg.norm(left, axis=1) / np.linalg.norm(right, axis=1)
    gold, subsets = np.asarray(data["score"]), np.asarray(data["subset"])
    names = list(dict.fromkeys(data["subset"]))
    sizes = np.array([(subsets == name).sum() for name in names])
    out = {}
    for metric, correlate in (("spearman", spearmanr), ("pearson", pearsonr)):
        each = np.array(
            [100 * correlate(cosine[subsets == s], gold[subsets == s])[0] for s in names]
        )
        out[metric] = {
            "all": 100 * correlate(cosine, gold)[0],
            "mean": each.sum() / len(each),
            "wmean": (each * sizes).sum() / sizes.sum(),
        }
    return out


def test_the_report_averages_the_asked_aggregate_and_pearson_from_pearson() -> None:
    data = {
        "sts12": subset_pairs({"MSRpar": 6, "MSRvid": 12, "SMTeuroparl": 20}, seed=0),
        "sts13": subset_pairs({"FNWN": 8, "headlines": 24}, seed=1),
    }
    report = STSEvaluator(tasks=list(data), datasets=data, show_progress_bar=False).evaluate(
        toy_embedding
    )
    expected = {task: by_hand(pairs) for task, pairs in data.items()}
    averages = report.to_dict()["average"]
    seen = []
    for metric in ("spearman", "pearson"):
        for aggregate in ("all", "mean", "wmean"):
            for task in data:
                value = getattr(report.results[task], metric)[aggregate]
                assert value == pytest.approx(expected[task][metric][aggregate], abs=1e-9), (
                    task,
                    metric,
                    aggregate,
                )
            mean = (expected["sts12"][metric][aggregate] + expected["sts13"][metric][aggregate]) / 2
            assert report.average(aggregate, metric) == pytest.approx(mean, abs=1e-9)
            assert averages[f"{metric}_{aggregate}"] == pytest.approx(mean, abs=1e-9)
            seen.append(mean)
    # the six numbers differ, so each check tells the aggregates and metrics apart
    assert min(abs(a - b) for i, a in enumerate(seen) for b in seen[i + 1 :]) > 1e-3


# ----------------------------------------------------------------- gradient caching, dropout
CACHE_PAIRS = Dataset.from_dict(
    {
        "sentence1": [f"a man plays a guitar {i}" for i in range(8)],
        "sentence2": [f"a man plays music {'and sings ' * (i % 3)}{i}" for i in range(8)],
        "score": [0.1 * i for i in range(8)],
    }
)


def dropout_gradients(
    model_dir: Path,
    tmp_path: Path,
    cache: int | None,
    seed: int = 1,
    padding_free: str = "auto",
    **settings: int,
):
    """Loss and gradients of one training step of cosine MSE on the 8 pairs (dropout as
    the model has it) from the random state of ``seed``; ``settings``: more options."""
    encoder = SentenceEncoder.from_pretrained(model_dir, padding_free=padding_free)
    args = quick_training_args(
        BaseConfig,
        tmp_path / f"out-{cache}-{padding_free}-{len(settings)}",
        gradient_cache_batch_size=cache,
        **settings,
    )
    trainer = BaseTrainer(encoder, args, train_dataset=CACHE_PAIRS)
    batch = trainer.data_collator([CACHE_PAIRS[i] for i in range(len(CACHE_PAIRS))])
    encoder.train()
    torch.manual_seed(seed)
    loss = trainer.compute_loss(encoder, batch)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
    return loss.detach(), grads, batch


def test_a_gradient_cached_step_with_dropout_equals_the_uncached_step(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """One mini-batch of the whole batch: the replay must draw the first pass's dropout
    masks, so loss and gradients are the uncached step's under the same seed."""
    whole_loss, whole, _ = dropout_gradients(tiny_bert_dir, tmp_path, None)
    cached_loss, cached, _ = dropout_gradients(tiny_bert_dir, tmp_path, 8)
    torch.testing.assert_close(cached_loss, whole_loss, rtol=1e-5, atol=1e-6)
    assert cached.keys() == whole.keys() and len(whole) > 4
    for name, grad in whole.items():
        torch.testing.assert_close(cached[name], grad, rtol=1e-4, atol=1e-6, msg=about(name))
    other_seed, _, _ = dropout_gradients(tiny_bert_dir, tmp_path, None, seed=2)
    assert abs(float(other_seed - whole_loss)) > 1e-4  # dropout is on: the seed matters


def rows_at(columns: dict, rows: list[int]) -> dict:
    """Rows ``rows`` of each column, cut to the positions some of them use."""
    pieces = {}
    for name, features in columns.items():
        used = features["attention_mask"][rows].bool().any(dim=0)
        pieces[name] = {key: value[rows][:, used] for key, value in features.items()}
    return pieces


def test_gradient_cached_mini_batches_with_dropout_get_the_gradient_of_their_own_masks(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """Mini-batches of 3: the gradients are those of the loss over embeddings drawn
    mini-batch by mini-batch with gradient from the same seed (each replay under its own
    mini-batch's saved random state)."""
    cached_loss, cached, batch = dropout_gradients(tiny_bert_dir, tmp_path, 3)
    columns = split_features(batch, ("sentence1", "sentence2"))
    by_hand = step_by_hand(tiny_bert_dir, columns, [[0, 1, 2], [3, 4, 5], [6, 7]], batch)
    assert_same_step((cached_loss, cached), by_hand)


def step_by_hand(model_dir: Path, columns: dict, chunks: list[list[int]], batch: dict):
    """Cosine MSE's loss and gradients over embeddings drawn chunk by chunk (in the order
    given) with gradient from seed 1, put back in batch order."""
    encoder = SentenceEncoder.from_pretrained(model_dir).train()
    torch.manual_seed(1)
    embedded: dict[int, dict] = {}
    for chunk in chunks:
        piece = encoder(columns=rows_at(columns, chunk))
        for i, row in enumerate(chunk):
            embedded[row] = {name: vectors[i] for name, vectors in piece.items()}
    rows = range(len(embedded))
    u = torch.stack([embedded[row]["sentence1"] for row in rows])
    v = torch.stack([embedded[row]["sentence2"] for row in rows])
    loss = cosine_mse_loss(u, v, batch["labels"])
    loss.backward()
    grads = {n: p.grad for n, p in encoder.named_parameters() if p.grad is not None}
    return loss.detach(), grads


def assert_same_step(cached: tuple, by_hand: tuple) -> None:
    (cached_loss, cached_grads), (loss, grads) = cached, by_hand
    torch.testing.assert_close(cached_loss, loss, rtol=1e-5, atol=1e-6)
    assert cached_grads.keys() == grads.keys() and len(grads) > 4
    for name, grad in grads.items():
        torch.testing.assert_close(cached_grads[name], grad, rtol=1e-4, atol=1e-6, msg=about(name))


# tokens per row of CACHE_PAIRS (both columns, the tiny tokenizer): 12 to 16; a budget of
# 40 makes mini-batches of two or three rows, not in batch order
TOKEN_BUDGET = 40


def rows_by_tokens(columns: dict, budget: int) -> list[list[int]]:
    """The token mini-batches computed here: rows by their real tokens, longest first
    (ties: batch order), packed while the budget holds."""
    tokens = [sum(int(f["attention_mask"][row].sum()) for f in columns.values())
              for row in range(8)]  # fmt: skip
    chunks, used = [[]], 0
    for row in sorted(range(8), key=lambda r: (-tokens[r], r)):
        if chunks[-1] and used + tokens[row] > budget:
            chunks, used = [*chunks, []], 0
        chunks[-1].append(row)
        used += tokens[row]
    return chunks


@pytest.mark.parametrize("padding_free", ["auto", "false"])
def test_a_step_cached_by_tokens_without_dropout_equals_the_uncached_step(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, padding_free: str
) -> None:
    """``gradient_cache_tokens``: mini-batches by tokens, sorted by length; the loss and
    gradients are the whole batch's (dropout off), packed (auto: the block mask on a CPU)
    or padded."""
    whole_loss, whole, batch = dropout_gradients(
        tiny_bert_nodropout_dir, tmp_path, None, padding_free=padding_free
    )
    columns = split_features(batch, ("sentence1", "sentence2"))
    chunks = rows_by_tokens(columns, TOKEN_BUDGET)
    assert len(chunks) >= 3 and sum(chunks, []) != list(range(8))  # reordered
    loss, cached, _ = dropout_gradients(
        tiny_bert_nodropout_dir,
        tmp_path,
        None,
        padding_free=padding_free,
        gradient_cache_tokens=TOKEN_BUDGET,
    )
    assert_same_step((loss, cached), (whole_loss, whole))


def test_token_mini_batches_with_dropout_get_the_gradient_of_their_own_masks(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """Dropout on: the loss and gradients of the embeddings drawn mini-batch by mini-batch
    (rows sorted by tokens, packed to the budget) with gradient from the same seed, put
    back in batch order; a different budget draws other masks (the setting is used)."""
    cached_loss, cached, batch = dropout_gradients(
        tiny_bert_dir, tmp_path, None, gradient_cache_tokens=TOKEN_BUDGET
    )
    columns = split_features(batch, ("sentence1", "sentence2"))
    chunks = rows_by_tokens(columns, TOKEN_BUDGET)
    assert_same_step((cached_loss, cached), step_by_hand(tiny_bert_dir, columns, chunks, batch))
    other, _, _ = dropout_gradients(tiny_bert_dir, tmp_path, None, gradient_cache_tokens=1000)
    assert abs(float(other - cached_loss)) > 1e-5
