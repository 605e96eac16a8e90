"""Dataset references as recipes and ``sts-eval --pairs`` write them: a registry name with
an optional split (``stsb:dev``, ``stsb-zh:test``) or a file path."""

from __future__ import annotations

from datasets import Dataset

from ._io import PathLike
from .filtering import sick_to_sts
from .registry import DEFAULT_VARIANT, list_datasets, load_named, load_pairs

__all__ = ["load_reference", "registry_names", "split_reference"]


def registry_names() -> set[str]:
    """The names of the registry's datasets."""
    return {spec.name for spec in list_datasets()}


def split_reference(reference: str, default_split: str) -> tuple[str, str]:
    """``"stsb:dev"`` → ``("stsb", "dev")``; a name or path alone takes ``default_split``."""
    name, sep, split = reference.rpartition(":")
    if sep and name and name in registry_names() and split:
        return name, split
    return reference, default_split


def load_reference(
    reference: str,
    default_split: str,
    data_dir: PathLike | None = None,
    variant: str = DEFAULT_VARIANT,
    fmt: str | None = None,
    sick_to_sts_scale: bool = False,
) -> tuple[str, Dataset]:
    """Load a dataset reference: a registry name (``name[:split]``) or a path.

    Args:
        reference: ``name``, ``name:split`` or a file path.
        default_split: the split when the reference names none.
        data_dir: the data folder (default ``$STS_DATA_DIR``).
        variant: the data variant of registry datasets (``senteval`` or ``raw``).
        fmt: the format of a file given by path, when its name does not say.
        sick_to_sts_scale: rescale SICK's 1–5 scores to 0–5 (``sickr`` only).

    Returns:
        The dataset's name (the path for a file) and the dataset.
    """
    name, split = split_reference(reference, default_split)
    if name in registry_names():
        dataset = load_named(name, split, data_dir=data_dir, variant=variant)
    else:
        dataset = load_pairs(name, split, data_dir=data_dir, fmt=fmt)
    if name == "sickr" and sick_to_sts_scale:
        dataset = sick_to_sts(dataset)
    return name, dataset
