"""The model a training run starts from (no import of the run or the trainer: both use it)."""

from __future__ import annotations

from typing import Any

from sts_core.training.config import ModelArguments


def build_encoder(model_args: ModelArguments) -> Any:
    """The SentenceEncoder described by ``model_args`` (LoRA/QLoRA applied when asked; the
    backbone's parameters frozen with ``freeze_backbone``)."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.training.peft_utils import apply_lora, quantization_kwargs

    encoder = SentenceEncoder.from_pretrained(
        model_args.model_name_or_path,
        pooling=model_args.pooling,
        prompt=model_args.prompt,
        max_length=model_args.max_seq_length,
        normalize=model_args.normalize_embeddings,
        padding_side=model_args.padding_side,
        dtype=model_args.model_dtype,
        padding_free=model_args.padding_free,
        trust_remote_code=model_args.trust_remote_code,
        **quantization_kwargs(model_args),
    )
    if model_args.use_lora or model_args.load_in_4bit:
        apply_lora(encoder, model_args)
    if model_args.freeze_backbone:
        encoder.backbone.requires_grad_(False)
    return encoder
