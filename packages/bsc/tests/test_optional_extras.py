"""A shuffle that needs faiss (sts-core's ``faiss`` extra) on a machine without it: one
line naming the extra before any weights load, with and without ``check_only``; the
shuffles without faiss still run there."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sts_core.testing import load_train_script, one_line_error, write_fixture_recipe
from sts_core.training import TrainingRun

pytestmark = pytest.mark.usefixtures("torch_one_thread")

PACKAGE = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
TRAIN = FIXTURES / "sts-train.csv"
DEV = FIXTURES / "sts-dev.csv"
FAISS_SHUFFLES = ("example", "clusters", "neighbours")  # k-NN search, k-means

main = load_train_script(PACKAGE).main


@pytest.fixture
def no_faiss(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import faiss`` fails, and loading weights fails the test."""

    def no_weights(self):
        raise AssertionError("the weights were loaded")

    monkeypatch.setitem(sys.modules, "faiss", None)
    monkeypatch.setattr(TrainingRun, "build_model", no_weights)


def write_recipe(tmp_path: Path, model: Path, shuffle: str) -> Path:
    return write_fixture_recipe(
        tmp_path / "r.yaml",
        "bsc without faiss",
        model,
        TRAIN,
        DEV,
        tmp_path / "out",
        loss="bsc",
        score_range="[0, 5]",
        shuffle=shuffle,
    )


@pytest.mark.usefixtures("no_faiss")
@pytest.mark.parametrize(
    ("shuffle", "flags"),
    [(s, []) for s in FAISS_SHUFFLES] + [("example", ["--check_only", "true"])],
)
def test_a_faiss_shuffle_without_faiss_names_the_extra_before_loading(
    shuffle: str,
    flags: list[str],
    tiny_bert_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    recipe = write_recipe(tmp_path, tiny_bert_dir, shuffle)
    assert main(["--config", str(recipe), *flags]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert f"shuffle {shuffle!r}" in line and "pip install 'sts-core[faiss]'" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("no_faiss")
def test_the_word_shuffle_needs_no_faiss(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    recipe = write_recipe(tmp_path, tiny_bert_dir, "words")
    assert main(["--config", str(recipe), "--check_only", "true"]) == 0
    assert "check_only: the inputs are usable" in capsys.readouterr().out
