"""The parser of ``parser`` (spaCy or stanza) not installed: one line naming the extra
that installs it (``sts-sifter[spacy]``, ``sts-sifter[stanza]``) before any weights load,
with and without ``check_only``; a cache that holds every sentence's positives needs no
parser."""

from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder
from pathlib import Path

import pytest

from sts_core.testing import load_train_script, one_line_error, write_fixture_recipe
from sts_sifter import METHOD
from sts_sifter.corpus import augment_corpus, clean_corpus
from sts_sifter.parsing import Token

pytestmark = pytest.mark.usefixtures("torch_one_thread")

PACKAGE = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
DEV = FIXTURES / "sts-dev.csv"
SENTENCES = [
    "The cat chased a mouse and the dog slept.",
    "A woman plays the piano in the hall.",
    "The man was not happy because it rained.",
    "Children eat apples and pears at school.",
    "A boy kicks the ball over the fence.",
]

main = load_train_script(PACKAGE).main


def write_recipe(tmp_path: Path, model: Path, **overrides: str) -> Path:
    corpus = tmp_path / "sentences.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    settings = {
        "train_format": "sentences",
        "augment_cache_dir": str(tmp_path / "cache"),
        "per_device_train_batch_size": "4",
        "max_steps": "1",
        "eval_strategy": "no",
        "save_strategy": "no",
        **overrides,
    }
    return write_fixture_recipe(
        tmp_path / "r.yaml",
        "sifter without its parser",
        model,
        corpus,
        DEV,
        tmp_path / "out",
        **settings,
    )


class NotInstalled(MetaPathFinder):
    """Imports of ``packages`` (and their modules) fail as if they were not installed."""

    def __init__(self, *packages: str) -> None:
        self.packages = packages

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.partition(".")[0] in self.packages:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def uninstall(monkeypatch: pytest.MonkeyPatch, *packages: str) -> None:
    """``packages`` not installed for this test (``None`` in ``sys.modules`` would not do:
    datasets imports spaCy when its name is there)."""
    for name in [n for n in sys.modules if n.partition(".")[0] in packages]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [NotInstalled(*packages), *sys.meta_path])


@pytest.fixture
def no_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading weights fails the test."""

    def build_model(self, model_args, config):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr(type(METHOD), "build_model", build_model)


@pytest.mark.usefixtures("no_weights")
@pytest.mark.parametrize("check_only", ["false", "true"])
@pytest.mark.parametrize("parser", ["spacy", "stanza"])
def test_a_parser_that_is_not_installed_names_its_extra_before_loading(
    parser: str,
    check_only: str,
    tiny_bert_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    uninstall(monkeypatch, parser)
    recipe = write_recipe(tmp_path, tiny_bert_dir, parser=parser)
    assert main(["--config", str(recipe), "--check_only", check_only]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert f"pip install 'sts-sifter[{parser}]'" in line and "augment_cache_dir" in line
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob("cache/*/chunk-*"))


class WordParser:
    """Stands in for spaCy when filling the cache: each word hangs from the first."""

    name = "spacy"

    def parse(self, texts: list[str]) -> list[list[list[Token]]]:
        return [[self.sentence(text)] for text in texts]

    @staticmethod
    def sentence(text: str) -> list[Token]:
        words = text.split()
        return [
            Token(word, "NOUN", 0 if i == 0 else 1, "root" if i == 0 else "nsubj")
            for i, word in enumerate(words)
        ]


@pytest.mark.parametrize("check_only", ["true", "false"])
def test_a_cache_that_holds_every_sentence_needs_no_parser(
    check_only: str,
    tiny_bert_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    kept, _ = clean_corpus(SENTENCES)
    augment_corpus(kept, WordParser(), cache_dir=tmp_path / "cache", progress=False)
    uninstall(monkeypatch, "spacy")
    recipe = write_recipe(tmp_path, tiny_bert_dir)
    assert main(["--config", str(recipe), "--check_only", check_only]) == 0, capsys.readouterr()


@pytest.mark.usefixtures("no_weights")
@pytest.mark.parametrize(
    ("parser", "expected"),
    [
        ("spacy:no_such_pipeline", "spaCy pipeline 'no_such_pipeline' is not installed"),
        ("stanza:{tmp}/no-stanza-models", "stanza's models folder"),
    ],
)
def test_a_parser_whose_models_are_missing_is_one_line_before_loading(
    parser: str,
    expected: str,
    tiny_bert_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    pytest.importorskip(parser.partition(":")[0])
    spec = parser.format(tmp=tmp_path)
    recipe = write_recipe(tmp_path, tiny_bert_dir, parser=spec, augment_workers="2")
    assert main(["--config", str(recipe)]) == 2  # worker processes would each fail
    line = one_line_error(capsys.readouterr().err)
    assert expected in line and "augment_cache_dir" in line
    assert not list(tmp_path.glob("cache/*/chunk-*"))
