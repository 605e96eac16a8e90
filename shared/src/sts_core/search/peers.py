"""The peer's losses as rows of ``sts-search``: sentence-transformers' ``CoSENTLoss``,
``AnglELoss`` and ``CosineSimilarityLoss``, each trained by its
``SentenceTransformerTrainer`` on the same table, batch, epochs, learning rate, step budget
and seed as the methods' cells (the benchmark's peer rows, ``benchmarks/quality.py``).
Offered when sentence-transformers is installed (``--methods st:cosent st:angle
st:cosine``); the saved folder is a sentence-transformers folder, which the dev scorer
loads as any other.
"""

from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any

from sts_core.search.spec import SearchError

#: the worker's ``method_name`` of a peer cell
PEER_METHOD = "sentence-transformers"
#: row → (the loss class in ``sentence_transformers.losses``, trains on scores scaled to 0–1)
PEER_LOSSES: dict[str, tuple[str, bool]] = {
    "cosent": ("CoSENTLoss", False),
    "angle": ("AnglELoss", False),
    "cosine": ("CosineSimilarityLoss", True),
}
#: recipe keys a peer cell reads itself, besides ``sts-train``'s data options (the others
#: must be training arguments)
PEER_KEYS = frozenset({"model_name_or_path", "loss", "pooling", "max_seq_length", "output_dir"})


def peers_installed() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


def default_peer_rows() -> list[str]:
    """``st:<row>`` for every peer loss, when sentence-transformers is installed."""
    return [f"st:{row}" for row in PEER_LOSSES] if peers_installed() else []


def peer_settings(entry: str, row: str, score_range: list[float] | None) -> dict[str, Any]:
    """The settings of the peer row ``st:<row>`` (its loss, and its score range when it
    trains on scores scaled to 0–1)."""
    if not peers_installed():
        raise SearchError(f"--methods {entry!r}: sentence-transformers is not installed")
    if row not in PEER_LOSSES:
        raise SearchError(f"--methods {entry!r}: no peer row {row!r} ({', '.join(PEER_LOSSES)})")
    loss, unit = PEER_LOSSES[row]
    if not unit:
        return {"loss": loss}
    if score_range is None:
        raise SearchError(
            f"--methods {entry!r} trains on scores scaled to 0–1: give --score-range LOW "
            "HIGH, the scale of your scores (e.g. 0 5)"
        )
    return {"loss": loss, "score_range": list(score_range)}


def _argument_names() -> set[str]:
    from sentence_transformers import SentenceTransformerTrainingArguments

    return {f.name for f in fields(SentenceTransformerTrainingArguments)}


def _data_option_names() -> set[str]:
    from sts_core.training.config import DataArguments

    return {f.name for f in fields(DataArguments)}


def check_peer_recipe(recipe: dict[str, Any], entry: str) -> None:
    """Before any training: every key is one a peer cell reads, an ``sts-train`` data
    option or a training argument, and the training tables load."""
    unknown = sorted(set(recipe) - PEER_KEYS - _data_option_names() - _argument_names())
    if unknown:
        raise SearchError(
            f"--methods {entry}: {', '.join(unknown)} is not a sentence-transformers "
            "training argument (leave the peer out, or the key)"
        )
    try:
        training_table(recipe)
    except ValueError as error:  # a data option's value, a table's content
        raise SearchError(f"--methods {entry}: {' '.join(str(error).split())}") from None


def training_table(recipe: dict[str, Any]) -> Any:
    """The training pairs as ``sts-train`` makes them from the recipe's data options
    (``train_datasets``, ``columns``, ``filter_test_overlap``, ``score_range`` — scaled to
    0–1 —, ``max_train_samples`` with the cell's seed, …): ``sentence1``, ``sentence2``,
    ``score``, so a peer cell trains on the pairs the methods' cells train on."""
    from sts_core.training.config import DataArguments
    from sts_core.training.data import build_train_dataset

    options = {k: v for k, v in recipe.items() if k in _data_option_names()}
    train, _ = build_train_dataset(DataArguments(**options), recipe.get("seed", 42))
    return train.select_columns(["sentence1", "sentence2", "score"])


def train_peer(recipe: dict[str, Any], model_dir: Path) -> int:
    """Train the peer row's loss with ``SentenceTransformerTrainer``, save the model to
    ``model_dir``; return the optimizer steps taken."""
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer import losses
    from transformers import set_seed

    set_seed(recipe["seed"])
    model = SentenceTransformer(recipe["model_name_or_path"])
    if recipe.get("max_seq_length"):
        model.max_seq_length = recipe["max_seq_length"]
    if recipe.get("pooling"):
        _set_pooling(model, recipe["pooling"])
    loss = getattr(losses, recipe["loss"])(model)
    names = _argument_names()
    arguments = {k: v for k, v in recipe.items() if k in names and k != "output_dir"}
    with tempfile.TemporaryDirectory(prefix="sts-search-peer-") as scratch:
        args = SentenceTransformerTrainingArguments(output_dir=scratch, **arguments)
        trainer = SentenceTransformerTrainer(
            model=model, args=args, train_dataset=training_table(recipe), loss=loss
        )
        trainer.train()
    model.save(str(model_dir))
    return trainer.state.global_step


def _set_pooling(model: Any, pooling: str) -> None:
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    modes = {"mean": "mean", "cls": "cls", "max": "max"}
    if pooling not in modes:
        raise SearchError(f"pooling {pooling!r}: the peer has {', '.join(modes)}")
    dimension = model[0].auto_model.config.hidden_size
    model[1] = Pooling(dimension, pooling_mode=modes[pooling])
