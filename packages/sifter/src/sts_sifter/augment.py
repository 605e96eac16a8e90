"""SIFTER's two positives of a sentence X (§3.2): Y = X followed by its backbone, Z = X
without its articles and conjunctions.

The backbone (the paper: "the first two layers of the syntax tree") is the root of each
parsed sentence and those of its direct dependents whose relation is a *core* one —
subject, object, copula, passive auxiliary, verb particle, negation (with its auxiliary:
"do not") (``BACKBONE_RELATIONS``;
``relations="all"`` keeps every direct dependent but punctuation) — written in text order
as a short sentence with a capital and a full stop: "I like this apple because it looks so
fresh." → "I like apple.". A sentence whose root has no subject and no object (a title, a
fragment) has no usable backbone: then Y = X, and the count is reported.

Deletion removes the words whose part of speech is listed (``DELETABLE``): articles
(``article``: ``DET`` with ``PronType=Art``, or a/an/the), coordinating (``CCONJ``) and
subordinating (``SCONJ``) conjunctions. A sentence with nothing to delete gives Z = X.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sts_sifter.parsing import Sentence, Token, sentence_text

#: the direct dependents of the root kept in the backbone (UD and spaCy's ClearNLP labels)
SUBJECTS = frozenset({"nsubj", "nsubj:pass", "nsubjpass", "csubj", "csubj:pass", "csubjpass"})
OBJECTS = frozenset({"obj", "dobj", "iobj", "dative", "attr", "acomp", "oprd", "xcomp"})
BACKBONE_RELATIONS = (
    SUBJECTS
    | OBJECTS
    | frozenset({"cop", "aux:pass", "auxpass", "expl", "neg", "compound:prt", "prt"})
)
NEGATIONS = frozenset({"not", "n't", "never", "no"})
DELETABLE = ("article", "CCONJ", "SCONJ")
RELATION_CHOICES = ("core", "all")


@dataclass(frozen=True)
class AugmentOptions:
    """How Y and Z are made.

    Attributes:
        relations: ``core`` (the root's subject, object, copula, passive auxiliary,
            particle and negation: :data:`BACKBONE_RELATIONS`) or ``all`` (every direct
            dependent of the root except punctuation).
        delete: what Z drops: ``article`` and universal POS tags (default articles,
            ``CCONJ``, ``SCONJ``).
    """

    relations: str = "core"
    delete: tuple[str, ...] = DELETABLE

    def __post_init__(self) -> None:
        if self.relations not in RELATION_CHOICES:
            raise ValueError(
                f"backbone relations {self.relations!r}: choose {' or '.join(RELATION_CHOICES)}"
            )
        if not self.delete:
            raise ValueError("delete lists nothing: Z would equal X (name article, CCONJ, …)")


@dataclass
class Augmented:
    """X's two positives and what happened: ``has_backbone`` (else Y = X), ``deleted``
    (words removed for Z; 0: Z = X)."""

    sentence: str
    with_backbone: str
    without_function_words: str
    has_backbone: bool
    deleted: int

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def backbone_tokens(tokens: Sentence, relations: str) -> list[Token]:
    """The root and its backbone dependents in text order; empty when the root has no
    subject and no object (no usable backbone)."""
    root = next((i for i, token in enumerate(tokens, start=1) if token.head == 0), None)
    if root is None:
        return []
    kept, auxiliaries = [root], []
    found_argument = negated = False
    for index, token in enumerate(tokens, start=1):
        if token.head != root:
            continue
        relation = token.deprel.lower()
        found_argument |= relation in SUBJECTS or relation in OBJECTS
        if keeps(token, relation, relations):
            kept.append(index)
            negated |= token.text.lower() in NEGATIONS
        elif relation == "aux":
            auxiliaries.append(index)
    if not found_argument:
        return []
    if negated:  # "I don't like it" → "I don't like it.", not "I n't like it."
        kept += auxiliaries
    return [tokens[i - 1] for i in sorted(set(kept))]


def keeps(token: Token, relation: str, relations: str) -> bool:
    """Whether a direct dependent of the root belongs to the backbone."""
    if relation == "punct" or token.upos == "PUNCT":
        return False
    if relations == "core":
        return relation in BACKBONE_RELATIONS or (
            relation in {"advmod", "det"} and token.text.lower() in NEGATIONS
        )
    return True  # "all" (AugmentOptions checks the choice)


def write_backbone(tokens: Sequence[Token]) -> str:
    """A short sentence: the words in order, the first capitalised, a full stop."""
    text = " ".join(token.text for token in tokens).replace(" n't", "n't")
    ending = "" if text.endswith((".", "!", "?")) else "."  # "He married Smt."
    return text[:1].upper() + text[1:] + ending


def backbone_text(sentences: Iterable[Sentence], relations: str = "core") -> str:
    """The backbones of a text's sentences, one short sentence each ('' when none)."""
    parts = [backbone_tokens(tokens, relations) for tokens in sentences]
    return " ".join(write_backbone(part) for part in parts if part)


def deletable(token: Token, delete: Sequence[str]) -> bool:
    return (token.article and "article" in delete) or token.upos in delete


def without_function_words(
    sentences: Iterable[Sentence], delete: Sequence[str] = DELETABLE
) -> tuple[str, int]:
    """The text without the deletable words (spacing kept; a capital moves to the new
    first word) and how many were removed."""
    written, removed = [], 0
    for tokens in sentences:
        kept = [token for token in tokens if not deletable(token, delete)]
        removed += len(tokens) - len(kept)
        if not kept:
            continue
        text = sentence_text(kept)
        if tokens[0].text[:1].isupper() and kept[0] is not tokens[0]:
            text = text[:1].upper() + text[1:]
        written.append(text)
    return " ".join(written), removed


def augment(text: str, sentences: list[Sentence], options: AugmentOptions) -> Augmented:
    """Y and Z of ``text`` from its parse."""
    backbone = backbone_text(sentences, options.relations)
    reduced, removed = without_function_words(sentences, options.delete)
    return Augmented(
        sentence=text,
        with_backbone=f"{text} {backbone}" if backbone else text,
        without_function_words=reduced if removed and reduced else text,
        has_backbone=bool(backbone),
        deleted=removed if reduced else 0,
    )


@dataclass
class AugmentReport:
    """Counts over a corpus: sentences, without a usable backbone (Y = X), with nothing to
    delete (Z = X), read from the cache."""

    sentences: int = 0
    no_backbone: int = 0
    nothing_deleted: int = 0
    cached: int = 0
    parser: str = ""
    examples: list[dict[str, object]] = field(default_factory=list)

    def add(self, item: Augmented) -> None:
        self.sentences += 1
        self.no_backbone += not item.has_backbone
        self.nothing_deleted += item.deleted == 0
        if len(self.examples) < 3:
            self.examples.append(item.to_dict())

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)

    def __str__(self) -> str:
        return (
            f"{self.sentences} sentences parsed by {self.parser} ({self.cached} from the "
            f"cache): {self.no_backbone} without a usable backbone (Y = X), "
            f"{self.nothing_deleted} with nothing to delete (Z = X)"
        )
