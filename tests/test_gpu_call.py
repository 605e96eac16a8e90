"""The prepared GPU call: the check keeps within its budget and writes what it has after
each step; the bundle holds what the GPU machine lacks and replaces only its own folder.
(The whole call runs in CI's benchmarks/gpu_call_smoke.sh.)"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benchmark_support import load_benchmark_script
from launch_support import REPO

from sts_core import command_files
from sts_core.command_files import write_json


@pytest.fixture(scope="module")
def check():
    return load_benchmark_script("gpu_check")


@pytest.fixture(scope="module")
def call():
    return load_benchmark_script("gpu_call")


def test_a_step_that_runs_out_of_time_keeps_what_it_printed(check) -> None:
    script = "import time; print('round 1: 41.5 pairs/s', flush=True); time.sleep(60)"
    start = time.monotonic()
    result = check.run([sys.executable, "-c", script], argparse.Namespace(limit=3))
    assert time.monotonic() - start < 30
    assert result["status"] == "failed"
    assert result["output_tail"].splitlines() == ["round 1: 41.5 pairs/s", "timed out after 3 s"]


def test_a_timed_out_step_keeps_both_streams_in_the_order_they_were_printed(check) -> None:
    # the first H200 call lost the benchmark's progress lines: stdout came before stderr
    script = (
        "import sys, time; print('round 1/2: ours', flush=True); "
        "print('load report', file=sys.stderr, flush=True); "
        "print('throughput 546.28', flush=True); time.sleep(60)"
    )
    result = check.run([sys.executable, "-c", script], argparse.Namespace(limit=3))
    assert result["output_tail"].splitlines() == [
        "round 1/2: ours",
        "load report",
        "throughput 546.28",
        "timed out after 3 s",
    ]


def test_a_speed_step_cut_off_keeps_the_runs_it_measured(check) -> None:
    script = (
        "import json, sys, time; path = sys.argv[sys.argv.index('--runs-file') + 1]; "
        "runs = {'ours': [{'throughput': 280.59}, {'throughput': 546.28}], "
        "'peer': [{'throughput': 483.6}]}; "
        "open(path, 'w').write(json.dumps({'runs': runs})); time.sleep(60)"
    )
    result = check.run_keeping_runs([sys.executable, "-c", script], argparse.Namespace(limit=3))
    assert result["status"] == "failed"
    assert result["runs"]["runs"]["ours"] == [{"throughput": 280.59}, {"throughput": 546.28}]
    assert "runs.json" not in result["command"]  # the scratch file is not part of the step
    lines = check.runs_markdown({"train": result})
    shown = "ours 280.59, 546.28; peer 483.6"
    assert lines[-1] == f"- train (runs, failed): throughput per run: {shown}"


def test_alternate_saves_each_run_as_it_ends(tmp_path: Path) -> None:
    common = load_benchmark_script("_common")
    runs_file = tmp_path / "runs.json"
    write_json(runs_file, {"other-model": {"ours": []}})  # an earlier run's (sts-core's)
    seen: list[dict] = []

    def run(side: str, round_index: int) -> dict:
        if runs_file.is_file():
            seen.append(json.loads(runs_file.read_text(encoding="utf-8")))
        return {"throughput": 10.0 * round_index + len(side), "losses": [[1, 0.5]]}

    common.alternate(["ours", "peer"], 2, run, runs_file=str(runs_file), key="minilm")
    saved = json.loads(runs_file.read_text(encoding="utf-8"))
    assert saved["other-model"] == {"ours": []}  # another key is kept
    assert saved["minilm"] == {
        "ours": [{"throughput": 4.0}, {"throughput": 14.0}],
        "peer": [{"throughput": 4.0}, {"throughput": 14.0}],
    }
    # before the 2nd run, the 1st was on disk; the losses are not saved
    assert seen[1]["minilm"] == {"ours": [{"throughput": 4.0}], "peer": []}


def test_only_runs_the_named_steps_and_says_why_the_others_did_not_run(check, monkeypatch) -> None:
    ran: list[str] = []

    def step(name: str):
        return lambda args: ran.append(name) or {"status": "passed", "seconds": 0.0}

    monkeypatch.setattr(check, "PLAN", {n: step(n) for n in ("train", "encode", "lora-bf16")})
    monkeypatch.setattr(check, "STEP_LIMITS", {"train": 9, "encode": 9, "lora-bf16": 9})
    args = argparse.Namespace(budget=50, smoke=False, only=["train", "lora-bf16"])
    steps = check.run_steps(args, lambda done: None)
    assert ran == ["train", "lora-bf16"]
    assert steps["encode"] == {
        "status": "skipped",
        "seconds": 0.0,
        "reason": "--only train lora-bf16",
    }


def test_steps_run_in_order_within_their_limits_and_the_budget(check, monkeypatch) -> None:
    seen: list[tuple[str, int]] = []

    def step(name: str, seconds: float):
        def run(args: argparse.Namespace) -> dict:
            seen.append((name, args.limit))
            time.sleep(seconds)
            return {"status": "passed", "seconds": seconds}

        return run

    plan = {"train": step("train", 1.5), "encode": step("encode", 0.0), "faiss-gpu": step("f", 0)}
    monkeypatch.setattr(check, "PLAN", plan)
    monkeypatch.setattr(check, "STEP_LIMITS", {"train": 100, "encode": 1, "faiss-gpu": 100})
    monkeypatch.setattr(check, "MIN_STEP_SECONDS", 0.2)
    written: list[list[str]] = []
    args = argparse.Namespace(budget=1.6, smoke=False)
    steps = check.run_steps(args, lambda done: written.append(list(done)))
    # the first step gets what is left of the budget (1.6 s < its own 100 s) and spends it
    assert seen[0] == ("train", 1)
    assert [name for name, _ in seen] == ["train"]
    assert steps["encode"]["status"] == steps["faiss-gpu"]["status"] == "skipped"
    assert steps["encode"]["reason"] == "the check's budget of 1.6 s was spent"
    assert written == [["train"], ["train", "encode"], ["train", "encode", "faiss-gpu"]]
    monkeypatch.setattr(check, "PLAN", {"encode": step("encode", 0.0)})
    seen.clear()
    check.run_steps(argparse.Namespace(budget=50, smoke=False), lambda done: None)
    assert seen == [("encode", 1)]  # its own limit, under the budget


def test_an_optional_row_runs_only_when_its_whole_limit_is_left(check, monkeypatch) -> None:
    seen: list[tuple[str, int]] = []

    def step(name: str):
        return lambda args: seen.append((name, args.limit)) or {"status": "passed", "seconds": 0}

    monkeypatch.setattr(
        check, "PLAN", {n: step(n) for n in ("train", "train-512", "train-decoder")}
    )
    monkeypatch.setattr(check, "STEP_LIMITS", {"train": 5, "train-512": 30, "train-decoder": 60})
    steps = check.run_steps(argparse.Namespace(budget=50, smoke=False), lambda done: None)
    assert seen == [("train", 5), ("train-512", 30)]  # 50 s left: 30 fit, then 60 do not
    why = steps["train-decoder"]["reason"]
    assert steps["train-decoder"]["status"] == "skipped"
    assert why.startswith("an optional row: it needs 60 s, 50 s of the budget was left")
    assert why.endswith("(run it alone: --only train-decoder)")
    seen.clear()
    only = argparse.Namespace(budget=80, smoke=False, only=["train-decoder"])
    assert check.run_steps(only, lambda done: None)["train-decoder"]["status"] == "passed"
    assert seen == [("train-decoder", 60)]  # alone, within its limit
    seen.clear()
    steps = check.run_steps(argparse.Namespace(budget=900, smoke=True), lambda done: None)
    assert seen == [("train", check.SMOKE_STEP_LIMIT)]  # the run-through skips the GPU rows
    assert steps["train-512"]["reason"].startswith("a GPU row: the CPU run-through's train")


def recorded_rows(check, monkeypatch, models: Path, status: str) -> list[list[str]]:
    """The commands the speed rows will run (not run: each ends with ``status``), with
    ``models`` as STS_MODELS_DIR."""
    commands: list[list[str]] = []

    def keep(command: list[str], args: argparse.Namespace) -> dict:
        commands.append(command)
        return {"status": status, "seconds": 0.0, "command": "x"}

    monkeypatch.setattr(check, "run_keeping_runs", keep)
    monkeypatch.setenv("STS_MODELS_DIR", str(models))
    return commands


GPU_ROW_ARGS = {"device": "cuda", "smoke": False, "mode": "full"}


def test_the_train_rows_profile_their_last_steps(check, monkeypatch, tmp_path: Path) -> None:
    commands = recorded_rows(check, monkeypatch, tmp_path, "failed")
    (tmp_path / check.DECODER).mkdir()
    args = argparse.Namespace(**GPU_ROW_ARGS, out=tmp_path)
    assert check.train_decoder_step(args)["status"] == "skipped"  # no config.json
    (tmp_path / check.DECODER / "config.json").write_text("{}", encoding="utf-8")
    steps = (check.train_step, check.train_512_step, check.train_decoder_step)
    for step in (*steps, check.train_compiled_step):
        step(args)
    train, b512, decoder, compiled = (" ".join(c[1:]) for c in commands)
    for command in (train, b512, decoder, compiled):
        assert command.endswith("--profile-steps 5") and "--dtype bf16" in command
    assert "--batch-size 64 --max-steps 60 --repeats 2" in train and "--tag" not in train
    assert "--model-config bert-base --batch-size 512" in b512 and "--tag b512" in b512
    assert "--model-config smollm2-135m --batch-size 64" in decoder
    assert "--tag smollm2" in decoder
    # compilation on and off: the packed side beside the compiled one, rows of 512 tokens
    assert "train.py --packed --compiled --pack-multiple 512 --device cuda" in compiled
    assert "--model-config bert-base" in compiled and "--tag compiled" in compiled


def test_the_decoder_encode_row_tags_its_report(check, monkeypatch, tmp_path: Path) -> None:
    commands = recorded_rows(check, monkeypatch, tmp_path, "passed")
    args = argparse.Namespace(**GPU_ROW_ARGS, out=tmp_path)
    assert check.encode_decoder_step(args)["status"] == "skipped"  # no SmolLM2 folder
    (tmp_path / check.DECODER).mkdir()
    (tmp_path / check.DECODER / "config.json").write_text("{}", encoding="utf-8")
    assert check.encode_decoder_step(args)["report"] == "gpu_encode_smollm2.md"
    assert check.encode_step(args)["report"] == "gpu_encode.md"
    decoder, bert = (" ".join(c[1:]) for c in commands)
    assert "--model-config smollm2-135m --batch-size 128 --repeats 1 --tag smollm2" in decoder
    assert "--model-config bert-base --batch-size 128 --repeats 2" in bert


def test_each_gpu_row_reads_the_report_its_script_writes(check, monkeypatch, tmp_path) -> None:
    """The check names each speed row's report as the script names it from the row's own
    options (``--tag``, ``--device``): ``gpu.report_name``."""
    gpu = load_benchmark_script("_gpu")
    scripts = {
        "train.py": load_benchmark_script("train"),
        "encode.py": load_benchmark_script("encode"),
    }
    commands = recorded_rows(check, monkeypatch, tmp_path, "failed")
    (tmp_path / check.DECODER).mkdir()
    (tmp_path / check.DECODER / "config.json").write_text("{}", encoding="utf-8")
    args = argparse.Namespace(**GPU_ROW_ARGS, out=tmp_path)
    for name in check.SPEED_STEPS:
        check.PLAN[name](args)
    assert len(commands) == len(check.SPEED_STEPS)
    for name, command in zip(check.SPEED_STEPS, commands, strict=True):
        script = Path(command[1]).name
        parsed = scripts[script].parse_args(command[2:])
        benchmark = script.removesuffix(".py")
        expected = gpu.stem_name(check.SPEED_STEPS[name], "cuda")
        assert gpu.report_name(benchmark, parsed) == expected, name


def test_the_checks_run_at_the_same_time_each_within_its_limit(check, monkeypatch) -> None:
    seen: dict[str, int] = {}

    def step(name: str):
        def run(args: argparse.Namespace) -> dict:
            seen[name] = args.limit
            time.sleep(1.0)
            return {"status": "passed", "seconds": 1.0}

        return run

    names = ("lora-bf16", "qlora-4bit", "faiss-gpu", "cuda-tests", "train")
    monkeypatch.setattr(check, "PLAN", {n: step(n) for n in names})
    limits = {"lora-bf16": 30, "qlora-4bit": 20, "faiss-gpu": 10, "cuda-tests": 30, "train": 90}
    monkeypatch.setattr(check, "STEP_LIMITS", limits)
    start = time.monotonic()
    steps = check.run_steps(argparse.Namespace(budget=60, smoke=False), lambda done: None)
    assert time.monotonic() - start < 3.5  # four checks at once (~1 s), then train (~1 s)
    assert list(steps) == list(names) and {s["status"] for s in steps.values()} == {"passed"}
    assert seen == {**{n: limits[n] for n in names[:4]}, "train": 58}  # what was left


def test_the_report_lists_the_steps_not_reached_yet(check, tmp_path: Path) -> None:
    stem = tmp_path / "gpu_check"
    done = {"train": {"status": "failed", "seconds": 150.0, "command": "train.py"}}
    info = {"cpu": "x", "logical_cpus": 2, "python": "3.12", "torch": "2.11.0", "load_average": 0}
    info |= {"transformers": "5.17.0", "sentence-transformers": "6.0.1"}
    check.write_report(stem, done, info)
    report = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
    assert list(report["steps"]) == list(check.PLAN)
    assert report["steps"]["train"]["status"] == "failed"
    assert {s["status"] for name, s in report["steps"].items() if name != "train"} == {
        "not run yet"
    }
    assert "| encode | not run yet |" in stem.with_suffix(".md").read_text(encoding="utf-8")


def test_the_gpu_steps_and_the_call_fit_the_device_window(check, call) -> None:
    limits = check.STEP_LIMITS
    together = max(limits[name] for name in check.CONCURRENT_STEPS)
    alone = [n for n in limits if n not in (*check.OPTIONAL_STEPS, *check.CONCURRENT_STEPS)]
    # the "the whole check ≤ 6 minutes"
    assert together + sum(limits[n] for n in alone) <= check.BUDGET["full"] == 360
    # the checks run at once, first; the optional rows come last and run only within what
    # is left (see the test below)
    assert list(check.PLAN)[: len(check.CONCURRENT_STEPS)] == list(check.CONCURRENT_STEPS)
    assert list(check.PLAN)[-len(check.OPTIONAL_STEPS) :] == list(check.OPTIONAL_STEPS)
    assert list(check.STEP_LIMITS) == list(check.PLAN)
    # a start (up to 80 s), the call and the optional rows' call fit the 900 s of a loan
    only = call.OPTIONAL_CALL.split("--only ")[1].split()
    assert set(only) <= set(check.OPTIONAL_STEPS)
    assert sum(limits[n] for n in only) + 25 < call.OPTIONAL_CALL_TIMEOUT  # and the install
    assert check.BUDGET["full"] + 25 < call.CALL_TIMEOUT <= 900 - 80 - 240  # a restart fits
    assert 80 + call.CALL_TIMEOUT + call.OPTIONAL_CALL_TIMEOUT <= 900


def bundle_args(tmp_path: Path, bundle: Path) -> argparse.Namespace:
    """``prepare``'s arguments with a data folder and a model folder under ``tmp_path``."""
    (tmp_path / "data" / "senteval").mkdir(parents=True, exist_ok=True)
    (tmp_path / "models" / "all-MiniLM-L6-v2").mkdir(parents=True, exist_ok=True)
    return argparse.Namespace(
        data_dir=tmp_path / "data", models_dir=tmp_path / "models", dist=None, bundle=bundle
    )


def test_the_bundle_replaces_only_a_folder_it_wrote(call, tmp_path: Path) -> None:
    users = tmp_path / "mine"
    users.mkdir()
    (users / "notes.txt").write_text("keep", encoding="utf-8")
    with pytest.raises(call.PrepareError, match="holds files sts-core did not write"):
        call.check_files(bundle_args(tmp_path, users))
    assert (users / "notes.txt").read_text(encoding="utf-8") == "keep"
    ours = tmp_path / "bundle"
    with call.staged_bundle(ours) as staging:
        (staging / "wheels" / "old.whl").write_bytes(b"x")
    call.check_files(bundle_args(tmp_path, ours))  # a bundle it wrote: replaced
    with call.staged_bundle(ours) as staging:
        (staging / "data.tar.gz").write_bytes(b"new")
    assert not (ours / "wheels" / "old.whl").exists() and (ours / call.MARKER).is_file()
    assert (ours / "data.tar.gz").read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "data", "mine", "models"]


def test_a_bundle_that_fails_half_way_leaves_the_earlier_one(call, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    with call.staged_bundle(bundle) as staging:
        (staging / "wheels" / "earlier.whl").write_bytes(b"x")
    with pytest.raises(call.PrepareError), call.staged_bundle(bundle) as staging:
        (staging / "data.tar.gz").write_bytes(b"half")
        raise call.PrepareError("over the limit")
    assert (bundle / "wheels" / "earlier.whl").is_file() and not (bundle / "data.tar.gz").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]  # no staging folder left


def test_the_bundle_carries_the_tokenizer_without_the_weights(call, tmp_path: Path) -> None:
    model = tmp_path / "models" / call.MODEL
    model.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "vocab.txt", "model.safetensors", "x.bin"):
        (model / name).write_text("{}", encoding="utf-8")
    (model / "1_Pooling").mkdir()
    (model / "1_Pooling" / "config.json").write_text("{}", encoding="utf-8")
    target = tmp_path / "bundle" / call.MODEL
    call.copy_tokenizer(tmp_path / "models", target)
    copied = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert copied == ["1_Pooling/config.json", "config.json", "tokenizer.json", "vocab.txt"]


def test_the_bundle_takes_the_locked_versions_of_what_the_gpu_machine_lacks(call) -> None:
    lock = (REPO / "uv.lock").read_text(encoding="utf-8")
    versions = call.locked_versions(call.MISSING_THERE)
    for name, version in versions.items():
        assert f'name = "{name}"\nversion = "{version}"\n' in lock
    with pytest.raises(call.PrepareError, match="no version of no-such-package"):
        call.locked_versions(("no-such-package",))


def test_prepare_checks_the_data_before_it_replaces_an_earlier_bundle(call, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    with call.staged_bundle(bundle) as staging:
        (staging / "wheels" / "earlier.whl").write_bytes(b"x")
    command = [sys.executable, str(REPO / "benchmarks" / "gpu_call.py"), "prepare"]
    command += ["--bundle", str(bundle), "--dist", str(tmp_path)]
    command += ["--data-dir", str(tmp_path / "none"), "--models-dir", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "none/senteval is not a folder: STS_DATA_DIR must name" in done.stderr
    assert (bundle / "wheels" / "earlier.whl").is_file()


def test_prepare_says_in_one_line_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "senteval").mkdir()
    (tmp_path / "all-MiniLM-L6-v2").mkdir()
    (tmp_path / "all-MiniLM-L6-v2" / "config.json").write_text("{}", encoding="utf-8")
    command = [sys.executable, str(REPO / "benchmarks" / "gpu_call.py"), "prepare"]
    command += ["--bundle", str(tmp_path / "b"), "--dist", str(tmp_path)]
    command += ["--data-dir", str(tmp_path), "--models-dir", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    expected = 1 + len(list(REPO.glob("packages/*/pyproject.toml")))  # sts-core, each package
    assert done.stderr.strip().splitlines() == [
        f"error: expected {expected} project wheels (sts-core and one for each package under "
        "packages/), found []"
    ]


def test_the_gpu_script_refuses_to_run_without_its_bundle(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "STS_GPU_BUNDLE": str(tmp_path / "none")}
    script = REPO / "benchmarks" / "gpu_check.sh"
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 2
    assert "run 'uv run python benchmarks/gpu_call.py prepare' and carry it" in done.stderr


def test_the_budget_is_360_seconds_on_a_gpu_unless_given(check) -> None:
    assert check.parse_args([]).budget == 360
    assert check.parse_args(["--device", "cpu", "--smoke"]).budget == 1800
    assert check.parse_args(["--budget", "90"]).budget == 90


def test_a_step_cut_off_takes_its_workers_with_it(check, tmp_path: Path) -> None:
    """The first H200 call's train step was cut off while its worker process trained on: the
    worker (a child of the step's script) is ended with the step."""
    pid_file = tmp_path / "worker.pid"
    script = (
        "import subprocess, sys, time; "
        "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        f"open({str(pid_file)!r}, 'w').write(str(w.pid)); print('started', flush=True); "
        "time.sleep(120)"
    )
    result = check.run([sys.executable, "-c", script], argparse.Namespace(limit=3))
    assert result["status"] == "failed" and "started" in result["output_tail"]
    pid = int(pid_file.read_text())
    worker = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive(worker):
        time.sleep(0.1)
    left = alive(worker)
    if left:
        os.kill(pid, signal.SIGKILL)  # not left behind by a failing test
    assert not left


def alive(stat: Path) -> bool:
    """Whether the process of ``/proc/<pid>/stat`` runs (an ended one may stay a zombie)."""
    try:
        return stat.read_text().split()[2] != "Z"
    except OSError:
        return False


def test_the_runs_file_is_replaced_whole(tmp_path: Path, monkeypatch) -> None:
    """A run's summary is written to a file beside it and moved over the runs file, so a kill
    mid-write leaves the runs before it readable."""
    common = load_benchmark_script("_common")
    runs_file = tmp_path / "runs.json"
    common.save_runs_so_far(runs_file, "runs", {"ours": [{"throughput": 1.0}]})
    written: list[str] = []

    def replace(source, target):
        written.append(json.loads(Path(source).read_text(encoding="utf-8"))["runs"]["ours"])
        raise KeyboardInterrupt  # killed before the move

    monkeypatch.setattr(command_files.OPS, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        common.save_runs_so_far(runs_file, "runs", {"ours": [{"throughput": 1.0}, {"x": 2}]})
    assert json.loads(runs_file.read_text(encoding="utf-8"))["runs"]["ours"] == [
        {"throughput": 1.0}
    ]
    assert written == [[{"throughput": 1.0}, {}]]  # the new content went to the side file


def test_a_decoder_step_reports_the_training_forward_its_run_logged(check) -> None:
    # the second H200 call: auto took varlen for the decoder and the kernel refused float32
    logged = (
        "INFO sts_core.encoder: training forward: padded (the torch varlen kernel computes in "
        "fp16 or bf16 only (bf16: true))\n{'loss': '3.431'}"
    )
    found = check.TRAINING_FORWARD.search(logged)
    step = {"status": "passed", "path": found.group(1)}
    lines = check.paths_markdown({"lora-bf16": step, "cuda-tests": {"status": "passed"}})
    assert lines[-1] == (
        "- lora-bf16: padded (the torch varlen kernel computes in fp16 or bf16 only (bf16: true))"
    )
    assert check.paths_markdown({"cuda-tests": {"status": "passed"}}) == []
