"""Prompt templates: exact strings of the named ones, literal templates, bad templates."""

from __future__ import annotations

import pytest

from sts_core.prompts import PROMPT_TEMPLATES, SLOT, apply_prompt, resolve_prompt

SENTENCE = "A man is playing a guitar."


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("prompteol", 'This sentence : "A man is playing a guitar." means in one word:"'),
        ("promptsth", 'This sentence : "A man is playing a guitar." means something'),
        ("promptsum", 'This sentence : "A man is playing a guitar." can be summarized as'),
    ],
)
def test_named_templates_exact_strings(name: str, expected: str) -> None:
    for spelling in (name, name.upper(), "Prompt" + name[6:].upper()):
        assert apply_prompt(resolve_prompt(spelling), SENTENCE) == expected


def test_named_template_table() -> None:
    assert PROMPT_TEMPLATES == {
        "prompteol": 'This sentence : "[X]" means in one word:"',
        "promptsth": 'This sentence : "[X]" means something',
        "promptsum": 'This sentence : "[X]" can be summarized as',
    }
    assert SLOT == "[X]"


def test_literal_template() -> None:
    template = "query: [X] </s>"
    assert resolve_prompt(template) == template
    assert apply_prompt(resolve_prompt(template), "two dogs") == "query: two dogs </s>"
    # the slot may sit at either end
    assert apply_prompt(resolve_prompt("[X]!"), "hi") == "hi!"
    assert apply_prompt(resolve_prompt("Summary: [X]"), "hi") == "Summary: hi"


def test_sentence_containing_slot_text_and_quotes() -> None:
    # The sentence is inserted verbatim, whatever it contains.
    template = resolve_prompt("prompteol")
    assert apply_prompt(template, 'say "[X]"') == 'This sentence : "say "[X]"" means in one word:"'


def test_no_prompt() -> None:
    assert resolve_prompt(None) is None
    assert resolve_prompt("") is None
    assert apply_prompt(None, SENTENCE) == SENTENCE


@pytest.mark.parametrize("bad", ["prompt_eol", "no slot here", "[X] and [X]", "[x]", "X"])
def test_bad_template(bad: str) -> None:
    with pytest.raises(ValueError, match=r"exactly one \[X\] slot") as info:
        resolve_prompt(bad)
    assert repr(bad) in str(info.value)
    for name in PROMPT_TEMPLATES:
        assert name in str(info.value)
