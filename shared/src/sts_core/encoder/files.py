"""The encoder's saved folder: writing it (the backbone or its LoRA adapter, the tokenizer,
``sts_encoder_config.json``, the extra weights and ``sts_heads.json``, the
sentence-transformers files), loading its weights into an encoder, and reading the
settings a folder stores (ours, else sentence-transformers': :mod:`.st_folder`)."""

from __future__ import annotations

import json
import logging
import os
import platform
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from sts_core.encoder.location import ADAPTER_CONFIG_NAME, is_adapter_folder, read_json
from sts_core.encoder.lora import (
    ADAPTER_WEIGHTS_NAMES,
    LORA_ADAPTER_DIR,
    is_lora_model,
    load_lora_weights,
    write_lora,
)
from sts_core.encoder.st_folder import ST_POOLING_NAMES, settings_from_st_folder, st_modules
from sts_core.heads import HEADS_CONFIG_NAME, HEADS_FORMAT, head_entry
from sts_core.saving import (
    ENCODER_CONFIG_NAME,
    SAVE_MARKER,
    check_complete_save,
    staged_contents,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from sts_core.encoder.model import SentenceEncoder

logger = logging.getLogger(__package__)  # "sts_core.encoder", as every part of the encoder

EXTRA_WEIGHTS_NAME = "sts_extra_modules.safetensors"
# The encoder settings a folder records (SentenceEncoder.settings)
SETTING_NAMES = ("pooling", "prompt", "max_length", "normalize")
# ... and, when the encoder has named prompts, sentence-transformers' prompt settings
PROMPT_SETTING_NAMES = ("prompts", "default_prompt_name")
# Files a save writes only in some settings: removed from the folder when a save omits them.
OPTIONAL_FILES = (
    EXTRA_WEIGHTS_NAME,
    HEADS_CONFIG_NAME,
    ADAPTER_CONFIG_NAME,
    *ADAPTER_WEIGHTS_NAMES,
    LORA_ADAPTER_DIR,
    "config.json",  # an adapter save replacing a full one: no stale full model left behind
    "model.safetensors",
    "model.safetensors.index.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling",
    "2_Normalize",
    "README.md",
)


def setting_names(encoder: SentenceEncoder) -> tuple[str, ...]:
    """The settings a save of ``encoder`` records (:meth:`SentenceEncoder.settings`): pooling,
    prompt template, max length, normalisation, and the named prompts with the default's
    name when it has any."""
    return SETTING_NAMES + (PROMPT_SETTING_NAMES if encoder.prompts else ())


def library_versions() -> dict[str, str]:
    """Versions of the libraries that matter for reproducing an embedding."""
    versions = {"python": platform.python_version()}
    for dist in ("sts-core", "torch", "transformers", "sentence-transformers"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return versions


def saved_settings(folder: str | os.PathLike) -> dict[str, Any]:
    """Encoder settings stored in a local folder: ours first, else sentence-transformers'
    (:mod:`.st_folder`). Every :meth:`SentenceEncoder.from_pretrained` of a folder (and of a
    LoRA adapter's base) reads them here, so a sentence-transformers folder whose vectors
    the encoder would not reproduce (a ``Dense`` module, ``include_prompt: false``, a
    pooling it has not) is refused here, ValueError naming the file, ours or not."""
    path = Path(folder)
    if not path.is_dir():
        return {}
    ours = read_json(path / ENCODER_CONFIG_NAME)
    if ours is not None:
        st_modules(path)  # checked: a module added to one of our folders is refused too
        kept = (*SETTING_NAMES, *PROMPT_SETTING_NAMES, "matryoshka_dims")
        return {k: ours[k] for k in kept if k in ours}
    return settings_from_st_folder(path)


def save_folder(
    encoder: SentenceEncoder,
    output_dir: str | os.PathLike,
    state_dict: dict[str, torch.Tensor] | None,
    model_card: str | None,
    safe_serialization: bool,
    write_extra: Callable[[Path], None] | None,
    merge_lora: bool | None,
) -> None:
    """:meth:`SentenceEncoder.save_pretrained`: the folder staged, then published whole."""
    merge = encoder.merge_lora if merge_lora is None else merge_lora
    if merge and not is_lora_model(encoder.backbone):
        raise ValueError("merge_lora: this encoder has no LoRA adapter to merge")
    with staged_contents(output_dir, replaces=OPTIONAL_FILES) as folder:
        _write_folder(encoder, folder, state_dict, model_card, safe_serialization, merge)
        if write_extra is not None:
            write_extra(folder)


def _write_folder(
    encoder: SentenceEncoder,
    folder: Path,
    state_dict: dict[str, torch.Tensor] | None,
    model_card: str | None,
    safe_serialization: bool,
    merge_lora: bool = False,
) -> None:
    state = state_dict if state_dict is not None else encoder.state_dict()
    backbone_state = {
        k[len("backbone.") :]: v for k, v in state.items() if k.startswith("backbone.")
    }
    extra_state = {k: v for k, v in state.items() if not k.startswith("backbone.")}
    config = {**encoder.settings(), "save_marker": SAVE_MARKER, "versions": library_versions()}
    if encoder.matryoshka_dims:
        config["matryoshka_dims"] = list(encoder.matryoshka_dims)
    if is_lora_model(encoder.backbone):
        config.update(
            write_lora(encoder.backbone, folder, backbone_state, safe_serialization, merge_lora)
        )
    else:
        # not a peft model: a transformers one (nn.Module types the method Tensor | Module)
        cast("PreTrainedModel", encoder.backbone).save_pretrained(
            folder, state_dict=backbone_state or None, safe_serialization=safe_serialization
        )
    encoder.tokenizer.save_pretrained(folder)
    if extra_state:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in extra_state.items()}, folder / EXTRA_WEIGHTS_NAME)
    if encoder._head_names:
        _write_json(folder / HEADS_CONFIG_NAME, heads_config(encoder))
    (folder / ENCODER_CONFIG_NAME).write_text(json.dumps(config, indent=2), encoding="utf-8")
    _write_sentence_transformers_files(encoder, folder)
    if model_card is not None:
        (folder / "README.md").write_text(model_card, encoding="utf-8")


def _write_sentence_transformers_files(encoder: SentenceEncoder, folder: Path) -> None:
    if encoder.pooling not in ST_POOLING_NAMES or encoder.prompt is not None:
        logger.warning(
            "sentence-transformers has no equivalent of pooling=%s with prompt=%r: the folder "
            "loads with AutoModel and SentenceEncoder, not with SentenceTransformer",
            encoder.pooling,
            encoder.prompt,
        )
        return
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    if encoder.normalize:
        modules.append(
            {
                "idx": 2,
                "name": "2",
                "path": "2_Normalize",
                "type": "sentence_transformers.models.Normalize",
            }
        )
        (folder / "2_Normalize").mkdir(exist_ok=True)
    _write_json(folder / "modules.json", modules)
    (folder / "1_Pooling").mkdir(exist_ok=True)
    _write_json(folder / "1_Pooling" / "config.json", _st_pooling_config(encoder))
    _write_json(
        folder / "sentence_bert_config.json",
        {"max_seq_length": encoder.max_length, "do_lower_case": False},
    )
    _write_json(
        folder / "config_sentence_transformers.json",
        {
            "__version__": library_versions(),
            "prompts": dict(encoder.prompts),
            "default_prompt_name": encoder.default_prompt_name,
            "similarity_fn_name": "cosine",
        },
    )


def _st_pooling_config(encoder: SentenceEncoder) -> dict[str, Any]:
    theirs = ST_POOLING_NAMES[encoder.pooling]
    return {
        "word_embedding_dimension": encoder.dimension,
        "pooling_mode_cls_token": theirs == "cls",
        "pooling_mode_mean_tokens": theirs == "mean",
        "pooling_mode_max_tokens": theirs == "max",
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": theirs == "lasttoken",
        "include_prompt": True,
    }


def _write_json(path: Path, content: object) -> None:
    path.write_text(json.dumps(content, indent=2), encoding="utf-8")


def load_weights(encoder: SentenceEncoder, folder: str | os.PathLike) -> None:
    """:meth:`SentenceEncoder.load_weights`: the weights of a complete save, strict."""
    from transformers import AutoModel

    path = Path(folder)
    check_complete_save(path, required=True)
    if is_lora_model(encoder.backbone):
        load_lora_weights(encoder, path, path / EXTRA_WEIGHTS_NAME)
        return
    if is_adapter_folder(path):
        raise OSError(
            f"could not load the weights in {path}: it holds a LoRA adapter and this "
            "encoder has no LoRA backbone (apply the same LoRA configuration first)"
        )
    try:
        dtype = next(encoder.backbone.parameters()).dtype
        reloaded = AutoModel.from_pretrained(path, dtype=dtype)
        state = {f"backbone.{k}": v for k, v in reloaded.state_dict().items()}
        extra = path / EXTRA_WEIGHTS_NAME
        if extra.is_file():
            from safetensors.torch import load_file

            state.update(load_file(extra))
        encoder.load_state_dict(state, strict=True)
    except Exception as error:  # noqa: BLE001 - name the folder whatever failed
        raise OSError(f"could not load the weights in {path}: {error}") from error


def heads_config(encoder: SentenceEncoder) -> dict[str, Any]:
    """What ``sts_heads.json`` records: each head's type, config and module; the pair
    scorer."""
    return {
        "format": HEADS_FORMAT,
        "heads": {name: head_entry(head) for name, head in encoder.heads.items()},
        "pair_scorer": encoder._pair_scorer,
    }
