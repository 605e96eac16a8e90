"""What the speed benchmarks need to run on a GPU: ``--device``, ``--dtype``,
``--model-config`` (a random-weight model built from a config: throughput does not depend
on the weights, and nothing is downloaded), peak GPU memory and model FLOPs utilisation.

MFU = achieved FLOP/s ÷ the GPU's dense bf16 peak. Achieved FLOP/s counts the matrix
products of the transformer layers on the real (unpadded) tokens: per token and layer,
``2 × (4h² + 2hi)`` for the projections and the feed-forward block plus ``4 × L × h`` for
attention over a sentence of ``L`` tokens, times 3 when training (forward and backward);
embeddings and pooling are left out. Padded tokens are not useful work, so a side that pads
gets no credit for them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import _common as common

MODEL_CONFIGS: dict[str, dict[str, int]] = {
    "bert-base": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
    },
    "bert-large": {
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        "max_position_embeddings": 512,
    },
}
# dense bf16 tensor-core peak, TFLOP/s (vendor data sheets, without sparsity)
PEAK_BF16_TFLOPS = {
    "H200": 989.4,
    "H100 SXM": 989.4,
    "H100 80GB HBM3": 989.4,
    "H100 NVL": 835.0,
    "H100 PCIe": 756.0,
    "A100": 312.0,
    "L40S": 362.1,
    "L4": 121.0,
    "A10G": 70.0,
}


def add_gpu_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--dtype", choices=["fp32", "bf16"], default="fp32", help="bf16: autocast / bf16 weights"
    )
    parser.add_argument(
        "--model-config",
        choices=sorted(MODEL_CONFIGS),
        help="a random-weight model of this shape with --model's tokenizer (no download)",
    )
    parser.add_argument(
        "--peak-tflops",
        type=common.POSITIVE_NUMBER,
        help="the GPU's dense bf16 peak (default: from its name)",
    )


def check_device(args: argparse.Namespace) -> None:
    """Refuse ``--device cuda`` without a GPU, and bf16 on a CPU, before any work."""
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda: torch sees no CUDA GPU on this machine")
    if args.device == "cpu" and args.dtype == "bf16":
        raise SystemExit("error: --dtype bf16 is for --device cuda (CPU results are float32)")


def build_random_model(config_name: str, tokenizer_from: Path, folder: Path) -> Path:
    """A BERT of ``MODEL_CONFIGS[config_name]`` with random weights (seed 0) and the
    tokenizer of ``tokenizer_from``, saved to ``folder`` (mean pooling on both sides)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_from)
    config = BertConfig(vocab_size=len(tokenizer), **MODEL_CONFIGS[config_name])
    torch.manual_seed(0)
    BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def model_shape(folder: str | Path) -> dict[str, int]:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder)
    return {
        "hidden": config.hidden_size,
        "layers": config.num_hidden_layers,
        "intermediate": config.intermediate_size,
    }


def flops_per_token(shape: dict[str, int], mean_length: float, training: bool) -> float:
    """Matrix-product FLOPs per real token (see the module docstring)."""
    h, i, layers = shape["hidden"], shape["intermediate"], shape["layers"]
    forward = layers * (2 * (4 * h * h + 2 * h * i) + 4 * mean_length * h)
    return forward * (3 if training else 1)


def peak_tflops(device_name: str | None, override: float | None) -> float | None:
    if override:
        return override
    if not device_name:
        return None
    matches = [name for name in PEAK_BF16_TFLOPS if name.lower() in device_name.lower()]
    return PEAK_BF16_TFLOPS[max(matches, key=len)] if matches else None


def gpu_info() -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {"gpu": None}
    properties = torch.cuda.get_device_properties(0)
    return {
        "gpu": properties.name,
        "gpu_memory_gib": round(properties.total_memory / 2**30, 1),
        "cuda": torch.version.cuda,
    }


def reset_peak_memory(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_gpu_memory_mb(device: str) -> float | None:
    import torch

    if device != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def mfu(tokens_per_second: float, flops: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation in percent, or None without a known peak."""
    if not peak:
        return None
    return round(100 * tokens_per_second * flops / (peak * 1e12), 2)


def stem_name(name: str, device: str) -> str:
    """``gpu_<name>`` for CUDA results, so they never overwrite the CPU ones."""
    return f"gpu_{name}" if device == "cuda" else name
