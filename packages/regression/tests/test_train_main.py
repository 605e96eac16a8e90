"""``main()`` of packages/regression/train.py end to end (tier 4) on fixture files and a tiny
BERT: STS scores, NLI classes mapped to 0/1/2, the two stages of §4.2 through the output
folder, and every bad input stopped with one line before the model is loaded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sts_core.testing import (
    PackageFiles,
    bad_recipe_tests,
    one_line_error,
    read_metrics,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FILES = PackageFiles(__file__)


main = FILES.main


def write_recipe(
    path: Path, model: Path, output_dir: Path, train: Path | None = None, **overrides: str
) -> Path:
    lines = {"loss": "smooth_k2", **overrides}
    return FILES.recipe(path, "regression on fixture files", model, output_dir, train, **lines)


def write_nli_csv(path: Path) -> Path:
    """An NLI csv (the official SNLI csv layout) with the three classes."""
    rows = [  # 4 entailment, 1 neutral, 3 contradiction: every class count differs
        ("a man plays a guitar", "a man plays music", "entailment"),
        ("a man plays a guitar", "a man sleeps", "contradiction"),
        ("a dog runs in a park", "an animal is outside", "entailment"),
        ("a dog runs in a park", "a cat sleeps", "contradiction"),
        ("two boys play soccer", "the boys are friends", "neutral"),
        ("a woman rides a horse", "a person is on a horse", "entailment"),
        ("a child plays piano", "a child makes music", "entailment"),
        ("a child plays piano", "nobody is playing", "contradiction"),
    ]
    lines = ["pairID,sentence1,sentence2,label"] + [
        f"{i},{a},{b},{label}" for i, (a, b, label) in enumerate(rows)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_main_trains_on_sts_scores_and_reports_cosine_and_head(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    output_dir = tmp_path / "out"
    recipe = write_recipe(
        tmp_path / "r.yaml", tiny_bert_dir, output_dir, k="3", x0="0.2", layer_lr_decay="0.9"
    )
    assert main(["--config", str(recipe)]) == 0
    metrics = read_metrics(output_dir)
    assert math.isfinite(metrics["train"]["train_loss"]) and metrics["train"]["train_loss"] > 0
    assert metrics["data"]["train_pairs"] == 16
    assert set(metrics["dev"]) >= {"eval_dev_spearman", "eval_dev_pearson"}
    assert list(metrics["final"]) == [str(FILES.test)]
    assert set(metrics["head"]) == {"dev_head_spearman", "dev_head_pearson"}
    heads = json.loads((output_dir / "sts_heads.json").read_text(encoding="utf-8"))
    assert heads["heads"]["regression"]["config"]["out_features"] == 1
    assert heads["pair_scorer"] is None


def test_main_maps_nli_classes_and_clamps_below_the_label_range(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    train = write_nli_csv(tmp_path / "nli.csv")
    output_dir = tmp_path / "out"
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_dir,
        output_dir,
        train,
        label_column="label",
        label_mapping="{contradiction: 0, neutral: 1, entailment: 2}",
        label_range="[0, 2]",
        clamp_predictions="low",
    )
    assert main(["--config", str(recipe)]) == 0
    metrics = read_metrics(output_dir)
    assert metrics["data"]["label_mapping"] == {  # contradiction 0, neutral 1, entailment 2
        "column": "label",
        "rows_per_value": {"0": 3, "1": 1, "2": 4},
    }
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    assert "clamp low" in card and "label_range [0.0, 2.0]" in card


def test_softmax_baseline_reads_the_classes_in_sbert_order(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    train = write_nli_csv(tmp_path / "nli.csv")
    output_dir = tmp_path / "out"
    recipe = write_recipe(
        tmp_path / "r.yaml",
        tiny_bert_dir,
        output_dir,
        train,
        loss="softmax",
        label_mapping="{contradiction: 0, entailment: 1, neutral: 2}",
    )
    assert main(["--config", str(recipe)]) == 0
    metrics = read_metrics(output_dir)
    # SBERT's order: contradiction 0, entailment 1, neutral 2
    assert metrics["data"]["label_mapping"]["rows_per_value"] == {"0": 3, "1": 4, "2": 1}
    assert "head" not in metrics  # no regression head to score with
    heads = json.loads((output_dir / "sts_heads.json").read_text(encoding="utf-8"))
    assert heads["heads"]["softmax_classifier"]["config"]["out_features"] == 3


def test_two_stages_through_the_output_folder(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """Stage 1 freezes the encoder and trains the head on NLI; stage 2 starts from stage 1's
    folder, with its head, and trains everything on STS scores."""
    stage1, stage2 = tmp_path / "stage1", tmp_path / "stage2"
    nli = write_nli_csv(tmp_path / "nli.csv")
    first = write_recipe(
        tmp_path / "s1.yaml",
        tiny_bert_dir,
        stage1,
        nli,
        freeze_backbone="true",
        label_column="label",
        label_mapping="{contradiction: 0, neutral: 1, entailment: 2}",
        eval_dataset="none",
        save_strategy='"no"',
        eval_strategy='"no"',
        learning_rate="0.05",
    )
    assert main(["--config", str(first)]) == 0
    original = load_file(tiny_bert_dir / "model.safetensors")
    after_stage1 = load_file(stage1 / "model.safetensors")
    assert all(torch.equal(after_stage1[k], v) for k, v in original.items())
    head1 = load_file(stage1 / "sts_extra_modules.safetensors")
    assert set(head1) == {"regression.weight", "regression.bias"}

    from sts_core.encoder import SentenceEncoder

    starts = {}
    original_from_pretrained = SentenceEncoder.from_pretrained.__func__

    def recording(cls, location, *args, **kwargs):  # the heads stage 2 starts from
        encoder = original_from_pretrained(cls, location, *args, **kwargs)
        starts.update({k: v.detach().clone() for k, v in encoder.state_dict().items()})
        return encoder

    second = write_recipe(tmp_path / "s2.yaml", stage1, stage2, x0="0.2", k="3")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SentenceEncoder, "from_pretrained", classmethod(recording))
        assert main(["--config", str(second)]) == 0
    assert torch.equal(starts["regression.weight"], head1["regression.weight"])
    assert torch.equal(starts["regression.bias"], head1["regression.bias"])
    head2 = load_file(stage2 / "sts_extra_modules.safetensors")
    assert not torch.equal(head2["regression.weight"], head1["regression.weight"])
    after_stage2 = load_file(stage2 / "model.safetensors")
    assert any(not torch.equal(after_stage2[k], v) for k, v in original.items())


def test_a_second_stage_with_another_head_stops_before_loading(
    tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    stage1 = tmp_path / "stage1"
    first = write_recipe(tmp_path / "s1.yaml", tiny_bert_dir, stage1, max_steps="1")
    assert main(["--config", str(first)]) == 0
    capsys.readouterr()

    def not_loaded(*args, **kwargs):
        raise AssertionError("the model was loaded before its head was checked")

    monkeypatch.setattr("sts_core.encoder.model.SentenceEncoder.from_pretrained", not_loaded)
    second = write_recipe(tmp_path / "s2.yaml", stage1, tmp_path / "s2", pair_features="u,v")
    assert main(["--config", str(second)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "already has a 'regression' head" in line and "'u,v'" in line
    assert not (tmp_path / "s2").exists()


BAD_INPUTS = [
    ({"k": "0"}, "k must be finite and > 0"),
    ({"x0": "0.6"}, "x0 must lie in [0, d/2] = [0, 0.5]"),
    ({"x0": "0.3", "label_spacing": "0.5"}, "[0, 0.25]"),
    ({"clamp_predictions": "low"}, "needs label_range"),
    ({"clamp_predictions": "sideways", "label_range": "[0, 5]"}, "clamp_predictions 'sideways'"),
    (
        {"label_range": "[0, 4]"},
        "5 training label(s) in column 'score' lie outside label_range [0, 4]",
    ),
    ({"label_range": "[2, 1]"}, "label_range must be [low, high]"),
    ({"pair_features": "u*v"}, "pair_features 'u*v'"),
    ({"loss": "huber"}, "loss 'huber' is not one of"),
    ({"loss": "softmax"}, "no label column 'label'"),
    ({"freeze_backbone": "true", "use_lora": "true"}, "freeze_backbone with use_lora"),
    ({"layer_lr_decay": "1.5"}, "layer_lr_decay must be in (0, 1]"),
    ({"label_mapping": "{0: 1}"}, "label_mapping has no entry for the value(s)"),
    ({"fp16": "true"}, "fp16: true needs a GPU"),
]


TestBadRecipes = bad_recipe_tests(main, write_recipe, BAD_INPUTS)


def test_nli_class_ids_without_a_mapping_are_refused(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    """The readers' ids (entailment 0 … contradiction 2) would train the order backwards."""
    train = write_nli_csv(tmp_path / "nli.csv")
    recipe = write_recipe(
        tmp_path / "r.yaml", tiny_bert_dir, tmp_path / "out", train, label_column="label"
    )
    assert main(["--config", str(recipe)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "class ids of column 'label' (int64)" in line and "label_mapping" in line


def test_a_single_sentence_file_is_refused_naming_the_column(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    sentences = tmp_path / "wiki1m_sentences.txt"
    sentences.write_text("one sentence here\nanother sentence there\n", encoding="utf-8")
    recipe = write_recipe(tmp_path / "r.yaml", tiny_bert_dir, tmp_path / "out", sentences)
    assert main(["--config", str(recipe)]) == 2
    assert "no column sentence1, sentence2" in one_line_error(capsys.readouterr().err)
