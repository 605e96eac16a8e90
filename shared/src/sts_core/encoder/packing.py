"""Padding-free training: the real tokens of a padded batch packed without padding, the
varlen attention kernels, and the choice of path (``padding_free``).

Two packings of a padded ``(batch, width)`` batch:

- :class:`VarlenPacking` (path ``varlen``): one row of all the batch's real tokens,
  sentence after sentence, with ``cu_seq_lens`` (the cumulative sentence lengths,
  ``[0, n1, n1 + n2, …]``) telling the kernel where each sentence starts: attention stays
  inside a sentence, and no ``(tokens × tokens)`` mask is built. The attention function is
  registered in transformers' ``AttentionInterface`` as :data:`VARLEN_ATTENTION`, so every
  backbone whose attention goes through that interface (BERT, RoBERTa, ELECTRA, Llama,
  Qwen2, Mistral, …) uses it, and the packing metadata travels as the keyword arguments
  transformers already passes down to the attention (``cu_seq_lens_q``, ``max_length_q``,
  as in its flash-attention path). A call without them (evaluation, the padded forward) is
  SDPA with transformers' own mask.
- :class:`TokenPacking` (path ``block_mask``): rows of whole sentences (first-fit
  decreasing) with a block-diagonal 4D mask, for SDPA or eager attention.

Kernels, the first present (:func:`varlen_kernel`): ``flash_attn`` (the ``flash-attn``
package's ``flash_attn_varlen_func``, CUDA, attention dropout supported), ``torch``
(``torch.nn.attention.varlen.varlen_attn``, CUDA only, no attention dropout), else
``reference`` (one SDPA call per sentence: exact, slow; for CPU tests).

:func:`choose_path` chooses the path of a :class:`~sts_core.encoder.SentenceEncoder`'s
training forward, :func:`evaluation_path` that of its evaluation forward (``encode``);
:func:`padding_free_mode` reads the ``padding_free`` setting (the training config checks
it with that function too).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
from torch.nn import functional

from sts_core.encoder.lora import inner_model

if TYPE_CHECKING:
    from transformers import PretrainedConfig

    from sts_core.encoder.model import SentenceEncoder

logger = logging.getLogger(__package__)  # "sts_core.encoder", as every part of the encoder

PADDING_FREE_MODES = ("auto", "true", "false", "varlen", "block_mask")
PADDING_FREE_WORDS = {"yes": "true", "on": "true", "1": "true"} | {
    "no": "false",
    "off": "false",
    "0": "false",
}


def padding_free_mode(value: bool | str) -> str:
    """``padding_free`` as one of :data:`PADDING_FREE_MODES` (booleans and yes/no words read
    as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    word = str(value).strip().lower()
    mode = PADDING_FREE_WORDS.get(word, word)
    if mode not in PADDING_FREE_MODES:
        raise ValueError(
            f"padding_free must be one of {', '.join(PADDING_FREE_MODES)} (or a boolean), "
            f"got {value!r}"
        )
    return mode


VARLEN_ATTENTION = "sts_varlen"
KERNELS = ("flash_attn", "torch", "reference")
HALF_DTYPES = (torch.float16, torch.bfloat16)  # what the fused varlen kernels compute in


# Backbones whose training forward may run padding-free (see packing_path).
# Packed rows with a block-diagonal 4D mask: bidirectional encoders with absolute positions.
PADDING_FREE_MODEL_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "electra"})
PADDING_FREE_ATTENTION = frozenset({"sdpa", "eager", VARLEN_ATTENTION})
# One row and a varlen kernel: any backbone whose attention goes through transformers'
# AttentionInterface; decoders attend causally within each sentence.
VARLEN_MODEL_TYPES = PADDING_FREE_MODEL_TYPES | {"llama", "mistral", "qwen2", "qwen3"}
# Embeddings that count positions from pad_token_id + 1 (RoBERTa's)
POSITION_OFFSET_MODEL_TYPES = frozenset({"roberta", "xlm-roberta"})
# Whether padding_free: auto takes the varlen path on a GPU with a kernel (where the kernel
# applies the backbone's attention dropout: auto never changes what is computed). Measured
# on an H200 (benchmarks/results/gpu_check_h200_call3/): varlen 782.5 pairs/s against
# padded 401.6 for a BERT-base in bf16.
AUTO_TAKES_VARLEN = True


@functools.cache
def _flash_attn_installed() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


@functools.cache
def _torch_varlen_present() -> bool:
    try:
        from torch.nn.attention.varlen import varlen_attn  # noqa: F401
    except ImportError:
        return False
    return True


def varlen_kernel(device: torch.device | str) -> str | None:
    """The fused varlen kernel on ``device``: ``flash_attn``, ``torch`` or ``None`` (no
    fused kernel: a CPU, or a GPU with neither the package nor torch's ``varlen_attn``)."""
    if torch.device(device).type != "cuda":
        return None
    if _flash_attn_installed():
        return "flash_attn"
    return "torch" if _torch_varlen_present() else None


def kernel_has_dropout(kernel: str | None) -> bool:
    """Whether a kernel applies attention-probability dropout (torch's ``varlen_attn`` does
    not: on that path attention dropout is off, hidden-state dropout still on)."""
    return kernel != "torch"


@torch.compiler.disable  # type: ignore[untyped-decorator]  # a registration: run eagerly
@functools.cache
def register_varlen_attention() -> None:
    """Register :data:`VARLEN_ATTENTION` with transformers (once): the attention function
    below, and SDPA's mask function for the calls that are not packed."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(VARLEN_ATTENTION, varlen_attention_forward)
    AttentionMaskInterface.register(VARLEN_ATTENTION, sdpa_mask)


def varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: ``query`` ``(batch, heads, tokens, head_dim)``,
    returns ``(batch, tokens, heads, head_dim)``. Packed (``cu_seq_lens_q`` given, batch 1):
    the varlen kernel, causal when the module is (a decoder); otherwise SDPA."""
    cu_seq_lens = kwargs.pop("cu_seq_lens_q", None)
    max_length = kwargs.pop("max_length_q", None)
    for name in ("cu_seq_lens_k", "max_length_k"):
        kwargs.pop(name, None)
    if cu_seq_lens is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if query.shape[0] != 1:
        raise ValueError(f"a packed batch is one row, got {query.shape[0]} rows")
    causal = bool(getattr(module, "is_causal", False))
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))  # (tokens, heads, dim)
    output = varlen_attention(
        q, k, v, cu_seq_lens, int(max_length), causal=causal, dropout=dropout, scale=scaling
    )
    return output.unsqueeze(0), None


def varlen_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seq_lens: torch.Tensor,
    max_length: int,
    *,
    causal: bool = False,
    dropout: float = 0.0,
    scale: float | None = None,
    kernel: str | None = None,
) -> torch.Tensor:
    """Attention within each packed sentence: ``(tokens, heads, dim)`` in and out.

    ``key``/``value`` may have fewer heads than ``query`` (grouped-query attention).
    ``kernel``: one of :data:`KERNELS` (default: :func:`varlen_kernel`, else ``reference``).
    """
    kernel = kernel or varlen_kernel(query.device) or "reference"
    if kernel != "reference":
        dtype = fused_kernel_dtype(query)
        if dtype is None:  # float32 outside autocast: the fused kernels take no float32
            kernel = "reference"
        else:
            query, key, value = (t.to(dtype) for t in (query, key, value))
    if kernel == "flash_attn":
        from flash_attn import flash_attn_varlen_func

        cu = cu_seq_lens.to(torch.int32)
        return flash_attn_varlen_func(
            query, key, value, cu, cu, max_length, max_length,
            dropout_p=dropout, softmax_scale=scale, causal=causal,
        )  # fmt: skip
    if kernel == "torch":
        return torch_varlen_attention(query, key, value, cu_seq_lens, max_length, causal, scale)
    if kernel == "reference":
        return reference_varlen_attention(
            query, key, value, cu_seq_lens, causal=causal, dropout=dropout, scale=scale
        )
    raise ValueError(f"unknown varlen kernel {kernel!r}; expected one of {', '.join(KERNELS)}")


def fused_kernel_dtype(query: torch.Tensor) -> torch.dtype | None:
    """The dtype a fused varlen kernel (fp16 or bf16 only) runs ``query`` in: its own when
    half, the autocast dtype when autocast is on (a decoder's rotary tables are float32, so
    its query comes out float32 under bf16 autocast; transformers' flash-attention
    integration casts the same way), else None."""
    if query.dtype in HALF_DTYPES:
        return query.dtype
    device_type = query.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        return dtype if dtype in HALF_DTYPES else None
    return None


def computes_in_half(encoder: SentenceEncoder) -> bool:
    """Whether the encoder's forward runs in fp16 or bf16 now (its weights, or autocast),
    which the fused varlen kernels need."""
    device_type = encoder.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type) in HALF_DTYPES
    return getattr(encoder.backbone, "dtype", None) in HALF_DTYPES


def torch_varlen_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seq_lens: torch.Tensor,
    max_length: int,
    causal: bool,
    scale: float | None,
) -> torch.Tensor:
    """torch's ``varlen_attn``, whose keywords differ between releases: torch 2.10 takes
    ``is_causal``, later releases ``window_size``; ``enable_gqa`` is newer still (torch
    2.11 on an H100 rejected it), so without it the key/value heads are repeated."""
    from torch.nn.attention.varlen import varlen_attn

    accepts = inspect.signature(varlen_attn).parameters
    options: dict[str, Any] = {"scale": scale}
    if "window_size" in accepts:
        options["window_size"] = (-1, 0) if causal else (-1, -1)
    else:
        options["is_causal"] = causal
    groups = query.shape[1] // key.shape[1]
    if groups > 1 and "enable_gqa" in accepts:
        options["enable_gqa"] = True
    elif groups > 1:
        key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    cu = cu_seq_lens.to(torch.int32)
    output = varlen_attn(query, key, value, cu, cu, max_length, max_length, **options)
    return cast(torch.Tensor, output)  # a tuple only with return_aux, not asked for


def reference_varlen_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seq_lens: torch.Tensor,
    *,
    causal: bool = False,
    dropout: float = 0.0,
    scale: float | None = None,
) -> torch.Tensor:
    """One ``scaled_dot_product_attention`` per sentence: what the fused kernels compute."""
    groups = query.shape[1] // key.shape[1]
    if groups > 1:
        key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    bounds = cu_seq_lens.tolist()
    outputs = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        q, k, v = (t[start:end].transpose(0, 1) for t in (query, key, value))
        attended = functional.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout, is_causal=causal, scale=scale
        )
        outputs.append(attended.transpose(0, 1))
    return torch.cat(outputs) if outputs else query.new_zeros(query.shape)


class VarlenPacking:
    """The real tokens of a padded ``(batch, width)`` batch as one row, and back.

    ``position_ids`` restart at ``position_offset`` with each sentence (RoBERTa-style
    embeddings count from ``pad_token_id + 1``); ``cu_seq_lens`` and ``max_length`` are the
    kernel's metadata (:meth:`attention_kwargs`). With ``multiple_of`` the row is filled up
    to a multiple of that many tokens, so its shape repeats from batch to batch (for CUDA
    graphs and other per-shape compiling): the filler is one more sequence of pad tokens,
    all at the first position, that attends to itself only and that :meth:`unpack` drops.
    """

    def __init__(
        self, attention_mask: torch.Tensor, position_offset: int = 0, multiple_of: int = 0
    ) -> None:
        self.batch, self.width = attention_mask.shape
        device = attention_mask.device
        lengths = attention_mask.bool().sum(dim=1)
        host_lengths = lengths.tolist()  # the one read of the device: the packing's shapes
        self.tokens = tokens = sum(host_lengths)
        self.filler = -tokens % multiple_of if multiple_of else 0
        flat_mask = attention_mask.reshape(-1)
        self.source = torch.nonzero_static(flat_mask, size=tokens).squeeze(1)
        bounds = self.batch + 1 + (1 if self.filler else 0)  # the filler: one more sequence
        end = tokens + self.filler
        self.cu_seq_lens = torch.full((bounds,), end, dtype=torch.int32, device=device)
        self.cu_seq_lens[0] = 0
        self.cu_seq_lens[1 : self.batch + 1] = torch.cumsum(lengths, 0)
        self.max_length = max([*host_lengths, self.filler], default=0)
        batch_rows = torch.arange(self.batch, device=device)
        sentence = torch.repeat_interleave(batch_rows, lengths, output_size=tokens)
        first = self.cu_seq_lens[: self.batch].long()[sentence]
        offsets = torch.arange(tokens, device=device) - first
        filler = offsets.new_zeros(self.filler)
        self.position_ids = (torch.cat([offsets, filler]) + position_offset).unsqueeze(0)

    def pack(self, values: torch.Tensor, fill: int = 0) -> torch.Tensor:
        """``(batch, width)`` per-token values → ``(1, tokens + filler)``, the filler ``fill``."""
        real = values.reshape(-1)[self.source]
        if self.filler:
            real = torch.cat([real, real.new_full((self.filler,), fill)])
        return real.unsqueeze(0)

    def unpack(self, states: torch.Tensor) -> torch.Tensor:
        """``(1, tokens + filler, dim)`` → ``(batch, width, dim)``, zeros at padding."""
        flat = states.reshape(-1, states.shape[-1])[: self.tokens]
        padded = flat.new_zeros(self.batch * self.width, flat.shape[-1])
        return padded.index_copy(0, self.source, flat).view(self.batch, self.width, -1)

    def attention_kwargs(self) -> dict[str, Any]:
        """What transformers passes down to the attention function."""
        return {
            "cu_seq_lens_q": self.cu_seq_lens,
            "cu_seq_lens_k": self.cu_seq_lens,
            "max_length_q": self.max_length,
            "max_length_k": self.max_length,
        }


class TokenPacking:
    """Where each real token of a padded ``(batch, width)`` batch goes in packed rows.

    Sentences are placed whole into rows of ``capacity`` tokens (default: the longest
    sentence; longer rows cost more in attention, and in its dropout, than they save),
    longest first, each into the first row with room (first-fit decreasing). Attention is
    block-diagonal: a token sees the tokens of its own sentence only (the free tail of a
    row sees itself, so no softmax row is empty); positions restart at ``position_offset``
    with each sentence.
    """

    def __init__(
        self, attention_mask: torch.Tensor, capacity: int | None = None, position_offset: int = 0
    ) -> None:
        device = attention_mask.device
        self.batch, self.width = attention_mask.shape
        lengths = attention_mask.bool().sum(dim=1)
        sizes = lengths.tolist()
        self.capacity = capacity or max(max(sizes, default=1), 1)
        starts = _first_fit_decreasing(sizes, self.capacity)
        self.rows = 1 + max((start // self.capacity for start in starts), default=0)
        first = torch.cumsum(lengths, 0) - lengths  # index of each sentence's first real token
        sentence = torch.repeat_interleave(torch.arange(self.batch, device=device), lengths)
        offset = torch.arange(int(lengths.sum()), device=device) - first[sentence]
        self.source = attention_mask.reshape(-1).nonzero().squeeze(1)  # real tokens, in order
        self.target = torch.tensor(starts, dtype=torch.long, device=device)[sentence] + offset
        segment = torch.full((self.rows * self.capacity,), -1, dtype=torch.long, device=device)
        segment[self.target] = sentence
        self.segment = segment.view(self.rows, self.capacity)
        positions = torch.zeros(self.rows * self.capacity, dtype=torch.long, device=device)
        positions[self.target] = offset + position_offset
        self.position_ids = positions.view(self.rows, self.capacity)

    def pack(self, values: torch.Tensor, fill: int | float) -> torch.Tensor:
        """``(batch, width)`` per-token values → ``(rows, capacity)``, ``fill`` elsewhere."""
        packed = values.new_full((self.rows * self.capacity,), fill)
        packed[self.target] = values.reshape(-1)[self.source]
        return packed.view(self.rows, self.capacity)

    def unpack(self, states: torch.Tensor) -> torch.Tensor:
        """``(rows, capacity, dim)`` → ``(batch, width, dim)``, zeros at padding."""
        flat = states.reshape(self.rows * self.capacity, -1)
        padded = flat.new_zeros(self.batch * self.width, flat.shape[-1])
        padded = padded.index_copy(0, self.source, flat.index_select(0, self.target))
        return padded.view(self.batch, self.width, -1)

    def attention_mask(self, implementation: str, dtype: torch.dtype) -> torch.Tensor:
        """The ``(rows, 1, capacity, capacity)`` mask: boolean for SDPA, additive for eager."""
        allowed = (self.segment[:, :, None] == self.segment[:, None, :]).unsqueeze(1)
        if implementation == "sdpa":
            return allowed
        blocked = torch.full_like(allowed, torch.finfo(dtype).min, dtype=dtype)
        return blocked.masked_fill(allowed, 0.0)


def _first_fit_decreasing(sizes: list[int], capacity: int) -> list[int]:
    """Flat start index (row × capacity + offset) of each item, packed first-fit decreasing."""
    starts = [0] * len(sizes)
    used: list[int] = []
    for item in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        row = next((r for r, fill in enumerate(used) if fill + sizes[item] <= capacity), None)
        if row is None:
            row = len(used)
            used.append(0)
        starts[item] = row * capacity + used[row]
        used[row] += sizes[item]
    return starts


def concat_features(
    groups: Sequence[dict[str, torch.Tensor]],
) -> tuple[dict[str, torch.Tensor], list[int]]:
    """Stack the feature dicts of several columns into one batch (one forward for all).

    Narrower columns are right-padded with zeros (attention mask 0) to the widest, so the
    result suits a padding-free forward, which drops every masked position; returns the
    batch and the row count of each column (for ``torch.split`` of the output).
    """
    width = max(int(g["input_ids"].shape[1]) for g in groups)
    merged = {
        key: torch.cat(
            [torch.nn.functional.pad(g[key], (0, width - g[key].shape[1])) for g in groups]
        )
        for key in groups[0]
    }
    return merged, [int(g["input_ids"].shape[0]) for g in groups]


# ----------------------------------------------------------------- the encoder's path
def choose_path(encoder: SentenceEncoder) -> tuple[str, str]:
    """How ``encoder``'s forward runs now, and why (:meth:`SentenceEncoder.packing_path`).

    ``padding_free``: ``auto``, packed rows with a block-diagonal mask on a CPU (measured
    faster than padding there), the varlen kernel on a GPU where the backbone allows it and
    the kernel applies its attention dropout (measured faster than padding on an H200:
    ``AUTO_TAKES_VARLEN``), else padding; ``true``, pack wherever the backbone allows
    (one row and a varlen attention kernel where one exists — CUDA with ``flash-attn`` or
    torch's ``varlen_attn`` — else the block mask); ``false``, pad; ``varlen`` or
    ``block_mask``, that path (``varlen`` on a CPU runs the exact per-sentence reference,
    for tests). Evaluation (``encode``): :func:`evaluation_path`.
    """
    if not encoder.training:
        return evaluation_path(encoder)
    mode = encoder.padding_free
    if mode == "false":
        return "padded", "padding_free: false"
    device = encoder.device
    kernel = varlen_kernel(device)
    no_kernel = f"no varlen kernel on {device.type}"
    if device.type == "cuda" and not kernel:
        no_kernel += " (install flash-attn, or a torch with torch.nn.attention.varlen)"
    if kernel and not computes_in_half(encoder):
        no_kernel = f"the {kernel} varlen kernel computes in fp16 or bf16 only (bf16: true)"
        kernel = None
    if mode in ("varlen", "block_mask"):
        return mode, f"padding_free: {mode}" + kernel_note(encoder.backbone, mode, kernel)
    varlen_obstacle = packing_obstacle(encoder, "varlen")
    if kernel and varlen_obstacle is None:
        dropout = attention_dropout(encoder.backbone)
        kept = not dropout or kernel_has_dropout(kernel)
        if mode == "true" or (AUTO_TAKES_VARLEN and kept):
            note = kernel_note(encoder.backbone, "varlen", kernel)
            return "varlen", f"padding_free: {mode}" + note
        if AUTO_TAKES_VARLEN:
            return "padded", (
                f"padding_free: auto pads on {device.type}: the {kernel} varlen kernel has no "
                f"attention dropout, and the model's is {dropout} (padding_free: true trades "
                "it for speed; flash-attn's kernel keeps it)"
            )
        return "padded", (
            f"padding_free: auto pads on {device.type}: the {kernel} varlen kernel path is "
            "not yet measured on a GPU (padding_free: true or varlen opts in)"
        )
    block_obstacle = packing_obstacle(encoder, "block_mask")
    if block_obstacle is None and (device.type == "cpu" or mode == "true"):
        where = "a CPU" if device.type == "cpu" else f"{device.type} without a varlen kernel"
        return "block_mask", f"padding_free: {mode} on {where}: packed rows, block mask"
    if varlen_obstacle is None:  # the backbone allows varlen; no kernel here
        reason = no_kernel
        if block_obstacle is None:
            return "padded", reason + (
                ": on a GPU padding is faster than a dense block mask "
                "(padding_free: true packs anyway)"
            )
        return "padded", f"{reason}, and {block_obstacle}"
    return "padded", f"no padding-free path: {varlen_obstacle}"


def evaluation_path(encoder: SentenceEncoder) -> tuple[str, str]:
    """How ``encoder``'s forward runs in evaluation mode (``encode``), and why: ``varlen``
    where a fused kernel runs on the device and dtype and the backbone allows the path
    (``padding_free`` ``auto`` or ``true``: attention dropout is off in evaluation, so any
    kernel will do) or where ``padding_free: varlen`` forces it (on a CPU the exact
    per-sentence reference, for tests); else ``padded`` (``encode``'s batches are sorted by
    length, so they pad little; the block mask is a training path, not measured for
    ``encode``)."""
    mode = encoder.padding_free
    if mode == "false":
        return "padded", "evaluation pads: padding_free: false"
    if mode == "varlen":
        kernel = varlen_kernel(encoder.device) if computes_in_half(encoder) else None
        return "varlen", f"evaluation, padding_free: varlen ({kernel or 'reference'} varlen kernel)"
    if mode == "block_mask":
        return "padded", "evaluation pads: the block mask is a training path"
    kernel = varlen_kernel(encoder.device)
    if kernel is None:
        return "padded", f"evaluation pads: no varlen kernel on {encoder.device.type}"
    if not computes_in_half(encoder):
        return (
            "padded",
            f"evaluation pads: the {kernel} varlen kernel computes in fp16 or bf16 only",
        )
    obstacle = packing_obstacle(encoder, "varlen")
    if obstacle is not None:
        return "padded", f"evaluation pads: {obstacle}"
    return "varlen", f"evaluation, padding_free: {mode} ({kernel} varlen kernel)"


def check_forced_path(encoder: SentenceEncoder) -> None:
    """ValueError when ``padding_free`` names a path (``varlen``, ``block_mask``) that the
    encoder's backbone cannot run."""
    if encoder.padding_free in ("varlen", "block_mask"):
        obstacle = packing_obstacle(encoder, encoder.padding_free)
        if obstacle:
            raise ValueError(f"padding_free: {encoder.padding_free} is not possible: {obstacle}")


def attention_dropout(backbone: Any) -> float:
    """The backbone's attention-probability dropout (BERT's ``attention_probs_dropout_prob``,
    a decoder's ``attention_dropout``; 0 when its config names neither)."""
    config = backbone.config
    dropout = getattr(config, "attention_probs_dropout_prob", None)
    return getattr(config, "attention_dropout", 0.0) if dropout is None else dropout


def kernel_note(backbone: Any, path: str, kernel: str | None) -> str:
    """What the reason of the ``varlen`` path says of its kernel (and of attention dropout
    the kernel does not apply)."""
    if path != "varlen":
        return ""
    note = f" ({kernel or 'reference'} varlen kernel)"
    dropout = attention_dropout(backbone)
    if dropout and not kernel_has_dropout(kernel):
        note += f"; this kernel has no attention dropout: {dropout} is not applied"
    return note


def _names(items: frozenset[str]) -> str:
    return ", ".join(sorted(items))


def packing_obstacle(encoder: SentenceEncoder, path: str) -> str | None:
    """Why the backbone cannot run ``path`` (``varlen`` or ``block_mask``), or None."""
    config = getattr(encoder.backbone, "config", None)
    model_type = getattr(config, "model_type", None)
    attention = getattr(config, "_attn_implementation", None)
    if not encoder._takes_position_ids or not type(
        inner_model(encoder.backbone)
    ).__module__.startswith("transformers."):
        return "the backbone is not transformers' own model taking position_ids"
    if getattr(config, "is_decoder", False) and model_type in PADDING_FREE_MODEL_TYPES:
        return f"{model_type} configured as a decoder"
    if path == "varlen":
        if model_type not in VARLEN_MODEL_TYPES:
            known = _names(VARLEN_MODEL_TYPES)
            return f"model type {model_type!r} has no varlen path ({known})"
        if attention not in ("sdpa", VARLEN_ATTENTION):
            return f"attention {attention!r}: the varlen path replaces sdpa"
        return None
    if model_type not in PADDING_FREE_MODEL_TYPES:
        return (
            f"model type {model_type!r} has no block-mask path ({_names(PADDING_FREE_MODEL_TYPES)})"
        )
    if attention not in PADDING_FREE_ATTENTION:
        return f"attention {attention!r}: the block mask needs sdpa or eager"
    return None


def training_path(encoder: SentenceEncoder) -> str:
    """:meth:`SentenceEncoder.packing_path`, logged the first time each path and reason is
    taken (with what ``pack_to_multiple_of`` does on it)."""
    path, reason = encoder.packing_path()
    if encoder.pack_to_multiple_of:
        multiple = encoder.pack_to_multiple_of
        reason += (
            f"; rows filled to a multiple of {multiple} tokens"
            if path == "varlen"
            else f"; pack_to_multiple_of {multiple} not applied: it fills the varlen path only"
        )
    if encoder.training and (path, reason) not in encoder.training_paths:
        encoder.training_paths[(path, reason)] = None
        logger.info("training forward: %s (%s)", path, reason)
    return path


# ----------------------------------------------------------------- the backbone calls
def run_backbone(
    encoder: SentenceEncoder, inputs: dict[str, torch.Tensor], hidden: bool
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
    """The backbone's last hidden states (and, with ``hidden``, all of them) laid out as the
    padded batch ``inputs``, on the path :func:`training_path` takes."""
    path = training_path(encoder)
    if path == "varlen":
        return varlen_backbone(encoder, inputs, hidden)
    if path == "block_mask":
        return packed_backbone(encoder, inputs, hidden)
    options = {"use_cache": False} if encoder._takes_use_cache else {}
    outputs = encoder.backbone(**inputs, **options, output_hidden_states=hidden, return_dict=True)
    return outputs.last_hidden_state, outputs.hidden_states if hidden else None


def position_offset(config: PretrainedConfig) -> int:
    """Where a model's positions start (RoBERTa's embeddings: pad_token_id + 1)."""
    if getattr(config, "model_type", None) in POSITION_OFFSET_MODEL_TYPES:
        return int(config.pad_token_id) + 1
    return 0


def varlen_backbone(
    encoder: SentenceEncoder, inputs: dict[str, torch.Tensor], hidden: bool
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
    """Run the backbone on one row of the batch's real tokens with the varlen attention
    (the backbone's attention becomes :data:`VARLEN_ATTENTION`, which is SDPA for
    every call without packing metadata: evaluation, the padded forward)."""
    register_varlen_attention()
    config = encoder.config
    if config._attn_implementation != VARLEN_ATTENTION:
        config._attn_implementation = VARLEN_ATTENTION
    # training forwards only: in ``encode`` another thread may be using the tokenizer (the
    # next chunk), which the pad id would ask (:func:`.encoding.tokenized_chunks`)
    multiple_of = encoder.pack_to_multiple_of if encoder.training else 0
    packing = VarlenPacking(inputs["attention_mask"], position_offset(config), multiple_of)
    pad_id = encoder.tokenizer.pad_token_id if packing.filler else 0
    packed: dict[str, Any] = {
        key: packing.pack(value, pad_id if key == "input_ids" else 0)
        for key, value in inputs.items()
        if key != "attention_mask"
    }
    if encoder._takes_use_cache:
        packed["use_cache"] = False
    outputs = encoder.backbone(
        **packed,
        position_ids=packing.position_ids,
        output_hidden_states=hidden,
        return_dict=True,
        **packing.attention_kwargs(),
    )
    states = tuple(packing.unpack(s) for s in outputs.hidden_states) if hidden else None
    return packing.unpack(outputs.last_hidden_state), states


def packed_backbone(
    encoder: SentenceEncoder, inputs: dict[str, torch.Tensor], hidden: bool
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
    """Run the backbone on packed rows; return its states laid out as the padded batch."""
    attention_mask = inputs["attention_mask"]
    packing = TokenPacking(attention_mask, position_offset=position_offset(encoder.config))
    packed = {
        key: packing.pack(value, encoder.tokenizer.pad_token_id if key == "input_ids" else 0)
        for key, value in inputs.items()
        if key != "attention_mask"
    }
    dtype = next(encoder.backbone.parameters()).dtype
    implementation = encoder.config._attn_implementation
    mask = packing.attention_mask("eager" if implementation == "eager" else "sdpa", dtype)
    outputs = encoder.backbone(
        **packed,
        attention_mask=mask,
        position_ids=packing.position_ids,
        output_hidden_states=hidden,
        return_dict=True,
    )
    states = tuple(packing.unpack(s) for s in outputs.hidden_states) if hidden else None
    return packing.unpack(outputs.last_hidden_state), states
