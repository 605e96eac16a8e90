"""Every launch path, run as a user runs it: ``accelerate launch`` with two CPU processes
(gloo), DeepSpeed ZeRO-2 and ZeRO-3 with two CPU processes, and ``sts-launch``. (Resuming
and ``sts-launch``'s checks, one process each, are in test_resume_and_launch_checks.py.)

- Two processes with half the batch each and the loss over the gathered batch take the same
  step as one process over the whole batch: same logged loss, same updated weights (SGD, so
  the weights after one step are ``w0 − lr · gradient``), while without gathering they
  differ (the test can fail); and so does every package's ``train.py`` under plain DDP,
  heads included.
- Every package's ``train.py`` trains under ``deepspeed_zero2.yaml`` and
  ``deepspeed_zero3.yaml``: the engine is a ``DeepSpeedEngine`` over two processes, and the
  saved folder reloads and gives the final score written in metrics.json.
- A NaN loss or an infinite weight on one process, the main one or the other, stops every
  process at that point, before anything of it is saved (the divergence guard and the
  weight check before a save, each the only check that could see its fault).

Every script launched here ends as a user's run does: a barrier, then the process group
closed (``train.py`` through ``cli_main``, the others in ``closing_process_group``). The
packages' runs under one config (plain DDP, ZeRO-2, ZeRO-3) share one launch:
``launch_every_package.py`` calls each ``train.py``'s ``main`` in turn in both processes
(one interpreter start instead of five, ~25 s each on two cores), with accelerate's state
reset between them, and each test reads only its own package's output folder (the other
tests here launch ``cosent``'s ``train.py`` alone, as a script).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from launch_support import (
    DEV,
    PACKAGES,
    TRAIN,
    WHOLE_BATCH_SETTINGS,
    LaunchedRuns,
    accelerate_launch,
    audited_env,
    free_port,
    largest_difference,
    launch_every_package,
    launch_two_machines,
    read_metrics,
    sts_launch,
    write_tiny_recipe,
)
from safetensors.torch import load_file

from sts_core.saving import SAVE_MARKER
from sts_core.testing import load_train_script, spearman_of_saved_model, write_fixture_recipe
from sts_core.training.config import accelerator_available

# launch: several processes, every core; the one-process runs in this process, on one thread
# as each launched process is (OMP_NUM_THREADS=1)
pytestmark = [pytest.mark.slow, pytest.mark.launch, pytest.mark.usefixtures("torch_one_thread")]
COSENT = next(p for p in PACKAGES if p.name == "cosent")

ONE_SGD_STEP = {
    "max_steps": "1",
    "optim": "sgd",
    "learning_rate": "0.5",
    "lr_scheduler_type": "constant",
    "max_grad_norm": "0",  # no clipping: the update is the gradient itself
    "weight_decay": "0",
    "eval_strategy": "no",
    "save_strategy": "no",
    "eval_dataset": "none",
    "final_eval_datasets": "[]",
}


def train_in_this_process(package: Path, recipe: Path) -> None:
    """``python packages/<m>/train.py --config <recipe>`` as one process runs it: the same
    ``main`` called here (what is compared is the run's output folder, not the process;
    a process start costs ~20 s on two cores, the run itself a second)."""
    assert load_train_script(package).main(["--config", str(recipe)]) == 0


def one_step(
    tmp_path: Path, model: Path, name: str, processes: int, batch: int, gather: bool
) -> tuple[float, dict[str, torch.Tensor]]:
    """The logged loss and the weights after one SGD step of CoSENT on 8 pairs."""
    output_dir = tmp_path / name
    recipe = write_tiny_recipe(
        tmp_path / f"{name}.yaml",
        "cosent",
        model,
        output_dir,
        per_device_train_batch_size=str(batch),
        gather_across_processes=str(gather).lower(),
        **ONE_SGD_STEP,
    )
    if processes == 1:
        train_in_this_process(COSENT, recipe)
    else:
        accelerate_launch("cpu.yaml", processes, COSENT / "train.py", "--config", str(recipe))
    metrics = read_metrics(output_dir)
    assert metrics["launch"]["world_size"] == processes
    return metrics["train"]["train_loss"], load_file(output_dir / "model.safetensors")


def test_two_processes_with_a_gathered_loss_step_like_one_process(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    start = load_file(tiny_bert_nodropout_dir / "model.safetensors")
    one_loss, one_weights = one_step(tmp_path, tiny_bert_nodropout_dir, "one", 1, 8, True)
    two_loss, two_weights = one_step(tmp_path, tiny_bert_nodropout_dir, "two", 2, 4, True)
    _, local_weights = one_step(tmp_path, tiny_bert_nodropout_dir, "local", 2, 4, False)

    step = largest_difference(one_weights, start)
    assert step > 1e-3  # the step moved the weights
    assert math.isfinite(one_loss) and two_loss == pytest.approx(one_loss, rel=1e-5)
    assert largest_difference(two_weights, one_weights) < 1e-5 * max(1.0, step)
    # each process ranking only its own half is a different step: the comparison can fail
    assert largest_difference(local_weights, one_weights) > 1e-3


def test_two_machines_take_the_step_of_one_process_and_the_main_one_alone_writes(
    tiny_bert_nodropout_dir: Path, tmp_path: Path
) -> None:
    """``multi_node.yaml`` as two machines of one process each (this host, gloo): with 4
    pairs each and CoSENT over the gathered batch they take the SGD step of one process
    with the 8 pairs, and the main machine alone writes the output folder (the second's
    directories made, files opened for writing from Python, renames and removals there are
    recorded by an audit hook)."""
    _, one_weights = one_step(tmp_path, tiny_bert_nodropout_dir, "one", 1, 8, True)
    output_dir = tmp_path / "two"
    recipe = write_tiny_recipe(
        tmp_path / "two.yaml",
        "cosent",
        tiny_bert_nodropout_dir,
        output_dir,
        per_device_train_batch_size="4",
        gather_across_processes="true",
        **{**ONE_SGD_STEP, "save_strategy": "steps", "save_steps": "1"},  # a checkpoint too
    )
    launch_two_machines(output_dir, COSENT / "train.py", "--config", str(recipe))

    metrics = read_metrics(output_dir)
    assert metrics["launch"]["world_size"] == 2
    assert (output_dir / "checkpoint-1").is_dir()
    two_weights = load_file(output_dir / "model.safetensors")
    start = load_file(tiny_bert_nodropout_dir / "model.safetensors")
    step = largest_difference(one_weights, start)
    assert step > 1e-3
    assert largest_difference(two_weights, one_weights) < 1e-5 * max(1.0, step)
    # The second machine made the checkpoint's staging folder (and its parent when it came
    # first), as the Trainer does on every process to save that process's RNG state
    # (rng_state_1.pth, written from C++: torch.save is not seen by the audit), and nothing
    # else: no model, state or metrics file.
    writes = (tmp_path / "machine1-writes.log").read_text(encoding="utf-8").splitlines()
    staging = output_dir / ".sts-staging"
    made = [line.split(" ", 1)[1] for line in writes]
    assert f"os.mkdir {staging / 'checkpoint-1'}" in made
    assert set(made) <= {f"os.mkdir {staging}", f"os.mkdir {staging / 'checkpoint-1'}"}, made
    assert (output_dir / "checkpoint-1" / "rng_state_1.pth").is_file()
    writes_file = tmp_path / "machine1-writes.log"
    # the audit is live in that environment: the same start-up records a write
    probe = f"open({str(output_dir / 'probe.txt')!r}, 'w').close()"
    subprocess.run([sys.executable, "-c", probe], env=audited_env(output_dir), check=True)
    assert "probe.txt" in writes_file.read_text(encoding="utf-8")


def saved_weights(output_dir: Path) -> dict[str, torch.Tensor]:
    """The saved model's weights and those of its heads (sts_extra_modules), if any."""
    weights = load_file(output_dir / "model.safetensors")
    extra = output_dir / "sts_extra_modules.safetensors"
    return {**weights, **(load_file(extra) if extra.is_file() else {})}


@pytest.fixture(scope="module")
def every_package_on_two_processes(
    tiny_bert_nodropout_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> LaunchedRuns:
    """Every package's one SGD step with 4 pairs on each of two processes (cpu.yaml,
    gloo), the packages one after another in one launch (launch_every_package.py)."""
    root = tmp_path_factory.mktemp("ddp-every-package")
    recipes = {
        package: write_tiny_recipe(
            root / f"{package.name}.yaml",
            package.name,
            tiny_bert_nodropout_dir,
            root / package.name,
            per_device_train_batch_size="4",
            **ONE_SGD_STEP,
            **WHOLE_BATCH_SETTINGS[package.name],
        )
        for package in PACKAGES
    }
    return launch_every_package("cpu.yaml", root, recipes)


@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_every_package_takes_one_step_on_two_processes_like_one(
    package: Path,
    every_package_on_two_processes: LaunchedRuns,
    tiny_bert_nodropout_dir: Path,
    tmp_path: Path,
) -> None:
    """Plain DDP (cpu.yaml, gloo): two processes with 4 pairs each take the SGD step of one
    process with the 8 pairs, heads included (a loss's head runs inside the DDP forward)."""
    output_dir = tmp_path / "one"
    recipe = write_tiny_recipe(
        tmp_path / "one.yaml",
        package.name,
        tiny_bert_nodropout_dir,
        output_dir,
        per_device_train_batch_size="8",
        **ONE_SGD_STEP,
        **WHOLE_BATCH_SETTINGS[package.name],
    )
    train_in_this_process(package, recipe)
    assert read_metrics(output_dir)["launch"]["world_size"] == 1
    two_dir = every_package_on_two_processes.output_dir(package)
    assert read_metrics(two_dir)["launch"]["world_size"] == 2
    weights = {"one": saved_weights(output_dir), "two": saved_weights(two_dir)}
    start = load_file(tiny_bert_nodropout_dir / "model.safetensors")
    step = largest_difference({k: weights["one"][k] for k in start}, start)
    assert step > 1e-4  # the step moved the encoder
    assert largest_difference(weights["two"], weights["one"]) < 1e-5 * max(1.0, step)


def final_spearman(metrics: dict) -> float:
    (scores,) = metrics["final"].values()
    (key,) = [k for k in scores if k.endswith("_spearman")]
    return scores[key]


@pytest.fixture(scope="module", params=[2, 3], ids=lambda stage: f"zero{stage}")
def deepspeed_runs(
    request: pytest.FixtureRequest, tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> LaunchedRuns:
    """Every package's tiny recipe under ``deepspeed_zero<stage>.yaml`` on two processes,
    the packages one after another in one launch (launch_every_package.py)."""
    pytest.importorskip("deepspeed", reason="DeepSpeed is an extra: sts-core[deepspeed]")
    root = tmp_path_factory.mktemp(f"deepspeed-zero{request.param}")
    recipes = {
        package: write_tiny_recipe(
            root / f"{package.name}.yaml", package.name, tiny_bert_dir, root / package.name
        )
        for package in PACKAGES
    }
    return launch_every_package(f"deepspeed_zero{request.param}.yaml", root, recipes)


@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_train_script_trains_with_deepspeed_on_two_processes(
    package: Path, deepspeed_runs: LaunchedRuns, tiny_bert_dir: Path
) -> None:
    output_dir = deepspeed_runs.output_dir(package)
    stage = deepspeed_runs.zero_stage()
    metrics = read_metrics(output_dir)
    assert metrics["launch"] == {
        "world_size": 2,
        "distributed_type": "DEEPSPEED",
        "engine": "DeepSpeedEngine",
        "zero_stage": stage,
    }
    # 4 steps of 2 processes × 4 rows: two epochs of the 16 pairs (SIFTER: its sentences)
    batches_per_epoch = math.ceil(math.ceil(metrics["data"]["train_pairs"] / 2) / 4)
    assert metrics["train"]["epoch"] == pytest.approx(4 / batches_per_epoch)
    assert math.isfinite(metrics["train"]["train_loss"])
    assert (output_dir / "checkpoint-4").is_dir()
    heads = output_dir / "sts_heads.json"
    if heads.is_file():  # a loss's head (regression) is gathered and saved with the model
        names = json.loads(heads.read_text(encoding="utf-8"))["heads"]
        extra = load_file(output_dir / "sts_extra_modules.safetensors")
        assert {key.split(".")[0] for key in extra} == set(names)
        assert min(t.numel() for t in extra.values()) > 0
    # the saved folder is an ordinary model folder that gives the final score again
    assert spearman_of_saved_model(output_dir, DEV) == pytest.approx(
        final_spearman(metrics), abs=1e-3
    )
    weights = load_file(output_dir / "model.safetensors")
    start = load_file(tiny_bert_dir / "model.safetensors")
    assert min(t.numel() for t in weights.values()) > 0  # gathered, not ZeRO-3 partitions
    assert len(weights) == len(start)
    moved = zip(sorted_values(weights), sorted_values(start), strict=True)
    assert max(float((a - b).abs().max()) for a, b in moved) > 1e-4


def sorted_values(state: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Tensors in a fixed order by shape and name (ZeRO-3 saves LayerNorm weight/bias under
    their legacy names gamma/beta, which load back the same)."""
    renamed = {
        k.replace(".gamma", ".weight").replace(".beta", ".bias"): v for k, v in state.items()
    }
    return [renamed[k] for k in sorted(renamed)]


def test_the_fsdp_config_on_cpu_processes_stops_with_its_reason_instead_of_plain_ddp(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """accelerate runs FSDP only on accelerators; launched here, fsdp.yaml would train each
    process as MULTI_CPU DDP (exit 0, no sharding), so the run stops before training."""
    if accelerator_available():
        pytest.skip("a machine with an accelerator runs FSDP: benchmarks/gpu_check.py")
    output_dir = tmp_path / "out"
    recipe = write_tiny_recipe(tmp_path / "recipe.yaml", "cosent", tiny_bert_dir, output_dir)
    with pytest.raises(AssertionError) as failed:
        accelerate_launch("fsdp.yaml", 2, COSENT / "train.py", "--config", str(recipe))
    (line,) = {x for x in str(failed.value).splitlines() if x.startswith("error: ")}  # 2 ranks
    assert "FSDP needs GPUs" in line and "cpu.yaml" in line
    assert not output_dir.exists()  # nothing trained, nothing written


def test_sts_launch_trains_on_two_processes_and_refuses_the_folder_again(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = write_tiny_recipe(tmp_path / "r.yaml", "cosent", tiny_bert_dir, tmp_path / "out")
    launcher = ["--config_file", "accelerate_configs/cpu.yaml", "--num_processes", "2"]
    script = str(COSENT / "train.py")
    result = sts_launch(
        *launcher, "--main_process_port", str(free_port()), script, "--config", str(recipe)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_metrics(tmp_path / "out")["launch"]["world_size"] == 2
    # the same output_dir again: the check refuses it before launching (its main called here)
    from sts_core.launch import main as sts_launch_main

    again = [*launcher, "--main_process_port", str(free_port()), script, "--config", str(recipe)]
    assert sts_launch_main(again) == 2
    err = capsys.readouterr().err
    assert "holds an earlier run" in err and "Traceback" not in err


SAMPLER_SCRIPT = '''
"""Two processes, a trainer whose epoch batches differ by rank before the broadcast."""
import json, os, sys
import torch
from datasets import Dataset
from sts_core.distributed import closing_process_group
from sts_core.encoder import SentenceEncoder
from sts_core.testing import quick_training_args
from sts_core.training import BaseConfig, BaseTrainer

model_dir, out = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK"])
ROWS = 12


class Recording(BaseTrainer):
    def build_epoch_batches(self, dataset, epoch):
        order = list(range(ROWS)) if rank == 0 else list(reversed(range(ROWS)))
        order = order[epoch:] + order[:epoch]  # another order each epoch
        with open(f"{out}/proposed_rank{rank}.jsonl", "a") as handle:
            handle.write(json.dumps({"epoch": epoch, "order": order}) + "\\n")
        return [order[i : i + 4] for i in range(0, ROWS, 4)]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        ids = sorted(round(float(x) * ROWS) for x in inputs["labels"])
        with open(f"{out}/seen_rank{rank}.jsonl", "a") as handle:
            handle.write(json.dumps(ids) + "\\n")
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


data = Dataset.from_dict({
    "sentence1": ["a man plays", "the dog runs", "a cat eats"] * 4,
    "sentence2": ["a man plays a guitar", "a dog", "the cat eats food"] * 4,
    "score": [i / ROWS for i in range(ROWS)],
})
args = quick_training_args(BaseConfig, out, per_device_train_batch_size=2, num_train_epochs=2,
                           max_steps=-1, learning_rate=1e-4)
trainer = Recording(model=SentenceEncoder.from_pretrained(model_dir), args=args, train_dataset=data)
with closing_process_group():  # as a user's run ends: a barrier, then the group closed
    trainer.train()
    assert trainer.args.world_size == 2
'''


def test_epoch_batches_are_the_main_process_order_split_by_rank(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """Every process proposes batches (here different ones); all train on rank 0's, each on
    its own half of every global batch, rebuilt at each epoch."""
    script = tmp_path / "sampler_run.py"
    script.write_text(SAMPLER_SCRIPT, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    accelerate_launch("cpu.yaml", 2, script, str(tiny_bert_dir), str(out))
    read = lambda name: [  # noqa: E731
        json.loads(line) for line in (out / name).read_text(encoding="utf-8").splitlines()
    ]
    proposed = read("proposed_rank0.jsonl")
    assert [p["epoch"] for p in proposed] == [0, 1]
    assert [p["epoch"] for p in read("proposed_rank1.jsonl")] == [0, 1]
    for rank in (0, 1):
        expected = [
            sorted(p["order"][start + 2 * rank : start + 2 * rank + 2])
            for p in proposed
            for start in range(0, 12, 4)
        ]
        assert read(f"seen_rank{rank}.jsonl") == expected


MULTI_SET_SCRIPT = '''
"""sts-train on two training sets, each process recording the set of every batch it trains."""
import json, os, sys
from sts_core.training import BaseTrainer
from sts_core.training.run import main

out = sys.argv[1]
real_compute_loss = BaseTrainer.compute_loss


def recording(self, model, inputs, *args, **kwargs):
    with open(f"{out}/sets_rank{os.environ['RANK']}.jsonl", "a") as handle:
        rows = len(inputs["sentence1_input_ids"])
        handle.write(json.dumps([inputs.get("dataset_name"), rows]) + "\\n")
    return real_compute_loss(self, model, inputs, *args, **kwargs)


BaseTrainer.compute_loss = recording
sys.exit(main(sys.argv[2:]))
'''


def test_two_processes_train_each_global_batch_from_one_set(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """Two sets (scored pairs with cosine_mse, triplets with infonce) on two processes:
    every step both processes train on their halves of one set's global batch (10 and 7
    rows in global batches of 8: 2 and 1 batches an epoch), and metrics.json counts them."""
    pairs, nli = tmp_path / "pairs.tsv", tmp_path / "nli.csv"
    pairs.write_text(
        "".join(f"a man plays {i}\ta dog runs {i}\t{(i % 5) / 4}\n" for i in range(10)),
        encoding="utf-8",
    )
    nli.write_text(
        "sent0,sent1,hard_neg\n" + "".join(f"cat {i},a cat {i},no cat {i}\n" for i in range(7)),
        encoding="utf-8",
    )
    output_dir, records = tmp_path / "out", tmp_path / "records"
    records.mkdir()
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml",
        "two training sets",
        tiny_bert_dir,
        TRAIN,
        DEV,
        output_dir,
        train_datasets=f"{{pairs: {{path: {pairs}, loss: cosine_mse}}, "
        f"nli: {{path: {nli}, loss: infonce}}}}",
        per_device_train_batch_size="4",
        max_steps="-1",
        num_train_epochs="2",
        eval_strategy="no",
        save_strategy="no",
        eval_dataset="none",
    )
    script = tmp_path / "multi_set_run.py"
    script.write_text(MULTI_SET_SCRIPT, encoding="utf-8")
    accelerate_launch("cpu.yaml", 2, script, str(records), "--config", str(recipe))
    seen = [
        [json.loads(line) for line in (records / f"sets_rank{rank}.jsonl").read_text().splitlines()]
        for rank in (0, 1)
    ]
    assert [name for name, _ in seen[0]] == [name for name, _ in seen[1]]
    assert sorted(name for name, _ in seen[0]) == ["nli"] * 2 + ["pairs"] * 4
    metrics = read_metrics(output_dir)
    assert metrics["launch"]["world_size"] == 2
    trained = {name: d["batches"] for name, d in metrics["train"]["datasets"].items()}
    assert trained == {"pairs": 4, "nli": 2}
    rows = {"pairs": 0, "nli": 0}
    for rank in (0, 1):
        for name, count in seen[rank][:3]:  # the first epoch
            rows[name] += count
    assert rows == {"pairs": 10, "nli": 7}


STREAM_SCRIPT = '''
"""sts-train, each process recording the scores of every batch it trains."""
import json, os, sys
from sts_core.training import BaseTrainer
from sts_core.training.run import main

out = sys.argv[1]
real_compute_loss = BaseTrainer.compute_loss


def recording(self, model, inputs, *args, **kwargs):
    with open(f"{out}/scores_rank{os.environ.get('RANK', '0')}.jsonl", "a") as handle:
        handle.write(json.dumps(inputs["labels"].tolist()) + "\\n")
    return real_compute_loss(self, model, inputs, *args, **kwargs)


BaseTrainer.compute_loss = recording
sys.exit(main(sys.argv[2:]))
'''


def test_a_stream_of_shards_trains_two_processes_on_the_rows_of_one(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    """A folder of two table files streams (shuffled in a buffer): on two processes each
    reads one file, and over a pass they train on the 16 rows that one process, with the
    global batch, trains on (each row once)."""
    shards = tmp_path / "shards"
    shards.mkdir()
    for part in (0, 1):  # the scores name the rows: 0, 0.25, …, 3.75
        rows = "".join(f"a man {n},a dog {n},{n / 4}\n" for n in range(8 * part, 8 * part + 8))
        (shards / f"part{part}.csv").write_text("sentence1,sentence2,score\n" + rows)
    script = tmp_path / "stream_run.py"
    script.write_text(STREAM_SCRIPT, encoding="utf-8")
    seen = {}
    for processes, batch in ((2, 2), (1, 4)):
        records = tmp_path / f"records{processes}"
        records.mkdir()
        recipe = write_fixture_recipe(
            tmp_path / f"recipe{processes}.yaml",
            "a stream of two shards",
            tiny_bert_dir,
            shards,
            DEV,
            tmp_path / f"out{processes}",
            per_device_train_batch_size=str(batch),
            max_steps="4",
            eval_strategy="no",
            save_strategy="no",
            eval_dataset="none",
        )
        arguments = (script, str(records), "--config", str(recipe))
        if processes == 1:
            subprocess.run([sys.executable, *map(str, arguments)], check=True)
        else:
            accelerate_launch("cpu.yaml", processes, *arguments)
        seen[processes] = [
            [
                row
                for line in (records / f"scores_rank{rank}.jsonl").read_text().splitlines()
                for row in json.loads(line)
            ]
            for rank in range(processes)
        ]
    every_row = [n / 4 for n in range(16)]
    assert sorted(seen[1][0]) == every_row
    assert sorted(seen[2][0] + seen[2][1]) == every_row
    files = [set(every_row[:8]), set(every_row[8:])]
    assert {frozenset(rows) for rows in seen[2]} == {frozenset(f) for f in files}
    assert seen[2][0] != sorted(seen[2][0]) or seen[2][1] != sorted(seen[2][1])  # shuffled


FAULT_SCRIPT = '''
"""sts-train (the core's cosine MSE) with a fault planted on one process.

``fault_run.py KIND RANK STEP <sts-train arguments>``: KIND ``loss``: on process RANK the
loss of step STEP reads NaN while its gradient stays the loss's (the weights stay finite:
only the loss check can see it); ``weights``: a trainable weight of process RANK turns
infinite at the end of step STEP (nothing reads it before the checkpoint of that step).
"""
import os
import sys

import torch
from transformers import TrainerCallback

from sts_core.training import BaseTrainer, TrainingRun
from sts_core.training.run import main

kind, fault_rank, fault_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
real_compute_loss = BaseTrainer.compute_loss


def nan_valued_loss(self, model, inputs, *args, **kwargs):
    loss = real_compute_loss(self, model, inputs, *args, **kwargs)
    if self.state.global_step + 1 == fault_step:
        return loss + loss.detach() * float("nan")  # the value NaN, the gradient the loss's
    return loss


class PoisonWeights(TrainerCallback):
    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == fault_step:
            with torch.no_grad():
                next(p for p in model.parameters() if p.requires_grad).fill_(float("inf"))


if int(os.environ["RANK"]) == fault_rank:
    if kind == "loss":
        BaseTrainer.compute_loss = nan_valued_loss
    else:
        TrainingRun.build_callbacks = lambda self: [PoisonWeights()]
sys.exit(main(sys.argv[4:]))  # ends as sts-train does: the process group closed
'''

# 4 steps of 2 pairs a process, a checkpoint every 2 steps, the loss logged every step, no
# evaluation: nothing but the divergence guard reads the loss or the weights of a step
GUARDED_RUN = {
    "score_range": "[0, 5]",
    "per_device_train_batch_size": "2",
    "logging_steps": "1",
    "eval_strategy": "no",
    "eval_dataset": "none",
    "final_eval_datasets": "[]",
}


@pytest.mark.parametrize("rank", [0, 1], ids=["rank0", "rank1"])
@pytest.mark.parametrize(
    ("kind", "step", "reason", "kept"),
    [
        ("loss", 3, "training diverged: the loss of step 3 is nan", ["checkpoint-2"]),
        ("weights", 2, "hold NaN or infinite values after a step with a finite loss", []),
    ],
    ids=["loss", "weights"],
)
def test_a_fault_on_one_process_stops_every_process_before_it_is_saved(
    kind: str,
    step: int,
    reason: str,
    kept: list[str],
    rank: int,
    tiny_bert_nodropout_dir: Path,
    tmp_path: Path,
) -> None:
    """Two processes; on one of them (the main one or the other) a step's loss reads NaN
    with finite gradients (the divergence guard alone can see it: the weights stay finite,
    nothing evaluates), or a weight turns infinite at a checkpoint step (the weight check
    before the save alone can see it: the next step's loss comes after the save). Every
    process stops at that point with the reason, and nothing of that step is published."""
    script = tmp_path / "fault_run.py"
    script.write_text(FAULT_SCRIPT, encoding="utf-8")
    output = tmp_path / "out"
    recipe = write_fixture_recipe(
        tmp_path / "recipe.yaml", "guard", tiny_bert_nodropout_dir, TRAIN, DEV, output,
        **GUARDED_RUN,
    )  # fmt: skip
    result = accelerate_launch(
        "cpu.yaml", 2, script, kind, str(rank), str(step), "--config", str(recipe), check=False
    )
    assert result.returncode != 0, result.stderr[-3000:]
    # each process's line (two processes writing at once may join them on one line)
    stops = re.findall(
        r"error: (\[rank 1\] )?training diverged: (.*?)(?=error: |$)", result.stderr, re.M
    )
    assert sorted(rank for rank, _ in stops) == ["", "[rank 1] "], result.stderr[-6000:]
    assert all(reason in f"training diverged: {text}" for _, text in stops), stops
    assert sorted(p.name for p in output.glob("checkpoint-*")) == kept
    assert not (output / SAVE_MARKER).exists() and not (output / "metrics.json").exists()
