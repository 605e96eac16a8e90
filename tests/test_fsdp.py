"""FSDP2 as far as it runs on this machine's CPU processes.

accelerate runs FSDP only on accelerators (``accelerate_configs/fsdp.yaml`` launched here
stops with its reason: ``test_launch.py``), but torch's FSDP2 (``fully_shard``) runs on CPU
processes over gloo. So the parts of an FSDP2 run that are ours are tested with torch
directly, on two processes (``fsdp_worker.py``):

- the auto wrap policy accelerate builds (``fsdp2_prepare_auto_wrap_policy``) finds our
  encoder's layers: ``TRANSFORMER_BASED_WRAP`` without a class named shards the backbone's
  embeddings and each layer (``SentenceEncoder._no_split_modules``); ``fsdp.yaml``'s
  ``SIZE_BASED_WRAP`` at 1M parameters shards the tiny model as one unit;
- two sharded processes with 4 pairs each take the SGD step of one unsharded process with
  the 8 pairs (cosine MSE, a per-pair mean: FSDP2 averages the ranks' gradients);
- the full state dict gathered as accelerate gathers it for FSDP2 and saved through
  ``SentenceEncoder.save_pretrained`` (the Trainer's save) reloads and scores as the
  unsharded model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from launch_support import (
    ACCELERATE_CONFIGS,
    DEV,
    TRAIN,
    free_port,
    largest_difference,
    subprocess_env,
)
from safetensors.torch import load_file

from sts_core.testing import spearman_of_saved_model

pytestmark = [pytest.mark.slow, pytest.mark.launch]  # launch: several processes, every core
WORKER = Path(__file__).with_name("fsdp_worker.py")


def fsdp_yaml_wrap() -> tuple[str, int]:
    """The wrap policy and its size threshold as ``accelerate_configs/fsdp.yaml`` sets them."""
    config = yaml.safe_load((ACCELERATE_CONFIGS / "fsdp.yaml").read_text(encoding="utf-8"))
    fsdp = config["fsdp_config"]
    assert fsdp["fsdp_version"] == 2
    return fsdp["fsdp_auto_wrap_policy"], int(fsdp["fsdp_min_num_params"])


def run_step(model: Path, output: Path, world: int, wrap: str, min_num_params: int) -> dict:
    """One SGD step on ``world`` processes (1: unsharded, the reference); the saved folder's
    worker report."""
    port = free_port() if world > 1 else 0
    workers = []
    for rank in range(world):
        spec = {
            "rank": rank,
            "world": world,
            "port": port,
            "model": str(model),
            "output": str(output),
            "pairs": str(TRAIN),
            "wrap": wrap,
            "min_num_params": min_num_params,
        }
        command = [sys.executable, str(WORKER), json.dumps(spec)]
        workers.append(
            subprocess.Popen(
                command, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        )
    for worker in workers:
        out, _ = worker.communicate(timeout=300)
        assert worker.returncode == 0, out.decode()[-4000:]
    return json.loads((output / "worker.json").read_text(encoding="utf-8"))


def test_fsdp_yaml_wrap_policy_picks_modules_by_size_and_the_layers_by_class(
    tiny_bert_dir: Path,
) -> None:
    """The policy accelerate builds from ``fsdp.yaml``'s fields: size-based at 1M parameters
    keeps the tiny model one unit (each layer is smaller), at a layer's size it picks them;
    transformer-based picks the classes of ``_no_split_modules``."""
    import fsdp_worker

    from sts_core.encoder import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(str(tiny_bert_dir))
    policy, min_num_params = fsdp_yaml_wrap()
    assert (policy, min_num_params) == ("SIZE_BASED_WRAP", 1_000_000)
    assert fsdp_worker.wrapped_modules(encoder, policy, min_num_params) == []
    layer_size = sum(p.numel() for p in encoder.backbone.encoder.layer[0].parameters())
    assert layer_size < min_num_params
    assert "BertLayer" in fsdp_worker.wrapped_modules(encoder, policy, layer_size - 1)  # >
    by_class = fsdp_worker.wrapped_modules(encoder, "TRANSFORMER_BASED_WRAP", 0)
    assert sorted(set(by_class)) == ["BertEmbeddings", "BertLayer"]


def test_two_sharded_processes_take_the_step_of_one_and_save_a_folder_that_scores(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    model = tiny_bert_nodropout_dir
    run_step(model, tmp_path / "one", 1, "TRANSFORMER_BASED_WRAP", 0)
    report = run_step(model, tmp_path / "two", 2, "TRANSFORMER_BASED_WRAP", 0)

    assert report["kind"].startswith("FSDP")  # fully_shard made it an FSDPModule
    layers = json.loads((model / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"]
    # BERT's _no_split_modules: the embeddings and each layer, a unit of its own
    assert sorted(report["sharded"]) == ["BertEmbeddings"] + ["BertLayer"] * layers
    start = load_file(model / "model.safetensors")
    one = load_file(tmp_path / "one" / "model.safetensors")
    two = load_file(tmp_path / "two" / "model.safetensors")
    step = largest_difference(one, start)
    assert step > 1e-4  # the step moved the weights
    assert largest_difference(two, one) < 1e-5 * max(1.0, step)  # gathered: whole tensors
    assert spearman_of_saved_model(tmp_path / "two", DEV) == pytest.approx(
        spearman_of_saved_model(tmp_path / "one", DEV), abs=1e-4
    )
