"""Encoding speed: ``SentenceEncoder.encode`` against ``SentenceTransformer.encode``.

Every sentence of the seven STS test sets (STS12–16, STS-B test, SICK-R test; 37,700
sentences, 26,083 distinct) is encoded by both libraries with the same model, batch size,
thread count, precision (float32) and maximum length, alternately in fresh processes
(ours, peer, ours, peer, …); each process times a few passes over the sentences and its
best pass counts (other processes on a shared machine only ever slow a pass down).
Reported: sentences per second (input sentences, duplicates included), the ratio per
round and its median, peak memory, and the largest absolute
difference between the two sets of embeddings. ``--ablation`` (on by default) times our
pipeline with its optimisations removed one at a time, to show where the speed comes from.

Commands (from the repository root; STS_DATA_DIR and STS_MODELS_DIR must be set)::

    uv run python benchmarks/encode.py --quick    # all-MiniLM-L6-v2, 5 % of the sentences
    uv run python benchmarks/encode.py            # full: both models, every sentence
    uv run python benchmarks/encode.py --smoke --output-dir /tmp/bench   # seconds, for tests
    # on a GPU: a random-weight BERT-base with MiniLM's tokenizer, bf16, batch 128
    uv run python benchmarks/encode.py --device cuda --dtype bf16 --model-config bert-base \
        --batch-size 128 [--max-batch-tokens 16384] [--compile]

``--compile`` puts our backbone under ``torch.compile(dynamic=True)`` (the warm-up pass
compiles; its seconds are reported); the CPU ablation times it beside the library's path
(not in ``--smoke``).

Results: ``benchmarks/results/encode[_quick].{md,json,png}``; on a GPU ``gpu_encode[_quick]``
with tokens per second, model FLOPs utilisation and peak GPU memory (``_gpu.py``; the
ablation is CPU-only).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import _common as common
import _gpu as gpu
import numpy as np

# fraction of the distinct sentences kept (with all their occurrences); alternated rounds of
# fresh processes; timed passes over the sentences in each process (the best one counts)
# (full mode on 2 cores: every sentence, one timed pass per process, 2 rounds for MiniLM and
# 1 for mpnet, ~20 min a round; the ablation on a 10 % subset)
MODES = {
    "smoke": {"fraction": 0.004, "repeats": 1, "passes": 1, "models": [common.MINILM]},
    "quick": {"fraction": 0.05, "repeats": 2, "passes": 3, "models": [common.MINILM]},
    "full": {
        "fraction": 1.0,
        "repeats": 2,
        "passes": 1,
        "models": [common.MINILM, common.MPNET],
        "ablation_fraction": 0.1,
        "model_repeats": {common.MPNET: 1},
    },
}
WARMUP_SENTENCES = 16
# Our pipeline with one optimisation removed at a time (dedupe: each distinct sentence once;
# order: tokens = sorted by token length as the library does, chars = by character length as
# sentence-transformers does, input = unsorted).
COMPILED_VARIANT = "ours, backbone under torch.compile (dynamic shapes)"
VARIANTS: dict[str, dict[str, Any]] = {
    "ours (library encode)": {"library": True},
    "no dedupe": {"dedupe": False, "order": "tokens"},
    "no dedupe, character-length order (the peer's batching)": {"dedupe": False, "order": "chars"},
    "no dedupe, input order (no sorting)": {"dedupe": False, "order": "input"},
    "ours, eager attention instead of SDPA": {"library": True, "attention": "eager"},
    COMPILED_VARIANT: {"library": True, "attention": "compiled"},
    "ours, 1 thread": {"library": True, "threads": 1},
    # by a token budget (max_batch_tokens = batch size × this): × 256, the CUDA default
    "ours, batches of batch size × 32 tokens": {"library": True, "tokens_per_sentence": 32},
    "ours, batches of batch size × 256 tokens (the CUDA default)": {
        "library": True,
        "tokens_per_sentence": 256,
    },
}


# ----------------------------------------------------------------------------- data
def load_sentences(fraction: float) -> list[str]:
    """Both sentences of every pair of the seven test sets, in order, duplicates kept."""
    from sts_core.data import load_test_sets

    sets = load_test_sets(common.data_dir())
    sentences = [s for ds in sets.values() for col in ("sentence1", "sentence2") for s in ds[col]]
    return [s for s in sentences if common.in_fraction(s, fraction)]


# ----------------------------------------------------------------------------- workers
def worker_ours(spec: dict[str, Any]) -> dict[str, Any]:
    from sts_core.encoder import SentenceEncoder

    common.set_threads(spec["threads"])
    sentences = load_sentences(spec["fraction"])
    encoder = SentenceEncoder.from_pretrained(spec["model"]).to(
        spec.get("device", "cpu"), dtype=_torch_dtype(spec)
    )
    config = encoder.backbone.config
    if spec.get("compile"):
        encoder = compiled(encoder)
    from sts_core.encoder.encoding import resolve_max_batch_tokens

    budget = spec.get("max_batch_tokens")

    def encode(items: list[str]) -> np.ndarray:
        return encoder.encode(
            items, batch_size=spec["batch_size"], show_progress_bar=False, max_batch_tokens=budget
        )

    info = {
        "attention": config._attn_implementation,
        "max_length": encoder.max_length,
        "dtype": str(next(encoder.parameters()).dtype),
        "normalize": encoder.normalize,
        # the budget encode() batched by: the option, else the device's default (None: by count)
        "max_batch_tokens": resolve_max_batch_tokens(encoder, spec["batch_size"], budget),
        "compiled": bool(spec.get("compile")),
        "tokens": token_counts(encoder.tokenize, sentences, dedupe=True),
    }
    return {**info, **timed_encode(encode, sentences, spec)}


def compiled(encoder: Any) -> Any:
    """The encoder with its backbone under ``torch.compile(dynamic=True)`` (one graph for
    every batch shape; compiled at the first call, which the warm-up pass pays for)."""
    import torch

    encoder.backbone = torch.compile(encoder.backbone, dynamic=True)
    return encoder


def _torch_dtype(spec: dict[str, Any]) -> Any:
    import torch

    return torch.bfloat16 if spec.get("dtype") == "bf16" else torch.float32


def token_counts(tokenize: Any, sentences: list[str], dedupe: bool) -> dict[str, Any]:
    """Real tokens a side encodes (truncated at its max length): each distinct sentence
    once when it dedupes, every occurrence otherwise; and the mean sentence length."""
    items = list(dict.fromkeys(sentences)) if dedupe else sentences
    lengths = [len(ids) for ids in tokenize(items, padding=False)["input_ids"]]
    return {"encoded": sum(lengths), "mean_length": sum(lengths) / max(len(lengths), 1)}


def worker_peer(spec: dict[str, Any]) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer

    common.set_threads(spec["threads"])
    sentences = load_sentences(spec["fraction"])
    model = SentenceTransformer(spec["model"], device=spec.get("device", "cpu"))
    model.to(_torch_dtype(spec))

    def encode(items: list[str]) -> np.ndarray:
        vectors = model.encode(
            items, batch_size=spec["batch_size"], show_progress_bar=False, convert_to_tensor=True
        )
        return vectors.float().cpu().numpy()

    def tokenize(items: list[str], padding: bool) -> dict[str, Any]:
        return model.tokenizer(items, truncation=True, max_length=model.max_seq_length)

    info = {
        "attention": model[0].auto_model.config._attn_implementation,
        "max_length": model.max_seq_length,
        "dtype": str(next(model.parameters()).dtype),
        "modules": [type(m).__name__ for m in model],
        "tokens": token_counts(tokenize, sentences, dedupe=False),
    }
    return {**info, **timed_encode(encode, sentences, spec)}


def timed_encode(encode: Any, sentences: list[str], spec: dict[str, Any]) -> dict[str, Any]:
    """Warm up, then time ``passes`` calls over every sentence (the best one is the result:
    on a shared machine, other processes only ever slow a pass down); optionally save the
    embeddings of the first pass."""
    import torch

    warmup_start = time.perf_counter()
    encode(sentences[:WARMUP_SENTENCES])
    warmup_seconds = time.perf_counter() - warmup_start
    rss_loaded = common.current_rss_mb()
    gpu.reset_peak_memory(spec.get("device", "cpu"))
    cpu_start, passes = common.cpu_seconds(), []
    for index in range(spec["passes"]):
        start = time.perf_counter()
        vectors = np.asarray(encode(sentences), dtype=np.float32)
        passes.append(time.perf_counter() - start)
        if index == 0 and spec.get("embeddings"):
            np.save(spec["embeddings"], vectors)
    best = min(passes)
    return {
        "sentences": len(sentences),
        "distinct": len(set(sentences)),
        "seconds": round(best, 3),
        "pass_seconds": [round(s, 3) for s in passes],
        "warmup_seconds": round(warmup_seconds, 2),
        "cpu_seconds_per_pass": round((common.cpu_seconds() - cpu_start) / len(passes), 2),
        "throughput": round(len(sentences) / best, 2),
        "median_pass_throughput": round(len(sentences) / common.median(passes), 2),
        "rss_loaded_mb": round(rss_loaded, 1),
        "threads": torch.get_num_threads(),
        "peak_gpu_memory_mb": gpu.peak_gpu_memory_mb(spec.get("device", "cpu")),
    }


def worker_ablation(spec: dict[str, Any]) -> dict[str, Any]:
    """Every variant of ``VARIANTS`` in one process, alternately, ``passes`` rounds (best)."""
    from sts_core.encoder import SentenceEncoder

    common.set_threads(spec["threads"])
    sentences = load_sentences(spec["fraction"])
    encoders = {
        "sdpa": SentenceEncoder.from_pretrained(spec["model"]).eval(),
        "eager": SentenceEncoder.from_pretrained(spec["model"], attn_implementation="eager").eval(),
    }
    variants = dict(VARIANTS)
    if spec.get("smoke"):  # compiling takes a minute: not in the seconds-sized mode
        variants.pop(COMPILED_VARIANT)
    else:
        encoders["compiled"] = compiled(SentenceEncoder.from_pretrained(spec["model"]).eval())
    warmup_seconds = {}
    for key, encoder in encoders.items():
        start = time.perf_counter()
        encoder.encode(sentences[:WARMUP_SENTENCES], show_progress_bar=False)
        warmup_seconds[key] = round(time.perf_counter() - start, 2)
    reference = None
    times: dict[str, list[float]] = {name: [] for name in variants}
    differences: dict[str, float] = {}
    for _ in range(spec["passes"]):
        for name, variant in variants.items():
            seconds, vectors = run_variant(encoders, sentences, spec, variant)
            times[name].append(seconds)
            reference = vectors if reference is None else reference
            differences[name] = float(np.abs(vectors - reference).max())
    return {
        "sentences": len(sentences),
        "warmup_seconds": warmup_seconds,  # "compiled": torch.compile's first call
        "variants": {
            name: {
                "seconds": times[name],
                "throughput": round(len(sentences) / min(times[name]), 2),
                "max_abs_diff_vs_library": differences[name],
            }
            for name in variants
        },
    }


def run_variant(
    encoders: dict[str, Any], sentences: list[str], spec: dict[str, Any], variant: dict[str, Any]
) -> tuple[float, np.ndarray]:
    encoder = encoders[variant.get("attention", "sdpa")]
    common.set_threads(variant.get("threads", spec["threads"]))
    start = time.perf_counter()
    if variant.get("library"):
        per_sentence = variant.get("tokens_per_sentence")
        budget = per_sentence and spec["batch_size"] * per_sentence
        vectors = encoder.encode(
            sentences,
            batch_size=spec["batch_size"],
            show_progress_bar=False,
            max_batch_tokens=budget,
        )
    else:
        vectors = encode_variant(encoder, sentences, spec["batch_size"], **variant)
    seconds = time.perf_counter() - start
    common.set_threads(spec["threads"])
    return seconds, np.asarray(vectors, dtype=np.float32)


def encode_variant(
    encoder: Any, sentences: list[str], batch_size: int, dedupe: bool, order: str
) -> np.ndarray:
    """Our encoder's tokenize + forward, batched without (some of) the library's choices."""
    import torch

    items = list(dict.fromkeys(sentences)) if dedupe else list(sentences)
    if order == "tokens":
        ids = encoder.tokenize(items, padding=False)["input_ids"]
        ranking = np.argsort([-len(x) for x in ids], kind="stable")
    elif order == "chars":
        ranking = np.argsort([-len(s) for s in items], kind="stable")
    else:
        ranking = np.arange(len(items))
    output = np.empty((len(items), encoder.dimension), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(items), batch_size):
            chunk = ranking[start : start + batch_size]
            features = encoder.tokenize([items[i] for i in chunk])
            output[chunk] = encoder(**features).float().numpy()
    if not dedupe:
        return output
    position = {s: i for i, s in enumerate(items)}
    return output[[position[s] for s in sentences]]


WORKERS = {"ours": worker_ours, "peer": worker_peer, "ablation": worker_ablation}


# ----------------------------------------------------------------------------- parent
def benchmark_model(name: str, args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    path = str(common.model_path(name))
    print(f"{name}: ours vs sentence-transformers", flush=True)
    spec = {
        "model": path,
        "fraction": args.fraction,
        "batch_size": args.batch_size,
        "threads": args.threads,
        "passes": args.passes,
        "device": args.device,
        "dtype": args.dtype,
        "max_batch_tokens": args.max_batch_tokens,
        "compile": args.compile,
        "smoke": args.mode == "smoke",
    }

    def run(side: str, round_index: int) -> dict[str, Any]:
        saved = scratch / f"{Path(name).name}-{side}-{round_index}.npy"
        return common.run_worker(__file__, side, {**spec, "embeddings": str(saved)})

    repeats = (args.model_repeats or {}).get(name, args.repeats)
    runs = common.alternate(["ours", "peer"], repeats, run, args.runs_file, Path(name).name)
    ours = np.load(scratch / f"{Path(name).name}-ours-0.npy")
    peer = np.load(scratch / f"{Path(name).name}-peer-0.npy")
    result: dict[str, Any] = {
        "model": Path(name).name,
        "runs": runs,
        "throughput": common.Comparison(*_metric(runs, "throughput")).to_dict(),
        "peak_rss_mb": common.Comparison(*_metric(runs, "peak_rss_mb")).to_dict(),
        "max_abs_diff": float(np.abs(ours - peer).max()),
        "settings_match": _settings_match(runs),
        "efficiency": efficiency(runs, path, args),
    }
    if args.ablation:
        print(f"{name}: ablation ({args.passes} round(s) of every variant)")
        fraction = args.ablation_fraction or args.fraction
        result["ablation"] = common.run_worker(__file__, "ablation", {**spec, "fraction": fraction})
        result["ablation"]["fraction"] = fraction
    return result


def efficiency(runs: dict[str, list[dict]], model: str, args: argparse.Namespace) -> dict:
    """Real tokens per second, MFU and peak GPU memory of each side (medians of rounds)."""
    peak = (
        gpu.peak_tflops(gpu.gpu_info().get("gpu"), args.peak_tflops)
        if args.device == "cuda"
        else None
    )
    shape, sides = gpu.model_shape(model), {}
    for side, results in runs.items():
        tokens = results[0]["tokens"]
        per_second = common.median([tokens["encoded"] / r["seconds"] for r in results])
        memory = [r["peak_gpu_memory_mb"] for r in results if r.get("peak_gpu_memory_mb")]
        flops = gpu.flops_per_token(shape, tokens["mean_length"], training=False)
        sides[side] = {
            "tokens_per_second": round(per_second, 1),
            "mfu_percent": gpu.mfu(per_second, flops, peak),
            "peak_gpu_memory_mb": common.median(memory) if memory else None,
        }
    return {"peak_tflops": peak, "sides": sides}


def _metric(runs: dict[str, list[dict]], key: str) -> tuple[list[float], list[float]]:
    return [r[key] for r in runs["ours"]], [r[key] for r in runs["peer"]]


def _settings_match(runs: dict[str, list[dict]]) -> bool:
    ours, peer = runs["ours"][0], runs["peer"][0]
    keys = ("attention", "max_length", "dtype", "threads", "sentences")
    mismatched = [k for k in keys if ours[k] != peer[k]]
    if mismatched:
        print(f"warning: settings differ between the sides: {mismatched}", file=sys.stderr)
    return not mismatched


def model_markdown(result: dict[str, Any]) -> str:
    speed, memory = result["throughput"], result["peak_rss_mb"]
    first_ours, first_peer = result["runs"]["ours"][0], result["runs"]["peer"][0]
    rows = [
        *common.throughput_rows(
            "sentences / s, best pass (median of rounds)", "… in each round", speed
        ),
        common.peak_rss_row(memory),
        common.sides_row(
            "RSS after loading, MiB",
            first_ours["rss_loaded_mb"],
            first_peer["rss_loaded_mb"],
            digits=0,
        ),
        common.sides_row(
            "sentences / s, median pass (median of rounds)",
            *(
                common.median([r["median_pass_throughput"] for r in result["runs"][side]])
                for side in ("ours", "peer")
            ),
        ),
        (
            "CPU seconds per pass (round 1)",
            first_ours["cpu_seconds_per_pass"],
            first_peer["cpu_seconds_per_pass"],
            "",
        ),
        (
            "attention / max length / dtype",
            f"{first_ours['attention']} / {first_ours['max_length']} / {first_ours['dtype']}",
            f"{first_peer['attention']} / {first_peer['max_length']} / {first_peer['dtype']}",
            "",
        ),
    ]
    text = [
        f"### {result['model']}",
        "",
        f"{first_ours['sentences']} sentences ({first_ours['distinct']} distinct); "
        f"max |Δ| between the two sets of embeddings: **{result['max_abs_diff']:.2e}**.",
        "",
        common.markdown_table(["", "ours", "sentence-transformers", "ours / peer"], rows),
    ]
    sides = result["efficiency"]["sides"]
    rows = [
        (
            label,
            common.fmt(sides[side]["tokens_per_second"], 0),
            common.percent_or_na(sides[side]["mfu_percent"]),
            common.fmt_or_na(sides[side]["peak_gpu_memory_mb"]),
        )
        for side, label in (("ours", "ours"), ("peer", "sentence-transformers"))
    ]
    header = ["", "real tokens encoded / s", "MFU", "peak GPU memory, MiB"]
    text += ["", common.markdown_table(header, rows)]
    if "ablation" in result:
        text += ["", ablation_markdown(result["ablation"], speed["peer_median"])]
    return "\n".join(text)


def ablation_markdown(ablation: dict[str, Any], peer_median: float) -> str:
    variants = ablation["variants"]
    library = variants["ours (library encode)"]["throughput"]
    rows = [
        (
            name,
            common.fmt(v["throughput"]),
            f"{v['throughput'] / library:.2f}",
            f"{v['throughput'] / peer_median:.2f}" if peer_median else "n/a",
            f"{v['max_abs_diff_vs_library']:.1e}",
        )
        for name, v in variants.items()
    ]
    header = [
        "variant (one process, alternated, best pass)",
        "sentences / s",
        "vs library",
        "vs peer median",
        "max |Δ| vs library",
    ]
    subset = ablation.get("fraction", 1.0)
    title = f"Ablation ({subset:.0%} of the distinct sentences, with their occurrences):"
    text = title + "\n\n" + common.markdown_table(header, rows)
    compile_seconds = ablation.get("warmup_seconds", {}).get("compiled")
    if compile_seconds is not None:
        text += (
            f"\n\nThe compiled backbone's first call (compiling, {WARMUP_SENTENCES} sentences) "
            f"took {compile_seconds:.1f} s, outside the timed passes."
        )
    return text


def _rounds_text(args: argparse.Namespace) -> str:
    per_model = args.model_repeats or {}
    counts = [f"{per_model.get(m, args.repeats)} for {Path(m).name}" for m in args.models]
    return "alternated rounds (" + ", ".join(counts) + ")"


def write_outputs(results: list[dict], args: argparse.Namespace, info: dict) -> Path:
    stem = common.output_stem(gpu.report_name("encode", args), args.output_dir, args.mode)
    content = {"mode": args.mode, "settings": _settings(args), "machine": info, "models": results}
    common.write_json(stem, content)
    lines = [
        "# Encoding: `SentenceEncoder.encode` vs `SentenceTransformer.encode`",
        "",
        f"Mode `{args.mode}`: {args.fraction:.1%} of the distinct sentences of the seven STS "
        f"test sets (every occurrence kept); batch size {args.batch_size}"
        f"{_budget_note(args)}"
        f"{' (ours: backbone under torch.compile)' if args.compile else ''}, "
        f"{args.threads} thread(s), {args.device} {args.dtype}{_model_note(args)}, "
        f"{_rounds_text(args)} in fresh processes, each "
        f"timing {args.passes} pass(es) over the sentences: a round's speed is its best pass.",
        "",
        common.machine_markdown(info),
        "",
        *(model_markdown(r) + "\n" for r in results),
        f"![encode chart]({stem.name}.png)",
    ]
    common.write_markdown(stem, "\n".join(lines))
    draw_chart(results, stem.with_suffix(".png"))
    return stem


def _budget_note(args: argparse.Namespace) -> str:
    if args.max_batch_tokens:
        return f" (ours: batches of up to {args.max_batch_tokens} tokens)"
    if args.device.startswith("cuda"):
        return f" (ours: batches of up to {args.batch_size} × 256 tokens, the default on CUDA)"
    return ""


def _model_note(args: argparse.Namespace) -> str:
    if not args.model_config:
        return ""
    return f", {args.model_config} with random weights and the tokenizer of {args.tokenizer_of}"


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("fraction", "batch_size", "threads", "repeats", "model_repeats", "passes", "models")
    keys += ("ablation", "ablation_fraction", "device", "dtype", "model_config")
    keys += ("max_batch_tokens",)
    keys += ("compile",)
    return {k: getattr(args, k) for k in keys}


def draw_chart(results: list[dict], path: Path) -> None:
    plt = common.pyplot()
    panels = 1 + sum("ablation" in r for r in results)
    fig, axes = plt.subplots(1, panels, figsize=(6 + 5 * (panels - 1), 4.8), squeeze=False)
    ax = axes[0][0]
    names = [r["model"] for r in results]
    x = np.arange(len(names))
    for offset, side, label in ((-0.2, "ours", "ours"), (0.2, "peer", "sentence-transformers")):
        medians = [r["throughput"][f"{side}_median"] for r in results]
        ax.bar(x + offset, medians, 0.4, label=label)
        for i, r in enumerate(results):
            ax.scatter(
                [i + offset] * len(r["throughput"][side]),
                r["throughput"][side],
                color="black",
                s=10,
                zorder=3,
            )
    for i, r in enumerate(results):
        ax.annotate(
            f"{r['throughput']['ratio_median']:.2f}×",
            (i, max(r["throughput"]["ours_median"], r["throughput"]["peer_median"])),
            ha="center",
            va="bottom",
        )
    ax.set_xticks(x, names)
    ax.set_ylabel("sentences / s (median, dots: rounds)")
    ax.set_title("Encoding the seven STS test sets")
    ax.legend(loc="lower center")
    panel = 1
    for r in results:
        if "ablation" in r:
            _ablation_panel(axes[0][panel], r)
            panel += 1
    fig.tight_layout()
    common.save_figure(fig, path)


def _ablation_panel(ax: Any, result: dict[str, Any]) -> None:
    variants = result["ablation"]["variants"]
    labels = [*variants, "sentence-transformers (peer runs)"]
    values = [v["throughput"] for v in variants.values()] + [result["throughput"]["peer_median"]]
    ax.barh(range(len(labels)), values, color=["C0"] * len(variants) + ["C1"])
    wrapped = [textwrap.fill(label, 32) for label in labels]
    ax.set_yticks(range(len(labels)), wrapped, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("sentences / s")
    ax.set_title(f"{result['model']}: ablation")


# ----------------------------------------------------------------------------- entry
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.benchmark_parser(
        __doc__,
        quick="a few minutes: MiniLM, 5 %% subset",
        smoke="seconds: a tiny subset, 1 round",
    )
    parser.add_argument("--models", nargs="+", help="model names under STS_MODELS_DIR or paths")
    parser.add_argument("--fraction", type=common.FRACTION, help="share of distinct sentences kept")
    parser.add_argument("--repeats", type=common.COUNT, help="alternated rounds (A B per round)")
    parser.add_argument(
        "--passes", type=common.COUNT, help="timed passes per process (best counts)"
    )
    parser.add_argument("--ablation-fraction", type=common.FRACTION, help="subset for the ablation")
    parser.add_argument("--batch-size", type=common.COUNT, default=64)
    parser.add_argument("--threads", type=common.COUNT, default=common.default_threads())
    parser.add_argument("--ablation", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--compile", action="store_true", help="ours: the backbone under torch.compile"
    )
    parser.add_argument("--output-dir", help="default: benchmarks/results")
    parser.add_argument(
        "--max-batch-tokens",
        "--token-budget",  # its earlier name
        type=common.COUNT,
        metavar="N",
        help="ours: batches of up to N tokens (encode()'s max_batch_tokens; default: the "
        "device's, on CUDA batch size × 256, on a CPU none)",
    )
    common.add_runs_file_argument(parser)
    gpu.add_gpu_arguments(parser, decoders=True)
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    # a --repeats given counts for every model; else the mode's repeats, per model if it says
    args.model_repeats = None if args.repeats else MODES[common.mode_of(args)].get("model_repeats")
    return common.apply_mode(args, MODES, skip=["model_repeats"])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        common.emit_result(WORKERS[args.worker](json.loads(args.spec)))
        return 0
    gpu.check_device(args)
    if args.model_config:  # one random-weight model; the first named gives its tokenizer
        args.models = [gpu.config_source(args.model_config, args.models[0])]  # or a decoder's
    name = gpu.report_name("encode", args)
    files, _ = common.result_files("encode.py", name, args, common.REPORT_AND_CHART, args.models)
    files.check()
    if args.device == "cuda" and args.ablation:
        print("the ablation is CPU-only: skipped on cuda")
        args.ablation = False
    info = {**common.machine_info(), **gpu.gpu_info()}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sts-bench-encode-") as scratch:
        if args.model_config:
            args.tokenizer_of = args.models[0]
            folder = Path(scratch) / args.model_config
            args.models = [
                str(
                    gpu.build_random_model(
                        args.model_config, common.model_path(args.models[0]), folder
                    )
                )
            ]
        results = [benchmark_model(name, args, Path(scratch)) for name in args.models]
    info["wall_seconds"] = round(time.perf_counter() - start, 1)
    stem = write_outputs(results, args, info)
    for r in results:
        speed = r["throughput"]
        print(
            f"{r['model']}: ours {speed['ours_median']:.1f}/s, peer {speed['peer_median']:.1f}"
            f"/s, ratio {speed['ratio_median']:.2f}, max|Δ| {r['max_abs_diff']:.2e}"
        )
    print(f"wrote {stem}.md/.json/.png in {info['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    common.main_guard(main)
