"""What the cross-package tests share: the packages' ``train.py`` scripts, a tiny recipe for
each, and ``accelerate launch`` run as a user runs it (a subprocess, free port, CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from sts_core.testing import free_port, write_fixture_recipe

REPO = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (REPO / "packages").iterdir() if (p / "train.py").is_file())
ACCELERATE_CONFIGS = REPO / "accelerate_configs"
FIXTURES = REPO / "shared" / "tests" / "fixtures" / "training"
TRAIN = FIXTURES / "sts-train.csv"  # 16 pairs in the STS-B format
DEV = FIXTURES / "sts-dev.csv"  # 8 pairs


def repository_settings(package: Path) -> dict[str, Any]:
    """What a method's folder says of it to the repository's tests and tools: the
    ``[tool.sts-repository]`` table of ``packages/<m>/pyproject.toml``."""
    with open(package / "pyproject.toml", "rb") as file:
        return tomllib.load(file).get("tool", {}).get("sts-repository", {})


def tiny_recipe_settings(package: Path) -> dict[str, str]:
    """Settings that make the package's train.py train a tiny model on the fixture pairs
    (``tiny_recipe``); each key of ``tiny_recipe_temp_dirs`` is a temporary folder shared
    by the test session."""
    settings = repository_settings(package)
    temp_dirs = {key: _session_dir(key) for key in settings.get("tiny_recipe_temp_dirs", ())}
    return {**settings.get("tiny_recipe", {}), **temp_dirs}


_SESSION_DIRS: dict[str, str] = {}


def _session_dir(key: str) -> str:
    if key not in _SESSION_DIRS:
        _SESSION_DIRS[key] = tempfile.mkdtemp(prefix=f"{key}-")
    return _SESSION_DIRS[key]


# Each method's settings, read from its folder (a new package declares them there;
# test_every_package_has_a_tiny_recipe checks that it did).
TINY_RECIPE_SETTINGS: dict[str, dict[str, str]] = {
    package.name: tiny_recipe_settings(package) for package in PACKAGES
}
# What makes a package's loss over a batch split across processes the loss of the whole
# batch (test_launch.py checks that two processes take the step of one): ``whole_batch``.
WHOLE_BATCH_SETTINGS: dict[str, dict[str, str]] = {
    package.name: repository_settings(package).get("whole_batch", {}) for package in PACKAGES
}


def write_tiny_recipe(
    path: Path, package: str, model: Path, output_dir: Path, **overrides: str
) -> Path:
    """A recipe for ``package`` on the fixture pairs (batch 4: 4 steps an epoch in one
    process); ``overrides`` replace or add lines (YAML text)."""
    settings = {
        "per_device_train_batch_size": "4",
        "final_eval_datasets": f"[{DEV}]",
        **TINY_RECIPE_SETTINGS[package],
        **overrides,
    }
    comment = f"{package} on the fixture pairs, tiny model"
    return write_fixture_recipe(path, comment, model, TRAIN, DEV, output_dir, **settings)


def subprocess_env() -> dict[str, str]:
    """The test's environment, one thread per process, no hub, no colour."""
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


def sts_launch(*args: str) -> subprocess.CompletedProcess:
    """``sts-launch ARGS`` (this environment's) from the repository root, as a user runs it."""
    command = [str(Path(sys.executable).with_name("sts-launch")), *args]
    return subprocess.run(
        command, cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=540
    )


def run_command(
    command: list[str], timeout: int = 540, check: bool = True
) -> subprocess.CompletedProcess:
    """``command`` run from the repository; an AssertionError with its output when it
    fails (``check``)."""
    result = subprocess.run(
        command, cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=timeout
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)}\nexit {result.returncode}\n{result.stdout[-4000:]}\n"
            f"{result.stderr[-8000:]}"
        )
    return result


def accelerate_launch(
    config_file: str, num_processes: int, script: Path, *script_args: str, check: bool = True
) -> subprocess.CompletedProcess:
    """``accelerate launch --config_file accelerate_configs/<config_file> ...`` from the repo
    (an AssertionError when it fails, unless not ``check``)."""
    accelerate = Path(sys.executable).with_name("accelerate")
    command = [
        str(accelerate),
        "launch",
        "--config_file",
        str(ACCELERATE_CONFIGS / config_file),
        "--num_processes",
        str(num_processes),
        "--main_process_port",
        str(free_port()),
        str(script),
        *script_args,
    ]
    return run_command(command, check=check)


EVERY_PACKAGE_DRIVER = Path(__file__).with_name("launch_every_package.py")


@dataclass(frozen=True)
class LaunchedRuns:
    """Packages' runs in one launch (:func:`launch_every_package`): each package's output
    folder, once its run ended with status 0 (else an AssertionError with the launch's
    output)."""

    config_file: str
    statuses: dict[str, int]
    launch: subprocess.CompletedProcess
    output_dirs: dict[str, Path]

    def output_dir(self, package: Path) -> Path:
        if self.statuses.get(package.name) != 0:
            raise AssertionError(
                f"{package.name} under {self.config_file}: exit status "
                f"{self.statuses.get(package.name, 'none (not run)')}\n"
                f"{self.launch.stdout[-4000:]}\n{self.launch.stderr[-8000:]}"
            )
        return self.output_dirs[package.name]

    def zero_stage(self) -> int:
        """The ZeRO stage a ``deepspeed_zero<stage>.yaml`` launch ran under."""
        return int(self.config_file.removeprefix("deepspeed_zero").removesuffix(".yaml"))


def launch_every_package(config_file: str, root: Path, recipes: dict[Path, Path]) -> LaunchedRuns:
    """``accelerate launch --config_file accelerate_configs/<config_file>`` on two processes
    of ``launch_every_package.py``, which runs each package's ``train.py`` main on its recipe
    in turn (one interpreter start for all); each recipe's output folder is
    ``root/<package name>``."""
    runs = root / "runs.json"
    pairs = [[str(package), str(recipe)] for package, recipe in recipes.items()]
    runs.write_text(json.dumps(pairs), encoding="utf-8")
    launch = accelerate_launch(config_file, 2, EVERY_PACKAGE_DRIVER, str(runs), check=False)
    status_file = root / "status.json"
    statuses = json.loads(status_file.read_text("utf-8")) if status_file.is_file() else {}
    if launch.returncode != 0 and all(status == 0 for status in statuses.values()):
        statuses = {}  # the launch itself failed: no run counts as passed
    output_dirs = {package.name: root / package.name for package in recipes}
    return LaunchedRuns(config_file, statuses, launch, output_dirs)


# Imported by Python at start-up on the second "machine" of the two-node test: records every
# directory made, file opened for writing and file renamed under $STS_AUDIT_DIR into
# $STS_AUDIT_LOG (the main process alone must write the output folder).
WRITE_AUDIT = """
import os, sys
_root, _log = os.environ["STS_AUDIT_DIR"], os.environ["STS_AUDIT_LOG"]
def _audit(event, args):
    if event in ("open", "os.mkdir", "os.rename", "os.remove", "shutil.rmtree"):
        path = str(args[0]) if args else ""
        mode = args[1] if event == "open" and len(args) > 1 else "w"
        writes = event != "open" or any(c in str(mode) for c in "wax+")
        if writes and path.startswith(_root):
            with open(_log, "a") as log:
                log.write(f"{os.getpid()} {event} {path}\\n")
sys.addaudithook(_audit)
"""


def audited_env(audit_dir: Path) -> dict[str, str]:
    """The test environment with :data:`WRITE_AUDIT` loaded at start-up, recording writes
    under ``audit_dir`` into ``audit_dir.parent / "machine1-writes.log"``."""
    hooks = audit_dir.parent / "machine1-hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(WRITE_AUDIT, encoding="utf-8")
    env = subprocess_env()
    env.update(
        PYTHONPATH=str(hooks),
        STS_AUDIT_DIR=str(audit_dir),
        STS_AUDIT_LOG=str(audit_dir.parent / "machine1-writes.log"),
    )
    return env


def launch_two_machines(
    audit_dir: Path, script: Path, *script_args: str
) -> list[subprocess.CompletedProcess]:
    """``accelerate_configs/multi_node.yaml`` as two machines of one process each, both on
    this host (127.0.0.1, gloo), launched at once; the second records its writes under
    ``audit_dir`` (:data:`WRITE_AUDIT`) into ``audit_dir.parent / "machine1-writes.log"``."""
    accelerate = Path(sys.executable).with_name("accelerate")
    port = str(free_port())
    launches = []
    for rank in (0, 1):
        command = [
            str(accelerate), "launch", "--config_file", str(ACCELERATE_CONFIGS / "multi_node.yaml"),
            "--num_machines", "2", "--num_processes", "2", "--machine_rank", str(rank),
            "--main_process_ip", "127.0.0.1", "--main_process_port", port,
            str(script), *script_args,
        ]  # fmt: skip
        env = audited_env(audit_dir) if rank == 1 else subprocess_env()
        launches.append(
            subprocess.Popen(
                command,
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
        )
    results = []
    for launch in launches:
        out, err = launch.communicate(timeout=540)
        results.append(subprocess.CompletedProcess(launch.args, launch.returncode, out, err))
    for result in results:
        assert result.returncode == 0, result.stderr[-6000:]
    return results


def largest_difference(a: dict, b: dict) -> float:
    """The largest absolute difference between two state dicts with the same keys."""
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def read_metrics(output_dir: Path) -> dict:
    return json.loads((output_dir / "metrics.json").read_text(encoding="utf-8"))
