"""The core's seams for the regression method (and the packages after it): losses that own a
head, a frozen backbone, layer-wise learning-rate decay, label mapping, models that ship
their own code, the head scorer, and training sets that share a dataset name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from datasets import Dataset
from torch import nn

from sts_core.data import DataConfigError, map_labels, resolve_label_mapping
from sts_core.encoder import SentenceEncoder
from sts_core.evaluation import PairEvaluator, head_scorer
from sts_core.heads import LinearHead, head_entry
from sts_core.losses import SOFTMAX_HEAD, SoftmaxClassifierLoss, softmax_classifier_loss
from sts_core.testing import quick_training_args
from sts_core.training import BaseConfig, DataArguments, ModelArguments, build_encoder
from sts_core.training.optimization import layer_index, regroup_parameters

pytestmark = pytest.mark.usefixtures("torch_one_thread")


# ----------------------------------------------------------------- losses that own a head
def test_a_head_loss_adds_its_head_keeps_a_matching_one_and_refuses_another(
    tiny_bert_dir: Path,
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    config = SimpleNamespace(num_labels=3, pair_features="u,v,|u-v|")
    SoftmaxClassifierLoss.prepare_model(encoder, config)
    head = encoder.heads[SOFTMAX_HEAD]
    assert (head.in_features, head.out_features) == (3 * encoder.dimension, 3)
    SoftmaxClassifierLoss.prepare_model(encoder, config)  # the same settings: kept as it is
    assert encoder.heads[SOFTMAX_HEAD] is head
    assert SoftmaxClassifierLoss.from_config(config, encoder).head is head
    with pytest.raises(ValueError, match="already has a 'softmax_classifier' head"):
        SoftmaxClassifierLoss.prepare_model(encoder, SimpleNamespace(num_labels=4))
    saved = {SOFTMAX_HEAD: head_entry(head)}
    SoftmaxClassifierLoss.check_saved_heads(saved, config, encoder.dimension)
    with pytest.raises(ValueError, match="'u,v'"):
        SoftmaxClassifierLoss.check_saved_heads(
            saved, SimpleNamespace(num_labels=3, pair_features="u,v"), encoder.dimension
        )
    with pytest.raises(ValueError, match="needs the model's 'softmax_classifier' head"):
        SoftmaxClassifierLoss.from_config(config, SimpleNamespace(heads={}))


def test_softmax_classifier_reads_the_heads_own_pair_features() -> None:
    torch.manual_seed(0)
    head = LinearHead.for_pairs(4, 3, pair_features="u,v")
    u, v = torch.randn(5, 4, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    head = head.double()
    labels = torch.tensor([0, 2, 1, 1, 0])
    logits = (torch.cat([u, v], dim=1) @ head.weight.T + head.bias).detach().numpy()
    shifted = logits - logits.max(1, keepdims=True)
    expected = -(shifted - np.log(np.exp(shifted).sum(1, keepdims=True)))[range(5), labels].mean()
    assert softmax_classifier_loss(u, v, labels, head).item() == pytest.approx(expected)


# ----------------------------------------------------------------- frozen backbone
def test_freeze_backbone_leaves_no_backbone_parameter_trainable(tiny_bert_dir: Path) -> None:
    encoder = build_encoder(
        ModelArguments(model_name_or_path=str(tiny_bert_dir), freeze_backbone=True)
    )
    assert not any(p.requires_grad for p in encoder.backbone.parameters())
    with pytest.raises(ValueError, match="freeze_backbone with use_lora"):
        ModelArguments(model_name_or_path=str(tiny_bert_dir), freeze_backbone=True, use_lora=True)


# ----------------------------------------------------------------- layer-wise lr decay
def test_layer_index_reads_bert_llama_and_gpt2_names() -> None:
    assert layer_index("backbone.encoder.layer.11.attention.self.query.weight") == 11
    assert layer_index("backbone.layers.3.self_attn.q_proj.weight") == 3
    assert layer_index("backbone.base_model.model.layers.0.mlp.up_proj.lora_A.default.weight") == 0
    assert layer_index("backbone.h.7.attn.c_attn.weight") == 7
    assert layer_index("backbone.embeddings.word_embeddings.weight") is None
    assert layer_index("regression.weight") is None  # heads are not the backbone's layers


def test_layer_decay_gives_each_layer_its_rate_and_leaves_the_rest_at_the_base(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """2 layers, decay 0.5: layer 1 (the top) at lr, layer 0 at lr · 0.5; embeddings and the
    head at lr (the authors' code); weight decay as the Trainer set it."""
    from sts_core.training import BaseTrainer

    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    encoder.add_head("regression", LinearHead.for_pairs(encoder.dimension, 1))
    args = quick_training_args(BaseConfig, tmp_path, learning_rate=1e-3, layer_lr_decay=0.5)
    data = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "score": [0.5]})
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=data)
    optimizer = trainer.create_optimizer()
    rates = {}
    names = {id(p): n for n, p in encoder.named_parameters()}
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            rates[names[id(parameter)]] = (group["lr"], group["weight_decay"])
    assert rates["backbone.encoder.layer.1.attention.self.query.weight"] == (1e-3, 0.01)
    assert rates["backbone.encoder.layer.0.attention.self.query.weight"] == (5e-4, 0.01)
    assert rates["backbone.encoder.layer.0.output.LayerNorm.weight"] == (5e-4, 0.0)
    assert rates["backbone.embeddings.word_embeddings.weight"] == (1e-3, 0.01)
    assert rates["regression.weight"] == (1e-3, 0.01)
    assert len(rates) == len(names)  # every parameter is in exactly one group


def test_an_explicit_mapping_wins_over_layer_decay() -> None:
    model = nn.Module()
    model.backbone = nn.Module()
    model.backbone.layer = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2)])
    optimizer = torch.optim.AdamW([{"params": list(model.parameters()), "weight_decay": 0.0}])
    optimizer.param_groups[0]["lr"] = 1.0
    mapping = {r"layer\.0\.bias": 0.3}
    regroup_parameters(optimizer, model.named_parameters(), mapping, layer_lr_decay=0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    rates = {names[id(p)]: g["lr"] for g in optimizer.param_groups for p in g["params"]}
    assert rates["backbone.layer.2.weight"] == 1.0
    assert rates["backbone.layer.1.weight"] == pytest.approx(0.1)
    assert rates["backbone.layer.0.weight"] == pytest.approx(0.01)
    assert rates["backbone.layer.0.bias"] == 0.3


def test_layer_decay_outside_its_range_is_refused(tmp_path: Path) -> None:
    for value in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="layer_lr_decay must be in"):
            quick_training_args(BaseConfig, tmp_path, layer_lr_decay=value)


# ----------------------------------------------------------------- label mapping
def nli_pairs() -> Dataset:
    """The NLI readers' columns: label (entailment 0, neutral 1, contradiction 2), score."""
    return Dataset.from_dict(
        {
            "sentence1": ["a", "b", "c", "d", "e"],
            "sentence2": ["f", "g", "h", "i", "j"],
            "label": [0, 1, 2, 2, 0],
            "score": [2.0, 1.0, 0.0, 0.0, 2.0],
        }
    )


def test_class_names_stand_for_the_readers_values_in_either_column() -> None:
    names = {"contradiction": 0, "neutral": 1, "entailment": 2}
    assert resolve_label_mapping(names, "label") == {2.0: 0.0, 1.0: 1.0, 0.0: 2.0}
    assert resolve_label_mapping(names, "score") == {0.0: 0.0, 1.0: 1.0, 2.0: 2.0}
    mapped, counts = map_labels(nli_pairs(), "label", names)
    assert mapped["label"] == [2.0, 1.0, 0.0, 0.0, 2.0]  # contradiction 0 … entailment 2
    assert counts == {"0": 2, "1": 1, "2": 2}
    assert mapped.column_names == nli_pairs().column_names
    sbert = {"contradiction": 0, "entailment": 1, "neutral": 2}
    assert map_labels(nli_pairs(), "label", sbert)[0]["label"] == [1.0, 2.0, 0.0, 0.0, 1.0]
    by_number, _ = map_labels(nli_pairs(), "score", {"0": 5, 1: 2.5, 2.0: 0})
    assert by_number["score"] == [0.0, 2.5, 5.0, 5.0, 0.0]


def test_label_mapping_problems_are_named() -> None:
    with pytest.raises(DataConfigError, match=r"no entry for the value\(s\) 2 \(2 rows\)"):
        map_labels(nli_pairs(), "label", {"entailment": 2, "neutral": 1})
    with pytest.raises(DataConfigError, match="no column 'gold'"):
        map_labels(nli_pairs(), "gold", {0: 1})
    with pytest.raises(DataConfigError, match="neither a number nor an NLI class"):
        resolve_label_mapping({"entail": 1}, "label")
    with pytest.raises(DataConfigError, match="is not a number"):
        resolve_label_mapping({"neutral": "high"}, "label")
    with pytest.raises(DataConfigError, match="twice"):
        resolve_label_mapping({"entailment": 1, 0: 2}, "label")
    with pytest.raises(DataConfigError, match="stands for a value of the NLI"):
        resolve_label_mapping({"entailment": 1}, "relevance")
    with pytest.raises(ValueError, match="neither a number nor an NLI class"):
        DataArguments(label_mapping='{"entail": 1}')  # at parse time, before any data
    with pytest.raises(ValueError, match="not a JSON mapping"):
        DataArguments(label_mapping="{entail")


def test_training_sets_sharing_a_name_are_counted_apart(tmp_path: Path) -> None:
    from sts_core.training.data import build_train_dataset

    folder = tmp_path / "nli"
    folder.mkdir()
    for split, rows in (("dev", 3), ("test", 2)):
        (folder / f"s1.{split}").write_text("a man\n" * rows, encoding="utf-8")
        (folder / f"s2.{split}").write_text("a woman\n" * rows, encoding="utf-8")
        (folder / f"labels.{split}").write_text("neutral\n" * rows, encoding="utf-8")
    (tmp_path / "data" / "nli").mkdir(parents=True)
    shutil.copytree(folder, tmp_path / "data" / "nli" / "snli-devtest")
    data_args = DataArguments(
        data_dir=str(tmp_path / "data"),
        train_datasets=["snli:dev", "snli:test"],
        label_mapping={"neutral": 1},
    )
    train, summary = build_train_dataset(data_args, label_column="label")
    assert summary["sources"] == {"snli:dev": 3, "snli:test": 2}
    assert sorted(set(train["source"])) == ["snli:dev", "snli:test"]
    assert summary["label_mapping"] == {"column": "label", "rows_per_value": {"1": 5}}


# ----------------------------------------------------------------- remote code
REMOTE_CONFIG = """from transformers import BertConfig


class TinyRemoteConfig(BertConfig):
    model_type = "tinyremote"
"""
REMOTE_MODEL = """from transformers import BertModel

from .configuration_tinyremote import TinyRemoteConfig


class TinyRemoteModel(BertModel):
    config_class = TinyRemoteConfig
"""


@pytest.fixture
def remote_code_model(tiny_bert_dir: Path, tmp_path: Path) -> Path:
    """The tiny BERT as a folder that ships its own modelling code (as Jina v2 does)."""
    folder = tmp_path / "tiny-remote"
    shutil.copytree(tiny_bert_dir, folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(
        model_type="tinyremote",
        auto_map={
            "AutoConfig": "configuration_tinyremote.TinyRemoteConfig",
            "AutoModel": "modeling_tinyremote.TinyRemoteModel",
        },
    )
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "configuration_tinyremote.py").write_text(REMOTE_CONFIG, encoding="utf-8")
    (folder / "modeling_tinyremote.py").write_text(REMOTE_MODEL, encoding="utf-8")
    return folder


def test_a_model_with_its_own_code_needs_trust_remote_code(
    remote_code_model: Path, tiny_bert_dir: Path
) -> None:
    with pytest.raises(OSError, match="trust_remote_code"):
        SentenceEncoder.from_pretrained(remote_code_model)
    encoder = build_encoder(
        ModelArguments(model_name_or_path=str(remote_code_model), trust_remote_code=True)
    )
    assert type(encoder.backbone).__name__ == "TinyRemoteModel"
    reference = SentenceEncoder.from_pretrained(tiny_bert_dir)
    sentences = ["a man plays the guitar", "a dog runs"]
    np.testing.assert_allclose(
        encoder.encode(sentences, show_progress_bar=False),
        reference.encode(sentences, show_progress_bar=False),
        atol=1e-6,
    )
    encoder.backbone.config.model_type = "bert"  # as Jina v2's config says
    encoder.train()
    assert encoder.packing_path()[0] == "padded"  # packing needs transformers' own BERT
    reference.train()
    assert reference.packing_path()[0] != "padded"


# ----------------------------------------------------------------- head scorer
def test_head_scorer_scores_pairs_with_the_named_head(tiny_bert_dir: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    head = encoder.add_head("regression", LinearHead.for_pairs(encoder.dimension, 1))
    pairs = {
        "sentence1": ["a man plays", "a dog runs", "a cat eats"],
        "sentence2": ["a man plays a guitar", "a girl sits", "a cat eats food"],
        "score": [4.0, 0.5, 3.0],
    }
    scores = head_scorer("regression")(encoder, pairs["sentence1"], pairs["sentence2"], 2)
    u = torch.tensor(encoder.encode(pairs["sentence1"], show_progress_bar=False))
    v = torch.tensor(encoder.encode(pairs["sentence2"], show_progress_bar=False))
    with torch.no_grad():
        np.testing.assert_allclose(scores, head.score(u, v).double().numpy(), atol=1e-6)
    result = PairEvaluator(pairs, "dev_head", head_scorer("regression"))(encoder)
    assert set(result) == {"dev_head_spearman", "dev_head_pearson"}
    with pytest.raises(ValueError, match="no head 'other'"):
        head_scorer("other")(encoder, ["a"], ["b"], 1)


# ----------------------------------------------------------------- review mends
def test_layer_decay_is_applied_once_when_the_optimizer_is_asked_for_twice(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """DeepSpeed's set-up asks the Trainer for its optimizer twice."""
    from sts_core.training import BaseTrainer

    encoder = SentenceEncoder.from_pretrained(tiny_bert_dir)
    args = quick_training_args(BaseConfig, tmp_path, learning_rate=1e-3, layer_lr_decay=0.5)
    data = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "score": [0.5]})
    trainer = BaseTrainer(model=encoder, args=args, train_dataset=data)
    first = sorted(group["lr"] for group in trainer.create_optimizer().param_groups)
    second = sorted(group["lr"] for group in trainer.create_optimizer().param_groups)
    assert first == second and min(first) == pytest.approx(5e-4)


def test_layer_decay_without_numbered_layers_says_so(caplog: pytest.LogCaptureFixture) -> None:
    model = nn.Module()
    model.backbone = nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with caplog.at_level("WARNING"):
        regroup_parameters(optimizer, model.named_parameters(), None, layer_lr_decay=0.9)
    assert "no numbered layer" in caplog.text
    assert [g["lr"] for g in optimizer.param_groups] == [1e-3]
    assert layer_index("backbone.encoder.block.3.layer.1.DenseReluDense.wi.weight") == 3  # T5


def test_merging_keeps_a_column_type_the_sets_agree_on() -> None:
    from sts_core.data import merge_datasets

    a, b = nli_pairs(), nli_pairs()
    merged = merge_datasets(a, b, names=["a", "b"], columns=["sentence1", "sentence2", "label"])
    assert str(merged.features["label"].dtype) == "int64"
    assert list(merged["label"]) == list(a["label"]) * 2


def test_label_counts_are_those_of_the_rows_that_train(tmp_path: Path) -> None:
    from sts_core.training.data import build_train_dataset

    folder = tmp_path / "data" / "nli" / "snli-devtest"
    folder.mkdir(parents=True)
    labels = ["entailment"] * 6 + ["contradiction"] * 4
    (folder / "s1.dev").write_text("a man\n" * 10, encoding="utf-8")
    (folder / "s2.dev").write_text("a woman\n" * 10, encoding="utf-8")
    (folder / "labels.dev").write_text("\n".join(labels) + "\n", encoding="utf-8")
    data_args = DataArguments(
        data_dir=str(tmp_path / "data"),
        train_datasets=["snli:dev"],
        label_mapping={"contradiction": 0, "entailment": 2},
        max_train_samples=5,
    )
    train, summary = build_train_dataset(data_args, label_column="label")
    counts = summary["label_mapping"]["rows_per_value"]
    assert sum(counts.values()) == len(train) == 5
    assert counts == {f"{v:g}": train["label"].count(v) for v in sorted(set(train["label"]))}


def test_a_saved_heads_width_is_read_from_the_names_configs_use(tmp_path: Path) -> None:
    from sts_core.training.run import saved_heads

    (tmp_path / "sts_heads.json").write_text('{"heads": {"regression": {}}}', encoding="utf-8")
    for key in ("hidden_size", "n_embd", "d_model"):
        (tmp_path / "config.json").write_text(json.dumps({key: 48}), encoding="utf-8")
        assert saved_heads(str(tmp_path)) == ({"regression": {}}, 48)


def test_freeze_backbone_with_a_loss_without_head_stops_before_loading(
    tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    from sts_core.testing import write_fixture_recipe
    from sts_core.training.run import main

    def not_loaded(*args, **kwargs):
        raise AssertionError("the model was loaded before the check")

    monkeypatch.setattr("sts_core.encoder.model.SentenceEncoder.from_pretrained", not_loaded)
    fixtures = Path(__file__).parent / "fixtures" / "training"
    recipe = write_fixture_recipe(
        tmp_path / "r.yaml",
        "frozen",
        tiny_bert_dir,
        fixtures / "sts-train.csv",
        fixtures / "sts-dev.csv",
        tmp_path / "out",
        freeze_backbone="true",
        score_range="[0, 5]",
    )
    assert main(["--config", str(recipe)]) == 2
    assert "freeze_backbone: loss cosine_mse trains no head" in capsys.readouterr().err
