"""The evaluation helpers at their edges, each against a value written here (found by the
mutation pass, ``tools/mutation.py``): Pcc-tuning's sentence edit and its names."""

from __future__ import annotations

import pytest

from sts_core.evaluation.sentence_edits import check_sentence_edit, pcc_tuning_edit


@pytest.mark.parametrize(
    ("sentence", "edited"),
    [
        ("A man plays X", "A man plays X."),
        ("A man plays.", "A man plays."),
        ('He said "go"', "He said 'go'"),
        ("Is it?", "Is it."),
        ("", ""),
    ],
)
def test_the_pcc_tuning_edit(sentence: str, edited: str) -> None:
    assert pcc_tuning_edit(sentence) == edited


def test_sentence_edits_by_name() -> None:
    assert check_sentence_edit(None) is None
    assert check_sentence_edit("") is None and check_sentence_edit("none") is None
    assert check_sentence_edit("pcc-tuning") is pcc_tuning_edit
    with pytest.raises(ValueError) as error:
        check_sentence_edit("NONE")
    assert str(error.value) == "unknown sentence edit 'NONE'; choose none or pcc-tuning"
