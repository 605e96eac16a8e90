"""Named prompts of a ``SentenceEncoder`` (sentence-transformers' ``prompts`` and
``default_prompt_name``): ``encode`` puts the default (or the named) prompt before each
sentence, a save records them in both libraries' files, and a sentence-transformers folder's
prompts are read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sts_core.encoder import SentenceEncoder

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TEXTS = ["a man plays the guitar", "the dog runs"]


def test_encode_applies_the_default_or_the_named_prompt(tiny_bert_dir: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    by_hand = encoder.encode(["query: " + t for t in TEXTS], show_progress_bar=False)
    passage = encoder.encode(["passage: " + t for t in TEXTS], show_progress_bar=False)
    bare = encoder.encode(TEXTS, show_progress_bar=False)
    encoder.set_prompts({"query": "query: ", "passage": "passage: "}, "query")
    np.testing.assert_array_equal(encoder.encode(TEXTS, show_progress_bar=False), by_hand)
    named = encoder.encode(TEXTS, show_progress_bar=False, prompt_name="passage")
    np.testing.assert_array_equal(named, passage)
    single = encoder.encode(TEXTS[0], show_progress_bar=False)
    np.testing.assert_array_equal(single, by_hand[0])
    encoder.set_prompts(encoder.prompts, None)
    np.testing.assert_array_equal(encoder.encode(TEXTS, show_progress_bar=False), bare)


def test_a_default_that_is_not_a_prompt_is_refused(tiny_bert_dir: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    with pytest.raises(ValueError, match="default_prompt_name 'doc' is not one of the prompts"):
        encoder.set_prompts({"query": "query: "}, "doc")
    with pytest.raises(ValueError, match="prompts must map names to strings"):
        encoder.set_prompts({"query": 3})


def test_prompts_are_saved_and_read_by_both_libraries(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    encoder.set_prompts({"query": "query: ", "passage": "passage: "}, "query")
    expected = encoder.encode(TEXTS, show_progress_bar=False)
    encoder.save_pretrained(tmp_path / "ours")
    written = json.loads((tmp_path / "ours" / "config_sentence_transformers.json").read_text())
    assert written["prompts"] == {"query": "query: ", "passage": "passage: "}
    assert written["default_prompt_name"] == "query"
    reloaded = SentenceEncoder.from_pretrained(tmp_path / "ours")
    assert (reloaded.prompts, reloaded.default_prompt_name) == (encoder.prompts, "query")
    np.testing.assert_allclose(reloaded.encode(TEXTS, show_progress_bar=False), expected, atol=1e-6)
    theirs = SentenceTransformer(str(tmp_path / "ours"), device="cpu")
    np.testing.assert_allclose(theirs.encode(TEXTS), expected, rtol=1e-4, atol=1e-5)
    # a folder sentence-transformers saved: its prompts and default are read
    theirs.default_prompt_name = "passage"
    theirs.save(str(tmp_path / "theirs"))
    from_theirs = SentenceEncoder.from_pretrained(tmp_path / "theirs")
    assert from_theirs.default_prompt_name == "passage"
    np.testing.assert_allclose(
        from_theirs.encode(TEXTS, show_progress_bar=False), theirs.encode(TEXTS), atol=1e-5
    )


def test_an_encoder_without_prompts_records_the_settings_it_always_did(
    tiny_bert_dir: Path,
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    assert set(encoder.settings()) == {"pooling", "prompt", "max_length", "normalize"}
    encoder.set_prompts({"query": "query: "})
    assert encoder.settings()["prompts"] == {"query": "query: "}
