"""Nothing silently wrong on resumes, results files and divergence (issue 30, cases 2, 3,
4, 6 and the teacher's error of 10): a resume from the last checkpoint gives the
uninterrupted run's model and metrics, results files describe the model beside them, a
diverged run stops naming the step and publishes nothing, and a resume under other
``weight_averaging`` settings is refused before the weights load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from sts_core.command_files import INTERRUPTED
from sts_core.encoder import SentenceEncoder
from sts_core.saving import SAVE_MARKER, check_complete_save
from sts_core.testing import one_line_error, write_fixture_recipe
from sts_core.training import BaseTrainer, TrainingRun
from sts_core.training.divergence import DivergenceGuard, TrainingDiverged
from sts_core.training.run import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
TRAIN = FIXTURES / "sts-train.csv"  # 16 pairs: 8 steps an epoch at batch 2
DEV = FIXTURES / "sts-dev.csv"
STS_FIXTURES = Path(__file__).parent / "fixtures" / "data"


def recipe(tmp_path: Path, model: Path, output_dir: Path, **overrides: str) -> Path:
    """4 steps of batch 2 (half an epoch: the run ends mid-epoch), a checkpoint every 2."""
    settings = {"score_range": "[0, 5]", "per_device_train_batch_size": "2", **overrides}
    path = tmp_path / f"{output_dir.name}.yaml"
    return write_fixture_recipe(path, "resume", model, TRAIN, DEV, output_dir, **settings)


def run(capsys, *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    return status, capsys.readouterr().err


def error_during_training(err: str) -> str:
    """The one ``error:`` line of a run that failed while training (loading bars may come
    before it), with no traceback."""
    assert "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if line.startswith("error: ")]
    return line


def metrics_of(folder: Path) -> dict:
    return json.loads((folder / "metrics.json").read_text(encoding="utf-8"))


def sts_table_of(folder: Path) -> dict:
    return json.loads((folder / "sts_results.json").read_text(encoding="utf-8"))


def assert_same_weights(folder: Path, other: Path) -> None:
    first = SentenceEncoder.from_pretrained(folder).state_dict()
    second = SentenceEncoder.from_pretrained(other).state_dict()
    for key, value in first.items():
        torch.testing.assert_close(second[key], value, rtol=1e-5, atol=1e-6, msg=key)


@pytest.fixture(scope="module")
def straight_run(tiny_bert_nodropout_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The uninterrupted run: 4 steps, checkpoints 2 and 4."""
    tmp_path = tmp_path_factory.mktemp("straight")
    output = tmp_path / "straight"
    assert main(["--config", str(recipe(tmp_path, tiny_bert_nodropout_dir, output))]) == 0
    return output


# ---------------------------------------------------------------------------- case 2
def test_a_resume_from_the_last_checkpoint_trains_nothing_and_gives_the_run_s_results(
    straight_run: Path, tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    copy = tmp_path / "checkpoint-4"
    shutil.copytree(straight_run / "checkpoint-4", copy)
    output = tmp_path / "again"
    config = recipe(tmp_path, tiny_bert_nodropout_dir, output)
    status, err = run(capsys, "--config", str(config), "--resume_from_checkpoint", str(copy))
    assert status == 0, err
    assert not list(output.glob("checkpoint-*"))  # no step 5, so no checkpoint-5
    expected, got = metrics_of(straight_run)["train"], metrics_of(output)["train"]
    assert got["epoch"] == expected["epoch"] == 0.5
    assert got["train_loss"] == pytest.approx(expected["train_loss"], rel=1e-6)
    assert_same_weights(straight_run, output)


def test_a_resume_mid_run_reports_the_whole_run_s_mean_loss(
    straight_run: Path, tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    copy = tmp_path / "checkpoint-2"
    shutil.copytree(straight_run / "checkpoint-2", copy)
    output = tmp_path / "again"
    config = recipe(tmp_path, tiny_bert_nodropout_dir, output)
    status, err = run(capsys, "--config", str(config), "--resume_from_checkpoint", str(copy))
    assert status == 0, err
    expected = metrics_of(straight_run)["train"]["train_loss"]
    assert metrics_of(output)["train"]["train_loss"] == pytest.approx(expected, rel=1e-5)
    assert_same_weights(straight_run, output)


# ---------------------------------------------------------------------------- case 3
def test_results_of_the_earlier_model_go_before_a_new_model_is_published(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    output = tmp_path / "out"
    sts = {"final_sts_tasks": "[stsb]", "data_dir": str(STS_FIXTURES)}
    config = recipe(tmp_path, tiny_bert_nodropout_dir, output, **sts)
    assert run(capsys, "--config", str(config))[0] == 0
    first = metrics_of(output)
    saved = json.loads((output / SAVE_MARKER).read_text(encoding="utf-8"))["save_id"]
    assert first["model"]["save_id"] == saved == sts_table_of(output)["model_save_id"]

    real_save_model = BaseTrainer.save_model

    def killed_after_the_final_save(self, output_dir=None, *args, **kwargs):
        real_save_model(self, output_dir, *args, **kwargs)
        if Path(output_dir) == output:
            raise KeyboardInterrupt  # right after the new final model was published

    monkeypatch.setattr(BaseTrainer, "save_model", killed_after_the_final_save)
    checkpoint = str(output / "checkpoint-2")
    assert main(["--config", str(config), "--resume_from_checkpoint", checkpoint]) == INTERRUPTED
    check_complete_save(output, required=True)  # the resumed run's model
    results = ("metrics.json", "sts_results.json", "sts_results.md")
    assert [name for name in results if (output / name).exists()] == []
    monkeypatch.undo()
    status, err = run(capsys, "--config", str(config), "--resume_from_checkpoint", checkpoint)
    assert status == 0, err
    marker = json.loads((output / SAVE_MARKER).read_text(encoding="utf-8"))
    assert metrics_of(output)["model"]["save_id"] == marker["save_id"] != saved
    assert sts_table_of(output)["model_save_id"] == marker["save_id"]


# ---------------------------------------------------------------------------- case 4
def test_a_non_finite_loss_stops_the_run_naming_the_step_and_publishes_nothing(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    real_compute_loss = BaseTrainer.compute_loss

    def nan_from_step_three(self, model, inputs, *args, **kwargs):
        loss = real_compute_loss(self, model, inputs, *args, **kwargs)
        return loss * float("nan") if self.state.global_step >= 2 else loss

    monkeypatch.setattr(BaseTrainer, "compute_loss", nan_from_step_three)
    output = tmp_path / "out"
    config = recipe(tmp_path, tiny_bert_nodropout_dir, output, logging_steps="10")
    status, err = run(capsys, "--config", str(config))
    assert status == 1
    assert "training diverged: the loss of step 3 is nan" in error_during_training(err)
    check_complete_save(output / "checkpoint-2", required=True)  # saved before it
    assert not (output / "checkpoint-4").exists()
    assert not (output / SAVE_MARKER).exists() and not (output / "metrics.json").exists()


class PoisonWeights(TrainerCallback):
    """Makes one weight infinite after step ``step`` (a finite loss, an infinite update)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == self.step:
            with torch.no_grad():
                next(p for p in model.parameters() if p.requires_grad).fill_(float("inf"))


def test_non_finite_weights_are_never_saved(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(TrainingRun, "build_callbacks", lambda self: [PoisonWeights(2)])
    output = tmp_path / "out"
    status, err = run(capsys, "--config", str(recipe(tmp_path, tiny_bert_nodropout_dir, output)))
    assert status == 1
    assert "hold NaN or infinite values" in error_during_training(err)
    assert not list(output.glob("checkpoint-*")) and not (output / SAVE_MARKER).exists()


def test_the_guard_names_the_first_bad_step() -> None:
    guard = DivergenceGuard()
    for step, value in [(1, 0.5), (2, float("inf")), (3, float("nan"))]:
        guard.observe(torch.tensor(value), step)
    with pytest.raises(TrainingDiverged, match="the loss of step 2 is inf"):
        guard.check()
    fine = DivergenceGuard()
    fine.observe(torch.tensor(0.25), 1)
    fine.check(torch.nn.Linear(2, 2))  # nothing raised


# ---------------------------------------------------------------------------- case 6
@pytest.fixture(scope="module")
def uniform_run(tiny_bert_nodropout_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp_path = tmp_path_factory.mktemp("uniform")
    output = tmp_path / "uniform"
    config = recipe(tmp_path, tiny_bert_nodropout_dir, output, weight_averaging="uniform")
    assert main(["--config", str(config)]) == 0
    return output


@pytest.mark.parametrize(
    ("saved_by", "settings", "expected"),
    [
        ("straight", {"weight_averaging": "uniform"}, "weight_averaging none → uniform;"),
        ("uniform", {"weight_averaging": "ema"}, "weight_averaging uniform → ema;"),
        ("uniform", {"weight_averaging": "none"}, "weight_averaging uniform → none;"),
        (
            "uniform",
            {"weight_averaging": "uniform", "weight_averaging_start": "0.25"},
            "weight_averaging_start 0.5 → 0.25;",
        ),
    ],
)
def test_a_resume_under_other_averaging_settings_is_refused_before_the_weights_load(
    straight_run: Path,
    uniform_run: Path,
    tiny_bert_nodropout_dir: Path,
    tmp_path: Path,
    capsys,
    monkeypatch,
    saved_by: str,
    settings: dict,
    expected: str,
) -> None:
    def no_weights(self):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr(TrainingRun, "build_model", no_weights)
    checkpoint = (straight_run if saved_by == "straight" else uniform_run) / "checkpoint-2"
    config = recipe(tmp_path, tiny_bert_nodropout_dir, tmp_path / "again", **settings)
    status, err = run(capsys, "--config", str(config), "--resume_from_checkpoint", str(checkpoint))
    assert status == 2
    assert expected in one_line_error(err)


def test_a_resume_under_the_same_averaging_settings_ends_as_the_uninterrupted_run(
    uniform_run: Path, tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    output = tmp_path / "again"
    config = recipe(tmp_path, tiny_bert_nodropout_dir, output, weight_averaging="uniform")
    checkpoint = str(uniform_run / "checkpoint-2")
    status, err = run(capsys, "--config", str(config), "--resume_from_checkpoint", checkpoint)
    assert status == 0, err
    assert_same_weights(uniform_run, output)


# ---------------------------------------------------------------------------- case 10
def test_a_missing_teacher_folder_is_named_as_the_teacher(
    tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    missing = tmp_path / "no-such-teacher"
    config = recipe(tmp_path, tiny_bert_nodropout_dir, tmp_path / "out", teacher_model=str(missing))
    status, err = run(capsys, "--config", str(config))
    assert status == 2
    line = one_line_error(err)
    assert "teacher_model" in line and "teacher's" in line and str(missing) in line
