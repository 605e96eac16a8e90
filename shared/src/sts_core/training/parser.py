"""``--config recipe.yaml`` gives defaults; command-line flags override them.

An unknown YAML key is an error naming the file, the line and the key (with the closest
known names), never a silent no-op; a key given twice and unbounded aliases are refused
(:mod:`sts_core.recipe_yaml`). An error names where the value came from: the recipe's file
and line, or the command line.

Every list option (a ``list[...]`` field: ``matryoshka_dims``, ``train_datasets``, …) is
read by one rule, :func:`read_list`: a JSON list (``--matryoshka_dims '[384, 128, 64]'``)
or values apart (``--matryoshka_dims 384 128 64``; a YAML list in a recipe), each value
read as the list's element type.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import sys
import typing
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import HfArgumentParser
from transformers.hf_argparser import DataClassType, string_to_bool

from sts_core.options import is_json_list_text, json_list
from sts_core.recipe_yaml import RecipeYAMLError, load_yaml
from sts_core.training.config import BaseConfig, DataArguments, ModelArguments
from sts_core.training.help import group_options

if TYPE_CHECKING:
    from sts_core.method import Method

logger = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A recipe or a command line that cannot be used (named file, key and problem)."""


class Recipe(dict):
    """A recipe's option → value, with the file and the line of each option."""

    def __init__(self, values: Mapping[str, Any], path: Path, lines: Mapping[str, int]) -> None:
        super().__init__(values)
        self.path = path
        self.lines = dict(lines)

    def where(self, key: str) -> str:
        """``recipe.yaml:12``: where ``key`` is written (the file alone for another key)."""
        line = self.lines.get(key)
        return f"{self.path}:{line}" if line else str(self.path)


def read_recipe(path: str | os.PathLike) -> Recipe:
    """Load a YAML recipe as a flat mapping of option → value, with each option's line.

    ``$VAR`` / ``${VAR}`` in string values are expanded from the environment (e.g.
    ``model_name_or_path: ${STS_MODELS_DIR}/all-MiniLM-L6-v2``); an unset variable is an
    error naming the key. A key given twice, at any depth, and aliases repeating more
    than :data:`~sts_core.recipe_yaml.ALIAS_VALUES` values are errors naming the line.
    """
    recipe = Path(path)
    if not recipe.is_file():
        raise ConfigError(f"{recipe}: recipe file not found")
    content, lines = read_yaml_file(recipe)
    if content is None:
        return Recipe({}, recipe, {})
    if not isinstance(content, dict):
        raise ConfigError(
            f"{recipe}: a recipe is a mapping of option: value, got {type(content).__name__}"
        )
    raw = Recipe(content, recipe, lines)
    expanded = {key: _expand(value, raw.where(key), key) for key, value in raw.items()}
    return Recipe(expanded, recipe, lines)


def read_yaml_file(path: Path) -> tuple[Any, dict[str, int]]:
    """The YAML document of ``path`` as it is written (no variables expanded) and the line
    of each top-level key, through the one recipe reader; ConfigError naming the file and
    line."""
    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except RecipeYAMLError as error:
        raise ConfigError(f"{path}{error.at}: {error}") from error


# ``${STS_MODELS_DIR}/<name>`` in a recipe, with STS_MODELS_DIR unset, falls back to the
# model's hub id when the hub can be reached.
MODELS_DIR_VARIABLE = "STS_MODELS_DIR"
HUB_MODEL_IDS = {
    "all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "all-mpnet-base-v2": "sentence-transformers/all-mpnet-base-v2",
    "SmolLM2-135M-Instruct": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "roberta-base": "FacebookAI/roberta-base",
    "jina-embeddings-v2-base-en": "jinaai/jina-embeddings-v2-base-en",
    "nomic-embed-text-v1": "nomic-ai/nomic-embed-text-v1",
}
_MODELS_DIR_PATTERN = re.compile(r"^\$\{?" + MODELS_DIR_VARIABLE + r"\}?/([^/]+)/?$")


def _expand(value: Any, recipe: str, key: str) -> Any:
    """``value`` with its environment variables expanded; ``recipe``: where it is written."""
    if isinstance(value, list):
        return [_expand(item, recipe, key) for item in value]
    if isinstance(value, dict):  # train_datasets as a mapping: its paths
        return {name: _expand(item, recipe, f"{key}: {name}") for name, item in value.items()}
    if not isinstance(value, str) or "$" not in value:
        return value
    expanded = os.path.expandvars(value)
    if "$" not in expanded:
        return expanded
    fallback = _hub_fallback(value)
    if fallback is not None:
        return fallback
    unset = sorted(set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", expanded)))
    raise ConfigError(
        f"{recipe}: {key}: {value!r} needs the environment variable {', '.join(unset)}, "
        "which is not set" + _variable_hint(unset)
    )


def _hub_fallback(value: str) -> str | None:
    """The hub id of a known model under ``${STS_MODELS_DIR}/``, if the hub is reachable."""
    match = _MODELS_DIR_PATTERN.match(value)
    hub_id = HUB_MODEL_IDS.get(match.group(1)) if match else None
    if hub_id is None:
        return None
    from sts_core.data.hub import hub_reachable

    if not hub_reachable():
        return None
    logger.warning("%s is not set: using the hub model %s", MODELS_DIR_VARIABLE, hub_id)
    return hub_id


def _variable_hint(names: list[str]) -> str:
    from sts_core.encoder.location import MAKE_LOCAL_MODELS

    if MODELS_DIR_VARIABLE in names:
        return (
            f" (and the Hugging Face hub, the fallback, cannot be reached): set "
            f"{MODELS_DIR_VARIABLE} to a folder of local models ({MAKE_LOCAL_MODELS}), or "
            "pass --model_name_or_path"
        )
    return ""


def _where(values: Mapping[str, Any], key: str, source: str) -> str:
    """Where ``key`` of ``values`` is written: a recipe's file and line, else ``source``."""
    return values.where(key) if isinstance(values, Recipe) else source


def _line(values: Mapping[str, Any], key: str) -> int | None:
    return values.lines.get(key) if isinstance(values, Recipe) else None


def named_options(message: str, options: set[str]) -> list[str]:
    """The ``options`` that ``message`` names as words, in the order it names them."""
    found = {}
    for option in options:
        match = re.search(rf"\b{re.escape(option)}\b", message)
        if match:
            found[option] = match.start()
    return sorted(found, key=found.__getitem__)


#: where a value typed after a flag comes from, in messages
COMMAND_LINE = "command line"


def _coerce(kind: Any, value: Any, source: str, key: str) -> Any:
    """One recipe value converted to the argparse ``type`` of its field (scalars only)."""
    if isinstance(value, dict | list | tuple):
        return value
    given = value  # as written, for the message
    try:
        if kind is float and not isinstance(value, bool):
            return float(value)
        if kind is int and not isinstance(value, bool):
            if isinstance(value, str):
                try:
                    return int(value)
                except ValueError:
                    value = float(value)  # "1e3"
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if kind is string_to_bool:
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            return string_to_bool(value)
        if kind is str:
            if isinstance(value, bool):  # YAML 1.1 reads yes/on/true, no/off/false as booleans
                return "yes" if value else "no"  # the field's own check reads the word
            return str(value)
    except (TypeError, ValueError, AttributeError, argparse.ArgumentTypeError) as error:
        expected = getattr(kind, "__name__", "the field's type").replace("string_to_bool", "bool")
        yaml_value = not isinstance(given, str) and not source.startswith(COMMAND_LINE)
        hint = " (quote it if YAML misreads it)" if yaml_value else ""
        raise ConfigError(f"{source}: {key}: cannot read {given!r} as {expected}{hint}") from error
    if kind in (float, int) and isinstance(value, bool):
        raise ConfigError(f"{source}: {key}: expected a number, got {value!r}")
    return value


def read_list(kind: Any, value: Any, source: str, key: str) -> list[Any]:
    """A list option's value by the one rule of every list option, on the command line and
    in a recipe: a JSON list (``--matryoshka_dims '[384, 128, 64]'``, the list's text as
    the one value), values apart (``--matryoshka_dims 384 128 64``, a YAML list) or one
    value, each read as ``kind``, the list's element type (as :func:`_coerce` reads a
    recipe's scalar). A mapping (``train_datasets``' mapping form) is kept for the field's
    own check. ConfigError naming ``source``, the option ``key`` and the value."""
    if is_json_list_text(value):
        items = _json_list(value, source, key)
    else:
        items = list(value) if isinstance(value, list | tuple) else [value]
    for item in items:
        if isinstance(item, list | tuple):
            raise ConfigError(f"{source}: {key}: expected a list of values, got the list {item!r}")
    return [_list_item(kind, item, source, key) for item in items]


def _json_list(text: str, source: str, key: str) -> list[Any]:
    """``text``, a list option's one value that starts with ``[``, read as a JSON list
    (:func:`sts_core.options.json_list`; ConfigError naming ``source`` and ``key``)."""
    try:
        return json_list(text, f"{source}: {key}")
    except ValueError as error:
        raise ConfigError(str(error)) from error


def _list_item(kind: Any, item: Any, source: str, key: str) -> Any:
    """One value of a list option as its element type ``kind``: :func:`_coerce`'s types, or
    read by ``kind`` itself (an Enum, as a flag's value is)."""
    if kind in (None, float, int, str, string_to_bool) or isinstance(item, Mapping):
        return _coerce(kind, item, source, key)
    try:
        return kind(item)
    except (TypeError, ValueError) as error:
        expected = getattr(kind, "__name__", "the field's type")
        raise ConfigError(f"{source}: {key}: cannot read {item!r} as {expected}") from error


def text_or_list_fields(classes: Sequence[type]) -> set[str]:
    """The fields of ``classes`` typed as a text or a list of texts (``report_to``,
    ``optim_target_modules``: ``None | str | list[str]``), which HfArgumentParser reads as
    one text: list options too, whose one value given alone stays a text (its own meaning,
    e.g. ``optim_target_modules``' pattern)."""
    names = set()
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for field in fields(cls):
            kinds = typing.get_args(hints[field.name])
            if str in kinds and any(typing.get_origin(kind) is list for kind in kinds):
                names.add(field.name)
    return names


class _ListOptionParser(HfArgumentParser):
    """``HfArgumentParser`` whose list options (``nargs='+'`` or ``'*'``) read their values
    by :func:`read_list` (:meth:`list_value`): a JSON list or values apart, alike."""

    def __init__(self, classes: list[DataClassType], description: str | None) -> None:
        super().__init__(classes, description=description)
        self.text_or_list = text_or_list_fields(classes)
        for action in self._actions:
            if action.dest in self.text_or_list and action.nargs is None:
                action.nargs = "+"

    def list_value(self, action: argparse.Action, value: Any, source: str, key: str) -> Any:
        """The value of the list option ``action`` (a recipe's value, or the command line's
        one value or list of values): :func:`read_list`; a text option's one text alone
        (not a JSON list) stays a text."""
        values = read_list(action.type, value, source, key)
        if (
            action.dest in self.text_or_list
            and isinstance(value, str)
            and not is_json_list_text(value)
        ):
            return values[0]
        return values

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        if not action.option_strings or action.nargs not in ("+", "*"):
            return super()._get_values(action, arg_strings)
        given = arg_strings[0] if len(arg_strings) == 1 else arg_strings  # as a YAML scalar
        value = self.list_value(action, given, COMMAND_LINE, f"--{action.dest}")
        for item in value if isinstance(value, list) else [value]:
            self._check_value(action, item)
        return value


class ConfigParser:
    """Parse (ModelArguments, DataArguments, <config class>) from a YAML recipe and flags.
    ``method``: the :class:`~sts_core.method.Method` whose command this is (``--loss``'s
    help lists its losses); :meth:`for_method` builds the parser of a method's command."""

    def __init__(
        self,
        config_class: type[BaseConfig] = BaseConfig,
        description: str | None = None,
        method: Method | None = None,
    ):
        self.method = method
        self.config_class = config_class
        self.dataclass_types = (ModelArguments, DataArguments, config_class)
        # DataClassType: how transformers types a dataclass argument (a NewType, no-op)
        classes = [DataClassType(cls) for cls in self.dataclass_types]
        self.parser = _ListOptionParser(classes, description=description)
        self.parser.add_argument(
            "--config",
            default=None,
            help="YAML recipe: its keys are defaults, command-line flags override them",
        )
        self._describe_losses()
        group_options(self.parser, config_class)  # the --help in groups, the most used first
        self._initial_defaults = {id(a): a.default for a in self.parser._actions}
        self._initial_parser_defaults = dict(self.parser._defaults)
        self._last: tuple[Sequence[str] | None, Mapping[str, Any]] = ([], {})  # argv, values

    @classmethod
    def for_method(cls, method: Method) -> ConfigParser:
        """The recipe and flag parser of ``method``'s training command."""
        return cls(method.config, description=method.description or None, method=method)

    def _describe_losses(self) -> None:
        """``--loss``'s help lists the losses of the method, with their titles."""
        method = self.method
        for action in self.parser._actions:
            if action.dest == "loss" and method is not None:
                listed = method.loss_help().removesuffix(f" (default: {method.default_loss})")
                action.help = listed.replace("%", "%%")  # the help adds the default

    def _reset_defaults(self) -> None:
        """Forget the defaults an earlier ``parse`` took from its recipe."""
        self.parser._defaults.clear()
        self.parser._defaults.update(self._initial_parser_defaults)
        for action in self.parser._actions:
            if id(action) in self._initial_defaults:
                action.default = self._initial_defaults[id(action)]

    def known_keys(self) -> set[str]:
        return {f.name for cls in self.dataclass_types for f in fields(cls) if f.init}

    def check_keys(self, values: dict[str, Any], source: str) -> None:
        """ConfigError naming each key of ``values`` that is no option (with the closest
        option's name), after where the first is written (``source`` for values without
        lines) and with the line of each other."""
        known = self.known_keys()
        unknown = sorted(set(values) - known)
        if unknown:
            hints = [
                f"{key!r}"
                + (f" (line {line})" if key != unknown[0] and (line := _line(values, key)) else "")
                + (
                    f" (did you mean {close[0]!r}?)"
                    if (close := difflib.get_close_matches(key, known, 1))
                    else ""
                )
                for key in unknown
            ]
            where = _where(values, unknown[0], source)
            raise ConfigError(f"{where}: unknown key(s) {', '.join(hints)}")

    def coerce_values(self, values: dict[str, Any], source: str) -> dict[str, Any]:
        """Give recipe values their fields' types, as flags would get them.

        argparse converts only *string* defaults, so without this ``num_train_epochs: 3``
        stays an int, ``score_range: [0, 5]`` a list of ints and a scalar given for a list
        field (``train_datasets: data.csv``) a string that is later iterated by character.
        YAML 1.1 reads ``no``/``off`` as false: for a text field (``eval_strategy: no``)
        that becomes ``"no"``.
        """
        actions = {
            action.dest: action
            for action in self.parser._actions
            if f"--{action.dest}" in action.option_strings
        }
        coerced = {}
        for key, value in values.items():
            action = actions.get(key)
            if action is None or value is None:
                coerced[key] = value
            elif action.nargs in ("+", "*"):
                where = _where(values, key, source)
                coerced[key] = self.parser.list_value(action, value, where, key)
            else:
                coerced[key] = _coerce(action.type, value, _where(values, key, source), key)
        return coerced

    def parse(
        self, argv: Sequence[str] | None = None
    ) -> tuple[ModelArguments, DataArguments, BaseConfig]:
        """Return the three argument objects; raise ConfigError on an unusable recipe."""
        pre = argparse.ArgumentParser(add_help=False)
        pre.add_argument("--config", default=None)
        known, _ = pre.parse_known_args(argv)
        self._reset_defaults()
        recipe = read_recipe(known.config) if known.config else {}
        self._take_defaults(recipe, str(known.config))
        return self._parse_arguments(argv, known.config or "command line", recipe)

    def parse_values(
        self, values: Mapping[str, Any], source: str
    ) -> tuple[ModelArguments, DataArguments, BaseConfig]:
        """The three argument objects from ``values`` (option → value, as a recipe holds
        them; no command line) through every check a recipe gets: unknown keys with the
        closest known names, each field's type, each argument class's ranges and names.
        ConfigError naming ``source`` (e.g. ``--set KEY=VALUE`` of a benchmark)."""
        self._reset_defaults()
        self._take_defaults(dict(values), source)
        return self._parse_arguments([], source, values)

    def where_set(
        self, message: str, argv: Sequence[str] | None, values: Mapping[str, Any], source: str
    ) -> str:
        """Where the options ``message`` names were set, in its order: the command line
        (``command line (--learning_rate)``) or the recipe's file and line (``source`` for
        values without lines); ``source`` when it names none that was set."""
        given = self.given_flags(sys.argv[1:] if argv is None else argv)
        found: list[str] = []
        for key in named_options(message, self.known_keys()):
            if key in given:
                found.append(f"command line (--{key})")
            elif key in values:
                found.append(_where(values, key, source))
        return ", ".join(dict.fromkeys(found)) or source

    def where(self, message: str) -> str:
        """Where the last parse set the options ``message`` names (as :meth:`where_set`);
        empty when it names none that was set: for the checks after parsing."""
        argv, values = self._last
        return self.where_set(message, argv, values, "")

    def given_flags(self, argv: Sequence[str]) -> set[str]:
        """The options ``argv`` sets (abbreviated flags as argparse reads them)."""
        unset = object()
        probe = argparse.Namespace(**{action.dest: unset for action in self.parser._actions})
        self.parser.parse_known_args(list(argv), namespace=probe)
        return {dest for dest, value in vars(probe).items() if value is not unset}

    def _take_defaults(self, values: dict[str, Any], source: str) -> None:
        """``values`` (a recipe's) checked for unknown keys and types, as the defaults."""
        self.check_keys(values, source)
        self.parser.set_defaults(**self.coerce_values(values, source))

    def _parse_arguments(
        self, argv: Sequence[str] | None, source: str, values: Mapping[str, Any]
    ) -> tuple[ModelArguments, DataArguments, BaseConfig]:
        """The dataclasses from the defaults (``values``, from ``source``) and ``argv``; a
        setting refused is a ConfigError naming where it was set."""
        self._last = (argv, values)
        try:
            *parsed, remaining = self.parser.parse_args_into_dataclasses(
                args=argv, look_for_args_file=False, return_remaining_strings=True
            )
        except ConfigError:  # a list option's value (read_list): it names where already
            raise
        except (TypeError, ValueError) as error:  # a setting __post_init__ refuses
            message = " ".join(str(error).split())
            where = self.where_set(message, argv, values, source)
            raise ConfigError(f"{where}: {message}") from error
        if remaining:
            raise ConfigError(f"unknown command-line argument(s): {' '.join(remaining)}")
        model_args, data_args, config = parsed[:3]
        if not model_args.model_name_or_path:
            raise ConfigError(
                "model_name_or_path is required: set it in the recipe or pass --model_name_or_path"
            )
        return model_args, data_args, config
