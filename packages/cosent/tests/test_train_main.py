"""``main()`` of packages/cosent/train.py end to end (tier 4) on fixture files in the STS-B
format and a tiny BERT, and every recipe in packages/cosent/configs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from sts_core.cross_encoder import predict_pair_scores
from sts_core.encoder import SentenceEncoder
from sts_core.testing import PackageFiles, refusal
from sts_core.training import BaseTrainer, ConfigParser, trainer_class
from sts_cosent import METHOD, CoSENTConfig, CoSENTCrossEncoderTrainer

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FILES = PackageFiles(__file__)
PACKAGE = FILES.package
REPO = PACKAGE.parents[1]
CONFIGS = sorted((PACKAGE / "configs").glob("*.yaml"))
TRAIN = FILES.train  # genre, file, year, id, score, sentence1, sentence2
DEV = FILES.dev
TEST = FILES.test


main = FILES.main


def read_pairs(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
    return [r[5] for r in rows], [r[6] for r in rows], np.array([float(r[4]) for r in rows])


def write_recipe(path: Path, model: Path, output_dir: Path, **overrides: str) -> Path:
    """The fixture recipe for CoSENT; ``overrides`` replace or add lines (YAML text)."""
    lines = {"loss": "cosent", **overrides}
    return FILES.recipe(path, "CoSENT on fixture STS-B files", model, output_dir, **lines)


def test_fixture_files_are_in_the_stsb_format() -> None:
    for path in (TRAIN, DEV, TEST):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert len(lines) >= 8 and all(len(line.split("\t")) == 7 for line in lines)
        assert all(0 <= float(line.split("\t")[4]) <= 5 for line in lines)


def check_metrics(output_dir: Path) -> dict:
    written = json.loads((output_dir / "metrics.json").read_text(encoding="utf-8"))
    assert math.isfinite(written["train"]["train_loss"]) and written["train"]["train_loss"] > 0
    assert written["data"]["train_pairs"] == 16
    assert set(written["dev"]) >= {"eval_dev_spearman", "eval_dev_pearson"}
    assert list(written["final"]) == [str(TEST)]
    return written


def cosine_spearman(encoder: SentenceEncoder, path: Path) -> float:
    """Spearman × 100 of ``encoder``'s cosines on the pairs of ``path`` (numpy, scipy)."""
    first, second, gold = read_pairs(path)
    u = encoder.encode(first, show_progress_bar=False).astype(np.float64)
    v = encoder.encode(second, show_progress_bar=False).astype(np.float64)
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    return 100 * float(spearmanr(cosine, gold).statistic)


def final_spearman(written: dict) -> float:
    (key,) = [k for k in written["final"][str(TEST)] if k.endswith("_spearman")]
    return written["final"][str(TEST)][key]


def test_main_trains_a_bi_encoder_and_writes_metrics(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    output_dir = tmp_path / "out"
    recipe = write_recipe(tmp_path / "recipe.yaml", tiny_bert_nodropout_dir, output_dir)
    assert main(["--config", str(recipe)]) == 0
    written = check_metrics(output_dir)
    state = json.loads((output_dir / "checkpoint-4" / "trainer_state.json").read_text())
    evaluations = {e["step"]: e for e in state["log_history"] if "eval_dev_spearman" in e}
    assert list(evaluations) == [0, 2, 4]  # 0: the untrained model, before the first step

    # the recipe keeps the final model (no load_best_model_at_end), the one saved to
    # output_dir: the dev score is its Spearman on the dev file, recomputed here, and the
    # same as the last evaluation during training (step 4, the same weights); the final
    # score is its Spearman on the test file
    encoder = SentenceEncoder.from_pretrained(output_dir)
    dev_spearman = written["dev"]["eval_dev_spearman"]
    assert dev_spearman == pytest.approx(cosine_spearman(encoder, DEV), abs=1e-4)
    assert dev_spearman == pytest.approx(evaluations[4]["eval_dev_spearman"], abs=1e-4)
    assert final_spearman(written) == pytest.approx(cosine_spearman(encoder, TEST), abs=1e-3)
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    assert "`cosent` method" in card and "@article{huang2024cosent" in card


def test_main_trains_a_cross_encoder_and_writes_metrics(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    output_dir = tmp_path / "out"
    recipe = write_recipe(
        tmp_path / "recipe.yaml", tiny_bert_nodropout_dir, output_dir, architecture="cross-encoder"
    )
    assert main(["--config", str(recipe)]) == 0
    written = check_metrics(output_dir)

    model = AutoModelForSequenceClassification.from_pretrained(output_dir)
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    assert model.config.num_labels == 1
    first, second, gold = read_pairs(TEST)
    expected = 100 * spearmanr(predict_pair_scores(model, tokenizer, first, second), gold).statistic
    assert final_spearman(written) == pytest.approx(expected, abs=1e-3)
    dev_first, dev_second, dev_gold = read_pairs(DEV)
    dev_scores = predict_pair_scores(model, tokenizer, dev_first, dev_second)
    assert written["dev"]["eval_dev_spearman"] == pytest.approx(
        100 * spearmanr(dev_scores, dev_gold).statistic, abs=1e-3
    )
    assert "CoSENT" in (output_dir / "README.md").read_text(encoding="utf-8")


def test_main_returns_2_on_an_unknown_key(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = write_recipe(
        tmp_path / "bad.yaml", tiny_bert_nodropout_dir, tmp_path / "out", cosent_scal="20"
    )
    assert main(["--config", str(recipe)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("error: ") and str(recipe) in err
    assert "cosent_scal" in err and "cosent_scale" in err  # the key and the closest known one
    assert not (tmp_path / "out").exists()


def test_main_returns_2_on_an_unknown_loss(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = write_recipe(tmp_path / "r.yaml", tiny_bert_nodropout_dir, tmp_path / "out")
    assert main(["--config", str(recipe), "--loss", "bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("error: ") and "'bogus'" in err and "cosent" in err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- recipes


def test_there_are_recipes() -> None:
    names = {path.name for path in CONFIGS}
    assert {"stsb.yaml", "cross_encoder_stsb.yaml", "nli.yaml"} <= names


def bf16_device() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


@pytest.mark.parametrize("recipe", CONFIGS, ids=lambda path: path.name)
def test_recipe_parses(recipe: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STS_MODELS_DIR", "/dummy/models")
    argv = ["--config", str(recipe)]
    if "bf16: true" in recipe.read_text(encoding="utf-8") and not bf16_device():
        argv += ["--use_cpu", "true"]  # TrainingArguments refuses bf16 without a bf16 GPU
    model_args, data_args, config = ConfigParser.for_method(METHOD).parse(argv)
    assert isinstance(config, CoSENTConfig)
    assert model_args.model_name_or_path and "$" not in model_args.model_name_or_path
    if "${STS_MODELS_DIR}" in recipe.read_text(encoding="utf-8"):
        assert model_args.model_name_or_path.startswith("/dummy/models/")
    assert data_args.train_datasets
    expected = CoSENTCrossEncoderTrainer if config.architecture == "cross-encoder" else BaseTrainer
    assert trainer_class(METHOD, config) is expected


def launch_command(recipe: Path) -> str:
    """The leading comment block, with ``\\`` continuation lines joined."""
    lines = recipe.read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].startswith("#"), f"{recipe.name} must open with a comment"
    comment = []
    for line in lines:
        if not line.startswith("#"):
            break
        comment.append(line.lstrip("#").strip())
    return re.sub(r"\s*\\\s*\n\s*", " ", "\n".join(comment))


@pytest.mark.parametrize("recipe", CONFIGS, ids=lambda path: path.name)
def test_recipe_opens_with_its_launch_command(recipe: Path) -> None:
    text = launch_command(recipe)
    pattern = (
        r"accelerate launch (?:--config_file (?P<config_file>\S+) )?"
        r"packages/cosent/train\.py --config packages/cosent/configs/"
        + re.escape(recipe.name)
        + r"(?=\s|$)"
    )
    match = re.search(pattern, text)
    assert match, f"{recipe.name}: no launch command for itself in its opening comment"
    if match["config_file"]:
        assert (REPO / match["config_file"]).is_file(), match["config_file"]


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("--cosent_scale=nan", "cosent_scale must be finite and > 0, got nan"),
        ("--learning_rate=-inf", "learning_rate must be finite and > 0, got -inf"),
        ("--contrastive_margin=1.5", "contrastive_margin must be in [0, 1), got 1.5"),
    ],
)
def test_main_stops_with_one_line_and_status_2_before_the_model_loads(
    flag: str, words: str, tiny_bert_dir: Path, tmp_path: Path, capsys, no_model_loading
) -> None:
    recipe = FILES.recipe(
        tmp_path / "r.yaml", "CoSENT, a flag out of range", tiny_bert_dir, tmp_path / "out"
    )
    assert words in refusal(main, ["--config", str(recipe), flag], capsys)
    assert not (tmp_path / "out").exists()


def test_the_cross_encoder_refuses_several_training_sets_before_the_model_loads(
    tiny_bert_dir: Path, tmp_path: Path, capsys, no_model_loading
) -> None:
    """Each set's loss is picked by the bi-encoder's compute_loss; the cross-encoder
    computes its own, so a mapping of training sets is one line, not a silent single loss."""
    recipe = FILES.recipe(
        tmp_path / "r.yaml",
        "CoSENT cross-encoder on two sets",
        tiny_bert_dir,
        tmp_path / "out",
        architecture="cross-encoder",
        train_datasets=f"{{a: {TRAIN}, b: {{path: {TRAIN}, loss: cosent}}}}",
    )
    words = "trains with CoSENTCrossEncoderTrainer, which computes its own loss"
    assert words in refusal(main, ["--config", str(recipe)], capsys)
    assert not (tmp_path / "out").exists()
