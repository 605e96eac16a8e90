"""``pack_to_multiple_of``: the varlen path's packed row filled up to a multiple of N
tokens, so batch shapes repeat (what ``torch.compile`` and CUDA graphs need). The filler is
a sequence of its own: embeddings, gradients and a fixed-seed run's loss curve are those of
the exact row, with and without ``torch_compile``; every packed row the backbone sees is a
multiple of N. The varlen path runs here on the exact per-sentence reference kernel."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from datasets import Dataset

from sts_core.encoder import SentenceEncoder
from sts_core.encoder.packing import VarlenPacking
from sts_core.testing import UNEVEN_SENTENCES, quick_training_args
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training.config import ModelArguments
from sts_core.training.encoder_setup import build_encoder

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SENTENCES = UNEVEN_SENTENCES
ROWS = {
    "sentence1": SENTENCES[:3] * 4,
    "sentence2": SENTENCES[3:] * 4,
    "score": [0.9, 0.1, 0.5] * 4,
}


def test_the_filler_is_a_sequence_of_its_own_that_unpack_drops() -> None:
    mask = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 0, 0]])  # 7 real tokens
    packing = VarlenPacking(mask, position_offset=2, multiple_of=4)
    assert packing.filler == 1 and packing.max_length == 3
    assert packing.cu_seq_lens.tolist() == [0, 3, 6, 7, 8]
    assert packing.position_ids.tolist() == [[2, 3, 4, 2, 3, 4, 2, 2]]
    ids = torch.arange(1, 13).view(3, 4) * mask
    assert packing.pack(ids, fill=99).tolist() == [[1, 2, 3, 6, 7, 8, 9, 99]]
    back = packing.unpack(packing.pack(ids, fill=99).unsqueeze(-1).float()).squeeze(-1).long()
    assert torch.equal(back, ids)
    long_filler = VarlenPacking(mask, multiple_of=16)  # the filler longer than any sentence
    assert long_filler.filler == 9 and long_filler.max_length == 9
    assert long_filler.position_ids[0, 7:].tolist() == [0] * 9  # never past the model's


def test_a_row_already_at_a_multiple_gets_no_filler() -> None:
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1]])
    exact, filled = VarlenPacking(mask), VarlenPacking(mask, multiple_of=4)
    assert filled.filler == 0 and filled.cu_seq_lens.tolist() == exact.cu_seq_lens.tolist()


def forward_and_grads(encoder: SentenceEncoder) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    encoder.train()
    features = encoder.tokenize(SENTENCES)
    embeddings = encoder(**features)
    (embeddings * torch.linspace(-1, 1, encoder.dimension)).square().sum().backward()
    grads = {n: p.grad for n, p in encoder.named_parameters() if p.grad is not None}
    return embeddings.detach(), grads


@pytest.mark.parametrize("model", ["bert", "llama"])
def test_a_filled_row_gives_the_exact_row_s_embeddings_and_gradients(
    tiny_bert_nodropout_dir: Path, tiny_llama_dir: Path, model: str
) -> None:
    folder = tiny_bert_nodropout_dir if model == "bert" else tiny_llama_dir
    pooling = "mean" if model == "bert" else "last_token"
    results = []
    for multiple in (0, 16):
        encoder = SentenceEncoder.from_pretrained(folder, pooling=pooling, padding_free="varlen")
        encoder.pack_to_multiple_of = multiple
        results.append(forward_and_grads(encoder))
    (exact, exact_grads), (filled, filled_grads) = results
    torch.testing.assert_close(filled, exact, atol=2e-6, rtol=1e-5)
    assert filled_grads.keys() == exact_grads.keys() and len(exact_grads) > 5
    for name, grad in filled_grads.items():
        torch.testing.assert_close(grad, exact_grads[name], atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch's varlen_attn is CUDA-only")
@pytest.mark.parametrize("model", ["bert", "llama"])
def test_filled_rows_on_the_fused_kernel_give_the_exact_row_s_embeddings(
    tiny_bert_nodropout_dir: Path, tiny_llama_dir: Path, model: str
) -> None:
    """On the GPU, under bf16 autocast: the fused varlen kernel takes the filler as one more
    sequence (its ``max_length`` the filler's when that is the longest)."""
    folder = tiny_bert_nodropout_dir if model == "bert" else tiny_llama_dir
    pooling = "mean" if model == "bert" else "last_token"
    outputs = []
    for multiple in (0, 64):
        encoder = SentenceEncoder.from_pretrained(folder, pooling=pooling, padding_free="varlen")
        encoder = encoder.cuda().train()
        encoder.pack_to_multiple_of = multiple
        features = {key: value.cuda() for key, value in encoder.tokenize(SENTENCES).items()}
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert encoder.packing_path()[0] == "varlen"
            outputs.append(encoder(**features).float())
    torch.testing.assert_close(outputs[1], outputs[0], atol=2e-2, rtol=2e-2)


def train_losses(
    folder: Path, tmp_path: Path, multiple: int, **settings: Any
) -> tuple[list[float], set[int]]:
    """A fixed-seed run's logged losses and the packed row lengths the backbone saw, with
    ``pack_to_multiple_of`` set through the model arguments (the command line's path)."""
    model_args = ModelArguments(
        model_name_or_path=str(folder), padding_free="varlen", pack_to_multiple_of=multiple
    )
    encoder = build_encoder(model_args)
    widths: set[int] = set()
    encoder.backbone.embeddings.register_forward_hook(
        lambda module, inputs, output: widths.add(int(output.shape[1]))
    )
    args = quick_training_args(
        BaseConfig, tmp_path / f"{multiple}-{len(settings)}", max_steps=4,
        per_device_train_batch_size=4, logging_steps=1, **settings,
    )  # fmt: skip
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=Dataset.from_dict(ROWS))
    trainer.train()
    return [e["loss"] for e in trainer.state.log_history if "loss" in e], widths


def test_a_fixed_seed_run_keeps_its_loss_curve_and_repeats_its_shapes(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    exact, exact_widths = train_losses(tiny_bert_nodropout_dir, tmp_path, 0)
    filled, filled_widths = train_losses(tiny_bert_nodropout_dir, tmp_path, 64)
    assert len(exact) == 4
    assert filled == pytest.approx(exact, rel=1e-5, abs=1e-6)
    assert any(width % 64 for width in exact_widths)  # the exact rows vary
    assert filled_widths and all(width % 64 == 0 for width in filled_widths)


def test_torch_compile_trains_the_filled_rows_to_the_same_curve(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """``torch_compile`` (TrainingArguments', through accelerate's dynamo plugin) with the
    ``aot_eager`` backend: the graph is traced and run by dynamo and AOTAutograd without
    the C++ compiler inductor needs."""
    exact, _ = train_losses(tiny_bert_nodropout_dir, tmp_path, 0)
    compiled, widths = train_losses(
        tiny_bert_nodropout_dir, tmp_path, 64, torch_compile=True, torch_compile_backend="aot_eager"
    )
    assert compiled == pytest.approx(exact, rel=1e-5, abs=1e-6)
    assert widths and all(width % 64 == 0 for width in widths)


def test_encode_does_not_fill_its_rows(tiny_bert_nodropout_dir: Path) -> None:
    """``encode`` (evaluation) packs exact rows: its background tokenizing thread may hold
    the tokenizer, whose pad id the filler would ask for; the vectors are the same."""
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir, padding_free="varlen")
    exact = encoder.encode(SENTENCES, show_progress_bar=False)
    encoder.pack_to_multiple_of = 100  # the sentences hold 64 tokens
    widths: list[int] = []
    encoder.backbone.embeddings.register_forward_hook(
        lambda module, inputs, output: widths.append(int(output.shape[1]))
    )
    assert encoder.packing_path()[0] == "varlen"  # in evaluation mode, forced
    vectors = encoder.encode(SENTENCES, show_progress_bar=False)
    assert widths == [
        sum(len(ids) for ids in encoder.tokenize(SENTENCES, padding=False)["input_ids"])
    ]
    assert (vectors == exact).all()


def test_the_logged_path_says_whether_its_rows_are_filled(
    tiny_bert_nodropout_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = []
    for mode in ("varlen", "false"):
        encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir, padding_free=mode)
        encoder.pack_to_multiple_of = 16
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="sts_core.encoder"):
            encoder.train()(**encoder.tokenize(SENTENCES))
        lines += [r.getMessage() for r in caplog.records if "training forward" in r.getMessage()]
    assert lines == [
        "training forward: varlen (padding_free: varlen (reference varlen kernel); rows "
        "filled to a multiple of 16 tokens)",
        "training forward: padded (padding_free: false; pack_to_multiple_of 16 not applied: "
        "it fills the varlen path only)",
    ]


def test_a_negative_multiple_is_refused() -> None:
    with pytest.raises(ValueError, match="pack_to_multiple_of must be at least 0, got -8"):
        ModelArguments(model_name_or_path="unused", pack_to_multiple_of=-8)
