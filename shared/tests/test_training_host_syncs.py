"""A training step without host syncs of its own: the loss parts stay on the device until the
log line (:class:`~sts_core.training.loss_parts.LossParts`), transformers' NaN filter is off
(``logging_nan_inf_filter``: the divergence guard stops such a run anyway), and what a
fixed-seed run logs is what it logged when every part was read each step."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest
import torch
from datasets import Dataset
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import TrainerCallback

from sts_core.encoder import SentenceEncoder
from sts_core.testing import TOY_STS_PAIRS, quick_training_args
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training import loss_parts as loss_parts_module
from sts_core.training.divergence import TrainingDiverged
from sts_core.training.loss_parts import LossParts

pytestmark = pytest.mark.usefixtures("torch_one_thread")

PAIRS = [(first, second, score / 5) for first, second, score in TOY_STS_PAIRS]  # 0–1
#: a loss with parts (each logged as loss_<name>), through the real apply_loss path
WEIGHTS = {"cosine_mse": 1.0, "infonce": 0.5}


def dataset() -> Dataset:
    first, second, score = zip(*PAIRS, strict=True)
    return Dataset.from_dict(
        {"sentence1": list(first), "sentence2": list(second), "score": list(score)}
    )


def config(output_dir: Path, **overrides: Any) -> BaseConfig:
    settings = {
        "per_device_train_batch_size": 4,
        "max_steps": 6,
        "logging_steps": 3,
        "loss_weights": WEIGHTS,
        **overrides,
    }
    return quick_training_args(BaseConfig, output_dir, **settings)


class RecordingTrainer(BaseTrainer):
    """Keeps a copy of every loss part it is given, to compute the logged means by hand."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given: list[tuple[int, str, torch.Tensor]] = []

    def log_loss_parts(self, parts: dict[str, torch.Tensor]) -> None:
        step = self.state.global_step + 1
        self.given += [(step, name, value.detach().clone()) for name, value in parts.items()]
        super().log_loss_parts(parts)


class ItemPerStepTrainer(BaseTrainer):
    """The trainer as it was: every part read to a float each step, averaged at the log."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.floats: dict[str, list[float]] = {}

    def log_loss_parts(self, parts: dict[str, torch.Tensor]) -> None:
        for name, value in parts.items():
            self.floats.setdefault(name, []).append(float(value.detach().float().item()))

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self.floats:
            logs.update({name: sum(v) / len(v) for name, v in self.floats.items()})
            self.floats.clear()
        super().log(logs, start_time)


def train(trainer_class: type, folder: Path, output_dir: Path, **overrides: Any) -> Any:
    encoder = SentenceEncoder.from_pretrained(folder)
    trainer = trainer_class(
        model=encoder, args=config(output_dir, **overrides), train_dataset=dataset()
    )
    trainer.train()
    return trainer


def logged_lines(trainer: Any) -> list[dict[str, float]]:
    return [entry for entry in trainer.state.log_history if "loss" in entry]


# ----------------------------------------------------------------------------- values
def test_the_logged_parts_are_the_means_of_each_step_s_values(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    trainer = train(RecordingTrainer, tiny_bert_nodropout_dir, tmp_path)
    lines = logged_lines(trainer)
    assert [line["step"] for line in lines] == [3, 6]
    names = {name for _, name, _ in trainer.given}
    assert names == {"loss_cosine_mse", "loss_infonce"}
    for line in lines:
        window = range(line["step"] - 2, line["step"] + 1)
        for name in names:
            values = [float(v) for s, n, v in trainer.given if n == name and s in window]
            assert len(values) == 3
            assert line[name] == pytest.approx(sum(values) / 3, abs=1e-6)
        # the parts make up the logged loss: 1 · cosine_mse + 0.5 · infonce, step by step
        total = line["loss_cosine_mse"] + 0.5 * line["loss_infonce"]
        assert line["loss"] == pytest.approx(total, abs=1e-6)


def test_a_fixed_seed_run_logs_what_it_logged_with_a_float_per_step(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    now = train(BaseTrainer, tiny_bert_nodropout_dir, tmp_path / "now")
    before = train(
        ItemPerStepTrainer,
        tiny_bert_nodropout_dir,
        tmp_path / "before",
        logging_nan_inf_filter=True,  # transformers' default, as it was
    )
    assert len(logged_lines(now)) == len(logged_lines(before)) == 2
    for ours, theirs in zip(logged_lines(now), logged_lines(before), strict=True):
        assert ours.keys() == theirs.keys()
        for key, value in theirs.items():
            assert ours[key] == pytest.approx(value, abs=1e-6), key
    final = now.state.log_history[-1]["train_loss"]
    assert final == pytest.approx(before.state.log_history[-1]["train_loss"], abs=1e-6)


# ----------------------------------------------------------------------------- syncs
class HostReads(TorchDispatchMode):
    """Counts the host reads of a tensor's value (``aten::_local_scalar_dense``: ``.item()``,
    ``float``, ``int``, ``bool`` of a tensor; a GPU sync each on CUDA) while ``on``, by the
    innermost frame of sts-core or transformers that made them."""

    def __init__(self) -> None:
        super().__init__()
        self.on = False
        self.reads: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if self.on and func is torch.ops.aten._local_scalar_dense.default:
            frames = [
                f"{frame.filename}:{frame.lineno}"
                for frame in traceback.extract_stack()
                if "/sts_core/" in frame.filename or "/transformers/" in frame.filename
            ]
            self.reads.append(frames[-1] if frames else "?")
        return func(*args, **(kwargs or {}))


def reads_by_step(trainer_class: type, folder: Path, output_dir: Path, **overrides: Any) -> dict:
    """The host reads in each optimizer step (forward, backward, optimizer; the log line
    that follows a logging step is not in it) of a run of 6 steps logging every 3rd."""
    reads = HostReads()
    by_step: dict[int, list[str]] = {}

    class Window(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            reads.reads.clear()
            reads.on = True

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            reads.on = False
            by_step[state.global_step] = list(reads.reads)

    encoder = SentenceEncoder.from_pretrained(folder, padding_free="false")
    trainer = trainer_class(
        model=encoder,
        args=config(output_dir, **overrides),
        train_dataset=dataset(),
        callbacks=[Window()],
    )
    with reads:
        trainer.train()
    return by_step


def of_the_training_loop(reads: list[str]) -> list[str]:
    """The reads made by the Trainer, the loss or the loss parts: not by the encoder or
    transformers' model code, whose shapes depend on the batch (packing plans, the
    attention mask's skip check)."""
    return [
        at
        for at in reads
        if "/sts_core/training/" in at
        or "/sts_core/losses/" in at
        or "/transformers/trainer.py" in at
    ]


def test_a_training_step_reads_nothing_on_the_host_outside_a_log_line(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    by_step = reads_by_step(BaseTrainer, tiny_bert_nodropout_dir, tmp_path / "now")
    assert sorted(by_step) == [1, 2, 3, 4, 5, 6]
    for step in (1, 2, 4, 5):  # not a logging step, not the last one
        assert of_the_training_loop(by_step[step]) == [], step


def test_the_sync_test_sees_a_read_per_step_of_the_trainer_as_it_was(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    # the parts read each step (the trainer before): reads from sts_core's training code
    item = reads_by_step(ItemPerStepTrainer, tiny_bert_nodropout_dir, tmp_path / "item")
    found = of_the_training_loop(item[1])
    assert len(found) == 2 and all("/sts_core/" in at for at in found), found
    # transformers' NaN filter on: two reads of the loss a step (isnan, isinf)
    nan = reads_by_step(
        BaseTrainer, tiny_bert_nodropout_dir, tmp_path / "nan", logging_nan_inf_filter=True
    )
    found = of_the_training_loop(nan[1])
    assert len(found) == 2 and all("/transformers/trainer.py" in at for at in found), found


def test_a_nan_loss_still_stops_the_run_before_it_is_logged(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    assert not config(tmp_path).logging_nan_inf_filter  # the default here

    class NanAtStepTwo(BaseTrainer):
        def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            loss = super().compute_loss(model, inputs, *args, **kwargs)
            return loss * float("nan") if self.state.global_step == 1 else loss

    encoder = SentenceEncoder.from_pretrained(tiny_bert_nodropout_dir)
    trainer = NanAtStepTwo(model=encoder, args=config(tmp_path), train_dataset=dataset())
    with pytest.raises(TrainingDiverged, match="the loss of step 2 is nan"):
        trainer.train()
    assert logged_lines(trainer) == []  # step 3's line, which would hold it, never came


# ----------------------------------------------------------------------------- LossParts
def test_loss_parts_join_on_their_device_and_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loss_parts_module, "JOIN_EVERY", 4)
    parts = LossParts()
    assert not parts and parts.means() == {}
    values = [0.1 * i for i in range(10)]
    a = [torch.tensor(v, dtype=torch.bfloat16 if v > 0.5 else torch.float64) for v in values]
    for value, tensor in zip(values, a, strict=True):
        parts.add("a", tensor)
        parts.add("b", torch.tensor([2 * value]))
    for value in (5.0, 7.0):  # a third part, of another count: each mean from its own values
        parts.add("c", torch.tensor(value))
    held = parts._values["a"]
    assert len(held) == 1 and held[0].shape == (10,)  # joined at 4 held: 4, 1 + 3, 1 + 3
    assert parts.count("a") == parts.count("b") == 10 and len(parts) == 3
    assert parts.count("c") == 2 and parts.count("never added") == 0
    expected_a = [float(tensor.float()) for tensor in a]
    expected_b = [float(torch.tensor(2 * v).float()) for v in values]
    expected = {"a": sum(expected_a) / 10, "b": sum(expected_b) / 10, "c": 6.0}
    assert parts.means() == expected
    assert not parts and parts.means() == {}
