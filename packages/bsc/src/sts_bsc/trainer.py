"""``BscTrainer``: the BSC loss on ``BaseTrainer``, its batches built by §3.2's shuffling."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from sts_bsc.shuffling import (
    NEEDS_EMBEDDINGS,
    chunk,
    shuffle_order,
)
from sts_core.training import BaseTrainer

if TYPE_CHECKING:
    from sts_bsc.config import BscConfig
    from sts_core.encoder import SentenceEncoder

logger = logging.getLogger(__name__)


class BscTrainer(BaseTrainer):
    """BSC: the registered ``bsc`` loss (:mod:`sts_bsc.loss`) over batches that
    :meth:`build_epoch_batches` rebuilds at the start of every epoch with ``shuffle``
    (:mod:`sts_bsc.shuffling`; example-based, cluster and neighbour shuffles embed the
    data with the current model). Everything else is the core's."""

    args: BscConfig  # the Trainer's arguments are the method's config

    def __init__(self, model: SentenceEncoder, args: BscConfig, **kwargs: Any) -> None:
        super().__init__(model, args, **kwargs)
        self.shuffle_log: list[dict[str, Any]] = []

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
