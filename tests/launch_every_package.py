"""Several packages' ``train.py`` runs in one launch: each process calls each package's
``main(["--config", recipe])`` in turn, as ``accelerate launch packages/<m>/train.py``
would in a process of its own (test_launch.py: one interpreter start for every package
under a config instead of one per package, ~25 s each on two cores).

Between two runs the default process group stays open (a barrier instead of ``cli_main``'s
closing, which the last run does) and accelerate's state is reset, so each run's
``Accelerator`` takes its own settings (DeepSpeed's batch sizes from its recipe) as in a
fresh process. The runs stop at the first that fails; ``STATUS`` records each run's exit
status by package, for the tests to report the one that failed.

    python launch_every_package.py RUNS.json   # [[package_dir, recipe], ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist
from accelerate.state import AcceleratorState

import sts_core.training.run as run_module
from sts_core.distributed import close_process_group, is_main_process
from sts_core.testing import load_train_script

STATUS = "status.json"  # beside RUNS.json: {package name: exit status}, written by rank 0


def barrier_only(wait_for_others: bool = False) -> None:
    """``cli_main``'s end between two runs: every process waits for the others (after a run
    that succeeded), the group stays open for the next run."""
    if wait_for_others and dist.is_initialized():
        dist.barrier()


def run_each(runs: list[tuple[str, str]], status_file: Path) -> int:
    statuses: dict[str, int] = {}
    status = 0
    run_module.close_process_group = barrier_only
    try:
        for package, recipe in runs:
            status = load_train_script(Path(package)).main(["--config", recipe])
            statuses[Path(package).name] = status
            if is_main_process():
                status_file.write_text(json.dumps(statuses), encoding="utf-8")
            if status != 0:
                break
            AcceleratorState._reset_state()  # the next run's Accelerator: its own settings
    finally:
        run_module.close_process_group = close_process_group
        close_process_group(wait_for_others=status == 0)
    return status


if __name__ == "__main__":
    spec = Path(sys.argv[1])
    sys.exit(run_each(json.loads(spec.read_text(encoding="utf-8")), spec.with_name(STATUS)))
