"""The model a training run starts from: the encoder its model arguments describe (no import
of the run or the trainer: both use it). Named for what it sets up; the model class itself is
``sts_core.encoder.model.SentenceEncoder``."""

from __future__ import annotations

from typing import Any

from sts_core.training.config import ModelArguments, required_model


def build_encoder(model_args: ModelArguments) -> Any:
    """The SentenceEncoder described by ``model_args`` (LoRA/QLoRA applied when asked; the
    backbone's parameters frozen with ``freeze_backbone``)."""
    from sts_core.encoder import SentenceEncoder
    from sts_core.training.peft_utils import apply_lora, quantization_kwargs

    encoder = SentenceEncoder.from_pretrained(
        required_model(model_args),
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
    encoder.pack_to_multiple_of = model_args.pack_to_multiple_of
    if model_args.backbone_dropout is not None:
        set_backbone_dropout(encoder.backbone, model_args.backbone_dropout)
    if model_args.use_lora or model_args.load_in_4bit:
        apply_lora(encoder, model_args)
    if model_args.freeze_backbone:
        encoder.backbone.requires_grad_(False)
    return encoder


#: config keys of dropout probabilities (BERT/RoBERTa/MPNet, Llama/Qwen, DistilBERT, GPT-2)
DROPOUT_CONFIG_KEYS = (
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "hidden_dropout",
    "attention_dropout",
    "dropout",
    "resid_pdrop",
    "embd_pdrop",
    "attn_pdrop",
)


def set_backbone_dropout(backbone: Any, probability: float) -> list[str]:
    """Set every dropout of ``backbone`` to ``probability``: its ``nn.Dropout`` layers,
    the float ``attention_dropout`` attributes of attention modules (Llama-style, read at
    each forward) and the config's dropout keys (so a saved folder records it). Returns
    the config keys changed."""
    from torch import nn

    for module in backbone.modules():
        if isinstance(module, nn.Dropout):
            module.p = probability
        if isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = probability
    config = backbone.config
    changed = [
        key
        for key in DROPOUT_CONFIG_KEYS
        if isinstance(getattr(config, key, None), float | int)
        and not isinstance(getattr(config, key), bool)
    ]
    for key in changed:
        setattr(config, key, probability)
    return changed
