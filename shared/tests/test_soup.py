"""Model soups: ``average_state_dicts`` and the ``sts-soup`` command."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sts_core.encoder import SentenceEncoder
from sts_core.soup import main as soup_main
from sts_core.testing import make_tiny_bert
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
        ([str(first), str(second), "--output", str(first)], "is one of the models"),
        ([str(first), str(second), "--output", str(taken)], "is not empty"),
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
