"""LoRA round trip on a tiny Llama built in the test: an adapter save reloads with
SentenceEncoder.from_pretrained (and sts-eval's loader) and embeds bit for bit as before,
and loads with sentence-transformers to the same vectors; a merge_lora save loads with
transformers' AutoModel and sentence-transformers; a LoRA training run's output folder
loads back; resuming reads the adapter; the LoRA options.

References are independent of the encoder: each sentence run alone through
``transformers.AutoModel`` and its last token taken by hand, peft's own merge_and_unload."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from sts_core.encoder import SentenceEncoder, check_model_location
from sts_core.encoder.location import ADAPTER_CONFIG_NAME
from sts_core.encoder.lora import LORA_ADAPTER_DIR, is_lora_model, merged_lora_state
from sts_core.heads import LinearHead
from sts_core.saving import ENCODER_CONFIG_NAME
from sts_core.testing import make_tiny_llama, write_fixture_recipe
from sts_core.training.config import ModelArguments
from sts_core.training.parser import ConfigParser
from sts_core.training.peft_utils import apply_lora, lora_target_modules
from sts_core.training.run import main

peft = pytest.importorskip("peft")

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
TRAIN = FIXTURES / "sts-train.csv"
DEV = FIXTURES / "sts-dev.csv"
SENTENCES = [
    "a man is playing a guitar",
    "the dog",
    "two women are sitting on the beach with a big black dog",
    "a girl plays the piano",
    "someone is slicing an onion",
]
# the tiny Llama's linear layers: 7 a layer, 2 layers
LLAMA_LINEAR = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def _lora_args(base: Path, **overrides) -> ModelArguments:
    return ModelArguments(model_name_or_path=str(base), use_lora=True, lora_r=4, **overrides)


def _lora_encoder(base: Path, seed: int = 0, **overrides) -> SentenceEncoder:
    """A last-token encoder with LoRA (all-linear) whose B weights are not zero, so the
    adapter changes the embeddings."""
    encoder = SentenceEncoder.from_pretrained(base, pooling="last_token")
    apply_lora(encoder, _lora_args(base, **overrides))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in encoder.backbone.named_parameters():
            if "lora_B" in name:
                parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
    return encoder


def _embed(encoder: SentenceEncoder) -> np.ndarray:
    return encoder.encode(SENTENCES, show_progress_bar=False)


def _last_token_by_hand(model: torch.nn.Module, tokenizer, sentences: list[str]) -> np.ndarray:
    """Each sentence alone (no padding) through ``model``; its last token's state."""
    rows = []
    with torch.inference_mode():
        for sentence in sentences:
            ids = tokenizer(sentence, return_tensors="pt")
            rows.append(model(**ids).last_hidden_state[0, -1].float().numpy())
    return np.stack(rows)


# ----------------------------------------------------------------- the adapter folder
def test_adapter_save_reloads_bit_for_bit(tiny_llama_dir: Path, tmp_path: Path) -> None:
    base_embeddings = _embed(SentenceEncoder.from_pretrained(tiny_llama_dir, pooling="last_token"))
    encoder = _lora_encoder(tiny_llama_dir)
    wrapped = {
        name.rsplit(".", 1)[-1]
        for name, module in encoder.backbone.named_modules()
        if isinstance(module, peft.tuners.lora.LoraLayer)
    }
    assert wrapped == LLAMA_LINEAR  # all-linear, the default
    encoder.add_head("regression", LinearHead.for_pairs(encoder.dimension), pair_scorer=True)
    embeddings = _embed(encoder)
    assert np.abs(embeddings - base_embeddings).max() > 1e-2  # the adapter is not a no-op
    encoder.save_pretrained(tmp_path / "adapter")

    folder = tmp_path / "adapter"
    assert (folder / ADAPTER_CONFIG_NAME).is_file() and (folder / "tokenizer.json").is_file()
    assert not (folder / "config.json").exists() and not (folder / "model.safetensors").exists()
    config = json.loads((folder / ENCODER_CONFIG_NAME).read_text())
    assert config["base_model_name_or_path"] == str(tiny_llama_dir.resolve())
    assert config["lora"]["merged"] is False and config["lora"]["r"] == 4
    assert set(config["lora"]["target_modules"]) == LLAMA_LINEAR
    assert config["pooling"] == "last_token"
    assert check_model_location(folder) == str(folder)

    reloaded = SentenceEncoder.from_pretrained(folder)
    assert is_lora_model(reloaded.backbone) and reloaded.pooling == "last_token"
    assert not any(p.requires_grad for p in reloaded.backbone.parameters())  # frozen
    np.testing.assert_array_equal(_embed(reloaded), embeddings)
    u, v = torch.from_numpy(embeddings[:2]), torch.from_numpy(embeddings[2:4])
    with torch.no_grad():
        assert torch.equal(reloaded.score_pairs(u, v), encoder.score_pairs(u, v))

    # sts-eval loads models with the same function
    from sts_core.cli import load_encoder, make_eval_parser

    args = make_eval_parser().parse_args(["--model", str(folder), "--device", "cpu"])
    np.testing.assert_array_equal(_embed(load_encoder(args)), embeddings)

    merged = SentenceEncoder.from_pretrained(folder, merge_lora=True)
    assert not is_lora_model(merged.backbone)
    np.testing.assert_allclose(_embed(merged), embeddings, rtol=1e-5, atol=1e-5)

    # sentence-transformers loads the adapter folder too (its base from adapter_config.json,
    # then the adapter): the same vectors, which the base alone does not give
    from sentence_transformers import SentenceTransformer

    peer = SentenceTransformer(str(folder), device="cpu")
    np.testing.assert_allclose(peer.encode(SENTENCES), embeddings, rtol=0, atol=1e-5)


def test_adapter_folder_base_model_is_found_or_named(tmp_path: Path) -> None:
    base = make_tiny_llama(tmp_path / "base", seed=3)
    encoder = _lora_encoder(base)
    embeddings = _embed(encoder)
    encoder.save_pretrained(tmp_path / "adapter")
    moved = tmp_path / "moved-base"
    shutil.move(base, moved)
    with pytest.raises(FileNotFoundError, match="base model of the LoRA adapter") as info:
        SentenceEncoder.from_pretrained(tmp_path / "adapter")
    assert str(base) in str(info.value) and "base_model=" in str(info.value)
    reloaded = SentenceEncoder.from_pretrained(tmp_path / "adapter", base_model=moved)
    np.testing.assert_array_equal(_embed(reloaded), embeddings)


def test_sts_eval_names_base_model_flag_for_a_moved_base(tmp_path: Path, capsys) -> None:
    """sts-eval of an adapter whose recorded base moved: one line naming --base-model (not
    the Python argument); with --base-model at the new place it scores the adapter."""
    from sts_core.cli import eval_main

    base = make_tiny_llama(tmp_path / "base", seed=4)
    _lora_encoder(base).save_pretrained(tmp_path / "adapter")
    moved = tmp_path / "moved-base"
    shutil.move(base, moved)
    data = Path(__file__).parent / "fixtures" / "data"
    argv = ["--model", str(tmp_path / "adapter"), "--data-dir", str(data), "--tasks", "stsb"]
    argv += ["--device", "cpu", "--quiet", "--output", str(tmp_path / "scores")]
    capsys.readouterr()  # the progress bars of building the models

    assert eval_main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sts-eval: error: "), captured.err
    assert "base model of the LoRA adapter" in lines[0] and str(base) in lines[0]
    assert "--base-model PATH" in lines[0] and "base_model=" not in lines[0]
    assert not (tmp_path / "scores.json").exists()

    assert eval_main([*argv, "--base-model", str(moved)]) == 0
    assert "STS-B" in capsys.readouterr().out
    saved = json.loads((tmp_path / "scores.json").read_text())
    assert saved["tasks"]["stsb"]["size"] >= 2 and saved["scorer"] == "cosine"

    # from Python the same error names the argument, not the flag
    with pytest.raises(FileNotFoundError, match="base model of the LoRA adapter") as info:
        SentenceEncoder.from_pretrained(tmp_path / "adapter")
    assert "base_model=PATH to SentenceEncoder.from_pretrained" in str(info.value)
    assert "--base-model" not in str(info.value)


def test_adapter_folder_without_tokenizer_is_refused(tiny_llama_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "adapter"
    peft_model = peft.get_peft_model(
        SentenceEncoder.from_pretrained(tiny_llama_dir).backbone,
        peft.LoraConfig(r=2, target_modules="all-linear"),
    )
    peft_model.save_pretrained(folder)  # peft's own adapter folder: no tokenizer
    with pytest.raises(FileNotFoundError, match="no tokenizer files"):
        check_model_location(folder)
    shutil.copy(tiny_llama_dir / "tokenizer.json", folder)
    shutil.copy(tiny_llama_dir / "tokenizer_config.json", folder)
    # a plain peft folder: the base is the adapter's base_model_name_or_path
    reloaded = SentenceEncoder.from_pretrained(folder)
    assert is_lora_model(reloaded.backbone)


# ----------------------------------------------------------------- merge_lora
def test_merge_lora_save_loads_with_automodel_and_sentence_transformers(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    from transformers import AutoModel, AutoTokenizer

    encoder = _lora_encoder(tiny_llama_dir, merge_lora=True)
    assert encoder.merge_lora
    embeddings = _embed(encoder)
    # the merged weights are peft's merge_and_unload's
    reference = copy.deepcopy(encoder.backbone).merge_and_unload().state_dict()
    merged = merged_lora_state(encoder.backbone)
    assert merged.keys() == reference.keys()
    for key, value in reference.items():
        torch.testing.assert_close(merged[key], value, rtol=1e-6, atol=1e-6, msg=key)
    assert is_lora_model(encoder.backbone)  # the live model is untouched
    folder = tmp_path / "merged"
    encoder.save_pretrained(folder)

    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    assert not (folder / ADAPTER_CONFIG_NAME).exists()
    assert (folder / LORA_ADAPTER_DIR / ADAPTER_CONFIG_NAME).is_file()
    assert json.loads((folder / ENCODER_CONFIG_NAME).read_text())["lora"]["merged"] is True

    model = AutoModel.from_pretrained(folder)
    assert type(model).__name__ == "LlamaModel"
    by_hand = _last_token_by_hand(model, AutoTokenizer.from_pretrained(folder), SENTENCES)
    np.testing.assert_allclose(by_hand, embeddings, rtol=1e-5, atol=1e-5)

    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu")
    np.testing.assert_allclose(st.encode(SENTENCES), embeddings, rtol=1e-5, atol=1e-5)

    plain = SentenceEncoder.from_pretrained(folder)
    assert not is_lora_model(plain.backbone) and plain.pooling == "last_token"
    np.testing.assert_allclose(_embed(plain), embeddings, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("merge", [False, True])
def test_load_weights_resumes_the_adapter(tiny_llama_dir: Path, tmp_path: Path, merge) -> None:
    """What resuming and load_best_model_at_end do: the same LoRA layout, fresh adapter
    weights, then load_weights(folder)."""
    encoder = _lora_encoder(tiny_llama_dir, seed=0)
    encoder.add_head("classifier", LinearHead.for_pairs(encoder.dimension, 3))
    encoder.save_pretrained(tmp_path, merge_lora=merge)
    resumed = _lora_encoder(tiny_llama_dir, seed=1)
    resumed.add_head("classifier", LinearHead.for_pairs(resumed.dimension, 3))
    assert not np.array_equal(_embed(resumed), _embed(encoder))
    resumed.load_weights(tmp_path)
    for key, value in encoder.state_dict().items():
        assert torch.equal(resumed.state_dict()[key], value), key

    other = _lora_encoder(tiny_llama_dir, lora_target_modules=["q_proj", "v_proj"])
    with pytest.raises(OSError, match="does not fit"):
        other.load_weights(tmp_path)
    plain = SentenceEncoder.from_pretrained(tiny_llama_dir, pooling="last_token")
    if not merge:
        with pytest.raises(OSError, match="no LoRA backbone"):
            plain.load_weights(tmp_path)


def test_training_continues_a_loaded_adapter(tiny_llama_dir: Path, tmp_path: Path) -> None:
    """Stage 2 from stage 1's adapter: the loaded adapter becomes trainable (the base stays
    frozen), and its save records the original base model."""
    encoder = _lora_encoder(tiny_llama_dir)
    encoder.save_pretrained(tmp_path / "stage1")
    stage2 = SentenceEncoder.from_pretrained(tmp_path / "stage1")
    apply_lora(stage2, _lora_args(tmp_path / "stage1"))
    trainable = {n for n, p in stage2.backbone.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    assert len(trainable) == 2 * 2 * len(LLAMA_LINEAR)  # A and B, 2 layers
    with torch.no_grad():
        for parameter in stage2.backbone.parameters():
            if parameter.requires_grad:
                parameter.add_(0.01)
    stage2.save_pretrained(tmp_path / "stage2")
    config = json.loads((tmp_path / "stage2" / ENCODER_CONFIG_NAME).read_text())
    assert config["base_model_name_or_path"] == str(tiny_llama_dir.resolve())
    np.testing.assert_array_equal(
        _embed(SentenceEncoder.from_pretrained(tmp_path / "stage2")), _embed(stage2)
    )


# ----------------------------------------------------------------- options
def test_lora_options_and_their_checks(tiny_llama_dir: Path, tmp_path: Path) -> None:
    defaults = ModelArguments(model_name_or_path="m")
    assert (defaults.lora_r, defaults.lora_alpha, defaults.lora_dropout) == (8, 16, 0.05)
    assert defaults.lora_target_modules == ["all-linear"] and defaults.merge_lora is False
    assert lora_target_modules(defaults) == "all-linear"
    named = ModelArguments(model_name_or_path="m", lora_target_modules=["q_proj", "v_proj"])
    assert lora_target_modules(named) == ["q_proj", "v_proj"]
    assert lora_target_modules(ModelArguments(lora_target_modules=None)) is None
    assert ModelArguments(lora_target_modules="all-linear").lora_target_modules == ["all-linear"]

    model_args, _, _ = ConfigParser().parse(
        [
            "--model_name_or_path", str(tiny_llama_dir),
            "--use_lora", "true",
            "--lora_r", "64",
            "--lora_alpha", "16",
            "--lora_dropout", "0.1",
            "--lora_target_modules", "q_proj", "v_proj",
            "--merge_lora", "true",
            "--output_dir", str(tmp_path / "out"),
        ]
    )  # fmt: skip
    assert model_args.lora_r == 64 and model_args.lora_dropout == 0.1
    assert model_args.lora_target_modules == ["q_proj", "v_proj"] and model_args.merge_lora

    bad = [
        ({"lora_alpha": 0}, "lora_alpha must be above 0"),
        ({"lora_dropout": 1.0}, r"lora_dropout must be in \[0, 1\)"),
        ({"lora_r": 0}, "lora_r must be at least 1"),
        ({"lora_target_modules": ["all-linear", "q_proj"]}, "all-linear stands alone"),
        ({"lora_target_modules": []}, "module names or all-linear"),
        ({"merge_lora": True}, "needs use_lora"),
        ({"merge_lora": True, "use_lora": True, "load_in_4bit": True}, "4-bit"),
    ]
    for overrides, message in bad:
        with pytest.raises(ValueError, match=message):
            ModelArguments(model_name_or_path="m", **overrides)

    encoder = _lora_encoder(tiny_llama_dir)
    encoder.save_pretrained(tmp_path / "adapter")
    with pytest.raises(ValueError, match="is a LoRA adapter folder: set use_lora"):
        ModelArguments(model_name_or_path=str(tmp_path / "adapter"))
    ModelArguments(model_name_or_path=str(tmp_path / "adapter"), use_lora=True)


# ----------------------------------------------------------------- a training run
@pytest.mark.slow
@pytest.mark.parametrize("merge", ["false", "true"])
def test_lora_training_run_output_loads_back(
    tiny_llama_dir: Path, tmp_path: Path, merge: str
) -> None:
    output_dir = tmp_path / "out"
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml",
        "LoRA on a tiny Llama",
        tiny_llama_dir,
        TRAIN,
        DEV,
        output_dir,
        score_range="[0, 5]",
        load_best_model_at_end="true",  # the best checkpoint's adapter is loaded back
    )
    argv = ["--config", str(recipe), "--use_lora", "true", "--pooling", "last_token"]
    assert main([*argv, "--merge_lora", merge]) == 0

    base = _embed(SentenceEncoder.from_pretrained(tiny_llama_dir, pooling="last_token"))
    reloaded = SentenceEncoder.from_pretrained(output_dir)
    assert reloaded.pooling == "last_token"
    assert is_lora_model(reloaded.backbone) == (merge == "false")
    trained = _embed(reloaded)
    assert np.abs(trained - base).max() > 1e-4  # the adapter was trained
    assert (output_dir / "config.json").is_file() == (merge == "true")
    checkpoints = sorted(output_dir.glob("checkpoint-*"))
    assert checkpoints  # each loads too: the best one or the last one for resuming
    for checkpoint in checkpoints:
        SentenceEncoder.from_pretrained(checkpoint)
    if merge == "true":
        from transformers import AutoModel, AutoTokenizer

        model = AutoModel.from_pretrained(output_dir)
        by_hand = _last_token_by_hand(model, AutoTokenizer.from_pretrained(output_dir), SENTENCES)
        np.testing.assert_allclose(by_hand, trained, rtol=1e-5, atol=1e-5)
    else:
        from sts_core.cli import load_encoder, make_eval_parser

        args = make_eval_parser().parse_args(["--model", str(output_dir), "--device", "cpu"])
        np.testing.assert_array_equal(_embed(load_encoder(args)), trained)
