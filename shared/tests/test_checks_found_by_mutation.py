"""Checks whose tests the mutation pass of 2026-11-27 found missing (``tools/mutation.py``,
commit 707087f): a loss built from the config fields named like its arguments, the shape
check of ``pairwise_cosine``, the teacher's run-time check and its whole messages, and the
epoch sampler's check of the rows a method's batches use."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset

from sts_core.losses import EmbeddingLoss, loss_class, pairwise_cosine
from sts_core.training.distill import check_teacher
from sts_core.training.multi_dataset import TrainDatasets, TrainSet
from sts_core.training.sampler import EpochBatchSampler


# ----------------------------------------------------------------- from_config
class ArgumentsLoss(EmbeddingLoss):
    def __init__(self, margin: float = 0.1, *parts: float, scale: float = 2.0, **rest) -> None:
        super().__init__()
        self.margin, self.scale, self.parts, self.rest = margin, scale, parts, rest

    def forward(self, embeddings, labels):
        return torch.tensor(0.0)


def test_a_loss_reads_the_config_fields_named_like_its_arguments() -> None:
    loss = ArgumentsLoss.from_config(SimpleNamespace(margin=0.3, scale=5.0, parts=(9.0,)))
    assert (loss.margin, loss.scale, loss.parts, loss.rest) == (0.3, 5.0, (), {})
    kept = ArgumentsLoss.from_config(SimpleNamespace(scale=7.0))  # a field the config lacks
    assert (kept.margin, kept.scale) == (0.1, 7.0)


# ----------------------------------------------------------------- pairwise_cosine
def test_pairwise_cosine_refuses_other_shapes_naming_both() -> None:
    message = "expected two (N, d) embedding tensors of the same shape, got (2, 3, 4) and (2, 3, 4)"
    with pytest.raises(ValueError) as three_d:
        pairwise_cosine(torch.ones(2, 3, 4), torch.ones(2, 3, 4))
    assert str(three_d.value) == message
    with pytest.raises(ValueError) as mismatched:
        pairwise_cosine(torch.ones(2, 3), torch.ones(2, 4))
    assert str(mismatched.value) == message.replace("(2, 3, 4) and (2, 3, 4)", "(2, 3) and (2, 4)")
    assert pairwise_cosine(torch.ones(2, 3), torch.ones(2, 3)).tolist() == pytest.approx([1, 1])


# ----------------------------------------------------------------- the teacher's check
PAIRS = Dataset.from_dict({"sentence1": ["a", "b"], "sentence2": ["c", "d"], "score": [0.5, 2.0]})


def teacher_config(folder, weight: float = 1.0) -> SimpleNamespace:
    return SimpleNamespace(teacher_model=str(folder), teacher_weight=weight)


def test_the_teacher_check_refuses_a_mapping_and_a_loss_without_scores(tiny_bert_dir) -> None:
    sets = TrainDatasets([TrainSet("a", PAIRS, "cosine_mse")])
    with pytest.raises(ValueError) as mapping:
        check_teacher(teacher_config(tiny_bert_dir), loss_class("cosine_mse"), "score", sets)
    assert str(mapping.value) == (
        "teacher_model with train_datasets as a mapping: distillation relabels one "
        "training set; give train_datasets as a list"
    )
    with pytest.raises(ValueError) as classes:
        check_teacher(teacher_config(tiny_bert_dir), loss_class("softmax"), "label", PAIRS)
    assert str(classes.value) == (
        "teacher_model gives each pair a similarity score, but loss softmax reads class "
        "labels: use a loss over scores (cosine_mse, cosent, pearson, …)"
    )
    with pytest.raises(ValueError, match="reads no labels"):
        check_teacher(teacher_config(tiny_bert_dir), loss_class("infonce"), "score", PAIRS)


def test_the_teacher_check_reads_the_label_kind_under_the_config_and_passes_the_weight(
    tiny_bert_dir,
) -> None:
    seen = []

    class ScoresUnderThisConfig(EmbeddingLoss):
        label_kind = None

        @classmethod
        def required_label_kind(cls, config):
            seen.append(config)
            return "score" if config is not None else None

        def forward(self, embeddings, labels):
            return torch.tensor(0.0)

    config = teacher_config(tiny_bert_dir, weight=0.5)
    with pytest.raises(ValueError) as outside:
        check_teacher(config, ScoresUnderThisConfig, "score", PAIRS)
    assert seen == [config]
    assert str(outside.value).startswith("teacher_weight 0.5 < 1 mixes the teacher's cosine")
    check_teacher(teacher_config(tiny_bert_dir), ScoresUnderThisConfig, "score", PAIRS)


# ----------------------------------------------------------------- the epoch sampler
def rows_used(batches: list[list[int]], dataset_size: int = 4) -> str:
    sampler = EpochBatchSampler(
        lambda epoch: batches, dataset_size, per_device=2, processes=1, num_batches=2,
        every_row=False,
    )  # fmt: skip
    with pytest.raises(ValueError) as refused:
        list(sampler)
    return str(refused.value)


def test_the_sampler_refuses_rows_outside_the_dataset_or_used_twice() -> None:
    message = (
        "the epoch's batches must use each of the 4 rows at most once "
        "({} indices given, {} distinct)"
    )
    assert rows_used([[0, 1], [2, 4]]) == message.format(4, 4)  # the last row past the end
    assert rows_used([[-1, 1], [2, 3]]) == message.format(4, 4)  # the first before the start
    assert rows_used([[3, 1], [2, 3]]) == message.format(4, 3)  # a row twice, all in range
    sampler = EpochBatchSampler(
        lambda epoch: [[0, 1], [3]], 4, per_device=2, processes=1, num_batches=2,
        every_row=False,
    )  # fmt: skip
    assert [list(b) for b in sampler] == [[0, 1], [3]]  # a row left out is allowed here


# ----------------------------------------------------------------- sts-soup's input checks
def test_a_vocabulary_difference_names_the_first_token_by_id() -> None:
    from sts_core.soup import _vocabulary_difference, check_vocabulary

    reference = {"[PAD]": 0, "a": 1, "b": 2, "c": 3}
    assert _vocabulary_difference(reference, dict(reference)) == ""
    swapped = {"[PAD]": 0, "a": 1, "b": 3, "c": 2}  # "b" is the first id that differs
    assert _vocabulary_difference(reference, swapped) == (
        "token 'b' has id 3, the first model's has id 2"
    )
    missing = {"[PAD]": 0, "a": 1, "c": 3}
    assert _vocabulary_difference(reference, missing) == (
        "token 'b' has no id, the first model's has id 2"
    )
    extra = {**reference, "z": 9, "y": 8}  # the smallest token of those added
    assert _vocabulary_difference(reference, extra) == (
        "token 'y' has id 8, the first model has no such token"
    )
    with pytest.raises(ValueError) as refused:
        check_vocabulary(reference, "/runs/seed0", swapped, "/runs/seed1")
    assert str(refused.value) == (
        "/runs/seed1: its tokenizer differs from /runs/seed0's (token 'b' has id 3, the first "
        "model's has id 2): a soup averages runs of one base model and tokenizer"
    )
    check_vocabulary(reference, "/runs/seed0", dict(reference), "/runs/seed1")


def test_the_tokenizers_of_every_model_are_compared_with_the_first(tiny_bert_dir, tmp_path) -> None:
    import shutil

    from sts_core.soup import check_tokenizers

    folders = []
    for name in ("seed0", "seed1", "seed2"):
        shutil.copytree(tiny_bert_dir, tmp_path / name)
        folders.append(str(tmp_path / name))
    check_tokenizers(folders)
    tokenizer = tmp_path / "seed1" / "tokenizer.json"
    config = json.loads(tokenizer.read_text(encoding="utf-8"))
    vocab = config["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[5:7]
    vocab[first], vocab[second] = vocab[second], vocab[first]  # the second model's only
    tokenizer.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        check_tokenizers(folders)
    message = str(refused.value)
    assert message.startswith(f"{folders[1]}: its tokenizer differs from {folders[0]}'s (")
    (tmp_path / "seed2" / "tokenizer.json").write_text("{", encoding="utf-8")
    with pytest.raises(OSError, match=f"^{folders[2]}: could not load its tokenizer: "):
        check_tokenizers(folders)


def test_the_soups_output_may_not_hold_a_model_or_other_files(tiny_bert_dir, tmp_path) -> None:
    import shutil

    from sts_core.soup import check_inputs

    output = tmp_path / "soup"
    inside = output / "seed0"
    shutil.copytree(tiny_bert_dir, inside)
    shutil.copytree(tiny_bert_dir, tmp_path / "seed1")
    with pytest.raises(ValueError) as holds:
        check_inputs([str(tmp_path / "seed1"), str(inside)], str(output), overwrite=True)
    assert str(holds.value) == (
        f"--output {output} holds {inside}, the input model of sts-soup: writing there would "
        "change what it reads; nothing was written: choose another --output"
    )
    shutil.rmtree(inside)
    shutil.copytree(tiny_bert_dir, tmp_path / "seed0")
    for name in ("e.txt", "d.txt", "c.txt", "b.txt", "a.txt"):
        (output / name).write_text("mine", encoding="utf-8")
    models = [str(tmp_path / "seed0"), str(tmp_path / "seed1")]
    with pytest.raises(ValueError) as others:
        check_inputs(models, str(output), overwrite=True)
    assert str(others.value) == (
        f"--output {output} holds files sts-core did not write (a.txt, b.txt, c.txt, d.txt): "
        "nothing is replaced there; choose a new folder"
    )
    assert check_inputs([*models, "no/such-hub-id"][:2], str(tmp_path / "new"), False) == models


# ----------------------------------------------------------------- the STS evaluator's encode
def test_the_evaluator_names_the_progress_bar_by_task_where_encode_takes_it() -> None:
    from sts_core.evaluation.sts import _as_encode_fn

    calls = []

    class Named:
        def encode(self, sentences, batch_size, show_progress_bar, progress_desc="Encoding"):
            calls.append((batch_size, show_progress_bar, progress_desc))
            return [[1.0]] * len(sentences)

    class Plain:
        def encode(self, sentences, batch_size, show_progress_bar):
            calls.append((batch_size, show_progress_bar))
            return [[1.0]] * len(sentences)

    assert _as_encode_fn(Named(), 8, True)(["a", "b"], "sts12").shape == (2, 1)
    _as_encode_fn(Named(), 8, False)(["a"], "sts13")  # no bar: no name either
    _as_encode_fn(Plain(), 4, True)(["a"], "sts14")
    assert calls == [(8, True, "sts12"), (8, False, "Encoding"), (4, True)]


def test_a_loss_is_described_by_its_title_else_its_name() -> None:
    assert ArgumentsLoss.describe() == "ArgumentsLoss"
    titled = type("Titled", (ArgumentsLoss,), {"title": "margin loss (eq. 3)"})
    assert titled.describe() == "margin loss (eq. 3)"


def test_the_sampler_keeps_the_number_of_batches_it_is_given() -> None:
    sampler = EpochBatchSampler(
        lambda epoch: [[0], [1], [2]], 4, per_device=2, processes=1, num_batches=3,
        every_row=False,
    )  # fmt: skip
    assert len(sampler) == 3 and [list(b) for b in sampler] == [[0], [1], [2]]


def test_a_hub_id_before_a_local_model_does_not_end_the_check(tiny_bert_dir, tmp_path) -> None:
    import shutil

    from sts_core.soup import soup_files

    inside = tmp_path / "soup" / "seed0"
    shutil.copytree(tiny_bert_dir, inside)
    with pytest.raises(ValueError, match="holds .*, the input model of sts-soup"):
        soup_files(["some-user/some-model", str(inside)], str(tmp_path / "soup"), False)


# ----------------------------------------------------------------- the pass of 2026-11-28
# (commit 3651ea2): what its survivors showed untested outside mining.py
def test_a_token_budget_of_one_is_each_row_alone() -> None:
    from sts_core.training.grad_cache import token_mini_batches

    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]])
    columns = {"sentence1": {"input_ids": mask, "attention_mask": mask}}
    assert [c.tolist() for c in token_mini_batches(columns, 1)] == [[2], [0], [1]]
    with pytest.raises(ValueError, match="at least 1, got 0"):
        token_mini_batches(columns, 0)


def test_a_half_precision_cosine_is_computed_in_float32() -> None:
    generator = torch.Generator().manual_seed(0)
    u, v = (torch.randn(5, 8, generator=generator).to(torch.bfloat16) for _ in range(2))
    cosine = pairwise_cosine(u, v)
    assert cosine.dtype == torch.float32
    expected = torch.nn.functional.cosine_similarity(u.float(), v.float(), dim=-1)
    torch.testing.assert_close(cosine, expected)


def test_the_first_vocabulary_difference_is_by_id_not_by_token() -> None:
    from sts_core.soup import _vocabulary_difference

    reference = {"[PAD]": 0, "zebra": 1, "apple": 2}  # id order is not the tokens' order
    other = {"[PAD]": 0, "zebra": 5, "apple": 6}
    assert _vocabulary_difference(reference, other) == (
        "token 'zebra' has id 5, the first model's has id 1"
    )


def test_soup_in_python_names_the_first_model_as_the_reference(tiny_bert_dir, tmp_path) -> None:
    import shutil

    from sts_core.soup import soup

    folders = []
    for name in ("seed0", "seed1", "seed2"):
        shutil.copytree(tiny_bert_dir, tmp_path / name)
        folders.append(str(tmp_path / name))
    tokenizer = tmp_path / "seed2" / "tokenizer.json"  # the third model's alone differs
    config = json.loads(tokenizer.read_text(encoding="utf-8"))
    vocab = config["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[5:7]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    tokenizer.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        soup(folders, str(tmp_path / "soup"))
    assert str(refused.value).startswith(
        f"{folders[2]}: its tokenizer differs from {folders[0]}'s ("
    )


def test_the_progress_bar_of_each_task_is_named_by_the_task() -> None:
    import numpy as np

    from sts_core.evaluation import STSEvaluator

    named = []

    class Encoder:
        def encode(self, sentences, batch_size, show_progress_bar, progress_desc=None):
            named.append(progress_desc)
            return np.array([[len(s), 1.0 + s.count("a")] for s in sentences])

    data = Dataset.from_dict(
        {
            "sentence1": ["a b", "a a", "b"],
            "sentence2": ["a", "b b", "a b a"],
            "score": [1.0, 2.0, 3.0],
        }
    )
    evaluator = STSEvaluator(tasks=["stsb"], datasets={"stsb": data}, show_progress_bar=True)
    evaluator.evaluate(Encoder())
    assert named == ["stsb"]
