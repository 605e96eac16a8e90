"""Weight averaging over the end of a run (``weight_averaging`` in any recipe).

- ``uniform``: the mean of the trainable weights after every ``weight_averaging_every``-th
  optimizer step from ``weight_averaging_start`` (a fraction of the run's steps) to the end,

      W̄ = 1/n · Σₖ W_{t₀ + k·every},

  stochastic weight averaging (Izmailov et al., 2018, "Averaging Weights Leads to Wider
  Optima and Better Generalization") under the run's own learning-rate schedule;
- ``ema``: an exponential moving average W̄ ← d·W̄ + (1 − d)·W from the same start, decay
  d = ``ema_decay``.

The averaged weights replace the trained ones when training ends, so the saved model, the
final evaluation and ``metrics.json`` are the average's. The update rules are torch's
(``torch.optim.swa_utils``); the average is kept in float32 beside each parameter (one
extra copy of the trainable weights: with LoRA, of the adapter only). Checkpoints carry
it (``weight_average.pt``) and, with every other setting the result depends on, the
settings it was made with (:func:`averaging_settings`, recorded by
:mod:`sts_core.training.resume_settings`, also when averaging is off), so a resumed run
averages exactly as an uninterrupted one, and a resume under other settings is refused
before the weights load. Checkpoints written before that record hold only
``weight_averaging.json`` (:func:`write_averaging_settings`), checked by
:func:`check_resume_averaging`.
Refused with ``load_best_model_at_end`` (the average, not a dev-selected checkpoint, is the
final model) and under DeepSpeed ZeRO-3 (whose parameters are sharded across processes).

:func:`average_state_dicts` averages whole runs instead (a "model soup" over seeds); the
``sts-soup`` command applies it to saved models, ``sts-search --soup`` to the
:func:`embedding_weights` of each pick's seeds.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.optim.swa_utils import get_ema_multi_avg_fn, get_swa_multi_avg_fn
from transformers import TrainerCallback

from sts_core.options import BELOW_ONE, check_number

if TYPE_CHECKING:
    from torch import nn
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from sts_core.training.config import BaseConfig

logger = logging.getLogger(__name__)

AVERAGING_MODES = ("none", "uniform", "ema")
WEIGHT_AVERAGE_NAME = "weight_average.pt"
# the record of checkpoints written before sts_run_settings.json (resume_settings)
AVERAGING_SETTINGS_NAME = "weight_averaging.json"


def check_weight_averaging(config: BaseConfig) -> None:
    """ValueError for averaging settings out of range or in conflict with the run's."""
    mode = config.weight_averaging
    if mode not in AVERAGING_MODES:
        raise ValueError(f"weight_averaging {mode!r} is not one of {', '.join(AVERAGING_MODES)}")
    check_number("weight_averaging_start", config.weight_averaging_start, **BELOW_ONE)
    if config.weight_averaging_every < 1:
        raise ValueError(f"weight_averaging_every must be ≥ 1, got {config.weight_averaging_every}")
    check_number("ema_decay", config.ema_decay, 0, 1, min_inclusive=False, max_inclusive=False)
    if mode != "none" and config.load_best_model_at_end:
        raise ValueError(
            "weight_averaging with load_best_model_at_end: the final model would be either the "
            "average or the dev-selected checkpoint; set load_best_model_at_end: false to keep "
            "the average (or weight_averaging: none)"
        )


def averaging_settings(config: BaseConfig) -> dict[str, Any]:
    """The settings that decide a run's weight average (what a checkpoint records)."""
    mode = config.weight_averaging
    if mode == "none":
        return {"weight_averaging": "none"}
    settings = {
        "weight_averaging": mode,
        "weight_averaging_start": float(config.weight_averaging_start),
        "weight_averaging_every": int(config.weight_averaging_every),
    }
    if mode == "ema":
        settings["ema_decay"] = float(config.ema_decay)
    return settings


def write_averaging_settings(folder: Path, config: BaseConfig) -> None:
    """Record the run's averaging settings as a checkpoint written before
    ``sts_run_settings.json`` did (``weight_averaging.json``; the tests make such
    checkpoints with it)."""
    text = json.dumps(averaging_settings(config), sort_keys=True)
    (Path(folder) / AVERAGING_SETTINGS_NAME).write_text(text, encoding="utf-8")


def checkpoint_averaging_settings(folder: Path) -> dict[str, Any] | None:
    """The averaging settings a checkpoint was saved under; None when it does not say (a
    checkpoint written before they were recorded)."""
    path = Path(folder) / AVERAGING_SETTINGS_NAME
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    return None


def check_resume_averaging(config: BaseConfig) -> None:
    """ValueError, before any weights load, when ``resume_from_checkpoint`` names a
    checkpoint written before ``sts_run_settings.json`` existed (its averaging settings in
    ``weight_averaging.json``, or none) saved under other ``weight_averaging`` settings
    (newer checkpoints: :func:`~sts_core.training.resume_settings.check_resume_settings`):
    turning averaging on (the snapshots before the checkpoint are missing), switching
    ``uniform`` ↔ ``ema``, moving its start or period, or turning it off (the checkpoint's
    average would be dropped) would give neither the checkpoint's run nor an uninterrupted
    run of this recipe."""
    checkpoint = config.resume_from_checkpoint
    if not checkpoint or not Path(checkpoint).is_dir():
        return
    wanted = averaging_settings(config)
    saved = checkpoint_averaging_settings(Path(checkpoint))
    if saved is None:
        has_average = (Path(checkpoint) / WEIGHT_AVERAGE_NAME).is_file()
        if wanted["weight_averaging"] == "none" and not has_average:
            return  # an older checkpoint of a run without averaging
        raise ValueError(
            f"resume_from_checkpoint {checkpoint} does not record its weight_averaging "
            f"settings (saved by an older version), and this run asks for "
            f"{_describe(wanted)}: start a new run to average weights"
        )
    if saved != wanted:
        raise ValueError(
            f"resume_from_checkpoint {checkpoint} was trained with {_describe(saved)}, this "
            f"run asks for {_describe(wanted)}: a resumed run must average as the run it "
            "continues (give the checkpoint's settings, or start a new run)"
        )


def _describe(settings: dict[str, Any]) -> str:
    mode = settings["weight_averaging"]
    rest = ", ".join(f"{k} {v}" for k, v in settings.items() if k != "weight_averaging")
    return f"weight_averaging {mode}" + (f" ({rest})" if rest else "")


class WeightAverager(TrainerCallback):
    """Keeps the average of the model's trainable weights during training and puts it into
    the model when training ends (see the module docstring)."""

    def __init__(self, mode: str, start: float, every: int, decay: float) -> None:
        self.mode, self.start, self.every, self.decay = mode, start, every, decay
        update = get_swa_multi_avg_fn() if mode == "uniform" else get_ema_multi_avg_fn(decay)
        self._update = update
        self.names: list[str] = []
        self.averaged: list[torch.Tensor] = []
        self.count = 0
        self.start_step = 1

    @classmethod
    def from_config(cls, config: BaseConfig) -> WeightAverager | None:
        if config.weight_averaging == "none":
            return None
        return cls(
            config.weight_averaging,
            config.weight_averaging_start,
            config.weight_averaging_every,
            config.ema_decay,
        )

    @staticmethod
    def trainable(model: Any) -> list[tuple[str, torch.Tensor]]:
        return [(name, p) for name, p in model.named_parameters() if p.requires_grad]

    def update(self, model: Any) -> None:
        """Add the model's current weights to the average."""
        trainable = self.trainable(model)
        current = [p.detach().float() for _, p in trainable]
        if not self.averaged:
            self.names = [name for name, _ in trainable]
            self.averaged = [weights.clone() for weights in current]
        else:
            self._update(self.averaged, current, self.count)
        self.count += 1

    def apply_to(self, model: Any) -> None:
        """Copy the average into the model's trainable weights."""
        if not self.averaged:
            return
        parameters = dict(self.trainable(model))
        with torch.no_grad():
            for name, average in zip(self.names, self.averaged, strict=True):
                parameters[name].copy_(average)  # cast to the parameter's dtype
        logger.info(
            "weight averaging (%s): the final weights are the average of %d snapshots from step %d",
            self.mode,
            self.count,
            self.start_step,
        )

    # ------------------------------------------------------------------ callback
    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.start_step = max(1, math.ceil(self.start * state.max_steps))

    def on_step_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: nn.Module | None = None,
        **kw: Any,
    ) -> None:
        step = state.global_step
        if step >= self.start_step and (step - self.start_step) % self.every == 0:
            self.update(model)

    def on_train_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: nn.Module | None = None,
        **kw: Any,
    ) -> None:
        self.apply_to(model)

    # ------------------------------------------------------------------ checkpoints
    def save(self, folder: Path) -> None:
        state = {
            "mode": self.mode,
            "count": self.count,
            "names": self.names,
            "averaged": [t.cpu() for t in self.averaged],
        }
        torch.save(state, folder / WEIGHT_AVERAGE_NAME)

    def load(self, folder: Path, model: Any) -> None:
        """The average saved with a checkpoint (none saved: it has not started yet)."""
        path = folder / WEIGHT_AVERAGE_NAME
        if not path.is_file():
            return
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state["mode"] != self.mode:
            raise ValueError(
                f"{path}: the checkpoint averaged weights with weight_averaging "
                f"{state['mode']!r}, this run asks for {self.mode!r}"
            )
        devices = {name: p.device for name, p in self.trainable(model)}
        if list(state["names"]) != list(devices):
            raise ValueError(
                f"{path}: the averaged weights are not this model's trainable parameters"
            )
        self.names, self.count = list(state["names"]), int(state["count"])
        self.averaged = [
            t.to(devices[name]) for name, t in zip(self.names, state["averaged"], strict=True)
        ]


# ---------------------------------------------------------------------------- soups
def embedding_weights(encoder: Any) -> dict[str, torch.Tensor]:
    """The weights that make the embeddings: the encoder's state dict without the heads
    trained beside it (:attr:`SentenceEncoder.heads`, e.g. a regression head), which a
    cosine-scored evaluation never uses. What a soup of seeds averages (``sts-search
    --soup``, the quality benchmark's soups)."""
    heads = tuple(f"{name}." for name in encoder.heads)
    return {key: value for key, value in encoder.state_dict().items() if not key.startswith(heads)}


def average_state_dicts(
    state_dicts: Sequence[Mapping[str, torch.Tensor]], names: Sequence[str] | None = None
) -> dict[str, torch.Tensor]:
    """A uniform model soup: θ = (1/n) Σᵢ θᵢ over n fine-tuned runs of one model.

    Wortsman et al. (2022), "Model soups: averaging weights of multiple fine-tuned models
    improves accuracy without increasing inference time" (ICML): runs fine-tuned from the
    same start (here: the same recipe, other seeds) average into one model. Floating-point
    tensors are averaged in float32 and cast back; every other tensor (integer buffers such
    as position ids) must be equal in all runs. ``names`` label the runs in errors.
    """
    if not state_dicts:
        raise ValueError("a soup needs at least one model")
    names = (
        list(names) if names is not None else [f"model {i + 1}" for i in range(len(state_dicts))]
    )
    running = RunningAverage(state_dicts[0], names[0])
    for name, state in zip(names[1:], state_dicts[1:], strict=True):
        running.add(state, name)
    return running.average()


class RunningAverage:
    """The uniform average of state dicts added one at a time: float tensors summed in
    float32 (one copy of the model, not n), the others checked equal to the first's."""

    def __init__(self, state: Mapping[str, torch.Tensor], name: str) -> None:
        self.name, self.count = name, 1
        self.dtypes = {key: tensor.dtype for key, tensor in state.items()}
        self.sums = {
            key: tensor.detach().to("cpu", torch.float32, copy=True)
            if tensor.is_floating_point()
            else tensor.detach().to("cpu", copy=True)
            for key, tensor in state.items()
        }

    def add(self, state: Mapping[str, torch.Tensor], name: str) -> None:
        """Add one model's weights; ValueError when its keys, shapes or buffers differ."""
        _check_same_tensors(self.name, self.sums, name, state)
        for key, total in self.sums.items():
            tensor = state[key].detach().cpu()
            if total.is_floating_point():
                total += tensor.float()
            elif not torch.equal(tensor, total):
                raise ValueError(f"{name}: {key} differs from {self.name}'s ({total.dtype})")
        self.count += 1

    def average(self) -> dict[str, torch.Tensor]:
        """θ = (1/n) Σᵢ θᵢ, each float tensor cast back to its dtype."""
        return {
            key: (total / self.count).to(self.dtypes[key]) if total.is_floating_point() else total
            for key, total in self.sums.items()
        }


def _check_same_tensors(
    reference: str,
    expected: Mapping[str, torch.Tensor],
    name: str,
    state: Mapping[str, torch.Tensor],
) -> None:
    missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or extra:
        raise ValueError(
            f"{name} and {reference} are not the same model: "
            f"missing {missing[:3]}{'…' if len(missing) > 3 else ''}, "
            f"extra {extra[:3]}{'…' if len(extra) > 3 else ''}"
        )
    for key, tensor in expected.items():
        if state[key].shape != tensor.shape:
            raise ValueError(
                f"{name}: {key} has shape {tuple(state[key].shape)}, "
                f"{reference} has {tuple(tensor.shape)}"
            )
