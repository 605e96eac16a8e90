"""``--config recipe.yaml`` gives defaults; command-line flags override them.

An unknown YAML key is an error naming the file and the key (with the closest known
names), never a silent no-op.
"""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml
from transformers import HfArgumentParser

from sts_core.training.config import BaseConfig, DataArguments, ModelArguments


class ConfigError(ValueError):
    """A recipe or a command line that cannot be used (named file, key and problem)."""


def read_recipe(path: str | os.PathLike) -> dict[str, Any]:
    """Load a YAML recipe as a flat mapping of option → value."""
    recipe = Path(path)
    if not recipe.is_file():
        raise ConfigError(f"{recipe}: recipe file not found")
    try:
        content = yaml.safe_load(recipe.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigError(f"{recipe}: not valid YAML: {error}") from error
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise ConfigError(
            f"{recipe}: a recipe is a mapping of option: value, got {type(content).__name__}"
        )
    return content


class ConfigParser:
    """Parse (ModelArguments, DataArguments, <config class>) from a YAML recipe and flags."""

    def __init__(self, config_class: type[BaseConfig] = BaseConfig, description: str | None = None):
        self.config_class = config_class
        self.dataclass_types = (ModelArguments, DataArguments, config_class)
        self.parser = HfArgumentParser(self.dataclass_types, description=description)
        self.parser.add_argument(
            "--config",
            default=None,
            help="YAML recipe: its keys are defaults, command-line flags override them",
        )

    def known_keys(self) -> set[str]:
        return {f.name for cls in self.dataclass_types for f in fields(cls) if f.init}

    def check_keys(self, values: dict[str, Any], source: str) -> None:
        known = self.known_keys()
        unknown = sorted(set(values) - known)
        if unknown:
            hints = [
                f"{key!r}"
                + (
                    f" (did you mean {close[0]!r}?)"
                    if (close := difflib.get_close_matches(key, known, 1))
                    else ""
                )
                for key in unknown
            ]
            raise ConfigError(f"{source}: unknown key(s) {', '.join(hints)}")

    def parse(
        self, argv: Sequence[str] | None = None
    ) -> tuple[ModelArguments, DataArguments, BaseConfig]:
        """Return the three argument objects; raise ConfigError on an unusable recipe."""
        pre = argparse.ArgumentParser(add_help=False)
        pre.add_argument("--config", default=None)
        known, _ = pre.parse_known_args(argv)
        if known.config:
            values = read_recipe(known.config)
            self.check_keys(values, str(known.config))
            self.parser.set_defaults(**values)
        model_args, data_args, config, *_ = self.parser.parse_args_into_dataclasses(
            args=argv, look_for_args_file=False
        )
        if not model_args.model_name_or_path:
            raise ConfigError(
                "model_name_or_path is required: set it in the recipe or pass --model_name_or_path"
            )
        return model_args, data_args, config
