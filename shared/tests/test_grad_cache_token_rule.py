"""``gradient_cache_token_rule`` (issue 64, item 3): how ``gradient_cache_tokens`` makes
the gradient cache's mini-batches. ``per_column`` makes sentence-transformers'
``mini_batch_num_tokens`` mini-batches exactly (read off the peer's own
``CachedMultipleNegativesRankingLoss`` on the same tiny model and texts); the default,
``sorted``, makes others; both give the whole batch's loss and gradients; the rule is
refused without a token budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from datasets import Dataset

from sts_core.encoder import SentenceEncoder
from sts_core.testing import config_accepts, config_error, quick_training_args
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training.collator import split_features
from sts_core.training.grad_cache import plan_mini_batches

pytestmark = pytest.mark.usefixtures("torch_one_thread")

# pairs of varied length in both columns (5 to 22 tokens with the tiny tokenizer, longest
# and shortest rows not next to each other), so budgets make runs of different lengths
PAIRS = Dataset.from_dict(
    {
        "sentence1": [
            "a man plays a guitar",
            "two children are playing soccer in the park with a big white ball",
            "a dog runs",
            "a woman is slicing an onion",
            "people sitting on the beach",
            "the cat sits",
            "a boy is riding a bike on the street and a girl is running to the car with the dog",
            "someone eats food",
            "three men are swimming in the water",
            "a small black horse",
            "a person is cutting a tomato",
            "this sentence means something different",
            "the children play",
            "a girl is playing the piano at the park",
            "men eat",
            "a woman runs",
        ],
        "sentence2": [
            "a man is playing the guitar",
            "kids play",
            "a dog is running in the park with a ball",
            "a woman cuts an onion",
            "people are sitting on a beach",
            "a cat is sitting",
            "a boy rides a bike",
            "somebody is eating food in the street",
            "men swim",
            "a black horse is standing in the water",
            "a person slices a tomato with a knife",
            "that one means the same",
            "children are playing",
            "a girl plays piano",
            "the men are eating food",
            "a woman is running on the street by the car",
        ],
        "score": [0.25 * (i % 5) for i in range(16)],
    }
)
COLUMNS = ("sentence1", "sentence2")
# 20: below the longest text (22 tokens: alone); 60 and 100: runs of 3 to 8 texts
BUDGETS = (20, 60, 100)

MiniBatches = list[tuple[tuple[str, ...], list[int]]]


def trainer_of(
    model_dir: Path, tmp_path: Path, padding_free: str = "auto", **settings: Any
) -> BaseTrainer:
    """Our trainer of in-batch InfoNCE on :data:`PAIRS` with ``settings``."""
    encoder = SentenceEncoder.from_pretrained(model_dir, padding_free=padding_free)
    name = "-".join(f"{key}={value}" for key, value in settings.items()) or "plain"
    args = quick_training_args(BaseConfig, tmp_path / name, **settings)
    args.loss = "infonce"
    return BaseTrainer(encoder, args, train_dataset=PAIRS)


def whole_batch(trainer: BaseTrainer) -> dict[str, torch.Tensor]:
    return trainer.data_collator([PAIRS[i] for i in range(len(PAIRS))])


def ours(model_dir: Path, tmp_path: Path, budget: int, rule: str) -> MiniBatches:
    """Our mini-batches of the whole of :data:`PAIRS` (tokenized by our collator)."""
    trainer = trainer_of(model_dir, tmp_path, gradient_cache_tokens=budget)
    columns = split_features(whole_batch(trainer), COLUMNS)
    return [
        (chunk.columns, chunk.rows.tolist())
        for chunk in plan_mini_batches(columns, None, budget, rule)
    ]


@pytest.fixture(scope="module")
def peer_model(tiny_bert_dir: Path) -> Any:
    """sentence-transformers' own model on the tiny BERT folder (mean pooling)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(tiny_bert_dir), device="cpu")


def peer_mini_batches(model: Any, budget: int) -> tuple[MiniBatches, list[list[int]]]:
    """The mini-batches the peer's ``CachedMultipleNegativesRankingLoss`` with
    ``mini_batch_num_tokens=budget`` embeds :data:`PAIRS` in, in its order (its own
    tokenization and its own mini-batching, watched at ``embed_minibatch``), and its real
    tokens per text of each column."""
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
    )

    loss = CachedMultipleNegativesRankingLoss(model, mini_batch_num_tokens=budget)
    features = [model.preprocess(PAIRS[column]) for column in COLUMNS]
    names = {id(feature): column for feature, column in zip(features, COLUMNS, strict=True)}
    seen: MiniBatches = []
    embed = loss.embed_minibatch

    def watched(sentence_feature: dict, begin: int, end: int, **rest: Any) -> Any:
        seen.append(((names[id(sentence_feature)],), list(range(begin, end))))
        return embed(sentence_feature=sentence_feature, begin=begin, end=end, **rest)

    loss.embed_minibatch = watched  # type: ignore[method-assign, assignment]
    with torch.no_grad():  # the first pass only: the mini-batches, no backward hook
        loss(features, torch.zeros(len(PAIRS)))
    tokens = [feature["attention_mask"].sum(dim=1).tolist() for feature in features]
    return seen, tokens


@pytest.mark.parametrize("budget", BUDGETS)
def test_the_per_column_rule_makes_the_peer_s_mini_batches_and_sorted_does_not(
    budget: int, tiny_bert_dir: Path, peer_model: Any, tmp_path: Path
) -> None:
    peer, peer_tokens = peer_mini_batches(peer_model, budget)
    trainer = trainer_of(tiny_bert_dir, tmp_path, gradient_cache_tokens=budget)
    columns = split_features(whole_batch(trainer), COLUMNS)
    # the same texts make the same tokens on both sides
    assert [columns[c]["attention_mask"].sum(dim=1).tolist() for c in COLUMNS] == peer_tokens
    assert len(peer) > 2  # several mini-batches per column: the budget matters

    assert ours(tiny_bert_dir, tmp_path, budget, "per_column") == peer

    # sorted: other mini-batches. Each embeds every column, and the rows that go together
    # in a column are not the peer's runs of consecutive rows
    mine = ours(tiny_bert_dir, tmp_path, budget, "sorted")
    assert all(chunk_columns == COLUMNS for chunk_columns, _ in mine)
    for column in COLUMNS:
        peer_groups = {frozenset(rows) for (name,), rows in peer if name == column}
        assert {frozenset(rows) for _, rows in mine} != peer_groups, column


def test_the_per_column_rule_is_the_peer_s_ranges_on_random_lengths() -> None:
    """Against the peer's own splitting function (``_minibatch_ranges``, which its
    ``Cached*`` losses call per column) on 300 random batches: lengths 1 to 30 per text,
    right padding, budgets from below the shortest text to above the whole column."""
    from sentence_transformers.base.losses.gradcache import _minibatch_ranges

    generator = torch.Generator().manual_seed(0)
    for _ in range(300):
        rows = int(torch.randint(1, 20, (1,), generator=generator))
        budget = int(torch.randint(1, 200, (1,), generator=generator))
        columns = {}
        for name in COLUMNS:
            lengths = torch.randint(1, 31, (rows,), generator=generator)
            mask = (torch.arange(30)[None, :] < lengths[:, None]).long()
            columns[name] = {"input_ids": mask * 7, "attention_mask": mask}
        peer = [
            ((name,), list(range(begin, end)))
            for name, features in columns.items()
            for begin, end in _minibatch_ranges(dict(features), 32, budget)
        ]
        ours = [
            (chunk.columns, chunk.rows.tolist())
            for chunk in plan_mini_batches(columns, None, budget, "per_column")
        ]
        assert ours == peer, (budget, [columns[c]["attention_mask"].sum(1) for c in COLUMNS])


def test_a_text_over_the_budget_goes_alone_in_the_per_column_rule(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """Budget 20: the 22-token text of sentence1 (row 6) is a mini-batch of its own, as in
    the peer (checked above with the same budget), and no mini-batch goes over 20 else."""
    trainer = trainer_of(tiny_bert_dir, tmp_path, gradient_cache_tokens=20)
    columns = split_features(whole_batch(trainer), COLUMNS)
    chunks = ours(tiny_bert_dir, tmp_path, 20, "per_column")
    assert (("sentence1",), [6]) in chunks
    for (name,), rows in chunks:
        tokens = columns[name]["attention_mask"][rows].sum()
        assert len(rows) == 1 or int(tokens) <= 20
    assert sorted(row for (name,), rows in chunks if name == "sentence2" for row in rows) == list(
        range(16)
    )


def loss_and_gradients(
    model_dir: Path, tmp_path: Path, padding_free: str, **settings: Any
) -> tuple[torch.Tensor, dict[str, torch.Tensor], list[tuple[tuple[str, ...], int]]]:
    """One training step of in-batch InfoNCE on :data:`PAIRS` through the trainer: its loss,
    its gradients and the forwards the encoder ran (the columns of each, its rows)."""
    trainer = trainer_of(model_dir, tmp_path / padding_free, padding_free, **settings)
    encoder = trainer.model
    forwards: list[tuple[tuple[str, ...], int]] = []
    forward = encoder.forward

    def watched(*args: Any, **kwargs: Any) -> Any:
        columns = kwargs["columns"]
        rows = {features["input_ids"].shape[0] for features in columns.values()}
        forwards.append((tuple(columns), rows.pop()))
        return forward(*args, **kwargs)

    encoder.forward = watched
    encoder.train()
    torch.manual_seed(0)
    loss = trainer.compute_loss(encoder, whole_batch(trainer))
    loss.backward()
    grads = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
    return loss.detach(), grads, forwards


@pytest.mark.parametrize("padding_free", ["auto", "false"])
def test_the_per_column_rule_gives_the_loss_and_gradients_of_the_uncached_step(
    padding_free: str,
    tiny_bert_nodropout_dir: Path,
    tiny_bert_dir: Path,
    peer_model: Any,
    tmp_path: Path,
) -> None:
    """Dropout off: the step cached by the per-column rule (budget 60) has the loss and
    gradients of the same loss without caching, packed (auto: the block mask on a CPU) and
    padded; its forwards are the peer's mini-batches, once without gradient and once again
    in the backward pass."""
    whole_loss, whole, plain = loss_and_gradients(tiny_bert_nodropout_dir, tmp_path, padding_free)
    assert plain == [(COLUMNS, 16)]  # one forward of the whole batch
    loss, cached, forwards = loss_and_gradients(
        tiny_bert_nodropout_dir,
        tmp_path,
        padding_free,
        gradient_cache_tokens=60,
        gradient_cache_token_rule="per_column",
    )
    peer, _ = peer_mini_batches(peer_model, 60)  # the same tokenizer as the folder above
    sizes = [(columns, len(rows)) for columns, rows in peer]
    assert forwards == sizes + sizes
    torch.testing.assert_close(loss, whole_loss, rtol=1e-5, atol=1e-6)
    assert cached.keys() == whole.keys() and len(whole) > 4
    for name, grad in whole.items():
        torch.testing.assert_close(cached[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_the_per_column_rule_with_dropout_gets_the_gradient_of_its_own_masks(
    tiny_bert_dir: Path, peer_model: Any, tmp_path: Path
) -> None:
    """Dropout on: the cached step's loss and gradients are those of the same loss over
    embeddings drawn with gradient, one column's run of rows at a time in the peer's order,
    from the same seed (each replay draws its own mini-batch's masks); a plain step draws
    others."""
    loss, cached, _ = loss_and_gradients(
        tiny_bert_dir,
        tmp_path,
        "auto",
        gradient_cache_tokens=60,
        gradient_cache_token_rule="per_column",
    )
    trainer = trainer_of(tiny_bert_dir, tmp_path / "by-hand")
    encoder, batch = trainer.model, whole_batch(trainer)
    columns = split_features(batch, COLUMNS)
    peer, _ = peer_mini_batches(peer_model, 60)
    encoder.train()
    torch.manual_seed(0)
    parts: dict[str, dict[int, torch.Tensor]] = {column: {} for column in COLUMNS}
    for (column,), rows in peer:
        features = columns[column]
        used = features["attention_mask"][rows].bool().any(dim=0)
        piece = {key: value[rows][:, used] for key, value in features.items()}
        for row, vector in zip(rows, encoder(columns={column: piece})[column], strict=True):
            parts[column][row] = vector
    embeddings = {c: torch.stack([parts[c][row] for row in range(16)]) for c in COLUMNS}
    by_hand = trainer.apply_loss(embeddings, batch.get("labels"))
    by_hand.backward()
    torch.testing.assert_close(loss, by_hand.detach(), rtol=1e-5, atol=1e-6)
    grads = {n: p.grad for n, p in encoder.named_parameters() if p.grad is not None}
    assert cached.keys() == grads.keys() and len(grads) > 4
    for name, grad in grads.items():
        torch.testing.assert_close(cached[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    plain, _, _ = loss_and_gradients(tiny_bert_dir, tmp_path, "auto")
    assert abs(float(plain - loss)) > 1e-5  # dropout is on: the masks matter


def test_the_rule_is_refused_without_a_token_budget_or_if_unknown() -> None:
    for other in ({}, {"gradient_cache_batch_size": 4}):
        message = config_error(BaseConfig, gradient_cache_token_rule="per_column", **other)
        assert "gradient_cache_token_rule: per_column without gradient_cache_tokens" in message
    message = config_error(BaseConfig, gradient_cache_tokens=64, gradient_cache_token_rule="rows")
    assert message == "gradient_cache_token_rule must be one of sorted, per_column, got 'rows'"
    config = config_accepts(
        BaseConfig, gradient_cache_tokens=64, gradient_cache_token_rule="per_column"
    )
    assert config.gradient_cache_token_rule == "per_column"
    assert config_accepts(BaseConfig).gradient_cache_token_rule == "sorted"  # the default
