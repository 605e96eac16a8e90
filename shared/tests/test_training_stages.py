"""``TrainingRun``: steps a package overrides (callbacks here), and two chained runs where
the second starts from the first's output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from sts_core.testing import write_fixture_recipe
from sts_core.training import TrainingRun, run_stages

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
TRAIN = FIXTURES / "sts-train.csv"
DEV = FIXTURES / "sts-dev.csv"


class RecordStart(TrainerCallback):
    """The model's weights when training begins."""

    def __init__(self) -> None:
        self.weights: dict[str, torch.Tensor] = {}

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.weights = {k: v.detach().clone() for k, v in model.backbone.state_dict().items()}


class RecordingRun(TrainingRun):
    def build_callbacks(self):
        self.recorder = RecordStart()
        return [self.recorder]


def recipe(tmp_path: Path, name: str, model: Path) -> Path:
    return write_fixture_recipe(
        tmp_path / f"{name}.yaml", name, model, TRAIN, DEV, tmp_path / name, score_range="[0, 5]"
    )


def test_second_stage_starts_from_the_first_stages_output(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    first = RecordingRun(["--config", str(recipe(tmp_path, "stage1", tiny_bert_nodropout_dir))])
    second = RecordingRun(
        ["--config", str(recipe(tmp_path, "stage2", tiny_bert_nodropout_dir)), "--seed", "1"]
    )
    stage1, stage2 = run_stages([first, second])
    assert second.model_args.model_name_or_path == str(tmp_path / "stage1")
    trained = load_file(tmp_path / "stage1" / "model.safetensors")
    for name, value in second.recorder.weights.items():
        torch.testing.assert_close(value, trained[name], rtol=0, atol=0)
    assert any(
        not torch.equal(value, first.recorder.weights[name])
        for name, value in second.recorder.weights.items()
    )  # stage 1 changed the weights stage 2 starts from
    card = (tmp_path / "stage2" / "README.md").read_text(encoding="utf-8")
    assert str(tmp_path / "stage1") in card
    written = json.loads((tmp_path / "stage2" / "metrics.json").read_text(encoding="utf-8"))
    assert written["dev"] == stage2["dev"] and stage1["dev"] != stage2["dev"]


def test_cli_main_runs_a_packages_own_run_class(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    from sts_core.training import cli_main
    from sts_core.training.method_registry import CORE_METHOD

    class Checked(TrainingRun):
        built = False

        def build_callbacks(self):
            Checked.built = True
            return []

    argv = ["--config", str(recipe(tmp_path, "own", tiny_bert_nodropout_dir))]
    assert cli_main(CORE_METHOD, argv, run_class=Checked) == 0
    assert Checked.built
    assert cli_main(CORE_METHOD, argv, run_class=Checked) == 2  # folder now used
    assert "holds an earlier run" in capsys.readouterr().err
