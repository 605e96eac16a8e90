"""``SentenceEncoder``: any Hugging Face backbone plus pooling (and an optional prompt).

The saved folder is at once

- a transformers model folder (``AutoModel.from_pretrained(dir)`` works),
- a sentence-transformers folder (``SentenceTransformer(dir)`` works: ``modules.json``,
  ``1_Pooling/config.json``, ``sentence_bert_config.json``) for the pooling modes
  sentence-transformers has (mean, cls, max, last_token) and no prompt template,
- and this project's folder (``sts_encoder_config.json`` with pooling, prompt, max
  length, normalisation and the library versions that wrote it; ``sts_heads.json`` with the
  heads added by :meth:`SentenceEncoder.add_head`, rebuilt on loading).

A LoRA encoder (a peft backbone) saves its adapter (``adapter_config.json``,
``adapter_model.safetensors``) with the tokenizer and ``sts_encoder_config.json``, which
records the base model (``base_model_name_or_path``); ``from_pretrained`` of such a folder
loads the base and applies the adapter. With ``merge_lora`` the save holds the merged full
weights instead (a folder like any other) and the adapter in ``lora_adapter/``.

The class (:mod:`.model`) holds the encoder's state and public API and delegates each
concern to a module:

- :mod:`.location`: where a model is (local folder or hub id) and whether it is complete;
- :mod:`.lora`: LoRA backbones: the base of an adapter folder, merging, adapter files;
- :mod:`.loading`: the tokenizer, backbone and stored settings ``from_pretrained`` builds on;
- :mod:`.files`: the saved folder: writing it, loading its weights, its stored settings;
- :mod:`.st_folder`: a sentence-transformers folder: the settings read from it, the module
  lists and poolings refused;
- :mod:`.head_set`: the heads (``add_head``, the pair scorer, ``sts_heads.json``);
- :mod:`.packing`: padding-free training: both packers, the varlen attention kernels,
  ``padding_free`` and the choice of path;
- :mod:`.encoding`: tokenising with the prompt, the forward's embedding, ``encode``.

The names below are the package's API; they load lazily, so importing one of the modules
(e.g. ``sts_core.encoder.packing`` for ``padding_free_mode``) does not load the class.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names' types for mypy; at run time they load lazily (__getattr__)
    from sts_core.encoder.files import EXTRA_WEIGHTS_NAME as EXTRA_WEIGHTS_NAME
    from sts_core.encoder.location import check_model_location as check_model_location
    from sts_core.encoder.location import is_adapter_folder as is_adapter_folder
    from sts_core.encoder.lora import LoRABaseModelError as LoRABaseModelError
    from sts_core.encoder.lora import resolve_lora_base as resolve_lora_base
    from sts_core.encoder.model import SentenceEncoder as SentenceEncoder

_PUBLIC = {
    "SentenceEncoder": "sts_core.encoder.model",
    "EXTRA_WEIGHTS_NAME": "sts_core.encoder.files",
    "check_model_location": "sts_core.encoder.location",
    "is_adapter_folder": "sts_core.encoder.location",
    "LoRABaseModelError": "sts_core.encoder.lora",
    "resolve_lora_base": "sts_core.encoder.lora",
}

__all__ = [*_PUBLIC]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'sts_core.encoder' has no attribute {name!r}")
