"""``sts_core.mining.mine_hard_negatives`` against sentence-transformers'
``util.mine_hard_negatives`` on real pairs of the data folder, setting by setting, with
both search backends: the same rows in the same order, the same random draws after
``random.seed``, the same scores. Both sides embed with the same all-MiniLM-L6-v2
(``SentenceTransformer``) so what is compared is the selection; the project's own encoder
on the same weights is compared once at the end (its last float bits differ).

The pairs: STS-B train pairs scored 4 or more (repeated anchors, not adjacent), and SNLI
dev (premise, entailed hypothesis) pairs (repeated anchors, adjacent). Needs STS_DATA_DIR
and STS_MODELS_DIR."""

from __future__ import annotations

import csv
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from datasets import Dataset

from sts_core.encoder import SentenceEncoder
from sts_core.mining import mine_hard_negatives

pytestmark = [pytest.mark.real_data, pytest.mark.real_model, pytest.mark.slow]
st = pytest.importorskip("sentence_transformers", reason="the peer to compare with")

SETTINGS: list[dict[str, Any]] = [
    {},
    {"num_negatives": 2, "range_min": 2, "range_max": 12},
    {"relative_margin": 0.05},
    {"absolute_margin": 0.02, "max_score": 0.9, "min_score": 0.3},
    {"sampling_strategy": "random"},
    {"sampling_strategy": "random", "range_min": 1, "relative_margin": 0.1, "num_negatives": 5},
    {"output_format": "n-tuple", "output_scores": True, "num_negatives": 2},
    {"output_scores": True, "range_max": 4},
]


def stsb_pairs(data: Path) -> list[tuple[str, str]]:
    lines = (data / "senteval/STS/STSBenchmark/sts-train.csv").read_text(encoding="utf-8")
    fields = [line.split("\t") for line in lines.splitlines()]
    return [(f[5], f[6]) for f in fields if float(f[4]) >= 4]


def snli_pairs(data: Path, rows: int = 600) -> list[tuple[str, str]]:
    with (data / "nli/snli-devtest-raw/snli_1.0_dev.csv").open(encoding="utf-8") as file:
        found = [(r["sentence1"], r["sentence2"]) for r in csv.DictReader(file)
                 if r["label"] == "entailment"]  # fmt: skip
    return found[:rows]


def without_own_texts(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pairs whose anchor is no pair's positive: there the peer proposes the anchor's
    own text as its negative, and we do not (the one difference, tested apart)."""
    positives = {positive for _, positive in pairs}
    return [(a, p) for a, p in pairs if a not in positives]


def as_dataset(pairs: list[tuple[str, str]]) -> Dataset:
    return Dataset.from_dict({"query": [a for a, _ in pairs], "answer": [p for _, p in pairs]})


class Embeddings:
    """The sentence-transformers model, each text embedded once by its ``encode`` and
    kept (both sides get the same vectors; the peer asks through ``encode_document`` and
    ``encode_query``, which are ``encode`` for a model without prompts); the rest (its
    ``similarity``, ``device`` …) is the model's."""

    def __init__(self, model: Any) -> None:
        self.model, self.seen = model, {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def encode(self, texts: list[str], batch_size: int = 32, show_progress_bar: bool = False,
               normalize_embeddings: bool = False, convert_to_numpy: bool = True,
               **unused: Any) -> Any:  # fmt: skip
        assert normalize_embeddings and not any(unused.get(n) for n in ("pool", "prompt"))
        new = [text for text in dict.fromkeys(texts) if text not in self.seen]
        if new:
            vectors = self.model.encode(new, batch_size=batch_size, normalize_embeddings=True)
            self.seen.update(zip(new, vectors, strict=True))
        return np.stack([self.seen[text] for text in texts])

    encode_document = encode_query = encode


@pytest.fixture(scope="module")
def peer_model(minilm_dir: Path) -> Any:
    return st.SentenceTransformer(str(minilm_dir), device="cpu")


@pytest.fixture(scope="module")
def shared_embeddings(peer_model: Any) -> Embeddings:
    return Embeddings(peer_model)


@pytest.fixture(scope="module", params=["stsb", "snli"])
def pairs(request: pytest.FixtureRequest, sts_data_dir: Path) -> Dataset:
    read = stsb_pairs if request.param == "stsb" else snli_pairs
    found = without_own_texts(read(sts_data_dir))
    anchors = [a for a, _ in found]
    repeated = {a for a in anchors if anchors.count(a) > 1}
    assert len(found) > 500 and len(repeated) >= 20
    if request.param == "stsb":  # repeated anchors whose rows are not adjacent
        assert any(anchors[i] in anchors[: i - 1] and anchors[i - 1] != anchors[i]
                   for i in range(1, len(anchors)))  # fmt: skip
    return as_dataset(found)


def rows(dataset: Dataset) -> list[tuple[Any, ...]]:
    names = [name for name in dataset.column_names if name != "scores"]
    return list(zip(*(dataset[name] for name in names), strict=True))


def tie_swaps(ours: Dataset, theirs: Dataset) -> int:
    """The negatives that differ between two outputs of the same rows, each where the two
    candidates' cosines tie to 1e-6 (torch's ``topk`` orders exact ties its own way, we
    by corpus position; a random draw of a position then takes the other text); an
    AssertionError for any other difference."""
    assert len(ours) == len(theirs)
    swaps = 0
    for row, (mine, peer) in enumerate(zip(rows(ours), rows(theirs), strict=True)):
        assert mine[:2] == peer[:2], f"row {row}: {mine[:2]} against {peer[:2]}"
        scores = zip(ours["scores"][row][1:], theirs["scores"][row][1:], strict=True)
        for (a, b), (x, y) in zip(zip(mine[2:], peer[2:], strict=True), scores, strict=True):
            assert a == b or abs(x - y) <= 1e-6, f"row {row}: {a!r} ({x}) against {b!r} ({y})"
            swaps += a != b
    return swaps


def peer_mine(pairs: Dataset, model: Any, seed: int, **settings: Any) -> Dataset:
    random.seed(seed)
    return st.util.mine_hard_negatives(pairs, model, verbose=False, **settings)


@pytest.mark.parametrize(
    "settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "defaults"
)
@pytest.mark.parametrize("use_faiss", [False, True], ids=["exact", "faiss"])
def test_the_rows_equal_the_peers_for_every_setting_and_search(
    pairs: Dataset, shared_embeddings: Embeddings, settings: dict, use_faiss: bool
) -> None:
    """Every row in order but for candidates whose cosines tie (at most 0.5% of the rows;
    each such swap checked to be a tie), the column names, the scores within float32
    rounding; random draws are the peer's after
    ``random.seed(7)``, both with ``seed=7`` and with the global state (``seed=None``)."""
    if use_faiss:
        pytest.importorskip("faiss", reason="the faiss search needs sts-core[faiss]")
    settings = {**settings, "use_faiss": use_faiss, "output_scores": True}
    theirs = peer_mine(pairs, shared_embeddings, seed=7, **settings)
    ours = mine_hard_negatives(pairs, shared_embeddings, verbose=False, seed=7, **settings)
    assert ours.column_names == theirs.column_names
    assert np.allclose(ours["scores"], theirs["scores"], atol=1e-6)
    assert len(theirs) >= 400 and tie_swaps(ours, theirs) <= len(theirs) // 200
    if settings.get("sampling_strategy") == "random":
        random.seed(7)
        globally = mine_hard_negatives(pairs, shared_embeddings, verbose=False, **settings)
        assert rows(globally) == rows(ours)
        other = mine_hard_negatives(pairs, shared_embeddings, verbose=False, seed=8, **settings)
        assert rows(other) != rows(ours)  # the seed is used


def test_the_peer_proposes_an_anchors_own_text_and_we_do_not(
    sts_data_dir: Path, shared_embeddings: Embeddings
) -> None:
    """The one difference: STS-B sentences that are one pair's anchor and another's
    positive. The peer gives such an anchor its own text as a negative; we never do, and
    elsewhere the rows are the same."""
    pairs = as_dataset(stsb_pairs(sts_data_dir))
    theirs_set = peer_mine(pairs, shared_embeddings, seed=0)
    ours_set = mine_hard_negatives(pairs, shared_embeddings, verbose=False)
    assert ours_set.column_names == theirs_set.column_names == ["query", "answer", "negative"]
    theirs, ours = rows(theirs_set), rows(ours_set)
    own = {anchor for anchor, _, negative in theirs if negative == anchor}
    assert len(own) >= 20 and not any(anchor == negative for anchor, _, negative in ours)
    assert [r for r in ours if r[0] not in own] == [r for r in theirs if r[0] not in own]


def test_the_projects_encoder_differs_only_in_near_ties(
    sts_data_dir: Path, minilm_dir: Path, shared_embeddings: Embeddings
) -> None:
    """Our encoder on the same weights (SNLI pairs): embeddings within 1e-5 of the peer's;
    with a relative margin the rows are the peer's but for at most 0.5% (candidates whose
    cosines tie to the last float bits swap, or cross the margin)."""
    pairs = as_dataset(without_own_texts(snli_pairs(sts_data_dir)))
    encoder = SentenceEncoder.from_pretrained(minilm_dir).eval()
    texts = list(dict.fromkeys([*pairs["query"], *pairs["answer"]]))
    ours_vectors = encoder.encode(texts, batch_size=32, normalize=True, show_progress_bar=False)
    theirs_vectors = shared_embeddings.encode(texts, normalize_embeddings=True)
    assert np.abs(np.asarray(ours_vectors) - theirs_vectors).max() < 1e-5
    theirs = rows(peer_mine(pairs, shared_embeddings, seed=0, relative_margin=0.05))
    ours = rows(mine_hard_negatives(pairs, encoder, verbose=False, relative_margin=0.05))
    differing = sum(a != b for a, b in zip(ours, theirs, strict=True))
    assert len(ours) == len(theirs) and differing <= len(theirs) // 200
