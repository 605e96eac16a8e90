"""SIFTER-SimCSE (and unsupervised SimCSE), declared once (entry point
``sts_core.methods``): the method builds its positives from single sentences before the
run's checks; the training loop is the core's."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sts_core.data.columns import column_list
from sts_core.losses import EmbeddingLoss
from sts_core.method import Method, QualityRow
from sts_core.training import command
from sts_sifter.config import SifterConfig
from sts_sifter.corpus import augment_corpus, cache_holds, clean_corpus
from sts_sifter.loss import SifterLoss, SimCSELoss, X, Y, Z
from sts_sifter.parsing import ParserUnavailable

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

CHECK_ONLY_TRIAL = 8  # sentences parsed by check_only to prove the parser works


def default_cache_dir() -> Path:
    """``$STS_SIFTER_CACHE``, else ``~/.cache/sts-sifter``."""
    return Path(os.environ.get("STS_SIFTER_CACHE") or Path.home() / ".cache" / "sts-sifter")


class SifterMethod(Method[SifterConfig]):
    """SIFTER-SimCSE: the training set is unlabelled sentences (a ``sentence`` column, e.g.
    ``train_datasets: [wiki]``); :meth:`prepare_train_dataset` cleans them (§5.4) and makes
    each one's positives Y and Z (:mod:`sts_sifter.augment`, cached), or for ``loss:
    simcse`` pairs each sentence with itself. The losses (:mod:`sts_sifter.loss`) put
    SimCSE's MLP over the pooled embedding in training only.
    """

    def prepare_train_dataset(
        self, dataset: Dataset, config: SifterConfig
    ) -> tuple[Dataset, dict[str, Any]]:
        from datasets import Dataset

        sentences, summary = corpus_sentences(dataset)
        if config.clean_corpus:
            sentences, report = clean_corpus(sentences, config.capitalised_end)
            summary["corpus_cleaning"] = report.to_dict()
        if config.loss == "simcse":
            return Dataset.from_dict({"sentence1": sentences, "sentence2": sentences}), summary
        rows, positives = self.positives(sentences, config)
        summary["positives"] = positives
        columns = {X: [r.sentence for r in rows], Y: [r.with_backbone for r in rows]}
        columns[Z] = [r.without_function_words for r in rows]
        return Dataset.from_dict(columns), summary

    def table_columns(self, loss: type[EmbeddingLoss]) -> tuple[str, ...]:
        """Both losses train on single sentences, or the distinct sentences of pairs
        (:func:`corpus_sentences`)."""
        return (X,)

    def positives(
        self, sentences: list[str], config: SifterConfig
    ) -> tuple[list[Any], dict[str, Any]]:
        """Each sentence's Y and Z (main process first; the others read its cache).
        ``check_only`` parses only a few sentences, to prove the parser loads. A parser
        whose package is not installed is a ValueError naming its extra — unless the cache
        holds every sentence's positives: then no parser is needed."""
        cache = config.augment_cache_dir or default_cache_dir()
        try:
            if config.check_only:
                return self.trial_positives(sentences, config, cache)
            return self.corpus_positives(sentences, config, cache)
        except ParserUnavailable as error:
            options = config.augment_options()
            if config.check_only and cache_holds(sentences, config.parser, options, cache):
                summary = {"check_only_trial": "none: every sentence is in the cache"}
                return [_unparsed(s) for s in sentences], {**summary, "cache": str(cache)}
            raise ValueError(
                f"{error} (or set augment_cache_dir to a cache that holds this corpus's "
                "positives: no parser is needed then)"
            ) from error

    def trial_positives(
        self, sentences: list[str], config: SifterConfig, cache: str | os.PathLike
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

    def corpus_positives(
        self, sentences: list[str], config: SifterConfig, cache: str | os.PathLike
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
        both = [*column_list(dataset, "sentence1"), *column_list(dataset, "sentence2")]
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


METHOD = SifterMethod(
    name="sifter",
    title="SIFTER-SimCSE (positives with the sentence backbone added and function words removed)",
    config=SifterConfig,
    losses=(SifterLoss, SimCSELoss),
    description=(
        "SIFTER-SimCSE: unsupervised contrastive learning on single sentences with two "
        "syntax-aware positives (loss: sifter), or unsupervised SimCSE (loss: simcse). --config "
        "<recipe>.yaml gives defaults; flags override them."
    ),
    readme="packages/sifter/README.md",
    # unsupervised, on the distinct sentences of the benchmark's STS pairs (their scores
    # unused), with the benchmark's budget and the model's own dropout. Peer: st-simcse.
    quality_rows=(
        QualityRow(
            "sifter",
            "ours: sts-sifter (SIFTER-SimCSE, eq. 2, on the pairs' sentences)",
            {"loss": "sifter", "parser": "spacy"},
        ),
        QualityRow(
            "simcse",
            "ours: sts-sifter (unsupervised SimCSE, eq. 1, on the pairs' sentences)",
            {"loss": "simcse"},
        ),
    ),
)
main = command(METHOD)
