"""One evaluator for labelled pair sets, whatever scores the pairs.

:class:`PairEvaluator` holds a pair set (``sentence1``, ``sentence2``, ``score``) and a
*scorer*, a function ``scorer(model, sentences1, sentences2, batch_size) -> np.ndarray``
giving one score per pair; it reports the Spearman and Pearson correlations (×100) of
those scores with the gold scores. The scorers here:

- :func:`cosine_scorer`: a bi-encoder. Both sides are embedded with the model's
  ``encode``; the pair's score is ``model.score_pairs(u, v)`` when the model defines it
  (a head that scores pairs), else the cosine similarity of the two embeddings.
- :func:`head_scorer`: a bi-encoder's head that scores pairs (``head.score(u, v)``), e.g.
  a regression head's predictions.
- :func:`cross_encoder_scorer`: a cross-encoder (a sequence classifier with one output):
  its logit on the jointly encoded pair.

This module imports neither torch nor transformers until a scorer needs them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sts_core.data.columns import column_array, column_list
from sts_core.evaluation.metrics import pearson, spearman

#: ``scorer(model, sentences1, sentences2, batch_size)`` → float array of one score per pair
PairScorer = Callable[[Any, Sequence[str], Sequence[str], int], np.ndarray]

#: the truncation length of a cross-encoder scorer when neither it nor the model sets one
DEFAULT_CROSS_MAX_LENGTH = 512


def cosine_scores(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two ``(n, d)`` arrays, in float64."""
    left = np.asarray(left, dtype=np.float64)
    right = np.asarray(right, dtype=np.float64)
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    return (left * right).sum(axis=1) / np.maximum(norms, 1e-12)


def check_scored_pairs(dataset: Any, name: str, source: str | os.PathLike | None = None) -> None:
    """Raise :class:`~sts_core.data.DataContentError` unless ``dataset`` can be scored.

    A correlation needs at least 2 pairs, finite gold scores and gold scores that are
    not all equal; the error names the set (``name``), where it came from (``source``)
    and the problem.
    """
    from sts_core.data.errors import DataContentError

    columns = getattr(dataset, "column_names", None)
    if columns is None and isinstance(dataset, Mapping):
        columns = list(dataset)
    missing = [c for c in ("sentence1", "sentence2", "score") if c not in (columns or ())]
    if missing:
        raise DataContentError(name, f"no column(s) {missing}; found {list(columns or ())}", source)
    gold = column_array(dataset, "score")
    if len(gold) < 2:
        problem = f"{len(gold)} scored pair(s); a correlation needs at least 2"
        raise DataContentError(name, problem, source)
    if not np.all(np.isfinite(gold)):
        bad = int((~np.isfinite(gold)).sum())
        raise DataContentError(name, f"{bad} gold score(s) are NaN or infinite", source)
    if np.ptp(gold) == 0:
        problem = (
            f"all {len(gold)} gold scores are equal ({gold[0]:g}); the correlation is undefined"
        )
        raise DataContentError(name, problem, source)


def encode_sentences(
    model: Any, sentences: Sequence[str], batch_size: int, progress: bool = False
) -> np.ndarray:
    """``model.encode(sentences)`` (a SentenceEncoder and the like), or ``model(sentences)``
    for a plain callable sentences → ``(n, d)`` array."""
    if hasattr(model, "encode"):
        return np.asarray(
            model.encode(list(sentences), batch_size=batch_size, show_progress_bar=progress)
        )
    if callable(model):
        return np.asarray(model(list(sentences)))
    raise TypeError("a bi-encoder scorer needs an object with encode(sentences) or a callable")


def cosine_scorer(
    model: Any, sentences1: Sequence[str], sentences2: Sequence[str], batch_size: int = 64
) -> np.ndarray:
    """Bi-encoder pair scores: embed both sides (one ``encode`` call, so a sentence on both
    sides is embedded once), then ``model.score_pairs(u, v)`` when the model has it, else the
    cosine similarity (float64).

    ``score_pairs`` gets the two ``(n, d)`` embeddings as float64 arrays (what ``encode``
    gave, widened as the cosine path widens them; ``SentenceEncoder.score_pairs`` moves them
    to its head's device and dtype) and returns ``n`` scores, a tensor or an array; it runs
    under ``torch.no_grad`` (not ``inference_mode``: a head's parameters gathered by DeepSpeed
    ZeRO-3 must stay usable by the training steps after an evaluation).
    """
    vectors = encode_sentences(model, [*sentences1, *sentences2], batch_size)
    left = np.asarray(vectors[: len(sentences1)], dtype=np.float64)
    right = np.asarray(vectors[len(sentences1) :], dtype=np.float64)
    score_pairs = getattr(model, "score_pairs", None)
    if score_pairs is None:
        return cosine_scores(left, right)
    import torch

    with torch.no_grad():
        scores = score_pairs(left, right)
    if isinstance(scores, torch.Tensor):
        scores = scores.detach().double().cpu().numpy()
    return np.asarray(scores, dtype=np.float64).reshape(-1)


def head_scorer(head_name: str) -> PairScorer:
    """Bi-encoder pair scores from the model's head ``head_name`` (its ``score(u, v)``),
    whatever :attr:`~sts_core.encoder.SentenceEncoder.pair_scorer` says: e.g. the
    regression head's predictions, when STS evaluation scores the cosine."""

    def scorer(
        model: Any, sentences1: Sequence[str], sentences2: Sequence[str], batch_size: int = 64
    ) -> np.ndarray:
        import torch

        heads = getattr(model, "heads", {})
        if head_name not in heads:
            raise ValueError(f"the model has no head {head_name!r} (heads: {list(heads)})")
        head = heads[head_name]
        vectors = encode_sentences(model, [*sentences1, *sentences2], batch_size)
        parameter = next(head.parameters())
        as_tensor = lambda rows: torch.as_tensor(  # noqa: E731
            np.asarray(rows), dtype=parameter.dtype, device=parameter.device
        )
        with torch.no_grad():
            scores = head.score(
                as_tensor(vectors[: len(sentences1)]), as_tensor(vectors[len(sentences1) :])
            )
        return scores.detach().double().cpu().numpy().reshape(-1)

    scorer.__name__ = f"head_scorer({head_name!r})"
    return scorer


class CrossEncoderScorer:
    """Cross-encoder pair scores: the model's single logit on each jointly encoded pair
    (:func:`sts_core.cross_encoder.predict_pair_scores`).

    Args:
        tokenizer: the model's tokenizer; ``None`` (the default) reads the model's
            ``sts_tokenizer`` at each call, so the scorer can be built before the model.
        max_length: truncation length; ``None`` reads the model's ``sts_max_length``
            (else 512) at each call.
    """

    def __init__(self, tokenizer: Any = None, max_length: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length

    def __call__(
        self, model: Any, sentences1: Sequence[str], sentences2: Sequence[str], batch_size: int
    ) -> np.ndarray:
        from sts_core.cross_encoder import predict_pair_scores

        tokenizer = self.tokenizer
        if tokenizer is None:
            tokenizer = getattr(model, "sts_tokenizer", None)
        if tokenizer is None:
            raise RuntimeError(
                "cross-encoder scorer: no tokenizer; pass one or set the model's sts_tokenizer "
                "(the CoSENT method's build_model does)"
            )
        max_length = self.max_length
        if max_length is None:
            max_length = getattr(model, "sts_max_length", None) or DEFAULT_CROSS_MAX_LENGTH
        return predict_pair_scores(
            model, tokenizer, sentences1, sentences2, batch_size=batch_size, max_length=max_length
        )

    def __repr__(self) -> str:
        tokenizer = "model's" if self.tokenizer is None else type(self.tokenizer).__name__
        return f"CrossEncoderScorer(tokenizer={tokenizer}, max_length={self.max_length})"


def cross_encoder_scorer(tokenizer: Any = None, max_length: int | None = None) -> PairScorer:
    """A :class:`CrossEncoderScorer`: with no arguments it reads the model's
    ``sts_tokenizer`` and ``sts_max_length`` when it is called."""
    return CrossEncoderScorer(tokenizer, max_length)


class PairEvaluator:
    """Spearman/Pearson (×100) of a scorer's pair scores against gold on one pair set.

    Follows the ``primary_metric`` / ``greater_is_better`` contract: results are keyed
    ``<name>_spearman`` and ``<name>_pearson``; the Trainer prefixes them with ``eval_``,
    so ``metric_for_best_model: stsb_dev_spearman`` selects on STS-B dev.

    Args:
        dataset: the pairs: ``sentence1``, ``sentence2`` and gold ``score`` columns.
        name: the set's name, the prefix of the metric keys.
        scorer: ``scorer(model, sentences1, sentences2, batch_size) -> np.ndarray`` of
            pair scores (default :func:`cosine_scorer`, a bi-encoder).
        batch_size: passed to the scorer.
        source: where the set came from, for error messages.

    A set with fewer than 2 pairs, non-finite or constant gold scores is rejected when the
    evaluator is built (:class:`~sts_core.data.DataContentError` naming ``name`` and
    ``source``), not at the first evaluation after training.
    """

    greater_is_better = True

    def __init__(
        self,
        dataset: Any,
        name: str = "stsb_dev",
        scorer: PairScorer = cosine_scorer,
        batch_size: int = 64,
        source: str | os.PathLike | None = None,
    ) -> None:
        check_scored_pairs(dataset, name, source)
        self.name = name
        self.scorer = scorer
        self.batch_size = batch_size
        self.sentences1 = column_list(dataset, "sentence1")
        self.sentences2 = column_list(dataset, "sentence2")
        self.gold = column_array(dataset, "score")

    @property
    def primary_metric(self) -> str:
        return f"{self.name}_spearman"

    def predict(self, model: Any) -> np.ndarray:
        """The scorer's score of every pair, float64, in the set's order."""
        scores = self.scorer(model, self.sentences1, self.sentences2, self.batch_size)
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)
        if len(scores) != len(self.gold):
            raise ValueError(
                f"{self.name}: the scorer gave {len(scores)} scores for {len(self.gold)} pairs"
            )
        return scores

    def __call__(self, model: Any) -> dict[str, float]:
        predicted = self.predict(model)
        return {
            f"{self.name}_spearman": 100 * spearman(predicted, self.gold),
            f"{self.name}_pearson": 100 * pearson(predicted, self.gold),
        }

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, pairs={len(self.gold)}, "
            f"scorer={getattr(self.scorer, '__name__', self.scorer)!r})"
        )
