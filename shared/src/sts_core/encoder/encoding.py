"""Text to vectors: tokenising with the prompt (a sentence cut to fit the template),
embedding a tokenized batch (the backbone on the path :mod:`.packing` chooses, then
pooling), and embedding sentences for evaluation (:meth:`SentenceEncoder.encode`): each
distinct sentence once, sorted by length, in batches of ``batch_size`` sentences or of
``max_batch_tokens`` tokens (:func:`batch_bounds`), padded with numpy to their own longest
member, or padding-free where the varlen path applies (:func:`.packing.evaluation_path`);
on a GPU the next chunk of sentences is tokenized in a background thread
(:func:`tokenized_chunks`)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
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
#: ``encode``'s default ``max_batch_tokens`` on a CUDA device: ``batch_size`` × this many
#: tokens (16,384 at the default batch size 64), so that a batch of short sentences holds
#: many more than ``batch_size`` of them while no batch holds more tokens than
#: ``batch_size`` sentences of 256 tokens. Not measured on a GPU here. On other devices
#: the default is ``batch_size`` sentences a batch: on a CPU a budget was not faster
#: (64 × 256 tokens ran at half the speed; docs/benchmarks.md).
CUDA_TOKENS_PER_SENTENCE = 256
#: sentences tokenized a chunk on a CUDA device, the next chunk in a background thread
#: while the device encodes this one (:func:`tokenized_chunks`)
CUDA_TOKENIZE_CHUNK = 4096


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


def check_positive(name: str, value: object) -> None:
    """ValueError naming ``name`` unless ``value`` is an integer ≥ 1 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")


def default_max_batch_tokens(device: torch.device | str, batch_size: int) -> int | None:
    """``encode``'s token budget when none is given: on a CUDA device ``batch_size`` ×
    :data:`CUDA_TOKENS_PER_SENTENCE`; elsewhere None (``batch_size`` sentences a batch)."""
    if torch.device(device).type == "cuda":
        return batch_size * CUDA_TOKENS_PER_SENTENCE
    return None


def resolve_max_batch_tokens(
    encoder: SentenceEncoder, batch_size: int, max_batch_tokens: int | None
) -> int | None:
    """The token budget ``encode`` batches by: ``max_batch_tokens``, else the encoder's
    :attr:`~SentenceEncoder.max_batch_tokens` (what ``sts-eval --max-batch-tokens`` sets),
    else :func:`default_max_batch_tokens` of its device; None: ``batch_size`` sentences a
    batch. ValueError (naming ``max_batch_tokens``) unless an integer ≥ 1."""
    check_positive("batch_size", batch_size)
    value = max_batch_tokens
    if value is None:
        value = getattr(encoder, "max_batch_tokens", None)
    if value is None:
        return default_max_batch_tokens(encoder.device, batch_size)
    check_positive("max_batch_tokens", value)
    return value


def encode(
    encoder: SentenceEncoder,
    sentences: str | Sequence[str],
    batch_size: int,
    show_progress_bar: bool,
    normalize: bool | None,
    max_batch_tokens: int | None,
    progress_desc: str = "Encoding",
    truncate_dim: int | None = None,
    token_budget: int | None = None,
) -> np.ndarray:
    """:meth:`SentenceEncoder.encode`.

    Batches: the distinct sentences are tokenized (without padding; on a CUDA device in
    chunks of :data:`CUDA_TOKENIZE_CHUNK`, the next chunk in a background thread while the
    device encodes the current one: :func:`tokenized_chunks`), sorted longest first
    within a chunk, and cut into batches of ``batch_size`` sentences or, with a token
    budget (:func:`resolve_max_batch_tokens`: ``max_batch_tokens``, its old name
    ``token_budget``, the encoder's attribute, else :func:`default_max_batch_tokens` of
    the device), of as many sentences as fit it (:func:`batch_bounds`). Each batch is
    padded with numpy, pinned and copied without blocking on a GPU, and runs on the path
    :func:`~sts_core.encoder.packing.evaluation_path` picks: padding-free (``varlen``,
    the budget then counting real tokens) where a fused varlen kernel applies, else
    padded. The vectors stay on the device until one copy at the end, in input order.
    """
    if token_budget is not None:
        if max_batch_tokens is not None:
            raise TypeError("encode: give max_batch_tokens or token_budget (its old name)")
        check_positive("token_budget", token_budget)
        max_batch_tokens = token_budget
    budget = resolve_max_batch_tokens(encoder, batch_size, max_batch_tokens)
    check_truncate_dim(truncate_dim, encoder.dimension)
    single = isinstance(sentences, str)
    items = [sentences] if isinstance(sentences, str) else list(sentences)
    distinct = list(dict.fromkeys(items))
    progress = progress_desc if show_progress_bar else None
    vectors = _encode_distinct(encoder, distinct, batch_size, progress, budget)
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


def tokenize_chunk(device: torch.device) -> int | None:
    """Sentences tokenized a chunk by ``encode`` on ``device``: :data:`CUDA_TOKENIZE_CHUNK`
    on a CUDA device (the host tokenizes the next chunk while the device computes), None
    (all at once, before the first batch) elsewhere: on a CPU the tokenizer and the model
    share the cores, and tokenizing is under 2 % of the time (1.3–1.4 s for the STS test
    sets' 26,083 distinct sentences against about 77 s to encode them with
    all-MiniLM-L6-v2 on 2 cores: docs/benchmarks.md)."""
    return CUDA_TOKENIZE_CHUNK if device.type == "cuda" else None


def tokenized_chunks(
    encoder: SentenceEncoder, sentences: list[str], chunk: int | None
) -> Generator[tuple[int, Any], None, None]:
    """``(offset, unpadded tokenization)`` of ``sentences`` in chunks of ``chunk`` (None:
    one chunk); with several, each next chunk is tokenized in a background thread while the
    caller works on the one yielded. The caller must not use the tokenizer (not even its
    ``pad_token_id``, which asks the Rust tokenizer) until the generator is done: a fast
    tokenizer may refuse a call ("Already borrowed") while another thread's call changes
    its truncation."""
    size = chunk or len(sentences)
    starts = range(0, len(sentences), size)
    if len(starts) == 1:
        yield 0, encoder.tokenize(sentences, padding=False)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sts-tokenize") as pool:

        def submit(start: int) -> Future[Any]:
            return pool.submit(encoder.tokenize, sentences[start : start + size], padding=False)

        pending = submit(0)
        try:
            for number, start in enumerate(starts):
                encoded = pending.result()
                if number + 1 < len(starts):
                    pending = submit(starts[number + 1])
                yield start, encoded
        finally:
            pending.cancel()  # the consumer stopped early (an error): no further chunk


def _encode_distinct(
    encoder: SentenceEncoder,
    sentences: list[str],
    batch_size: int,
    progress: str | None,
    max_batch_tokens: int | None = None,
) -> torch.Tensor:
    """The vectors of ``sentences`` in their order; ``progress``: the progress bar's name
    (None: no bar; none for a single batch either). Each chunk of
    :func:`tokenized_chunks` is sorted longest first and cut by :func:`batch_bounds`
    (``max_batch_tokens`` counts real tokens on a padding-free path, padded ones else)."""
    if not sentences:
        return torch.empty(0, encoder.dimension, dtype=torch.float32)
    device = encoder.device
    fills = _pad_values(encoder.tokenizer)  # before a background thread uses the tokenizer
    output = torch.empty(len(sentences), encoder.dimension, dtype=torch.float32, device=device)
    # restore each submodule's own mode afterwards: a freshly loaded encoder is in train
    # mode while its backbone is in eval mode, and encoder.train(True) would turn dropout on
    modes = {module: module.training for module in encoder.modules()}
    encoder.eval()
    chunk = tokenize_chunk(device)
    bar = None
    try:
        packed = encoder.packing_path()[0] != "padded"
        # no_grad, not inference_mode: under DeepSpeed ZeRO-3 the parameters this gathers
        # (the small ones stay gathered) would become inference tensors, which the training
        # steps after an evaluation (the one at step 0 too) cannot save for backward
        with (
            torch.no_grad(),
            contextlib.closing(tokenized_chunks(encoder, sentences, chunk)) as chunks,
        ):
            for offset, encoded in chunks:
                lengths = np.fromiter(map(len, encoded["input_ids"]), dtype=np.int64)
                order = np.argsort(-lengths, kind="stable")
                bounds = batch_bounds(lengths[order], batch_size, max_batch_tokens, packed)
                if bar is None:
                    single = len(bounds) < 2 and len(encoded["input_ids"]) == len(sentences)
                    bar = tqdm(
                        total=len(sentences), desc=progress, unit="sentence",
                        disable=not progress or single,
                    )  # fmt: skip
                for start, end in bounds:
                    index = order[start:end]
                    batch = _padded_batch(encoded, index, device, fills)
                    rows = torch.as_tensor(index + offset, device=device)
                    output[rows] = encoder(**batch).float()
                    bar.update(end - start)
    finally:
        if bar is not None:
            bar.close()
        for module, training in modes.items():
            module.training = training
    return output.cpu()


def _pad_values(tokenizer: Any) -> tuple[dict[str, int], bool]:
    """The value each tokenized key is padded with (0 for a key not named) and whether the
    tokenizer pads on the left."""
    fills = {
        "input_ids": tokenizer.pad_token_id,
        "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0),
    }
    return fills, getattr(tokenizer, "padding_side", "right") == "left"


def _padded_batch(
    encoded: Mapping[str, list[list[int]]],
    index: np.ndarray,
    device: torch.device,
    pad_values: tuple[dict[str, int], bool],
) -> dict[str, torch.Tensor]:
    """The rows ``index`` of the unpadded tokenization as padded tensors on ``device``
    (``pad_values``: :func:`_pad_values`, the tokenizer's pad values and side), pinned and
    copied without blocking on a GPU."""
    fills, left = pad_values
    batch = {}
    for key, rows in encoded.items():
        padded = torch.from_numpy(pad_rows([rows[i] for i in index], fills.get(key, 0), left))
        if device.type == "cuda":
            padded = padded.pin_memory()
        batch[key] = padded.to(device, non_blocking=True)
    return batch


def batch_bounds(
    lengths: np.ndarray,
    batch_size: int,
    max_batch_tokens: int | None = None,
    packed: bool = False,
) -> list[tuple[int, int]]:
    """``(start, end)`` of each batch over sentences sorted longest first: ``batch_size``
    sentences, or with ``max_batch_tokens`` as many as fit that many tokens (at least one):
    padded tokens, ``count × first length``, or with ``packed`` (a padding-free path) real
    tokens, the sum of the lengths."""
    total = len(lengths)
    if max_batch_tokens is None:
        return [(start, min(start + batch_size, total)) for start in range(0, total, batch_size)]
    ends = np.cumsum(lengths)
    bounds, start = [], 0
    while start < total:
        if packed:
            before = int(ends[start - 1]) if start else 0
            end = int(np.searchsorted(ends, before + max_batch_tokens, side="right"))
        else:
            end = start + max_batch_tokens // max(int(lengths[start]), 1)
        end = min(max(end, start + 1), total)
        bounds.append((start, end))
        start = end
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
