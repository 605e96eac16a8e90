"""``--check_only`` checks what the run checks before its first step: ``matryoshka_dims``
against the model's width and ``max_seq_length`` (``sts-eval --max-length``) against its
positions, read from its config files without loading weights; a check that can only run
after loading is one line, never a traceback (issue 61, item 5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sts_core.cli import eval_main
from sts_core.encoder.model_shape import (
    ModelShape,
    ModelShapeError,
    check_max_length,
    config_positions,
    read_model_shape,
)
from sts_core.testing import write_fixture_recipe
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
TRAIN, DEV = FIXTURES / "sts-train.csv", FIXTURES / "sts-dev.csv"
TINY_BERT_POSITIONS = 128  # sts_core.testing.models: hidden 32, 128 positions


def recipe(tmp_path: Path, model: Path, **overrides: str) -> Path:
    settings = {"score_range": "[0, 5]", **overrides}
    output_dir = tmp_path / "out"
    return write_fixture_recipe(
        tmp_path / "recipe.yaml", "shape", model, TRAIN, DEV, output_dir, **settings
    )


def one_error_line(capsys) -> str:
    """The one ``error:`` line on stderr (beside progress bars), no traceback."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error: " in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def write_config(folder: Path, config: dict, name: str = "config.json") -> Path:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(config), encoding="utf-8")
    return folder


# ----------------------------------------------------------------- the run and check_only
@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize("check_only", ["true", "false"])
@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--matryoshka_dims", "64", "matryoshka_dims [64]: 64 is wider than the model's "
         "embeddings (32 dimensions, {model}/config.json)"),
        ("--max_seq_length", "129", "max_seq_length 129 is more than the model's 128 "
         "positions ({model}/config.json)"),
    ],
)  # fmt: skip
def test_check_only_and_the_run_refuse_what_the_model_cannot_take_before_it_loads(
    tiny_bert_dir: Path, tmp_path: Path, capsys, flag, value, words, check_only
) -> None:
    argv = ["--config", str(recipe(tmp_path, tiny_bert_dir)), flag, value]
    assert main([*argv, "--check_only", check_only]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: command line ({flag}): ")
    assert words.format(model=tiny_bert_dir) in line
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("no_model_loading")
def test_a_recipes_length_is_named_by_its_line_and_the_models_own_width_passes(
    tiny_bert_dir: Path, tmp_path: Path, capsys
) -> None:
    path = recipe(tmp_path, tiny_bert_dir, max_seq_length="1000")
    assert main(["--config", str(path), "--check_only", "true"]) == 2
    assert one_error_line(capsys).startswith(f"error: {path}:20: max_seq_length 1000 is more")
    at_the_limit = ["--max_seq_length", str(TINY_BERT_POSITIONS), "--matryoshka_dims", "32", "8"]
    assert main(["--config", str(path), *at_the_limit, "--check_only", "true"]) == 0


def test_sts_eval_refuses_a_max_length_beyond_the_positions_before_loading(
    tiny_bert_dir: Path, capsys, monkeypatch
) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the model or the data was loaded before --max-length was checked")

    monkeypatch.setattr("sts_core.evaluation.sts.STSEvaluator.__init__", refuse)
    monkeypatch.setattr("sts_core.encoder.model.SentenceEncoder.from_pretrained", refuse)
    argv = ["--model", str(tiny_bert_dir), "--tasks", "stsb", "--max-length", "129"]
    assert eval_main(argv) == 2
    assert one_error_line(capsys) == (
        f"sts-eval: error: --max-length 129 is more than the model's 128 positions "
        f"({tiny_bert_dir}/config.json): a longer sentence would have no position "
        "embedding; use at most 128"
    )


# ----------------------------------------------------------------- after loading: one line
@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--matryoshka_dims", "64", "64 is wider than the model's embeddings (32 dimensions, "
         "the loaded model)"),
        ("--max_seq_length", "500", "max_length 500 is more than the model's 128 positions "
         "(the loaded model's config)"),
    ],
)  # fmt: skip
def test_a_shape_only_the_loaded_model_tells_is_one_line(
    tiny_bert_dir: Path, tmp_path: Path, capsys, monkeypatch, flag, value, words
) -> None:
    """Config files that do not say (a LoRA adapter on a hub model, say): the loaded model
    is checked, in one line."""
    monkeypatch.setattr(
        "sts_core.training.run.read_model_shape", lambda *a: ModelShape(), raising=False
    )
    assert main(["--config", str(recipe(tmp_path, tiny_bert_dir)), flag, value]) == 2
    assert words in one_error_line(capsys)


def test_an_encoder_longer_than_its_positions_is_refused(tiny_bert_dir: Path) -> None:
    from sts_core.encoder import SentenceEncoder

    with pytest.raises(ModelShapeError, match="max_length 129 is more than the model's 128"):
        SentenceEncoder.from_pretrained(tiny_bert_dir, max_length=129)
    assert SentenceEncoder.from_pretrained(tiny_bert_dir, max_length=128).max_length == 128


# ----------------------------------------------------------------- reading the config files
@pytest.mark.parametrize(
    ("config", "positions"),
    [
        ({"model_type": "bert", "max_position_embeddings": 512, "pad_token_id": 0}, 512),
        ({"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}, 512),
        ({"model_type": "mpnet", "max_position_embeddings": 514, "pad_token_id": 1}, 512),
        ({"model_type": "gpt2", "n_positions": 1024}, 1024),
        ({"model_type": "t5", "d_model": 512}, None),  # relative positions: no limit here
        ({"model_type": "roberta", "max_position_embeddings": 514}, 514),  # no pad id known
    ],
)
def test_positions_are_what_a_sentence_may_take(config: dict, positions: int | None) -> None:
    assert config_positions(config) == positions


def test_the_shape_of_local_folders_adapters_and_unreadable_configs(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    shape = read_model_shape(str(tiny_bert_dir))
    assert (shape.width, shape.positions) == (32, 128)
    adapter = write_config(tmp_path / "adapter", {"base_model_name_or_path": str(tiny_bert_dir)},
                           "adapter_config.json")  # fmt: skip
    assert read_model_shape(str(adapter)).positions == 128  # its base's config
    assert read_model_shape(str(adapter), base_model=str(tmp_path)).positions is None
    sentence_transformers = write_config(tmp_path / "st", {"model_type": "custom"})
    write_config(sentence_transformers, {"word_embedding_dimension": 48}, "1_Pooling/config.json")
    assert read_model_shape(str(sentence_transformers)).width == 48
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    assert read_model_shape(str(broken)) == ModelShape()  # loading it names the problem
    assert read_model_shape(str(tmp_path / "missing")) == ModelShape()
    check_max_length(10**6, ModelShape(), "max_seq_length")  # nothing known: no check


def test_a_hub_model_in_the_local_cache_is_read_from_its_config(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    snapshot = tmp_path / "models--org--tiny" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    shutil.copy(tiny_bert_dir / "config.json", snapshot / "config.json")
    (tmp_path / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "models--org--tiny" / "refs" / "main").write_text("abc", encoding="utf-8")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    assert read_model_shape("org/tiny").positions == 128
    assert read_model_shape("org/other") == ModelShape()
