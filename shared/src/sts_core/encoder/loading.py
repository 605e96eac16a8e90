"""Loading what an encoder is built from: the tokenizer, the backbone (a LoRA adapter
folder's on its base model) and the settings the folder stores."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from sts_core.encoder.files import saved_settings
from sts_core.encoder.location import (
    check_model_location,
    check_tokenizer,
    hub_error,
    is_adapter_folder,
)
from sts_core.encoder.lora import load_lora_backbone, resolve_lora_base


def load_backbone(
    name_or_path: str | os.PathLike,
    *,
    padding_side: str | None,
    dtype: str | torch.dtype | None,
    merge_lora: bool,
    base_model: str | os.PathLike | None,
    trust_remote_code: bool,
    model_kwargs: dict[str, Any],
) -> tuple[str, Any, Any, dict[str, Any]]:
    """The model's location (checked), tokenizer, backbone and stored settings (a LoRA
    adapter folder's over its base's), for :meth:`SentenceEncoder.from_pretrained`."""
    from transformers import AutoModel, AutoTokenizer

    location = check_model_location(name_or_path)
    base = resolve_lora_base(location, base_model) if is_adapter_folder(location) else None
    stored = saved_settings(location)
    try:
        # padding_side as a tokenizer argument (not set afterwards), so that
        # tokenizer.save_pretrained records it and a reloaded folder pads the same way
        sides: dict[str, Any] = {} if padding_side is None else {"padding_side": padding_side}
        if trust_remote_code:
            sides["trust_remote_code"] = model_kwargs["trust_remote_code"] = True
        tokenizer = AutoTokenizer.from_pretrained(location, **sides)
        if base is not None:
            backbone = load_lora_backbone(
                location, base, resolve_dtype(dtype), merge_lora, model_kwargs
            )
            stored = {**saved_settings(base), **stored}
        else:
            backbone = AutoModel.from_pretrained(
                location, dtype=resolve_dtype(dtype), **model_kwargs
            )
    except Exception as error:  # noqa: BLE001 - a model that cannot be read, named
        if Path(location).exists():
            raise OSError(f"could not load model folder {location}: {error}") from error
        if isinstance(error, OSError):
            raise hub_error(location, error) from error
        raise
    check_tokenizer(tokenizer, backbone, location)
    return location, tokenizer, backbone, stored


def encoder_settings(
    stored: dict[str, Any],
    pooling: str | None,
    prompt: str | None,
    max_length: int | None,
    normalize: bool | None,
) -> dict[str, Any]:
    """The settings given, else those ``stored`` in the folder, else the defaults."""
    return {
        "pooling": pooling or stored.get("pooling", "mean"),
        "prompt": prompt if prompt is not None else stored.get("prompt"),
        "max_length": max_length if max_length is not None else stored.get("max_length"),
        "normalize": normalize if normalize is not None else stored.get("normalize", False),
    }


def resolve_dtype(dtype: str | torch.dtype | None) -> str | torch.dtype:
    """The ``dtype`` to load weights in: float32 by default, a name read, ``auto`` kept."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    names = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in names:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(names)} or auto")
    return names[dtype]
