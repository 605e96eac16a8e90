"""Reading a sentence-transformers folder (``modules.json``): the settings a
:class:`~sts_core.encoder.SentenceEncoder` takes from it, and the folders it refuses.

What is read: the pooling mode of ``<Pooling>/config.json`` (``mean``, ``cls``, ``max``,
``lasttoken``; the new ``pooling_mode`` key or the legacy ``pooling_mode_*`` flags),
whether a ``Normalize`` module follows, the max length (``max_seq_length`` of
``sentence_bert_config.json``, else — what sentence-transformers 5+ writes — the
tokenizer's ``model_max_length`` capped at the model's ``max_position_embeddings``) and
the named prompts of ``config_sentence_transformers.json``.

What is refused (ValueError naming the file): a module other than sentence-transformers'
``Transformer`` (in the folder itself), ``Pooling`` and ``Normalize``, in that order (a
``Dense`` projection, a custom module: the encoder would load without it and give other
vectors); a pooling mode with no equivalent here (``weightedmean``,
``mean_sqrt_len_tokens``, several modes concatenated); and a ``Pooling`` with
``include_prompt: false``, which sentence-transformers honours by leaving the prompt's
tokens out of the pooling while this encoder pools every token of the prompted text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sts_core.encoder.location import read_json, read_json_list

ST_MODULES_NAME = "modules.json"
# Our pooling names and sentence-transformers' for the same pooling
ST_POOLING_NAMES = {"mean": "mean", "cls": "cls", "max": "max", "last_token": "lasttoken"}
# The sentence-transformers modules this encoder reproduces, in their order (Normalize optional)
ST_MODULE_ORDER = ("Transformer", "Pooling", "Normalize")
_LEGACY_POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# transformers' model_max_length of a tokenizer saved without one (int(1e30))
_NO_TOKENIZER_LIMIT = 10**20


def st_modules(folder: Path) -> list[dict[str, Any]] | None:
    """The folder's ``modules.json`` checked (:func:`check_st_modules`), or ``None`` when it
    is not a sentence-transformers folder."""
    modules = read_json_list(folder / ST_MODULES_NAME)
    if modules is None:
        return None
    check_st_modules(folder, modules)
    return modules


def check_st_modules(folder: Path, modules: list[dict[str, Any]]) -> None:
    """ValueError unless ``modules`` (the folder's ``modules.json``) is sentence-transformers'
    ``Transformer`` in the folder itself, one ``Pooling`` this encoder has (with
    ``include_prompt`` on) and optionally ``Normalize``: any other module (``Dense``, a
    custom one) would be left out on loading, silently changing the vectors."""
    listing = folder / ST_MODULES_NAME
    kinds = [_module_kind(module) for module in modules]
    expected = list(ST_MODULE_ORDER[: max(2, len(kinds))])
    if kinds != expected:
        listed = ", ".join(str(module.get("type")) for module in modules) or "no module"
        others = [str(m.get("type")) for m, kind in zip(modules, kinds, strict=True) if not kind]
        what = (
            f"{', '.join(others)} {'is' if len(others) == 1 else 'are'} not supported"
            if others
            else f"the modules {listed} are not Transformer, Pooling[, Normalize] in that order"
        )
        raise ValueError(
            f"{listing}: {what}: SentenceEncoder reproduces only sentence-transformers' "
            "Transformer, Pooling and optionally Normalize, in that order, and would load "
            f"this folder ({listed}) without the rest, giving other vectors than "
            "SentenceTransformer's; load it with SentenceTransformer instead"
        )
    transformer_path = modules[0].get("path", "")
    if transformer_path not in ("", "."):
        raise ValueError(
            f"{listing}: the Transformer module is in {transformer_path!r}, not in the folder "
            f"itself: load {folder / str(transformer_path)} with the pooling of "
            f"{folder / str(modules[1].get('path', ''))}"
        )
    _check_include_prompt(st_pooling_config_path(folder, modules))


def _module_kind(module: dict[str, Any]) -> str | None:
    """``Transformer``, ``Pooling`` or ``Normalize`` for sentence-transformers' module of
    that class (any of its import paths), else None."""
    kind = str(module.get("type", ""))
    name = kind.rsplit(".", 1)[-1]
    return name if kind.startswith("sentence_transformers.") and name in ST_MODULE_ORDER else None


def st_pooling_config_path(folder: Path, modules: list[dict[str, Any]]) -> Path:
    """The ``config.json`` of the folder's (checked) ``Pooling`` module."""
    return folder / str(modules[1].get("path", "")) / "config.json"


def _check_include_prompt(path: Path) -> None:
    config = read_json(path) or {}
    if config.get("include_prompt", True) is False:
        raise ValueError(
            f"{path}: include_prompt is false, which SentenceEncoder cannot honour: "
            "sentence-transformers leaves a prompt's tokens out of the pooling, while this "
            "encoder pools every token of the prompted text (other vectors whenever a prompt "
            "is used); set include_prompt to true if the model is used without prompts, or "
            "load it with SentenceTransformer"
        )


def settings_from_st_folder(folder: Path) -> dict[str, Any]:
    """Pooling, normalisation, max length and named prompts of a sentence-transformers
    folder (checked: :func:`check_st_modules`); ``{}`` for any other folder."""
    modules = st_modules(folder)
    if modules is None:
        return {}
    settings: dict[str, Any] = {"normalize": len(modules) == len(ST_MODULE_ORDER)}
    pooling_path = st_pooling_config_path(folder, modules)
    settings["pooling"] = st_pooling_to_ours(read_json(pooling_path) or {}, pooling_path)
    max_length = st_max_length(folder)
    if max_length is not None:
        settings["max_length"] = max_length
    st_config = read_json(folder / "config_sentence_transformers.json") or {}
    if st_config.get("prompts"):
        settings["prompts"] = dict(st_config["prompts"])
        settings["default_prompt_name"] = st_config.get("default_prompt_name")
    return settings


def st_max_length(folder: Path) -> int | None:
    """The max length sentence-transformers truncates at: ``max_seq_length`` of
    ``sentence_bert_config.json``, else the tokenizer's ``model_max_length`` (in
    ``tokenizer_config.json``) capped at the model's ``max_position_embeddings``; None when
    the folder sets neither (the encoder's default then)."""
    bert_config = read_json(folder / "sentence_bert_config.json") or {}
    if bert_config.get("max_seq_length"):
        return int(bert_config["max_seq_length"])
    tokenizer_limit = (read_json(folder / "tokenizer_config.json") or {}).get("model_max_length")
    if not isinstance(tokenizer_limit, int) or not 0 < tokenizer_limit < _NO_TOKENIZER_LIMIT:
        return None
    positions = (read_json(folder / "config.json") or {}).get("max_position_embeddings")
    if isinstance(positions, int) and positions > 0:
        return min(tokenizer_limit, positions)
    return tokenizer_limit


def st_pooling_to_ours(config: dict[str, Any], path: Path | str = "the pooling config") -> str:
    """Our pooling mode for sentence-transformers' pooling ``config`` (read from ``path``):
    ValueError naming the file for a mode (or several) this encoder does not have."""
    mode = config.get("pooling_mode")
    if mode is None:  # the legacy flags; none set is sentence-transformers' mean
        active = [theirs for key, theirs in _LEGACY_POOLING_FLAGS.items() if config.get(key)]
        mode = active or "mean"
    if isinstance(mode, list | tuple):
        mode = mode[0] if len(mode) == 1 else list(mode)
    reverse = {theirs: ours for ours, theirs in ST_POOLING_NAMES.items()}
    if not isinstance(mode, str) or mode not in reverse:
        raise ValueError(
            f"{path}: sentence-transformers pooling {mode!r} has no equivalent here "
            f"(SentenceEncoder reads {', '.join(reverse)}: one mode)"
        )
    return reverse[mode]
