"""The peer's losses as rows of ``sts-search``: sentence-transformers' ``CoSENTLoss``,
``AnglELoss`` and ``CosineSimilarityLoss``, each trained by its
``SentenceTransformerTrainer`` on the same table, batch, epochs, learning rate, step budget
and seed as the methods' cells (the benchmark's peer rows, ``benchmarks/quality.py``).
Offered when sentence-transformers is installed (``--methods st:cosent st:angle
st:cosine``); the saved folder is a sentence-transformers folder, which the dev scorer
loads as any other.

With ``teacher_model`` (and ``teacher_weight``, ``teacher_neighbours``) a peer row trains on
the pairs, scaled to 0–1 by ``--score-range`` for every loss, that the teacher relabels and
adds (:func:`sts_core.search.peer_teacher.relabelled_pairs`; a cross-encoder teacher scores
them, the student as it starts proposes the neighbours); ``st:embed-distill`` and
``st:mse-distill`` distil a bi-encoder teacher's embeddings of the training sentences
(``EmbedDistillLoss``, cosine or MSE, through a projection to the teacher's width when the
student's differs) — the quality benchmark's peer rows with a teacher.
"""

from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from sts_core.search.peer_teacher import TEACHER_KEYS, distinct_sentences
from sts_core.search.spec import SearchError

#: the worker's ``method_name`` of a peer cell
PEER_METHOD = "sentence-transformers"
#: row → (the loss class in ``sentence_transformers.losses``, trains on scores scaled to 0–1)
PEER_LOSSES: dict[str, tuple[str, bool]] = {
    "cosent": ("CoSENTLoss", False),
    "angle": ("AnglELoss", False),
    "cosine": ("CosineSimilarityLoss", True),
}
#: row → the in-batch negative loss in ``sentence_transformers.losses``, its arguments and
#: what it trains on: ``st:mnsrl`` the pairs scored above 0.6 on the 0–1 scale as positives
#: (the symmetric in-batch softmax, scale 1/τ = 10: on those pairs alone BSC at τ 0.1 is
#: exactly twice it, since it averages the two directions and BSC sums them; BSC's labeled
#: negatives, optional trainable τ and MSE combo have no counterpart here;
#: ``packages/bsc/tests/test_loss_peer.py``), and
#: ``st:simcse`` the distinct sentences of the pairs each paired with itself (unsupervised
#: SimCSE as sentence-transformers trains it, scale 20: SIFTER's closest peer)
IN_BATCH_ROWS: dict[str, tuple[str, dict[str, Any]]] = {
    "mnsrl": (
        "MultipleNegativesSymmetricRankingLoss",
        {"loss_args": {"scale": 10.0}, "positives_above": 0.6},
    ),
    "simcse": (
        "MultipleNegativesRankingLoss",
        {"loss_args": {"scale": 20.0}, "sentences_with_themselves": True},
    ),
}
#: row → ``EmbedDistillLoss``'s distance metric: distilling the teacher's embeddings
DISTILL_ROWS: dict[str, str] = {"embed-distill": "cosine", "mse-distill": "mse"}
#: recipe keys a peer cell reads itself, besides ``sts-train``'s data options (the others
#: must be training arguments)
PEER_KEYS = frozenset(
    {"model_name_or_path", "loss", "distill", "pooling", "max_seq_length", "output_dir"}
    | {"loss_args", "positives_above", "sentences_with_themselves"}
    | set(TEACHER_KEYS)
)
#: the teacher's keys that only the relabelled pairs take (not a distillation row)
RELABEL_KEYS = ("teacher_weight", "teacher_neighbours")


def peers_installed() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


def default_peer_rows() -> list[str]:
    """``st:<row>`` for every peer loss, when sentence-transformers is installed (the
    distillation rows need a teacher: named only)."""
    return [f"st:{row}" for row in PEER_LOSSES] if peers_installed() else []


def loss_label(settings: dict[str, Any]) -> str:
    """The peer row's loss in words (``CoSENTLoss``, ``EmbedDistillLoss (cosine)``), with
    the teacher it learns from."""
    teacher = settings.get("teacher_model")
    if "distill" in settings:
        return f"EmbedDistillLoss ({settings['distill']}) on {teacher}'s embeddings"
    return settings["loss"] + (f" on the pairs {teacher} relabels" if teacher else "")


def peer_settings(
    entry: str, row: str, score_range: list[float] | None, teacher: bool = False
) -> dict[str, Any]:
    """The settings of the peer row ``st:<row>``: its loss, and its score range when it
    trains on scores scaled to 0–1 (``CosineSimilarityLoss``; every loss when ``teacher``:
    the search names a ``teacher_model``, whose labels are on the cosine's scale), or the
    distance metric of a distillation row."""
    if not peers_installed():
        raise SearchError(f"--methods {entry!r}: sentence-transformers is not installed")
    if row in DISTILL_ROWS:
        return {"distill": DISTILL_ROWS[row]}
    if row in IN_BATCH_ROWS:
        loss, shape = IN_BATCH_ROWS[row]
        unit = "positives_above" in shape  # a threshold on the 0–1 scale
        return {"loss": loss, **shape, **unit_range(entry, score_range, unit, teacher)}
    if row not in PEER_LOSSES:
        rows = ", ".join([*PEER_LOSSES, *IN_BATCH_ROWS, *DISTILL_ROWS])
        raise SearchError(f"--methods {entry!r}: no peer row {row!r} ({rows})")
    loss, unit = PEER_LOSSES[row]
    return {"loss": loss, **unit_range(entry, score_range, unit, teacher)}


def unit_range(
    entry: str, score_range: list[float] | None, unit: bool, teacher: bool
) -> dict[str, Any]:
    """``score_range`` for a row that trains on scores scaled to 0–1 (``unit``, or any row
    given a teacher, whose labels are on the cosine's scale); nothing for the others."""
    if not (unit or teacher):
        return {}
    if score_range is None:
        why = "with teacher_model " if teacher and not unit else ""
        raise SearchError(
            f"--methods {entry!r} {why}trains on scores scaled to 0–1: give --score-range "
            "LOW HIGH, the scale of your scores (e.g. 0 5)"
        )
    return {"score_range": list(score_range)}


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
    check_teacher_keys(recipe, entry)
    try:
        training_table(recipe)
    except ValueError as error:  # a data option's value, a table's content
        raise SearchError(f"--methods {entry}: {' '.join(str(error).split())}") from None


def check_teacher_keys(recipe: dict[str, Any], entry: str) -> None:
    """The teacher's keys only where they apply: a distillation row needs
    ``teacher_model``, a bi-encoder, and takes neither ``teacher_weight`` nor
    ``teacher_neighbours``; a loss row takes them with ``teacher_model`` only; their values
    as ``sts-train`` checks them; the teacher a complete model folder (or hub id)."""
    teacher = recipe.get("teacher_model")
    given = [key for key in RELABEL_KEYS if key in recipe]
    if "distill" in recipe:
        if not teacher:
            raise SearchError(
                f"--methods {entry} distils a teacher's embeddings: give --set "
                "teacher_model=FOLDER (a sentence-transformers bi-encoder)"
            )
        if given:
            raise SearchError(
                f"--methods {entry}: {', '.join(given)} applies to the relabelled pairs of "
                f"{', '.join(f'st:{row}' for row in PEER_LOSSES)}, not to a distillation row"
            )
    elif given and not teacher:
        raise SearchError(f"--methods {entry}: {', '.join(given)} needs teacher_model")
    if not teacher:
        return
    check_teacher_values(recipe, entry)
    check_teacher_model(str(teacher), entry, distill="distill" in recipe)


def check_teacher_values(recipe: dict[str, Any], entry: str) -> None:
    """``teacher_weight`` in (0, 1] and ``teacher_neighbours`` ≥ 0, numbers as
    ``sts-train`` takes them (:func:`sts_core.training.distill.check_teacher_settings`)."""
    from sts_core.training.distill import check_teacher_settings

    try:
        weight = float(recipe.get("teacher_weight", 1.0))
        neighbours = recipe.get("teacher_neighbours", 0)
        if isinstance(neighbours, bool) or not isinstance(neighbours, int):
            raise ValueError(f"teacher_neighbours must be a whole number, got {neighbours!r}")
        values = SimpleNamespace(
            teacher_model=recipe["teacher_model"],
            teacher_weight=weight,
            teacher_neighbours=neighbours,
        )
        check_teacher_settings(cast(Any, values))
    except (TypeError, ValueError) as error:
        raise SearchError(f"--methods {entry}: {error}") from None


def check_teacher_model(location: str, entry: str, distill: bool) -> None:
    """The teacher folder complete (or a hub id reachable); a distillation row's teacher
    no cross-encoder (it has no embeddings)."""
    from sts_core.encoder import check_model_location
    from sts_core.search.peer_teacher import is_cross_encoder

    try:
        check_model_location(location)
        cross_encoder = is_cross_encoder(location)
    except (OSError, ValueError) as error:
        raise SearchError(f"--methods {entry}: teacher_model: {error}") from None
    if distill and cross_encoder:
        raise SearchError(
            f"--methods {entry}: teacher_model {location} is a cross-encoder, which has no "
            "embeddings to distil: give a bi-encoder, or train st:cosine / st:cosent / "
            "st:angle on the pairs it labels"
        )


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


def train_peer(recipe: dict[str, Any], model_dir: Path) -> tuple[int, dict[str, Any]]:
    """Train the peer row's loss with ``SentenceTransformerTrainer``, save the model to
    ``model_dir``; return the optimizer steps taken and what the cell's result records
    besides (``teacher``: the pairs and the teacher's neighbour pairs it trained on). The
    teacher's step comes before the seed is set, as the quality benchmark's committed cells
    were trained."""
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from transformers import set_seed

    data, recorded, width = peer_training_data(recipe)
    data = in_batch_data(recipe, data)
    set_seed(recipe["seed"])
    model = load_student(recipe)
    loss = peer_loss(recipe, model, width)
    names = _argument_names()
    arguments = {k: v for k, v in recipe.items() if k in names and k != "output_dir"}
    with tempfile.TemporaryDirectory(prefix="sts-search-peer-") as scratch:
        args = SentenceTransformerTrainingArguments(output_dir=scratch, **arguments)
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss)
        trainer.train()
    model.save(str(model_dir))
    return trainer.state.global_step, recorded


def peer_training_data(recipe: dict[str, Any]) -> tuple[Any, dict[str, Any], int | None]:
    """What the cell trains on: the training table; with ``teacher_model`` the pairs the
    teacher relabels and adds (the result records ``teacher``: ``pairs``,
    ``neighbour_pairs``), or for a distillation row the sentences with the teacher's
    embeddings (and the teacher's width)."""
    from sts_core.search import peer_teacher

    table = training_table(recipe)
    location = recipe.get("teacher_model")
    if not location:
        return table, {}, None
    if "distill" in recipe:
        teacher = peer_teacher.load_peer_teacher(location)
        return (
            peer_teacher.embedding_targets(teacher, table),
            {},
            peer_teacher.teacher_width(teacher),
        )
    cross_encoder = None
    if peer_teacher.is_cross_encoder(location):
        cross_encoder = peer_teacher.load_peer_cross_encoder(location)
        teacher = load_student(recipe)  # the student as it starts proposes the neighbours
    else:
        teacher = peer_teacher.load_peer_teacher(location)
    data = peer_teacher.relabelled_pairs(
        teacher,
        table,
        "score",
        float(recipe.get("teacher_weight", 1.0)),
        int(recipe.get("teacher_neighbours", 0)),
        cross_encoder=cross_encoder,
    )
    summary = {"pairs": len(table), "neighbour_pairs": len(data) - len(table)}
    return data, {"teacher": summary}, None


def in_batch_data(recipe: dict[str, Any], data: Any) -> Any:
    """An in-batch row's training data (:data:`IN_BATCH_ROWS`): the pairs scored above
    ``positives_above`` without their scores, or the distinct sentences of the pairs
    (``sentence1``, then ``sentence2``) each as an (anchor, positive) pair with itself;
    ``data`` as it is for the other rows."""
    from datasets import Dataset

    threshold = recipe.get("positives_above")
    if threshold is not None:
        return data.filter(lambda row: row["score"] > threshold).remove_columns("score")
    if recipe.get("sentences_with_themselves"):
        sentences = distinct_sentences(data)
        return Dataset.from_dict({"anchor": sentences, "positive": sentences})
    return data


def load_student(recipe: dict[str, Any]) -> Any:
    """The model the cell starts from, with the recipe's length and pooling."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(recipe["model_name_or_path"])
    if recipe.get("max_seq_length"):
        model.max_seq_length = recipe["max_seq_length"]
    if recipe.get("pooling"):
        _set_pooling(model, recipe["pooling"])
    return model


def peer_loss(recipe: dict[str, Any], model: Any, teacher_width: int | None) -> Any:
    """The row's loss: its ``losses`` class, or ``EmbedDistillLoss`` with the row's metric
    through a projection to the teacher's width when the student's differs."""
    from sentence_transformers.sentence_transformer import losses

    if "distill" not in recipe:
        return getattr(losses, recipe["loss"])(model, **recipe.get("loss_args", {}))
    own = model.get_embedding_dimension()
    projection = teacher_width if teacher_width != own else None
    return losses.EmbedDistillLoss(model, recipe["distill"], projection_dim=projection)


def _set_pooling(model: Any, pooling: str) -> None:
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    modes = {"mean": "mean", "cls": "cls", "max": "max"}
    if pooling not in modes:
        raise SearchError(f"pooling {pooling!r}: the peer has {', '.join(modes)}")
    dimension = model[0].auto_model.config.hidden_size
    model[1] = Pooling(dimension, pooling_mode=modes[pooling])
