"""The core's seams for Pcc-tuning (and the methods after it): gradient caching (the same
loss and gradients as the whole batch), the prompt kept whole when a sentence is cut,
the count of training pairs that are test pairs, the evaluation's sentence edit and the
InfoNCE/gather options shared by method configs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from torch import nn

from sts_core.encoder import SentenceEncoder
from sts_core.evaluation.sentence_edits import check_sentence_edit, pcc_tuning_edit
from sts_core.evaluation.sts import STSEvaluator
from sts_core.testing import quick_training_args
from sts_core.training import BaseConfig, BaseTrainer, DataArguments
from sts_core.training.data import build_train_dataset
from sts_core.training.grad_cache import (
    RandomState,
    mini_batches,
    slice_columns,
    token_mini_batches,
)
from sts_core.training.trainer import check_gradient_cache

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TRIPLETS = Dataset.from_dict(
    {
        "sentence1": [f"a man plays a guitar {i}" for i in range(10)],
        "sentence2": [f"a man plays music {'and sings ' * (i % 3)}{i}" for i in range(10)],
        "hard_negative": [f"a dog sleeps {i}" for i in range(10)],
    }
)


# ----------------------------------------------------------------- gradient caching
def loss_and_gradients(model_dir: Path, tmp_path: Path, cache: int | None, **model_options):
    encoder = SentenceEncoder.from_pretrained(model_dir, **model_options)
    args = quick_training_args(
        BaseConfig, tmp_path / f"out-{cache}", gradient_cache_batch_size=cache
    )
    args.loss = "infonce"  # the core's InfoNCE with the hard-negative column (Pcc-tuning eq. 8)
    trainer = BaseTrainer(encoder, args, train_dataset=TRIPLETS)
    batch = trainer.data_collator([TRIPLETS[i] for i in range(len(TRIPLETS))])
    encoder.train()
    loss = trainer.compute_loss(encoder, batch)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
    return loss.detach(), grads


@pytest.mark.parametrize("model", ["bert", "llama"])
def test_gradient_cache_gives_the_loss_and_gradients_of_the_whole_batch(
    model: str, tiny_bert_nodropout_dir: Path, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    """Mini-batches of 3 (the last of 1), padded differently from the whole batch: the
    same loss and gradients (dropout off; a left-padded decoder with last-token pooling
    and a prompt too)."""
    if model == "bert":
        folder, options = tiny_bert_nodropout_dir, {}
    else:
        folder = tiny_llama_dir
        options = {"pooling": "last_token", "prompt": "promptsth", "padding_side": "left"}
    whole_loss, whole = loss_and_gradients(folder, tmp_path, None, **options)
    cached_loss, cached = loss_and_gradients(folder, tmp_path, 3, **options)
    torch.testing.assert_close(cached_loss, whole_loss, rtol=1e-5, atol=1e-6)
    assert cached.keys() == whole.keys() and len(whole) > 4
    for name, grad in whole.items():
        torch.testing.assert_close(cached[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_replayed_random_state_draws_the_same_dropout_mask() -> None:
    dropout = nn.Dropout(0.5)
    x = torch.ones(64)
    state = RandomState(x)
    first = dropout(x)
    different = dropout(x)
    with state:
        replayed = dropout(x)
    assert torch.equal(first, replayed) and not torch.equal(first, different)
    assert not torch.equal(dropout(x), replayed)  # the surrounding state went on


def test_mini_batches_cover_the_batch_and_slices_drop_shared_padding() -> None:
    assert [c.tolist() for c in mini_batches(7, 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    with pytest.raises(ValueError, match="at least 1"):
        mini_batches(4, 0)
    mask = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]])  # left padding
    columns = {"sentence1": {"input_ids": mask * 7, "attention_mask": mask}}
    piece = slice_columns(columns, torch.tensor([1, 2]))["sentence1"]
    assert piece["attention_mask"].tolist() == [[1, 1], [0, 1]]
    assert piece["input_ids"].tolist() == [[7, 7], [0, 7]]


def test_token_mini_batches_sort_rows_by_length_and_fill_the_budget() -> None:
    """Rows by their real tokens over all text columns, longest first (ties in batch
    order); a mini-batch takes rows while their tokens fit the budget, a longer row alone."""
    first = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 1, 0, 0]])
    second = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 0, 0]])
    columns = {"sentence1": {"attention_mask": first}, "sentence2": {"attention_mask": second}}
    # tokens per row: 5, 6, 3, 4
    assert [c.tolist() for c in token_mini_batches(columns, 11)] == [[1, 0], [3, 2]]
    assert [c.tolist() for c in token_mini_batches(columns, 5)] == [[1], [0], [3], [2]]
    assert [c.tolist() for c in token_mini_batches(columns, 100)] == [[1, 0, 3, 2]]
    ties = {"sentence1": {"attention_mask": torch.ones(4, 2, dtype=torch.long)}}
    assert [c.tolist() for c in token_mini_batches(ties, 4)] == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="token budget must be at least 1"):
        token_mini_batches(columns, 0)


def test_gradient_cache_refuses_deepspeed_and_losses_with_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="gradient_cache_batch_size must be at least 1"):
        quick_training_args(BaseConfig, tmp_path, gradient_cache_batch_size=0)
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    pytest.importorskip("deepspeed", reason="DeepSpeed is an extra: sts-core[deepspeed]")
    with pytest.raises(ValueError, match="gradient_cache_batch_size with DeepSpeed"):
        quick_training_args(BaseConfig, tmp_path, gradient_cache_batch_size=4)
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED")
    args = quick_training_args(BaseConfig, tmp_path, gradient_cache_batch_size=4)
    with pytest.raises(ValueError, match="has a head or parameters of its own"):
        check_gradient_cache(args, nn.Linear(2, 1), "softmax")
    check_gradient_cache(args, nn.Module(), "infonce")  # no parameters: fine


def test_a_token_budget_for_the_gradient_cache_is_checked_as_the_row_count_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="gradient_cache_tokens must be at least 1"):
        quick_training_args(BaseConfig, tmp_path, gradient_cache_tokens=0)
    with pytest.raises(ValueError, match="both size the gradient cache's mini-batches"):
        quick_training_args(
            BaseConfig, tmp_path, gradient_cache_tokens=512, gradient_cache_batch_size=4
        )
    args = quick_training_args(BaseConfig, tmp_path, gradient_cache_tokens=512)
    with pytest.raises(ValueError, match="gradient_cache_tokens with loss softmax, which has"):
        check_gradient_cache(args, nn.Linear(2, 1), "softmax")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    pytest.importorskip("deepspeed", reason="DeepSpeed is an extra: sts-core[deepspeed]")
    with pytest.raises(ValueError, match="gradient_cache_tokens with DeepSpeed"):
        quick_training_args(BaseConfig, tmp_path, gradient_cache_tokens=512)


# ----------------------------------------------------------------- prompts and truncation
def test_a_long_sentence_is_cut_inside_the_prompt(tiny_llama_dir: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(
        tiny_llama_dir, pooling="last_token", prompt="promptsth", max_length=12
    )
    long = "a man plays a guitar and a man plays a guitar and a dog sleeps"
    tokens = encoder.tokenize([long, "a dog"])
    assert tokens["input_ids"].shape[1] == 12
    for row, mask in zip(tokens["input_ids"], tokens["attention_mask"], strict=True):
        text = encoder.tokenizer.decode(row[mask.bool()])
        assert text.endswith("means something"), text
    with pytest.raises(ValueError, match="leaves no room for the sentence"):
        SentenceEncoder.from_pretrained(
            tiny_llama_dir, pooling="last_token", prompt="promptsth", max_length=4
        ).tokenize(["a dog"])


# ----------------------------------------------------------------- test-pair overlap
@pytest.mark.real_data
def test_with_the_filter_off_the_run_counts_training_pairs_that_are_test_pairs(
    sts_data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_args = DataArguments(data_dir=str(sts_data_dir), train_datasets=["stsb", "sickr"])
    with caplog.at_level(logging.WARNING):
        train, summary = build_train_dataset(data_args)
    overlap = summary["test_overlap"]
    assert overlap["of"] == len(train) == 10249
    filtered = DataArguments(
        data_dir=str(sts_data_dir), train_datasets=["stsb", "sickr"], filter_test_overlap=True
    )
    _, kept = build_train_dataset(filtered)
    assert overlap["pairs"] == kept["filter"]["removed"] == 10249 - 5398
    assert "test_overlap" not in kept
    assert f"{overlap['pairs']} of 10249 training pairs also occur" in caplog.text


# ----------------------------------------------------------------- the evaluation's edit
@pytest.mark.parametrize(
    ("sentence", "edited"),
    [
        ("A man plays", "A man plays."),
        ('He said "hi"', "He said 'hi'"),
        ("Is it raining?", "Is it raining."),
        ("Done.", "Done."),
        ("It's 'quoted'", "It's 'quoted'"),
        ("", ""),
    ],
)
def test_the_pcc_tuning_sentence_edit_follows_the_authors_script(
    sentence: str, edited: str
) -> None:
    assert pcc_tuning_edit(sentence) == edited


def test_the_sts_evaluator_applies_and_records_the_edit() -> None:
    data = Dataset.from_dict(
        {"sentence1": ["a b", "c d?", "e"], "sentence2": ["a b", "x", "e f"], "score": [5, 1, 3]}
    )
    seen: list[str] = []

    def encode(sentences):
        seen.extend(sentences)
        return torch.randn(len(sentences), 4).numpy()

    report = STSEvaluator(tasks=["toy"], datasets={"toy": data}, sentence_edit="pcc-tuning")(encode)
    assert seen[:3] == ["a b.", "c d.", "e."]
    assert report.to_dict()["sentence_edit"] == "pcc-tuning"
    assert "edited" in report.to_markdown()
    with pytest.raises(ValueError, match="unknown sentence edit"):
        check_sentence_edit("mine")
    with pytest.raises(ValueError, match="unknown sentence edit"):
        DataArguments(final_sts_sentence_edit="mine")
