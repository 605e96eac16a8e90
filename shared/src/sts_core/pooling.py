"""Pooling of token states into one sentence vector.

Every mode reads the attention mask, so it is correct whatever the padding side
(left padding is what decoder LLMs use; right padding is what encoders use):

- ``mean``: Σ_t m_t·h_t / Σ_t m_t over the last layer.
- ``cls``: the state of the first real (unmasked) token of the last layer.
- ``max``: element-wise maximum over real tokens of the last layer.
- ``first_last_avg``: mean over real tokens of (h¹ + h^L)/2, the average of the first
  transformer layer's output (``hidden_states[1]``, as SimCSE's ``avg_first_last``)
  and the last layer's.
- ``last_token``: the state of the last real token (with a prompt template such as
  PromptEOL, this is the token that "summarises" the sentence).

Sums are taken in float32, so bf16/fp16 backbones pool without overflow; the result
has the backbone's dtype promoted to float32.
"""

from __future__ import annotations

import torch

from sts_core.names import POOLING_MODES


def check_pooling_mode(mode: str) -> str:
    """Return ``mode`` if it is known, else raise a ValueError listing the modes."""
    if mode not in POOLING_MODES:
        raise ValueError(f"unknown pooling mode {mode!r}; choose one of {', '.join(POOLING_MODES)}")
    return mode


def needs_hidden_states(mode: str) -> bool:
    """Whether the backbone must return every layer's states for this mode."""
    return mode == "first_last_avg"


def first_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index of the first real token of each row (0 under right padding)."""
    return attention_mask.int().argmax(dim=1)


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index of the last real token of each row (seq_len − 1 under left padding)."""
    seq_len = attention_mask.shape[1]
    return seq_len - 1 - attention_mask.int().flip(dims=[1]).argmax(dim=1)


def _gather_rows(states: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    rows = torch.arange(states.shape[0], device=states.device)
    return states[rows, index.to(states.device)]


def masked_mean(states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Σ_t m_t·h_t / max(Σ_t m_t, 1), computed in float32."""
    mask = attention_mask.to(states.device, torch.float32).unsqueeze(-1)
    summed = (states.float() * mask).sum(dim=1)
    return summed / mask.sum(dim=1).clamp(min=1.0)


def masked_max(states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Element-wise max over real tokens (padding set to −inf first)."""
    mask = attention_mask.to(states.device).bool().unsqueeze(-1)
    return states.float().masked_fill(~mask, float("-inf")).max(dim=1).values


def pool(
    mode: str,
    last_hidden_state: torch.Tensor,
    attention_mask: torch.Tensor,
    hidden_states: tuple[torch.Tensor, ...] | None = None,
) -> torch.Tensor:
    """Pool token states ``(batch, seq, dim)`` into sentence vectors ``(batch, dim)``."""
    check_pooling_mode(mode)
    if mode == "mean":
        return masked_mean(last_hidden_state, attention_mask)
    if mode == "max":
        return masked_max(last_hidden_state, attention_mask)
    if mode == "cls":
        return _gather_rows(last_hidden_state, first_token_index(attention_mask)).float()
    if mode == "last_token":
        return _gather_rows(last_hidden_state, last_token_index(attention_mask)).float()
    if hidden_states is None or len(hidden_states) < 2:
        raise ValueError("first_last_avg pooling needs the backbone's hidden_states of every layer")
    first_last = (hidden_states[1].float() + hidden_states[-1].float()) / 2.0
    return masked_mean(first_last, attention_mask)
