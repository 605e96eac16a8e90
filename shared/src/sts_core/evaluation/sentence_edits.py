"""Edits of the test sentences before encoding, as some papers' evaluation scripts do.

Only for reproducing a paper's numbers: the benchmark's sentences are scored as they are
by default, and a table made with an edit should say so (the STS report records it).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SENTENCE_EDITS", "check_sentence_edit", "pcc_tuning_edit"]


def pcc_tuning_edit(sentence: str) -> str:
    """The Pcc-tuning evaluation script's edit (``code/evaluation.py`` of
    ZBWpro/Pcc-tuning, applied with a prompt template): a sentence not ending in ``.``,
    ``?``, ``"`` or ``'`` gets a final ``.``; every ``"`` becomes ``'``; a final ``?``
    becomes ``.``."""
    if sentence and sentence[-1] not in ".?\"'":
        sentence += "."
    sentence = sentence.replace('"', "'")
    if sentence.endswith("?"):
        sentence = sentence[:-1] + "."
    return sentence


SENTENCE_EDITS: dict[str, Callable[[str], str]] = {"pcc-tuning": pcc_tuning_edit}


def check_sentence_edit(name: str | None) -> Callable[[str], str] | None:
    """The edit called ``name`` (None for none / empty); ValueError for an unknown name."""
    if name is None or name in ("", "none"):
        return None
    if name not in SENTENCE_EDITS:
        raise ValueError(
            f"unknown sentence edit {name!r}; choose none or {', '.join(SENTENCE_EDITS)}"
        )
    return SENTENCE_EDITS[name]
