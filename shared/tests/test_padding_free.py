"""Padding-free training: packed rows give the padded forward's embeddings and gradients,
only where the backbone allows it, and the trainer embeds all columns in one packed forward."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sts_core.encoder import SentenceEncoder
from sts_core.encoder.packing import TokenPacking, _first_fit_decreasing, concat_features
from sts_core.testing import UNEVEN_SENTENCES, quick_training_args
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training.collator import SentenceCollator, split_features
from sts_core.training.config import ModelArguments
from sts_core.training.encoder_setup import build_encoder

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SENTENCES = UNEVEN_SENTENCES


def encoders(folder: Path, attention: str, pooling: str) -> tuple[SentenceEncoder, ...]:
    """The same weights twice, packed and padded, in training mode (dropout 0)."""
    pair = []
    for padding_free in (True, False):
        encoder = SentenceEncoder.from_pretrained(
            folder, pooling=pooling, padding_free=padding_free, attn_implementation=attention
        )
        pair.append(encoder.train())
    return tuple(pair)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("pooling", ["mean", "cls", "max", "first_last_avg"])
def test_packed_forward_equals_the_padded_one(
    tiny_bert_nodropout_dir: Path, attention: str, pooling: str
) -> None:
    packed, padded = encoders(tiny_bert_nodropout_dir, attention, pooling)
    assert packed.packing_path()[0] != "padded" and padded.packing_path()[0] == "padded"
    features = packed.tokenize(SENTENCES)
    assert int(features["attention_mask"].sum()) < features["attention_mask"].numel()
    target = torch.linspace(-1, 1, packed.dimension)

    results = []
    for encoder in (packed, padded):
        embeddings = encoder(**features)
        (embeddings * target).square().sum().backward()
        grads = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
        results.append((embeddings.detach(), grads))
    (packed_out, packed_grads), (padded_out, padded_grads) = results
    torch.testing.assert_close(packed_out, padded_out, atol=2e-6, rtol=1e-5)
    assert packed_grads.keys() == padded_grads.keys() and len(packed_grads) > 10
    for name, grad in packed_grads.items():
        torch.testing.assert_close(grad, padded_grads[name], atol=1e-5, rtol=1e-4, msg=name)


def test_padding_free_only_in_training_and_for_bert_family(
    tiny_bert_dir: Path, tiny_llama_dir: Path
) -> None:
    bert = SentenceEncoder.from_pretrained(tiny_bert_dir)
    assert bert.padding_free == "auto"
    assert bert.train().packing_path()[0] != "padded"
    assert bert.eval().packing_path()[0] == "padded"  # encode() and evaluation always pad
    off = SentenceEncoder.from_pretrained(tiny_bert_dir, padding_free=False).train()
    assert off.packing_path()[0] == "padded"
    llama = SentenceEncoder.from_pretrained(tiny_llama_dir, pooling="last_token").train()
    assert llama.packing_path()[0] == "padded"  # a decoder: varlen only, no kernel on a CPU


def test_recipe_switches_padding_free_off(tiny_bert_dir: Path) -> None:
    model_args = ModelArguments(model_name_or_path=str(tiny_bert_dir), padding_free=False)
    assert build_encoder(model_args).padding_free == "false"
    assert ModelArguments(model_name_or_path=str(tiny_bert_dir)).padding_free == "auto"


def test_first_fit_decreasing_places_longest_first() -> None:
    # capacity 5: 5 alone; 3 then 2 fill a row; 1 goes to the first row with room
    starts = _first_fit_decreasing([3, 5, 2, 1], capacity=5)
    assert starts == [5, 0, 8, 10]


def test_token_packing_moves_every_real_token_once() -> None:
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]])
    packing = TokenPacking(mask)
    assert (packing.rows, packing.capacity) == (3, 5)  # 4 sentences, 11 tokens, in 3 rows
    ids = torch.arange(1, 21).view(4, 5) * mask
    packed = packing.pack(ids, fill=0)
    assert sorted(packed[packed > 0].tolist()) == sorted(ids[ids > 0].tolist())
    assert packing.position_ids.max() == 4
    # the rows of sentence 2 (2 tokens) and 3 (1 token) share a row with sentence 0 (3)
    row_of_first_token = packing.target[packing.source == 0] // packing.capacity
    assert int((packing.segment[row_of_first_token] >= 0).sum()) == 5
    states = packing.unpack(packed.unsqueeze(-1).float()).squeeze(-1)
    assert torch.equal(states.long(), ids)
    blocks = packing.attention_mask("sdpa", torch.float32)
    assert blocks.shape == (3, 1, 5, 5) and blocks.dtype == torch.bool
    additive = packing.attention_mask("eager", torch.float32)
    assert torch.equal(additive == 0, blocks)


def test_concat_features_pads_narrow_columns() -> None:
    first = {"input_ids": torch.ones(2, 3, dtype=torch.long), "attention_mask": torch.ones(2, 3)}
    second = {"input_ids": torch.ones(3, 5, dtype=torch.long), "attention_mask": torch.ones(3, 5)}
    merged, sizes = concat_features([first, second])
    assert sizes == [2, 3]
    assert merged["input_ids"].shape == (5, 5)
    assert merged["attention_mask"][:2, 3:].sum() == 0 and merged["attention_mask"][2:].all()


def test_trainer_embeds_all_columns_in_one_packed_forward(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    packed, padded = encoders(tiny_bert_nodropout_dir, "sdpa", "mean")
    collator = SentenceCollator(packed)
    rows = [
        {"sentence1": a, "sentence2": b, "score": 1.0}
        for a, b in zip(SENTENCES[:3], SENTENCES[3:], strict=True)
    ]
    batch = collator(rows)
    assert len(split_features(batch)) == 2
    args = quick_training_args(BaseConfig, tmp_path)
    results = []
    for encoder in (packed, padded):
        calls: list[int] = []
        hook = encoder.backbone.register_forward_hook(lambda *_, seen=calls: seen.append(1))
        trainer = BaseTrainer(model=encoder, args=args)
        results.append((trainer.embed(encoder, batch), len(calls)))
        hook.remove()
    (packed_out, packed_calls), (padded_out, padded_calls) = results
    assert (packed_calls, padded_calls) == (1, 2)  # packed: one backbone forward
    for column in ("sentence1", "sentence2"):
        torch.testing.assert_close(packed_out[column], padded_out[column], atol=2e-6, rtol=1e-5)


def test_the_varlen_packing_reads_the_device_once_for_its_shapes() -> None:
    """``VarlenPacking`` reads the lengths in one transfer and sizes ``nonzero`` and
    ``repeat_interleave`` from them: no scalar read, no data-dependent ``nonzero`` (each a
    wait for the GPU); the packing is the one ``nonzero`` would give."""
    from torch.profiler import ProfilerActivity, profile

    from sts_core.encoder.packing import VarlenPacking

    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    with profile(activities=[ProfilerActivity.CPU]) as profiled:
        packing = VarlenPacking(mask, position_offset=2)
    ops = {event.key for event in profiled.key_averages()}
    assert not ops & {"aten::_local_scalar_dense", "aten::nonzero", "aten::item"}
    assert packing.source.tolist() == mask.reshape(-1).nonzero().squeeze(1).tolist()
    assert packing.cu_seq_lens.tolist() == [0, 3, 5, 9, 9] and packing.max_length == 4
    assert packing.position_ids.tolist() == [[2, 3, 4, 2, 3, 2, 3, 4, 5]]
