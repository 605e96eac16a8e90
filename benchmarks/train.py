"""Training speed: our CoSENT (the ``sts-cosent`` method, trained by the core's
``BaseTrainer``) against sentence-transformers' ``SentenceTransformerTrainer`` +
``CoSENTLoss``.

Same model (all-MiniLM-L6-v2), data (STS-B train + SICK-R train rescaled to 0–5, minus the
pairs of the seven test sets: 5,398 pairs), batch size 16, max length, learning rate 2e-5,
weight decay 0.01, 10 % linear warm-up, AdamW (the Trainer's default), seed and number of
steps; logging every step, no evaluation, no checkpoints, no dataloader workers. Our side
is a run of the method through ``TrainingRun.from_arguments`` (the command line's own path:
its checks, the model built from ``ModelArguments``), with no dev set; the run saves the
trained model after ``trainer.train()``, outside the timed window. Each run is a fresh
process; the sides alternate (ours, peer, ours, peer, …). Reported: pairs per second (pairs
trained / wall time of ``trainer.train()``, model loading excluded), the ratio per round,
peak memory (at the end of ``trainer.train()``), and the two loss curves side by side.
``--ablation`` adds ours with ``padding_free=False`` (the padded forward), which shows what
packing gives and must follow the peer's loss curve step for step.

Commands (from the repository root; STS_DATA_DIR and STS_MODELS_DIR must be set)::

    uv run python benchmarks/train.py --quick    # 30 steps, 2 rounds, ablation
    uv run python benchmarks/train.py            # full: one epoch (338 steps), 2 rounds, ablation
    uv run python benchmarks/train.py --smoke --output-dir /tmp/bench   # seconds, for tests
    # on a GPU: a random-weight BERT-base with MiniLM's tokenizer, bf16, batch 64
    uv run python benchmarks/train.py --device cuda --dtype bf16 --model-config bert-base \
        --batch-size 64 --max-steps 150

Results: ``benchmarks/results/train[_quick].{md,json,png}``; on a GPU ``gpu_train[_quick]``
with tokens per second, model FLOPs utilisation and peak GPU memory (``_gpu.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import _common as common
import _gpu as gpu
import _profile as profiling

MODES = {
    "smoke": {"max_steps": 3, "repeats": 1, "ablation": True},  # the padded side: a check
    "quick": {"max_steps": 30, "repeats": 2, "ablation": True},
    # max_steps None: one epoch, ceil(training pairs / batch size), set from the data in main()
    "full": {"max_steps": None, "repeats": 2, "ablation": True},
}
LABELS = {
    "ours": "ours (sts-cosent)",
    "peer": "sentence-transformers (CoSENTLoss)",
    "ours-padded": "ours, padding_free=False",
    "ours-packed": "ours, padding_free=True",
    "ours-compiled": "ours, torch_compile + pack_to_multiple_of",
    "ours-cached": "ours, infonce + gradient_cache_tokens",
    "ours-cached-per-column": "ours, infonce + gradient_cache_tokens, per_column rule",
    "peer-cached": "sentence-transformers (CachedMultipleNegativesRankingLoss, "
    "mini_batch_num_tokens)",
}
#: each of our sides' ``padding_free``: auto (what a recipe gets), false (padded), true
#: (packed: varlen where the backbone and device allow, else the block mask)
PADDING_FREE = {
    "ours": "auto",
    "ours-padded": "false",
    "ours-packed": "true",
    "ours-compiled": "true",  # beside ours-packed: compilation on and off
    "ours-cached": "auto",
    "ours-cached-per-column": "auto",
}
#: our cached sides' ``gradient_cache_token_rule``: ours (sorted, the default) and
#: sentence-transformers' per-column rule, whose mini-batches are the peer's
TOKEN_RULE = {"ours-cached": "sorted", "ours-cached-per-column": "per_column"}
CACHED_SIDES = ("ours-cached", "ours-cached-per-column", "peer-cached")


# ----------------------------------------------------------------------------- workers
def load_train_pairs() -> Any:
    from sts_core.data import load_filtered_stsb_sick

    train, _ = load_filtered_stsb_sick(common.data_dir())
    return train.select_columns(["sentence1", "sentence2", "score"])


def pairs_trained(steps: int, batch_size: int, dataset_size: int) -> int:
    """Pairs seen in ``steps`` optimizer steps of ``batch_size`` over a training set of
    ``dataset_size`` pairs, one process, no gradient accumulation: each epoch is
    ``ceil(dataset_size / batch_size)`` steps whose last batch holds the remainder (the
    Trainer's default, ``dataloader_drop_last`` false), so steps × batch overcounts."""
    steps_per_epoch = math.ceil(dataset_size / batch_size)
    epochs, rest = divmod(steps, steps_per_epoch)
    return epochs * dataset_size + min(rest * batch_size, dataset_size)


def training_arguments(spec: dict[str, Any], output_dir: str) -> dict[str, Any]:
    """The ``TrainingArguments`` both sides get."""
    return {
        "output_dir": output_dir,
        "per_device_train_batch_size": spec["batch_size"],
        "learning_rate": spec["learning_rate"],
        "weight_decay": 0.01,
        "warmup_steps": 0.1,  # a ratio of the steps (transformers 5)
        "lr_scheduler_type": "linear",
        "max_steps": spec["max_steps"],
        "seed": spec["seed"],
        "logging_steps": 1,
        "eval_strategy": "no",
        "save_strategy": "no",
        "report_to": "none",
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
        "bf16": spec.get("dtype") == "bf16",
        "use_cpu": spec.get("device", "cpu") == "cpu",
    }


def step_timer() -> Any:
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        """Wall-clock time at the end of every optimizer step."""

        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.times.append(time.perf_counter())

    return StepTimer()


def build_ours(
    spec: dict[str, Any],
    output_dir: str,
    callbacks: list[Any],
    padding_free: str,
    token_rule: str | None = None,
    compiled: bool = False,
) -> Any:
    """Our side through the command line's own path: :meth:`TrainingRun.from_arguments`
    with the CoSENT method (``sts_cosent.METHOD``), the step timer (and profiler) as
    callbacks, no dev set and no final evaluation. ``run()`` trains (timed:
    ``trainer.train()`` alone, see :func:`measure_training`), then saves the model,
    outside the timed window.
    ``token_rule``: in-batch InfoNCE under gradient caching by ``spec["cached"]`` tokens,
    mini-batches by this ``gradient_cache_token_rule``; None: the CoSENT method's loss.
    ``compiled``: ``torch_compile`` on (``spec["compile_backend"]``, ``compile_mode``) and
    the varlen rows filled to ``spec["pack_multiple"]`` tokens (``pack_to_multiple_of``)."""
    from sts_core.training import DataArguments, ModelArguments, TrainingRun
    from sts_cosent import METHOD

    class TimedRun(TrainingRun):
        """The run, with the step timer and the measurements of ``trainer.train()``."""

        measured: dict[str, Any]

        def build_callbacks(self) -> list[Any]:
            return [*super().build_callbacks(), *callbacks]

        def train(self, trainer: Any) -> Any:
            profiling.mark_logging(trainer)
            output, self.measured = measure_training(trainer, partial(super().train, trainer), spec)
            return output

    # cached: in-batch InfoNCE (τ 0.05, the peer's scale 20) under the token-budget cache
    loss = (
        {
            "loss": "infonce",
            "gradient_cache_tokens": spec["cached"],
            "gradient_cache_token_rule": token_rule,
        }
        if token_rule is not None
        else {}
    )
    compile_settings, filling = compile_options(spec, compiled)
    config = METHOD.config(
        **training_arguments(spec, output_dir),
        load_best_model_at_end=False,
        **loss,
        **compile_settings,
    )
    model_args = ModelArguments(
        model_name_or_path=spec["model"],
        max_seq_length=spec["max_length"],
        padding_free=padding_free,
        **filling,
    )
    data_args = DataArguments(data_dir=str(common.data_dir()), eval_dataset="none")
    return TimedRun.from_arguments(METHOD, model_args, data_args, config, load_train_pairs())


def compile_options(spec: dict[str, Any], compiled: bool) -> tuple[dict[str, Any], dict[str, int]]:
    """The compiled side's ``TrainingArguments`` (``torch_compile`` with the spec's backend
    and mode) and ``ModelArguments`` (``pack_to_multiple_of``); nothing for another side."""
    if not compiled:
        return {}, {}
    training = {
        "torch_compile": True,
        "torch_compile_backend": spec["compile_backend"],
        "torch_compile_mode": spec.get("compile_mode"),
    }
    return training, {"pack_to_multiple_of": spec["pack_multiple"]}


def measure_training(
    trainer: Any, train: Callable[[], Any], spec: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """``train()`` (a call of ``trainer.train()``) timed: its output, and its wall and CPU
    seconds, when it started (``started``, ``time.perf_counter``'s clock), the memory
    before and at the peak, and our encoder's training path."""
    device = spec.get("device", "cpu")
    rss_before = common.current_rss_mb()
    gpu.reset_peak_memory(device)
    cpu_start, start = common.cpu_seconds(), time.perf_counter()
    output = train()
    seconds = time.perf_counter() - start
    cpu = common.cpu_seconds() - cpu_start
    return output, {
        "seconds": seconds,
        "started": start,
        "cpu_seconds": round(cpu, 2),
        "rss_before_train_mb": round(rss_before, 1),
        # ours saves its model after training: the peak is taken here, as for the peer
        "peak_rss_mb": round(common.peak_rss_mb(), 1),
        "peak_gpu_memory_mb": gpu.peak_gpu_memory_mb(device),
        "packing_path": packing_path_of(trainer),
    }


def packing_path_of(trainer: Any) -> list[str] | None:
    """Our encoder's training path (varlen, block_mask or padded) and why: the last one its
    training forward took (under the run's autocast), else the one it would take now."""
    model = trainer.model
    if not hasattr(model, "packing_path"):
        return None
    if getattr(model, "training_paths", None):
        return list(list(model.training_paths)[-1])
    training = model.training
    path = list(model.train().packing_path())
    model.train(training)
    return path


def build_peer(
    spec: dict[str, Any], output_dir: str, callbacks: list[Any], cached: bool = False
) -> Any:
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        CoSENTLoss,
    )
    from transformers import set_seed

    set_seed(spec["seed"])
    model = SentenceTransformer(spec["model"], device=spec.get("device", "cpu"))
    if spec["max_length"]:
        model.max_seq_length = spec["max_length"]
    args = SentenceTransformerTrainingArguments(**training_arguments(spec, output_dir))
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=load_train_pairs(),
        loss=CachedMultipleNegativesRankingLoss(
            model, scale=20.0, mini_batch_num_tokens=spec["cached"]
        )
        if cached
        else CoSENTLoss(model, scale=20.0),
        callbacks=callbacks,
    )
    profiling.mark_logging(trainer)
    return trainer, {"max_length": model.max_seq_length}


def watch_mini_batches(side: str) -> list[list[int]]:
    """A list that fills, while a cached side trains, with the gradient cache's mini-batches
    of each training step: the texts each embeds, in order. Ours: each call of
    ``plan_mini_batches`` (one a step; a mini-batch of k rows embeds k texts of each of its
    columns). The peer: its ``_minibatch_ranges`` (one call per text column a step, each
    range one column's consecutive rows), the calls of a step joined by :func:`by_step`.
    Both are looked up by the caching code at call time, so wrapping the module attribute
    sees every call."""
    seen: list[list[int]] = []
    if side == "peer-cached":
        from sentence_transformers.base.losses import gradcache

        ranges = gradcache._minibatch_ranges

        def peer_ranges(*args: Any, **kwargs: Any) -> Any:
            result = ranges(*args, **kwargs)
            seen.append([end - begin for begin, end in result])
            return result

        gradcache._minibatch_ranges = peer_ranges
    else:
        from sts_core.training import grad_cache

        plan = grad_cache.plan_mini_batches

        def our_plan(*args: Any, **kwargs: Any) -> Any:
            result = plan(*args, **kwargs)
            seen.append([len(chunk.rows) * len(chunk.columns) for chunk in result])
            return result

        grad_cache.plan_mini_batches = our_plan
    return seen


def by_step(calls: list[list[int]], steps: int) -> list[list[int]]:
    """The mini-batch sizes of :func:`watch_mini_batches` grouped into ``steps`` steps (the
    peer calls once per text column a step)."""
    if not steps or len(calls) % steps:
        raise ValueError(f"{len(calls)} mini-batch plans do not split into {steps} steps")
    per_step = len(calls) // steps
    return [sum(calls[i : i + per_step], []) for i in range(0, len(calls), per_step)]


def mini_batch_statistics(sizes_by_step: list[list[int]]) -> dict[str, Any]:
    """Mini-batches (forward passes) per step and texts per mini-batch, over all steps."""
    sizes = [size for step in sizes_by_step for size in step]
    return {
        "per_step": round(len(sizes) / len(sizes_by_step), 2),
        "texts_mean": round(sum(sizes) / len(sizes), 2),
        "texts_min": min(sizes),
        "texts_max": max(sizes),
        "texts_by_step": sizes_by_step,
    }


def run_side(side: str, spec: dict[str, Any]) -> dict[str, Any]:
    common.set_threads(spec["threads"])
    timer = step_timer()
    profiled = spec.get("profile_steps") or 0
    # the profiled steps and the one after them (with stacks) come last, untimed
    timed_steps = spec["max_steps"] - (profiled + 1 if profiled else 0)
    callbacks = [timer]
    if profiled:
        profiler = profiling.step_profiler(timed_steps + 1, profiled, spec.get("device", "cpu"))
        callbacks.append(profiler)
    watched = watch_mini_batches(side) if side in CACHED_SIDES else None
    with tempfile.TemporaryDirectory(prefix="sts-bench-train-") as output_dir:
        if side.startswith("peer"):
            trainer, info = build_peer(spec, output_dir, callbacks, side == "peer-cached")
            _, measured = measure_training(trainer, trainer.train, spec)
        else:
            padding_free = PADDING_FREE[side]
            compiled = side == "ours-compiled"
            run = build_ours(
                spec, output_dir, callbacks, padding_free, TOKEN_RULE.get(side), compiled
            )
            run.run()
            trainer, measured = run.trainer, run.measured
            encoder = trainer.accelerator.unwrap_model(trainer.model)
            info = {"max_length": encoder.max_length, "padding_free": padding_free}
    if watched is not None:
        steps = trainer.state.global_step
        info["mini_batches"] = mini_batch_statistics(by_step(watched, steps))
    seconds, started = measured.pop("seconds"), measured.pop("started")
    step_times = timer.times
    if profiled:  # timed: the steps before the profiled ones, up to the end of the last
        step_times = timer.times[:timed_steps]
        seconds = step_times[-1] - started
        info["profile"] = profiler.summary
    return {
        **info,
        **measured,
        **train_metrics(trainer, step_times, seconds, spec, timed_steps),
        "optimizer": str(trainer.args.optim),
        "weight_decay": trainer.args.weight_decay,
    }


def train_metrics(
    trainer: Any,
    step_times: list[float],
    seconds: float,
    spec: dict[str, Any],
    timed_steps: int | None = None,
) -> dict[str, Any]:
    """Throughput over the ``timed_steps`` first steps (default: all), the loss of every
    step."""
    import torch

    steps = trainer.state.global_step
    timed = steps if timed_steps is None else timed_steps
    pairs = pairs_trained(timed, spec["batch_size"], len(trainer.train_dataset))
    gaps = [b - a for a, b in zip(step_times, step_times[1:], strict=False)]
    median_step = spec["batch_size"] / common.median(gaps) if gaps else float("nan")
    losses = [[e["step"], e["loss"]] for e in trainer.state.log_history if "loss" in e]
    return {
        "steps": steps,
        "timed_steps": timed,
        "pairs": pairs,
        "seconds": round(seconds, 3),
        "throughput": round(pairs / seconds, 2),
        "median_step_throughput": round(median_step, 2),
        "losses": losses,
        "threads": torch.get_num_threads(),
    }


# ----------------------------------------------------------------------------- parent
def worker_spec(args: argparse.Namespace) -> dict[str, Any]:
    """What every side's worker process is given (as JSON)."""
    return {
        "model": str(args.model_path),
        "device": args.device,
        "dtype": args.dtype,
        "max_steps": args.max_steps,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "seed": args.seed,
        "max_length": args.max_length,
        "threads": args.threads,
        "cached": args.cached,
        "pack_multiple": args.pack_multiple,
        "compile_backend": args.compile_backend,
        "compile_mode": args.compile_mode,
    }


def run_benchmark(args: argparse.Namespace) -> dict[str, list[dict]]:
    spec = worker_spec(args)
    sides = ["ours", "peer", "ours-padded"] if args.ablation else ["ours", "peer"]
    sides += ["ours-packed"] if args.packed else []
    sides += ["ours-compiled"] if args.compiled else []
    sides += list(CACHED_SIDES) if args.cached else []
    shown = f"{' vs '.join(sides)}, {args.max_steps} steps, {args.repeats} round(s)"
    print(f"{model_label(args)}: {shown}")

    def run(side: str, round_index: int) -> dict:
        profiled = args.profile_steps if round_index == 0 else 0  # round 1 alone
        return common.run_worker(__file__, side, {**spec, "profile_steps": profiled})

    return common.alternate(sides, args.repeats, run, runs_file=args.runs_file)


def summarize(runs: dict[str, list[dict]]) -> dict[str, Any]:
    def metric(key: str, side: str = "ours") -> common.Comparison:
        return common.Comparison([r[key] for r in runs[side]], [r[key] for r in runs["peer"]])

    summary = {
        "throughput": metric("throughput").to_dict(),
        "median_step_throughput": metric("median_step_throughput").to_dict(),
        "peak_rss_mb": metric("peak_rss_mb").to_dict(),
    }
    if "ours-padded" in runs:
        summary["padded_throughput"] = metric("throughput", "ours-padded").to_dict()
        summary["padded_vs_peer_max_loss_diff"] = max_loss_difference(
            runs["ours-padded"][0]["losses"], runs["peer"][0]["losses"]
        )
    if "ours-packed" in runs:
        summary["packed_throughput"] = metric("throughput", "ours-packed").to_dict()
        summary["packed_path"] = runs["ours-packed"][0]["packing_path"]
    if "ours-compiled" in runs:
        summary["compiled"] = compiled_summary(runs, metric)
    for side, key in (("ours-cached", "cached"), ("ours-cached-per-column", "cached_per_column")):
        if side in runs:
            summary[f"{key}_throughput"] = common.Comparison(
                [r["throughput"] for r in runs[side]],
                [r["throughput"] for r in runs["peer-cached"]],
            ).to_dict()
            summary[f"{key}_peak_rss_mb"] = common.Comparison(
                [r["peak_rss_mb"] for r in runs[side]],
                [r["peak_rss_mb"] for r in runs["peer-cached"]],
            ).to_dict()
            # round 1's mini-batches, each side's, and whether they are the peer's
            ours_sizes = runs[side][0]["mini_batches"]
            peer_sizes = runs["peer-cached"][0]["mini_batches"]
            summary[f"{key}_mini_batches"] = {
                "ours": {k: v for k, v in ours_sizes.items() if k != "texts_by_step"},
                "peer": {k: v for k, v in peer_sizes.items() if k != "texts_by_step"},
                "same_as_peer": ours_sizes["texts_by_step"] == peer_sizes["texts_by_step"],
            }
    profiles = {side: results[0].get("profile") for side, results in runs.items()}
    if any(profiles.values()):
        summary["profile"] = profiles
    summary["ours_path"] = runs["ours"][0].get("packing_path")
    summary["ours_vs_peer_max_loss_diff"] = max_loss_difference(
        runs["ours"][0]["losses"], runs["peer"][0]["losses"]
    )
    return summary


def compiled_summary(
    runs: dict[str, list[dict]], metric: Callable[[str, str], common.Comparison]
) -> dict[str, Any]:
    """The compiled side against the peer, and against the same side without compiling
    (``off``: ours packed when it ran, else ours): throughput over whole runs and at the
    median step, and the largest difference between their loss curves (round 1)."""
    off = "ours-packed" if "ours-packed" in runs else "ours"
    return {
        "off": off,
        "throughput": metric("throughput", "ours-compiled").to_dict(),
        "median_step_throughput": metric("median_step_throughput", "ours-compiled").to_dict(),
        "off_throughput": metric("throughput", off).to_dict(),
        "off_median_step_throughput": metric("median_step_throughput", off).to_dict(),
        "path": runs["ours-compiled"][0]["packing_path"],
        "max_loss_diff_vs_off": max_loss_difference(
            runs["ours-compiled"][0]["losses"], runs[off][0]["losses"]
        ),
    }


def token_statistics(model: str | Path, max_length: int | None) -> dict[str, float]:
    """Real tokens of the training pairs as our encoder tokenizes them (truncated)."""
    from sts_core.encoder import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(model, max_length=max_length)
    data = load_train_pairs()
    lengths = [
        [len(ids) for ids in encoder.tokenize(data[column], padding=False)["input_ids"]]
        for column in ("sentence1", "sentence2")
    ]
    pairs = [a + b for a, b in zip(*lengths, strict=True)]
    return {
        "tokens_per_pair": round(sum(pairs) / len(pairs), 2),
        "mean_length": round(sum(pairs) / (2 * len(pairs)), 2),
    }


def efficiency(runs: dict[str, list[dict]], args: argparse.Namespace, info: dict) -> dict:
    """Tokens per second, MFU and peak GPU memory of each side (medians over rounds)."""
    flops = gpu.flops_per_token(gpu.model_shape(args.model_path), args.tokens["mean_length"], True)
    peak = gpu.peak_tflops(info.get("gpu"), args.peak_tflops) if args.device == "cuda" else None
    sides = {}
    for side, results in runs.items():
        pairs = common.median([r["throughput"] for r in results])
        tokens = pairs * args.tokens["tokens_per_pair"]
        memory = [r["peak_gpu_memory_mb"] for r in results if r.get("peak_gpu_memory_mb")]
        sides[side] = {
            "pairs_per_second": pairs,
            "tokens_per_second": round(tokens, 1),
            "mfu_percent": gpu.mfu(tokens, flops, peak),
            "peak_gpu_memory_mb": common.median(memory) if memory else None,
            "packing_path": results[0].get("packing_path"),
        }
    return {"flops_per_token": flops, "peak_tflops": peak, "sides": sides}


def efficiency_markdown(result: dict[str, Any]) -> str:
    rows = []
    for side, values in result["sides"].items():
        path = values["packing_path"]
        rows.append(
            (
                LABELS[side],
                common.fmt(values["pairs_per_second"]),
                common.fmt(values["tokens_per_second"], 0),
                common.percent_or_na(values["mfu_percent"]),
                common.fmt_or_na(values["peak_gpu_memory_mb"]),
                f"{path[0]} ({path[1]})" if path else "",
            )
        )
    peak = result["peak_tflops"]
    header = ["", "pairs / s", "real tokens / s", "MFU", "peak GPU memory, MiB", "our path"]
    return "\n".join(
        [
            f"Efficiency: {result['flops_per_token'] / 1e6:.1f} MFLOP per real token (training), "
            + (f"peak {peak} TFLOP/s bf16." if peak else "no GPU peak: MFU not computed."),
            "",
            common.markdown_table(header, rows),
        ]
    )


def max_loss_difference(first: list[list[float]], second: list[list[float]]) -> float:
    other = dict((int(s), v) for s, v in second)
    return max((abs(v - other[int(s)]) for s, v in first if int(s) in other), default=math.nan)


def model_label(args: argparse.Namespace) -> str:
    if args.model_config in gpu.DECODER_CONFIGS:
        source = gpu.config_source(args.model_config, args.model)
        return f"{args.model_config} with random weights (the config and tokenizer of {source})"
    if args.model_config:
        return f"{args.model_config} with random weights and the tokenizer of {args.model}"
    return args.model


def report_markdown(runs: dict, summary: dict, args: argparse.Namespace, info: dict) -> str:
    speed, steady, memory = (
        summary["throughput"],
        summary["median_step_throughput"],
        summary["peak_rss_mb"],
    )
    ours, peer = runs["ours"][0], runs["peer"][0]
    rows = [
        *common.throughput_rows("pairs / s (median)", "pairs / s per round", speed),
        common.comparison_row("batch / median step time (median of rounds)", steady),
        common.peak_rss_row(memory),
        common.sides_row(
            "RSS before training, MiB",
            ours["rss_before_train_mb"],
            peer["rss_before_train_mb"],
            digits=0,
        ),
        ("CPU seconds in train() (round 1)", ours["cpu_seconds"], peer["cpu_seconds"], ""),
        common.sides_row(
            "mean loss, last 10 steps (round 1)", _tail_loss(ours), _tail_loss(peer), digits=3
        ),
    ]
    lines = [
        "# Training: our CoSENT (`sts-cosent`) vs `SentenceTransformerTrainer` + `CoSENTLoss`",
        "",
        f"Mode `{args.mode}`: {model_label(args)}, {args.device} {args.dtype}, filtered "
        f"STS-B + SICK-R train ({args.train_pairs:,} "
        f"pairs), {args.max_steps} steps of batch {args.batch_size} "
        f"({pairs_trained(args.max_steps, args.batch_size, args.train_pairs):,} pairs), lr "
        f"{args.learning_rate}, weight decay 0.01, 10 % warm-up, seed {args.seed}, max length "
        f"{ours['max_length']} (peer: {peer['max_length']}), {args.threads} thread(s), "
        f"optimizer {ours['optimizer']}; {args.repeats} alternated round(s), fresh processes.",
        "",
        common.machine_markdown(info),
        "",
        common.markdown_table(["", LABELS["ours"], LABELS["peer"], "ours / peer"], rows),
        "",
        f"Largest difference between the two loss curves (round 1): "
        f"{summary['ours_vs_peer_max_loss_diff']:.3g} (dropout masks differ once ours packs "
        "tokens; same data order).",
    ]
    if "padded_throughput" in summary:
        padded = summary["padded_throughput"]
        lines += [
            "",
            "Ablation, ours with `padding_free=False`: "
            f"{common.fmt(padded['ours_median'])} pairs/s ({padded['ratio_median']:.2f}× the "
            "peer); its loss curve differs from the peer's by at most "
            f"{summary['padded_vs_peer_max_loss_diff']:.3g}.",
        ]
    if "packed_throughput" in summary:
        packed = summary["packed_throughput"]
        lines += [
            "",
            f"Ours with `padding_free=True` (path: {summary['packed_path'][0]}): "
            f"{common.fmt(packed['ours_median'])} pairs/s ({packed['ratio_median']:.2f}× the "
            "peer).",
        ]
    if "compiled" in summary:
        lines += ["", compiled_markdown(summary, args)]
    if "cached_throughput" in summary:
        lines += [
            "",
            f"Gradient caching by a budget of {args.cached} tokens, in-batch InfoNCE (τ 0.05) "
            f"against the peer's `CachedMultipleNegativesRankingLoss` (scale 20, "
            f"`mini_batch_num_tokens={args.cached}`), batch {args.batch_size}. The same budget "
            "makes other mini-batches under our default rule (`sorted`: rows sorted by their "
            "tokens over both columns, a mini-batch of k rows embeds k texts of each column) "
            "than under the peer's (each column on its own, consecutive rows); our "
            "`per_column` rule makes the peer's. Mini-batches are counted in round 1 (the "
            "forward passes of the first, gradient-free pass; the backward pass repeats "
            "them); a text is one sentence of one column:",
        ]
        for side, key in (
            ("ours-cached", "cached"),
            ("ours-cached-per-column", "cached_per_column"),
        ):
            if f"{key}_throughput" in summary:
                lines += ["", cached_table(side, key, summary)]
    if "profile" in summary:
        lines += ["", profile_markdown(summary["profile"], args)]
    stem = common.output_stem(gpu.report_name("train", args), args.output_dir, args.mode)
    lines += [
        "",
        efficiency_markdown(summary["efficiency"]),
        "",
        f"![train chart]({stem.name}.png)",
    ]
    return "\n".join(lines)


def compiled_markdown(summary: dict[str, Any], args: argparse.Namespace) -> str:
    """The compiled side against the same side without compiling and the peer: whole runs
    (compiling included) and the median step (after it)."""
    compiled = summary["compiled"]
    whole, step = compiled["throughput"], compiled["median_step_throughput"]
    off_whole, off_step = compiled["off_throughput"], compiled["off_median_step_throughput"]
    return (
        f"Ours with `torch_compile: true` ({args.compile_backend}, mode "
        f"{args.compile_mode or 'default'}) and `pack_to_multiple_of: "
        f"{args.pack_multiple}` (rows filled on the varlen path; path: {compiled['path'][0]}): "
        f"{common.fmt(whole['ours_median'])} pairs/s over the whole run, compiling included "
        f"({whole['ratio_median']:.2f}× the peer), {common.fmt(step['ours_median'])} at the "
        f"median step ({step['ratio_median']:.2f}× the peer); without compiling "
        f"({LABELS[compiled['off']]}): {common.fmt(off_whole['ours_median'])} and "
        f"{common.fmt(off_step['ours_median'])}. The two loss curves differ by at most "
        f"{compiled['max_loss_diff_vs_off']:.3g} (with dropout on, a compiled graph may draw "
        "other masks)."
    )


def profile_markdown(profiles: dict[str, dict | None], args: argparse.Namespace) -> str:
    """The profiled steps of each side (round 1's last ``--profile-steps``): per step,
    without the log line; the log/save/evaluate phases apart."""
    sides = [side for side, found in profiles.items() if found]

    def row(label: str, value: Callable[[dict], Any]) -> tuple:
        return (label, *(value(profiles[side]) for side in sides))

    def ms(value: float | None) -> str:
        return common.fmt_or_na(value, 1)

    rows = [
        row("wall, ms", lambda p: ms(p["step"]["wall_ms"])),
        row("host: operators, ms", lambda p: ms(p["step"]["host_ops_ms"])),
        row("device: kernels and copies, ms", lambda p: ms(p["step"]["device_ms"])),
        row("scalar reads (`.item()`, `bool(t)` …)", lambda p: p["step"]["scalar_reads"]),
        row("CUDA syncs (wait, ms)", lambda p: sync_cell(p["step"])),
        row("device-to-host copies", lambda p: common.fmt_or_na(p["step"]["copies_to_host"], 1)),
        row("log/save/evaluate: scalar reads", lambda p: p["logging"]["scalar_reads"]),
        row("log/save/evaluate: CUDA syncs (wait, ms)", lambda p: sync_cell(p["logging"])),
    ]

    def reads(side: str) -> str:
        found = profiles[side]["scalar_reads_at"] or {}
        return ", ".join(f"`{at}` × {n}" for at, n in found.items()) or "none"

    return "\n".join(
        [
            f"Profiled steps (`torch.profiler`: {args.profile_steps} step(s) at the end of "
            "round 1, then one with Python stacks, none in its throughput; per step, the "
            "log/save/evaluate phase apart; host times include the profiler's overhead):",
            "",
            common.markdown_table(["per step", *(LABELS[side] for side in sides)], rows),
            "",
            "Scalar reads of the last step (outside its log line), by where they happen:",
            "",
            *(f"- {LABELS[side]}: {reads(side)}" for side in sides),
        ]
    )


def sync_cell(part: dict[str, Any]) -> str:
    if part["cuda_syncs"] is None:
        return "n/a"
    return f"{part['cuda_syncs']:g} ({part['sync_wait_ms']:g})"


def cached_table(side: str, key: str, summary: dict[str, Any]) -> str:
    """Our cached ``side`` against the peer's: speed, memory and the mini-batches."""
    sizes = summary[f"{key}_mini_batches"]
    ours, peer = sizes["ours"], sizes["peer"]
    return common.markdown_table(
        ["", LABELS[side], LABELS["peer-cached"], "ours / peer"],
        [
            *common.throughput_rows(
                "pairs / s (median)", "pairs / s per round", summary[f"{key}_throughput"]
            ),
            common.peak_rss_row(summary[f"{key}_peak_rss_mb"]),
            common.sides_row("mini-batches per step (mean)", ours["per_step"], peer["per_step"]),
            (
                "texts per mini-batch: mean (min–max)",
                f"{ours['texts_mean']:.1f} ({ours['texts_min']}–{ours['texts_max']})",
                f"{peer['texts_mean']:.1f} ({peer['texts_min']}–{peer['texts_max']})",
                "the same sizes, step by step" if sizes["same_as_peer"] else "other sizes",
            ),
        ],
    )


def _tail_loss(run: dict[str, Any]) -> float:
    tail = [loss for _, loss in run["losses"][-10:]]
    return sum(tail) / len(tail) if tail else math.nan


def draw_chart(runs: dict[str, list[dict]], summary: dict, path: Path) -> None:
    plt = common.pyplot()
    fig, (curves, bars) = plt.subplots(1, 2, figsize=(11, 4.2))
    for side, run_list in runs.items():
        steps, losses = (
            zip(*run_list[0]["losses"], strict=True) if run_list[0]["losses"] else ([], [])
        )
        curves.plot(
            steps,
            losses,
            label=LABELS[side],
            linewidth=2.5 if side == "peer" else 1.2,
            linestyle="--" if side == "ours-padded" else "-",
        )
    curves.set_xlabel("step")
    curves.set_ylabel("training loss (CoSENT)")
    curves.set_title("Loss per step (round 1)")
    curves.legend()
    names = list(runs)
    medians = [common.median([r["throughput"] for r in runs[s]]) for s in names]
    bars.bar(range(len(names)), medians, color=[f"C{i}" for i in range(len(names))])
    for i, side in enumerate(names):
        points = [r["throughput"] for r in runs[side]]
        bars.scatter([i] * len(points), points, color="black", s=12, zorder=3)
    bars.set_xticks(range(len(names)), [LABELS[s].replace(" (", "\n(") for s in names], fontsize=8)
    bars.set_ylabel("pairs / s (bar: median, dots: rounds)")
    bars.set_title(f"Throughput: ratio {summary['throughput']['ratio_median']:.2f}×")
    fig.tight_layout()
    common.save_figure(fig, path)


# ----------------------------------------------------------------------------- entry
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.benchmark_parser(
        __doc__, quick="a few minutes: 30 steps, 2 rounds", smoke="seconds: 3 steps, 1 round"
    )
    common.add_model_argument(parser)
    parser.add_argument(
        "--max-steps",
        type=common.COUNT,
        help="optimizer steps per run, at least 1 (default in full mode: one epoch)",
    )
    parser.add_argument("--repeats", type=common.COUNT, help="alternated rounds")
    parser.add_argument("--batch-size", type=common.COUNT, default=16)
    parser.add_argument("--learning-rate", type=common.POSITIVE_NUMBER, default=2e-5)
    parser.add_argument("--seed", type=common.NON_NEGATIVE_INT, default=0)
    parser.add_argument(
        "--max-length", type=common.COUNT, help="default: the model's (256 for MiniLM)"
    )
    parser.add_argument("--threads", type=common.COUNT, default=common.default_threads())
    parser.add_argument(
        "--ablation",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run ours with padding_free=False (default: on, off in smoke mode)",
    )
    parser.add_argument(
        "--packed",
        action="store_true",
        help="also run ours with padding_free=True (varlen on a GPU where the backbone allows)",
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="also run ours with torch_compile: true and pack_to_multiple_of (--pack-multiple)",
    )
    parser.add_argument(
        "--pack-multiple",
        type=common.COUNT,
        default=512,
        metavar="TOKENS",
        help="the compiled side's pack_to_multiple_of (default 512; the varlen path only)",
    )
    parser.add_argument(
        "--compile-backend",
        default="inductor",
        help="the compiled side's torch_compile_backend (default inductor; aot_eager traces "
        "without compiling, for a quick run-through)",
    )
    parser.add_argument(
        "--compile-mode",
        choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
        help="the compiled side's torch_compile_mode (default: torch's; reduce-overhead "
        "records CUDA graphs, one per shape, where the filled rows matter)",
    )
    parser.add_argument(
        "--cached",
        type=common.COUNT,
        metavar="TOKENS",
        default=None,
        help="also run gradient caching by this token budget: ours (infonce + "
        "gradient_cache_tokens, our sorted rule and the peer's per_column rule) beside the "
        "peer's CachedMultipleNegativesRankingLoss (mini_batch_num_tokens); the report "
        "counts each side's mini-batches",
    )
    parser.add_argument(
        "--profile-steps",
        type=common.COUNT,
        metavar="N",
        default=0,
        help="profile N steps at the end of each side's first round (torch.profiler: wall, "
        "host and device time per step, scalar reads and CUDA syncs, the log line apart), "
        "then one with Python stacks (where the scalar reads happen); that round's "
        "throughput counts the steps before them",
    )
    parser.add_argument("--output-dir", help="default: benchmarks/results")
    common.add_runs_file_argument(parser)
    gpu.add_gpu_arguments(parser, decoders=True)
    parser.add_argument("--worker", choices=sorted(LABELS), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    return common.apply_mode(parser.parse_args(argv), MODES)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        common.emit_result(run_side(args.worker, json.loads(args.spec)))
        return 0
    gpu.check_device(args)
    source = gpu.config_source(args.model_config, args.model)
    files, stem = common.result_files(
        "train.py", gpu.report_name("train", args), args, common.REPORT_AND_CHART, [source]
    )
    files.check()
    args.train_pairs = len(load_train_pairs())
    if args.max_steps is None:  # full mode: one epoch
        args.max_steps = math.ceil(args.train_pairs / args.batch_size)
    if args.profile_steps and args.profile_steps + 1 >= args.max_steps:
        raise common.BenchmarkError(
            f"--profile-steps {args.profile_steps} takes the last {args.profile_steps + 1} "
            f"steps of a run ({args.profile_steps} profiled, then one with Python stacks): a "
            f"run of {args.max_steps} steps needs at least one before them, warmed up and timed"
        )
    scratch = tempfile.TemporaryDirectory(prefix="sts-bench-model-")
    args.model_path = common.model_path(source)
    if args.model_config:
        args.model_path = gpu.build_random_model(
            args.model_config, args.model_path, Path(scratch.name)
        )
    args.tokens = token_statistics(args.model_path, args.max_length)
    info = {**common.machine_info(), **gpu.gpu_info()}
    start = time.perf_counter()
    runs = run_benchmark(args)
    info["wall_seconds"] = round(time.perf_counter() - start, 1)
    summary = summarize(runs)
    summary["efficiency"] = efficiency(runs, args, info)
    scratch.cleanup()
    settings = {k: v for k, v in vars(args).items() if k not in ("worker", "spec")}
    common.write_json(
        stem, {"settings": settings, "machine": info, "summary": summary, "runs": runs}
    )
    common.write_markdown(stem, report_markdown(runs, summary, args, info))
    draw_chart(runs, summary, stem.with_suffix(".png"))
    speed = summary["throughput"]
    print(
        f"ours {speed['ours_median']:.1f} pairs/s, peer {speed['peer_median']:.1f} pairs/s, "
        f"ratio {speed['ratio_median']:.2f}; peak RSS ours "
        f"{summary['peak_rss_mb']['ours_median']:.0f} MiB, peer "
        f"{summary['peak_rss_mb']['peer_median']:.0f} MiB"
    )
    print(f"wrote {stem}.md/.json/.png in {info['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    common.main_guard(main)
