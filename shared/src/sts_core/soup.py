"""``sts-soup``: average the weights of several fine-tuned runs into one model.

A uniform model soup (Wortsman et al., 2022, "Model soups: averaging weights of multiple
fine-tuned models improves accuracy without increasing inference time"): θ = (1/n) Σᵢ θᵢ
over runs that started from the same model — typically one recipe trained with other
seeds. The result is one model of the same size, saved like any trained model::

    sts-soup runs/seed0 runs/seed1 runs/seed2 --output runs/soup

Every input is checked before any weights are averaged: each is a complete saved model
(its files as the save wrote them), the runs' tokenizers map every token to the same id,
the runs agree on pooling, prompt, length and normalisation, and the output is a new or
empty folder (``--overwrite`` replaces a model sts-core saved there, and removes the
earlier model's results: ``metrics.json``, ``sts_results.json/.md``) that holds none of
the models. The weights must match key
for key and shape for shape, and are averaged as
:func:`sts_core.training.averaging.average_state_dicts` does (float tensors in float32,
integer buffers equal), one model at a time into a running float32 sum.

A LoRA adapter folder (``use_lora`` without ``merge_lora``) is averaged as the model it
stands for: its adapter merged into its base, W + s·B·A. Averaging ``lora_A`` and
``lora_B`` apart would give mean(B)·mean(A), not the mean of B·A, so the soup of adapter
runs is a full model (no adapter), exactly the average of the merged runs; adapter runs
and full models (a ``merge_lora`` save, say) mix the same way. Adapter folders over
different base models are refused before any weights load. ``sts_soup.json`` in the
output records the models averaged and which of them were merged adapters.

``sts-search --soup`` averages a pick's seeds the same way, but their embedding weights
only (:func:`embedding_soup`: the heads trained beside the encoder are left out).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sts_core.cli import fail
from sts_core.command_files import (
    CommandFiles,
    forget_output,
    on_interrupt,
    write_json,
    written_by_project,
)
from sts_core.options import ListOptionsParser

ENCODER_SETTINGS = ("pooling", "prompt", "max_length", "normalize")
SOUP_RECORD_NAME = "sts_soup.json"


def make_parser() -> argparse.ArgumentParser:
    parser = ListOptionsParser(
        prog="sts-soup",
        description="average the weights of several fine-tuned runs into one model.",
    )
    parser.add_argument("models", nargs="+", help="saved model folders (two or more)")
    parser.add_argument("--output", required=True, help="folder to save the averaged model")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a model already saved in --output"
    )
    parser.add_argument(
        "--base-model",
        metavar="PATH",
        help="the base model of LoRA adapter runs whose recorded base has moved",
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
    soup_files(locations, output, overwrite)
    return locations


def soup_files(locations: Sequence[str], output: str, overwrite: bool) -> CommandFiles:
    """What ``sts-soup`` reads (the models) and writes (``--output``, a folder that holds
    none of them, is in none of them, and holds nothing sts-core did not write: with
    ``--overwrite`` a model saved there before is replaced)."""
    files = CommandFiles("sts-soup", "--overwrite", overwrite)
    for location in locations:
        files.reads("model", location)
    files.writes("--output", output, kind="folder")
    files.check()
    return files


def check_tokenizers(locations: Sequence[str]) -> None:
    """ValueError naming both folders when a model's tokenizer maps a token to another id
    than the first model's (the same vocabulary size is not enough: averaged embedding rows
    would mix other words). Only the tokenizers are loaded."""
    from transformers import AutoTokenizer

    vocabularies = {}
    for location in locations:
        try:
            vocabularies[location] = AutoTokenizer.from_pretrained(location).get_vocab()
        except Exception as error:  # noqa: BLE001 - a tokenizer that cannot be read, named
            raise OSError(f"{location}: could not load its tokenizer: {error}") from error
    for location in locations[1:]:
        check_vocabulary(vocabularies[locations[0]], locations[0], vocabularies[location], location)


def check_vocabulary(
    reference: Mapping[str, int],
    reference_location: str,
    vocabulary: Mapping[str, int],
    location: str,
) -> None:
    """ValueError naming both models when ``vocabulary`` (token → id) is not
    ``reference``'s."""
    difference = _vocabulary_difference(reference, vocabulary)
    if difference:
        raise ValueError(
            f"{location}: its tokenizer differs from {reference_location}'s ({difference}): a "
            "soup averages runs of one base model and tokenizer"
        )


def _vocabulary_difference(reference: Mapping[str, int], other: Mapping[str, int]) -> str:
    """The first difference between two token → id mappings, in words ("" when equal)."""
    if reference == other:
        return ""
    for token, index in sorted(reference.items(), key=lambda item: item[1]):
        if other.get(token) != index:
            found = "no id" if token not in other else f"id {other[token]}"
            return f"token {token!r} has {found}, the first model's has id {index}"
    token = min(set(other) - set(reference))
    return f"token {token!r} has id {other[token]}, the first model has no such token"


def remove_earlier_results(output: Path) -> None:
    """Remove the results of the model saved in ``output`` before (``--overwrite``), as a
    training run does before it publishes its model: they would describe another model."""
    from sts_core.saving import remove_path
    from sts_core.training.output import RESULT_FILES

    for name in RESULT_FILES:
        if written_by_project(output / name):
            remove_path(output / name)
            forget_output(output / name)


def lora_bases(locations: Sequence[str], base_model: str | None = None) -> dict[str, str]:
    """The base model of each LoRA adapter folder among ``locations`` (nothing is loaded;
    ``base_model`` for all of them when given); ValueError when two adapters name
    different bases, FileNotFoundError naming ``--base-model`` when a base is missing."""
    from sts_core.encoder import LoRABaseModelError, is_adapter_folder, resolve_lora_base

    if base_model is not None and not any(is_adapter_folder(loc) for loc in locations):
        raise ValueError("--base-model is for LoRA adapter runs; none of the models is one")
    try:
        bases = {
            loc: resolve_lora_base(loc, base_model) for loc in locations if is_adapter_folder(loc)
        }
    except LoRABaseModelError as error:
        raise error.for_option("--base-model PATH to sts-soup") from error
    first = next(iter(bases), "")  # the loop below runs only when there is one
    for location, base in bases.items():
        if base != bases[first]:
            raise ValueError(
                f"{location}: a LoRA adapter over {base}, {first}'s is over {bases[first]}: "
                "a soup averages runs of one base model"
            )
    return bases


def load_model(location: str, base: str | None = None) -> Any:
    """The encoder saved at ``location``; a LoRA adapter folder comes merged into its base
    ``base`` (a plain backbone, W + s·B·A), so that its weights average as the model it is."""
    from sts_core.encoder import SentenceEncoder

    if base is None:
        return SentenceEncoder.from_pretrained(location)
    return SentenceEncoder.from_pretrained(location, base_model=base, merge_lora=True)


def check_settings(reference: Any, reference_location: str, encoder: Any, location: str) -> None:
    """ValueError when ``encoder``'s settings (pooling, prompt, …) differ from
    ``reference``'s."""
    for key in ENCODER_SETTINGS:
        mine, theirs = getattr(encoder, key), getattr(reference, key)
        if mine != theirs:
            raise ValueError(
                f"{location}: {key} {mine!r} differs from {reference_location}'s "
                f"{theirs!r}: a soup averages runs of one recipe"
            )


def lora_note(locations: Sequence[str], bases: Mapping[str, str]) -> str:
    """How the LoRA runs among ``locations`` were averaged, in words ("" when none)."""
    if not bases:
        return ""
    base = next(iter(bases.values()))
    return (
        f" ({len(bases)} of {len(locations)} runs LoRA adapters, averaged as merged models: "
        f"each adapter merged into {base} first)"
    )


def average_models(
    locations: Sequence[str],
    bases: Mapping[str, str],
    weights: Callable[[Any], Mapping[str, Any]] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """The first model at ``locations`` (a LoRA adapter merged into its base ``bases``
    names) and the uniform average of ``weights(encoder)`` (default: the whole state dict)
    over all of them, one model at a time into a running float32 sum; each model is checked
    against the first (settings, vocabulary, keys and shapes) before it is added."""
    from sts_core.training.averaging import RunningAverage

    weights_of = weights or (lambda encoder: encoder.state_dict())
    first = load_model(locations[0], bases.get(locations[0]))
    running = RunningAverage(weights_of(first), locations[0])
    for location in locations[1:]:
        encoder = load_model(location, bases.get(location))
        check_settings(first, locations[0], encoder, location)
        vocabulary = encoder.tokenizer.get_vocab()
        check_vocabulary(first.tokenizer.get_vocab(), locations[0], vocabulary, location)
        running.add(weights_of(encoder), location)
        del encoder
    return first, running.average()


def soup(
    locations: Sequence[str],
    output: str,
    bases: Mapping[str, str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Average the models at ``locations`` and save the result in ``output``; ``bases``:
    :func:`lora_bases` of ``locations``, checked here when not given. The output is checked
    as ``sts-soup`` checks it (:func:`soup_files`; ``overwrite``: replace a model sts-core
    saved there), before any weights load."""
    soup_files(locations, output, overwrite)
    bases = lora_bases(locations) if bases is None else bases
    first, average = average_models(locations, bases)
    first.load_state_dict(average)
    remove_earlier_results(Path(output))
    record = soup_record(locations, bases)
    first.save_pretrained(output, write_extra=lambda folder: _write_record(folder, record))
    return Path(output)


def embedding_soup(locations: Sequence[str], output: str | Path) -> Any:
    """``sts-search --soup``: the uniform soup of the embedding weights of the saved models
    at ``locations`` (:func:`~sts_core.training.averaging.embedding_weights`: the heads
    trained beside the encoder are left out), saved in ``output`` (a folder the caller
    owns and has emptied) and returned: the first model, without its heads, holding the
    average (loaded strictly: every one of its weights is averaged)."""
    from sts_core.training.averaging import embedding_weights

    bases = lora_bases(locations)
    first, average = average_models(locations, bases, embedding_weights)
    for name in list(first.heads):  # a head of the first run alone is no part of the soup
        first.remove_head(name)
    first.load_state_dict(average)
    record = {**soup_record(locations, bases), "weights": "embedding weights (heads left out)"}
    first.save_pretrained(str(output), write_extra=lambda folder: _write_record(folder, record))
    return first


def soup_record(locations: Sequence[str], bases: Mapping[str, str]) -> dict[str, Any]:
    """What ``sts_soup.json`` records of a soup: the models averaged, the merged adapters."""
    return {
        "soup": "uniform",
        "models": [_absolute(location) for location in locations],
        "merged_lora_adapters": [_absolute(location) for location in bases],
        "summary": f"averaged {len(locations)} models{lora_note(locations, bases)}",
    }


def _absolute(location: str) -> str:
    """A local folder as an absolute path, a hub id as it is."""
    path = Path(location).expanduser()
    return str(path.resolve()) if path.exists() else location


def _write_record(folder: Path, record: Mapping[str, Any]) -> None:
    write_json(folder / SOUP_RECORD_NAME, record, record=False)  # a file of the save


@on_interrupt("sts-soup")
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sts-soup``: exit 0 with the soup saved, 2 with one line on stderr."""
    args = make_parser().parse_args(argv)
    try:
        locations = check_inputs(args.models, args.output, args.overwrite)
        bases = lora_bases(locations, args.base_model)  # before any weights load
        check_tokenizers(locations)
        folder = soup(locations, args.output, bases, args.overwrite)
    except (OSError, ValueError) as error:
        return fail("sts-soup", error)
    print(f"averaged {len(locations)} models into {folder}{lora_note(locations, bases)}")
    return 0
