"""What the speed benchmarks need to run on a GPU: ``--device``, ``--dtype``,
``--model-config`` (a random-weight model built from a config: throughput does not depend
on the weights, and nothing is downloaded), peak GPU memory and model FLOPs utilisation.

A model config is a BERT shape (:data:`MODEL_CONFIGS`, with ``--model``'s tokenizer) or a
decoder's own config and tokenizer, read from its folder under ``STS_MODELS_DIR``
(:data:`DECODER_CONFIGS`: ``smollm2-135m``, SmolLM2-135M-Instruct's Llama shape; its
weights are not read).

MFU = achieved FLOP/s ÷ the GPU's dense bf16 peak. Achieved FLOP/s counts the matrix
products of the transformer layers on the real (unpadded) tokens: per token and layer,
``2 × (2h² + 2hk + m·hi)`` for the projections (``k``: the key/value width, ``h`` without
grouped-query attention) and the feed-forward block (``m`` = 2 matrices, 3 for a gated one
as Llama's) plus ``4 × L × h`` for attention over a sentence of ``L`` tokens, times 3 when
training (forward and backward); embeddings and pooling are left out. Padded tokens are
not useful work, so a side that pads gets no credit for them.
"""

from __future__ import annotations

import argparse
import re
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
#: decoder configs by name: the model folder (under STS_MODELS_DIR) whose config.json and
#: tokenizer a random-weight model is built from
DECODER_CONFIGS: dict[str, str] = {"smollm2-135m": "SmolLM2-135M-Instruct"}
#: model types whose feed-forward block is gated (three matrices: gate, up, down)
GATED_MLP_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2")
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


def add_gpu_arguments(parser: argparse.ArgumentParser, decoders: bool = False) -> None:
    """``--device``, ``--dtype``, ``--model-config`` (``decoders``: the decoder configs
    too) and ``--peak-tflops``."""
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--dtype", choices=["fp32", "bf16"], default="fp32", help="bf16: autocast / bf16 weights"
    )
    configs = [*MODEL_CONFIGS, *(DECODER_CONFIGS if decoders else ())]
    parser.add_argument(
        "--model-config",
        choices=sorted(configs),
        help="a random-weight model of this shape with --model's tokenizer (no download)"
        + (
            "; smollm2-135m: SmolLM2-135M-Instruct's config and tokenizer from "
            "STS_MODELS_DIR (its weights not read)"
            if decoders
            else ""
        ),
    )
    parser.add_argument(
        "--tag",
        type=file_tag,
        help="reports named [gpu_]<benchmark>_<TAG>[_mode] (another row beside the default one)",
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


def config_source(config_name: str | None, model: str) -> str:
    """The model folder name whose tokenizer (and, for a decoder, config) a
    ``--model-config`` reads: the decoder's own, else ``model``."""
    return DECODER_CONFIGS.get(config_name or "", model)


def build_random_model(config_name: str, tokenizer_from: Path, folder: Path) -> Path:
    """A model of ``config_name`` with random weights (seed 0), saved to ``folder`` (mean
    pooling on both sides): a BERT of ``MODEL_CONFIGS[config_name]`` with the tokenizer of
    ``tokenizer_from``, or a decoder (:data:`DECODER_CONFIGS`) with its own folder's
    config and tokenizer (``tokenizer_from`` unused), its base model without the
    language-model head. The tokenizer is saved without its chat template: with one,
    sentence-transformers (6.x) wraps every sentence in the chat format (a system prompt
    and the role markers, SmolLM2's 6 tokens become 32), and the sides would encode
    different texts; ours never applies it."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer, BertConfig, BertModel

    if config_name in DECODER_CONFIGS:
        tokenizer_from = common.model_path(DECODER_CONFIGS[config_name], "--model-config")
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_from)
    torch.manual_seed(0)
    if config_name in DECODER_CONFIGS:
        config = AutoConfig.from_pretrained(tokenizer_from)
        AutoModel.from_config(config).save_pretrained(folder)
    else:
        config = BertConfig(vocab_size=len(tokenizer), **MODEL_CONFIGS[config_name])
        BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(folder)
    return folder


def model_shape(folder: str | Path) -> dict[str, int]:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder)
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return {
        "hidden": config.hidden_size,
        "layers": config.num_hidden_layers,
        "intermediate": config.intermediate_size,
        "kv_width": kv_heads * head_dim,
        "mlp_matrices": 3 if config.model_type in GATED_MLP_TYPES else 2,
    }


def flops_per_token(shape: dict[str, int], mean_length: float, training: bool) -> float:
    """Matrix-product FLOPs per real token (see the module docstring); a shape without
    ``kv_width`` or ``mlp_matrices`` is a BERT's (``h``, 2)."""
    h, i, layers = shape["hidden"], shape["intermediate"], shape["layers"]
    k, m = shape.get("kv_width", h), shape.get("mlp_matrices", 2)
    forward = layers * (2 * (2 * h * h + 2 * h * k + m * h * i) + 4 * mean_length * h)
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


def file_tag(text: str) -> str:
    """A ``--tag``: letters, digits and hyphens (it becomes part of file names)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*", text):
        raise argparse.ArgumentTypeError(f"{text!r}: letters, digits and hyphens only")
    return text


def report_name(benchmark: str, args: argparse.Namespace) -> str:
    """A speed benchmark's reports' stem before the mode: ``[gpu_]<benchmark>[_<tag>]``."""
    name = stem_name(benchmark, args.device)
    return f"{name}_{args.tag}" if args.tag else name


def stem_name(name: str, device: str) -> str:
    """``gpu_<name>`` for CUDA results, so they never overwrite the CPU ones."""
    return f"gpu_{name}" if device == "cuda" else name
