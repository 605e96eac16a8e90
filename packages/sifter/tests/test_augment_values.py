"""SIFTER's positives on parses built here token by token, each expected text written by
hand: the backbone's relations (punctuation by relation or by part of speech, negations
on the root, the auxiliary of a negation only), its endings and joins, deletion across
sentences (a sentence left empty, capitals), ``augment``'s fallbacks to X, the corpus
report, and the whole message of each refused option. Found by the mutation pass
(``tools/mutation.py``)."""

from __future__ import annotations

import pytest

from sts_sifter.augment import (
    AugmentOptions,
    AugmentReport,
    augment,
    backbone_text,
    without_function_words,
)
from sts_sifter.parsing import Token


def words(*spec: tuple) -> list[Token]:
    """Tokens from (text, upos, head, deprel[, article]) with a space after each but the
    last; a final punctuation mark follows its word directly."""
    tokens = []
    for i, (text, upos, head, deprel, *article) in enumerate(spec):
        following = spec[i + 1][0] if i + 1 < len(spec) else ""
        space = "" if following in {".", "!", "?", "n't"} or i + 1 == len(spec) else " "
        tokens.append(Token(text, upos, head, deprel, space, bool(article and article[0])))
    return tokens


HE_RUNS = words(("He", "PRON", 2, "nsubj"), ("runs", "VERB", 0, "root"), (".", "PUNCT", 2, "punct"))
SHE_SINGS = words(
    ("She", "PRON", 2, "nsubj"), ("sings", "VERB", 0, "root"), ("!", "PUNCT", 2, "punct")
)


def test_the_default_relations_are_the_core_ones() -> None:
    quickly = words(
        ("He", "PRON", 2, "nsubj"),
        ("runs", "VERB", 0, "root"),
        ("quickly", "ADV", 2, "advmod"),
    )
    assert backbone_text([quickly]) == "He runs."
    assert backbone_text([quickly], "core") == "He runs."
    assert backbone_text([quickly], "all") == "He runs quickly."


def test_punctuation_is_left_out_by_its_relation_or_by_its_part_of_speech() -> None:
    marks = words(
        ("He", "PRON", 2, "nsubj"),
        ("runs", "VERB", 0, "root"),
        ("--", "SYM", 2, "punct"),
        ("home", "NOUN", 2, "obj"),
        (";", "PUNCT", 2, "dep"),
    )
    assert backbone_text([marks], "all") == "He runs home."


def test_a_negation_on_the_root_is_kept_with_its_auxiliary_and_only_then() -> None:
    negated = words(
        ("I", "PRON", 4, "nsubj"),
        ("do", "AUX", 4, "aux"),
        ("never", "ADV", 4, "advmod"),
        ("like", "VERB", 0, "root"),
        ("it", "PRON", 4, "obj"),
    )
    assert backbone_text([negated]) == "I do never like it."
    plain = words(
        ("He", "PRON", 3, "nsubj"),
        ("does", "AUX", 3, "aux"),
        ("like", "VERB", 0, "root"),
        ("no", "DET", 3, "det"),
        ("apples", "NOUN", 3, "obj"),
    )
    assert backbone_text([plain]) == "He does like no apples."  # 'no' on the root: negated
    without = words(
        ("He", "PRON", 3, "nsubj"),
        ("does", "AUX", 3, "aux"),
        ("like", "VERB", 0, "root"),
        ("the", "DET", 3, "det", True),
        ("apples", "NOUN", 3, "obj"),
    )
    assert backbone_text([without]) == "He like apples."


def test_a_sentence_without_a_root_has_no_backbone() -> None:
    rootless = words(("He", "PRON", 2, "nsubj"), ("runs", "VERB", 1, "dep"))
    assert backbone_text([rootless]) == ""


@pytest.mark.parametrize(
    ("word", "written"),
    [("Smt.", "He married Smt."), ("Smt!", "He married Smt!"), ("Smt?", "He married Smt?")]
    + [("Smt", "He married Smt.")],
)
def test_a_backbone_ends_with_its_last_words_mark_or_a_full_stop(word, written) -> None:
    married = words(
        ("he", "PRON", 2, "nsubj"), ("married", "VERB", 0, "root"), (word, "PROPN", 2, "obj")
    )
    assert backbone_text([married], "core") == written


def test_backbones_of_two_sentences_are_joined_by_a_space() -> None:
    assert backbone_text([HE_RUNS, SHE_SINGS]) == "He runs. She sings."


def test_deletion_counts_over_sentences_and_keeps_going_after_an_empty_one() -> None:
    only_article = words(("The", "DET", 0, "root", True))
    the_dog = words(
        ("the", "DET", 2, "det", True),
        ("dog", "NOUN", 3, "nsubj"),
        ("barks", "VERB", 0, "root"),
        ("and", "CCONJ", 5, "cc"),
        ("bites", "VERB", 3, "conj"),
    )
    text, removed = without_function_words([only_article, the_dog, HE_RUNS])
    assert (text, removed) == ("dog barks bites He runs.", 3)  # no capital made for 'the'
    capital = words(("The", "DET", 2, "det", True), ("dog", "NOUN", 0, "root"))
    assert without_function_words([capital]) == ("Dog", 1)
    assert without_function_words([words(("Go", "VERB", 0, "root"))]) == ("Go", 0)


def test_augment_passes_its_options_and_falls_back_to_x() -> None:
    the_dog = words(
        ("The", "DET", 2, "det", True),
        ("dog", "NOUN", 3, "nsubj"),
        ("barks", "VERB", 0, "root"),
        ("loudly", "ADV", 3, "advmod"),
        ("and", "CCONJ", 5, "cc"),
        ("bites", "VERB", 3, "conj"),
    )
    text = "The dog barks loudly and bites"
    core = augment(text, [the_dog], AugmentOptions())
    assert core.to_dict() == {
        "sentence": text,
        "with_backbone": f"{text} Dog barks.",
        "without_function_words": "Dog barks loudly bites",
        "has_backbone": True,
        "deleted": 2,
    }
    everything = augment(text, [the_dog], AugmentOptions(relations="all", delete=("CCONJ",)))
    assert everything.with_backbone == f"{text} Dog barks loudly bites."
    assert everything.without_function_words == "The dog barks loudly bites"
    assert everything.deleted == 1
    spaced = "He  runs.  "  # nothing deleted: Z is X as given, not the tokens rewritten
    assert augment(spaced, [HE_RUNS], AugmentOptions()).without_function_words == spaced
    lone = augment("The", [words(("The", "DET", 0, "root", True))], AugmentOptions())
    assert (lone.without_function_words, lone.deleted, lone.has_backbone) == ("The", 0, False)
    assert lone.with_backbone == "The"


def test_the_report_counts_and_keeps_three_examples() -> None:
    items = [
        augment("He runs.", [HE_RUNS], AugmentOptions()),
        augment("The", [words(("The", "DET", 0, "root", True))], AugmentOptions()),
        augment("He runs.", [HE_RUNS], AugmentOptions()),
        augment("She sings!", [SHE_SINGS], AugmentOptions()),
    ]
    report = AugmentReport(parser="spacy", cached=1)
    for item in items:
        report.add(item)
    assert (report.sentences, report.no_backbone, report.nothing_deleted) == (4, 1, 4)
    assert report.examples == [item.to_dict() for item in items[:3]]
    assert report.to_dict() == {
        "sentences": 4,
        "no_backbone": 1,
        "nothing_deleted": 4,
        "cached": 1,
        "parser": "spacy",
        "examples": report.examples,
    }
    assert str(report) == (
        "4 sentences parsed by spacy (1 from the cache): 1 without a usable backbone "
        "(Y = X), 4 with nothing to delete (Z = X)"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"relations": "some"}, "backbone relations 'some': choose core or all"),
        ({"delete": ()}, "delete lists nothing: Z would equal X (name article, CCONJ, …)"),
    ],
)
def test_bad_options_are_refused_with_their_whole_message(options, message) -> None:
    with pytest.raises(ValueError) as error:
        AugmentOptions(**options)
    assert str(error.value) == message
