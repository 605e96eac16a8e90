"""Two-process helpers: a gloo group on a free port, DDP's averaging, seeded layers."""

from __future__ import annotations

import socket
from typing import Any


def seeded_linear(d_in: int, d_out: int, bias: bool = True, seed: int = 0) -> tuple[Any, Any]:
    """The same ``nn.Linear`` in every process (weights, then bias, drawn from a generator
    seeded with ``seed``) and that generator, to draw the batch from next."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    layer = torch.nn.Linear(d_in, d_out, bias=bias)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(d_out, d_in, generator=generator))
        if bias:
            layer.bias.copy_(torch.randn(d_out, generator=generator))
    return layer, generator


def join_gloo_group(rank: int, world: int, port: int) -> None:
    """Join the test's process group (gloo, rendezvous on 127.0.0.1:``port``)."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )


def ddp_average(grad: Any, world: int) -> Any:
    """A gradient averaged over the processes, as DDP does (a copy)."""
    import torch.distributed as dist

    grad = grad.clone()
    dist.all_reduce(grad)
    return grad / world


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (a process group's rendezvous in a test)."""

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
