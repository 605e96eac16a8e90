"""The epoch-aware batch sampler hook: rebuilt at every epoch from the current model, its
batches used in order, split per process in rank order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from sts_core.encoder import SentenceEncoder
from sts_core.testing import quick_training_args
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training.sampler import EpochBatchSampler, shard_global_batch

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SENTENCES = ["a man plays", "the dog runs", "a cat eats", "the boy sits", "a woman eats food"]


def tiny_dataset(n: int = 10) -> Dataset:
    return Dataset.from_dict(
        {
            "sentence1": [SENTENCES[i % 5] for i in range(n)],
            "sentence2": [SENTENCES[(i + 1) % 5] + " on the street" for i in range(n)],
            "score": [i / n for i in range(n)],  # row i has score i / n: its id in the batch
        }
    )


class RecordingTrainer(BaseTrainer):
    """Batches by similarity of the current model's embeddings to row 0 (as BSC's
    example-based shuffling does with k-NN), recording each call and each batch seen."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[int, float]] = []
        self.seen: list[list[int]] = []

    def build_epoch_batches(self, dataset, epoch):
        encoder = self.accelerator.unwrap_model(self.model)
        vectors = torch.as_tensor(encoder.encode(dataset["sentence1"], show_progress_bar=False))
        weight_sum = float(sum(p.detach().double().sum() for p in encoder.parameters()))
        self.calls.append((epoch, weight_sum))
        order = torch.argsort(vectors @ vectors[0], descending=True).tolist()
        size = self.args.per_device_train_batch_size
        self.expected = [order[i : i + size] for i in range(0, len(order), size)]
        return self.expected

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        n = len(self.train_dataset)
        self.seen.append(sorted(round(float(x) * n) for x in inputs["labels"]))
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def test_batches_are_rebuilt_each_epoch_from_the_current_model(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = quick_training_args(
        BaseConfig, tmp_path, per_device_train_batch_size=4, num_train_epochs=2, max_steps=-1
    )
    trainer = RecordingTrainer(model=encoder, args=args, train_dataset=tiny_dataset())
    trainer.train()
    assert [epoch for epoch, _ in trainer.calls] == [0, 1]
    assert trainer.calls[0][1] != trainer.calls[1][1]  # epoch 1 saw the trained weights
    assert len(trainer.seen) == 6  # 3 batches (4, 4, 2) an epoch
    assert trainer.seen[3:] == [sorted(b) for b in trainer.expected]  # in the hook's order


def test_a_resumed_run_sees_the_batches_the_interrupted_epoch_was_built_with(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """Batches built from the model at the start of an epoch are saved with each checkpoint
    (``epoch_batches.json``): a run resumed mid-epoch takes them, not batches rebuilt from
    the checkpoint's weights, and so takes the same steps."""
    from sts_core.training.checkpoints import EPOCH_BATCHES_NAME

    def run(output_dir: Path, resume: Path | None = None) -> RecordingTrainer:
        encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
        args = quick_training_args(
            BaseConfig,
            output_dir,
            per_device_train_batch_size=2,
            num_train_epochs=1,
            max_steps=-1,
            learning_rate=0.05,
            save_strategy="steps",
            save_steps=2,
            save_total_limit=None,
        )
        trainer = RecordingTrainer(model=encoder, args=args, train_dataset=tiny_dataset())
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        return trainer

    full = run(tmp_path / "full")
    checkpoint = tmp_path / "full" / "checkpoint-2"
    saved = json.loads((checkpoint / EPOCH_BATCHES_NAME).read_text(encoding="utf-8"))
    assert saved == {"epoch": 0, "batches": full.expected}
    resumed = run(tmp_path / "resumed", resume=checkpoint)
    assert resumed.calls == []  # the checkpoint's batches, not the trained model's
    assert resumed.seen == full.seen[2:]


def test_a_wrong_number_of_batches_is_an_error() -> None:
    sampler = EpochBatchSampler(lambda epoch: [[0, 1, 2, 3]], dataset_size=10, per_device=4)
    with pytest.raises(ValueError, match="returned 1 batches"):
        list(sampler)


def test_global_batches_are_split_per_process_in_rank_order() -> None:
    assert shard_global_batch([5, 6, 7, 8, 9, 10], 3, 2) == [[5, 6, 7], [8, 9, 10]]
    assert shard_global_batch([5, 6, 7], 3, 2) == [[5, 6], [7]]  # the short last batch
    assert shard_global_batch([5], 3, 2) == [[5], [5]]  # no empty chunk
    sampler = EpochBatchSampler(
        lambda epoch: [[0, 1, 2, 3], [4, 5]], dataset_size=6, per_device=2, processes=2
    )
    assert len(sampler) == 4
    assert list(sampler) == [[0, 1], [2, 3], [4], [5]]  # rank 0 gets 0 and 2, rank 1 gets 1, 3
    assert sampler.epoch == 1


@pytest.mark.parametrize(
    ("sizes", "rows"),
    [([4, 4, 2], 10), ([2, 4, 4], 10), ([1, 4, 4], 9), ([4, 4, 4], 12)],  # short ones anywhere
)
def test_every_row_reaches_one_process_through_accelerates_sharding(
    sizes: list[int], rows: int
) -> None:
    """What accelerate does with the sampler under 2 processes (BatchSamplerShard with
    even batches): every row is trained on by exactly one process, and both processes
    take the same number of steps (a different count would hang DDP)."""
    from accelerate.data_loader import BatchSamplerShard

    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    batches = [list(range(start, start + size)) for start, size in zip(starts, sizes, strict=True)]
    per_rank = []
    for rank in (0, 1):
        sampler = EpochBatchSampler(lambda epoch: batches, rows, per_device=2, processes=2)
        shard = BatchSamplerShard(sampler, num_processes=2, process_index=rank)
        per_rank.append(list(shard))
        assert len(shard) == len(per_rank[-1])
    assert len(per_rank[0]) == len(per_rank[1]) == len(batches)
    seen = sorted(i for rank in per_rank for batch in rank for i in batch)
    assert set(seen) == set(range(rows))


def test_batches_must_cover_every_row_once() -> None:
    sampler = EpochBatchSampler(lambda epoch: [[0, 1, 2, 3], [3, 4]], dataset_size=6, per_device=4)
    with pytest.raises(ValueError, match="every row of the dataset exactly once"):
        list(sampler)


@pytest.mark.parametrize("data_seed", [None, 7])
def test_the_default_sampler_gives_the_trainers_rows_in_its_order_a_chunk_at_a_time(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_seed
) -> None:
    """One training set, no batch plan: the rows of each epoch in the order transformers'
    Trainer draws them (accelerate's seedable sampler, seeded by ``seed`` or
    ``data_seed``), handed out a chunk of the permutation at a time."""
    from transformers import Trainer, set_seed

    from sts_core.training import sampler as sampler_module

    monkeypatch.setattr(sampler_module, "ROWS_AT_A_TIME", 7)
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)

    def epochs(trainer_class: type) -> list[list[int]]:
        set_seed(3)
        args = quick_training_args(
            BaseConfig, tmp_path, per_device_train_batch_size=4, seed=3, data_seed=data_seed
        )
        trainer = trainer_class(model=encoder, args=args, train_dataset=tiny_dataset(50))
        loader = trainer.get_train_dataloader()
        rows = []
        for epoch in range(3):
            loader.set_epoch(epoch)
            rows.append([row for batch in loader.batch_sampler for row in batch])
        return rows, loader.batch_sampler.sampler

    ours, our_sampler = epochs(BaseTrainer)
    theirs, their_sampler = epochs(Trainer)
    assert type(our_sampler) is sampler_module.RandomRows
    assert type(their_sampler).__name__ == "SeedableRandomSampler"
    assert ours == theirs
    assert all(sorted(rows) == list(range(50)) for rows in ours)
    assert ours[0] != ours[1]


def test_without_the_seedable_sampler_the_trainers_own_sampler_serves(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    from torch.utils.data import RandomSampler

    args = quick_training_args(
        BaseConfig,
        tmp_path,
        per_device_train_batch_size=4,
        accelerator_config={"non_blocking": True, "use_seedable_sampler": False},
    )
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=tiny_dataset(20))
    assert type(trainer.get_train_dataloader().batch_sampler.sampler) is RandomSampler


def test_random_rows_iterated_without_set_epoch_go_on_to_the_next_epoch() -> None:
    """As accelerate's seedable sampler: each pass draws the next epoch's order."""
    from accelerate.data_loader import SeedableRandomSampler

    from sts_core.training.sampler import RandomRows

    ours = RandomRows(30, data_seed=5)
    theirs = SeedableRandomSampler(range(30), data_seed=5)
    passes = [(list(ours), list(theirs)) for _ in range(3)]
    assert all(a == b for a, b in passes)
    assert passes[0][0] != passes[1][0] != passes[2][0]
