"""Re-export of :mod:`sts_core.distributed` (its former place)."""

from sts_core.distributed import (
    all_gather_with_grad,
    gathered_loss_scale,
    rank,
    scale_gathered_gradient,
    world_size,
)

__all__ = [
    "all_gather_with_grad",
    "gathered_loss_scale",
    "rank",
    "scale_gathered_gradient",
    "world_size",
]
