"""Weight averaging and soups at their edges, each against a value written here: the
settings a checkpoint records (the file's exact text), every case of the resume check and
its whole message, the final log line, the average loaded onto the model's device (the
meta device stands in for a GPU), and the soup's inputs left untouched and its messages.
Found by the mutation pass (``tools/mutation.py``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from sts_core.training.averaging import (
    AVERAGING_SETTINGS_NAME,
    WEIGHT_AVERAGE_NAME,
    WeightAverager,
    average_state_dicts,
    check_resume_averaging,
    check_weight_averaging,
    checkpoint_averaging_settings,
    write_averaging_settings,
)


def settings(mode: str = "none", resume: Path | None = None, **more) -> SimpleNamespace:
    values = {
        "weight_averaging": mode,
        "weight_averaging_start": 0.5,
        "weight_averaging_every": 2,
        "ema_decay": 0.9,
        "load_best_model_at_end": False,
        "resume_from_checkpoint": None if resume is None else str(resume),
    }
    return SimpleNamespace(**{**values, **more})


def whole_message(call) -> str:
    with pytest.raises(ValueError) as error:
        call()
    return str(error.value)


@pytest.mark.parametrize(
    ("mode", "text"),
    [
        ("none", '{"weight_averaging": "none"}'),
        (
            "uniform",
            '{"weight_averaging": "uniform", "weight_averaging_every": 2, '
            '"weight_averaging_start": 0.5}',
        ),
        (
            "ema",
            '{"ema_decay": 0.9, "weight_averaging": "ema", "weight_averaging_every": 2, '
            '"weight_averaging_start": 0.5}',
        ),
    ],
)
def test_a_checkpoint_records_the_settings_that_decide_its_average(tmp_path, mode, text) -> None:
    write_averaging_settings(tmp_path, settings(mode))
    assert (tmp_path / AVERAGING_SETTINGS_NAME).read_text(encoding="utf-8") == text
    assert checkpoint_averaging_settings(tmp_path) == json.loads(text)
    assert checkpoint_averaging_settings(tmp_path / "elsewhere") is None


def checkpoint(tmp_path: Path, mode: str | None, average: bool = False) -> Path:
    folder = tmp_path / "checkpoint-4"
    folder.mkdir()
    if mode is not None:
        write_averaging_settings(folder, settings(mode))
    if average:
        (folder / WEIGHT_AVERAGE_NAME).write_bytes(b"")
    return folder


def test_a_resume_without_a_checkpoint_folder_is_not_checked(tmp_path) -> None:
    check_resume_averaging(settings("uniform"))
    check_resume_averaging(settings("uniform", resume=tmp_path / "missing"))


def test_an_older_checkpoint_without_averaging_resumes_without_averaging(tmp_path) -> None:
    check_resume_averaging(settings("none", resume=checkpoint(tmp_path, None)))


@pytest.mark.parametrize(
    ("mode", "average", "asked"),
    [
        (
            "uniform",
            False,
            "weight_averaging uniform (weight_averaging_start 0.5, weight_averaging_every 2)",
        ),
        ("none", True, "weight_averaging none"),
    ],
)
def test_an_older_checkpoint_refuses_averaging_it_cannot_continue(tmp_path, mode, average, asked):
    folder = checkpoint(tmp_path, None, average=average)
    assert whole_message(lambda: check_resume_averaging(settings(mode, resume=folder))) == (
        f"resume_from_checkpoint {folder} does not record its weight_averaging settings "
        f"(saved by an older version), and this run asks for {asked}: start a new run to "
        "average weights"
    )


def test_a_checkpoint_resumes_only_under_its_own_settings(tmp_path) -> None:
    folder = checkpoint(tmp_path, "ema")
    check_resume_averaging(settings("ema", resume=folder))
    message = whole_message(lambda: check_resume_averaging(settings("uniform", resume=folder)))
    assert message == (
        f"resume_from_checkpoint {folder} was trained with weight_averaging ema (ema_decay "
        "0.9, weight_averaging_every 2, weight_averaging_start 0.5), this run asks for "
        "weight_averaging uniform (weight_averaging_start 0.5, weight_averaging_every 2): a "
        "resumed run must average as the run it continues (give the checkpoint's settings, "
        "or start a new run)"
    )


def test_averaging_with_the_best_checkpoint_is_refused_with_its_whole_message() -> None:
    assert whole_message(
        lambda: check_weight_averaging(settings("uniform", load_best_model_at_end=True))
    ) == (
        "weight_averaging with load_best_model_at_end: the final model would be either the "
        "average or the dev-selected checkpoint; set load_best_model_at_end: false to keep "
        "the average (or weight_averaging: none)"
    )
    check_weight_averaging(settings("none", load_best_model_at_end=True))


def test_the_final_weights_are_logged_with_the_count_and_the_start(caplog) -> None:
    model = nn.Linear(2, 1)
    averager = WeightAverager("uniform", start=0.5, every=1, decay=0.9)
    averager.on_train_begin(None, SimpleNamespace(max_steps=8), None)
    averager.update(model)
    averager.update(model)
    with caplog.at_level(logging.INFO, logger="sts_core.training.averaging"):
        averager.apply_to(model)
    assert caplog.messages == [
        "weight averaging (uniform): the final weights are the average of 2 snapshots from step 4"
    ]


@pytest.mark.parametrize(("start", "every", "steps"), [(0.0, 3, [1, 4, 7]), (0.3, 4, [3, 7])])
def test_snapshots_are_taken_every_k_steps_from_the_start_step(start, every, steps) -> None:
    """The weight is set to the step number before each step ends, so the average is the
    mean of the steps that were snapshotted: start_step = max(1, ⌈start·T⌉), then every k."""
    model = nn.Linear(1, 1, bias=False)
    averager = WeightAverager("uniform", start=start, every=every, decay=0.9)
    averager.on_train_begin(None, SimpleNamespace(max_steps=9), None)
    for step in range(1, 10):
        with torch.no_grad():
            model.weight.fill_(float(step))
        averager.on_step_end(None, SimpleNamespace(global_step=step), None, model=model)
    assert averager.count == len(steps)
    assert averager.averaged[0].item() == pytest.approx(sum(steps) / len(steps))


def test_a_saved_average_is_loaded_onto_the_models_device(tmp_path) -> None:
    model = nn.Linear(2, 1)
    averager = WeightAverager("ema", start=0.0, every=1, decay=0.9)
    averager.update(model)
    averager.save(tmp_path)
    on_meta = nn.Linear(2, 1, device="meta")
    restored = WeightAverager("ema", start=0.0, every=1, decay=0.9)
    restored.load(tmp_path, on_meta)
    assert {t.device.type for t in restored.averaged} == {"meta"}
    assert restored.names == ["weight", "bias"] and restored.count == 1


def test_a_soup_leaves_its_inputs_alone() -> None:
    first = {"w": torch.tensor([1.0, 2.0]), "ids": torch.tensor([0, 1])}
    second = {"w": torch.tensor([3.0, 6.0]), "ids": torch.tensor([0, 1])}
    soup = average_state_dicts([first, second])
    assert soup["w"].tolist() == [2.0, 4.0] and soup["ids"].tolist() == [0, 1]
    assert first["w"].tolist() == [1.0, 2.0] and second["w"].tolist() == [3.0, 6.0]


@pytest.mark.parametrize(
    ("keys", "names", "message"),
    [
        (
            ["a", "b", "c"],
            None,
            "model 2 and model 1 are not the same model: missing ['w'], extra ['a', 'b', 'c']",
        ),
        (
            ["a", "b", "c", "d"],
            ["run a", "run b"],
            "run b and run a are not the same model: missing ['w'], extra ['a', 'b', 'c']…",
        ),
    ],
)
def test_a_soup_of_different_models_is_refused_naming_them(keys, names, message) -> None:
    first = {"w": torch.zeros(2)}
    second = {key: torch.zeros(2) for key in keys}
    assert whole_message(lambda: average_state_dicts([first, second], names)) == message


def test_a_soup_of_many_missing_tensors_lists_three() -> None:
    first = {key: torch.zeros(1) for key in "abcd"}
    assert whole_message(lambda: average_state_dicts([first, {"e": torch.zeros(1)}])) == (
        "model 2 and model 1 are not the same model: missing ['a', 'b', 'c']…, extra ['e']"
    )
    three = {key: torch.zeros(1) for key in "abc"}
    assert whole_message(lambda: average_state_dicts([three, {"e": torch.zeros(1)}])) == (
        "model 2 and model 1 are not the same model: missing ['a', 'b', 'c'], extra ['e']"
    )


def test_a_soup_of_nothing_is_refused() -> None:
    assert whole_message(lambda: average_state_dicts([])) == "a soup needs at least one model"
