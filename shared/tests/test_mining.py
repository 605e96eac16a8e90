"""Hard-negative mining (``sts_core.mining``, ``sts-mine``): the peer's selection, ties by
the lower corpus position, a bounded search, what is removed and reported."""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset

from sts_core import mining
from sts_core.data import load_reference
from sts_core.data.scratch import scratch_folder
from sts_core.encoder import SentenceEncoder
from sts_core.mining import (
    MiningSettings,
    Pairs,
    SearchSettings,
    choose_negatives,
    chunk_rows,
    mine,
    mine_hard_negatives,
    pair_scores,
    top_candidates,
)
from sts_core.mining_cli import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

WORDS = (
    "man woman dog cat plays guitar runs field eats apple reads book car drives red blue "
    "small large child river boat sings song"
).split()


def made_up_pairs(count: int = 40, seed: int = 0) -> tuple[list[str], list[str]]:
    """Anchors and positives that share most of their words (so positives score high)."""
    rng = random.Random(seed)
    first, second = [], []
    for i in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 8))]
        first.append(f"anchor {i} " + " ".join(words))
        words[rng.randrange(len(words))] = rng.choice(WORDS)
        second.append(" ".join(words))
    return first, second


@pytest.fixture(scope="module")
def encoder(tiny_bert_dir: Path) -> SentenceEncoder:
    return SentenceEncoder.from_pretrained(tiny_bert_dir).eval()


@pytest.fixture(scope="module")
def pairs() -> Dataset:
    first, second = made_up_pairs()
    return Dataset.from_dict({"sentence1": first, "sentence2": second})


def triples(dataset: Dataset) -> list[tuple[str, str, str]]:
    return list(zip(dataset["anchor"], dataset["positive"], dataset["negative"], strict=True))


PEER_SETTINGS = [
    {"num_negatives": 3},
    {"num_negatives": 2, "range_min": 2, "range_max": 12},
    {"num_negatives": 3, "relative_margin": 0.05},
    {"num_negatives": 2, "absolute_margin": 0.02, "max_score": 0.995, "min_score": 0.2},
]
CHANGED = {"num_negatives": 1, "range_min": 3, "relative_margin": 0.2, "absolute_margin": 0.1}


@pytest.mark.parametrize("settings", PEER_SETTINGS, ids=lambda s: ",".join(s))
@pytest.mark.parametrize("use_faiss", [False, True], ids=["exact", "faiss"])
def test_the_negatives_equal_the_peers_mine_hard_negatives(
    tiny_bert_dir: Path, encoder, pairs: Dataset, settings: dict, use_faiss: bool
) -> None:
    """sentence-transformers' ``mine_hard_negatives`` (triplets, ``sampling_strategy
    top``) on the same pairs and model: the same triplets in the same order; and a changed
    setting changes ours (the comparison can fail)."""
    pytest.importorskip("sentence_transformers", reason="the peer to compare with")
    if use_faiss:
        pytest.importorskip("faiss", reason="the faiss search needs sts-core[faiss]")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives as peer_mine

    peer_model = SentenceTransformer(str(tiny_bert_dir), device="cpu")  # mean pooling
    table = Dataset.from_dict({"anchor": pairs["sentence1"], "positive": pairs["sentence2"]})
    settings = {**settings, "use_faiss": use_faiss}
    theirs = triples(peer_mine(table, peer_model, verbose=False, **settings))
    ours = mine_hard_negatives(table, encoder, verbose=False, **settings)
    assert len(theirs) >= 10 and triples(ours) == theirs
    key = [k for k in settings if k in CHANGED][-1]
    changed = mine_hard_negatives(table, encoder, **{**settings, key: CHANGED[key]})
    assert triples(changed) != theirs


def test_top_candidates_break_ties_by_the_lower_column_also_at_the_kth_place() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(50, 30)).astype(np.float32)  # many ties
    scores[3] = -np.inf
    scores[4, :5] = -np.inf
    for k in (1, 7, 30, 40):
        values, columns = top_candidates(scores, k)
        for row in range(len(scores)):
            expected = sorted(range(30), key=lambda c: (-scores[row, c], c))[:k]
            assert columns[row].tolist() == expected
            assert values[row].tolist() == [scores[row, c] for c in expected]


def test_a_small_memory_bound_searches_in_chunks_with_the_same_result(encoder, pairs) -> None:
    assert chunk_rows(100_000, 256) == 111  # 24 bytes per score cell
    assert chunk_rows(10**9, 1) == 1
    settings = MiningSettings(num_negatives=3, relative_margin=0.01)
    whole, report = mine(pairs, encoder, settings)
    chunked, small = mine(pairs, encoder, settings, search_settings=SearchSettings(memory_mb=1e-4))
    few, three = mine(pairs, encoder, settings, search_settings=SearchSettings(faiss_batch_size=3))
    assert report.chunk_rows == min(chunk_rows(report.corpus, 256), 16384) == 16384
    assert small.chunk_rows == 1
    assert three.chunk_rows == 3  # faiss_batch_size: at most that many per chunk
    assert triples(chunked) == triples(whole) == triples(few)


def test_embeddings_are_encoded_block_by_block_into_memory_mapped_files_removed_after(
    encoder, pairs, monkeypatch
) -> None:
    """Blocks of 7 texts give the triplets of one call; during the search both sides'
    embeddings are memory-mapped ``.npy`` files of the run's scratch folder, which is
    gone afterwards, also when the encoder fails on a later block."""
    settings = MiningSettings(num_negatives=3, relative_margin=0.01)
    whole, _ = mine(pairs, encoder, settings)
    calls: list[int] = []
    seen: dict[str, object] = {}
    real_encode, real_search = encoder.encode, mining.search

    def counting_encode(texts, **options):
        calls.append(len(texts))
        return real_encode(texts, **options)

    def spying_search(queries, corpus, *args):
        seen.update(queries=queries, corpus=corpus, folder=Path(corpus.filename).parent)
        assert Path(queries.filename).parent == seen["folder"]
        return real_search(queries, corpus, *args)

    monkeypatch.setattr(mining, "ENCODE_BLOCK", 7)
    monkeypatch.setattr(encoder, "encode", counting_encode)
    monkeypatch.setattr(mining, "search", spying_search)
    blocked, report = mine(pairs, encoder, settings)
    assert triples(blocked) == triples(whole)
    assert max(calls) == 7 and sum(calls) == report.anchors + report.corpus
    assert all(isinstance(seen[side], np.memmap) for side in ("queries", "corpus"))
    assert not seen["folder"].exists()  # type: ignore[attr-defined]

    def failing_encode(texts, **options):
        if len(calls) > 2:
            raise RuntimeError("out of memory")
        return counting_encode(texts, **options)

    calls.clear()
    folders = set(scratch_folder().glob("sts-mine-*"))
    monkeypatch.setattr(encoder, "encode", failing_encode)
    with pytest.raises(RuntimeError, match="out of memory"):
        mine(pairs, encoder, settings)
    assert set(scratch_folder().glob("sts-mine-*")) == folders


def test_pair_scores_are_each_pairs_inner_product_block_by_block(monkeypatch) -> None:
    rng = np.random.default_rng(1)
    anchors, corpus = rng.normal(size=(5, 4)), rng.normal(size=(9, 4))
    pairs = [(a, c) for a in range(5) for c in range(9) if (a + c) % 3]
    monkeypatch.setattr(mining, "ENCODE_BLOCK", 4)
    expected = [float(anchors[a] @ corpus[c]) for a, c in pairs]
    assert np.allclose(pair_scores(anchors, corpus, pairs), expected, atol=1e-6)


def test_random_sampling_draws_among_the_candidates_left_and_keeps_them_best_first() -> None:
    scores = np.array([[0.9, 0.8, 0.7, 0.6, 0.5, -np.inf], [0.4, -np.inf, 0.3, 0.2, 0.1, 0.0]])
    indices = np.array([[10, 11, 12, 13, 14, 15], [20, 21, 22, 23, 24, 25]])
    settings = MiningSettings(num_negatives=2, range_min=1, sampling_strategy="random", seed=3)
    drawn = [choose_negatives(scores, indices, settings, 6) for _ in range(2)]
    assert np.array_equal(drawn[0][1], drawn[1][1])  # seeded
    best, chosen = drawn[0]
    assert set(chosen[0]) <= {11, 12, 13, 14} and set(chosen[1]) <= {22, 23, 24, 25}
    assert (np.diff(best, axis=1) <= 0).all()  # best first
    seen = set()
    for seed in range(20):
        other = MiningSettings(num_negatives=2, range_min=1, sampling_strategy="random", seed=seed)
        seen.add(tuple(choose_negatives(scores, indices, other, 6)[1][0]))
    assert len(seen) > 2  # the seed matters
    top = choose_negatives(scores, indices, MiningSettings(num_negatives=2, range_min=1), 6)
    assert top[1].tolist() == [[11, 12], [22, 23]]
    few = choose_negatives(scores, indices, MiningSettings(num_negatives=5, range_min=1), 6)
    assert few[1][0].tolist() == [11, 12, 13, 14, -1]  # fewer found: -1, counted by the caller


def test_the_anchor_its_positives_and_duplicate_rows_are_never_negatives(encoder) -> None:
    first, second = made_up_pairs(12, seed=1)
    first = [*first, first[0], first[0], second[3]]  # a repeated pair, a second positive,
    second = [*second, second[0], second[5], second[4]]  # and an anchor that is a positive
    dataset = Dataset.from_dict({"sentence1": first, "sentence2": second})
    mined, report = mine(dataset, encoder, MiningSettings(num_negatives=4))
    assert report.pairs == 14 and report.duplicate_pairs == 1 and report.anchors == 13
    positives: dict[str, set[str]] = {}
    for anchor, positive in zip(first, second, strict=True):
        positives.setdefault(anchor, set()).add(positive)
    for anchor, _, negative in triples(mined):
        assert negative not in positives[anchor] and negative != anchor
    assert report.removed["positive"] >= 13 and report.removed["anchor itself"] == 1
    assert report.pairs_by_negatives == {4: 14}


def test_pairs_build_the_corpus_from_extra_texts_then_positives_each_once() -> None:
    table = Pairs.build(["a", "b", "a"], ["x", "y", "z"], ["y", "w", "b"])
    assert table.corpus == ["y", "w", "b", "x", "z"]
    assert table.anchors == ["a", "b"] and table.positives_of == [[3, 4], [0]]
    assert table.own == [-2, 2]  # "b" is also a candidate: never its own negative


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"num_negatives": 0}, "num_negatives must be at least 1"),
        ({"range_min": -1}, "range_min must be 0 or more"),
        ({"range_min": 5, "range_max": 6, "num_negatives": 2}, "leaves 1 candidates"),
        ({"sampling_strategy": "hardest"}, "sampling_strategy must be one of top, random"),
        ({"max_score": float("nan")}, "max_score must be a finite number"),
        ({"relative_margin": -0.1}, "relative_margin must be 0 or more"),
        ({"min_score": 0.9, "max_score": 0.5}, "min_score 0.9 is above max_score 0.5"),
    ],
)
def test_settings_are_checked_in_one_place(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MiningSettings(**settings)


def test_the_default_window_is_the_peers() -> None:
    assert MiningSettings(num_negatives=3, range_min=2).window(max_positives=2) == 7
    assert MiningSettings(num_negatives=3, max_score=0.9).window(max_positives=1) == 31
    assert MiningSettings(num_negatives=3, range_max=9).window(max_positives=4) == 9


def test_sts_mine_writes_triplets_that_train_datasets_reads_and_a_report(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    first, second = made_up_pairs(20, seed=2)
    source = tmp_path / "pairs.csv"
    Dataset.from_dict({"question": first, "answer": second}).to_csv(str(source), index=False)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a red boat on the river\n\nthe child sings a song\n", encoding="utf-8")
    output = tmp_path / "out" / "mined.csv"
    argv = ["--model", str(tiny_bert_dir), "--pairs", str(source), "--output", str(output)]
    argv += ["--corpus", str(corpus), "--num-negatives", "2", "--scores", "--device", "cpu"]
    assert main(argv) == 0
    assert f"wrote {output}" in capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "mined.csv.report.json").read_text())
    assert report["corpus"] == 22 and report["pairs_by_negatives"] == {"2": 20}
    _, read = load_reference(str(output), "train")
    assert read.column_names[:3] == ["sentence1", "sentence2", "hard_negative"]
    assert len(read) == 40 and read["sentence1"][0] == first[0]
    assert main(argv) == 2  # not written over without --overwrite
    assert "(written by sts-mine on " in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0  # sts-mine wrote it: replaced


def test_sts_mine_refuses_bad_input_before_the_model_loads(tmp_path: Path, capsys) -> None:
    missing = ["--model", str(tmp_path / "no-model"), "--pairs", str(tmp_path / "none.csv")]
    assert main([*missing, "--output", str(tmp_path / "x.txt")]) == 2
    assert "one of the suffixes .csv, .jsonl, .json, .parquet" in capsys.readouterr().err
    assert main([*missing, "--output", str(tmp_path / "x.csv"), "--num-negatives", "2",
                 "--range-max", "1"]) == 2  # fmt: skip
    assert "fewer than num_negatives 2" in capsys.readouterr().err
    assert main([*missing, "--output", str(tmp_path / "x.csv")]) == 2
    assert "none.csv" in capsys.readouterr().err


def test_bad_search_settings_and_empty_input_stop_before_any_encoding(encoder, monkeypatch) -> None:
    def no_encoding(*args, **kwargs):
        raise AssertionError("encoded before the check")

    monkeypatch.setattr(encoder, "encode", no_encoding)
    pairs = Dataset.from_dict({"sentence1": ["a man"], "sentence2": ["a dog"]})
    with pytest.raises(ValueError, match="memory_mb must be above 0, got 0"):
        mine_hard_negatives(pairs, encoder, memory_mb=0)
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss fails
    with pytest.raises(ImportError, match=r"pip install 'sts-core\[faiss\]'"):
        mine_hard_negatives(pairs, encoder, use_faiss=True)
    empty = Dataset.from_dict({"sentence1": [], "sentence2": []})
    with pytest.raises(ValueError, match="no pairs to mine hard negatives for"):
        mine_hard_negatives(empty, encoder, use_faiss=False)


def test_sts_mine_refuses_a_report_it_would_write_over_an_empty_corpus_and_no_faiss(
    tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    source = tmp_path / "pairs.csv"
    source.write_text("anchor,positive\na man,a dog\n", encoding="utf-8")
    output = tmp_path / "mined.jsonl"
    (tmp_path / "mined.jsonl.report.json").write_text("{}", encoding="utf-8")  # the user's
    argv = ["--model", str(tiny_bert_dir), "--pairs", str(source), "--device", "cpu"]
    assert main([*argv, "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert "--output's report" in err and "was not written by sts-core" in err
    assert not output.exists()
    assert (tmp_path / "mined.jsonl.report.json").read_text(encoding="utf-8") == "{}"
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n", encoding="utf-8")
    other = str(tmp_path / "other.csv")
    assert main([*argv, "--output", other, "--corpus", str(blank)]) == 2
    assert "no text in it" in capsys.readouterr().err
    assert main([*argv, "--output", other, "--memory-mb", "0"]) == 2
    assert "memory_mb must be above 0" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "faiss", None)
    assert main([*argv, "--output", other, "--faiss"]) == 2
    assert "sts-core[faiss]" in capsys.readouterr().err and not Path(other).exists()


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"score": [1.0, float("nan"), 1.0]}, "row 2, column 'score': nan is not a finite number"),
        ({"score": ["1", "4,5", "1"]}, "row 2, column 'score': '4,5' is not a number"),
        ({"sentence1": ["a b", "", "e f"]}, "row 2, column 'sentence1': empty text"),
    ],
)
def test_the_python_function_reads_its_pairs_as_every_table_is_read(
    encoder, columns: dict, message: str
) -> None:
    """``mine_hard_negatives`` read a Dataset's columns directly: a NaN score dropped its
    pair silently, "4,5" was a bare float() error, an empty anchor was mined (the probe)."""
    from sts_core.data import DataFormatError

    data = {"sentence1": ["a b", "c d", "e f"], "sentence2": ["g h", "i j", "k l"], **columns}
    with pytest.raises(DataFormatError, match=re.escape(f"pairs: {message}")):
        mine_hard_negatives(Dataset.from_dict(data), encoder, use_faiss=False)


def test_the_python_function_reads_its_first_two_columns_as_the_peer_does(encoder) -> None:
    """The pair is the first two columns (or those named), as the peer's: an ``id`` column
    of numbers is not read (every row a positive; the probe had it read as the score, the
    pairs below the highest id left out); a column mapped to ``score`` by ``columns`` is the
    score. (``sts-mine``, which takes text columns by their order, refuses the ``id``.)"""
    texts = {"q": ["a b", "c d", "e f", "g h"], "d": ["i j", "k l", "m n", "o p"]}
    numbered = Dataset.from_dict({**texts, "id": [1, 2, 3, 4]})
    _, report = mine(numbered, encoder, columns={"sentence1": "q", "sentence2": "d"})
    assert report.pairs == 4 and report.positives is None
    assert mine_hard_negatives(numbered, encoder).column_names == ["q", "d", "negative"]
    from sts_core.data import DataFormatError

    with pytest.raises(DataFormatError, match="column 'id' holds numbers.*columns"):
        mine(numbered, encoder)  # columns by their order, as sts-mine reads a table
    scored = Dataset.from_dict({**texts, "sim": [1.0, 1.0, 0.0, 1.0]})
    triplets, report = mine(scored, encoder, columns={"score": "sim"})
    assert sorted(set(triplets["anchor"])) == ["a b", "c d", "g h"]  # 'e f' scored 0
    named = mine_hard_negatives(scored, encoder, columns={"score": "sim"})
    assert named.column_names == ["q", "d", "negative"] and named["q"] == triplets["anchor"]
