"""The ``--help`` of the training commands (``sts-train``, each ``train.py``), in groups.

``HfArgumentParser`` lists every option in one group, after a usage block as long as the
list: the recipe's main options came after ~150 lines of usage and the ~120 options of
transformers' ``TrainingArguments`` were mixed with the project's. Here the usage is one
line and the options come in groups, the most used first:

1. ``start here`` (:data:`START_HERE`: the recipe, the model, the data, the loss, the
   output folder, ``--check_only``; ``sts-train`` adds ``--method`` at the top);
2. ``model`` (the rest of ``ModelArguments``), 3. ``data`` (of ``DataArguments``);
4. the method's own options (its config class's fields that ``BaseConfig`` lacks);
5. ``training`` (the ``TrainingArguments`` options this project sets a default for or adds,
   declared in ``BaseConfig``);
6. the other options of transformers' ``TrainingArguments``.

Only the help changes: every option is parsed as before.
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING, fields, is_dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sts_core.method import Method
    from sts_core.training.config import BaseConfig

#: the options of the first group, in this order (those the parser has)
START_HERE = (
    "help",
    "config",
    "model_name_or_path",
    "train_datasets",
    "eval_dataset",
    "loss",
    "output_dir",
    "num_train_epochs",
    "learning_rate",
    "per_device_train_batch_size",
    "check_only",
)
USAGE = "%(prog)s --config RECIPE.yaml [--OPTION VALUE ...]"
METHOD_USAGE = "%(prog)s [--method NAME] --config RECIPE.yaml [--OPTION VALUE ...]"
START_TITLE = "start here"
DESCRIPTION_TAIL = "A recipe's keys are these options' names without the dashes."


def option_groups(config_class: type[BaseConfig]) -> list[tuple[str, list[str]]]:
    """(title, option names) of each group after the first, in order: model, data, the
    method's own, the project's training options, transformers' others."""
    from transformers import TrainingArguments

    from sts_core.training.config import BaseConfig, DataArguments, ModelArguments

    base = {f.name for f in fields(BaseConfig)}
    own = set(BaseConfig.__annotations__)  # declared (or given a new default) in BaseConfig
    method_name = config_class.declaring_method or config_class.__name__
    config_fields = [f.name for f in fields(config_class)]
    return [
        ("model (ModelArguments)", [f.name for f in fields(ModelArguments)]),
        ("data (DataArguments)", [f.name for f in fields(DataArguments)]),
        (
            f"{method_name}: the method's own options ({config_class.__name__})",
            [name for name in config_fields if name not in base],
        ),
        (
            "training: the options this project adds or sets a default for (BaseConfig)",
            [name for name in config_fields if name in own],
        ),
        (
            f"training: transformers' other {TrainingArguments.__name__}",
            [name for name in config_fields if name in base and name not in own],
        ),
    ]


def group_options(parser: argparse.ArgumentParser, config_class: type) -> None:
    """Put ``parser``'s options (those of ``ModelArguments``, ``DataArguments`` and
    ``config_class``, and ``--config``) into the groups of :func:`option_groups`, after
    :data:`START_HERE`; an option of none stays in a last group, ``other``."""
    sections = [(START_TITLE, list(START_HERE)), *option_groups(config_class)]
    section_of: dict[str, int] = {}
    for index, (_, names) in enumerate(sections):
        for name in names:
            section_of.setdefault(name, index)
    grouped: list[list[argparse.Action]] = [[] for _ in range(len(sections) + 1)]
    for action in parser._actions:
        grouped[section_of.get(action.dest, len(sections))].append(action)
    order = {name: position for position, name in enumerate(START_HERE)}
    grouped[0].sort(key=lambda action: order[action.dest])
    titles = [title for title, _ in sections] + ["other"]
    groups = []
    for title, actions in zip(titles, grouped, strict=True):
        if actions:
            group = argparse._ArgumentGroup(parser, title)
            group._group_actions.extend(actions)
            groups.append(group)
    parser._action_groups = groups
    parser.usage = USAGE
    parser.description = " ".join(filter(None, [parser.description, DESCRIPTION_TAIL]))


def add_method_option(parser: argparse.ArgumentParser, installed: list[str]) -> None:
    """``sts-train``'s ``--method`` at the top of the help (``sts-train`` reads it before
    the recipe's options are parsed, so it is listed, never parsed, here)."""
    action = argparse.Action(
        ["--method"],
        dest="method",
        default=argparse.SUPPRESS,  # no "(default: …)"
        metavar="NAME",
        help=f"the installed method to train ({', '.join(installed)}); without it, the "
        "core's cosine MSE",
    )
    parser._action_groups[0]._group_actions.insert(0, action)
    parser.usage = METHOD_USAGE


# ----------------------------------------------------------------- the options reference
def option_group_classes(config_class: type) -> list[type]:
    """The option groups (``GatherOptions``, ``InfoNCEOptions``, …) a method config mixes
    in: its dataclass bases that are not ``TrainingArguments``."""

    from transformers import TrainingArguments

    return [
        base
        for base in config_class.__mro__[1:]
        if is_dataclass(base) and not issubclass(base, TrainingArguments)
    ]


def format_default(value: object) -> str:
    """A field's default as the options reference writes it (``none``, ``true``, `` `x` ``)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ", ".join(f"`{item}`" for item in value) or "[]"
    return f"`{value}`"


def method_options_table(method: Method, link_prefix: str = "") -> str:
    """The options reference of one method (markdown), generated from its config class: a
    heading, the option groups it mixes in, and a row per field of its own (default and
    help; ``loss`` lists the method's losses). ``link_prefix`` goes before the README path."""

    from sts_core.training.config import BaseConfig

    config_class = method.config
    groups = option_group_classes(config_class)
    inherited = {f.name for f in fields(BaseConfig)}
    inherited |= {f.name for group in groups for f in fields(group)}
    mixed = ", ".join(f"`{group.__name__}`" for group in groups)
    readme = f" ([README]({link_prefix}{method.readme}))" if method.readme else ""
    lines = [
        f"### `{method.name}`{readme}",
        "",
        f"`{config_class.__name__}`" + (f", with {mixed} (above)" if mixed else "") + ":",
        "",
        "| option | default | what it does |",
        "| --- | --- | --- |",
    ]
    for field_ in fields(config_class):
        if field_.name in inherited:
            continue
        default = field_.default
        if default is MISSING and field_.default_factory is not MISSING:
            default = field_.default_factory()
        text = field_.metadata.get("help") or ""
        if field_.name == "loss":
            text = text or method.loss_help().removesuffix(f" (default: {method.default_loss})")
        text = " ".join(text.split()).replace("|", "\\|")
        lines.append(f"| `{field_.name}` | {format_default(default)} | {text} |")
    return "\n".join(lines)


def options_reference(methods: list[Any], link_prefix: str = "") -> str:
    """Every method's options table (:func:`method_options_table`), one after another."""
    return "\n\n".join(method_options_table(method, link_prefix) for method in methods)
