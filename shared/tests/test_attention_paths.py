"""The training forward's three paths (varlen, block mask, padded): each gives the padded
forward's embeddings and gradients, for every pooling mode, RoBERTa's position offset and a
decoder; ``padding_free: auto`` chooses as documented and logs it; a tiny model trains
through each path. The varlen path runs here on the exact per-sentence reference kernel
(the fused kernels are CUDA-only)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import (
    AutoTokenizer,
    LlamaConfig,
    LlamaModel,
    RobertaConfig,
    RobertaModel,
)

import sts_core.encoder.packing as packing_module
from sts_core.encoder import SentenceEncoder
from sts_core.encoder.encoding import pad_rows
from sts_core.encoder.packing import (
    VARLEN_ATTENTION,
    VarlenPacking,
    padding_free_mode,
    reference_varlen_attention,
    varlen_attention,
    varlen_kernel,
)
from sts_core.testing import UNEVEN_SENTENCES, quick_training_args
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training.config import ModelArguments

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SENTENCES = UNEVEN_SENTENCES
PATHS = ("varlen", "block_mask")


def same_forward(packed: SentenceEncoder, padded: SentenceEncoder, path: str) -> None:
    """``packed`` (training mode, on ``path``) and ``padded`` give the same embeddings and
    gradients for SENTENCES."""
    packed.train()
    padded.train()
    assert packed.packing_path()[0] == path
    padded.padding_free = "false"
    features = packed.tokenize(SENTENCES)
    assert int(features["attention_mask"].sum()) < features["attention_mask"].numel()
    target = torch.linspace(-1, 1, packed.dimension)
    results = []
    for encoder in (packed, padded):
        encoder.zero_grad()
        embeddings = encoder(**features)
        (embeddings * target).square().sum().backward()
        grads = {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}
        results.append((embeddings.detach(), grads))
    (packed_out, packed_grads), (padded_out, padded_grads) = results
    torch.testing.assert_close(packed_out, padded_out, atol=2e-6, rtol=1e-5)
    assert packed_grads.keys() == padded_grads.keys() and len(packed_grads) > 10
    for name, grad in packed_grads.items():
        torch.testing.assert_close(grad, padded_grads[name], atol=1e-5, rtol=1e-4, msg=name)


def pair(folder: Path, path: str, pooling: str = "mean", **kwargs) -> tuple[SentenceEncoder, ...]:
    return tuple(
        SentenceEncoder.from_pretrained(folder, pooling=pooling, padding_free=mode, **kwargs)
        for mode in (path, "false")
    )


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("pooling", ["mean", "cls", "max", "first_last_avg"])
def test_bert_paths_equal_the_padded_forward(
    tiny_bert_nodropout_dir: Path, path: str, pooling: str
) -> None:
    same_forward(*pair(tiny_bert_nodropout_dir, path, pooling), path)


def test_varlen_path_with_gradient_checkpointing(tiny_bert_nodropout_dir: Path) -> None:
    """The packing metadata reaches the recomputed layers (the attention stays varlen)."""
    packed, padded = pair(tiny_bert_nodropout_dir, "varlen")
    for encoder in (packed, padded):
        encoder.gradient_checkpointing_enable({"use_reentrant": False})
    same_forward(packed, padded, "varlen")


def tiny_roberta(tokenizer_dir: Path) -> tuple[SentenceEncoder, SentenceEncoder]:
    """RoBERTa: positions counted from pad_token_id + 1."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = RobertaConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=tokenizer.pad_token_id,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    model = RobertaModel(config, add_pooling_layer=False)
    twin = RobertaModel(config, add_pooling_layer=False)
    twin.load_state_dict(model.state_dict())
    return SentenceEncoder(model, tokenizer), SentenceEncoder(twin, tokenizer)


@pytest.mark.parametrize("path", PATHS)
def test_roberta_paths_keep_its_position_offset(tiny_bert_dir: Path, path: str) -> None:
    packed, padded = tiny_roberta(tiny_bert_dir)
    packed.padding_free = path
    same_forward(packed, padded, path)


def tiny_gqa_llama(tokenizer_dir: Path, padding_side: str) -> tuple[SentenceEncoder, ...]:
    """A Llama with grouped-query attention (4 heads, 2 key/value heads)."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, padding_side=padding_side)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    model, twin = LlamaModel(config), LlamaModel(config)
    twin.load_state_dict(model.state_dict())
    pooling = "last_token" if padding_side == "left" else "mean"
    return tuple(
        SentenceEncoder(backbone, tokenizer, pooling=pooling, padding_free=mode)
        for backbone, mode in ((model, "varlen"), (twin, "false"))
    )


@pytest.mark.parametrize("padding_side", ["left", "right"])
def test_decoder_varlen_path_attends_causally_per_sentence(
    tiny_llama_dir: Path, padding_side: str
) -> None:
    same_forward(*tiny_gqa_llama(tiny_llama_dir, padding_side), "varlen")


def test_reference_kernel_equals_a_dense_masked_attention() -> None:
    torch.manual_seed(0)
    lengths = torch.tensor([3, 1, 5])
    mask = (torch.arange(5)[None] < lengths[:, None]).long()
    packing = VarlenPacking(mask)
    tokens = int(lengths.sum())
    query = torch.randn(tokens, 4, 8)
    key, value = torch.randn(tokens, 2, 8), torch.randn(tokens, 2, 8)  # grouped queries
    sentence = torch.repeat_interleave(torch.arange(3), lengths)
    for causal in (False, True):
        allowed = sentence[:, None] == sentence[None, :]
        if causal:
            allowed &= torch.ones(tokens, tokens).tril().bool()
        dense = torch.nn.functional.scaled_dot_product_attention(
            query.transpose(0, 1),
            key.repeat_interleave(2, 1).transpose(0, 1),
            value.repeat_interleave(2, 1).transpose(0, 1),
            attn_mask=allowed,
        ).transpose(0, 1)
        got = reference_varlen_attention(query, key, value, packing.cu_seq_lens, causal=causal)
        torch.testing.assert_close(got, dense)
        routed = varlen_attention(
            query, key, value, packing.cu_seq_lens, packing.max_length, causal=causal
        )
        torch.testing.assert_close(routed, dense)  # no fused kernel on a CPU: the reference


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch's varlen_attn is CUDA-only")
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_torch_varlen_kernel_equals_the_reference_on_cuda(kv_heads: int) -> None:
    """The fused kernel (bf16, on the GPU) against one SDPA per sentence, bidirectional and
    causal, with and without grouped-query attention."""
    torch.manual_seed(0)
    lengths = torch.tensor([3, 1, 5, 7])
    mask = (torch.arange(7)[None] < lengths[:, None]).long()
    packing = VarlenPacking(mask.cuda())
    tokens = int(lengths.sum())
    query = torch.randn(tokens, 4, 64, device="cuda", dtype=torch.bfloat16)
    key, value = (
        torch.randn(tokens, kv_heads, 64, device="cuda", dtype=torch.bfloat16) for _ in "kv"
    )
    for causal in (False, True):
        fused = varlen_attention(
            query, key, value, packing.cu_seq_lens, packing.max_length, causal=causal,
            kernel="torch",
        )  # fmt: skip
        reference = reference_varlen_attention(
            query, key, value, packing.cu_seq_lens, causal=causal
        )
        torch.testing.assert_close(fused, reference, atol=2e-2, rtol=2e-2)


def fake_varlen_attn_of_torch_2_10(
    query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, scale=None, is_causal=False
):  # fmt: skip
    """torch 2.10's keywords (is_causal, no grouped-query option), on the reference."""
    assert key.shape[1] == query.shape[1], "torch 2.10 needs as many key as query heads"
    return reference_varlen_attention(query, key, value, cu_seq_q, causal=is_causal, scale=scale)


def fake_varlen_attn_of_later_torch(
    query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, scale=None,
    window_size=(-1, -1), enable_gqa=False,
):  # fmt: skip
    """The later keywords: a causal window (-1, 0) and enable_gqa, on the reference."""
    assert enable_gqa == (key.shape[1] != query.shape[1])
    causal = tuple(window_size) == (-1, 0)
    return reference_varlen_attention(query, key, value, cu_seq_q, causal=causal, scale=scale)


@pytest.mark.parametrize("fake", [fake_varlen_attn_of_torch_2_10, fake_varlen_attn_of_later_torch])
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_torch_kernel_adapts_to_the_installed_varlen_attn_keywords(
    fake, kv_heads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Releases of torch name the causal flag and grouped-query attention differently; the
    call is built from the installed signature (checked on a CPU through stand-ins)."""
    import torch.nn.attention.varlen as torch_varlen

    monkeypatch.setattr(torch_varlen, "varlen_attn", fake)
    torch.manual_seed(0)
    mask = (torch.arange(5)[None] < torch.tensor([3, 5, 1])[:, None]).long()
    packing = VarlenPacking(mask)
    query = torch.randn(9, 4, 8)
    key, value = (torch.randn(9, kv_heads, 8) for _ in "kv")
    for causal in (False, True):
        routed = varlen_attention(
            query, key, value, packing.cu_seq_lens, packing.max_length, causal=causal,
            kernel="torch",
        )  # fmt: skip
        expected = reference_varlen_attention(query, key, value, packing.cu_seq_lens, causal=causal)
        torch.testing.assert_close(routed, expected)


def test_varlen_packing_round_trip() -> None:
    mask = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 0, 0]])  # right, left padded
    packing = VarlenPacking(mask, position_offset=2)
    assert packing.cu_seq_lens.tolist() == [0, 3, 6, 7] and packing.max_length == 3
    assert packing.position_ids.tolist() == [[2, 3, 4, 2, 3, 4, 2]]
    ids = torch.arange(1, 13).view(3, 4) * mask
    assert packing.pack(ids).tolist() == [[1, 2, 3, 6, 7, 8, 9]]
    back = packing.unpack(packing.pack(ids).unsqueeze(-1).float()).squeeze(-1).long()
    assert torch.equal(back, ids)


def test_auto_chooses_by_device_and_kernel(
    tiny_bert_dir: Path, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bert = SentenceEncoder.from_pretrained(tiny_bert_dir).train()
    llama = SentenceEncoder.from_pretrained(tiny_llama_dir, pooling="last_token").train()
    assert bert.padding_free == "auto" and varlen_kernel("cpu") is None
    assert bert.packing_path()[0] == "block_mask"  # a CPU: packed rows
    path, reason = llama.packing_path()
    assert path == "padded" and reason.startswith("no varlen kernel on cpu, and model type")
    assert bert.eval().packing_path() == ("padded", "evaluation pads: no varlen kernel on cpu")
    bert.train()

    cuda = property(lambda self: torch.device("cuda"))
    monkeypatch.setattr(SentenceEncoder, "device", cuda)
    for encoder in (bert, llama):  # the fused kernels compute in bf16 (tested below in fp32)
        encoder.backbone.to(torch.bfloat16)
    monkeypatch.setattr(packing_module, "varlen_kernel", lambda device: None)
    path, reason = bert.packing_path()
    assert path == "padded" and "padding is faster than a dense block mask" in reason
    assert reason.startswith("no varlen kernel on cuda (install flash-attn")
    bert.padding_free = "true"
    assert bert.packing_path()[0] == "block_mask"  # true: pack wherever possible
    bert.padding_free = "auto"
    monkeypatch.setattr(packing_module, "varlen_kernel", lambda device: "torch")
    path, reason = bert.packing_path()  # torch's kernel would drop BERT's attention dropout
    assert path == "padded" and "no attention dropout, and the model's is 0.1" in reason
    assert llama.packing_path()[0] == "varlen"  # a decoder without attention dropout: auto packs
    monkeypatch.setattr(packing_module, "varlen_kernel", lambda device: "flash_attn")
    assert bert.packing_path()[0] == "varlen"  # a kernel that applies the dropout: auto packs
    monkeypatch.setattr(packing_module, "varlen_kernel", lambda device: "torch")
    for encoder in (bert, llama):
        encoder.padding_free = "true"
        path, reason = encoder.packing_path()
        assert path == "varlen" and "torch varlen kernel" in reason  # decoders: varlen only
    assert "no attention dropout: 0.1 is not applied" in bert.packing_path()[1]  # said
    monkeypatch.setattr(packing_module, "AUTO_TAKES_VARLEN", False)  # before the GPU measure
    llama.padding_free = "auto"
    path, reason = llama.packing_path()
    assert path == "padded" and "not yet measured on a GPU" in reason


def test_float32_on_a_gpu_takes_no_fused_kernel(
    tiny_bert_dir: Path, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fused varlen kernels take fp16 or bf16 only: a float32 forward outside autocast
    packs by the block mask (BERT, ``true``) or pads, saying why."""
    bert = SentenceEncoder.from_pretrained(tiny_bert_dir, padding_free="true").train()
    llama = SentenceEncoder.from_pretrained(tiny_llama_dir, pooling="last_token").train()
    monkeypatch.setattr(SentenceEncoder, "device", property(lambda self: torch.device("cuda")))
    monkeypatch.setattr(packing_module, "varlen_kernel", lambda device: "torch")
    assert bert.packing_path() == (
        "block_mask",
        "padding_free: true on cuda without a varlen kernel: packed rows, block mask",
    )
    path, reason = llama.packing_path()
    assert path == "padded" and "torch varlen kernel computes in fp16 or bf16 only" in reason
    llama.backbone.to(torch.bfloat16)
    assert llama.packing_path()[0] == "varlen"


def test_half_precision_is_read_from_autocast_or_the_weights(tiny_llama_dir: Path) -> None:
    llama = SentenceEncoder.from_pretrained(tiny_llama_dir, pooling="last_token")
    assert not packing_module.computes_in_half(llama)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert packing_module.computes_in_half(llama)
    llama.backbone.to(torch.float16)
    assert packing_module.computes_in_half(llama)


def test_a_float32_query_reaches_a_fused_kernel_in_the_autocast_dtype(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under bf16 autocast a decoder's query comes out float32 (its rotary tables are
    float32): it is cast to bf16 for the kernel, which takes no float32 (an H200 raised
    "FlashAttention only support fp16 and bf16"). Outside autocast the reference runs."""
    torch.manual_seed(0)
    mask = (torch.arange(5)[None] < torch.tensor([3, 5])[:, None]).long()
    packing = VarlenPacking(mask)
    query, key, value = (torch.randn(8, 2, 16) for _ in "qkv")
    seen: list[torch.dtype] = []

    def fake_kernel(query, key, value, cu_seq_lens, max_length, causal, scale):
        seen.append(query.dtype)
        if query.dtype not in (torch.float16, torch.bfloat16):
            raise RuntimeError("FlashAttention only support fp16 and bf16 data type")
        return reference_varlen_attention(query, key, value, cu_seq_lens, causal=causal)

    monkeypatch.setattr(packing_module, "torch_varlen_attention", fake_kernel)
    args = (query, key, value, packing.cu_seq_lens, packing.max_length)
    reference = reference_varlen_attention(query, key, value, packing.cu_seq_lens)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = varlen_attention(*args, kernel="torch")
    assert seen == [torch.bfloat16] and fused.dtype == torch.bfloat16
    torch.testing.assert_close(fused.float(), reference, atol=3e-2, rtol=3e-2)
    assert torch.equal(varlen_attention(*args, kernel="torch"), reference)  # float32: reference
    assert seen == [torch.bfloat16]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch's varlen_attn is CUDA-only")
def test_decoder_trains_on_the_fused_kernel_under_bf16_autocast(tiny_llama_dir: Path) -> None:
    """A float32 decoder under bf16 autocast (the Trainer's ``bf16: true``) on the GPU: the
    varlen path's embeddings equal the padded forward's, within bf16's precision."""
    packed, padded = (
        SentenceEncoder.from_pretrained(tiny_llama_dir, pooling="last_token", padding_free=mode)
        .cuda()
        .train()
        for mode in ("true", "false")
    )
    features = {k: v.cuda() for k, v in packed.tokenize(SENTENCES).items()}
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert packed.packing_path()[0] == "varlen"
        outputs = [encoder(**features).float() for encoder in (packed, padded)]
    outputs[0].sum().backward()
    torch.testing.assert_close(outputs[0], outputs[1], atol=5e-2, rtol=5e-2)


def test_auto_takes_varlen_on_a_gpu_for_a_bert_without_attention_dropout(
    tiny_bert_nodropout_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bert = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir).train()
    bert.backbone.to(torch.bfloat16)
    monkeypatch.setattr(SentenceEncoder, "device", property(lambda self: torch.device("cuda")))
    monkeypatch.setattr(packing_module, "varlen_kernel", lambda device: "torch")
    path, reason = bert.packing_path()
    assert path == "varlen" and "not applied" not in reason


def test_unsupported_forced_path_is_refused_before_training(tiny_llama_dir: Path) -> None:
    with pytest.raises(ValueError, match="padding_free: block_mask is not possible.*llama"):
        SentenceEncoder.from_pretrained(tiny_llama_dir, padding_free="block_mask")
    with pytest.raises(ValueError, match="padding_free must be one of"):
        SentenceEncoder.from_pretrained(tiny_llama_dir, padding_free="sometimes")


def test_padding_free_words_and_recipe_values(tiny_bert_dir: Path) -> None:
    assert [padding_free_mode(v) for v in (True, False, "yes", "OFF", "auto")] == [
        "true",
        "false",
        "true",
        "false",
        "auto",
    ]
    assert ModelArguments(model_name_or_path=str(tiny_bert_dir)).padding_free == "auto"
    with pytest.raises(ValueError, match="padding_free must be one of"):
        ModelArguments(model_name_or_path=str(tiny_bert_dir), padding_free="maybe")


def test_the_path_is_logged_once_with_its_reason(
    tiny_bert_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir).train()
    features = encoder.tokenize(SENTENCES)
    with caplog.at_level(logging.INFO, logger="sts_core.encoder"):
        encoder(**features)
        encoder(**features)
    lines = [r.getMessage() for r in caplog.records if "training forward" in r.getMessage()]
    assert lines == ["training forward: block_mask (padding_free: auto on a CPU: packed rows, "
                     "block mask)"]  # fmt: skip


@pytest.mark.parametrize("mode", ["varlen", "block_mask", "false"])
def test_a_tiny_model_trains_through_each_path(
    tiny_bert_dir: Path, tmp_path: Path, mode: str
) -> None:
    from datasets import Dataset

    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir, padding_free=mode)
    rows = {
        "sentence1": SENTENCES[:3] * 4,
        "sentence2": SENTENCES[3:] * 4,
        "score": [0.9, 0.1, 0.5] * 4,
    }
    before = {n: p.detach().clone() for n, p in encoder.named_parameters()}
    args = quick_training_args(BaseConfig, tmp_path, max_steps=3, per_device_train_batch_size=4)
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=Dataset.from_dict(rows))
    result = trainer.train()
    assert torch.isfinite(torch.tensor(result.training_loss))
    moved = [n for n, p in encoder.named_parameters() if not torch.equal(p, before[n])]
    assert len(moved) > 10
    expected = VARLEN_ATTENTION if mode == "varlen" else "sdpa"
    assert encoder.backbone.config._attn_implementation == expected


@pytest.mark.parametrize("side", ["left", "right"])
def test_pad_rows_matches_the_tokenizer(tiny_bert_dir: Path, side: str) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir, padding_side=side)
    encoded = tokenizer(SENTENCES, padding=False)
    reference = tokenizer.pad(encoded, padding=True, return_tensors="np")
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        fill = {"input_ids": tokenizer.pad_token_id}.get(key, 0)
        assert np.array_equal(pad_rows(encoded[key], fill, side == "left"), reference[key]), key


def test_training_defaults_keep_the_host_off_the_critical_path(tmp_path: Path) -> None:
    args = BaseConfig(output_dir=str(tmp_path))
    assert args.optim == "adamw_torch_fused"  # transformers' default since torch 2.8
    assert args.accelerator_config.non_blocking
    # pinned batches on a GPU (transformers turns pinning off on a CPU-only run)
    assert BaseConfig.__dataclass_fields__["dataloader_pin_memory"].default is True
    own = BaseConfig(output_dir=str(tmp_path), accelerator_config={"non_blocking": False})
    assert not own.accelerator_config.non_blocking  # a user's own setting is kept


def test_tokenizing_in_dataloader_workers_trains_the_same(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """dataloader_num_workers > 0: the collator (tokenization) runs in worker processes,
    off the training loop; the steps are the same."""
    from datasets import Dataset

    rows = {"sentence1": SENTENCES[:3] * 4, "sentence2": SENTENCES[3:] * 4, "score": [0.9] * 12}
    losses = []
    for workers in (0, 2):
        encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
        args = quick_training_args(
            BaseConfig, tmp_path / str(workers), max_steps=3, dataloader_num_workers=workers
        )
        trainer = BaseTrainer(model=encoder, args=args, train_dataset=Dataset.from_dict(rows))
        trainer.train()
        losses.append([e["loss"] for e in trainer.state.log_history if "loss" in e])
    assert len(losses[0]) == 3
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
