"""Variable-length attention for packed training batches: padding-free without a dense mask.

A packed batch is one row of all the batch's real tokens, sentence after sentence, with
``cu_seq_lens`` (the cumulative sentence lengths, ``[0, n1, n1 + n2, …]``) telling the
kernel where each sentence starts: attention stays inside a sentence, and no
``(tokens × tokens)`` mask is built. The function is registered in transformers'
``AttentionInterface`` as :data:`VARLEN_ATTENTION`, so every backbone whose attention goes
through that interface (BERT, RoBERTa, ELECTRA, Llama, Qwen2, Mistral, …) uses it, and
the packing metadata travels as the keyword arguments transformers already passes down to
the attention (``cu_seq_lens_q``, ``max_length_q``, as in its flash-attention path). A call
without them (evaluation, the padded forward) is SDPA with transformers' own mask.

Kernels, the first present (:func:`varlen_kernel`): ``flash_attn`` (the ``flash-attn``
package's ``flash_attn_varlen_func``, CUDA, attention dropout supported), ``torch``
(``torch.nn.attention.varlen.varlen_attn``, CUDA only, no attention dropout), else
``reference`` (one SDPA call per sentence: exact, slow; for CPU tests).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import logging
from typing import Any

import torch
from torch.nn import functional

logger = logging.getLogger(__name__)

VARLEN_ATTENTION = "sts_varlen"
KERNELS = ("flash_attn", "torch", "reference")


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
    return varlen_attn(query, key, value, cu, cu, max_length, max_length, **options)


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
    kernel's metadata (:meth:`attention_kwargs`).
    """

    def __init__(self, attention_mask: torch.Tensor, position_offset: int = 0) -> None:
        self.batch, self.width = attention_mask.shape
        device = attention_mask.device
        lengths = attention_mask.bool().sum(dim=1)
        self.source = attention_mask.reshape(-1).nonzero().squeeze(1)
        self.cu_seq_lens = torch.zeros(self.batch + 1, dtype=torch.int32, device=device)
        self.cu_seq_lens[1:] = torch.cumsum(lengths, 0)
        self.max_length = int(lengths.max()) if self.batch else 0
        sentence = torch.repeat_interleave(torch.arange(self.batch, device=device), lengths)
        first = self.cu_seq_lens[:-1].long()[sentence]
        offsets = torch.arange(self.source.numel(), device=device) - first
        self.position_ids = (offsets + position_offset).unsqueeze(0)

    def pack(self, values: torch.Tensor) -> torch.Tensor:
        """``(batch, width)`` per-token values → ``(1, tokens)``."""
        return values.reshape(-1)[self.source].unsqueeze(0)

    def unpack(self, states: torch.Tensor) -> torch.Tensor:
        """``(1, tokens, dim)`` → ``(batch, width, dim)``, zeros at padding."""
        flat = states.reshape(-1, states.shape[-1])
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
