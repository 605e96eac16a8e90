"""Epoch batches and gradient caching at their edges, each against a value written here:
short global batches split over processes, the sampler's contract with accelerate, the
batches of rank 0 on every process (a stand-in broadcast), the random state a replay
restores, the positions a mini-batch keeps, an unused column, DDP's ``no_sync`` on all but
the last mini-batch, and a scaled backward. Found by the mutation pass
(``tools/mutation.py``)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch

from sts_core.encoder import SentenceEncoder
from sts_core.training import sampler as sampler_module
from sts_core.training.grad_cache import (
    RandomState,
    batch_rows,
    cached_loss,
    mini_batches,
    slice_columns,
)
from sts_core.training.sampler import EpochBatchSampler, shard_global_batch

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def whole_message(call) -> str:
    with pytest.raises(ValueError) as error:
        call()
    return str(error.value)


# ------------------------------------------------------------------------------- sampler
@pytest.mark.parametrize(
    ("batch", "per_device", "processes", "chunks"),
    [
        ([1, 2, 3, 4], 2, 2, [[1, 2], [3, 4]]),
        ([5, 6, 7], 2, 2, [[5, 6], [7]]),
        ([5, 6], 2, 3, [[5], [6], [5]]),
        ([9], 4, 3, [[9], [9], [9]]),
    ],
)
def test_a_global_batch_is_split_over_the_processes(batch, per_device, processes, chunks):
    assert shard_global_batch(batch, per_device, processes) == chunks


def test_the_sampler_rebuilds_each_epoch_as_accelerate_expects() -> None:
    epochs: list[int] = []

    def build(epoch: int) -> list[list[int]]:
        epochs.append(epoch)
        return [[0, 1], [2, 3]]

    sampler = EpochBatchSampler(build, dataset_size=4, per_device=2, processes=1)
    assert sampler.sampler is sampler and sampler.drop_last is False
    assert sampler.batch_size is None
    for _ in range(3):
        assert list(sampler) == [[0, 1], [2, 3]]
    assert epochs == [0, 1, 2]


@pytest.mark.parametrize(
    ("batches", "message"),
    [
        (
            [[0, 1, 2], []],
            "build_epoch_batches returned 2 batches (sizes [0, 3]); expected 2 non-empty "
            "batches of at most 2 indices for 3 rows",
        ),
        (
            [[0, 1], [1]],
            "build_epoch_batches must use every row of the dataset exactly once (3 indices "
            "given for 3 rows)",
        ),
        (  # an empty batch alone, and an oversized one alone
            [[0, 1], []],
            "build_epoch_batches returned 2 batches (sizes [0, 2]); expected 2 non-empty "
            "batches of at most 2 indices for 3 rows",
        ),
        (
            [[0, 1, 2], [0]],
            "build_epoch_batches returned 2 batches (sizes [1, 3]); expected 2 non-empty "
            "batches of at most 2 indices for 3 rows",
        ),
    ],
)
def test_bad_epoch_batches_are_refused_with_their_whole_message(batches, message) -> None:
    sampler = EpochBatchSampler(lambda epoch: batches, dataset_size=3, per_device=2, processes=1)
    assert whole_message(lambda: list(sampler)) == message


@pytest.mark.parametrize("this_rank", [0, 1])
def test_every_process_takes_the_batches_of_rank_0(monkeypatch, this_rank: int) -> None:
    sent: list[tuple] = []
    from_rank_0 = [[3, 2], [1, 0]]

    def broadcast_object_list(payload, src=None):
        sent.append((list(payload), src))
        if this_rank != 0:
            payload[0] = from_rank_0

    monkeypatch.setattr(sampler_module, "world_size", lambda: 2)
    monkeypatch.setattr(sampler_module, "rank", lambda: this_rank)
    monkeypatch.setattr(torch.distributed, "broadcast_object_list", broadcast_object_list)
    own = [[0, 1], [2, 3]]
    got = sampler_module._from_main_process(own)
    assert got == (own if this_rank == 0 else from_rank_0)
    assert sent == [([own if this_rank == 0 else None], 0)]


# ------------------------------------------------------------------------ gradient cache
def test_a_replay_draws_the_saved_numbers_and_restores_the_surrounding_state() -> None:
    torch.manual_seed(0)
    state = RandomState()
    first = torch.rand(2)
    after = torch.rand(5)
    with state:
        replayed = torch.rand(2)
    following = torch.rand(2)
    torch.manual_seed(0)
    torch.rand(2)
    torch.rand(5)
    assert torch.equal(replayed, first)
    assert torch.equal(following, torch.rand(2)) and not torch.equal(following, after[:2])


def test_batch_rows_and_mini_batch_sizes_are_checked() -> None:
    columns = {"a": {"input_ids": torch.zeros(2, 3)}, "b": {"input_ids": torch.zeros(3, 3)}}
    assert whole_message(lambda: batch_rows(columns)).startswith(
        "the text columns of a batch have different numbers of rows: {"
    )
    assert [chunk.tolist() for chunk in mini_batches(3, 1)] == [[0], [1], [2]]
    assert whole_message(lambda: mini_batches(3, 0)) == (
        "the mini-batch size must be at least 1, got 0"
    )


def test_a_mini_batch_keeps_the_positions_some_row_uses_and_other_features_whole() -> None:
    features = {
        "input_ids": torch.tensor([[1, 2, 0], [3, 0, 0], [4, 5, 6]]),
        "attention_mask": torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]]),
        "row_id": torch.tensor([7, 8, 9]),
        "extra": torch.tensor([[10], [11], [12]]),
    }
    piece = slice_columns({"s": features}, torch.tensor([0, 1]))["s"]
    assert piece["input_ids"].tolist() == [[1, 2], [3, 0]]
    assert piece["attention_mask"].tolist() == [[1, 1], [1, 0]]
    assert piece["row_id"].tolist() == [7, 8] and piece["extra"].tolist() == [[10], [11]]


class NoSyncRecorder(torch.nn.Module):
    """A DDP stand-in: the encoder, with a ``no_sync`` that counts its uses."""

    def __init__(self, encoder: SentenceEncoder) -> None:
        super().__init__()
        self.encoder, self.no_sync_calls = encoder, 0

    def forward(self, **kwargs):
        return self.encoder(**kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        self.no_sync_calls += 1
        yield


def test_the_cached_backward_skips_ddp_sync_but_for_the_last_mini_batch_and_scales(
    tiny_bert_nodropout_dir: Path,
) -> None:
    """Three mini-batches: no_sync around the first two; a loss that reads one column only
    (the other's gradient is 0); backward of 3·loss gives 3× the plain gradients."""
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir).train()
    texts = ["a man plays", "the dog runs", "a cat eats", "the boy sits", "a girl swims"]
    columns = {"sentence1": encoder.tokenize(texts), "sentence2": encoder.tokenize(texts[::-1])}
    model = NoSyncRecorder(encoder)

    def loss_of(embeddings):
        return embeddings["sentence1"].pow(2).sum()

    loss, _ = cached_loss(model, columns, loss_of, mini_batch_size=2)
    (3 * loss).backward()
    assert model.no_sync_calls == 2
    cached = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
    encoder.zero_grad()
    plain = 3 * loss_of(encoder(columns=columns))
    plain.backward()
    for name, parameter in encoder.named_parameters():
        if parameter.grad is not None:
            torch.testing.assert_close(cached[name], parameter.grad, rtol=1e-4, atol=1e-6)
