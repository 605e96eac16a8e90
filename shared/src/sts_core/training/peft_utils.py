"""LoRA and QLoRA on the backbone (optional extras ``peft`` and ``bitsandbytes``)."""

from __future__ import annotations

import logging
from typing import Any

from sts_core.extras import require
from sts_core.training.config import ModelArguments

logger = logging.getLogger(__name__)


def quantization_kwargs(model_args: ModelArguments) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments for 4-bit loading (QLoRA), else nothing."""
    if not model_args.load_in_4bit:
        return {}
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            "load_in_4bit (QLoRA) needs a CUDA GPU: bitsandbytes 4-bit kernels do not run on CPU"
        )
    require("bitsandbytes", feature="load_in_4bit (QLoRA)")
    from transformers import BitsAndBytesConfig

    config = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )
    return {"quantization_config": config}


def lora_target_modules(model_args: ModelArguments) -> list[str] | str | None:
    """``lora_target_modules`` as peft takes it: the string ``all-linear`` (every linear
    layer but the output layer), a list of module names, or ``None`` (peft's default for
    the architecture)."""
    targets = model_args.lora_target_modules
    if targets is None:
        return None
    if isinstance(targets, str):
        targets = [targets]
    return "all-linear" if list(targets) == ["all-linear"] else list(targets)


def lora_config(model_args: ModelArguments) -> Any:
    """The ``peft.LoraConfig`` of ``model_args`` (rank, alpha, dropout, target modules)."""
    peft = require("peft", feature="use_lora")
    return peft.LoraConfig(
        r=model_args.lora_r,
        lora_alpha=model_args.lora_alpha,
        lora_dropout=model_args.lora_dropout,
        target_modules=lora_target_modules(model_args),
        task_type=peft.TaskType.FEATURE_EXTRACTION,
    )


def apply_lora(encoder: Any, model_args: ModelArguments) -> Any:
    """Wrap ``encoder.backbone`` with LoRA adapters in place and return the encoder.

    The adapter records the encoder's origin (``encoder.name_or_path``, an absolute path
    for a local folder) as its base model, which a save writes into
    ``sts_encoder_config.json``; ``merge_lora`` makes the encoder's saves merged. An
    encoder loaded from an adapter folder (its backbone is a peft model already) trains
    that adapter further: its LoRA weights become trainable, the ``lora_*`` options of
    ``model_args`` are not used (a warning says so when they differ).
    """
    peft = require("peft", feature="use_lora")
    from sts_core.encoder.lora import check_mergeable, is_lora_model

    if is_lora_model(encoder.backbone):
        _continue_adapter(encoder, model_args, peft)
    else:
        if model_args.load_in_4bit:
            encoder.backbone = peft.prepare_model_for_kbit_training(encoder.backbone)
        base = getattr(encoder, "name_or_path", None) or getattr(
            encoder.backbone, "name_or_path", None
        )
        encoder.backbone = peft.get_peft_model(encoder.backbone, lora_config(model_args))
        active = encoder.backbone.active_adapter
        encoder.backbone.peft_config[active].base_model_name_or_path = base or None
    encoder.merge_lora = bool(model_args.merge_lora)
    if encoder.merge_lora:
        check_mergeable(encoder.backbone)  # before training, not at the final save
    return encoder


def _continue_adapter(encoder: Any, model_args: ModelArguments, peft: Any) -> None:
    backbone = encoder.backbone
    loaded = backbone.peft_config[backbone.active_adapter]
    asked = lora_config(model_args)
    differs = [
        f"{name} {getattr(loaded, name)!r} (asked {getattr(asked, name)!r})"
        for name in ("r", "lora_alpha", "lora_dropout")
        if getattr(loaded, name) != getattr(asked, name)
    ]
    if differs:
        logger.warning(
            "model_name_or_path is a LoRA adapter folder: its adapter is trained further with "
            "its own settings: %s",
            ", ".join(differs),
        )
    if model_args.load_in_4bit:
        peft.prepare_model_for_kbit_training(backbone.get_base_model())
    for name, parameter in backbone.named_parameters():
        parameter.requires_grad = ".lora_" in name and f".{backbone.active_adapter}." in name
    loaded.inference_mode = False
