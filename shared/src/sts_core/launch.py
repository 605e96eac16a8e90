"""``sts-launch``: ``accelerate launch`` that checks the run first and fails in one line.

``sts-launch [accelerate launch options] packages/<m>/train.py --config <recipe>.yaml``
takes exactly the options of ``accelerate launch``; instead of a script, the name of an
installed method (``sts-launch mymethod --config <recipe>.yaml``: entry-point group
``sts_core.methods``) launches ``python -m sts_core.training.run --method mymethod``.
Before any process starts, it checks the launch settings (the ``--config_file`` exists and
reads as an accelerate config; machine rank, machine count, process count and port, each
the flag's value or else the config file's, as accelerate merges them; FSDP only where
there is an accelerator) and runs the training script's own checks in this process (the
script's ``main`` with ``--check_only true``: arguments, model folder, data, output
folder), so a bad input is one line (``sts-launch: error: …`` or ``error: …``) and exit
status 2. A run that asks for ``check_only`` itself stops there: checked once, nothing
launched. A name that is neither a file nor an installed method is refused listing the
installed methods. When a launched process fails later, it prints one line naming the exit
status (the process's own message is above it) instead of the launcher's traceback, and
exits with that status.

``accelerate launch`` itself works too: each process still stops before training with the
one-line error and exit status 2, but the launcher adds its own traceback and exits 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sts_core.command_files import on_interrupt

if TYPE_CHECKING:
    from accelerate.commands.config.config_args import BaseConfig as AccelerateConfig


def load_script_main(script: Path) -> Callable[[list[str]], int] | None:
    """The ``main(argv)`` of a training script, imported by path (None if it has none)."""
    spec = importlib.util.spec_from_file_location(f"_sts_launch_{script.stem}", script)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, "main", None)


def check_script(script: Path, script_args: list[str]) -> int:
    """Run the script's checks here (``--check_only true``); its exit status."""
    main = load_script_main(script)
    if main is None:
        print(f"sts-launch: {script} has no main(argv): launching without checks", file=sys.stderr)
        return 0
    return int(main([*script_args, "--check_only", "true"]) or 0)


def asks_check_only(script_args: Sequence[str]) -> bool:
    """Whether the run asks for ``check_only`` (the last ``--check_only`` flag, else the
    recipe's key): the checks run here before any launch are then the whole run, and no
    process is started to run them again. Called after those checks passed, so the recipe
    reads and the values are valid."""

    from transformers.hf_argparser import string_to_bool

    from sts_core.training.parser import ConfigError, read_recipe

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config")
    pre.add_argument("--check_only", nargs="?", const="true")  # a bare flag means true
    known, _ = pre.parse_known_args(list(script_args))
    value = known.check_only
    if value is None and known.config:
        try:
            value = read_recipe(known.config).get("check_only")
        except ConfigError:  # the script's own checks read it otherwise: they are the judge
            return False
    return bool(string_to_bool(value) if isinstance(value, str) else value)


RUN_MODULE = "sts_core.training.run"


def looks_like_a_path(name: str) -> bool:
    """``name`` names a file (a suffix or a folder in it), not a method."""
    return bool(Path(name).suffix) or "/" in name or "\\" in name


def method_named(name: str) -> str | None:
    """``name`` when it is an installed method's (not a path), else None;
    :class:`~sts_core.training.method_registry.MethodDeclarationError` when two installed
    distributions declare it."""
    if looks_like_a_path(name):
        return None
    from sts_core.training.method_registry import installed_method

    return name if installed_method(name) is not None else None


def not_found(name: str) -> str:
    """Why ``name`` cannot be launched: no such script, and (a bare name) no such method,
    with the installed methods listed."""
    if looks_like_a_path(name):
        return f"training script {name} not found"
    from sts_core.training.method_registry import installed_method_names

    return (
        f"{name!r} is neither an installed method (installed: "
        f"{', '.join(installed_method_names())}) nor a training script (no file {name})"
    )


def config_file_in_use(args: argparse.Namespace) -> str | None:
    """The accelerate config file ``accelerate launch`` reads: ``--config_file``, else
    accelerate's default file when it exists (not with ``--cpu``), else None."""
    if args.config_file is not None:
        return str(args.config_file)
    from accelerate.commands.config.config_args import default_config_file

    return default_config_file if Path(default_config_file).is_file() and not args.cpu else None


def read_accelerate_config(path: str, label: str) -> AccelerateConfig:
    """The accelerate config at ``path`` as accelerate reads it; ValueError (one line naming
    it by ``label``) when it is missing or cannot be read."""
    import yaml
    from accelerate.commands.config.config_args import load_config_from_file

    if not Path(path).is_file():
        what = "a folder" if Path(path).is_dir() else "not found"
        raise ValueError(f"{label} {path}: {what} (an accelerate config file is needed)")
    try:
        return load_config_from_file(path)
    except (OSError, ValueError, TypeError, AttributeError, yaml.YAMLError) as error:
        message = " ".join(str(error).split())
        raise ValueError(f"{label} {path}: not a readable accelerate config: {message}") from error


def merged_setting(
    args: argparse.Namespace, config: AccelerateConfig | None, path: str | None, name: str
) -> tuple[Any, str]:
    """A launch setting as ``accelerate launch`` takes it: the flag's value when given, else
    the config file's (a local-machine config), else None; with where it came from."""
    value = getattr(args, name, None)
    if value is not None or config is None or not is_local_machine(config):
        return value, f"--{name}"
    return getattr(config, name, None), f"{name} in {path}"


def is_local_machine(config: AccelerateConfig) -> bool:
    from accelerate.utils import ComputeEnvironment

    return config.compute_environment == ComputeEnvironment.LOCAL_MACHINE


def check_launch_settings(args: argparse.Namespace) -> None:
    """ValueError (one line naming the flag or the config file's key) when the launch
    cannot run as asked, before any process starts: a missing or unreadable config file, a
    machine rank outside ``0 … num_machines − 1``, a port outside ``0 … 65535`` (0 picks a
    free one: on one machine only), a process count below 1 or not a multiple of the
    machine count, or FSDP on a machine without an accelerator."""
    path = config_file_in_use(args)
    label = "--config_file" if args.config_file is not None else "accelerate's default config"
    config = read_accelerate_config(path, label) if path is not None else None
    machines, machines_from = merged_setting(args, config, path, "num_machines")
    machines = 1 if machines is None else machines
    whole_number(machines, machines_from, lowest=1)
    rank, rank_from = merged_setting(args, config, path, "machine_rank")
    if rank is not None:
        whole_number(rank, rank_from, lowest=0)
        if rank >= machines:
            raise ValueError(
                f"{rank_from} is {rank}, but {machines_from} is {machines}: a machine's rank "
                f"is 0 … {machines - 1}"
            )
    port, port_from = merged_setting(args, config, path, "main_process_port")
    if port is not None:
        whole_number(port, port_from, lowest=1 if machines > 1 else 0, highest=65535)
    processes, processes_from = merged_setting(args, config, path, "num_processes")
    if processes is not None:
        whole_number(processes, processes_from, lowest=1)
        if processes % machines:
            raise ValueError(
                f"{processes_from} is {processes}, not a multiple of {machines_from} "
                f"{machines}: it counts the processes of all machines, the same on each"
            )
    check_fsdp(args, config, path)


def whole_number(value: Any, source: str, lowest: int, highest: int | None = None) -> None:
    """ValueError unless ``value`` is an integer in ``lowest … highest``."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= lowest
    if ok and (highest is None or value <= highest):
        return
    bounds = f"from {lowest} to {highest}" if highest is not None else f"≥ {lowest}"
    raise ValueError(f"{source} must be a whole number {bounds}, got {value!r}")


def check_fsdp(args: argparse.Namespace, config: AccelerateConfig | None, path: str | None) -> None:
    """ValueError when the launch asks for FSDP (``--use_fsdp``, or a config file of
    ``distributed_type: FSDP`` without another type given) on a machine without an
    accelerator: accelerate would train every process as plain DDP (exit 0), and each
    process would only stop after the launch (``BaseConfig`` refuses it too)."""
    from accelerate.utils import DistributedType

    from sts_core.training.config import FSDP_NEEDS_AN_ACCELERATOR, accelerator_available

    types = ("multi_gpu", "tpu", "use_deepspeed", "use_megatron_lm")
    from_file = (
        config is not None
        and not any(getattr(args, name, False) for name in types)
        and config.distributed_type == DistributedType.FSDP
    )
    if (args.use_fsdp or from_file) and not args.cpu and not accelerator_available():
        source = "--use_fsdp" if args.use_fsdp else f"distributed_type FSDP in {path}"
        raise ValueError(f"{source}: {FSDP_NEEDS_AN_ACCELERATOR}")


def launch_method(args: argparse.Namespace, method: str) -> int:
    """Check, then launch, the method ``method`` through :data:`RUN_MODULE` (``-m``)."""
    from sts_core.training.run import main as run_main

    script_args = ["--method", method, *args.training_script_args]
    status = int(run_main([*script_args, "--check_only", "true"]) or 0)
    if status != 0 or asks_check_only(script_args):
        return status
    args.module, args.training_script, args.training_script_args = True, RUN_MODULE, script_args
    return launch(args)


def launch(args: object) -> int:
    """``accelerate launch`` with ``args``; the first failed process's exit status."""
    from accelerate.commands.launch import launch_command
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    os.environ["STS_LAUNCHED"] = "1"  # the processes end when this one is killed
    try:
        launch_command(args)
    except subprocess.CalledProcessError as error:
        return _failed(error.returncode, "the training process")
    except ChildFailedError as error:
        rank, failure = error.get_first_failure()
        return _failed(failure.exitcode, f"the training process of rank {rank}")
    except SignalException as error:  # the elastic agent's Ctrl-C (SIGINT) or SIGTERM
        print(
            f"sts-launch: interrupted ({signal_name(error.sigval)}): the training processes "
            "were stopped (the main one says above what it kept)",
            file=sys.stderr,
        )
        return 128 + int(error.sigval)
    return 0


def signal_name(value: int) -> str:
    """``Ctrl-C`` for SIGINT, else the signal's name (``SIGTERM``)."""
    return "Ctrl-C" if value == signal.SIGINT else signal.Signals(value).name


def _failed(status: int, who: str) -> int:
    status = status if status and status > 0 else 1
    print(
        f"sts-launch: error: {who} exited with status {status} (its message is above)",
        file=sys.stderr,
    )
    return status


@on_interrupt("sts-launch")
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sts-launch``."""
    from accelerate.commands.launch import launch_command_parser

    parser = launch_command_parser()
    parser.prog = "sts-launch"
    parser.description = __doc__.split("\n\n")[1]
    args = parser.parse_args(argv)
    script = Path(args.training_script)
    try:
        check_launch_settings(args)
        method = None if script.is_file() else method_named(args.training_script)
    except ValueError as error:  # a ConfigError too: a method two distributions declare
        print(f"sts-launch: error: {error}", file=sys.stderr)
        return 2
    if method is not None:
        return launch_method(args, method)
    if not script.is_file():
        print(f"sts-launch: error: {not_found(args.training_script)}", file=sys.stderr)
        return 2
    status = check_script(script, list(args.training_script_args))
    if status != 0 or asks_check_only(args.training_script_args):
        return status
    return launch(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
