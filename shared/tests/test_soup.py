"""Model soups: ``average_state_dicts`` and the ``sts-soup`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sts_core.encoder import SentenceEncoder
from sts_core.soup import main as soup_main
from sts_core.testing import make_tiny_bert, make_tiny_llama
from sts_core.training.averaging import average_state_dicts


def test_average_state_dicts_is_the_mean_of_float_tensors_and_keeps_integer_buffers():
    first = {"w": torch.tensor([1.0, 2.0]), "ids": torch.tensor([0, 1])}
    second = {"w": torch.tensor([3.0, 6.0]), "ids": torch.tensor([0, 1])}
    third = {"w": torch.tensor([2.0, 1.0]), "ids": torch.tensor([0, 1])}
    soup = average_state_dicts([first, second, third])
    assert torch.allclose(soup["w"], torch.tensor([2.0, 3.0]))
    assert torch.equal(soup["ids"], torch.tensor([0, 1]))


def test_average_state_dicts_keeps_half_precision_and_averages_in_float32():
    big = torch.tensor([60000.0], dtype=torch.float16)  # the float16 sum would overflow
    soup = average_state_dicts([{"w": big}, {"w": big}])
    assert soup["w"].dtype == torch.float16
    assert soup["w"].item() == 60000.0


@pytest.mark.parametrize(
    ("second", "message"),
    [
        ({"w": torch.zeros(2)}, "missing ['ids']"),
        ({"w": torch.zeros(3), "ids": torch.tensor([0, 1])}, "w has shape (3,)"),
        ({"w": torch.zeros(2), "ids": torch.tensor([0, 2])}, "ids differs"),
    ],
)
def test_average_state_dicts_refuses_models_that_do_not_match(second, message):
    first = {"w": torch.ones(2), "ids": torch.tensor([0, 1])}
    with pytest.raises(ValueError, match="run b") as error:
        average_state_dicts([first, second], ["run a", "run b"])
    assert message in str(error.value)


def _saved_encoder(folder: Path, seed: int, pooling: str = "mean") -> Path:
    backbone = make_tiny_bert(folder.with_name(folder.name + "-backbone"), seed=seed)
    SentenceEncoder.from_pretrained(str(backbone), pooling=pooling).save_pretrained(folder)
    return folder


def test_sts_soup_saves_the_average_of_the_runs(tmp_path, capsys):
    runs = [_saved_encoder(tmp_path / f"seed{seed}", seed) for seed in (0, 1, 2)]
    assert soup_main([*map(str, runs), "--output", str(tmp_path / "soup")]) == 0
    assert "averaged 3 models" in capsys.readouterr().out
    souped = SentenceEncoder.from_pretrained(str(tmp_path / "soup")).state_dict()
    states = [SentenceEncoder.from_pretrained(str(run)).state_dict() for run in runs]
    weight = "backbone.encoder.layer.0.attention.self.query.weight"
    expected = sum(state[weight] for state in states) / 3
    assert torch.allclose(souped[weight], expected, atol=1e-6)
    assert not torch.allclose(souped[weight], states[0][weight])


def test_sts_soup_refuses_bad_inputs_before_averaging(tmp_path, capsys):
    first = _saved_encoder(tmp_path / "a", 0)
    second = _saved_encoder(tmp_path / "b", 1)
    cls = _saved_encoder(tmp_path / "c", 2, pooling="cls")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("keep me", encoding="utf-8")
    cases = [
        ([str(first)], "two or more models"),
        ([str(first), str(first)], "given more than once"),
        ([str(first), str(tmp_path / "missing")], "does not exist"),
        ([str(first), str(second), "--output", str(first)], "is the input model of sts-soup"),
        ([str(first), str(second), "--output", str(taken)], "holds files sts-core did not write"),
        ([str(first), str(cls)], "pooling 'cls' differs"),
    ]
    capsys.readouterr()  # the saves' progress bars
    for arguments, message in cases:
        if "--output" not in arguments:
            arguments = [*arguments, "--output", str(tmp_path / "out")]
        assert soup_main(arguments) == 2, arguments
        err = capsys.readouterr().err  # loading bars may come first
        errors = [line for line in err.splitlines() if line.startswith("sts-soup: error: ")]
        assert len(errors) == 1 and "Traceback" not in err, err
        assert message in errors[0], arguments
    assert (taken / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------- LoRA runs
def _saved_lora_run(base: Path, folder: Path, seed: int, merge: bool = False) -> Path:
    """A LoRA run of ``base`` saved in ``folder`` (an adapter; ``merge``: merged weights)
    whose A and B are random and not zero, so that mean(B)·mean(A) ≠ mean(B·A)."""
    from sts_core.training.config import ModelArguments
    from sts_core.training.peft_utils import apply_lora

    encoder = SentenceEncoder.from_pretrained(base, pooling="last_token")
    arguments = ModelArguments(
        model_name_or_path=str(base), use_lora=True, lora_r=4, merge_lora=merge
    )
    apply_lora(encoder, arguments)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in encoder.backbone.named_parameters():
            if ".lora_" in name:
                parameter.copy_(0.2 * torch.randn(parameter.shape, generator=generator))
    encoder.save_pretrained(folder)
    return folder


def _merged_by_peft(base: Path, adapter: Path) -> dict[str, torch.Tensor]:
    """The adapter merged into its base by peft alone (no code of ours)."""
    from peft import PeftModel
    from transformers import AutoModel

    model = PeftModel.from_pretrained(AutoModel.from_pretrained(base), str(adapter))
    return model.merge_and_unload().state_dict()


def _souped_backbone(folder: Path) -> dict[str, torch.Tensor]:
    return SentenceEncoder.from_pretrained(folder, merge_lora=True).backbone.state_dict()


def _assert_average(souped: dict, states: list[dict]) -> None:
    assert set(souped) == set(states[0])
    for key, tensor in souped.items():
        expected = sum(state[key].float() for state in states) / len(states)
        close = torch.allclose(tensor.float(), expected, atol=1e-6, rtol=1e-5)
        assert close, f"{key}: off by {(tensor.float() - expected).abs().max():.2e}"


def test_sts_soup_of_lora_adapters_is_the_average_of_the_merged_models(
    tiny_llama_dir, tmp_path, capsys
):
    pytest.importorskip("peft")
    runs = [_saved_lora_run(tiny_llama_dir, tmp_path / f"lora{s}", s) for s in (0, 1)]
    capsys.readouterr()
    assert soup_main([*map(str, runs), "--output", str(tmp_path / "soup")]) == 0
    merged = [_merged_by_peft(tiny_llama_dir, run) for run in runs]
    _assert_average(_souped_backbone(tmp_path / "soup"), merged)  # not mean(B)·mean(A)
    out = capsys.readouterr().out
    assert "averaged 2 models into" in out, out
    assert "2 of 2 runs LoRA adapters, averaged as merged models" in out, out
    # the soup is a full model (an adapter cannot hold mean(B·A)), and says what it is
    assert (tmp_path / "soup" / "config.json").is_file()
    assert not (tmp_path / "soup" / "adapter_config.json").exists()
    record = json.loads((tmp_path / "soup" / "sts_soup.json").read_text(encoding="utf-8"))
    assert record["merged_lora_adapters"] == [str(run.resolve()) for run in runs]
    assert "as merged models" in record["summary"]
    query = "layers.0.self_attn.q_proj.weight"
    assert not torch.allclose(merged[0][query], merged[1][query], atol=1e-3)


def test_sts_soup_mixes_an_adapter_with_a_merged_save_of_the_same_base(
    tiny_llama_dir, tmp_path, capsys
):
    pytest.importorskip("peft")
    adapter = _saved_lora_run(tiny_llama_dir, tmp_path / "adapter", 0)
    merged_run = _saved_lora_run(tiny_llama_dir, tmp_path / "merged", 1, merge=True)
    capsys.readouterr()
    arguments = [str(adapter), str(merged_run), "--output", str(tmp_path / "soup")]
    assert soup_main(arguments) == 0
    assert "1 of 2 runs LoRA adapters, averaged as merged models" in capsys.readouterr().out

    from transformers import AutoModel

    states = [
        _merged_by_peft(tiny_llama_dir, adapter),
        AutoModel.from_pretrained(merged_run).state_dict(),
    ]
    _assert_average(_souped_backbone(tmp_path / "soup"), states)


def test_sts_soup_refuses_adapters_over_other_base_models_before_loading(
    tiny_llama_dir, tmp_path, capsys, monkeypatch
):
    pytest.importorskip("peft")
    other_base = make_tiny_llama(tmp_path / "other-base", seed=1)
    first = _saved_lora_run(tiny_llama_dir, tmp_path / "a", 0)
    second = _saved_lora_run(other_base, tmp_path / "b", 1)
    capsys.readouterr()

    def no_loading(*args, **kwargs):
        raise AssertionError("weights loaded before the bases were checked")

    monkeypatch.setattr(SentenceEncoder, "from_pretrained", no_loading)
    assert soup_main([str(first), str(second), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("sts-soup: error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert errors[0] == (
        f"sts-soup: error: {second}: a LoRA adapter over {other_base.resolve()}, {first}'s is "
        f"over {tiny_llama_dir.resolve()}: a soup averages runs of one base model"
    )
    assert not (tmp_path / "out").exists()


def test_sts_soup_of_adapters_whose_base_moved_names_its_flag(tiny_llama_dir, tmp_path, capsys):
    pytest.importorskip("peft")
    import shutil

    base = tmp_path / "base"
    shutil.copytree(tiny_llama_dir, base)
    runs = [_saved_lora_run(base, tmp_path / f"lora{s}", s) for s in (0, 1)]
    moved = base.rename(tmp_path / "moved-base")
    capsys.readouterr()
    arguments = [*map(str, runs), "--output", str(tmp_path / "soup")]
    assert soup_main(arguments) == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.strip()]
    assert line.startswith("sts-soup: error: ") and line.endswith(
        ": to load it from elsewhere, pass --base-model PATH to sts-soup"
    ), err
    assert not (tmp_path / "soup").exists()
    assert soup_main([*arguments, "--base-model", str(moved)]) == 0
    merged = [_merged_by_peft(moved, run) for run in runs]
    _assert_average(_souped_backbone(tmp_path / "soup"), merged)
