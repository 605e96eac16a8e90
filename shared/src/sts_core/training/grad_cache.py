r"""Gradient caching: the loss of a large batch with the memory of a small one.

GradCache (Gao, Zhang, Han and Callan, 2021, "Scaling Deep Contrastive Learning Batch Size
under Memory Limited Setup"; sentence-transformers' ``Cached*`` losses) in three steps:

1. embed the batch in mini-batches of ``m`` rows **without** gradient (the random state of
   each mini-batch is kept, so dropout draws can be replayed);
2. compute the loss over the whole batch on those embeddings, made leaves that require
   gradient, and keep :math:`g = \partial\mathcal{L}/\partial e` for every embedding;
3. in the backward pass (a hook on the returned loss, so the Trainer's own
   ``accelerator.backward`` with its gradient-accumulation and loss scaling drives it),
   embed each mini-batch again **with** gradient under its saved random state and
   back-propagate the surrogate :math:`\sum_i e_i \cdot g_i` times the incoming gradient.

By the chain rule the parameters receive exactly the gradient of the whole-batch loss;
only one mini-batch's activations are alive at a time. Losses over gathered embeddings
(``all_gather_with_grad``) work unchanged: step 2 runs the collective once per step.
Under DDP every mini-batch but the last back-propagates inside ``no_sync``, so gradients
are reduced once. Not for DeepSpeed (its engine steps at every backward) nor for a loss
with parameters of its own (they would train outside the model's forward, which DDP
tracks): ``BaseConfig`` and ``BaseTrainer`` refuse both before training.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch
from torch import Tensor
from torch.utils.checkpoint import get_device_states, set_device_states

Columns = Mapping[str, Mapping[str, Tensor]]


class RandomState:
    """The CPU and device random states at creation; ``with state:`` replays them (and
    restores the surrounding states afterwards), so a second forward draws the same dropout
    masks as the first."""

    def __init__(self, *tensors: Tensor) -> None:
        self.cpu_state = torch.get_rng_state()
        self.devices, self.device_states = get_device_states(*tensors)
        self._fork: Any = None

    def __enter__(self) -> None:
        self._fork = torch.random.fork_rng(devices=self.devices, enabled=True)
        self._fork.__enter__()
        torch.set_rng_state(self.cpu_state)
        set_device_states(self.devices, self.device_states)

    def __exit__(self, *exc: Any) -> None:
        self._fork.__exit__(*exc)
        self._fork = None


def gradient_cache_option(config: object) -> str | None:
    """The option that turns gradient caching on (``gradient_cache_batch_size`` or
    ``gradient_cache_tokens``), or None."""
    for option in ("gradient_cache_batch_size", "gradient_cache_tokens"):
        if getattr(config, option, None) is not None:
            return option
    return None


def batch_rows(columns: Columns) -> int:
    """Rows of the batch (every column has the same number)."""
    sizes = {features["input_ids"].shape[0] for features in columns.values()}
    if len(sizes) != 1:
        raise ValueError(f"the text columns of a batch have different numbers of rows: {sizes}")
    return sizes.pop()


def slice_columns(columns: Columns, rows_taken: Tensor) -> dict[str, dict[str, Tensor]]:
    """Rows ``rows_taken`` (indices) of every column, without the token positions that are
    padding in all of them (either padding side)."""
    pieces = {}
    for name, features in columns.items():
        rows = {key: value[rows_taken.to(value.device)] for key, value in features.items()}
        used = rows["attention_mask"].bool().any(dim=0)
        if not bool(used.all()):
            width = rows["attention_mask"].shape[1]
            rows = {
                key: value[:, used] if value.dim() == 2 and value.shape[1] == width else value
                for key, value in rows.items()
            }
        pieces[name] = rows
    return pieces


def mini_batches(rows: int, size: int) -> list[Tensor]:
    """The row indices of consecutive mini-batches of at most ``size`` rows."""
    if size < 1:
        raise ValueError(f"the mini-batch size must be at least 1, got {size}")
    return [torch.arange(start, min(start + size, rows)) for start in range(0, rows, size)]


def token_mini_batches(columns: Columns, budget: int) -> list[Tensor]:
    """The row indices of mini-batches by tokens: rows sorted by their real tokens (all text
    columns together, longest first, ties in batch order), each mini-batch as many rows as
    fit in ``budget`` tokens (a longer row alone), so each is padded to rows of like length
    and holds about the same work."""
    if budget < 1:
        raise ValueError(f"the mini-batch token budget must be at least 1, got {budget}")
    masks = [features["attention_mask"] for features in columns.values()]
    tokens = torch.stack([mask.sum(dim=1).cpu() for mask in masks]).sum(dim=0)
    order = sorted(range(len(tokens)), key=lambda row: -int(tokens[row]))
    chunks: list[list[int]] = [[]]
    used = 0
    for row in order:
        if chunks[-1] and used + int(tokens[row]) > budget:
            chunks.append([])
            used = 0
        chunks[-1].append(row)
        used += int(tokens[row])
    return [torch.tensor(chunk) for chunk in chunks]


def cached_loss(
    model: Any,
    columns: Columns,
    loss_of: Callable[[dict[str, Tensor]], Tensor],
    mini_batch_size: int | None,
    token_budget: int | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The loss ``loss_of(embeddings by column)`` of the whole batch, computed with gradient
    caching; its backward pass back-propagates into ``model`` mini-batch by mini-batch.

    Mini-batches of ``mini_batch_size`` consecutive rows, or with ``token_budget`` by
    tokens (:func:`token_mini_batches`; the embeddings are put back in batch order).
    ``model`` is called as ``model(columns=…)`` (a ``SentenceEncoder``, wrapped or not) and
    returns ``{column: (rows, d)}``. Returns the loss (a leaf whose backward hook does step
    3) and the detached embeddings.
    """
    if token_budget is not None:
        chunks = token_mini_batches(columns, token_budget)
    else:
        chunks = mini_batches(batch_rows(columns), mini_batch_size or 0)
    states: list[RandomState] = []
    parts: dict[str, list[Tensor]] = {}
    with torch.no_grad():
        for rows in chunks:
            piece = slice_columns(columns, rows)
            states.append(RandomState(*[f["input_ids"] for f in piece.values()]))
            for name, embedding in model(columns=piece).items():
                parts.setdefault(name, []).append(embedding)
    back = torch.argsort(torch.cat(chunks))  # batch order from the mini-batches' order
    embeddings = {
        name: torch.cat(chunk)[back.to(chunk[0].device)].requires_grad_()
        for name, chunk in parts.items()
    }
    with torch.enable_grad():
        loss = loss_of(embeddings)
        names = list(embeddings)
        grads = torch.autograd.grad(
            loss, [embeddings[n] for n in names], allow_unused=True, materialize_grads=True
        )
    cached = dict(zip(names, grads, strict=True))
    result = loss.detach().requires_grad_()
    result.register_hook(partial(_replay, model, columns, chunks, states, cached))
    return result, {name: value.detach() for name, value in embeddings.items()}


def _replay(
    model: Any,
    columns: Columns,
    chunks: list[Tensor],
    states: list[RandomState],
    cached: dict[str, Tensor],
    grad_output: Tensor,
) -> None:
    """Step 3: every mini-batch again with gradient, back-propagating ``e · g · grad_output``."""
    last = len(chunks) - 1
    with torch.enable_grad():
        for index, (rows, state) in enumerate(zip(chunks, states, strict=True)):
            piece = slice_columns(columns, rows)
            no_sync = getattr(model, "no_sync", None)
            sync = no_sync() if no_sync is not None and index < last else contextlib.nullcontext()
            with state, sync:
                embeddings = model(columns=piece)
                surrogate = sum(
                    (
                        embeddings[name]
                        * cached[name][rows.to(cached[name].device)].to(embeddings[name].dtype)
                    ).sum()
                    for name in embeddings
                )
                (surrogate * grad_output.to(surrogate.dtype)).backward()
