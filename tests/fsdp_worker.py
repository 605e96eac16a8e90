"""One process of the FSDP2 test (``test_fsdp.py``): one SGD step of cosine MSE on its
share of 8 fixture pairs, the encoder sharded with torch's ``fully_shard`` under the auto
wrap policy accelerate builds from ``accelerate_configs/fsdp.yaml``'s fields (as
``accelerate.utils.fsdp2_prepare_model`` applies it), then the full state dict gathered
(``get_model_state_dict``, as accelerate's ``get_state_dict`` does for FSDP2) and saved by
rank 0 through ``SentenceEncoder.save_pretrained`` (the Trainer's save path).

``python fsdp_worker.py <spec JSON>``: rank, world, port (0 for one process without FSDP:
the reference step), model, output, wrap (accelerate's auto_wrap_policy name), and
min_num_params.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from sts_core.distributed import closing_process_group
from sts_core.encoder import SentenceEncoder
from sts_core.testing import join_gloo_group, read_stsb_pairs

PAIRS = 8
LEARNING_RATE = 0.5


def policy_modules(encoder: SentenceEncoder, wrap: str, min_num_params: int) -> list[Any]:
    """The modules below the encoder that accelerate's FSDP2 auto wrap policy picks (the
    plugin as ``fsdp.yaml``'s fields make it), bottom-up as ``fsdp2_prepare_model`` walks."""
    from accelerate import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import (
        fsdp2_prepare_auto_wrap_policy,
        get_module_children_bottom_up,
    )

    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2, auto_wrap_policy=wrap, min_num_params=min_num_params
    )
    plugin.set_auto_wrap_policy(encoder)
    policy = fsdp2_prepare_auto_wrap_policy(plugin, encoder)
    modules = get_module_children_bottom_up(encoder)[:-1]
    return [m for m in modules if policy is not None and policy(m)]


def wrapped_modules(encoder: SentenceEncoder, wrap: str, min_num_params: int) -> list[str]:
    return [type(m).__name__ for m in policy_modules(encoder, wrap, min_num_params)]


def wrap_with_fsdp2(encoder: SentenceEncoder, wrap: str, min_num_params: int) -> list[str]:
    """Shard each module the policy picks, then the encoder; returns the class names of the
    modules sharded on their own."""
    from torch.distributed.fsdp import fully_shard

    picked = policy_modules(encoder, wrap, min_num_params)
    sharded = [type(module).__name__ for module in picked]  # before fully_shard renames them
    for module in picked:
        fully_shard(module)
    fully_shard(encoder)
    return sharded


def cosine_mse(encoder: SentenceEncoder, first: list[str], second: list[str], labels) -> Any:
    columns = {
        name: dict(encoder.tokenizer(texts, padding=True, return_tensors="pt"))
        for name, texts in (("sentence1", first), ("sentence2", second))
    }
    embeddings = encoder(columns=columns)  # through __call__: FSDP gathers the root unit
    cosines = F.cosine_similarity(embeddings["sentence1"], embeddings["sentence2"])
    return ((cosines - labels / 5.0) ** 2).mean()


def main(spec: dict) -> None:
    rank, world = spec["rank"], spec["world"]
    torch.manual_seed(0)
    encoder = SentenceEncoder.from_pretrained(spec["model"])
    encoder.train()
    if spec["port"]:
        join_gloo_group(rank, world, spec["port"])
    with closing_process_group():  # as a user's run ends: a barrier, then the group closed
        step_and_save(spec, encoder)


def step_and_save(spec: dict, encoder: SentenceEncoder) -> None:
    """One SGD step on this rank's pairs (sharded when launched), then rank 0 saves."""
    rank, world = spec["rank"], spec["world"]
    sharded: list[str] = []
    if spec["port"]:
        sharded = wrap_with_fsdp2(encoder, spec["wrap"], spec["min_num_params"])
    first, second, labels = read_stsb_pairs(Path(spec["pairs"]))
    share = slice(rank * PAIRS // world, (rank + 1) * PAIRS // world)  # this rank's pairs
    loss = cosine_mse(encoder, first[share], second[share], labels[share])
    loss.backward()  # FSDP2 reduce-scatters the mean of the ranks' gradients
    with torch.no_grad():
        for parameter in encoder.parameters():
            if parameter.grad is not None:
                parameter -= LEARNING_RATE * parameter.grad
    state = None
    if spec["port"]:
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(encoder, options=options)  # every rank takes part
    if rank == 0:
        encoder.save_pretrained(spec["output"], state_dict=state)
        report = {"sharded": sharded, "loss": float(loss), "kind": type(encoder).__name__}
        Path(spec["output"], "worker.json").write_text(json.dumps(report), encoding="utf-8")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
