"""Core seams a method on single sentences needs (SIFTER, SimCSE): a trainer hook that
builds the training set the loss reads, text columns of a loss's own naming, the
backbone's dropout, ``train_format`` for the training files only, and the test-pair filter
left out of a sentence corpus."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from datasets import Dataset

from sts_core.encoder import SentenceEncoder
from sts_core.losses import EmbeddingLoss, register_loss
from sts_core.losses.similarity import in_batch_infonce_loss
from sts_core.method import Method
from sts_core.training import (
    BaseConfig,
    DataArguments,
    ModelArguments,
    TrainingRun,
    build_encoder,
)
from sts_core.training.collator import SentenceCollator, split_features, text_columns_with
from sts_core.training.encoder_setup import set_backbone_dropout


@register_loss("test_two_views")
class TwoViewsLoss(EmbeddingLoss):
    """InfoNCE between a sentence and its ``sentence_view`` (a column named by the loss)."""

    columns: ClassVar[tuple[str, ...]] = ("sentence", "sentence_view")
    label_kind = None

    def forward(self, embeddings: Any, labels: Any) -> torch.Tensor:
        return in_batch_infonce_loss(embeddings["sentence"], embeddings["sentence_view"])


@dataclass
class TwoViewsConfig(BaseConfig):
    """The test method's config: the core's fields only."""


class TwoViewsMethod(Method):
    """Builds the second view of every sentence in ``prepare_train_dataset``."""

    def prepare_train_dataset(self, dataset: Any, config: Any) -> tuple[Any, dict[str, Any]]:
        views = [f"{s} again" for s in dataset["sentence"]]
        prepared = Dataset.from_dict({"sentence": dataset["sentence"], "sentence_view": views})
        return prepared, {"views_made": len(views)}


TWO_VIEWS = TwoViewsMethod(
    name="test_two_views", title="two views (test)", config=TwoViewsConfig, losses=(TwoViewsLoss,)
)


def test_split_features_takes_the_longest_column_name_first() -> None:
    columns = text_columns_with(["sentence", "sentence_view"])
    assert columns[-1] == "sentence_view" and columns.count("sentence") == 1
    inputs = {
        "sentence_input_ids": torch.ones(1, 2),
        "sentence_view_input_ids": torch.ones(1, 3),
        "sentence_view_attention_mask": torch.ones(1, 3),
    }
    groups = split_features(inputs, columns)
    assert set(groups) == {"sentence", "sentence_view"}
    assert set(groups["sentence_view"]) == {"input_ids", "attention_mask"}


def test_the_collator_tokenizes_a_loss_own_columns(tiny_bert_dir: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    rows = [{"sentence": "a man", "sentence_view": "a man again"}]
    plain = SentenceCollator(encoder)(rows)
    assert not any(key.startswith("sentence_view") for key in plain)
    batch = SentenceCollator(encoder, text_columns=text_columns_with(["sentence_view"]))(rows)
    assert batch["sentence_view_input_ids"].shape[1] > batch["sentence_input_ids"].shape[1]


def test_a_trainer_prepares_the_training_set_before_the_checks(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """A sentence file becomes (sentence, sentence_view) rows; the run trains on them and
    its data summary says what the hook did; no test-pair filter on single sentences."""
    corpus = tmp_path / "sentences.txt"
    corpus.write_text("\n".join(f"a man plays music {i} ." for i in range(6)) + "\n")
    argv = [
        "--model_name_or_path",
        str(tiny_bert_dir),
        "--train_datasets",
        str(corpus),
        "--train_format",
        "sentences",
        "--eval_dataset",
        "none",
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "3",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
        "--output_dir",
        str(tmp_path / "out"),
    ]
    metrics = TrainingRun(argv, method=TWO_VIEWS).run()
    data = metrics["data"]
    assert data["views_made"] == 6 and data["train_pairs"] == 6
    assert data["filter"] == {"applied": False, "reason": "the training set is not pairs"}
    assert metrics["train"]["train_loss"] > 0


def test_train_format_reads_the_training_files_only(tmp_path: Path) -> None:
    """A sentence file with train_format: sentences, and a dev file in the STS-B layout
    whose format is guessed from its name."""
    from sts_core.training.data import build_dev_set, build_train_dataset

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one sentence here\nanother sentence here\n", encoding="utf-8")
    dev = Path(__file__).parent / "fixtures" / "training" / "sts-dev.csv"
    args = DataArguments(
        train_datasets=[str(corpus)], train_format="sentences", eval_dataset=str(dev)
    )
    train, _ = build_train_dataset(args)
    assert train.column_names == ["sentence"]
    _, dev_set = build_dev_set(args)
    assert {"sentence1", "sentence2", "score"} <= set(dev_set.column_names)


def test_backbone_dropout_sets_every_dropout_and_the_config(tiny_bert_dir: Path) -> None:
    encoder = build_encoder(ModelArguments(str(tiny_bert_dir), backbone_dropout=0.15))
    probabilities = {m.p for m in encoder.backbone.modules() if isinstance(m, torch.nn.Dropout)}
    assert probabilities == {0.15}
    config = encoder.backbone.config
    assert config.hidden_dropout_prob == config.attention_probs_dropout_prob == 0.15


def test_backbone_dropout_reaches_a_decoder_attention(tiny_llama_dir: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_llama_dir)
    changed = set_backbone_dropout(encoder.backbone, 0.2)
    assert "attention_dropout" in changed
    rates = [
        m.attention_dropout
        for m in encoder.backbone.modules()
        if isinstance(getattr(m, "attention_dropout", None), float)
    ]
    assert rates and set(rates) == {0.2}


def test_backbone_dropout_out_of_range_is_refused(tiny_bert_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"backbone_dropout must be in \[0, 1\)"):
        ModelArguments(str(tiny_bert_dir), backbone_dropout=1.0)
