"""``RegressionTrainer``: Siamese regression with Translated ReLU / Smooth K2 (or a baseline)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sts_core.training import BaseTrainer
from sts_regression.loss import REGRESSION_HEAD, is_regression_loss

if TYPE_CHECKING:
    from sts_core.encoder import SentenceEncoder
    from sts_regression.config import RegressionConfig

logger = logging.getLogger(__name__)


class RegressionTrainer(BaseTrainer):
    """Siamese training through a head over ``(u, v, |u − v|)`` (``args.loss``).

    The loss comes from the ``sts_core.losses`` registry: ``smooth_k2``,
    ``translated_relu``, ``mse`` and ``l1`` (:mod:`sts_regression.loss`) predict the label
    with the one-output ``regression`` head; ``softmax`` (the core's) is SBERT's
    classifier with ``num_labels`` outputs. Either head is added to the model by the loss,
    saved beside the encoder and reused by a second stage that starts from the saved
    folder. The dev evaluator and the STS table score the cosine of the embeddings, as in
    the paper; after training, ``metrics.json`` also has the regression head's own dev
    scores (``head``).

    The regression head reads the mean-pooled embeddings ``u``, ``v`` as they come out of
    the pooling, before the encoder's L2 normalisation (``normalize``, which a
    sentence-transformers folder such as all-MiniLM-L6-v2 records): the paper's Figure 1
    and the authors' code feed it the average-pooled vectors, and a head over unit vectors
    cannot reach the 0–5 labels at the encoder's learning rate, so the encoder collapses
    to lower the loss. The encoder keeps its ``normalize`` setting for everything else
    (``encode``, the cosine evaluations, the saved folder): the cosine does not depend on
    it. See :func:`sts_core.losses.pooled_embeddings` (``reads_pooled`` on the loss, so a
    regression loss inside another method's ``loss_weights`` reads them too).
    """

    args: RegressionConfig  # the Trainer's arguments are the method's config

    def __init__(self, model: SentenceEncoder, args: RegressionConfig, **kwargs: Any) -> None:
        super().__init__(model, args, **kwargs)
        if self.loss_module.reads_pooled and getattr(model, "normalize", False):
            logger.info(
                "the regression head reads the mean-pooled embeddings before the encoder's "
                "L2 normalisation (as in the paper); encode and the cosine scores keep it"
            )

    def final_evaluation(self, data_args: Any) -> dict[str, Any]:
        """The core's final scores, and the regression head's on the dev set (``head``)."""
        results = super().final_evaluation(data_args)
        model = self.accelerator.unwrap_model(self.model)
        if self.evaluator is not None and is_regression_loss(self.args.loss):
            results["head"] = self.head_dev_scores(model)
        return results

    def head_dev_scores(self, model: Any) -> dict[str, float]:
        """Spearman/Pearson (×100) of the regression head's predictions on the dev set."""
        from sts_core.evaluation import PairEvaluator, head_scorer
        from sts_core.losses import pooled_embeddings

        dev: Any = self.evaluator  # the method's PairEvaluator: its pairs and name
        pairs = {"sentence1": dev.sentences1, "sentence2": dev.sentences2, "score": dev.gold}
        evaluator = PairEvaluator(
            pairs,
            name=f"{dev.name}_head",
            scorer=head_scorer(REGRESSION_HEAD),
            batch_size=self.args.per_device_eval_batch_size,
        )
        with pooled_embeddings(model):  # what the head was trained on
            scores = evaluator(model)
        if self.is_world_process_zero():
            line = ", ".join(f"{k} {v:.2f}" for k, v in scores.items())
            print(f"regression head on {dev.name}: {line}")
        return scores
