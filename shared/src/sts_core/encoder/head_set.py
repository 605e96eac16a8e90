"""The heads of an encoder (:meth:`SentenceEncoder.add_head`): submodules of the encoder
listed by name, one of which may score sentence pairs, recorded in ``sts_heads.json``
and rebuilt with their weights when a folder is loaded."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from sts_core.encoder.files import EXTRA_WEIGHTS_NAME
from sts_core.encoder.location import read_json
from sts_core.heads import (
    HEADS_CONFIG_NAME,
    PairScoringHead,
    build_head,
    can_score_pairs,
    head_entry,
)

if TYPE_CHECKING:
    from sts_core.encoder.model import SentenceEncoder

logger = logging.getLogger(__package__)  # "sts_core.encoder", as every part of the encoder


def add_head(encoder: SentenceEncoder, name: str, head: nn.Module, pair_scorer: bool) -> nn.Module:
    """:meth:`SentenceEncoder.add_head`."""
    head_entry(head)  # TypeError for a class that is not registered
    if not isinstance(name, str) or not name.isidentifier() or name == "backbone":
        raise ValueError(f"head name {name!r}: a Python identifier other than 'backbone'")
    if hasattr(encoder, name) and name not in encoder._modules:
        raise ValueError(f"head name {name!r} is an attribute of the encoder already")
    encoder.add_module(name, head.to(encoder.device))
    if name not in encoder._head_names:
        encoder._head_names.append(name)
    if pair_scorer:
        encoder.pair_scorer = name
    return head


def _head(encoder: SentenceEncoder, name: str) -> nn.Module:
    """The head ``name`` of ``encoder`` (a listed head is a submodule: :func:`add_head`)."""
    return encoder.get_submodule(name)


def _listed(encoder: SentenceEncoder) -> str:
    return ", ".join(encoder._head_names) or "none"


def remove_head(encoder: SentenceEncoder, name: str) -> nn.Module:
    """:meth:`SentenceEncoder.remove_head`."""
    if name not in encoder._head_names:
        raise KeyError(f"no head {name!r}; heads: {_listed(encoder)}")
    head = _head(encoder, name)
    del encoder._modules[name]
    encoder._head_names.remove(name)
    if encoder._pair_scorer == name:
        encoder._pair_scorer = None
    return head


def heads(encoder: SentenceEncoder) -> Mapping[str, nn.Module]:
    """:attr:`SentenceEncoder.heads`."""
    return MappingProxyType({name: _head(encoder, name) for name in encoder._head_names})


def set_pair_scorer(encoder: SentenceEncoder, name: str | None) -> None:
    """:attr:`SentenceEncoder.pair_scorer` set: ValueError unless ``name`` is ``None`` or a
    head of ``encoder`` that scores pairs."""
    if name is not None:
        if name not in encoder._head_names:
            raise ValueError(
                f"pair_scorer {name!r} is not a head of this encoder (heads: "
                f"{_listed(encoder)}; add it with add_head)"
            )
        if not can_score_pairs(_head(encoder, name)):
            raise ValueError(f"head {name!r} has no score(u, v) for sentence pairs")
    encoder._pair_scorer = name


def score_pairs(encoder: SentenceEncoder, u: Any, v: Any) -> torch.Tensor:
    """:meth:`SentenceEncoder.score_pairs`."""
    u = torch.as_tensor(u)
    v = torch.as_tensor(v)
    if encoder._pair_scorer is None:
        return nn.functional.cosine_similarity(u, v, dim=-1)
    head = _head(encoder, encoder._pair_scorer)
    parameter = next(head.parameters(), None)
    if parameter is not None:
        u = u.to(device=parameter.device, dtype=parameter.dtype)
        v = v.to(device=parameter.device, dtype=parameter.dtype)
    # set_pair_scorer admitted only a head that scores pairs (can_score_pairs)
    return cast(PairScoringHead, head).score(u, v)


def load_heads(encoder: SentenceEncoder, folder: Path) -> None:
    """Rebuild the heads of ``sts_heads.json`` with their weights from
    ``sts_extra_modules.safetensors`` (strict, per head); other extra weights are
    ignored with a warning (a folder saved before heads were recorded, or a module
    added with ``add_module``: add it again and use :meth:`SentenceEncoder.load_weights`)."""
    listing = read_json(folder / HEADS_CONFIG_NAME)
    extra_file = folder / EXTRA_WEIGHTS_NAME
    weights: dict[str, torch.Tensor] = {}
    if extra_file.is_file():
        from safetensors.torch import load_file

        weights = load_file(extra_file)
    entries = (listing or {}).get("heads", {})
    used: set[str] = set()
    for name, entry in entries.items():
        try:
            head = build_head(entry)
        except (TypeError, ValueError) as error:
            raise OSError(f"model folder {folder}: head {name!r}: {error}") from error
        prefix = f"{name}."
        own = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
        try:
            head.load_state_dict(own, strict=True)
        except RuntimeError as error:
            raise OSError(
                f"model folder {folder}: the weights of head {name!r} in "
                f"{EXTRA_WEIGHTS_NAME} do not fit it: {error}"
            ) from error
        used.update(prefix + key for key in own)
        encoder.add_head(name, head)
    if listing and listing.get("pair_scorer") is not None:
        encoder.pair_scorer = listing["pair_scorer"]
    ignored = sorted(key for key in weights if key not in used)
    if ignored:
        modules = sorted({key.split(".", 1)[0] for key in ignored})
        logger.warning(
            "%s: the extra weights of %s in %s are not heads this folder records (%s): "
            "they are ignored; add those modules to the encoder and call load_weights to "
            "use them",
            folder,
            ", ".join(modules),
            EXTRA_WEIGHTS_NAME,
            "no " + HEADS_CONFIG_NAME if listing is None else HEADS_CONFIG_NAME,
        )
