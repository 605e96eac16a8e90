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

The mini-batches (:func:`plan_mini_batches`): ``gradient_cache_batch_size: m`` takes ``m``
consecutive rows of every text column at once. ``gradient_cache_tokens: N`` sizes them by
real tokens (the attention mask's ones), by one of two rules
(``gradient_cache_token_rule``):

- ``sorted`` (the default, :func:`token_mini_batches`): a row's tokens are summed over all
  its text columns; the rows are sorted by them (longest first, ties in batch order) and
  each mini-batch takes rows in that order while their tokens fit in ``N`` (a row over
  ``N`` goes alone); a mini-batch embeds those rows of **every** column in one forward.
- ``per_column`` (:func:`per_column_token_mini_batches`): sentence-transformers'
  ``mini_batch_num_tokens`` (``_minibatch_ranges`` of its ``Cached*`` losses): each text
  column on its own, in batch order, each mini-batch **consecutive** rows of that one
  column while their tokens in that column fit in ``N`` (a row over ``N`` alone), column
  after column. For the same tokenized batch and ``N`` these are the peer's mini-batches
  exactly.

Both give the gradient of the whole batch, and both keep a forward's real tokens within
``N`` (but for a row or text over ``N``, alone); they differ in which texts go together.
Under ``sorted`` a row counts its tokens in all columns together, so a mini-batch has
fewer rows (each embedded in every column), of like length from anywhere in the batch;
under ``per_column`` a mini-batch is texts of one column, next to each other in the batch,
whatever their lengths, and no mini-batch spans two columns. The same ``N`` therefore
makes other forward passes under the two rules (other texts together, and in general
other numbers and sizes of them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.utils.checkpoint import get_device_states, set_device_states

Columns = Mapping[str, Mapping[str, Tensor]]

#: the values of ``gradient_cache_token_rule`` (how a token budget makes mini-batches), the
#: default first
TOKEN_RULES = ("sorted", "per_column")


class MiniBatch(NamedTuple):
    """One mini-batch of the gradient cache: the text columns it embeds (in one forward)
    and its row indices (the same rows of each of those columns)."""

    columns: tuple[str, ...]
    rows: Tensor


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


def check_token_rule(rule: str, token_budget: int | None) -> None:
    """ValueError for a ``gradient_cache_token_rule`` that is not one of
    :data:`TOKEN_RULES`, or that is not the default without ``gradient_cache_tokens``."""
    if rule not in TOKEN_RULES:
        raise ValueError(
            f"gradient_cache_token_rule must be one of {', '.join(TOKEN_RULES)}, got {rule!r}"
        )
    if rule != TOKEN_RULES[0] and token_budget is None:
        raise ValueError(
            f"gradient_cache_token_rule: {rule} without gradient_cache_tokens: the rule says "
            "how a token budget makes the gradient cache's mini-batches; set "
            "gradient_cache_tokens (or drop the rule)"
        )


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


def row_tokens(features: Mapping[str, Tensor]) -> list[int]:
    """Real tokens of each row of one text column: the ones of its attention mask (read on
    the host in one transfer: the plan's shapes depend on them)."""
    return [int(count) for count in features["attention_mask"].sum(dim=1).tolist()]


def check_budget(budget: int) -> None:
    if budget < 1:
        raise ValueError(f"the mini-batch token budget must be at least 1, got {budget}")


def token_mini_batches(columns: Columns, budget: int) -> list[Tensor]:
    """The ``sorted`` rule: the row indices of mini-batches by tokens. A row's tokens are
    its real tokens summed over all text columns; the rows are sorted by them (longest
    first, ties in batch order) and each mini-batch takes rows in that order while their
    tokens fit in ``budget`` (a row over ``budget`` alone), so each is padded to rows of
    like length and holds about the same work. Each mini-batch embeds its rows of every
    column. Not sentence-transformers' ``mini_batch_num_tokens`` (that is
    :func:`per_column_token_mini_batches`)."""
    check_budget(budget)
    counts = [row_tokens(features) for features in columns.values()]
    tokens = [sum(row) for row in zip(*counts, strict=True)]
    order = sorted(range(len(tokens)), key=lambda row: -tokens[row])
    chunks: list[list[int]] = [[]]
    used = 0
    for row in order:
        if chunks[-1] and used + tokens[row] > budget:
            chunks.append([])
            used = 0
        chunks[-1].append(row)
        used += tokens[row]
    return [torch.tensor(chunk) for chunk in chunks]


def per_column_token_mini_batches(columns: Columns, budget: int) -> list[tuple[str, Tensor]]:
    """The ``per_column`` rule, sentence-transformers' ``mini_batch_num_tokens`` (its
    ``_minibatch_ranges``): each text column on its own, in the columns' order; its rows in
    batch order, each mini-batch the longest run of consecutive rows whose real tokens (in
    that column) sum to at most ``budget`` (a row over ``budget`` alone). Returns
    ``(column, row indices)`` for each mini-batch."""
    check_budget(budget)
    result: list[tuple[str, Tensor]] = []
    for name, features in columns.items():
        tokens = row_tokens(features)
        begin = 0
        while begin < len(tokens):
            end, used = begin + 1, tokens[begin]  # the first row, over the budget or not
            while end < len(tokens) and used + tokens[end] <= budget:
                used += tokens[end]
                end += 1
            result.append((name, torch.arange(begin, end)))
            begin = end
    return result


def plan_mini_batches(
    columns: Columns,
    mini_batch_size: int | None,
    token_budget: int | None = None,
    token_rule: str = "sorted",
) -> list[MiniBatch]:
    """The gradient cache's mini-batches, in the order they are embedded: with
    ``token_budget``, by tokens under ``token_rule`` (:data:`TOKEN_RULES`:
    :func:`token_mini_batches` or :func:`per_column_token_mini_batches`), else
    ``mini_batch_size`` consecutive rows of every column (:func:`mini_batches`)."""
    names = tuple(columns)
    if token_budget is None:
        return [
            MiniBatch(names, rows)
            for rows in mini_batches(batch_rows(columns), mini_batch_size or 0)
        ]
    check_token_rule(token_rule, token_budget)
    if token_rule == "per_column":
        return [
            MiniBatch((name,), rows)
            for name, rows in per_column_token_mini_batches(columns, token_budget)
        ]
    return [MiniBatch(names, rows) for rows in token_mini_batches(columns, token_budget)]


def cached_loss(
    model: Any,
    columns: Columns,
    loss_of: Callable[[dict[str, Tensor]], Tensor],
    mini_batch_size: int | None,
    token_budget: int | None = None,
    token_rule: str = "sorted",
) -> tuple[Tensor, dict[str, Tensor]]:
    """The loss ``loss_of(embeddings by column)`` of the whole batch, computed with gradient
    caching; its backward pass back-propagates into ``model`` mini-batch by mini-batch.

    Mini-batches of ``mini_batch_size`` consecutive rows, or with ``token_budget`` by
    tokens under ``token_rule`` (:func:`plan_mini_batches`; the embeddings are put back in
    batch order). ``model`` is called as ``model(columns=…)`` (a ``SentenceEncoder``,
    wrapped or not) with the columns of one mini-batch and returns ``{column: (rows, d)}``.
    Returns the loss (a leaf whose backward hook does step 3) and the detached embeddings.
    """
    chunks = plan_mini_batches(columns, mini_batch_size, token_budget, token_rule)
    states: list[RandomState] = []
    parts: dict[str, list[Tensor]] = {}
    taken: dict[str, list[Tensor]] = {}
    with torch.no_grad():
        for chunk in chunks:
            piece = slice_columns({name: columns[name] for name in chunk.columns}, chunk.rows)
            states.append(RandomState(*[f["input_ids"] for f in piece.values()]))
            for name, embedding in model(columns=piece).items():
                parts.setdefault(name, []).append(embedding)
                taken.setdefault(name, []).append(chunk.rows)
    embeddings = {}
    for name, pieces in parts.items():
        back = torch.argsort(torch.cat(taken[name]))  # batch order from the mini-batches'
        embeddings[name] = torch.cat(pieces)[back.to(pieces[0].device)].requires_grad_()
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
    chunks: list[MiniBatch],
    states: list[RandomState],
    cached: dict[str, Tensor],
    grad_output: Tensor,
) -> None:
    """Step 3: every mini-batch again with gradient, back-propagating ``e · g · grad_output``."""
    last = len(chunks) - 1
    with torch.enable_grad():
        for index, (chunk, state) in enumerate(zip(chunks, states, strict=True)):
            rows = chunk.rows
            piece = slice_columns({name: columns[name] for name in chunk.columns}, rows)
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
