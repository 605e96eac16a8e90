"""``weight_averaging``: the uniform and EMA averages against their formulas, the trainer's
final weights equal to the average of its per-step weights, a resumed run averaging as an
uninterrupted one, and the settings refused before training."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset
from torch import nn
from transformers import TrainerCallback

from sts_core.encoder import SentenceEncoder
from sts_core.testing import quick_training_args
from sts_core.training import BaseConfig, BaseTrainer
from sts_core.training.averaging import WEIGHT_AVERAGE_NAME, WeightAverager

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def snapshots_into(model: nn.Module, values: list[float], averager: WeightAverager) -> None:
    for value in values:
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.fill_(value)
        averager.update(model)


def test_uniform_is_the_mean_and_ema_the_moving_average() -> None:
    model = nn.Linear(2, 2)
    model.bias.requires_grad_(False)  # frozen weights are left alone
    uniform = WeightAverager("uniform", start=0.0, every=1, decay=0.999)
    snapshots_into(model, [1.0, 2.0, 6.0], uniform)
    uniform.apply_to(model)
    torch.testing.assert_close(model.weight, torch.full((2, 2), 3.0))
    assert model.bias.eq(6.0).all() and uniform.count == 3

    ema = WeightAverager("ema", start=0.0, every=1, decay=0.9)
    snapshots_into(model, [1.0, 2.0, 6.0], ema)
    ema.apply_to(model)
    expected = 0.9 * (0.9 * 1.0 + 0.1 * 2.0) + 0.1 * 6.0  # W̄₀ = W₀, then d·W̄ + (1 − d)·W
    torch.testing.assert_close(model.weight, torch.full((2, 2), expected))


PAIRS = {
    "sentence1": ["a man plays", "the dog runs", "a cat eats", "the boy sits"] * 4,
    "sentence2": ["a man plays a guitar", "a dog runs", "a cat", "the girl sits"] * 4,
    "score": [0.9, 0.8, 0.5, 0.2] * 4,
}


class RecordWeights(TrainerCallback):
    """The trainable weights after every optimizer step (before the averager sees them)."""

    def __init__(self) -> None:
        self.by_step: dict[int, dict[str, torch.Tensor]] = {}

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.by_step[state.global_step] = {
            n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad
        }


class StopAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        control.should_training_stop = state.global_step == self.step
        return control


def averaged_run(model_dir: Path, output: Path, callbacks: list, **settings) -> BaseTrainer:
    args = quick_training_args(
        BaseConfig,
        output,
        max_steps=4,
        per_device_train_batch_size=4,
        weight_averaging="uniform",
        weight_averaging_start=0.5,  # steps 2, 3 and 4
        **settings,
    )
    trainer = BaseTrainer(
        model=SentenceEncoder.from_pretrained(model_dir),
        args=args,
        train_dataset=Dataset.from_dict(PAIRS),
        callbacks=callbacks,
    )
    return trainer


def test_the_final_weights_are_the_mean_of_the_steps_from_the_start(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    record = RecordWeights()
    trainer = averaged_run(tiny_bert_nodropout_dir, tmp_path / "run", [record])
    trainer.train()
    assert sorted(record.by_step) == [1, 2, 3, 4]
    final = dict(trainer.model.named_parameters())
    for name in record.by_step[4]:
        mean = sum(record.by_step[step][name] for step in (2, 3, 4)) / 3
        torch.testing.assert_close(final[name].detach(), mean, rtol=1e-5, atol=1e-6)
    moved = any(not torch.equal(record.by_step[4][n], final[n].detach()) for n in record.by_step[4])
    assert moved  # the average differs from the last step's weights


def test_a_resumed_run_averages_like_an_uninterrupted_one(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    saving = {"save_strategy": "steps", "save_steps": 3, "save_total_limit": None}
    straight = averaged_run(tiny_bert_nodropout_dir, tmp_path / "straight", [], **saving)
    straight.train()
    interrupted = averaged_run(tiny_bert_nodropout_dir, tmp_path / "resumed", [StopAt(3)], **saving)
    interrupted.train()
    checkpoint = tmp_path / "resumed" / "checkpoint-3"
    assert (checkpoint / WEIGHT_AVERAGE_NAME).is_file()  # steps 2 and 3 so far
    resumed = averaged_run(tiny_bert_nodropout_dir, tmp_path / "resumed", [], **saving)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.weight_averager.count == straight.weight_averager.count == 3
    for key, value in straight.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[key], value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"weight_averaging": "swa"}, "not one of none, uniform, ema"),
        ({"weight_averaging": "ema", "weight_averaging_start": 1.0}, r"in \[0, 1\)"),
        ({"weight_averaging": "ema", "weight_averaging_every": 0}, "must be ≥ 1"),
        ({"weight_averaging": "ema", "ema_decay": 1.0}, r"in \(0, 1\)"),
        (
            {
                "weight_averaging": "uniform",
                "load_best_model_at_end": True,
                "eval_strategy": "epoch",
                "save_strategy": "epoch",
            },
            "load_best_model_at_end",
        ),
    ],
)
def test_settings_out_of_range_or_in_conflict_are_refused(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BaseConfig(output_dir="unused", report_to="none", **settings)


def test_a_checkpoint_of_another_mode_is_refused(tmp_path: Path) -> None:
    model = nn.Linear(2, 2)
    ema = WeightAverager("ema", start=0.0, every=1, decay=0.999)
    ema.update(model)
    ema.save(tmp_path)
    with pytest.raises(ValueError, match="'ema', this run asks for 'uniform'"):
        WeightAverager("uniform", start=0.0, every=1, decay=0.999).load(tmp_path, model)
    with pytest.raises(ValueError, match="not this model's trainable parameters"):
        WeightAverager("ema", start=0.0, every=1, decay=0.999).load(
            tmp_path, nn.Linear(2, 3).requires_grad_(False)
        )
    assert WeightAverager.from_config(SimpleNamespace(weight_averaging="none")) is None
