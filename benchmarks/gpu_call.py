"""Prepare the one call the lent GPU machine gets: what travels with it, its size, the command.

The GPU machine has its own ``python3`` (torch, transformers, accelerate,
sentence-transformers, peft …), reaches no registry, and receives the working tree plus
the folders a call carries, 64 MiB in all. This builds that folder, ``.gpu-call/`` (git
ignores it):

- ``wheels/``: the project wheels, sts-core's and each package's (so the test support, the
  methods' entry points and the package metadata exist there), the third-party wheels its
  image lacks (``datasets`` with ``dill`` and ``multiprocess``) and, when they fit, the
  optional ones (bitsandbytes for the QLoRA step);
- ``data.tar.gz``: the benchmark data the steps read (``senteval/`` of ``STS_DATA_DIR``);
- ``models/all-MiniLM-L6-v2``: its tokenizer and config, without the weights (the GPU
  steps train and encode a random-weight BERT-base with that tokenizer);
- ``models/SmolLM2-135M-Instruct``, when ``STS_MODELS_DIR`` has it: its config and
  tokenizer, without the weights (the ``train-decoder`` row builds a random-weight decoder
  of that config; without it the row is skipped there).

The bundle is built beside ``--bundle`` and replaces it whole once complete; a folder there
that this script did not write (its ledger, ``.sts-outputs.json``, lists each entry) is
refused before anything is built. It prints the size of what is sent and the exact call;
``benchmarks/gpu_check.sh`` runs there. ``uv run python benchmarks/gpu_call.py prepare``
(``--dist DIR`` takes wheels already built there instead of building them).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import _common as common

from sts_core import command_files as files
from sts_core.saving import publish_folder

REPO = Path(__file__).resolve().parents[1]
#: written last into a complete bundle (gpu_check.sh runs only with it); which folder is
#: this script's, and may be replaced, its ledger says (:func:`check_files`)
MARKER = ".sts-gpu-call"
SEND_LIMIT = 64 * 2**20  # what one device call may send: the working tree and the bundle
#: the GPU image lacks these third-party packages that sts-core needs (versions: uv.lock)
MISSING_THERE = ("datasets", "dill", "multiprocess")
#: optional wheels, most useful first: carried only while the call stays under the limit
OPTIONAL = {"bitsandbytes": "the qlora-4bit step"}
#: never carried, and why
LEFT_OUT = {
    "faiss-gpu-cu12": "46 MiB, and it needs the CUDA 12 libraries (hundreds of MiB) where "
    "the machine has CUDA 13: the faiss-gpu step is skipped there",
}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64")  # fmt: skip
MODEL = "all-MiniLM-L6-v2"
#: carried without its weights when the models folder has it (the train-decoder row)
DECODER_MODEL = "SmolLM2-135M-Instruct"
PROJECT_WHEELS = "sts_*-py3-none-any.whl"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".h5", ".msgpack", ".ot")
#: seconds the call may run there: the check's budget (360), the install (about 25 s on the
#: H200 of 2026-11-27) and a margin; with a start of 40–80 s that is about 500 of the 900,
#: which leaves the optional rows' call (:data:`OPTIONAL_CALL`, about 300 s) its time
CALL_TIMEOUT = 420
#: the second call of a loan: the optional rows that fit one check's budget (270 of 360 s),
#: with the install and a margin
OPTIONAL_CALL = "bash benchmarks/gpu_check.sh --only train-512 train-decoder encode-decoder"
OPTIONAL_CALL_TIMEOUT = 330


#: a setup problem, reported as one line with exit status 2 (``common.main_guard``)
PrepareError = common.BenchmarkError


def locked_versions(names: tuple[str, ...]) -> dict[str, str]:
    """The versions ``uv.lock`` holds for ``names`` (the ones CI tests)."""
    text = (REPO / "uv.lock").read_text(encoding="utf-8")
    pairs = re.findall(r'^name = "([^"]+)"\nversion = "([^"]+)"$', text, re.M)
    found = {name: version for name, version in pairs if name in names}
    missing = sorted(set(names) - set(found))
    if missing:
        raise PrepareError(f"uv.lock holds no version of {', '.join(missing)}")
    return found


def pip_command() -> list[str]:
    """A pip that can download: this Python's, else uv's ``uvx pip`` (uv's venvs hold no
    pip)."""
    probe = [sys.executable, "-m", "pip", "--version"]
    if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
        return [sys.executable, "-m", "pip"]
    if shutil.which("uvx"):
        return ["uvx", "pip"]
    raise PrepareError("no pip to download wheels with: install pip or uv")


def download(requirements: list[str], folder: Path, python_version: str) -> None:
    """Binary wheels for the GPU machine's Python, without their dependencies."""
    command = [*pip_command(), "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", python_version, "--implementation", "cp", "-d", str(folder)]
    command += [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    done = subprocess.run([*command, *requirements], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PrepareError(f"pip download {' '.join(requirements)}: {done.stderr.strip()[-500:]}")


def project_wheels(folder: Path, dist: Path | None) -> list[Path]:
    """The project wheels, sts-core's and each package's (``packages/*``): copied from
    ``dist`` or built with ``uv build``."""
    if dist is None:
        command = ["uv", "build", "--all-packages", "--wheel", "--quiet", "--out-dir", str(folder)]
        subprocess.run(command, cwd=REPO, check=True)
    else:
        for wheel in sorted(dist.glob(PROJECT_WHEELS)):
            shutil.copy(wheel, folder)
    wheels = sorted(folder.glob(PROJECT_WHEELS))
    expected = 1 + len(list(REPO.glob("packages/*/pyproject.toml")))
    if len(wheels) != expected:
        raise PrepareError(
            f"expected {expected} project wheels (sts-core and one for each package under "
            f"packages/), found {[w.name for w in wheels]}"
        )
    return wheels


def pack_data(data_dir: Path, target: Path) -> None:
    source = data_dir / "senteval"
    with tarfile.open(target, "w:gz") as archive:
        archive.add(source, arcname="senteval")


def copy_tokenizer(models_dir: Path, target: Path, name: str = MODEL) -> None:
    """The model folder ``name`` without its weights: config and tokenizer files only."""
    source = models_dir / name
    shutil.copytree(source, target, ignore=lambda _, names: [
        n for n in names if n.endswith(WEIGHT_SUFFIXES) or n == ".gitattributes"
    ])  # fmt: skip


def tree_bytes() -> int:
    """What the device tool sends of the checkout: tracked and untracked, not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    return sum((REPO / p).stat().st_size for p in listed if p and (REPO / p).is_file())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def check_files(args: argparse.Namespace) -> None:
    """What ``prepare`` reads (the data's ``senteval/``, the model folder, the wheels of
    ``--dist``) and writes (``--bundle``: new, or a bundle this script wrote, which it
    replaces whole; a folder holding anything else is refused), declared and checked
    before anything is built."""
    declared = common.ScriptFiles("gpu_call.py", data=False)
    declared.reads("--data-dir", args.data_dir / "senteval")
    declared.reads("--models-dir", args.models_dir / MODEL)
    if has_decoder(args.models_dir):
        declared.reads("--models-dir", args.models_dir / DECODER_MODEL)
    for wheel in sorted(args.dist.glob(PROJECT_WHEELS)) if args.dist else ():
        declared.reads("--dist", wheel)
    declared.writes("--bundle", args.bundle, kind="folder")
    declared.check()


@contextlib.contextmanager
def staged_bundle(bundle: Path) -> Iterator[Path]:
    """A new bundle built in a staging folder beside ``bundle`` (``wheels/`` made): when the
    block ends, each of its entries is recorded in its ledger (so a later ``prepare`` knows
    the folder as its own), :data:`MARKER` is written last, and the folder replaces
    ``bundle`` whole (:func:`sts_core.saving.publish_folder`: the old bundle, the new one or
    none, never a mix). An error in the block leaves ``bundle`` as it was."""
    staging = files.temporary_name(bundle)  # git ignores it: never sent with a call
    (staging / "wheels").mkdir(parents=True)
    try:
        yield staging
        for entry in sorted(staging.iterdir()):
            kind = "folder" if entry.is_dir() else "file"
            files.record_output(entry, kind)
        files.write_text(staging / MARKER, "written by benchmarks/gpu_call.py prepare\n")
        publish_folder(staging, bundle)
    finally:
        files.remove_path(staging)


def has_decoder(models_dir: Path) -> bool:
    return (models_dir / DECODER_MODEL / "config.json").is_file()


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def check_inputs(data_dir: Path, models_dir: Path) -> None:
    """The data and the model folder exist, before an earlier bundle is replaced."""
    if not (data_dir / "senteval").is_dir():
        raise PrepareError(
            f"{data_dir / 'senteval'} is not a folder: STS_DATA_DIR must name the data folder"
        )
    if not (models_dir / MODEL / "config.json").is_file():
        raise PrepareError(
            f"{models_dir / MODEL} is not a model folder: STS_MODELS_DIR must name them"
        )


def prepare(args: argparse.Namespace) -> int:
    bundle = args.bundle.resolve()
    check_inputs(args.data_dir, args.models_dir)
    check_files(args)
    with staged_bundle(bundle) as staging:
        report(staging, bundle, *build(args, staging))  # over the limit: none published
    return 0


def build(args: argparse.Namespace, bundle: Path) -> tuple[int, list[str], dict[str, str]]:
    """Fill the (staged) ``bundle``: the wheels, the data, the tokenizer, the optional
    wheels that fit; the working tree's size, what was carried and what was left out."""
    wheels = bundle / "wheels"
    project_wheels(wheels, args.dist)
    needed = locked_versions(MISSING_THERE)
    download([f"{n}=={v}" for n, v in needed.items()], wheels, args.python_version)
    pack_data(args.data_dir, bundle / "data.tar.gz")
    copy_tokenizer(args.models_dir, bundle / "models" / MODEL)
    carried, left_out = [], dict(LEFT_OUT)
    if has_decoder(args.models_dir):
        copy_tokenizer(args.models_dir, bundle / "models" / DECODER_MODEL, DECODER_MODEL)
    else:
        left_out[DECODER_MODEL] = "not in the models folder: the train-decoder row is skipped"
    tree = tree_bytes()
    for name, why in OPTIONAL.items():
        scratch = bundle / f".{name}"
        scratch.mkdir()
        download([f"{name}=={locked_versions((name,))[name]}"], scratch, args.python_version)
        if tree + folder_bytes(bundle) <= SEND_LIMIT:
            carried.append(f"{name} ({mib(folder_bytes(scratch))}, for {why})")
            for wheel in scratch.iterdir():
                wheel.rename(wheels / wheel.name)
        else:
            left_out[name] = f"{mib(folder_bytes(scratch))}: over the {mib(SEND_LIMIT)} limit"
        shutil.rmtree(scratch)
    return tree, carried, left_out


def report(
    staging: Path, bundle: Path, tree: int, carried: list[str], left_out: dict[str, str]
) -> None:
    """What the call sends (its size against the limit: PrepareError over it) and the call
    itself; ``staging`` holds what becomes ``bundle``."""
    wheels = staging / "wheels"
    total = tree + folder_bytes(staging)
    print(f"bundle {bundle}: {mib(folder_bytes(staging))}")
    for wheel in sorted(wheels.iterdir()):
        print(f"  wheels/{wheel.name} ({mib(wheel.stat().st_size)})")
    print(f"  data.tar.gz ({mib((staging / 'data.tar.gz').stat().st_size)}): senteval/")
    for model in sorted(path.name for path in (staging / "models").iterdir()):
        print(f"  models/{model}: tokenizer and config, no weights")
    print("optional wheels carried: " + (", ".join(carried) or "none"))
    for name, why in left_out.items():
        print(f"left out: {name}: {why}")
    print(f"sent with the call: working tree {mib(tree)} + bundle "
          f"{mib(folder_bytes(staging))} = {mib(total)} of {mib(SEND_LIMIT)}")  # fmt: skip
    if total > SEND_LIMIT:
        raise PrepareError(f"{mib(total)} is over the device call's {mib(SEND_LIMIT)}")
    relative = bundle.relative_to(REPO) if bundle.is_relative_to(REPO) else bundle
    print("the call (device tool, run): "
          f'command="bash benchmarks/gpu_check.sh", carry=["{relative}"], '
          f"timeout_s={CALL_TIMEOUT}")  # fmt: skip
    print(f'then, in the same loan: command="{OPTIONAL_CALL}", carry=["{relative}"], '
          f"timeout_s={OPTIONAL_CALL_TIMEOUT}")  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="build .gpu-call/ and print the call")
    prep.add_argument("--bundle", type=Path, default=REPO / ".gpu-call")
    prep.add_argument("--dist", type=Path, help="take the project wheels from this folder")
    prep.add_argument("--python-version", default="3.12", help="the GPU machine's (3.12)")
    prep.add_argument("--data-dir", type=Path, default=os.environ.get("STS_DATA_DIR"))
    prep.add_argument("--models-dir", type=Path, default=os.environ.get("STS_MODELS_DIR"))
    args = parser.parse_args(argv)
    for name in ("data_dir", "models_dir"):
        if getattr(args, name) is None:
            parser.error(f"--{name.replace('_', '-')} (or STS_{name.upper()}) is needed")
    return args


def main(argv: list[str] | None = None) -> int:
    return prepare(parse_args(argv))


if __name__ == "__main__":
    common.main_guard(main)
