"""A short ``torch.profiler`` summary of training steps (``train.py --profile-steps N``).

N optimizer steps near the end of a run are profiled (every step before them warms up),
then one more step with Python stacks, which only says where the scalar reads happen (the
profiler's Python tracer slows a step several times over: its times are not used). Per
step of the N it reports:

- wall: the window's wall time over N (on CUDA synchronised at both ends);
- host ops: the self CPU time of every profiled operator (ATen ops and, on CUDA, the
  runtime calls: kernel launches, copies, waits); what is left of the wall is Python,
  the data loader and the profiler itself;
- device: the time of every kernel, copy and set on the GPU (CUDA only; ``None`` on a CPU);
- scalar reads: ``aten::_local_scalar_dense`` events, what ``.item()``, ``float(t)``,
  ``int(t)`` and ``bool(t)`` of a tensor run: on a GPU tensor each makes the host wait
  for the GPU;
- CUDA syncs: ``cudaStreamSynchronize``, ``cudaDeviceSynchronize`` and
  ``cudaEventSynchronize`` calls (a blocking copy to the host, a scalar read, an explicit
  sync), with the host time spent waiting in them, and device-to-host copies (CUDA only).

The Trainer's log/save/evaluate phase after a step (``_maybe_log_save_evaluate``, marked
with :data:`LOG_RANGE`) is counted apart, per phase: the window holds N steps and the N − 1
phases between them, so ``step`` is what a step costs without its log line. The last step's
scalar reads are listed by where they happen (``scalar_reads_at``: the innermost Python
frame outside torch, e.g. ``transformers/trainer.py(1913): _run_epoch``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

#: the range :func:`mark_logging` puts around the Trainer's log/save/evaluate phase
LOG_RANGE = "sts::log_save_evaluate"
#: what every host read of a tensor's value runs (``.item()``, ``float``, ``int``, ``bool``)
SCALAR_READ = "aten::_local_scalar_dense"
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
#: frames skipped when naming where a scalar read happens (torch's own, Python's)
SKIPPED_FRAMES = ("torch/", "<built-in", "nn.Module: ", "contextlib.py", "functools.py")
TOP = 5


def synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def mark_logging(trainer: Any) -> None:
    """Put the Trainer's log/save/evaluate phase in a profiler range (:data:`LOG_RANGE`),
    so the summary tells it apart from the step (no cost when nothing profiles)."""
    import torch

    phase = trainer._maybe_log_save_evaluate

    def marked(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(LOG_RANGE):
            return phase(*args, **kwargs)

    trainer._maybe_log_save_evaluate = marked


def with_stacks() -> dict[str, Any]:
    """``torch.profiler.profile``'s options that record each operator's Python frames:
    ``verbose`` fills ``event.stack`` (innermost first); torch 2.11 (the GPU machine's)
    keeps no other record of them (2.15 also lists the Python tracer's frames as events,
    each operator's ``cpu_parent``)."""
    import torch

    return {
        "with_stack": True,
        "experimental_config": torch.profiler._ExperimentalConfig(verbose=True),
    }


def step_profiler(first_step: int, steps: int, device: str) -> Any:
    """A ``TrainerCallback`` that profiles the optimizer steps ``first_step`` (1-based) to
    ``first_step + steps - 1``, then the next one with Python stacks; ``summary`` is
    :func:`summarize` of the first ``steps`` with ``scalar_reads_at`` from the last one,
    once the run has taken all ``steps + 1``."""
    import torch
    from torch.profiler import ProfilerActivity
    from transformers import TrainerCallback

    last_step = first_step + steps - 1
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)

    class StepProfiler(TrainerCallback):
        def __init__(self) -> None:
            self.profile: Any = None
            self.summary: dict[str, Any] | None = None
            self.step_ends: list[float] = []
            self.started = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step + 1 != first_step or self.profile is not None:
                return
            synchronize(device)
            self.profile = torch.profiler.profile(activities=activities)
            self.profile.start()
            self.started = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.profile is None:
                return
            if state.global_step <= last_step:
                self.step_ends.append(time.perf_counter())
            if state.global_step == last_step:
                synchronize(device)
                wall = time.perf_counter() - self.started
                self.profile.stop()
                starts = [self.started, *self.step_ends[:-1]]
                walls = [b - a for a, b in zip(starts, self.step_ends, strict=True)]
                self.summary = summarize(self.profile.events(), steps, wall, device)
                self.summary["wall_ms_by_step"] = [round(1e3 * s, 2) for s in walls]
                # the next step, with Python stacks: where its scalar reads happen
                self.profile = torch.profiler.profile(activities=activities, **with_stacks())
                self.profile.start()
            elif state.global_step == last_step + 1:
                synchronize(device)
                self.profile.stop()
                assert self.summary is not None  # set at the last timed step
                self.summary["scalar_reads_at"] = scalar_reads_at(self.profile.events())
                self.profile = None

    return StepProfiler()


def scalar_reads_at(events: Iterable[Any]) -> dict[str, int]:
    """The scalar reads of a step, outside its log phase, by where they happen."""
    found: Counter[str] = Counter()
    for event in events:
        if event.name == SCALAR_READ and not under_logging(event):
            found[where(event)] += 1
    return dict(found.most_common())


def under_logging(event: Any) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name == LOG_RANGE:
            return True
        parent = parent.cpu_parent
    return False


def is_python(event: Any) -> bool:
    """A frame of the profiler's Python tracer (``file.py(line): function``), not an op."""
    flagged = getattr(event, "is_python_function", None)
    if flagged is not None:
        return bool(flagged)
    return ".py(" in event.name or event.name.startswith(("<built-in", "nn.Module: "))


def where(event: Any) -> str:
    """Where a scalar read ``event`` happens: the innermost Python frame outside torch
    (``path.py(line): function``, from its stack or its parents, the Python tracer's
    frames) and the outermost operator under it that read (``aten::is_nonzero`` for a
    ``bool(t)``; e.g. ``aten::_fused_adamw_``, whose CPU kernel reads each step count)."""
    operator, parent = event.name, event.cpu_parent
    while parent is not None:
        if not is_python(parent):
            if not getattr(parent, "is_user_annotation", False):  # a range, not an op
                operator = parent.name
        elif not any(skipped in parent.name for skipped in SKIPPED_FRAMES):
            return f"{parent.name} [{operator}]"
        parent = parent.cpu_parent
    for frame in event.stack or []:  # innermost first (with_stack and verbose)
        if not any(skipped in frame for skipped in SKIPPED_FRAMES):
            return f"{frame} [{operator}]"
    return f"[{operator}]"


def summarize(events: Iterable[Any], steps: int, wall_seconds: float, device: str) -> dict:
    """Per-step numbers of a profiled window of ``steps`` steps (see the module)."""
    from torch.autograd import DeviceType

    cuda = device == "cuda"
    parts = {name: _Part() for name in ("step", "logging")}
    device_us = 0.0
    copies_to_host = 0
    phases = 0
    for event in events:
        if event.device_type != DeviceType.CPU:
            device_us += event.time_range.elapsed_us()
            copies_to_host += "DtoH" in event.name or "Device -> Host" in event.name
            continue
        if event.name == LOG_RANGE:
            phases += 1
            continue
        part = parts["logging" if under_logging(event) else "step"]
        part.add(event)
    step = parts["step"].per(steps, cuda)
    step["wall_ms"] = round(1e3 * wall_seconds / steps, 2)
    step["device_ms"] = round(device_us / 1e3 / steps, 3) if cuda else None
    step["copies_to_host"] = round(copies_to_host / steps, 2) if cuda else None
    return {
        "device": device,
        "steps": steps,
        "step": step,
        "logging": {"phases": phases, **parts["logging"].per(max(phases, 1), cuda)},
        "top_host_ops": parts["step"].top_ops(steps),
        "scalar_reads_at": None,  # set from the step after, with stacks (step_profiler)
    }


class _Part:
    """Sums of the host events of one part (the step, or the logging phases)."""

    def __init__(self) -> None:
        self.host_us = 0.0
        self.sync_wait_us = 0.0
        self.scalar_reads = 0
        self.syncs = 0
        self.ops: Counter[str] = Counter()

    def add(self, event: Any) -> None:
        if getattr(event, "is_user_annotation", False) or is_python(event):
            return  # a record_function range or a Python frame: not an operator
        self.host_us += event.self_cpu_time_total
        self.ops[event.name] += event.self_cpu_time_total
        self.scalar_reads += event.name == SCALAR_READ
        if event.name in SYNC_CALLS:
            self.syncs += 1
            self.sync_wait_us += event.self_cpu_time_total

    def per(self, count: int, cuda: bool) -> dict[str, Any]:
        return {
            "host_ops_ms": round(self.host_us / 1e3 / count, 3),
            "scalar_reads": round(self.scalar_reads / count, 2),
            "cuda_syncs": round(self.syncs / count, 2) if cuda else None,
            "sync_wait_ms": round(self.sync_wait_us / 1e3 / count, 3) if cuda else None,
        }

    def top_ops(self, count: int) -> list[list[Any]]:
        return [[name, round(us / 1e3 / count, 3)] for name, us in self.ops.most_common(TOP)]
