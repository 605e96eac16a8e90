"""``SifterTrainer``: SIFTER-SimCSE (and unsupervised SimCSE) on ``BaseTrainer``."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, ClassVar

from sts_core.training import BaseTrainer
from sts_sifter.corpus import augment_corpus, cache_holds, clean_corpus
from sts_sifter.loss import CITATION, X, Y, Z
from sts_sifter.parsing import ParserUnavailable

logger = logging.getLogger(__name__)

PAPER = {
    "name": "SIFTER-SimCSE (positives with the sentence backbone added and function words removed)",
    "citation": CITATION,
}
LOSS_NAMES = {
    "sifter": "SIFTER-SimCSE: InfoNCE between X, X + backbone, X − function words (eq. 2)",
    "simcse": "Unsupervised SimCSE: InfoNCE of a sentence with itself under dropout (eq. 1)",
}
CHECK_ONLY_TRIAL = 8  # sentences parsed by check_only to prove the parser works


def default_cache_dir() -> Path:
    """``$STS_SIFTER_CACHE``, else ``~/.cache/sts-sifter``."""
    return Path(os.environ.get("STS_SIFTER_CACHE") or Path.home() / ".cache" / "sts-sifter")


class SifterTrainer(BaseTrainer):
    """SIFTER-SimCSE: the training set is unlabelled sentences (a ``sentence`` column, e.g.
    ``train_datasets: [wiki]``); :meth:`prepare_train_dataset` cleans them (§5.4) and makes
    each one's positives Y and Z (:mod:`sts_sifter.augment`, cached), or for ``loss:
    simcse`` pairs each sentence with itself. The losses (:mod:`sts_sifter.loss`) put
    SimCSE's MLP over the pooled embedding in training only.
    """

    _paper: ClassVar[dict[str, str]] = PAPER
    default_loss = "sifter"

    def __init__(self, model: Any, args: Any, **kwargs: Any) -> None:
        super().__init__(model, args, **kwargs)
        self.model_card_data["loss"] = LOSS_NAMES[args.loss]

    @classmethod
    def prepare_train_dataset(cls, dataset: Any, config: Any) -> tuple[Any, dict[str, Any]]:
        from datasets import Dataset

        sentences, summary = corpus_sentences(dataset)
        if config.clean_corpus:
            sentences, report = clean_corpus(sentences, config.capitalised_end)
            summary["corpus_cleaning"] = report.to_dict()
        if config.loss == "simcse":
            return Dataset.from_dict({"sentence1": sentences, "sentence2": sentences}), summary
        rows, positives = cls.positives(sentences, config)
        summary["positives"] = positives
        columns = {X: [r.sentence for r in rows], Y: [r.with_backbone for r in rows]}
        columns[Z] = [r.without_function_words for r in rows]
        return Dataset.from_dict(columns), summary

    @classmethod
    def positives(cls, sentences: list[str], config: Any) -> tuple[list[Any], dict[str, Any]]:
        """Each sentence's Y and Z (main process first; the others read its cache).
        ``check_only`` parses only a few sentences, to prove the parser loads. A parser
        whose package is not installed is a ValueError naming its extra — unless the cache
        holds every sentence's positives: then no parser is needed."""
        cache = config.augment_cache_dir or default_cache_dir()
        try:
            if config.check_only:
                return cls.trial_positives(sentences, config, cache)
            return cls.corpus_positives(sentences, config, cache)
        except ParserUnavailable as error:
            options = config.augment_options()
            if config.check_only and cache_holds(sentences, config.parser, options, cache):
                summary = {"check_only_trial": "none: every sentence is in the cache"}
                return [_unparsed(s) for s in sentences], {**summary, "cache": str(cache)}
            raise ValueError(
                f"{error} (or set augment_cache_dir to a cache that holds this corpus's "
                "positives: no parser is needed then)"
            ) from error

    @classmethod
    def trial_positives(
        cls, sentences: list[str], config: Any, cache: str | os.PathLike
    ) -> tuple[list[Any], dict[str, Any]]:
        """``check_only``: the first sentences parsed (nothing cached), the rest as X."""
        trial, report = augment_corpus(
            sentences[:CHECK_ONLY_TRIAL],
            config.parser,
            config.augment_options(),
            None,
            progress=False,
        )
        placeholders = trial + [_unparsed(s) for s in sentences[CHECK_ONLY_TRIAL:]]
        return placeholders, {"check_only_trial": report.to_dict(), "cache": str(cache)}

    @classmethod
    def corpus_positives(
        cls, sentences: list[str], config: Any, cache: str | os.PathLike
    ) -> tuple[list[Any], dict[str, Any]]:
        """Every sentence's positives, read from ``cache`` or parsed into it."""
        options = config.augment_options()
        with config.main_process_first(desc="SIFTER positives"):
            rows, report = augment_corpus(
                sentences,
                config.parser,
                options,
                cache,
                workers=config.augment_workers,
                progress=config.should_log,
            )
        return rows, report.to_dict()


def corpus_sentences(dataset: Any) -> tuple[list[str], dict[str, Any]]:
    """The unlabelled sentences of a training set: its ``sentence`` column as it is, or
    the distinct sentences of a pair set (``sentence1`` then ``sentence2``, first
    occurrence kept; labels unused), with a summary of what was read."""
    columns = dataset.column_names
    if X in columns:
        sentences = list(dataset[X])
        return sentences, {"sentences_read": len(sentences)}
    if {"sentence1", "sentence2"} <= set(columns):
        both = [*dataset["sentence1"], *dataset["sentence2"]]
        distinct = list(dict.fromkeys(both))
        logger.info(
            "SIFTER: %d distinct sentences from the %d pairs (%d repeats not used; labels unused)",
            len(distinct),
            len(dataset),
            len(both) - len(distinct),
        )
        summary = {"sentences_read": len(both), "from_pairs": True}
        summary["repeated_sentences_removed"] = len(both) - len(distinct)
        return distinct, summary
    raise ValueError(
        f"SIFTER trains on unlabelled sentences: a column {X!r} (train_datasets: [wiki], a "
        f"one-sentence-a-line file) or the sentences of pairs (sentence1, sentence2); the "
        f"training set has {', '.join(columns)}"
    )


def _unparsed(sentence: str) -> Any:
    from sts_sifter.augment import Augmented

    return Augmented(sentence, sentence, sentence, has_backbone=False, deleted=0)
