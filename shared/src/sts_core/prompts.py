"""Prompt templates for sentence embeddings from decoder language models.

A template holds the slot ``[X]`` where the sentence goes. The three templates of
PromptEOL (Jiang et al., 2023, "Scaling Sentence Embeddings with Large Language
Models") and its variants are built in; any string with one ``[X]`` works too.
Use them with ``last_token`` pooling: the hidden state of the final prompt token
summarises the sentence.
"""

from __future__ import annotations

SLOT = "[X]"

PROMPT_TEMPLATES: dict[str, str] = {
    "prompteol": 'This sentence : "[X]" means in one word:"',
    "promptsth": 'This sentence : "[X]" means something',
    "promptsum": 'This sentence : "[X]" can be summarized as',
}


def resolve_prompt(name_or_template: str | None) -> str | None:
    """Return the template for a known name (case-insensitive) or a literal template.

    Raises:
        ValueError: the string is neither a known name nor a template with exactly one ``[X]``.
    """
    if name_or_template is None or name_or_template == "":
        return None
    known = PROMPT_TEMPLATES.get(name_or_template.lower())
    if known is not None:
        return known
    if name_or_template.count(SLOT) != 1:
        raise ValueError(
            f"prompt {name_or_template!r} is neither a known template "
            f"({', '.join(PROMPT_TEMPLATES)}) nor a string with exactly one {SLOT} slot"
        )
    return name_or_template


def apply_prompt(template: str | None, sentence: str) -> str:
    """Put ``sentence`` into the ``[X]`` slot of ``template`` (identity when no template)."""
    if template is None:
        return sentence
    return template.replace(SLOT, sentence)
