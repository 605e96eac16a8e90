"""The core's built-in loss, used to test the whole training path end to end."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cosine_mse_loss(left: torch.Tensor, right: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean squared error between cosine similarity and the gold score.

    L = (1/N) Σ_i (cos(u_i, v_i) − y_i)²,  with y_i the gold similarity rescaled to [0, 1]
    (set ``score_range`` in the recipe). This is sentence-transformers' CosineSimilarityLoss
    (Reimers & Gurevych, 2019, "Sentence-BERT", §3) and the cosine MSE baseline of CoSENT.

    Args:
        left, right: ``(N, d)`` embeddings of the two sentences of each pair.
        labels: ``(N,)`` gold scores.
    """
    if left.shape != right.shape or left.shape[0] != labels.shape[0]:
        raise ValueError(
            f"shapes do not match: {tuple(left.shape)}, {tuple(right.shape)}, {tuple(labels.shape)}"
        )
    cosine = F.cosine_similarity(left.float(), right.float(), dim=-1)
    return F.mse_loss(cosine, labels.to(cosine.dtype))
