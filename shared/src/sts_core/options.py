"""Option values of recipes and the command line that several modules parse."""

from __future__ import annotations


def parse_json_mapping(value: object, name: str) -> dict | None:
    """An option given as a YAML mapping or as JSON text (the command line) as a dict;
    None when unset (ValueError naming ``name`` for anything else)."""
    import json

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
