"""The path options are listed once (``sts_core.training.path_options``, issue 62 item 3):
the run's inputs, the inputs a checkpoint records by content and the settings recorded
resolved all come from that list."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from sts_core.training import BaseConfig
from sts_core.training.config import DataArguments, ModelArguments
from sts_core.training.output import input_identities, run_inputs
from sts_core.training.path_options import PATH_OPTION_NAMES, PATH_OPTIONS
from sts_core.training.resume_settings import MAY_CHANGE, recipe_settings


def test_each_path_option_is_an_option_of_the_run() -> None:
    fields = {
        f.name
        for arguments in (ModelArguments, DataArguments, BaseConfig)
        for f in dataclasses.fields(arguments)
    }
    assert fields >= PATH_OPTION_NAMES, sorted(PATH_OPTION_NAMES - fields)
    assert len(PATH_OPTION_NAMES) == len(PATH_OPTIONS)


@pytest.fixture
def inputs(tmp_path: Path) -> SimpleNamespace:
    """One local input per path option (the teacher a hub id), in ``tmp_path``."""
    for folder in ("model", "checkpoint", "data"):
        (tmp_path / folder).mkdir()
    (tmp_path / "model" / "config.json").write_text("{}", encoding="utf-8")
    for name in ("train", "dev", "test", "threshold"):
        (tmp_path / f"{name}.csv").write_text("sentence1,sentence2,score\na,b,1\n")
    model_args = SimpleNamespace(model_name_or_path=str(tmp_path / "model"))
    data_args = SimpleNamespace(
        data_dir=str(tmp_path / "data"),
        data_variant="senteval",
        train_datasets=[str(tmp_path / "train.csv")],
        eval_dataset=str(tmp_path / "dev.csv"),
        final_eval_datasets=[str(tmp_path / "test.csv")],
        threshold_dataset=str(tmp_path / "threshold.csv"),
    )
    config = SimpleNamespace(
        teacher_model="some-org/some-teacher", resume_from_checkpoint=str(tmp_path / "checkpoint")
    )
    return SimpleNamespace(arguments=(model_args, data_args, config), root=tmp_path)


def test_the_inputs_are_the_input_options_in_the_lists_order(inputs: SimpleNamespace) -> None:
    found = [name for name, _ in run_inputs(*inputs.arguments)]
    assert found == [
        "model_name_or_path",
        "resume_from_checkpoint",
        "data_dir",
        "train_datasets",
        "eval_dataset",
        "final_eval_datasets",
        "threshold_dataset",
    ]  # the teacher is a hub id here, not a local path


def test_a_checkpoint_records_by_content_the_identity_options(inputs: SimpleNamespace) -> None:
    root = inputs.root.resolve()
    assert list(input_identities(*inputs.arguments)) == [
        "teacher_model some-org/some-teacher",  # a hub id
        f"model_name_or_path {root / 'model'}",
        f"train_datasets {root / 'train.csv'}",
        f"eval_dataset {root / 'dev.csv'}",
        f"threshold_dataset {root / 'threshold.csv'}",
    ]  # not the data folder, the resume checkpoint nor the final sets


def test_every_recorded_path_option_is_recorded_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative path is recorded absolute; the path options a resume may change (the
    resume checkpoint, the final sets) are not recorded at all."""
    monkeypatch.chdir(tmp_path)
    values = {}
    for option in PATH_OPTIONS:
        Path(option.name).mkdir()
        values[option.name] = [option.name] if option.name.endswith("datasets") else option.name

    class Config:
        load_best_model_at_end = True  # eval_dataset is recorded only then
        weight_averaging = "none"

        def to_dict(self) -> dict:
            return dict(values)

    recorded = recipe_settings(Config())
    for name in PATH_OPTION_NAMES:
        resolved = str((tmp_path / name).resolve())
        if name in MAY_CHANGE:
            assert name not in recorded
        else:
            assert recorded[name] in (resolved, [resolved]), name
    assert {
        "resume_from_checkpoint",
        "final_eval_datasets",
        "threshold_dataset",
    } == MAY_CHANGE & PATH_OPTION_NAMES
