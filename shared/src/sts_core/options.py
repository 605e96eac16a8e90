"""Option values of recipes and the command line that several modules parse, and the one
rule every numeric option is range-checked by (:func:`check_number`)."""

from __future__ import annotations

import argparse
import json
import math
import numbers
from collections.abc import Mapping
from typing import Any, cast


def parse_json_mapping(value: object, name: str) -> dict | None:
    """An option given as a YAML mapping or as JSON text (the command line) as a dict;
    None when unset (ValueError naming ``name`` for anything else)."""

    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise ValueError(f"{name} is not a JSON mapping: {error}") from error
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a mapping, got {value!r}")
    return value


def is_json_list_text(value: Any) -> bool:
    """Whether ``value`` is a text that starts with ``[``: a list option's JSON list."""
    return isinstance(value, str) and value.lstrip().startswith("[")


def json_list(text: str, where: str) -> list[Any]:
    """``text``, a list option's one value that starts with ``[``, read as a JSON list
    (ValueError naming ``where``, the source and option)."""
    try:
        parsed = json.loads(text)
    except ValueError as error:
        raise ValueError(
            f"{where}: {text!r} is not a JSON list ({error}); give a JSON list, "
            "e.g. '[384, 128]', or the values apart, e.g. 384 128"
        ) from error
    if not isinstance(parsed, list):
        raise ValueError(f"{where}: {text!r} is not a JSON list")
    return parsed


class ListOptionsParser(argparse.ArgumentParser):
    """The commands' ``argparse`` parser: a list option (``nargs`` ``+`` or ``*``) takes its
    values apart (``--pairs a.csv b.csv``) or as one JSON list (``--pairs '["a.csv",
    "b.csv"]'``), each value then read by the option's ``type`` and ``choices`` as argparse
    reads it: the rule the training commands' list options follow too
    (``sts_core.training.parser.read_list``)."""

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        listed = action.option_strings and action.nargs in ("+", "*") and len(arg_strings) == 1
        if listed and is_json_list_text(arg_strings[0]):
            try:
                items = json_list(arg_strings[0], action.option_strings[0])
            except ValueError as error:
                self.error(str(error))
            arg_strings = [item if isinstance(item, str) else json.dumps(item) for item in items]
            if not arg_strings:
                self.error(f"{action.option_strings[0]}: the JSON list is empty")
        return super()._get_values(action, arg_strings)


#: the ranges the configs check their numeric options against (keywords of check_number)
POSITIVE: dict[str, Any] = {"minimum": 0, "min_inclusive": False}
NON_NEGATIVE: dict[str, Any] = {"minimum": 0}
FINITE: dict[str, Any] = {}
PROBABILITY: dict[str, Any] = {"minimum": 0, "maximum": 1}
#: a dropout or a ratio of a whole that must leave something: [0, 1)
BELOW_ONE: dict[str, Any] = {"minimum": 0, "maximum": 1, "max_inclusive": False}
#: a factor or weight that must keep something: (0, 1]
UP_TO_ONE: dict[str, Any] = {"minimum": 0, "maximum": 1, "min_inclusive": False}
FINITE_WORDS = "a finite number"


def check_number(
    name: str,
    value: object,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    min_inclusive: bool = True,
    max_inclusive: bool = True,
) -> None:
    """ValueError unless ``value`` is a finite number within the bounds; None (an unset
    option) passes. Every numeric option of every config is checked by this one rule, so
    the message reads alike everywhere: ``learning_rate must be finite and > 0, got nan``,
    ``lora_dropout must be in [0, 1), got 1.0``."""
    if value is None:
        return
    wanted = number_range(minimum, maximum, min_inclusive, max_inclusive)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        kind = wanted if wanted == FINITE_WORDS else f"a number ({wanted})"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    value = cast(float, value)  # a Real, checked above (the message prints it as given)
    below = minimum is not None and (value < minimum or (value == minimum and not min_inclusive))
    above = maximum is not None and (value > maximum or (value == maximum and not max_inclusive))
    if not math.isfinite(value) or below or above:
        raise ValueError(f"{name} must be {wanted}, got {value}")


def check_ranges(owner: object, ranges: Mapping[str, Mapping[str, Any]]) -> None:
    """:func:`check_number` for each ``{field name: range keywords}`` of ``owner``."""
    for name, bounds in ranges.items():
        check_number(name, getattr(owner, name), **bounds)


def number_range(
    minimum: float | None = None,
    maximum: float | None = None,
    min_inclusive: bool = True,
    max_inclusive: bool = True,
) -> str:
    """The words of a range: ``in (0, 1]``, ``finite and ≥ 0``, ``a finite number``."""
    if minimum is not None and maximum is not None:
        opening, closing = "[" if min_inclusive else "(", "]" if max_inclusive else ")"
        return f"in {opening}{minimum:g}, {maximum:g}{closing}"
    if minimum is not None:
        return f"finite and {'≥' if min_inclusive else '>'} {minimum:g}"
    if maximum is not None:
        return f"finite and {'≤' if max_inclusive else '<'} {maximum:g}"
    return FINITE_WORDS
