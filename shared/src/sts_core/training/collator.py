"""Batch collation: tokenize sentences, pairs and triplets with dynamic padding."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

TEXT_COLUMNS = ("sentence", "sentence1", "sentence2", "hard_negative")
TEXT_IDS_PREFIX = "text_ids_"


def text_columns_with(extra: Iterable[str]) -> tuple[str, ...]:
    """:data:`TEXT_COLUMNS` and, after them, the columns of ``extra`` they lack (a loss's
    own text columns, e.g. SIFTER's ``with_backbone``)."""
    return TEXT_COLUMNS + tuple(c for c in dict.fromkeys(extra) if c not in TEXT_COLUMNS)


def text_ids(texts: Iterable[str]) -> torch.Tensor:
    """A 64-bit id per text (BLAKE2b of its UTF-8 bytes, as int64): equal texts, equal ids,
    in every process and run (Python's ``hash`` is salted per process)."""
    return torch.tensor(
        [
            int.from_bytes(
                hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little", signed=True
            )
            for text in texts
        ],
        dtype=torch.int64,
    )


class SentenceCollator:
    """Turn rows of text columns into tokenized tensors, padded to the batch's longest.

    Each text column ``c`` present in the rows (``sentence``, ``sentence1``, ``sentence2``,
    ``hard_negative``, and the loss's own columns given as ``text_columns``) becomes
    ``c_input_ids``, ``c_attention_mask`` (and ``c_token_type_ids`` when the tokenizer
    makes them); the label column becomes a float
    tensor ``labels``. Keys are flat so every Trainer code path (DDP, DeepSpeed,
    gradient accumulation) moves them to the device unchanged. The encoder's prompt
    template and max length apply.

    Args:
        encoder: a SentenceEncoder (its ``tokenize`` is used).
        label_column: column to read as labels (absent columns give no ``labels``).
        text_id_columns: text columns whose texts' identities a loss needs (which rows hold
            the same text: BSC's repeated anchors): each becomes ``text_ids_<column>``, an
            int64 id per row (:func:`text_ids`).
        text_columns: the columns read as text (default :data:`TEXT_COLUMNS`; see
            :func:`text_columns_with`).
        prompts: a prompt put before every text of a column, by column (a training set's
            ``prompt``); the text ids are of the texts without it.
    """

    def __init__(
        self,
        encoder: Any,
        label_column: str = "score",
        text_id_columns: Sequence[str] = (),
        text_columns: Sequence[str] = TEXT_COLUMNS,
        prompts: Mapping[str, str] | None = None,
    ) -> None:
        self.encoder = encoder
        self.label_column = label_column
        self.text_id_columns = tuple(text_id_columns)
        self.text_columns = tuple(text_columns)
        self.prompts = dict(prompts or {})

    def __call__(self, rows: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch: dict[str, torch.Tensor] = {}
        for column in self.text_columns:
            if column in rows[0]:
                prompt = self.prompts.get(column, "")
                tokens = self.encoder.tokenize([prompt + row[column] for row in rows])
                batch.update({f"{column}_{key}": value for key, value in tokens.items()})
        if self.label_column in rows[0]:
            batch["labels"] = torch.tensor([float(row[self.label_column]) for row in rows])
        for column in self.text_id_columns:
            if column in rows[0]:
                batch[f"{TEXT_IDS_PREFIX}{column}"] = text_ids(row[column] for row in rows)
        return batch


class TrainSetsCollator:
    """The collator of several training sets (``train_datasets`` as a mapping): each batch
    holds rows of one set (:data:`~sts_core.training.multi_dataset.DATASET_NAME_KEY` names
    it), collated by that set's :class:`SentenceCollator` (its label column and prompts);
    the batch carries the set's name under the same key, for ``compute_loss``."""

    def __init__(self, collators: Mapping[str, SentenceCollator]) -> None:
        self.collators = dict(collators)

    def __call__(self, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        from sts_core.training.multi_dataset import DATASET_NAME_KEY

        names = {row[DATASET_NAME_KEY] for row in rows}
        if len(names) != 1:
            raise ValueError(f"a batch must hold rows of one training set, got {sorted(names)}")
        (name,) = names
        batch: dict[str, Any] = self.collators[name](rows)
        batch[DATASET_NAME_KEY] = name
        return batch


def batch_text_ids(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The ``text_ids_<column>`` entries of a collated batch, by column."""
    return {
        key[len(TEXT_IDS_PREFIX) :]: value
        for key, value in inputs.items()
        if key.startswith(TEXT_IDS_PREFIX)
    }


def split_features(
    inputs: dict[str, torch.Tensor], columns: Sequence[str] = TEXT_COLUMNS
) -> dict[str, dict[str, torch.Tensor]]:
    """Group flat collated keys back into one feature dict per text column of ``columns``
    (the longest name first: ``sentence_x_input_ids`` belongs to ``sentence_x``, not to
    ``sentence``)."""
    groups: dict[str, dict[str, torch.Tensor]] = {}
    by_length = sorted(columns, key=len, reverse=True)
    for key, value in inputs.items():
        for column in by_length:
            if key.startswith(f"{column}_"):
                groups.setdefault(column, {})[key[len(column) + 1 :]] = value
                break
    return groups
