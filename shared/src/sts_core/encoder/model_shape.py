"""A model's width and how many positions a sentence may take, read from its config files
without loading any weights: what ``--check_only`` and the run check ``matryoshka_dims`` and
``max_seq_length`` against (``sts-eval --max-length`` too), before the weights load.

The width is the config's hidden size (transformers' ``hidden_size``, GPT-2's ``n_embd``,
T5's ``d_model``, DistilBERT's ``dim``), else a sentence-transformers folder's
``1_Pooling/config.json`` ``word_embedding_dimension``. The positions are
``max_position_embeddings`` (GPT-2: ``n_positions``), less what RoBERTa-style embeddings
reserve: their position ids start at ``pad_token_id + 1`` (transformers'
``create_position_ids_from_input_ids``), so RoBERTa's 514 take 512 tokens. A LoRA adapter
folder is read through its base model's folder. A config without the field gives no check
here; the loaded model's config is checked again when the encoder is built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# config.json's name for the hidden size: transformers', GPT-2's / Nomic's, T5's, DistilBERT's
WIDTH_KEYS = ("hidden_size", "n_embd", "d_model", "dim")
POSITION_KEYS = ("max_position_embeddings", "n_positions")
# transformers' models whose position ids start at pad_token_id + 1 (RobertaEmbeddings)
RESERVED_POSITION_MODEL_TYPES = frozenset(
    {
        "camembert",
        "data2vec-text",
        "esm",
        "ibert",
        "longformer",
        "luke",
        "mpnet",
        "roberta",
        "roberta-prelayernorm",
        "xlm-roberta",
        "xlm-roberta-xl",
        "xmod",
    }
)


class ModelShapeError(ValueError):
    """A setting the model's width or positions cannot take."""


@dataclass(frozen=True)
class ModelShape:
    """A model's ``width`` and usable ``positions`` (None: not recorded), and the file
    each was read from."""

    width: int | None = None
    positions: int | None = None
    width_source: str = ""
    positions_source: str = ""


def config_width(config: Mapping[str, Any]) -> int | None:
    """The hidden size a transformers config (``config.json``'s mapping) records."""
    return next((v for v in map(config.get, WIDTH_KEYS) if _is_count(v)), None)


def config_positions(config: Mapping[str, Any]) -> int | None:
    """How many tokens a sentence may take: the config's positions less those its
    embeddings reserve; None when it records none (relative or rotary-only models)."""
    positions = next((v for v in map(config.get, POSITION_KEYS) if _is_count(v)), None)
    if positions is None:
        return None
    pad = config.get("pad_token_id")
    if config.get("model_type") in RESERVED_POSITION_MODEL_TYPES and _is_count(pad, 0):
        return positions - pad - 1
    return positions


def read_model_shape(location: str, base_model: str | None = None) -> ModelShape:
    """The width and positions of the model at ``location`` (a local folder or a hub id in
    the local cache) from its config files; an empty shape when they cannot be read (a
    missing folder, a hub id not cached: what loads it names the problem)."""
    config_file = _config_file(location, base_model)
    config = _read(config_file) if config_file else None
    shape = ModelShape()
    if config is not None:
        width, positions = config_width(config), config_positions(config)
        source = str(config_file)
        shape = ModelShape(width, positions, source if width else "", source if positions else "")
    if shape.width is None:
        pooling = Path(location) / "1_Pooling" / "config.json"
        width = (_read(pooling) or {}).get("word_embedding_dimension")
        if _is_count(width):
            shape = ModelShape(width, shape.positions, str(pooling), shape.positions_source)
    return shape


def loaded_shape(backbone: Any) -> ModelShape:
    """The positions of a loaded backbone, from its config (a LoRA model's: its base's)."""
    config: Any = getattr(backbone, "config", None)  # Any: a PretrainedConfig, or none
    values = config.to_dict() if hasattr(config, "to_dict") else getattr(config, "__dict__", {})
    positions = config_positions(values)
    return ModelShape(positions=positions, positions_source="the loaded model's config")


def check_max_length(max_length: int | None, shape: ModelShape, option: str) -> None:
    """:class:`ModelShapeError` when ``max_length`` (``option``'s value) is more than the model's
    positions: the position embeddings have no row for the tokens past them."""
    if max_length is None or shape.positions is None or max_length <= shape.positions:
        return
    raise ModelShapeError(
        f"{option} {max_length} is more than the model's {shape.positions} positions "
        f"({shape.positions_source}): a longer sentence would have no position embedding; "
        f"use at most {shape.positions}"
    )


def check_model_max_length(
    location: str, max_length: int | None, option: str, base_model: str | None = None
) -> None:
    """``max_length`` (``option``'s) against the positions of the model at ``location``,
    from its config files, before its weights load (:func:`check_max_length`)."""
    if max_length is not None:
        check_max_length(max_length, read_model_shape(location, base_model), option)


def _config_file(location: str, base_model: str | None) -> Path | None:
    """``config.json`` of ``location``, of a LoRA adapter folder's base, or of a cached hub
    model; None when there is none to read."""
    folder = Path(location).expanduser()
    if folder.is_dir():
        if (folder / "config.json").is_file():
            return folder / "config.json"
        from sts_core.encoder.lora import lora_base_candidates

        bases = [base_model] if base_model else lora_base_candidates(folder)
        found = (Path(base).expanduser() / "config.json" for base in bases)
        return next((path for path in found if path.is_file()), None)
    return _cached_hub_config(location)


def _cached_hub_config(model_id: str) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(model_id, "config.json")
    except ValueError:  # not a repository id
        return None
    return Path(found) if isinstance(found, str) else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # what loads the model names the problem
        return None
    return content if isinstance(content, dict) else None


def _is_count(value: Any, least: int = 1) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least
