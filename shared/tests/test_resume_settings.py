"""A resume is the recipe it was started with (issue 44, item 2), and a checkpoint's pickled
training state is read only through torch's safe loader (item 5: a malicious
``rng_state.pth``).

Each checkpoint records the settings its result depends on (``sts_run_settings.json``); a
resume under other values — the learning rate, the loss, the seed (with
``max_train_samples``: other pairs), the batch size — is refused in one line naming each
changed setting and its two values, before any weights load (also under ``check_only``),
while a setting that may change (logging, evaluation frequency, output folder) still
resumes to the uninterrupted run's weights. A checkpoint file torch's safe loader refuses
stops the resume naming the file, without running it or suggesting ``weights_only=False``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from sts_core.encoder import SentenceEncoder
from sts_core.losses import CosineMSELoss, InfoNCELoss
from sts_core.method import Method
from sts_core.saving import add_training_files
from sts_core.testing import one_line_error, quick_training_args, write_fixture_recipe
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training.averaging import AVERAGING_SETTINGS_NAME, write_averaging_settings
from sts_core.training.parser import ConfigError
from sts_core.training.run import cli_main

RUN_SETTINGS_NAME = "sts_run_settings.json"  # resume_settings.RUN_SETTINGS_NAME

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "training"
TRAIN = FIXTURES / "sts-train.csv"  # 16 pairs; 12 kept: 6 steps an epoch at batch 2
DEV = FIXTURES / "sts-dev.csv"


@dataclass
class TwoLossConfig(BaseConfig):
    loss: str = field(default="cosine_mse", metadata={"help": "cosine_mse or infonce."})


#: a method with a ``loss`` option, as the method packages have
TWO_LOSSES = Method(
    name="test_resume_two_losses",
    title="two losses (resume test)",
    config=TwoLossConfig,
    losses=(CosineMSELoss, InfoNCELoss),
)


def recipe(tmp_path: Path, model: Path, output_dir: Path, **overrides: str) -> Path:
    """4 steps of batch 2 on 12 of the 16 pairs (drawn with the seed), a checkpoint every 2."""
    settings = {
        "score_range": "[0, 5]",
        "per_device_train_batch_size": "2",
        "max_train_samples": "12",
        **overrides,
    }
    path = tmp_path / f"{output_dir.name}.yaml"
    return write_fixture_recipe(path, "resume settings", model, TRAIN, DEV, output_dir, **settings)


def train(*argv: str) -> int:
    return cli_main(TWO_LOSSES, list(argv))


@pytest.fixture(scope="module")
def straight_run(tiny_bert_nodropout_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run: 4 steps, checkpoints 2 and 4."""
    tmp_path = tmp_path_factory.mktemp("straight")
    output = tmp_path / "straight"
    assert train("--config", str(recipe(tmp_path, tiny_bert_nodropout_dir, output))) == 0
    return output


def copy_of_checkpoint(straight_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copied" / "checkpoint-2"
    shutil.copytree(straight_run / "checkpoint-2", copy)
    return copy


def assert_same_weights(folder: Path, other: Path) -> None:
    first = SentenceEncoder.from_pretrained(folder).state_dict()
    second = SentenceEncoder.from_pretrained(other).state_dict()
    for key, value in first.items():
        torch.testing.assert_close(second[key], value, rtol=1e-5, atol=1e-6, msg=key)


# ---------------------------------------------------------------------------- the record
def test_each_checkpoint_records_the_settings_of_the_run(straight_run: Path) -> None:
    recorded = json.loads((straight_run / "checkpoint-2" / RUN_SETTINGS_NAME).read_text())
    assert recorded["learning_rate"] == 1e-3 and recorded["loss"] == "cosine_mse"
    assert recorded["seed"] == 0 and recorded["max_train_samples"] == 12
    assert recorded["per_device_train_batch_size"] == 2 and recorded["max_steps"] == 4
    assert recorded["method"] == TWO_LOSSES.name and recorded["world_size"] == 1
    assert recorded["train_datasets"] == [str(TRAIN.resolve())]
    for free in ("output_dir", "logging_steps", "dataloader_num_workers", "eval_steps"):
        assert free not in recorded


# ---------------------------------------------------------------------------- refused
@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize(
    ("flags", "change"),
    [
        (["--learning_rate", "5e-4"], "learning_rate 0.001 → 0.0005"),
        (["--loss", "infonce"], "loss cosine_mse → infonce"),
        (["--seed", "1"], "seed 0 → 1"),  # max_train_samples would draw other pairs
        (["--per_device_train_batch_size", "4"], "per_device_train_batch_size 2 → 4"),
        (
            ["--learning_rate", "5e-4", "--loss", "infonce"],
            "learning_rate 0.001 → 0.0005, loss cosine_mse → infonce;",
        ),
    ],
    ids=["learning_rate", "loss", "seed", "batch_size", "two_changes"],
)
@pytest.mark.parametrize("check_only", [False, True], ids=["run", "check_only"])
def test_a_resume_under_other_settings_is_refused_naming_each_change(
    straight_run: Path,
    tiny_bert_nodropout_dir: Path,
    tmp_path: Path,
    capsys,
    flags: list[str],
    change: str,
    check_only: bool,
) -> None:
    checkpoint = copy_of_checkpoint(straight_run, tmp_path)
    config = recipe(tmp_path, tiny_bert_nodropout_dir, checkpoint.parent)
    argv = ["--config", str(config), "--resume_from_checkpoint", str(checkpoint), *flags]
    status = train(*argv, "--check_only", str(check_only).lower())
    line = one_line_error(capsys.readouterr().err)
    assert status == 2
    assert line.startswith(
        f"error: resume_from_checkpoint {checkpoint} was saved under other settings: {change}"
    )
    assert line.endswith("; resume with the same recipe or start a new run")
    assert sorted(p.name for p in checkpoint.parent.iterdir()) == ["checkpoint-2"]


def test_settings_that_may_change_still_resume_to_the_uninterrupted_run(
    straight_run: Path, tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    checkpoint = copy_of_checkpoint(straight_run, tmp_path)
    config = recipe(
        tmp_path,
        tiny_bert_nodropout_dir,
        checkpoint.parent,
        logging_steps="2",
        eval_steps="1",
        save_total_limit="5",
        per_device_eval_batch_size="3",
    )
    status = train("--config", str(config), "--resume_from_checkpoint", str(checkpoint))
    assert status == 0, capsys.readouterr().err
    assert_same_weights(straight_run, checkpoint.parent)


# ---------------------------------------------------------------------------- older checkpoints
def older_checkpoint(straight_run: Path, tmp_path: Path, averaging: str) -> Path:
    """checkpoint-2 as a version before the record wrote it: weight_averaging.json only."""
    checkpoint = copy_of_checkpoint(straight_run, tmp_path)
    (checkpoint / RUN_SETTINGS_NAME).unlink()
    settings = BaseConfig(output_dir=str(tmp_path), report_to="none", weight_averaging=averaging)
    write_averaging_settings(checkpoint, settings)
    add_training_files(checkpoint, step=2)
    return checkpoint


def test_an_older_checkpoint_resumes_with_a_warning_that_its_settings_are_unchecked(
    straight_run: Path, tiny_bert_nodropout_dir: Path, tmp_path: Path, caplog
) -> None:
    checkpoint = older_checkpoint(straight_run, tmp_path, "none")
    config = recipe(tmp_path, tiny_bert_nodropout_dir, checkpoint.parent)
    with caplog.at_level("WARNING"):
        assert train("--config", str(config), "--resume_from_checkpoint", str(checkpoint)) == 0
    assert f"resume_from_checkpoint {checkpoint} does not record the settings" in caplog.text
    assert_same_weights(straight_run, checkpoint.parent)


@pytest.mark.usefixtures("no_model_loading")
def test_an_older_checkpoint_still_refuses_other_averaging_settings(
    straight_run: Path, tiny_bert_nodropout_dir: Path, tmp_path: Path, capsys
) -> None:
    checkpoint = older_checkpoint(straight_run, tmp_path, "none")
    assert (checkpoint / AVERAGING_SETTINGS_NAME).is_file()
    config = recipe(tmp_path, tiny_bert_nodropout_dir, checkpoint.parent, weight_averaging="ema")
    assert train("--config", str(config), "--resume_from_checkpoint", str(checkpoint)) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "was trained with weight_averaging none, this run asks for weight_averaging ema" in line


# ---------------------------------------------------------------------------- the comparison
def test_a_setting_the_record_lacks_counts_only_when_set_to_other_than_its_default() -> None:
    from sts_core.training.resume_settings import changed_settings

    saved = {"learning_rate": 0.001, "removed_option": 3}
    defaults = {"learning_rate": 2e-5, "new_option": False, "ema_decay": 0.999}
    same = {"learning_rate": 0.001, "new_option": False}
    assert changed_settings(saved, same, defaults) == ["removed_option 3 → (no such option)"]
    saved_now = {"learning_rate": 0.001, "ema_decay": 0.9}
    assert changed_settings(saved_now, {"learning_rate": 0.001}, defaults) == []
    assert changed_settings({"learning_rate": 0.001}, {**same, "new_option": True}, defaults) == [
        "new_option (not recorded) → true"
    ]


def test_selection_settings_are_recorded_only_when_they_pick_the_final_model(
    tmp_path: Path,
) -> None:
    from sts_core.training.resume_settings import recipe_settings

    free = recipe_settings(BaseConfig(output_dir=str(tmp_path), report_to="none"))
    assert "eval_steps" not in free and "metric_for_best_model" not in free
    picking = BaseConfig(
        output_dir=str(tmp_path),
        report_to="none",
        load_best_model_at_end=True,
        eval_strategy="steps",
        save_strategy="steps",
        eval_steps=3,
        save_steps=3,
    )
    recorded = recipe_settings(picking)
    assert recorded["eval_steps"] == 3 and recorded["metric_for_best_model"] == "stsb_dev_spearman"


# ---------------------------------------------------------------------------- untrusted files
class RunsACommand:
    """What a malicious checkpoint file holds: unpickling it would run ``command``."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def plant(checkpoint: Path, name: str, marker: Path, legacy: bool = False) -> Path:
    """Replace ``name`` of the checkpoint by a pickle that would create ``marker``, and mark
    the folder complete again (an attacker who rewrites the marker)."""
    payload = RunsACommand(f"touch {marker}")
    if legacy:  # a plain pickle, not torch's zip format
        (checkpoint / name).write_bytes(pickle.dumps(payload))
    else:
        torch.save(payload, checkpoint / name)
    add_training_files(checkpoint, step=2)
    return checkpoint / name


@pytest.mark.usefixtures("no_model_loading")
@pytest.mark.parametrize(
    ("name", "legacy"),
    [
        ("rng_state.pth", False),
        ("rng_state.pth", True),
        ("optimizer.pt", False),
        ("scheduler.pt", False),
    ],
    ids=["rng_state", "rng_state-plain-pickle", "optimizer", "scheduler"],
)
@pytest.mark.parametrize("check_only", [False, True], ids=["run", "check_only"])
def test_a_checkpoint_file_the_safe_loader_refuses_stops_the_resume_naming_it(
    straight_run: Path,
    tiny_bert_nodropout_dir: Path,
    tmp_path: Path,
    capsys,
    name: str,
    legacy: bool,
    check_only: bool,
) -> None:
    checkpoint = copy_of_checkpoint(straight_run, tmp_path)
    marker = tmp_path / "the-pickle-ran"
    planted = plant(checkpoint, name, marker, legacy)
    config = recipe(tmp_path, tiny_bert_nodropout_dir, checkpoint.parent)
    status = train(
        "--config",
        str(config),
        "--resume_from_checkpoint",
        str(checkpoint),
        "--check_only",
        str(check_only).lower(),
    )
    err = capsys.readouterr().err
    assert status == 2
    line = one_line_error(err)
    assert str(planted) in line and "untrusted" in line and "weights_only" not in err
    assert not marker.exists()


def test_the_trainer_refuses_an_untrusted_file_before_it_loads_the_checkpoint(
    straight_run: Path, tiny_bert_nodropout_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    from datasets import Dataset

    checkpoint = copy_of_checkpoint(straight_run, tmp_path)
    marker = tmp_path / "the-pickle-ran"
    planted = plant(checkpoint, "rng_state.pth", marker)
    pairs = Dataset.from_dict(
        {"sentence1": ["a dog"] * 4, "sentence2": ["a cat"] * 4, "score": [0.1, 0.9, 0.4, 0.6]}
    )
    args = quick_training_args(
        BaseConfig, tmp_path / "direct", max_steps=4, per_device_train_batch_size=2
    )
    trainer = BaseTrainer(
        model=SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir),
        args=args,
        train_dataset=pairs,
    )
    monkeypatch.setattr(
        BaseTrainer, "_load_from_checkpoint", lambda *a, **k: pytest.fail("weights loaded")
    )
    with pytest.raises(ConfigError, match="is untrusted") as error:
        trainer.train(resume_from_checkpoint=str(checkpoint))
    assert str(planted) in str(error.value) and "weights_only" not in str(error.value)
    assert not marker.exists()
