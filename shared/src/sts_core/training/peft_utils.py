"""LoRA and QLoRA on the backbone (optional extras ``peft`` and ``bitsandbytes``)."""

from __future__ import annotations

from typing import Any

from sts_core.extras import require
from sts_core.training.config import ModelArguments


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


def apply_lora(encoder: Any, model_args: ModelArguments) -> Any:
    """Wrap ``encoder.backbone`` with LoRA adapters in place and return the encoder."""
    peft = require("peft", feature="use_lora")
    if model_args.load_in_4bit:
        encoder.backbone = peft.prepare_model_for_kbit_training(encoder.backbone)
    config = peft.LoraConfig(
        r=model_args.lora_r,
        lora_alpha=model_args.lora_alpha,
        lora_dropout=model_args.lora_dropout,
        target_modules=model_args.lora_target_modules,
        task_type=peft.TaskType.FEATURE_EXTRACTION,
    )
    encoder.backbone = peft.get_peft_model(encoder.backbone, config)
    return encoder
