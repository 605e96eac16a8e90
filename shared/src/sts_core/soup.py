"""``sts-soup``: average the weights of several fine-tuned runs into one model.

A uniform model soup (Wortsman et al., 2022, "Model soups: averaging weights of multiple
fine-tuned models improves accuracy without increasing inference time"): θ = (1/n) Σᵢ θᵢ
over runs that started from the same model — typically one recipe trained with other
seeds. The result is one model of the same size, saved like any trained model::

    sts-soup runs/seed0 runs/seed1 runs/seed2 --output runs/soup

Every input is checked before any weights are averaged: each is a complete saved model,
the runs agree on pooling, prompt, length and normalisation, and the output is a new or
empty folder (``--overwrite`` replaces a model saved there). The weights must match key
for key and shape for shape (:func:`sts_core.training.averaging.average_state_dicts`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sts_core.cli import _fail

ENCODER_SETTINGS = ("pooling", "prompt", "max_length", "normalize")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sts-soup", description=__doc__.split("\n\n")[0].split(": ", 1)[1]
    )
    parser.add_argument("models", nargs="+", help="saved model folders (two or more)")
    parser.add_argument("--output", required=True, help="folder to save the averaged model")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a model already saved in --output"
    )
    return parser


def check_inputs(models: Sequence[str], output: str, overwrite: bool) -> list[str]:
    """The model folders, checked; the output folder, checked (nothing is loaded)."""
    from sts_core.encoder import check_model_location

    if len(models) < 2:
        raise ValueError(f"a soup averages two or more models, got {len(models)}")
    locations = [check_model_location(model) for model in models]
    resolved = [Path(location).resolve() for location in locations]
    repeated = sorted({str(p) for p in resolved if resolved.count(p) > 1})
    if repeated:
        raise ValueError(f"model {repeated[0]} is given more than once")
    target = Path(output).expanduser()
    if target.resolve() in resolved:
        raise ValueError(f"--output {target} is one of the models: write the soup elsewhere")
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"--output {target} is a file, not a folder")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise FileExistsError(
            f"--output {target} is not empty: choose a new folder or pass --overwrite"
        )
    return locations


def load_models(locations: Sequence[str]) -> list[Any]:
    """The encoders; refused when their settings (pooling, prompt, …) disagree."""
    from sts_core.encoder import SentenceEncoder

    encoders = [SentenceEncoder.from_pretrained(location) for location in locations]
    first = {key: getattr(encoders[0], key) for key in ENCODER_SETTINGS}
    for location, encoder in zip(locations[1:], encoders[1:], strict=True):
        settings = {key: getattr(encoder, key) for key in ENCODER_SETTINGS}
        different = [key for key in ENCODER_SETTINGS if settings[key] != first[key]]
        if different:
            key = different[0]
            raise ValueError(
                f"{location}: {key} {settings[key]!r} differs from {locations[0]}'s "
                f"{first[key]!r}: a soup averages runs of one recipe"
            )
    return encoders


def soup(locations: Sequence[str], output: str) -> Path:
    """Average the models at ``locations`` and save the result in ``output``."""
    from sts_core.training.averaging import average_state_dicts

    encoders = load_models(locations)
    state = average_state_dicts([e.state_dict() for e in encoders], list(locations))
    merged = encoders[0]
    merged.load_state_dict(state)
    merged.save_pretrained(output)
    return Path(output)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sts-soup``: exit 0 with the soup saved, 2 with one line on stderr."""
    args = make_parser().parse_args(argv)
    try:
        locations = check_inputs(args.models, args.output, args.overwrite)
        folder = soup(locations, args.output)
    except (OSError, ValueError) as error:
        return _fail("sts-soup", error)
    print(f"averaged {len(locations)} models into {folder}")
    return 0
