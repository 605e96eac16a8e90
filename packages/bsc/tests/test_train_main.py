"""``main()`` of packages/bsc/train.py end to end on fixture files and a tiny model (the
combo with labeled negatives, example-based batches, a trainable temperature), the batches
rebuilt at every epoch from the current model, and bad inputs stopped with one line before
the model is loaded."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset

from sts_bsc import BscConfig, BscTrainer
from sts_bsc import trainer as bsc_trainer_module
from sts_core.encoder import SentenceEncoder
from sts_core.testing import (
    PackageFiles,
    bad_recipe_tests,
    mined_triplets,
    quick_training_args,
    read_metrics,
    spearman_of_saved_model,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FILES = PackageFiles(__file__)

main = FILES.main


def write_recipe(path: Path, model: Path, output_dir: Path, **overrides: str) -> Path:
    lines = {"loss": "bsc", "score_range": "[0, 5]", **overrides}
    return FILES.recipe(path, "bsc on fixtures", model, output_dir, **lines)


def test_combo_with_example_based_batches_and_a_trainable_temperature(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_dir,
        out,
        mu="0.5",
        label_threshold="0.6",
        shuffle="example",
        group_size="2",
        shuffle_candidates="4",
        trainable_temperature="true",
        temperature_learning_rate="0.05",
        max_steps="-1",
        num_train_epochs="2",
    )
    assert main(["--config", str(recipe)]) == 0
    metrics = read_metrics(out)
    assert math.isfinite(metrics["train"]["train_loss"])
    (state,) = out.glob("checkpoint-4/trainer_state.json")  # the last step's checkpoint
    history = json.loads(state.read_text(encoding="utf-8"))["log_history"]
    logged = {key for entry in history for key in entry}
    assert {"bsc", "bsc_l0", "bsc_l1", "mse", "temperature"} <= logged
    temperatures = [entry["temperature"] for entry in history if "temperature" in entry]
    assert len(temperatures) == 4  # logged at every step, as used by that step's forward
    assert temperatures[0] == pytest.approx(0.1)  # step 1 runs at bsc_temperature
    # AdamW's first update of α = 1/τ (a scalar: no weight decay) is lr·g/(|g| + ε), i.e.
    # ±temperature_learning_rate whatever the gradient (the base learning rate is 1e-3)
    assert abs(1 / temperatures[1] - 1 / 0.1) == pytest.approx(0.05, abs=1e-4)
    reported = metrics["final"][str(FILES.test)]
    (key,) = [k for k in reported if k.endswith("_spearman")]
    assert spearman_of_saved_model(out, FILES.test) == pytest.approx(reported[key], abs=1e-3)


def pairs() -> Dataset:
    lines = [line.split("\t") for line in FILES.train.read_text(encoding="utf-8").splitlines()]
    return Dataset.from_dict(
        {
            "sentence1": [r[5] for r in lines],
            "sentence2": [r[6] for r in lines],
            "score": [float(r[4]) / 5 for r in lines],
        }
    )


def test_batches_are_rebuilt_at_every_epoch_from_the_current_model(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    original = bsc_trainer_module.shuffle_order

    def recording(method, texts, vectors, rng, **kwargs):
        calls.append((method, list(texts), vectors.copy()))
        return original(method, texts, vectors, rng, **kwargs)

    monkeypatch.setattr(bsc_trainer_module, "shuffle_order", recording)
    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    args = quick_training_args(
        BscConfig,
        tmp_path,
        shuffle="example",
        shuffle_by="sentence2",
        group_size=2,
        shuffle_candidates=3,
        per_device_train_batch_size=4,
        max_steps=-1,
        num_train_epochs=2,
        learning_rate=1e-2,
    )
    data = pairs()
    trainer = BscTrainer(encoder, args, train_dataset=data)
    trainer.train()
    assert [entry["epoch"] for entry in trainer.shuffle_log] == [0, 1]
    assert len(calls) == 2 and all(texts == data["sentence2"] for _, texts, _ in calls)
    now = encoder.encode(data["sentence2"], show_progress_bar=False)
    assert not np.allclose(calls[0][2], calls[1][2])  # epoch 1 embeds with the trained model
    assert not np.allclose(calls[1][2], now)  # … and training went on after it


def test_text_ids_of_repeated_anchors_reach_the_loss(tiny_bert_dir: Path, tmp_path: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    trainer = BscTrainer(encoder, quick_training_args(BscConfig, tmp_path))
    rows = [
        {"sentence1": "a man", "sentence2": "a dog", "score": 1.0},
        {"sentence1": "a cat", "sentence2": "a man plays", "score": 1.0},
        {"sentence1": "a man", "sentence2": "a boy", "score": 1.0},
    ]
    batch = trainer.data_collator(rows)
    ids = batch["text_ids_sentence1"].tolist()
    assert ids[0] == ids[2] != ids[1]
    seen = {}
    forward = trainer.loss_module.forward

    def spy(embeddings, labels, text_ids=None):
        seen.update(text_ids)
        return forward(embeddings, labels, text_ids)

    trainer.loss_module.forward = spy
    trainer.compute_loss(encoder, batch)
    assert seen["sentence1"].tolist() == ids


TestBadRecipes = bad_recipe_tests(
    main,
    write_recipe,
    [
        ({"mu": "2"}, "mu must be in [0, 1]"),
        ({"shuffle": "sorted"}, "shuffle 'sorted' is not one of"),
        ({"bsc_normalization": "l1"}, "bsc_normalization 'l1' is not one of"),
        ({"trainable_temperature": "true", "gradient_cache_batch_size": "4"}, "gradient"),
        (
            {"batch_sampler": "no_duplicates"},
            "batch_sampler no_duplicates: method bsc builds its own batches",
        ),
        (
            {"train_datasets": f"{{a: {FILES.train}, b: {FILES.train}}}"},
            "trains with BscTrainer, which builds its own batches; give train_datasets as a list",
        ),
    ],
)


def test_one_training_set_given_as_a_mapping_trains_with_its_example_based_batches(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_dir,
        out,
        train_datasets=f"{{stsb: {{path: {FILES.train}}}}}",
        shuffle="example",
        group_size="2",
        shuffle_candidates="4",
        max_steps="-1",
        num_train_epochs="1",
        eval_strategy="no",
        save_strategy="no",
    )
    assert main(["--config", str(recipe)]) == 0
    metrics = read_metrics(out)
    rows = metrics["data"]["sources"]["stsb"]
    assert metrics["train"]["datasets"]["stsb"]["batches"] == math.ceil(rows / 8)


def test_a_trainable_temperature_in_a_loss_sum_gets_its_own_rate(
    tiny_bert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Inside ``loss_weights`` α is ``sts_loss.parts.bsc.inverse_temperature``; the pattern
    for the loss alone would match nothing (now a ConfigError, before a silent base rate)."""
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_dir,
        tmp_path / "out",
        trainable_temperature="true",
        temperature_learning_rate="0.05",
        loss_weights="{bsc: 1.0, cosine_mse: 0.5}",
        max_steps="1",
        eval_strategy="no",
        save_strategy="no",
    )
    with caplog.at_level(logging.INFO, logger="sts_core.training.optimization"):
        assert main(["--config", str(recipe)]) == 0
    assert "(lr 0.05): 1 parameter(s): sts_loss.parts.bsc.inverse_temperature" in caplog.text


def test_bsc_trains_on_the_triplets_sts_mine_writes(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sts-mine``'s output (anchor, positive, negative) is BSC's hard-negative training set
    as it is: the loss gets the mined ``hard_negative`` embeddings in every batch."""
    from sts_bsc.loss import BSCLoss

    mined = mined_triplets(tiny_bert_dir, tmp_path)
    seen: list[int] = []
    batch = BSCLoss._batch

    def recording(self, embeddings, labels, text_ids):
        found = batch(self, embeddings, labels, text_ids)
        seen.append(len(found["hard_negatives"]))
        return found

    monkeypatch.setattr(BSCLoss, "_batch", recording)
    recipe = write_recipe(
        tmp_path / "bsc.yaml",
        tiny_bert_dir,
        tmp_path / "out",
        train_datasets=f"[{mined}]",
        score_range="null",
        eval_dataset="none",
        save_strategy="no",
        per_device_train_batch_size="4",
        max_steps="2",
    )
    assert main(["--config", str(recipe)]) == 0
    assert seen[:2] == [4, 4]
