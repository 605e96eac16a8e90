"""Cross-encoders (interaction models): a sequence classifier with one output on the pair.

The pair is encoded jointly (``[CLS] s1 [SEP] s2 [SEP]``) and the single logit is the
similarity score. This module holds what any method needs to train one with the core's
Trainer: loading, a collator and batched scoring. Its dev evaluator is
``PairEvaluator(dataset, name, cross_encoder_scorer(), batch_size)`` (``sts_core.evaluation``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sts_core.encoder import check_model_location


def load_cross_encoder(
    name_or_path: str | os.PathLike, max_length: int | None = None, trust_remote_code: bool = False
) -> tuple[Any, Any, int]:
    """``AutoModelForSequenceClassification`` with ``num_labels=1``, its tokenizer, max length
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
    limit = max_length or min(512, int(getattr(tokenizer, "model_max_length", 512) or 512))
    return model, tokenizer, limit


class PairCrossCollator:
    """Tokenize (sentence1, sentence2) jointly, padded to the batch's longest; float labels."""

    def __init__(self, tokenizer: Any, max_length: int, label_column: str = "score") -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.label_column = label_column

    def __call__(self, rows: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = dict(
            self.tokenizer(
                [row["sentence1"] for row in rows],
                [row["sentence2"] for row in rows],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
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
    max_length: int = 512,
) -> np.ndarray:
    """The model's single logit for every pair, float64, in input order."""
    collate = PairCrossCollator(tokenizer, max_length, label_column="")
    rows = [{"sentence1": a, "sentence2": b} for a, b in zip(sentences1, sentences2, strict=True)]
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    scores = []
    with torch.inference_mode():
        for start in range(0, len(rows), batch_size):
            batch = {k: v.to(device) for k, v in collate(rows[start : start + batch_size]).items()}
            scores.append(model(**batch).logits.float().reshape(-1).cpu())
    model.train(was_training)
    return torch.cat(scores).double().numpy() if scores else np.zeros(0)
