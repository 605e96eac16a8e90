"""LoRA encoders (a peft backbone): the base model of an adapter folder, loading an adapter
on it, merging it, and writing and reading an encoder's adapter.

A LoRA encoder saves its adapter (``adapter_config.json``, ``adapter_model.safetensors``)
with the tokenizer and ``sts_encoder_config.json``, which records the base model
(``base_model_name_or_path``); loading such a folder loads the base and applies the adapter.
With ``merge_lora`` the save holds the merged full weights instead (a folder like any
other) and the adapter in ``lora_adapter/``. peft is imported only where it is needed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from sts_core.encoder.location import (
    ADAPTER_CONFIG_NAME,
    absolute_location,
    check_model_location,
    is_adapter_folder,
    read_json,
)
from sts_core.saving import ENCODER_CONFIG_NAME

if TYPE_CHECKING:
    from peft import PeftModel

    from sts_core.encoder.model import SentenceEncoder

ADAPTER_WEIGHTS_NAMES = ("adapter_model.safetensors", "adapter_model.bin")
# where a merge_lora save keeps the adapter (for resuming a LoRA run from the folder)
LORA_ADAPTER_DIR = "lora_adapter"


def is_lora_model(module: object) -> bool:
    """Whether ``module`` is a peft model (LoRA adapters around a base model); checked
    without importing peft."""
    return hasattr(module, "peft_config") and callable(getattr(module, "get_base_model", None))


def inner_model(backbone: Any) -> Any:
    """The transformers model inside a peft backbone (the backbone itself otherwise)."""
    return backbone.get_base_model() if is_lora_model(backbone) else backbone


def lora_base_candidates(folder: str | os.PathLike) -> list[str]:
    """Where an adapter folder's base model may be: the one ``sts_encoder_config.json``
    records, then the adapter's own ``base_model_name_or_path``."""
    path = Path(folder)
    ours = (read_json(path / ENCODER_CONFIG_NAME) or {}).get("base_model_name_or_path")
    theirs = (read_json(path / ADAPTER_CONFIG_NAME) or {}).get("base_model_name_or_path")
    return list(dict.fromkeys(str(c) for c in (ours, theirs) if c))


#: how the Python API names the base model of an adapter folder (the end of the error)
BASE_MODEL_ARGUMENT = "base_model=PATH to SentenceEncoder.from_pretrained"


class LoRABaseModelError(FileNotFoundError):
    """The base model of a LoRA adapter folder is not recorded or cannot be loaded.

    The message is ``problem`` and then how to name the base elsewhere, ``option``: the
    Python argument by default; a command-line tool names its flag instead
    (:meth:`for_option`).
    """

    def __init__(self, problem: str, option: str = BASE_MODEL_ARGUMENT) -> None:
        super().__init__(f"{problem}: to load it from elsewhere, pass {option}")
        self.problem = problem
        self.option = option

    def for_option(self, option: str) -> LoRABaseModelError:
        """The same error, naming ``option`` (e.g. ``--base-model PATH``) as the remedy."""
        return LoRABaseModelError(self.problem, option)


def resolve_lora_base(folder: str, base_model: str | os.PathLike | None = None) -> str:
    """The base model of the adapter folder ``folder``: ``base_model`` when given, else the
    first of :func:`lora_base_candidates` that is a usable model location (an absolute
    path for a local folder); :class:`LoRABaseModelError` (a FileNotFoundError) naming
    each candidate and ``base_model=`` otherwise."""
    candidates = [str(base_model)] if base_model is not None else lora_base_candidates(folder)
    if not candidates:
        raise LoRABaseModelError(f"LoRA adapter folder {folder} records no base model")
    problems = []
    for candidate in candidates:
        try:
            return absolute_location(check_model_location(candidate))
        except OSError as error:
            problems.append(str(error))
    raise LoRABaseModelError(
        f"the base model of the LoRA adapter folder {folder} cannot be loaded: "
        + "; ".join(problems)
    )


def load_lora_backbone(
    location: str,
    base: str,
    dtype: str | torch.dtype,
    merge: bool,
    model_kwargs: dict[str, Any],
) -> Any:
    """Load the base model ``base`` and apply the adapter folder ``location`` (frozen);
    return the peft backbone, or the merged backbone when ``merge``."""
    from transformers import AutoModel

    from sts_core.extras import require

    peft = require("peft", feature=f"loading the LoRA adapter folder {location}")
    if is_adapter_folder(base):  # an adapter on an adapter: merge the inner one
        inner = load_lora_backbone(base, resolve_lora_base(base), dtype, True, model_kwargs)
    else:
        inner = AutoModel.from_pretrained(base, dtype=dtype, **model_kwargs)
    backbone = peft.PeftModel.from_pretrained(inner, location, is_trainable=False)
    backbone.peft_config[backbone.active_adapter].base_model_name_or_path = base
    if merge:
        backbone = backbone.merge_and_unload()
    return backbone


def merged_lora_state(
    peft_model: Any, state: dict[str, torch.Tensor] | None = None
) -> dict[str, torch.Tensor]:
    """The base model's state dict with the active LoRA adapter merged in, computed
    without touching the model: W + scaling · B·A for each adapted linear layer (float32
    arithmetic, cast back to W's dtype). ``state`` (keys of ``peft_model.state_dict()``,
    e.g. gathered by DeepSpeed) replaces the live weights when given. Tensors come back on
    the CPU."""
    from peft.tuners.lora import Linear as LoraLinear
    from peft.tuners.lora import LoraLayer

    check_mergeable(peft_model)
    adapter = peft_model.active_adapter
    state = state if state is not None else peft_model.state_dict()
    prefix = "base_model.model."
    merged = {}
    for key, value in state.items():
        if ".lora_" in key:
            continue
        merged[key.removeprefix(prefix).replace(".base_layer.", ".")] = value.detach().cpu()
    for name, layer in peft_model.named_modules():
        if not isinstance(layer, LoraLayer) or adapter not in layer.lora_A:
            continue
        assert isinstance(layer, LoraLinear)
        weight = state[f"{name}.base_layer.weight"]
        a = state[f"{name}.lora_A.{adapter}.weight"].detach().cpu().float()
        b = state[f"{name}.lora_B.{adapter}.weight"].detach().cpu().float()
        delta = (b @ a) * layer.scaling[adapter]
        if layer.fan_in_fan_out:
            delta = delta.T
        target = name.removeprefix(prefix) + ".weight"
        merged[target] = (weight.detach().cpu().float() + delta).to(weight.dtype)
    return merged


def check_mergeable(peft_model: Any) -> None:
    """ValueError unless every adapted layer is a plain LoRA linear layer on float weights
    (what :func:`merged_lora_state` merges)."""
    from peft.tuners.lora import Linear as LoraLinear
    from peft.tuners.lora import LoraLayer

    adapter = peft_model.active_adapter
    config = peft_model.peft_config[adapter]
    if getattr(config, "peft_type", "LORA") != "LORA":  # PeftType is a str enum
        raise ValueError(f"merge_lora: the adapter is {config.peft_type}, not LoRA")
    for name, layer in peft_model.named_modules():
        if not isinstance(layer, LoraLayer) or adapter not in layer.lora_A:
            continue
        if type(layer) is not LoraLinear:
            raise ValueError(
                f"merge_lora: {name} is a {type(layer).__name__} LoRA layer; only LoRA on "
                "float linear layers is merged here (save the adapter instead)"
            )
        if layer.use_dora.get(adapter, False) or getattr(layer, "lora_bias", {}).get(adapter):
            raise ValueError(f"merge_lora: {name} uses DoRA or a LoRA bias; save the adapter")
    if any("modules_to_save" in key for key in peft_model.state_dict()):
        raise ValueError("merge_lora: the adapter has modules_to_save; save the adapter")


def write_lora(
    peft_model: Any,
    folder: Path,
    backbone_state: dict[str, torch.Tensor],
    safe_serialization: bool,
    merge: bool,
) -> dict[str, Any]:
    """Save a peft backbone: the adapter, or the merged weights with the adapter in
    ``lora_adapter/``; return what ``sts_encoder_config.json`` records of it."""
    lora_config = peft_model.peft_config[peft_model.active_adapter]
    base = lora_config.base_model_name_or_path
    state = backbone_state or None
    if merge:
        merged = merged_lora_state(peft_model, state)
        peft_model.get_base_model().save_pretrained(
            folder, state_dict=merged, safe_serialization=safe_serialization
        )
        adapter_dir = folder / LORA_ADAPTER_DIR
    else:
        adapter_dir = folder
    peft_model.save_pretrained(adapter_dir, state_dict=state, safe_serialization=safe_serialization)
    (adapter_dir / "README.md").unlink(missing_ok=True)  # peft's card: ours is the card
    targets = lora_config.target_modules  # all-linear comes back resolved to names
    if isinstance(targets, set | list | tuple):
        targets = sorted({str(t).rsplit(".", 1)[-1] for t in targets})
    return {
        "base_model_name_or_path": base,
        "lora": {
            "merged": merge,
            "adapter": LORA_ADAPTER_DIR if merge else ".",
            "r": lora_config.r,
            "lora_alpha": lora_config.lora_alpha,
            "lora_dropout": lora_config.lora_dropout,
            "target_modules": targets,
        },
    }


def load_lora_weights(encoder: SentenceEncoder, path: Path, extra_file: Path) -> None:
    """Load into a LoRA encoder the adapter of the folder ``path`` (the folder itself, or
    ``lora_adapter/`` of a merged save) and its weights outside the backbone
    (``extra_file``); the base weights stay as they are. OSError naming the folder."""
    from peft import get_peft_model_state_dict, set_peft_model_state_dict
    from peft.utils import load_peft_weights

    adapter_dir = next(
        (d for d in (path, path / LORA_ADAPTER_DIR) if (d / ADAPTER_CONFIG_NAME).is_file()),
        None,
    )
    try:
        if adapter_dir is None:
            raise FileNotFoundError(
                f"no LoRA adapter ({ADAPTER_CONFIG_NAME}) there nor in {LORA_ADAPTER_DIR}/"
            )
        backbone = cast("PeftModel", encoder.backbone)  # the caller checked is_lora_model
        adapter = backbone.active_adapter
        weights = load_peft_weights(str(adapter_dir), device="cpu")
        expected = set(get_peft_model_state_dict(backbone, adapter_name=adapter))
        missing, unexpected = expected - set(weights), set(weights) - expected
        if missing or unexpected:
            raise KeyError(
                f"the adapter does not fit this encoder's LoRA layers: missing "
                f"{sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}"
            )
        set_peft_model_state_dict(backbone, weights, adapter_name=adapter)
        extra: dict[str, torch.Tensor] = {}
        if extra_file.is_file():
            from safetensors.torch import load_file

            extra = load_file(extra_file)
        result = encoder.load_state_dict(extra, strict=False)
        missing_extra = [k for k in result.missing_keys if not k.startswith("backbone.")]
        if missing_extra or result.unexpected_keys:
            raise KeyError(
                f"extra weights: missing {missing_extra[:5]}, unexpected "
                f"{result.unexpected_keys[:5]}"
            )
    except Exception as error:  # noqa: BLE001 - name the folder whatever failed
        raise OSError(f"could not load the weights in {path}: {error}") from error
