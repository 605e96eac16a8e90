"""Cross-encoders (interaction models): a sequence classifier with one output on the pair.

The pair is encoded jointly (``[CLS] s1 [SEP] s2 [SEP]``) and the single logit is the
similarity score. This module holds what any method needs to train one with the core's
Trainer: loading, a collator and batched scoring. Its dev evaluator is
``PairEvaluator(dataset, name, cross_encoder_scorer(), batch_size)`` (``sts_core.evaluation``).

A cross-encoder is also a teacher (``teacher_model``, :mod:`sts_core.training.distill`):
:func:`cross_encoder_activation` tells one from a bi-encoder by its folder and reads the
activation its scores take, and :class:`CrossEncoderScorer` scores pairs with it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sts_core.encoder import check_model_location

# the longest joint input when neither the caller nor the tokenizer says less (BERT's limit)
LONGEST_PAIR = 512


def load_cross_encoder(
    name_or_path: str | os.PathLike, max_length: int | None = None, trust_remote_code: bool = False
) -> tuple[Any, Any, int]:
    """``AutoModelForSequenceClassification`` with ``num_labels=1`` in float32, its tokenizer
    (the end-of-sequence token pads when it has no padding token) and the max length:
    ``max_length``, else the tokenizer's ``model_max_length`` capped at 512
    (``trust_remote_code``: run the modelling code the model ships)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    location = check_model_location(name_or_path)
    remote = {"trust_remote_code": True} if trust_remote_code else {}
    tokenizer = AutoTokenizer.from_pretrained(location, **remote)
    model = AutoModelForSequenceClassification.from_pretrained(
        location, num_labels=1, dtype=torch.float32, **remote
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
        model.config.pad_token_id = tokenizer.pad_token_id
    declared = getattr(tokenizer, "model_max_length", None) or LONGEST_PAIR
    return model, tokenizer, max_length or min(LONGEST_PAIR, int(declared))


def tokenize_pairs(
    tokenizer: Any, first: Sequence[str], second: Sequence[str], max_length: int
) -> dict[str, torch.Tensor]:
    """The pairs tokenized jointly, truncated to ``max_length``, padded to the longest."""
    encoded = tokenizer(
        list(first),
        list(second),
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
    )
    return dict(encoded)


class PairCrossCollator:
    """Tokenize (sentence1, sentence2) jointly, padded to the batch's longest; float labels."""

    def __init__(self, tokenizer: Any, max_length: int, label_column: str = "score") -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.label_column = label_column

    def __call__(self, rows: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = tokenize_pairs(
            self.tokenizer,
            [row["sentence1"] for row in rows],
            [row["sentence2"] for row in rows],
            self.max_length,
        )
        if self.label_column in rows[0]:
            batch["labels"] = torch.tensor([float(row[self.label_column]) for row in rows])
        return batch


def predict_pair_scores(
    model: Any,
    tokenizer: Any,
    sentences1: Sequence[str],
    sentences2: Sequence[str],
    batch_size: int = 64,
    max_length: int = LONGEST_PAIR,
) -> np.ndarray:
    """The model's single logit for every pair, float64, in input order (``batch_size``
    pairs a forward pass, on the model's device)."""
    if len(sentences1) != len(sentences2):
        raise ValueError(
            f"{len(sentences1)} first sentences but {len(sentences2)} second sentences: "
            "a cross-encoder scores pairs"
        )
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    scores = [torch.zeros(0)]
    with torch.inference_mode():
        for start in range(0, len(sentences1), batch_size):
            end = start + batch_size
            encoded = tokenize_pairs(
                tokenizer, sentences1[start:end], sentences2[start:end], max_length
            )
            batch = {key: value.to(device) for key, value in encoded.items()}
            scores.append(model(**batch).logits.float().reshape(-1).cpu())
    model.train(was_training)
    return torch.cat(scores).double().numpy()


ST_SETTINGS_FILE = "config_sentence_transformers.json"
# sentence-transformers' activations by the dotted name its CrossEncoder saves
ACTIVATIONS = {
    "torch.nn.modules.activation.Sigmoid": "sigmoid",
    "torch.nn.modules.linear.Identity": "identity",
    "torch.nn.modules.activation.Tanh": "tanh",
}
ACTIVATION_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "identity": lambda x: x,
    "tanh": np.tanh,
}


def _model_file(location: str, name: str) -> Path | None:
    """The path of ``name`` in a local folder or a hub model (its cached copy when
    offline), or None when the model has no such file."""
    folder = Path(location).expanduser()
    path: Path | None
    if folder.is_dir():
        path = folder / name
    else:
        from transformers.utils import cached_file

        found = cached_file(
            location,
            name,
            _raise_exceptions_for_missing_entries=False,
            _raise_exceptions_for_connection_errors=False,
        )
        path = Path(found) if found else None
    return path if path is not None and path.is_file() else None


def _read_json(location: str, name: str) -> dict[str, Any] | None:
    """``name`` of a local folder or a hub model (:func:`_model_file`) read as a JSON
    mapping, or None when the model has no such file or it holds no mapping."""
    path = _model_file(location, name)
    if path is None:
        return None
    try:
        content = json.loads(path.read_bytes())  # JSON text is UTF-8 (or -16/-32, detected)
    except ValueError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from error
    return content if isinstance(content, dict) else None


def cross_encoder_activation(location: str | os.PathLike) -> str | None:
    """None for a model that is not a cross-encoder (its ``config.json`` names no
    ``*ForSequenceClassification`` architecture); for one, the activation its scores take,
    as sentence-transformers' ``CrossEncoder`` chooses it for the folder (its
    ``_parse_model_config`` and ``get_default_activation_fn``), which ``predict`` applies:
    the ``activation_fn`` saved in ``config_sentence_transformers.json`` of a folder it
    saved as one (``modules.json`` beside it and ``model_type`` ``CrossEncoder``: it
    reads that file for no other folder), else
    ``config.json``'s ``sentence_transformers.activation_fn`` (saved before v6), else its
    ``sbert_ce_default_activation_function`` (before v4), else sigmoid, its default
    for one output — a plain sequence classifier with nothing saved (``sts-cosent``'s
    cross-encoder included) gets sigmoid too, not its raw logit.

    ValueError naming the file for a classifier with more than one output or a saved
    activation other than sigmoid, identity or tanh (``CrossEncoder`` applies any ``torch.``
    class saved, and its default in place of another name unless it trusts remote code)."""
    location = str(location)
    config = _read_json(location, "config.json") or {}
    architectures = config.get("architectures") or []
    if not any(str(name).endswith("ForSequenceClassification") for name in architectures):
        return None
    # transformers writes neither id2label nor num_labels for its default, 2 outputs
    labels = len(config.get("id2label") or {}) or int(config.get("num_labels", 2))
    if labels != 1:
        raise ValueError(
            f"{location}/config.json: a sequence classifier with {labels} outputs; a "
            "cross-encoder teacher gives one score per pair (num_labels 1)"
        )
    settings = _read_json(location, ST_SETTINGS_FILE)
    saved_as_cross_encoder = (settings or {}).get("model_type") == "CrossEncoder"
    if not saved_as_cross_encoder or _model_file(location, "modules.json") is None:
        settings = None  # CrossEncoder loads such a folder without reading the file
    saved = [
        (ST_SETTINGS_FILE, (settings or {}).get("activation_fn")),
        ("config.json", (config.get("sentence_transformers") or {}).get("activation_fn")),
        ("config.json", config.get("sbert_ce_default_activation_function")),
    ]
    for file_name, name in saved:
        if name is None:
            continue
        if name not in ACTIVATIONS:
            raise ValueError(
                f"{location}/{file_name}: activation_fn {name!r} is not one the teacher "
                f"applies ({', '.join(sorted(ACTIVATIONS))})"
            )
        return ACTIVATIONS[name]
    return "sigmoid"  # CrossEncoder's default for one output, whoever saved the folder


class CrossEncoderScorer:
    """A cross-encoder as a teacher: activation(logit) of every pair, float64, in order —
    with the activation :func:`cross_encoder_activation` reads, what sentence-transformers'
    ``CrossEncoder(folder).predict`` returns for the same folder (tested for each saved
    activation and for a plain classifier with none: ``test_cross_encoder_teacher.py``)."""

    def __init__(self, model: Any, tokenizer: Any, max_length: int, activation: str) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.activation = activation

    @classmethod
    def load(
        cls,
        location: str | os.PathLike,
        device: Any = "cpu",
        max_length: int | None = None,
        trust_remote_code: bool = False,
    ) -> CrossEncoderScorer:
        """The folder's model in evaluation mode on ``device`` and its activation
        (:func:`cross_encoder_activation`; ValueError for a model that is no cross-encoder)."""
        activation = cross_encoder_activation(location)
        if activation is None:
            raise ValueError(f"{location}: not a cross-encoder (no *ForSequenceClassification)")
        model, tokenizer, limit = load_cross_encoder(location, max_length, trust_remote_code)
        return cls(model.to(device).eval(), tokenizer, limit, activation)

    def score_pairs(
        self, sentences1: Sequence[str], sentences2: Sequence[str], batch_size: int = 64
    ) -> np.ndarray:
        logits = predict_pair_scores(
            self.model, self.tokenizer, sentences1, sentences2, batch_size, self.max_length
        )
        return ACTIVATION_FUNCTIONS[self.activation](logits)
