"""Text to vectors: tokenising with the prompt (a sentence cut to fit the template),
embedding a tokenized batch (the backbone on the path :mod:`.packing` chooses, then
pooling), and embedding sentences for evaluation (:meth:`SentenceEncoder.encode`): each
distinct sentence once, sorted by length, in batches padded with numpy to their own
longest member."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from sts_core.encoder.model_shape import check_max_length, loaded_shape
from sts_core.encoder.packing import choose_path, concat_features, run_backbone
from sts_core.pooling import needs_hidden_states, pool
from sts_core.prompts import apply_prompt

if TYPE_CHECKING:
    from sts_core.encoder.model import SentenceEncoder

DEFAULT_MAX_LENGTH = 512


def checked_max_length(max_length: int | None, tokenizer: Any, backbone: Any) -> int:
    """``max_length`` (at least 1, at most the model's positions:
    :class:`~sts_core.encoder.model_shape.ModelShapeError`), by default the tokenizer's
    capped at the model's positions and at 512."""
    if max_length is not None and max_length < 1:
        raise ValueError(f"max_length must be at least 1 (or unset), got {max_length}")
    shape = loaded_shape(backbone)
    check_max_length(max_length, shape, "max_length")
    return max_length or _default_max_length(tokenizer, shape.positions)


def _default_max_length(tokenizer: Any, positions: int | None) -> int:
    candidates = [DEFAULT_MAX_LENGTH, getattr(tokenizer, "model_max_length", None), positions]
    return min(int(c) for c in candidates if isinstance(c, int | float) and c > 0)


def tokenize(encoder: SentenceEncoder, sentences: Sequence[str], padding: bool | str) -> Any:
    """:meth:`SentenceEncoder.tokenize`."""
    if encoder.prompt is not None and encoder.max_length:
        sentences = fit_to_prompt(encoder, sentences)
    texts = [apply_prompt(encoder.prompt, s) for s in sentences]
    return encoder.tokenizer(
        texts,
        padding=padding,
        truncation=True,
        max_length=encoder.max_length,
        return_tensors="pt" if padding else None,
    )


def fit_to_prompt(encoder: SentenceEncoder, sentences: Sequence[str]) -> list[str]:
    """Each sentence shortened (to its first tokens, decoded) so that it fits in
    ``max_length`` tokens together with the prompt template and special tokens; others as
    they are. As the Pcc-tuning and PromptEOL code cut the sentence, not the prompt."""
    tokenizer, prompt, max_length = encoder.tokenizer, encoder.prompt, encoder.max_length
    overhead = len(tokenizer(apply_prompt(prompt, ""))["input_ids"])
    budget = max_length - overhead
    if budget < 1:
        raise ValueError(
            f"max_length {max_length} leaves no room for the sentence: the prompt "
            f"{prompt!r} takes {overhead} tokens with the special tokens"
        )
    fitted = list(sentences)
    ids = tokenizer(fitted, add_special_tokens=False)["input_ids"]
    for index, tokens in enumerate(ids):
        keep = budget
        while len(tokens) > keep and keep > 0:  # a decoded cut may re-tokenize longer
            fitted[index] = tokenizer.decode(tokens[:keep]).strip()
            text = apply_prompt(prompt, fitted[index])
            if len(tokenizer(text)["input_ids"]) <= max_length:
                break
            keep -= 1
    return fitted


def forward(
    encoder: SentenceEncoder,
    input_ids: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    then: Callable[[Any], Any] | None,
    columns: Mapping[str, dict[str, torch.Tensor]] | None,
    features: dict[str, Any],
) -> Any:
    """:meth:`SentenceEncoder.forward`."""
    embeddings: torch.Tensor | dict[str, torch.Tensor]
    if columns is not None:
        embeddings = embed_columns(encoder, columns)
    elif input_ids is None or attention_mask is None:
        raise TypeError("forward takes input_ids and attention_mask, or columns")
    else:
        embeddings = embed_batch(encoder, input_ids, attention_mask, **features)
    return embeddings if then is None else then(embeddings)


def embed_batch(
    encoder: SentenceEncoder,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    **features: Any,
) -> torch.Tensor:
    """Pooled (and, with ``normalize``, unit-length) embeddings of one tokenized batch."""
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    inputs.update({k: v for k, v in features.items() if k in encoder._forward_keys})
    hidden = needs_hidden_states(encoder.pooling)
    last, states = run_backbone(encoder, inputs, hidden)
    embeddings = pool(encoder.pooling, last, attention_mask, states)
    if encoder.normalize:
        embeddings = nn.functional.normalize(embeddings, p=2, dim=-1)
    return embeddings


def embed_columns(
    encoder: SentenceEncoder, columns: Mapping[str, dict[str, torch.Tensor]]
) -> dict[str, torch.Tensor]:
    """Embeddings of each text column: ``{"sentence1": (N, d), …}``.

    Packing (:meth:`SentenceEncoder.packing_path` not ``padded``): all columns in one
    packed forward, which costs the batch's real tokens. Otherwise one forward per column,
    each padded to its own longest sentence: the work, the dropout draws and the padding
    side (left-padded decoders) are those of sentence-transformers, which embeds each
    column apart (tested for a left-padded decoder: under one seed, a training forward with
    attention dropout gives the peer's vectors on the peer's tokens)."""
    if len(columns) > 1 and choose_path(encoder)[0] != "padded":
        merged, sizes = concat_features(list(columns.values()))
        flat = embed_batch(encoder, **merged)
        return dict(zip(columns, flat.split(sizes), strict=True))
    return {name: embed_batch(encoder, **features) for name, features in columns.items()}


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")


def encode(
    encoder: SentenceEncoder,
    sentences: str | Sequence[str],
    batch_size: int,
    show_progress_bar: bool,
    normalize: bool | None,
    token_budget: int | None,
    progress_desc: str = "Encoding",
    truncate_dim: int | None = None,
) -> np.ndarray:
    """:meth:`SentenceEncoder.encode`."""
    _check_positive("batch_size", batch_size)
    if token_budget is not None:
        _check_positive("token_budget", token_budget)
    check_truncate_dim(truncate_dim, encoder.dimension)
    single = isinstance(sentences, str)
    items = [sentences] if isinstance(sentences, str) else list(sentences)
    distinct = list(dict.fromkeys(items))
    progress = progress_desc if show_progress_bar else None
    vectors = _encode_distinct(encoder, distinct, batch_size, progress, token_budget)
    if truncate_dim is not None:
        vectors = vectors[:, :truncate_dim]
    if normalize or (truncate_dim is not None and encoder.normalize):
        vectors = nn.functional.normalize(vectors, p=2, dim=-1)
    position = {sentence: i for i, sentence in enumerate(distinct)}
    result = vectors[[position[s] for s in items]].numpy()
    return result[0] if single else result


def check_truncate_dim(truncate_dim: int | None, dimension: int) -> None:
    """ValueError unless ``truncate_dim`` is None or a whole number in 1 … ``dimension``."""
    if truncate_dim is None:
        return
    if isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int):
        raise ValueError(f"truncate_dim: {truncate_dim!r} is not a whole number")
    if not 1 <= truncate_dim <= dimension:
        raise ValueError(
            f"truncate_dim: {truncate_dim} is outside 1 … {dimension} (the model's dimensions)"
        )


def _encode_distinct(
    encoder: SentenceEncoder,
    sentences: list[str],
    batch_size: int,
    progress: str | None,
    token_budget: int | None = None,
) -> torch.Tensor:
    """The vectors of ``sentences`` in their order; ``progress``: the progress bar's name
    (None: no bar; none for a single batch either)."""
    if not sentences:
        return torch.empty(0, encoder.dimension, dtype=torch.float32)
    encoded = encoder.tokenize(sentences, padding=False)
    lengths = np.fromiter(map(len, encoded["input_ids"]), dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    bounds = batch_bounds(lengths[order], batch_size, token_budget)
    device = encoder.device
    output = torch.empty(len(sentences), encoder.dimension, dtype=torch.float32, device=device)
    # restore each submodule's own mode afterwards: a freshly loaded encoder is in train
    # mode while its backbone is in eval mode, and encoder.train(True) would turn dropout on
    modes = {module: module.training for module in encoder.modules()}
    encoder.eval()
    try:
        # no_grad, not inference_mode: under DeepSpeed ZeRO-3 the parameters this gathers
        # (the small ones stay gathered) would become inference tensors, which the training
        # steps after an evaluation (the one at step 0 too) cannot save for backward
        with torch.no_grad():
            for start, end in tqdm(bounds, desc=progress, disable=not progress or len(bounds) < 2):
                index = order[start:end]
                batch = _padded_batch(encoder.tokenizer, encoded, index, device)
                rows = torch.as_tensor(index, device=device)
                output[rows] = encoder(**batch).float()
    finally:
        for module, training in modes.items():
            module.training = training
    return output.cpu()


def _padded_batch(
    tokenizer: Any,
    encoded: Mapping[str, list[list[int]]],
    index: np.ndarray,
    device: torch.device,
) -> dict[str, torch.Tensor]:
    """The rows ``index`` of the unpadded tokenization as padded tensors on ``device``
    (the tokenizer's padding side and pad values), pinned and copied without blocking
    on a GPU."""
    left = getattr(tokenizer, "padding_side", "right") == "left"
    fills = {
        "input_ids": tokenizer.pad_token_id,
        "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0),
    }
    batch = {}
    for key, rows in encoded.items():
        padded = torch.from_numpy(pad_rows([rows[i] for i in index], fills.get(key, 0), left))
        if device.type == "cuda":
            padded = padded.pin_memory()
        batch[key] = padded.to(device, non_blocking=True)
    return batch


def batch_bounds(
    lengths: np.ndarray, batch_size: int, token_budget: int | None = None
) -> list[tuple[int, int]]:
    """``(start, end)`` of each batch over sentences sorted longest first: ``batch_size``
    sentences, or with ``token_budget`` as many as fit ``count × first length ≤ budget``
    (at least one)."""
    total = len(lengths)
    if token_budget is None:
        return [(start, min(start + batch_size, total)) for start in range(0, total, batch_size)]
    bounds, start = [], 0
    while start < total:
        size = max(1, token_budget // max(int(lengths[start]), 1))
        bounds.append((start, min(start + size, total)))
        start += size
    return bounds


def pad_rows(rows: Sequence[Sequence[int]], fill: int, left: bool = False) -> np.ndarray:
    """Token rows as one ``(len(rows), longest)`` int64 array, ``fill`` on the padding side."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max()) if len(rows) else 0
    padded = np.full((len(rows), width), fill, dtype=np.int64)
    columns = np.arange(width)
    real = columns >= (width - lengths)[:, None] if left else columns < lengths[:, None]
    padded[real] = np.fromiter(itertools.chain.from_iterable(rows), np.int64, int(lengths.sum()))
    return padded
