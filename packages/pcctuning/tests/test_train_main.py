"""``main()`` of packages/pcctuning/train.py end to end on fixture files and tiny models:
stage 1 (InfoNCE on triplets, LoRA on a decoder with a prompt, gradient caching), stage 2
(1 − Pearson) continuing stage 1's adapter, the degenerate-batch count, and bad inputs
stopped with one line before the model is loaded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from sts_core.encoder import SentenceEncoder
from sts_core.testing import (
    PackageFiles,
    bad_recipe_tests,
    mined_triplets,
    one_line_error,
    quick_training_args,
    read_metrics,
    spearman_of_saved_model,
)
from sts_core.training import BaseTrainer
from sts_core.training.collator import SentenceCollator
from sts_pcctuning import PccConfig
from sts_pcctuning.loss import PearsonLoss

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FILES = PackageFiles(__file__)
LLAMA_PROMPT = {
    "pooling": "last_token",
    "prompt": "promptsth",
    "padding_side": "left",
    "use_lora": "true",
    "lora_r": "4",
    "lora_alpha": "16",
    "lora_dropout": "0.05",
    "lora_target_modules": "all-linear",
}

main = FILES.main


def write_triplets(path: Path, rows: int = 8) -> Path:
    """A SimCSE triplet csv (sent0, sent1, hard_neg)."""
    lines = ["sent0,sent1,hard_neg"] + [
        f"a man plays a guitar {i},a man plays music {i},a dog sleeps {i}" for i in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_recipe(path: Path, model: Path, output_dir: Path, train: Path | None = None, **lines):
    lines = {"loss": "pearson", **lines}
    return FILES.recipe(path, "pcctuning on fixtures", model, output_dir, train, **lines)


def record_batches_and_losses(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[list[dict]], list[float]]:
    """The rows of every training batch (as the collator gets them, in order) and the
    Pearson loss of every step, filled in as a run goes."""
    batches: list[list[dict]] = []
    losses: list[float] = []
    collate, forward = SentenceCollator.__call__, PearsonLoss.forward

    def collating(self, features):
        batches.append([dict(row) for row in features])
        return collate(self, features)

    def loss(self, embeddings, labels):
        value = forward(self, embeddings, labels)
        losses.append(float(value.detach()))
        return value

    monkeypatch.setattr(SentenceCollator, "__call__", collating)
    monkeypatch.setattr(PearsonLoss, "forward", loss)
    return batches, losses


def test_two_stages_with_lora_on_a_prompted_decoder(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stage 1: InfoNCE with the hard negatives, a LoRA adapter, PromptSTH and last-token
    pooling, a batch of 8 through gradient caching (mini-batches of 3); stage 2 trains the
    same adapter further with the Pearson loss and reloads with the scores it reported."""
    pytest.importorskip("peft", reason="LoRA is an extra: sts-core[peft]")
    stage1, stage2 = tmp_path / "stage1", tmp_path / "stage2"
    first = write_recipe(
        tmp_path / "s1.yaml",
        tiny_llama_dir,
        stage1,
        write_triplets(tmp_path / "triplets.csv"),
        loss="infonce",
        eval_dataset="none",
        save_strategy="no",
        per_device_train_batch_size="8",
        gradient_cache_batch_size="3",
        **LLAMA_PROMPT,
    )
    assert main(["--config", str(first)]) == 0
    metrics = read_metrics(stage1)
    assert math.isfinite(metrics["train"]["train_loss"]) and metrics["train"]["train_loss"] > 0
    assert (stage1 / "adapter_config.json").is_file()
    settings = json.loads((stage1 / "sts_encoder_config.json").read_text(encoding="utf-8"))
    assert settings["pooling"] == "last_token" and "means something" in settings["prompt"]

    second = write_recipe(
        tmp_path / "s2.yaml",
        stage1,
        stage2,
        use_lora="true",
        per_device_train_batch_size="4",
        gradient_cache_batch_size="2",
        save_strategy="no",
        eval_strategy="no",
    )
    batches, losses = record_batches_and_losses(monkeypatch)
    assert main(["--config", str(second)]) == 0
    metrics = read_metrics(stage2)
    assert len(batches) == len(losses) == 4  # one loss per step through gradient caching
    assert metrics["train"]["train_loss"] == pytest.approx(np.mean(losses), rel=1e-6)
    # step 1 is eq. 9 on stage 1's model: 1 − r (numpy's) of its cosines on the first
    # batch's pairs with their gold scores; the adapter's LoRA dropout (0.05) is on in
    # training and moves the logged loss by 1.8e-3 here (1e-6 with every dropout off)
    stage1_model = SentenceEncoder.from_pretrained(stage1)
    u, v = (
        stage1_model.encode([row[side] for row in batches[0]], show_progress_bar=False)
        for side in ("sentence1", "sentence2")
    )
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    r = np.corrcoef(cosine.astype(np.float64), [row["score"] for row in batches[0]])[0, 1]
    assert losses[0] == pytest.approx(1 - r, abs=5e-3)
    assert metrics["train"]["batches"]["batches"] == 4
    adapter = json.loads((stage2 / "adapter_config.json").read_text(encoding="utf-8"))
    assert adapter["r"] == 4
    reported = metrics["final"][str(FILES.test)]
    (key,) = [k for k in reported if k.endswith("_spearman")]
    assert spearman_of_saved_model(stage2, FILES.test) == pytest.approx(reported[key], abs=1e-3)


def test_stage_two_counts_batches_without_a_correlation(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    args = quick_training_args(PccConfig, tmp_path, loss="pearson")
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    trainer = BaseTrainer(encoder, args)
    rows = [{"sentence1": "a man", "sentence2": "a dog", "score": 3.0}] * 2 + [
        {"sentence1": "a cat", "sentence2": "a man plays", "score": 3.0}
    ]
    batch = trainer.data_collator(rows)
    encoder.train()
    loss = trainer.compute_loss(encoder, batch)
    loss.backward()
    assert float(loss.detach()) == 0.0
    assert all(p.grad is None or not p.grad.any() for p in encoder.parameters())
    trainer._batches_seen = 1
    report = trainer.degenerate_batch_report()
    assert report["reasons"] == {"gold scores all equal": 1}


TestBadRecipes = bad_recipe_tests(
    main,
    write_recipe,
    [
        ({"per_device_train_batch_size": "1"}, "needs at least 2 pairs per batch"),
        ({"loss": "cosent"}, "is not one of infonce, pearson, cosine_mse"),
        ({"infonce_temperature": "0"}, "infonce_temperature must be finite and > 0"),
        ({"gradient_cache_batch_size": "0"}, "gradient_cache_batch_size must be at least 1"),
        ({"load_in_4bit": "true"}, "needs a CUDA GPU"),
        ({"final_sts_sentence_edit": "mine"}, "unknown sentence edit"),
    ],
)


def test_stage_two_on_scores_that_are_all_equal_is_refused(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    flat = tmp_path / "sts-flat.csv"
    lines = FILES.train.read_text(encoding="utf-8").splitlines()
    flat.write_text(
        "\n".join(
            "\t".join([*line.split("\t")[:4], "2.0", *line.split("\t")[5:]]) for line in lines
        )
        + "\n",
        encoding="utf-8",
    )
    recipe = write_recipe(tmp_path / "r.yaml", tiny_bert_dir, tmp_path / "out", flat)
    assert main(["--config", str(recipe)]) == 2
    assert "every training score is 2.0" in one_line_error(capsys.readouterr().err)


def test_stage_one_without_hard_negatives_says_so(
    tiny_bert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_dir,
        tmp_path / "out",
        loss="infonce",
        max_steps="1",
        eval_strategy="no",
        save_strategy="no",
    )
    assert main(["--config", str(recipe)]) == 0
    assert "without a hard_negative column" in caplog.text
    assert torch.isfinite(torch.tensor(read_metrics(tmp_path / "out")["train"]["train_loss"]))


def test_promptsth_last_token_is_the_templates_last_word_on_both_padding_sides(
    tiny_llama_dir: Path,
) -> None:
    from sts_core.pooling import last_token_index

    sentences = ["a man plays a guitar in the park", "a dog"]
    vectors = {}
    for side in ("left", "right"):
        encoder = SentenceEncoder.from_pretrained(
            tiny_llama_dir, pooling="last_token", prompt="promptsth", padding_side=side
        )
        tokens = encoder.tokenize(sentences)
        last = tokens["input_ids"][torch.arange(2), last_token_index(tokens["attention_mask"])]
        assert encoder.tokenizer.convert_ids_to_tokens(last.tolist()) == ["something"] * 2
        text = encoder.tokenizer.decode(tokens["input_ids"][1][tokens["attention_mask"][1] > 0])
        assert text.replace(" ", "").endswith('sentence:"adog"meanssomething')
        vectors[side] = encoder.encode(sentences, show_progress_bar=False)
    assert vectors["left"] == pytest.approx(vectors["right"], abs=1e-5)


def test_stage_1_trains_on_the_triplets_sts_mine_writes(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sts-mine``'s output (anchor, positive, negative) is stage 1's training set as it
    is: every batch's rows carry the mined ``hard_negative``."""
    mined = mined_triplets(tiny_bert_dir, tmp_path)
    recipe = write_recipe(
        tmp_path / "s1.yaml",
        tiny_bert_dir,
        tmp_path / "stage1",
        mined,
        loss="infonce",
        eval_dataset="none",
        save_strategy="no",
        per_device_train_batch_size="4",
        max_steps="2",
    )
    batches, _ = record_batches_and_losses(monkeypatch)
    assert main(["--config", str(recipe)]) == 0
    rows = [row for batch in batches for row in batch]
    assert len(rows) >= 8 and all(row["hard_negative"].startswith("a man plays") for row in rows)
    assert all(row["hard_negative"] != row["sentence2"] for row in rows)
    assert read_metrics(tmp_path / "stage1")["data"]["train_pairs"] == 12
