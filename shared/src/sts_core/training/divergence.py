"""Stop a run whose training loss stops being a number, before anything is saved from it.

A learning rate that is too high, a bad label or float16 overflow can make the loss NaN or
infinite; the Trainer would go on (it even replaces such a loss by the mean of the logged
ones) and save a model of NaN weights marked complete. :class:`DivergenceGuard` notes the
first optimizer step whose loss is not finite (on the loss's device: no host sync per
step) and checks it before every log line, evaluation and save and after the last step; the
trainable weights are checked before every evaluation and after the last step (here) and
before every checkpoint (the save calls :meth:`DivergenceGuard.check` with the model). A
diverged run stops with one line naming the step (:class:`TrainingDiverged`) and publishes
neither a checkpoint nor a final model of it. Under a launch the processes agree: every
process calls the check at the same point, and the check gathers each process's first bad
step and count of bad weights, so a fault on any one process (rank 1's loss alone, rank 1's
weights alone) stops them all at that point, each with the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from transformers import TrainerCallback

if TYPE_CHECKING:
    from torch import nn
    from transformers import Trainer, TrainerControl, TrainerState, TrainingArguments


class TrainingDiverged(RuntimeError):
    """The training loss (or a weight) became NaN or infinite; nothing of it was saved."""


class DivergenceGuard(TrainerCallback):
    """Records the first step with a non-finite loss; raises :class:`TrainingDiverged`
    at the next point where the Trainer would log, evaluate, save or stop."""

    def __init__(self) -> None:
        self.first_bad_step: torch.Tensor | None = None  # 0: none so far
        self.first_bad_value: torch.Tensor | None = None
        self.trainer: Trainer | None = None  # set by the trainer: its accelerator gathers the steps

    def observe(self, loss: torch.Tensor, step: int) -> None:
        """Note ``loss`` of (1-based) optimizer step ``step``, without a device sync."""
        loss = loss.detach().float().reshape(())
        if self.first_bad_step is None:
            self.first_bad_step = torch.zeros((), dtype=torch.int64, device=loss.device)
            self.first_bad_value = torch.zeros((), device=loss.device)
        new = (self.first_bad_step == 0) & ~torch.isfinite(loss)
        self.first_bad_step = torch.where(new, step, self.first_bad_step)
        assert self.first_bad_value is not None  # set with first_bad_step
        self.first_bad_value = torch.where(new, loss, self.first_bad_value)

    def check(self, model: Any = None) -> None:
        """Raise :class:`TrainingDiverged` if a step so far had a non-finite loss on any
        process, or (``model``) a trainable weight of any process is not finite. Under a
        launch every process calls it at the same point (one gather), and all stop."""
        bad_weights = non_finite_weights(model) if model is not None else []
        step, value, weights_elsewhere = self._gathered(len(bad_weights))
        if step:
            raise TrainingDiverged(
                f"training diverged: the loss of step {step} is {value} (not a finite number); "
                "no checkpoint or model of it was saved. Lower the learning rate, check the "
                "labels, or train in float32 / bf16"
            )
        if bad_weights or weights_elsewhere:
            names = ", ".join(bad_weights[:3]) or "of another process"
            raise TrainingDiverged(
                f"training diverged: the weights {names} hold NaN or infinite values after a "
                "step with a finite loss; nothing of it was saved. Lower the learning rate or "
                "set max_grad_norm"
            )

    def _gathered(self, bad_weights: int) -> tuple[int, float, int]:
        """(the first bad step of all processes or 0, its loss, processes with bad
        weights)."""
        step = self.first_bad_step if self.first_bad_step is not None else torch.zeros(())
        value = self.first_bad_value if self.first_bad_value is not None else torch.zeros(())
        local = torch.stack(
            [step.double().cpu(), value.double().cpu(), torch.tensor(float(bad_weights))]
        )
        rows = local.reshape(1, 3)
        accelerator = getattr(self.trainer, "accelerator", None)
        if accelerator is not None and accelerator.num_processes > 1:
            rows = accelerator.gather(local.to(accelerator.device).reshape(1, 3)).cpu()
        listed = rows.reshape(-1, 3).tolist()
        weights = sum(1 for row in listed if row[2] > 0)
        bad_steps = [row for row in listed if row[0] > 0]
        if not bad_steps:
            return 0, 0.0, weights
        first = min(bad_steps, key=lambda row: row[0])
        return int(first[0]), first[1], weights

    # ------------------------------------------------------------------ callback
    # The weights are checked here before an evaluation (it reads them) and after the last
    # step (a Trainer used without TrainingRun saves after it); a checkpoint checks them
    # itself, just before it writes (``_save_checkpoint``), so that check has one place.
    def on_step_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: nn.Module | None = None,
        **kw: Any,
    ) -> None:
        last = state.max_steps > 0 and state.global_step >= state.max_steps
        uses_weights = last or control.should_evaluate
        if uses_weights or control.should_log or control.should_save:
            self.check(model if uses_weights else None)

    def on_epoch_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: nn.Module | None = None,
        **kw: Any,
    ) -> None:
        self.check(model if control.should_evaluate else None)


def non_finite_weights(model: Any) -> list[str]:
    """Names of the trainable parameters holding a NaN or an infinity (one device sync)."""
    trainable = [
        (name, p)
        for name, p in model.named_parameters()
        if p.requires_grad and not hasattr(p, "ds_tensor")
    ]  # a DeepSpeed ZeRO-3 parameter's own tensor may be a buffer still being gathered, and
    # its shard holds padding: those are not checked (the loss still is)
    if not trainable:
        return []
    flags = [p.detach().isfinite().all() for _, p in trainable]
    finite = torch.stack([flag.to(flags[0].device) for flag in flags])
    return [name for (name, _), ok in zip(trainable, finite.tolist(), strict=True) if not ok]
