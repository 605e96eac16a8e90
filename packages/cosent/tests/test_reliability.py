"""Nothing silently wrong in CoSENT runs: what a loss needs of the labels is checked before
the model is loaded, batches the ranking cannot use are counted and reported."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from sts_core.testing import one_line_error, write_fixture_recipe
from sts_cosent.method import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures"
TRAIN = FIXTURES / "sts-train.csv"  # 0–5 scores
DEV = FIXTURES / "sts-dev.csv"


def recipe(tmp_path: Path, model: Path, train: Path = TRAIN, **overrides: str) -> Path:
    return write_fixture_recipe(
        tmp_path / "r.yaml", "reliability", model, train, DEV, tmp_path / "out", **overrides
    )


def test_softmax_on_similarity_scores_stops_before_the_model_is_loaded(
    tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:  # was KeyError: 'labels' after the model was built
    def not_loaded(*args, **kwargs):
        raise AssertionError("the model was loaded before the labels were checked")

    monkeypatch.setattr("sts_core.encoder.model.SentenceEncoder.from_pretrained", not_loaded)
    assert main(["--config", str(recipe(tmp_path, tiny_bert_dir, loss="softmax"))]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "no label column 'label'" in line
    assert not (tmp_path / "out").exists()


def test_softmax_with_labels_out_of_range_names_them(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    train = tmp_path / "pairs.tsv"  # CoSENT's tsv format: integer labels 0/1
    rows = ["a man plays\ta man plays a guitar\t1", "the dog runs\ta cat eats food\t0"] * 4
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    config = recipe(
        tmp_path, tiny_bert_dir, train, loss="softmax", num_labels="1", train_format="cosent"
    )
    assert main(["--config", str(config)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "loss softmax needs class labels 0 … 0, found [1] in column 'label'" in line


def test_contrastive_needs_binary_labels(tiny_bert_dir: Path, tmp_path: Path, capsys) -> None:
    assert main(["--config", str(recipe(tmp_path, tiny_bert_dir, loss="contrastive"))]) == 2
    assert "loss contrastive needs binary labels 0/1" in one_line_error(capsys.readouterr().err)


def test_batches_without_two_distinct_labels_are_counted_and_reported(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, caplog
) -> None:
    """Batch size 1: CoSENT has no ordered pair to rank in any batch; the loss is 0, and the
    run says so instead of 'training' silently."""
    config = recipe(tmp_path, tiny_bert_nodropout_dir, per_device_train_batch_size="1")
    with caplog.at_level(logging.WARNING, logger="sts_core.training.trainer"):
        assert main(["--config", str(config)]) == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["train"]["batches"] == {
        "batches": 4,
        "without_usable_pairs": 4,
        "reasons": {"no two distinct labels": 4},
    }
    assert "4 of 4 training batches gave the loss nothing to learn from" in caplog.text


def test_ordinary_batches_report_no_degenerate_batch(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, caplog
) -> None:
    config = recipe(tmp_path, tiny_bert_nodropout_dir)
    with caplog.at_level(logging.WARNING, logger="sts_core.training.trainer"):
        assert main(["--config", str(config)]) == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["train"]["batches"]["without_usable_pairs"] == 0
    assert "nothing to learn from" not in caplog.text
