"""Helpers for losses over the batch of all processes (DDP, DeepSpeed), and the one
answer to which process this is (:func:`rank`, :func:`is_main_process`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist


def world_size() -> int:
    """Number of processes (1 when torch.distributed is not initialised)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


#: where launchers put the global rank: torchrun/accelerate, Open MPI, MPICH/Intel MPI,
#: Slurm (and the local rank, for a launcher that sets only that)
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "LOCAL_RANK")


def rank() -> int:
    """The global rank of this process: torch.distributed's once its process group is
    initialised; before that, the launcher's environment (:data:`RANK_VARIABLES`, the
    first that holds a number); 0 for a process alone."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    for name in RANK_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def is_main_process() -> bool:
    """Global rank 0 of a launch (or a plain process)."""
    return rank() == 0


def all_gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` (first dimension) from every process, in rank order.

    The local part keeps its autograd graph; the other processes' parts are constants.
    Processes may hold different batch sizes (the last batch): parts are padded for the
    collective and trimmed after.

    Under DDP every process computes the same loss over the gathered batch but sends
    gradient only into its own part, and DDP *averages* gradients over processes, so the
    update is ``1 / world_size`` of the single-process gradient of that loss. Pass the loss
    through :func:`scale_gathered_gradient` to get exactly the gradient of one process over
    the whole batch while the logged value stays the loss itself.
    """
    size = world_size()
    if size == 1:
        return tensor
    local = tensor.contiguous()
    length = torch.tensor([local.shape[0]], device=local.device)
    lengths = [torch.zeros_like(length) for _ in range(size)]
    dist.all_gather(lengths, length)
    longest = int(max(int(n.item()) for n in lengths))
    padded = local
    if local.shape[0] < longest:
        filler = local.new_zeros((longest - local.shape[0], *local.shape[1:]))
        padded = torch.cat([local, filler])
    parts = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(parts, padded.detach())
    parts = [part[: int(n.item())] for part, n in zip(parts, lengths, strict=True)]
    parts[rank()] = tensor
    return torch.cat(parts)


def scale_local_gradient(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` with the same value but its gradient multiplied by the world size.

    The alternative to :func:`scale_gathered_gradient` for a loss that also has parameters
    of its own (a trainable temperature): pass each local embedding tensor through this
    before :func:`all_gather_with_grad`. The embeddings' gradients are then scaled (DDP's
    average over processes gives the whole batch's gradient) while the loss parameters'
    gradients — which every process computes in full over the same gathered batch — are
    not, so their average is their gradient too."""
    scale = gathered_loss_scale()
    if scale == 1.0:
        return tensor
    return tensor + (scale - 1.0) * (tensor - tensor.detach())


def gathered_loss_scale() -> float:
    """Factor for a loss over gathered embeddings so DDP's averaging gives the full gradient."""
    return float(world_size())


def scale_gathered_gradient(loss: torch.Tensor) -> torch.Tensor:
    """``loss`` with the same value but its gradient multiplied by the world size.

    For a loss over :func:`all_gather_with_grad` outputs: DDP then averages the processes'
    gradients (each through its own part) into exactly the whole batch's gradient, and the
    logged loss (``train_loss`` too) is the loss over the whole batch, not world_size × it.
    ``loss − loss.detach()`` is exactly zero, so the value is unchanged bit for bit.
    """
    scale = gathered_loss_scale()
    if scale == 1.0:
        return loss
    return loss + (scale - 1.0) * (loss - loss.detach())


def close_process_group(wait_for_others: bool = False) -> None:
    """Destroy the default process group, if one was started, before the interpreter exits:
    left to the interpreter's teardown, a gloo group's threads can be destroyed while still
    running, and a process that trained and saved correctly then aborts ("terminate called
    without an active exception", exit −6), which fails the launch. ``wait_for_others``
    (after a run that succeeded on every process): a barrier first, so no process tears its
    group down while another is still saving — a rank that finished first aborted that way
    in a CI run even with the group destroyed. Not after an error: the other processes may
    never arrive."""
    if dist.is_available() and dist.is_initialized():
        if wait_for_others:
            dist.barrier()
        dist.destroy_process_group()


@contextmanager
def closing_process_group() -> Iterator[None]:
    """Run the block, then end as a user's run ends (``cli_main``): the default process
    group closed by :func:`close_process_group`, after a barrier when the block finished
    (every process got there) and without one when it raised. For scripts launched in
    several processes (tests, examples) that do not go through a method's ``main``."""
    finished = False
    try:
        yield
        finished = True
    finally:
        close_process_group(wait_for_others=finished)
