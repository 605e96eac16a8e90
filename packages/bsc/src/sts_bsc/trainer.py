"""``BscTrainer``: the BSC loss on ``BaseTrainer``, its batches built by §3.2's shuffling."""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

import numpy as np

from sts_bsc.loss import CITATION
from sts_bsc.shuffling import (
    NEEDS_EMBEDDINGS,
    check_shuffle_dependencies,
    chunk,
    shuffle_order,
)
from sts_core.training import BaseTrainer

logger = logging.getLogger(__name__)

PAPER = {"name": "Batch-softmax contrastive loss (BSC)", "citation": CITATION}
LOSS_NAMES = {
    "bsc": "Batch-softmax contrastive loss (eq. 1–5), combo with MSE when mu < 1 (eq. 6)",
    "cosine_mse": "Cosine MSE (the MSE baseline)",
}


class BscTrainer(BaseTrainer):
    """BSC: the registered ``bsc`` loss (:mod:`sts_bsc.loss`) over batches that
    :meth:`build_epoch_batches` rebuilds at the start of every epoch with ``shuffle``
    (:mod:`sts_bsc.shuffling`; example-based, cluster and neighbour shuffles embed the
    data with the current model). Everything else is the core's."""

    _paper: ClassVar[dict[str, str]] = PAPER
    default_loss = "bsc"

    def __init__(self, model: Any, args: Any, **kwargs: Any) -> None:
        super().__init__(model, args, **kwargs)
        self.model_card_data["loss"] = LOSS_NAMES[args.loss]
        self.shuffle_log: list[dict[str, Any]] = []

    @classmethod
    def check_train_dataset(cls, dataset: Any, config: Any) -> None:
        """The core's checks, then that ``shuffle`` can run here (faiss for the k-NN and
        k-means shuffles), before any weights load."""
        super().check_train_dataset(dataset, config)
        check_shuffle_dependencies(config.shuffle)

    def build_epoch_batches(self, dataset: Any, epoch: int) -> list[list[int]]:
        """The epoch's global batches: consecutive chunks of ``shuffle``'s order, drawn from
        a generator seeded by (``seed``, epoch)."""
        args = self.args
        start = time.perf_counter()
        texts = list(dataset[args.shuffle_by])
        vectors = self._embed_for_shuffle(texts) if args.shuffle in NEEDS_EMBEDDINGS else None
        order = shuffle_order(
            args.shuffle,
            texts,
            vectors,
            np.random.default_rng([args.seed, epoch]),
            group_size=args.group_size,
            candidates=args.shuffle_candidates,
            shingle_size=args.shingle_size,
            num_clusters=args.num_clusters,
            shingle_neighbours=args.shingle_neighbours,
            reverse=args.reverse_groups,
            seed=args.seed + epoch,
        )
        seconds = time.perf_counter() - start
        self.shuffle_log.append({"epoch": epoch, "rows": len(order), "seconds": seconds})
        logger.info(
            "epoch %d: %s shuffling of %d pairs by %s in %.1f s",
            epoch,
            args.shuffle,
            len(order),
            args.shuffle_by,
            seconds,
        )
        return chunk(order, args.per_device_train_batch_size * args.world_size)

    def _embed_for_shuffle(self, texts: list[str]) -> np.ndarray:
        """The current model's embeddings of ``texts`` (no gradient, eval mode)."""
        encoder = self.accelerator.unwrap_model(self.model)
        return encoder.encode(
            texts, batch_size=self.args.per_device_eval_batch_size, show_progress_bar=False
        )
