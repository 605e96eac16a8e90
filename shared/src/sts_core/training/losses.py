"""Re-export of the core's built-in loss (it lives in :mod:`sts_core.losses` now)."""

from sts_core.losses.similarity import cosine_mse_loss

__all__ = ["cosine_mse_loss"]
