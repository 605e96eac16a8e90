"""``mine_hard_negatives`` as sentence-transformers' function, checked without the peer or a
model (its real-data comparison: ``test_mining_peer.py``): the columns it picks and names,
the output's order and formats, the peer's random draws, the window counted over repeated
rows, the parameters not built, the encoder call of a ``SentenceTransformer``, ``verbose``."""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest
from datasets import Dataset

from sts_core.mining import (
    NOT_BUILT,
    MiningSettings,
    SearchSettings,
    choose_negatives,
    mine,
    mine_hard_negatives,
    pair_names,
    random_positions,
)
from sts_core.mining_cli import score_columns


class TableEncoder:
    """``encode`` of the vectors written in ``vectors`` (text → unit vector)."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def encode(self, texts: list[str], **options: object) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def unit(angle_degrees: float) -> list[float]:
    angle = np.deg2rad(angle_degrees)
    return [float(np.cos(angle)), float(np.sin(angle))]


#: anchors a (0°) and b (90°), their positives close by, candidates at steps of 10°
VECTORS = {
    "a": unit(0), "pa1": unit(5), "pa2": unit(8), "b": unit(90), "pb": unit(85),
    "c10": unit(10), "c20": unit(20), "c30": unit(30), "c60": unit(60), "c70": unit(70),
}  # fmt: skip
EXTRA = ["c10", "c20", "c30", "c60", "c70"]


def table(rows: list[tuple[str, str]], names: tuple[str, str] = ("q", "d")) -> Dataset:
    return Dataset.from_dict({names[0]: [a for a, _ in rows], names[1]: [p for _, p in rows]})


def test_rows_come_grouped_by_anchor_in_order_of_first_appearance() -> None:
    """The peer's order: a's pairs together though b's row is between them; a repeated row
    is merged; each pair's negatives best first."""
    rows = [("a", "pa1"), ("b", "pb"), ("a", "pa2"), ("a", "pa1")]
    mined = mine_hard_negatives(table(rows), TableEncoder(VECTORS), corpus=EXTRA,
                                num_negatives=2, verbose=False)  # fmt: skip
    assert mined.column_names == ["q", "d", "negative"]
    assert list(zip(mined["q"], mined["d"], mined["negative"], strict=True)) == [
        ("a", "pa1", "c10"), ("a", "pa1", "c20"), ("a", "pa2", "c10"), ("a", "pa2", "c20"),
        ("b", "pb", "c70"), ("b", "pb", "c60"),
    ]  # fmt: skip


def test_the_window_counts_an_anchors_repeated_rows_as_the_peer_does() -> None:
    """``max_positives`` is the most rows of one anchor, repeated rows counted (the peer's
    groupby count): 3 rows of a, so range_max = 0 + 1 + 3 and 4 + 3 candidates searched."""
    rows = [("a", "pa1"), ("a", "pa1"), ("a", "pa2"), ("b", "pb")]
    _, report = mine(table(rows), TableEncoder(VECTORS), MiningSettings(num_negatives=1),
                     corpus=EXTRA)  # fmt: skip
    assert report.range_max == 4 and report.candidates_per_anchor == 7
    assert report.duplicate_pairs == 1 and report.pairs == 3


def test_n_tuple_keeps_the_pairs_that_found_every_negative_and_scores_list_them() -> None:
    rows = [("a", "pa1"), ("b", "pb")]
    settings = {"num_negatives": 2, "max_score": 0.9, "verbose": False, "corpus": EXTRA}
    mined = mine_hard_negatives(table(rows), TableEncoder(VECTORS), output_format="n-tuple",
                                output_scores=True, **settings)  # fmt: skip
    # a: c10 (cos 10° ≈ 0.985) and c20 (0.940) are above 0.9 → c30, c60; b: only c70 (0.940)
    # is above → c60, c30
    assert mined.column_names == ["q", "d", "negative_1", "negative_2", "scores"]
    assert mined["negative_1"] == ["c30", "c60"] and mined["negative_2"] == ["c60", "c30"]
    expected = [[np.cos(np.deg2rad(d)) for d in row] for row in ([5, 30, 60], [5, 30, 60])]
    assert np.allclose(mined["scores"], expected, atol=1e-6)
    narrow = {**settings, "max_score": 0.99, "min_score": 0.95}  # a: c10 only; b: none
    short = mine_hard_negatives(table(rows), TableEncoder(VECTORS), output_format="n-tuple",
                                **narrow)  # fmt: skip
    assert len(short) == 0  # a found one negative of two: left out, as the peer's
    triplet = mine_hard_negatives(table(rows), TableEncoder(VECTORS), output_scores=True,
                                  **narrow)  # fmt: skip
    assert list(zip(triplet["q"], triplet["negative"], strict=True)) == [("a", "c10")]
    assert np.allclose(triplet["scores"], [[np.cos(np.deg2rad(5)), np.cos(np.deg2rad(10))]])


def test_random_positions_are_the_peers_draws_for_a_seed_or_the_global_state() -> None:
    """Per row, ``sample(range(max(found, count)), count)`` sorted, from ``Random(seed)``
    (the peer's draws after ``random.seed(seed)``) or from the ``random`` module itself."""
    best = np.array([[0.9, 0.8, 0.7, 0.6, 0.5], [0.9, 0.8, -np.inf, -np.inf, -np.inf],
                     [0.4, 0.3, 0.2, -np.inf, -np.inf]], dtype=np.float32)  # fmt: skip
    expected_rng = random.Random(11)
    expected = [sorted(expected_rng.sample(range(max(found, 3)), k=3)) for found in (5, 2, 3)]
    assert random_positions(best, 3, seed=11).tolist() == expected
    random.seed(11)
    assert random_positions(best, 3, seed=None).tolist() == expected
    assert random.random() == expected_rng.random()  # the global state moved as the peer's
    assert random_positions(best, 3, seed=12).tolist() != expected


def test_random_sampling_pads_a_window_wider_than_the_candidates_found() -> None:
    """A corpus smaller than the window: the draw covers the window's width, as the peer's
    −inf padding does, and a position past the candidates gives no negative."""
    scores = np.array([[0.9, 0.8]], dtype=np.float32)
    settings = MiningSettings(num_negatives=2, range_max=5, sampling_strategy="random", seed=0)
    best, positions = choose_negatives(scores, np.array([[7, 8]]), settings, 5)
    draw = sorted(random.Random(0).sample(range(2), k=2))
    assert positions.tolist() == [[[7, 8][p] for p in draw]]
    wide = MiningSettings(num_negatives=3, range_max=5, sampling_strategy="random", seed=0)
    best, positions = choose_negatives(scores, np.array([[7, 8]]), wide, 5)
    assert positions.tolist() == [[7, 8, -1]] and np.isneginf(best[0, 2])


@pytest.mark.parametrize(
    ("given", "names", "mapping"),
    [
        ((None, None, None), ("q", "d"), {"sentence1": "q", "sentence2": "d"}),
        (("d", "q", None), ("d", "q"), {"sentence1": "d", "sentence2": "q"}),
        (("nope", "also", None), ("q", "d"), {"sentence1": "q", "sentence2": "d"}),
        ((None, None, {"score": "s"}), ("q", "d"),
         {"score": "s", "sentence1": "q", "sentence2": "d"}),
        ((None, None, {"sentence1": "d", "sentence2": "q"}), ("d", "q"),
         {"sentence1": "d", "sentence2": "q"}),
    ],
)  # fmt: skip
def test_the_pair_is_the_named_columns_else_the_first_two(given, names, mapping) -> None:
    dataset = Dataset.from_dict({"q": ["x"], "d": ["y"], "s": [1.0]})
    assert pair_names(dataset, *given) == (names, mapping)


def test_one_column_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"needs two columns \(anchor, positive\), it has \['q'\]"):
        pair_names(Dataset.from_dict({"q": ["x"]}), None, None, None)


@pytest.mark.parametrize("name", list(NOT_BUILT))
def test_each_parameter_not_built_is_refused_by_name(name: str) -> None:
    value = {"include_positives": True, "use_multi_process": True}.get(name, "x")
    with pytest.raises(ValueError, match=f"^mine_hard_negatives: {name} is not built"):
        mine_hard_negatives(table([("a", "pa1")]), TableEncoder(VECTORS), **{name: value})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"output_format": "labeled-pair"}, "output_format must be one of triplet, n-tuple"),
        ({"batch_size": 0}, "batch_size must be a positive integer, got 0"),
        ({"faiss_batch_size": True}, "faiss_batch_size must be a positive integer"),
        ({"sampling_strategy": "best"}, "sampling_strategy must be one of top, random"),
    ],
)
def test_bad_settings_are_refused_before_encoding(options: dict, message: str) -> None:
    class NoEncoding:
        def encode(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("encoded before the check")

    with pytest.raises(ValueError, match=message):
        mine_hard_negatives(table([("a", "pa1")]), NoEncoding(), **options)


def test_a_sentence_transformers_model_is_asked_for_normalised_numpy_embeddings() -> None:
    class PeerLike:
        calls: list[dict] = []

        def encode(self, sentences: list[str], batch_size: int = 32,
                   show_progress_bar: bool | None = None, normalize_embeddings: bool = False,
                   convert_to_numpy: bool = True) -> np.ndarray:  # fmt: skip
            self.calls.append({"batch_size": batch_size, "normalize": normalize_embeddings,
                               "numpy": convert_to_numpy, "bar": show_progress_bar})  # fmt: skip
            return np.array([VECTORS[s] for s in sentences], dtype=np.float32)

    model = PeerLike()
    mined = mine_hard_negatives(table([("a", "pa1")]), model, corpus=EXTRA, batch_size=7)
    assert len(mined) == 3
    assert model.calls == [{"batch_size": 7, "normalize": True, "numpy": True, "bar": False}] * 2


def test_verbose_logs_the_report_at_info_and_quiet_at_debug(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="sts_core.mining"):
        mine_hard_negatives(table([("a", "pa1")]), TableEncoder(VECTORS), corpus=EXTRA)
        assert caplog.messages and all(m.startswith("mining: ") for m in caplog.messages)
        caplog.clear()
        mine_hard_negatives(table([("a", "pa1")]), TableEncoder(VECTORS), corpus=EXTRA,
                            verbose=False)  # fmt: skip
        assert caplog.messages == []
    with caplog.at_level(logging.DEBUG, logger="sts_core.mining"):
        mine_hard_negatives(table([("a", "pa1")]), TableEncoder(VECTORS), corpus=EXTRA,
                            verbose=False)  # fmt: skip
        assert caplog.messages


def test_a_small_faiss_batch_size_searches_in_chunks_of_it() -> None:
    rows = [("a", "pa1"), ("b", "pb")]
    _, one = mine(table(rows), TableEncoder(VECTORS), corpus=EXTRA,
                  search_settings=SearchSettings(faiss_batch_size=1))  # fmt: skip
    _, whole = mine(table(rows), TableEncoder(VECTORS), corpus=EXTRA)
    assert one.chunk_rows == 1 and whole.chunk_rows == 16384  # the peer's default


def test_sts_mine_writes_the_scores_as_two_columns() -> None:
    mined = Dataset.from_dict({"anchor": ["a"], "positive": ["p"], "negative": ["n"],
                               "scores": [[0.75, 0.5]]})  # fmt: skip
    written = score_columns(mined)
    assert written.column_names == ["anchor", "positive", "negative", "positive_score",
                                    "negative_score"]  # fmt: skip
    assert written["positive_score"] == [0.75] and written["negative_score"] == [0.5]
    plain = mined.remove_columns("scores")
    assert score_columns(plain) is plain


def test_the_parameters_and_defaults_are_the_peers_in_its_order() -> None:
    """Every parameter of sentence-transformers' ``mine_hard_negatives`` but the two it
    deprecated, in its order, with its default; ours after them, keyword-only."""
    import inspect

    ours = inspect.signature(mine_hard_negatives).parameters
    st = pytest.importorskip("sentence_transformers.util", reason="the peer to compare with")
    theirs = inspect.signature(st.mine_hard_negatives).parameters
    peer = [(n, p.default) for n, p in theirs.items() if n not in ("as_triplets", "margin")]
    assert [(n, p.default) for n, p in ours.items()][: len(peer)] == peer
    extra = {n: p.default for n, p in list(ours.items())[len(peer) :]}
    assert extra == {"seed": None, "positive_threshold": None, "memory_mb": 256, "columns": None}
    assert all(ours[n].kind is inspect.Parameter.KEYWORD_ONLY for n in extra)


def test_the_settings_given_reach_the_selection() -> None:
    """``anchor_column_name``, ``positive_column_name``, ``range_max``, ``seed`` and
    ``positive_threshold`` given to the function change what it mines."""
    rows = [("a", "pa1"), ("b", "pb")]
    plain = mine_hard_negatives(table(rows), TableEncoder(VECTORS), corpus=EXTRA, verbose=False)
    named = mine_hard_negatives(table(rows), TableEncoder(VECTORS), "d", "q", corpus=EXTRA,
                                verbose=False)  # fmt: skip
    assert named.column_names == ["d", "q", "negative"] and named["d"][0] == "pa1"
    short = mine_hard_negatives(table(rows), TableEncoder(VECTORS), corpus=EXTRA, range_max=1,
                                num_negatives=1)  # fmt: skip
    assert short["negative"] == ["c10", "c70"] and len(plain) == 6
    draws = {
        tuple(mine_hard_negatives(table(rows), TableEncoder(VECTORS), corpus=EXTRA, seed=seed,
                                  sampling_strategy="random", range_max=5)["negative"])
        for seed in range(6)
    }  # fmt: skip
    assert len(draws) > 1
    scored = Dataset.from_dict({"q": ["a", "b"], "d": ["pa1", "pb"], "score": [0.4, 0.9]})
    both = mine_hard_negatives(scored, TableEncoder(VECTORS), corpus=EXTRA, positive_threshold=0.3)
    assert set(both["q"]) == {"a", "b"}  # the default threshold (0.9) keeps b only
    assert set(mine_hard_negatives(scored, TableEncoder(VECTORS), corpus=EXTRA)["q"]) == {"b"}


def test_a_scored_tables_positives_are_reported_first() -> None:
    labels = ["entailment", "contradiction", "entailment"]
    scored = Dataset.from_dict({"q": ["a", "b", "a"], "d": ["pa1", "pb", "pa2"], "label": labels})
    triplets, report = mine(scored, TableEncoder(VECTORS), MiningSettings(num_negatives=1),
                            corpus=EXTRA, columns={"sentence1": "q", "sentence2": "d"})  # fmt: skip
    assert set(triplets["anchor"]) == {"a"} and report.triplets == 2  # NLI names: entailment
    assert report.positives is not None and report.positives.left_out == 1
    assert report.lines()[0] == (
        "positives: the pairs scored at or above 2 (the highest score of the table, the "
        "default); 1 of 3 rows scored below it are left out"
    )
    numbers = Dataset.from_dict({"q": ["a", "b"], "d": ["pa1", "pb"], "score": [0.4, 0.9]})
    _, given = mine(numbers, TableEncoder(VECTORS), MiningSettings(positive_threshold=0.3),
                    corpus=EXTRA, columns={"sentence1": "q", "sentence2": "d"})  # fmt: skip
    assert given.positives is not None and given.positives.threshold == 0.3
    assert given.lines()[0] == (
        "positives: the pairs scored at or above 0.3; 0 of 2 rows scored below it are left out"
    )


def test_a_threshold_without_scores_or_above_every_score_is_refused_in_words() -> None:
    from sts_core.mining import positive_rows

    plain = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"]})
    with pytest.raises(ValueError, match=(
        r"^positive_threshold: the pairs have no score or label column to compare with it "
        r"\(every pair is a positive\): leave it out, or name the score column$")):  # fmt: skip
        positive_rows(plain, 0.5)
    scored = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "score": [0.25]})
    with pytest.raises(ValueError, match=(
        r"^positive_threshold 0.5: no pair is scored at or above it \(the highest score is "
        r"0.25\)$")):  # fmt: skip
        positive_rows(scored, 0.5)


def test_embeddings_are_float32_whatever_the_encoder_returns() -> None:
    from sts_core.mining import embed

    class Float64:
        def encode(self, texts: list[str], **options: object) -> np.ndarray:
            return np.ones((len(texts), 2), dtype=np.float64)

    assert embed(Float64(), ["x", "y"], 4).dtype == np.float32


def test_unbuilt_formats_and_an_unnamed_numbers_column_are_refused_in_full() -> None:
    message = (
        r"^output_format must be one of triplet, n-tuple, got 'labeled-list' "
        r"\(sentence-transformers' labeled-pair and labeled-list are not built here\)$"
    )
    with pytest.raises(ValueError, match=message):
        mine(table([("a", "pa1")]), TableEncoder(VECTORS), output_format="labeled-list")
    numbered = Dataset.from_dict({"q": ["a"], "d": ["pa1"], "id": [3]})
    with pytest.raises(ValueError, match=r"map it with columns \(e\.g\. columns: \{score: id\}\)"):
        mine(numbered, TableEncoder(VECTORS))


def test_random_draws_fill_a_window_one_wider_than_the_candidates() -> None:
    """A window exactly one column wider than the candidates found: still padded (a draw
    of its last position gives no negative, never an index error)."""
    scores = np.array([[0.9, 0.8]], dtype=np.float32)
    for seed in range(8):
        settings = MiningSettings(num_negatives=3, range_max=3, sampling_strategy="random",
                                  seed=seed)  # fmt: skip
        best, positions = choose_negatives(scores, np.array([[7, 8]]), settings, 3)
        assert positions.tolist() == [[7, 8, -1]]


def test_the_defaults_reach_the_search_as_the_report_says(caplog) -> None:
    """The function's own defaults (batch 32, numpy, 16,384 anchors a chunk at most, 256
    MiB), read from the encoder's calls and the report's lines."""
    encoder = RecordingEncoder()
    with caplog.at_level(logging.INFO, logger="sts_core.mining"):
        mine_hard_negatives(table([("a", "pa1")]), encoder, corpus=EXTRA)
    assert {call["batch_size"] for call in encoder.calls} == {32}
    assert "search: exact (numpy), 5 candidates per anchor (range_max 4), 16384 anchors per " \
        "chunk" in caplog.messages[1]  # fmt: skip
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sts_core.mining"):
        mine_hard_negatives(table([("a", "pa1")]), encoder, corpus=EXTRA, faiss_batch_size=10**9)
    assert f"{mining_chunk_rows(6, 256)} anchors per chunk" in caplog.messages[1]


class RecordingEncoder(TableEncoder):
    def __init__(self) -> None:
        super().__init__(VECTORS)
        self.calls: list[dict] = []

    def encode(self, texts: list[str], **options: object) -> np.ndarray:
        self.calls.append(options)
        return super().encode(texts, **options)


def mining_chunk_rows(corpus: int, memory_mb: float) -> int:
    from sts_core.mining import chunk_rows

    return chunk_rows(corpus, memory_mb)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_given_window_and_seed_make_the_peers_draw(seed: int) -> None:
    """a's candidates best first: c10, c20, c30, c60, c70. With ``range_max=5`` the draw
    is ``Random(seed).sample(range(5), 3)`` of them, whatever the global state."""
    random.seed(1000 + seed)
    mined = mine_hard_negatives(table([("a", "pa1")]), TableEncoder(VECTORS), corpus=EXTRA,
                                sampling_strategy="random", range_max=5, seed=seed)  # fmt: skip
    ranked = ["c10", "c20", "c30", "c60", "c70"]
    expected = [ranked[p] for p in sorted(random.Random(seed).sample(range(5), k=3))]
    assert mined["negative"] == expected


def test_integer_classes_in_a_label_column_warn_with_the_nli_hint(caplog) -> None:
    labelled = Dataset.from_dict({"q": ["a", "b", "a"], "d": ["pa1", "pb", "pa2"],
                                  "label": [2, 1, 0]})  # fmt: skip
    with caplog.at_level(logging.WARNING):
        mine(labelled, TableEncoder(VECTORS), corpus=EXTRA,
             columns={"sentence1": "q", "sentence2": "d"})  # fmt: skip
    assert any("write the classes as names (entailment" in m for m in caplog.messages)
